#include "fit.h"

#include "routes.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_min.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

typedef struct fit_data {
    const pkv_calib *c;
    pkv_route r;
    const pkv_counters *k;
    const double *t;
    size_t n;
    int active[PKV_ROUTE_MODEL_PARAMS]; /* fitted constants, in order */
    int n_active;
    pkv_route_model base; /* the constants not fitted */
} fit_data;

static void unpack(const fit_data *d, const gsl_vector *x, pkv_route_model *m) {
    *m = d->base;
    m->set = true;
    for (int j = 0; j < d->n_active; j++) m->v[d->active[j]] = exp(gsl_vector_get(x, (size_t)j));
}

static int residuals(const gsl_vector *x, void *p, gsl_vector *f) {
    const fit_data *d = p;
    pkv_route_model m;
    unpack(d, x, &m);
    for (size_t i = 0; i < d->n; i++)
        /* The log of the ratio: unlike the relative error it does not favour predictions
         * that are too low. */
        gsl_vector_set(f, i, log(pkv_cost_route_time(d->c, d->r, &m, &d->k[i]) / d->t[i]));
    return GSL_SUCCESS;
}

/* The sum of squared relative errors from x0 after the solver's iterations. */
static double solve(fit_data *d, const double *x0, pkv_route_model *out) {
    const size_t p = (size_t)d->n_active;
    gsl_multifit_nlinear_fdf fdf = {.f = residuals, .n = d->n, .p = p, .params = d};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, d->n, p);
    gsl_vector *x = gsl_vector_alloc(p);
    double chi2 = INFINITY;
    if (w && x) {
        for (size_t j = 0; j < p; j++) gsl_vector_set(x, j, log(x0[d->active[j]]));
        int info;
        gsl_error_handler_t *old = gsl_set_error_handler_off();
        if (gsl_multifit_nlinear_init(x, &fdf, w) == GSL_SUCCESS) {
            gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-10, NULL, NULL, &info, w);
            gsl_blas_ddot(gsl_multifit_nlinear_residual(w), gsl_multifit_nlinear_residual(w),
                          &chi2);
            unpack(d, gsl_multifit_nlinear_position(w), out);
        }
        gsl_set_error_handler(old);
    }
    gsl_vector_free(x);
    if (w) gsl_multifit_nlinear_free(w);
    return isfinite(chi2) ? chi2 : INFINITY;
}

int pkv_fit_route_rate(const pkv_calib *c, pkv_route r, const pkv_route_model *from,
                       const pkv_counters *k, const double *t, size_t n, pkv_route_model *m,
                       pkv_err *e) {
    fit_data d = {.c = c, .r = r, .k = k, .t = t, .n = n, .base = *from, .n_active = 2};
    d.active[0] = PKV_RM_CTA_GBPS, d.active[1] = PKV_RM_CTA_US;
    d.base.v[PKV_RM_HOST_US] = d.base.v[PKV_RM_HOST_US_PER_KTOKEN] = 0;
    if (n < 8) return pkv_fail(e, "%s: %zu steps, too few to fit its CTAs", pkv_route_name(r), n);
    /* starts: decode's CTA, a slower and a faster one, each at decode's cost a wave */
    const double cta = from->v[PKV_RM_CTA_GBPS] > 0 ? from->v[PKV_RM_CTA_GBPS] : 1;
    const double scale[3] = {1, 1.0 / 3, 3};
    double best = INFINITY;
    for (int s = 0; s < 3; s++) {
        double x0[PKV_ROUTE_MODEL_PARAMS] = {0};
        x0[PKV_RM_CTA_GBPS] = cta * scale[s];
        x0[PKV_RM_CTA_US] = from->v[PKV_RM_CTA_US] > 0 ? from->v[PKV_RM_CTA_US] : 1;
        pkv_route_model got;
        const double chi2 = solve(&d, x0, &got);
        if (chi2 < best) best = chi2, *m = got;
    }
    if (!isfinite(best))
        return pkv_fail(e, "%s: the fit of its CTAs did not converge", pkv_route_name(r));
    /* as pkv_fit_route writes a constant driven past what a file holds: the CTA's rate at
     * the bound (its bytes' term vanishing), its fixed cost left out */
    if (!(m->v[PKV_RM_CTA_GBPS] <= PKV_ROUTE_MODEL_MAX))
        m->v[PKV_RM_CTA_GBPS] = PKV_ROUTE_MODEL_MAX;
    if (!(m->v[PKV_RM_CTA_US] <= PKV_ROUTE_MODEL_MAX)) m->v[PKV_RM_CTA_US] = 0;
    return 0;
}

