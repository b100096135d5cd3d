#include "arrival.h"

#include <math.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_roots.h>
#include <gsl/gsl_sf_gamma.h>

const char *const pkv_arrival_names[] = {"poisson", "gamma", "weibull",   "deterministic",
                                         "closed",  "mmpp",  "piecewise", NULL};

/* Weibull with shape k has CV^2 = Gamma(1+2/k)/Gamma(1+1/k)^2 - 1, decreasing in k. */
static double weibull_cv_gap(double k, void *cv) {
    double g1 = gsl_sf_lngamma(1 + 1 / k), g2 = gsl_sf_lngamma(1 + 2 / k);
    return sqrt(exp(g2 - 2 * g1) - 1) - *(double *)cv;
}

static int weibull_shape(double cv, double *k) {
    gsl_function f = {weibull_cv_gap, &cv};
    double lo = 0.05, hi = 100.0;
    if (weibull_cv_gap(lo, &cv) < 0 || weibull_cv_gap(hi, &cv) > 0) return -1;
    gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    if (!s) return -1;
    gsl_root_fsolver_set(s, &f, lo, hi);
    int status = GSL_CONTINUE;
    for (int it = 0; it < 200 && status == GSL_CONTINUE; it++) {
        gsl_root_fsolver_iterate(s);
        status = gsl_root_test_interval(gsl_root_fsolver_x_lower(s), gsl_root_fsolver_x_upper(s), 0,
                                        1e-12);
    }
    *k = gsl_root_fsolver_root(s);
    gsl_root_fsolver_free(s);
    return status == GSL_SUCCESS ? 0 : -1;
}

int pkv_arrival_prepare(pkv_arrival_spec *a) {
    double mean = a->rate > 0 ? 1.0 / a->rate : 0;
    switch (a->kind) {
    case PKV_ARRIVAL_GAMMA:
        a->shape = 1.0 / (a->cv * a->cv);
        a->scale = mean / a->shape;
        return 0;
    case PKV_ARRIVAL_WEIBULL:
        if (weibull_shape(a->cv, &a->shape)) return -1;
        a->scale = mean / exp(gsl_sf_lngamma(1 + 1 / a->shape));
        return 0;
    case PKV_ARRIVAL_PIECEWISE:
        a->rate_max = 0;
        for (int i = 0; i < a->n_points; i++)
            if (a->rates[i] > a->rate_max) a->rate_max = a->rates[i];
        return a->n_points > 0 && a->rate_max > 0 ? 0 : -1;
    case PKV_ARRIVAL_MMPP:
        return a->rate_on > 0 || a->rate_off > 0 ? 0 : -1;
    default:
        return 0;
    }
}

double pkv_arrival_gap(const pkv_arrival_spec *a, gsl_rng *r) {
    switch (a->kind) {
    case PKV_ARRIVAL_POISSON:
        return gsl_ran_exponential(r, 1.0 / a->rate);
    case PKV_ARRIVAL_GAMMA:
        return gsl_ran_gamma(r, a->shape, a->scale);
    case PKV_ARRIVAL_WEIBULL:
        return gsl_ran_weibull(r, a->scale, a->shape);
    case PKV_ARRIVAL_DETERMINISTIC:
        return 1.0 / a->rate;
    default:
        return 0;
    }
}

double pkv_arrival_rate_at(const pkv_arrival_spec *a, double t) {
    if (a->period_s > 0) t = fmod(t, a->period_s);
    if (t <= a->t_s[0]) return a->rates[0];
    for (int i = 1; i < a->n_points; i++)
        if (t < a->t_s[i]) {
            double f = (t - a->t_s[i - 1]) / (a->t_s[i] - a->t_s[i - 1]);
            return a->rates[i - 1] + f * (a->rates[i] - a->rates[i - 1]);
        }
    return a->rates[a->n_points - 1];
}

