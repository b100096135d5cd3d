#include "lengths.h"

#include <math.h>
#include <gsl/gsl_randist.h>

const char *const pkv_length_names[] = {"fixed", "uniform", "cycle", "bimodal", "lognormal", NULL};

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
    }
    return 1;
}

int64_t pkv_length_max(const pkv_length_spec *s) {
    switch (s->kind) {
    case PKV_LENGTH_FIXED:
        return s->value;
    case PKV_LENGTH_UNIFORM:
        return s->max;
    case PKV_LENGTH_CYCLE: {
        int64_t m = 0;
        for (int i = 0; i < s->n_values; i++)
            if (s->values[i] > m) m = s->values[i];
        return m;
    }
    case PKV_LENGTH_BIMODAL:
        return s->long_len > s->short_len ? s->long_len : s->short_len;
    default:
        return -1;
    }
}