int pkv_fit_route(const pkv_calib *c, pkv_route r, const pkv_counters *k, const double *t, size_t n,
                  pkv_route_model *m, pkv_err *e) {
    fit_data d = {.c = c, .r = r, .k = k, .t = t, .n = n};
    int merges = 0, waves = 0;
    for (size_t i = 0; i < n; i++) {
        merges |= k[i].merge_bytes > 0;
        waves |= (double)k[i].ctas > pkv_cost_wave(c, r, &k[i]);
    }
    for (int j = 0; j < PKV_RM_HOST_US; j++) /* the host's share is not a device time */
        if ((j != PKV_RM_MERGE_GBPS || merges) && (j != PKV_RM_CTA_US || waves))
            d.active[d.n_active++] = j;
    if (n < (size_t)d.n_active * 4)
        return pkv_fail(e, "%s: %zu steps, too few to fit %d constants", pkv_route_name(r), n,
                        d.n_active);
    /* Starts: the study's formula read as the structured one (one CTA's share of the
     * bandwidth at C_min CTAs per SM), then a slower and a faster CTA. */
    const double share = c->beta / (c->c_min * c->sm_count) / 1e9;
    const double gbps[3] = {share, share / 3, share * 3};
    double best = INFINITY;
    for (int s = 0; s < 3; s++) {
        double x0[PKV_ROUTE_MODEL_PARAMS] = {
            gbps[s], 1.0, c->lambda * 1e6, 2.0, c->beta / 1e9, c->beta / 1e9, 0};
        pkv_route_model got;
        double chi2 = solve(&d, x0, &got);
        if (chi2 < best) best = chi2, *m = got;
    }
    if (!isfinite(best)) return pkv_fail(e, "%s: the fit did not converge", pkv_route_name(r));
    /* A constant driven past what a calibration file holds makes its term vanish
     * (a merge too fast to matter) or saturate: written as 0 (the term left out) or
     * the bound, so that the file reads back. */
    for (int j = 0; j < PKV_ROUTE_MODEL_PARAMS; j++)
        if (!(m->v[j] <= PKV_ROUTE_MODEL_MAX))
            m->v[j] = j == PKV_RM_MERGE_GBPS || j == PKV_RM_CTA_US ? 0 : PKV_ROUTE_MODEL_MAX;
    return 0;
}

void pkv_fit_error(const pkv_calib *c, pkv_route r, const pkv_route_model *m, const pkv_counters *k,
                   const double *t, size_t n, double *mape, double *sum_err) {
    double a = 0, sp = 0, sm = 0;
    for (size_t i = 0; i < n; i++) {
        double p = pkv_cost_route_time(c, r, m, &k[i]);
        a += fabs(p / t[i] - 1);
        sp += p, sm += t[i];
    }
    *mape = n ? a / n : NAN;
    *sum_err = sm > 0 ? sp / sm - 1 : NAN;
}

