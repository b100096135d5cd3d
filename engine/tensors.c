#include "tensors.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>

static void gaussian(uint16_t *x, size_t n, int type, gsl_rng *r) {
    for (size_t j = 0; j < n; j++) pkvk_store(type, x, j, (float)gsl_ran_gaussian_ziggurat(r, 1.0));
}

int pkv_tensors_make(pkv_tensors *t, const pkvk_shape *s, uint64_t seed) {
    *t = (pkv_tensors){0};
    t->src_kv = (size_t)PKV_TENSOR_SRC_ROWS * s->hkv * s->d;
    t->src_q_n = (size_t)PKV_TENSOR_SRC_ROWS * s->hq * s->d;
    t->blk_k = malloc((size_t)PKV_TENSOR_BLOCK * 2);
    t->blk_v = malloc((size_t)PKV_TENSOR_BLOCK * 2);
    t->src_k = malloc(t->src_kv * 2);
    t->src_v = malloc(t->src_kv * 2);
    t->src_q = malloc(t->src_q_n * 2);
    gsl_rng *r = pkv_stream_create(seed, PKV_STREAM_TENSORS);
    if (!t->blk_k || !t->blk_v || !t->src_k || !t->src_v || !t->src_q || !r) {
        if (r) gsl_rng_free(r);
        pkv_tensors_free(t);
        return -1;
    }
    const int kv = pkv_tensors_kv_type(s);
    gaussian(t->blk_k, PKV_TENSOR_BLOCK, kv, r);
    gaussian(t->blk_v, PKV_TENSOR_BLOCK, kv, r);
    gaussian(t->src_k, t->src_kv, kv, r);
    gaussian(t->src_v, t->src_kv, kv, r);
    gaussian(t->src_q, t->src_q_n, s->dtype, r);
    gsl_rng_free(r);
    for (size_t j = 0; j < PKV_TENSOR_BLOCK; j++)
        t->v_max = fmax(t->v_max, fabs(pkvk_elem(kv, t->blk_v, j)));
    for (size_t j = 0; j < t->src_kv; j++)
        t->v_max = fmax(t->v_max, fabs(pkvk_elem(kv, t->src_v, j)));
    /* an FP8 code rounds a value by at most half its unit: 2^-4 of it */
    if (s->kv_dtype == PKVK_FP8_E4M3) t->v_max *= 1 + 0x1p-4;
    return 0;
}

void pkv_tensors_free(pkv_tensors *t) {
    free(t->blk_k), free(t->blk_v), free(t->src_k), free(t->src_v), free(t->src_q);
    *t = (pkv_tensors){0};
}
