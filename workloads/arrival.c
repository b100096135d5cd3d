#include "arrival.h"

#include <math.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_roots.h>
#include <gsl/gsl_sf_gamma.h>

const char *const pkv_arrival_names[] = {"poisson",       "gamma",  "weibull",
                                         "deterministic", "closed", NULL};

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