void pkv_fit_gate_margins(const pkv_calib *c, uint32_t routes, pkv_counters *const *k,
                          double *const *t, const size_t *n, double *margin, double *base_bias,
                          double *split_bias) {
    for (int ql = 1; ql <= PKV_GATE_QLENS; ql++) {
        double pkv = INFINITY, base = -INFINITY; /* the split routes' least, the baselines' most */
        for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
            const pkv_route_role role = pkv_route_role_of((pkv_route)r);
            if (!(routes >> r & 1) || (role != PKV_ROLE_SPLIT && role != PKV_ROLE_BASELINE))
                continue;
            double sp = 0, sm = 0;
            for (size_t i = 0; i < n[r]; i++)
                if (pkv_fit_step_of_q(&k[r][i], ql))
                    sp += pkv_cost_route_time(c, (pkv_route)r, NULL, &k[r][i]), sm += t[r][i];
            if (!(sm > 0)) continue;
            const double bias = sp / sm - 1;
            if (role == PKV_ROLE_SPLIT && bias < pkv) pkv = bias;
            if (role == PKV_ROLE_BASELINE && bias > base) base = bias;
        }
        const double m = 1 + base - pkv;
        margin[ql - 1] = isfinite(m) ? (m < 1 ? 1 : m > 2 ? 2 : m) : NAN;
        if (base_bias) base_bias[ql - 1] = base;
        if (split_bias) split_bias[ql - 1] = pkv;
    }
}

int pkv_fit_nonneg(const double *const *x, int k, const double *y, const double *w, size_t n,
                   double *coef) {
    if (k < 1 || k > PKV_FIT_MAX_TERMS) return -1;
    for (int j = 0; j < k; j++) coef[j] = 0;
    double best = INFINITY;
    /* Every subset of the terms, fitted unconstrained: the feasible one (no coefficient
     * negative) of least weighted squared error is the constrained optimum. */
    for (unsigned set = 1; set < 1u << k; set++) {
        int m = 0, cols[PKV_FIT_MAX_TERMS];
        for (int j = 0; j < k; j++)
            if (set >> j & 1) cols[m++] = j;
        if ((size_t)m > n) continue;
        gsl_matrix *X = gsl_matrix_alloc(n, (size_t)m), *cov = gsl_matrix_alloc(m, m);
        gsl_vector *c = gsl_vector_alloc(m);
        gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(n, m);
        if (!X || !cov || !c || !ws) {
            gsl_matrix_free(X), gsl_matrix_free(cov), gsl_vector_free(c);
            gsl_multifit_linear_free(ws);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            for (int a = 0; a < m; a++) gsl_matrix_set(X, i, a, x[cols[a]] ? x[cols[a]][i] : 1);
        gsl_vector_const_view yv = gsl_vector_const_view_array(y, n);
        gsl_vector_const_view wv = gsl_vector_const_view_array(w ? w : y, n);
        double chi2 = INFINITY;
        int rc = w ? gsl_multifit_wlinear(X, &wv.vector, &yv.vector, c, cov, &chi2, ws)
                   : gsl_multifit_linear(X, &yv.vector, c, cov, &chi2, ws);
        int ok = rc == GSL_SUCCESS && chi2 < best;
        for (int a = 0; a < m && ok; a++) ok = gsl_vector_get(c, a) >= 0;
        if (ok) {
            best = chi2;
            for (int j = 0; j < k; j++) coef[j] = 0;
            for (int a = 0; a < m; a++) coef[cols[a]] = gsl_vector_get(c, a);
        }
        gsl_matrix_free(X), gsl_matrix_free(cov), gsl_vector_free(c);
        gsl_multifit_linear_free(ws);
    }
    return 0;
}

/* The host's share: fit.h. */
int pkv_fit_host(const double *host, const double *ktok, size_t n, pkv_route_model *m) {
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    double *h = malloc((n ? n : 1) * sizeof *h);
    if (!idx || !h) {
        free(idx), free(h);
        return -1;
    }
    gsl_sort_index(idx, ktok, 1, n);
    size_t f = 0; /* finite host times, by context */
    for (size_t i = 0; i < n; i++)
        if (isfinite(host[idx[i]])) idx[f++] = idx[i];
    double bx[PKV_FIT_HOST_BINS], by[PKV_FIT_HOST_BINS], bw[PKV_FIT_HOST_BINS];
    int nb = 0;
    for (int b = 0; b < PKV_FIT_HOST_BINS && f; b++) {
        size_t lo = f * (size_t)b / PKV_FIT_HOST_BINS, hi = f * (size_t)(b + 1) / PKV_FIT_HOST_BINS;
        if (hi <= lo) continue;
        for (size_t i = lo; i < hi; i++) h[i - lo] = host[idx[i]];
        gsl_sort(h, 1, hi - lo);
        by[nb] = gsl_stats_median_from_sorted_data(h, 1, hi - lo);
        bx[nb] = ktok[idx[(lo + hi) / 2]];
        bw[nb++] = (double)(hi - lo);
    }
    free(idx), free(h);
    double c[2] = {0, 0};
    const double *x[2] = {NULL, bx};
    if (nb && pkv_fit_nonneg(x, 2, by, bw, (size_t)nb, c)) return -1;
    m->v[PKV_RM_HOST_US] = c[0] > 0 ? c[0] * 1e6 : 0;
    m->v[PKV_RM_HOST_US_PER_KTOKEN] = c[1] > 0 ? c[1] * 1e6 : 0;
    return 0;
}

typedef struct cap_data {
    const pkv_calib *c;
    pkv_counters *const *k;
    const double *const *t;
    const size_t *n;
} cap_data;

/* Over the PersistentKV routes' steps with the cap at bps: the summed squared log ratio
 * of predicted over measured (log_sq), or the relative error of the summed prediction. */
static double cap_fit(const cap_data *d, double bps, bool log_sq) {
    double sum = 0, pred = 0, meas = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
        if (!pkv_route_has((pkv_route)r, PKV_RP_FP8_CAP)) continue;
        for (size_t i = 0; i < d->n[r]; i++) {
            pkv_counters k = d->k[r][i];
            k.cta_bps_max = bps;
            const double p = pkv_cost_route_time(d->c, (pkv_route)r, NULL, &k),
                         l = log(p / d->t[r][i]);
            sum += l * l, pred += p, meas += d->t[r][i];
        }
    }
    return log_sq ? sum : pred / meas - 1;
}

