/* Tensor contents shared by the cpu and cuda backends, so that both compute on the
 * same numbers: the KV pool is tiled from two blocks of Gaussian halves (K, V), and
 * the new token of row i at a step comes from prepared row (first + i) % SRC_ROWS of
 * src_k / src_v ([rows][hkv][d]) and its query from src_q ([rows][hq][d]). All drawn
 * from the experiment's tensor stream (GSL), in this order, and stored in the shape's
 * types: Q in its dtype, K and V in its KV type where that is 16-bit (FP16 for an FP8
 * pool, which the backend quantizes). */
#ifndef PKV_TENSORS_H
#define PKV_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "pkvk.h"

enum { PKV_TENSOR_BLOCK = 1 << 22, PKV_TENSOR_SRC_ROWS = 4096 };

typedef struct pkv_tensors {
    uint16_t *blk_k, *blk_v;         /* [PKV_TENSOR_BLOCK] pool tiles */
    uint16_t *src_k, *src_v, *src_q; /* prepared token rows */
    size_t src_kv, src_q_n;          /* halves in src_k (= src_v), src_q */
    double v_max; /* the largest |V| a pool made from them holds (FP8: after its rounding) */
} pkv_tensors;

int pkv_tensors_make(pkv_tensors *t, const pkvk_shape *s, uint64_t seed);
/* The type of the K and V tensors of shape s. */
static inline int pkv_tensors_kv_type(const pkvk_shape *s) {
    return s->kv_dtype == PKVK_FP8_E4M3 ? PKVK_FP16 : s->kv_dtype;
}
void pkv_tensors_free(pkv_tensors *t);
/* FP8 KV: the scales of n (page, KV head) pairs' K and V, [page x hkv + head]. The
 * tensors are N(0, 1): 4.5 to 6.5 standard deviations reach E4M3's 448 (a rarer value
 * saturates), varied by page and head (and between K and V) so that a scale read at the
 * wrong index shows in the check. Both backends' FP8 pools and bench kernels' cases use
 * these. */
static inline void pkv_tensors_fp8_scales(float *k, float *v, size_t n) {
    for (size_t j = 0; j < n; j++)
        k[j] = (4.5f + 0.5f * (float)(j % 5)) / 448.f,
        v[j] = (4.5f + 0.5f * (float)((j + 2) % 5)) / 448.f;
}

#endif