/* Integral of the rate over [0, t] for t within one period (trapezoids). */
static double cumulative_once(const pkv_arrival_spec *a, double t) {
    double sum = a->rates[0] * fmin(t, a->t_s[0]);
    for (int i = 1; i < a->n_points && t > a->t_s[i - 1]; i++) {
        double hi = fmin(t, a->t_s[i]);
        sum += 0.5 * (a->rates[i - 1] + pkv_arrival_rate_at(a, hi)) * (hi - a->t_s[i - 1]);
    }
    if (t > a->t_s[a->n_points - 1])
        sum += a->rates[a->n_points - 1] * (t - a->t_s[a->n_points - 1]);
    return sum;
}

double pkv_arrival_cumulative(const pkv_arrival_spec *a, double t) {
    if (a->period_s <= 0) return cumulative_once(a, t);
    double periods = floor(t / a->period_s);
    return periods * cumulative_once(a, a->period_s) +
           cumulative_once(a, t - periods * a->period_s);
}

/* Whether a search at t, after n draws, gives up (see pkv_arrival_limits): with t past
 * the end (a time no earlier than the arrival's), or INFINITY once stopped. */
static int give_up(const pkv_arrival_limits *lim, double t, uint64_t n, double *out) {
    if (!lim) return 0;
    if (t > lim->t_end) return *out = t, 1;
    if ((n & 0xfffff) == 0 && lim->stop && *lim->stop) return *out = INFINITY, 1;
    return 0;
}

enum { VANISHED_MAX = 1000 }; /* draws in a row that cannot move the clock: no progress */

double pkv_arrival_next(const pkv_arrival_spec *a, pkv_arrival_state *st, double t, gsl_rng *r,
                        const pkv_arrival_limits *lim) {
    switch (a->kind) {
    case PKV_ARRIVAL_MMPP: {
        if (st->t_switch < 0) { /* start in the stationary state distribution */
            st->on = gsl_rng_uniform(r) < a->mean_on_s / (a->mean_on_s + a->mean_off_s);
            st->t_switch = t + gsl_ran_exponential(r, st->on ? a->mean_on_s : a->mean_off_s);
        }
        /* Both clocks are memoryless: redraw the gap after each switch. A state with
         * arrivals whose periods vanish against t (t + period == t) a thousand times in
         * a row can hold none. */
        double end;
        for (uint64_t n = 1, vanished = 0;; n++) {
            if (give_up(lim, t, n, &end)) return end;
            double rate = st->on ? a->rate_on : a->rate_off;
            double gap = rate > 0 ? gsl_ran_exponential(r, 1.0 / rate) : INFINITY;
            if (t + gap < st->t_switch) return t + gap;
            t = st->t_switch;
            st->on = !st->on;
            st->t_switch = t + gsl_ran_exponential(r, st->on ? a->mean_on_s : a->mean_off_s);
            if ((st->on ? a->rate_on : a->rate_off) > 0)
                vanished = st->t_switch == t ? vanished + 1 : 0;
            if (vanished >= VANISHED_MAX) return st->t_stuck = t, NAN;
        }
    }
    case PKV_ARRIVAL_PIECEWISE: /* thinning (Lewis and Shedler) under rate_max */
        for (uint64_t n = 1, vanished = 0;; n++) {
            double end;
            /* Past the last point of a rate that ends at 0 for ever: no more arrivals. */
            if (a->period_s <= 0 && t >= a->t_s[a->n_points - 1] && a->rates[a->n_points - 1] <= 0)
                return INFINITY;
            if (give_up(lim, t, n, &end)) return end;
            const double next = t + gsl_ran_exponential(r, 1.0 / a->rate_max);
            vanished = next == t ? vanished + 1 : 0;
            if (vanished >= VANISHED_MAX) return st->t_stuck = t, NAN;
            t = next;
            if (gsl_rng_uniform(r) * a->rate_max <= pkv_arrival_rate_at(a, t)) return t;
        }
    default:
        return t + pkv_arrival_gap(a, r);
    }
}