static double cap_error(double x, void *p) {
    return cap_fit(p, exp(x) * 1e9, true);
}

/* Brent's minimizer on cap_error from best (below both ends a, b): the cap's log (the
 * grid's best where GSL cannot allocate its minimizer). */
static double refine(cap_data *d, double best, double a, double b) {
    gsl_function f = {cap_error, d};
    gsl_min_fminimizer *m = gsl_min_fminimizer_alloc(gsl_min_fminimizer_brent);
    if (!m) return best;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    if (gsl_min_fminimizer_set(m, &f, best, a, b) == GSL_SUCCESS)
        for (int it = 0; it < 100; it++) {
            if (gsl_min_fminimizer_iterate(m) != GSL_SUCCESS) break;
            if (gsl_min_test_interval(gsl_min_fminimizer_x_lower(m), gsl_min_fminimizer_x_upper(m),
                                      1e-6, 0) == GSL_SUCCESS)
                break;
        }
    best = gsl_min_fminimizer_x_minimum(m);
    gsl_set_error_handler(old);
    gsl_min_fminimizer_free(m);
    return best;
}

int pkv_fit_fp8_cap(const pkv_calib *c, pkv_counters *const *k, const double *const *t,
                    const size_t *n, double *bps, double sum_err[2], pkv_err *e) {
    size_t steps = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if (pkv_route_has((pkv_route)r, PKV_RP_FP8_CAP)) steps += n[r];
    if (steps == 0) return pkv_fail(e, "no step over FP8 KV on a PersistentKV route");
    cap_data d = {c, k, t, n};
    /* Brent needs an interior point below both ends: the best of a coarse grid. */
    const double lo = log(1.0), hi = log(1e4);
    double best = lo, fbest = INFINITY;
    for (int i = 0; i <= 64; i++) {
        const double x = lo + (hi - lo) * i / 64, fx = cap_error(x, &d);
        if (fx < fbest) best = x, fbest = fx;
    }
    const double step = (hi - lo) / 64, a = fmax(lo, best - step), b = fmin(hi, best + step);
    if (cap_error(a, &d) > fbest && cap_error(b, &d) > fbest) /* else at an end, or flat */
        best = refine(&d, best, a, b);
    *bps = exp(best) * 1e9;
    if (sum_err)
        sum_err[0] = cap_fit(&d, c->kv_fp8_cta_gbps, false), sum_err[1] = cap_fit(&d, *bps, false);
    return 0;
}
