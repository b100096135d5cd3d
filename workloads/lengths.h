/* Length distributions for prompt and decode lengths (tokens). */
#ifndef PKV_LENGTHS_H
#define PKV_LENGTHS_H

#include <stdint.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

typedef enum pkv_length_kind {
    PKV_LENGTH_FIXED = 0, /* value */
    PKV_LENGTH_UNIFORM,   /* integer uniform on [min, max] */
    PKV_LENGTH_CYCLE,     /* values[0], values[1], ... in order, repeating (bucketed traces) */
    PKV_LENGTH_BIMODAL,   /* long with probability p_long, else short */
    PKV_LENGTH_LOGNORMAL, /* round(lognormal(median, sigma)), at least 1 */
    PKV_LENGTH_ZIPF,      /* P(v) proportional to v^-s for integers v in [min, max] */
    PKV_LENGTH_EMPIRICAL, /* uniform draws (with replacement) from a list of lengths */
} pkv_length_kind;

extern const char *const pkv_length_names[]; /* indexed by kind, NULL-ended */

enum { PKV_LENGTH_MAX_VALUES = 64 };

typedef struct pkv_length_spec {
    pkv_length_kind kind;
    int64_t value, min, max;               /* fixed; uniform */
    int64_t values[PKV_LENGTH_MAX_VALUES]; /* cycle */
    int n_values;
    int64_t short_len, long_len; /* bimodal */
    double p_long;
    double median, sigma;     /* lognormal */
    double s;                 /* zipf exponent (min, max as for uniform) */
    gsl_ran_discrete_t *zipf; /* zipf: alias table over [min, max] (pkv_length_prepare) */
    int32_t *values_emp;      /* empirical: the lengths (owned) */
    char trace_path[1024];    /* empirical: the trace they come from */
    size_t n_emp;
} pkv_length_spec;

/* Build the zipf table; returns -1 on failure. Other kinds need nothing. */
int pkv_length_prepare(pkv_length_spec *s);
/* Free what prepare or a trace allocated. */
void pkv_length_free(pkv_length_spec *s);

/* Draw one length; `counter` is the draw's index (used by cycle). */
int64_t pkv_length_draw(const pkv_length_spec *s, gsl_rng *r, int64_t counter);
/* Largest value the distribution can produce (lognormal: unbounded, returns -1). */
int64_t pkv_length_max(const pkv_length_spec *s);

#endif
