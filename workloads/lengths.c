#include "lengths.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_statistics_int.h>
#include <gsl/gsl_statistics_long.h>

const char *const pkv_length_names[] = {"fixed",     "uniform", "cycle",     "bimodal",
                                        "lognormal", "zipf",    "empirical", NULL};

int pkv_length_prepare(pkv_length_spec *s) {
    if (s->kind != PKV_LENGTH_ZIPF || s->zipf) return 0;
    size_t n = (size_t)(s->max - s->min + 1);
    double *w = malloc(sizeof(double) * n);
    if (!w) return -1;
    for (size_t i = 0; i < n; i++) w[i] = pow((double)(s->min + (int64_t)i), -s->s);
    s->zipf = gsl_ran_discrete_preproc(n, w); /* Walker's alias method */
    free(w);
    return s->zipf ? 0 : -1;
}

void pkv_length_free(pkv_length_spec *s) {
    if (s->zipf) gsl_ran_discrete_free(s->zipf);
    free(s->values_emp);
    s->zipf = NULL;
    s->values_emp = NULL;
    s->n_emp = 0;
}

int64_t pkv_length_draw(const pkv_length_spec *s, gsl_rng *r, int64_t counter) {
    switch (s->kind) {
    case PKV_LENGTH_FIXED:
        return s->value;
    case PKV_LENGTH_UNIFORM:
        return s->min + (int64_t)gsl_rng_uniform_int(r, (unsigned long)(s->max - s->min + 1));
    case PKV_LENGTH_CYCLE:
        return s->values[counter % s->n_values];
    case PKV_LENGTH_BIMODAL:
        return gsl_ran_bernoulli(r, s->p_long) ? s->long_len : s->short_len;
    case PKV_LENGTH_LOGNORMAL: {
        double x = round(gsl_ran_lognormal(r, log(s->median), s->sigma));
        return x < 1 ? 1 : x > 1e9 ? 1000000000 : (int64_t)x;
    }
    case PKV_LENGTH_ZIPF:
        return s->min + (int64_t)gsl_ran_discrete(r, s->zipf);
    case PKV_LENGTH_EMPIRICAL:
        return s->values_emp[gsl_rng_uniform_int(r, (unsigned long)s->n_emp)];
    }
    return 1;
}

_Static_assert(_Generic((int64_t)0, long : 1, default : 0), "a cycle's lengths read as longs");

int64_t pkv_length_max(const pkv_length_spec *s) {
    switch (s->kind) {
    case PKV_LENGTH_FIXED:
        return s->value;
    case PKV_LENGTH_UNIFORM:
        return s->max;
    case PKV_LENGTH_CYCLE:
        return gsl_stats_long_max((const long *)s->values, 1, (size_t)s->n_values);
    case PKV_LENGTH_BIMODAL:
        return s->long_len > s->short_len ? s->long_len : s->short_len;
    case PKV_LENGTH_ZIPF:
        return s->max;
    case PKV_LENGTH_EMPIRICAL:
        return gsl_stats_int_max(s->values_emp, 1, s->n_emp);
    default:
        return -1;
    }
}
