/* One isolated decode (or verify) step on the GPU for benchmarks and calibration: a random
 * batch (block tables from the study's generator) with its FP32 reference output,
 * and the timing of a plan on it with the L2 flushed before every call. */
#ifndef PKV_KCASE_H
#define PKV_KCASE_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#include "pkvk.h"

typedef struct pkv_kcase {
    pkvk_batch b; /* device pointers */
    void *q, *o, *k, *v, *bt, *lens;
    float *k_scale, *v_scale; /* FP8 KV: each page and KV head's */
    float *ref;               /* device FP32 reference output */
    size_t q_elems;
    double v_max, o_max; /* largest |V| (made) and |reference output| (the last timing) */
} pkv_kcase;

/* lens: n rows' lengths; q_len: query tokens a row (1: a decode step; a verify step's
 * k + 1, at most each row's length); holes: fraction of the page universe left unused;
 * share: every row's first `share` tokens (whole pages, at most its own and row 0's
 * length) are row 0's pages, as a prefix cache maps them. On error err names the case. */
int pkv_kcase_make(const pkvk_ctx *c, pkv_kcase *d, const char *name, const int32_t *lens, int n,
                   int q_len, const pkvk_shape *s, double holes, int32_t share, gsl_rng *r,
                   char *err, size_t errn);
void pkv_kcase_free(pkv_kcase *d);
/* Upload the plan, warm up, then the median of `reps` calls (ms) with the L2
 * flushed before each; errors against the reference of the last call. */
int pkv_kcase_time(const pkvk_ctx *c, pkvk_workspace *ws, pkv_kcase *d, const pkvk_plan *p,
                   int reps, float *med_ms, int *launches, double *mx, double *mean);
/* Whether a timed output's errors are within its types' tolerance (pkv_tol.h). */
int pkv_kcase_ok(const pkv_kcase *d, double mx, double mean);

#endif
