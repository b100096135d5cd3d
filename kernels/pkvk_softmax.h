/* Internal to kernels/: the online-softmax state's rules, in one place for the CUDA
 * kernels (the split kernel, the merge kernel, the fused route's last-CTA merge) and
 * the CPU mirror alike.
 *
 * Scores are in the log2 domain (q.k * sm_scale * log2 e), so every exponential is
 * exp2. A state over a token range is (m, l, acc[d]): m the largest score, l the sum
 * of exp2(s - m), acc the sum of exp2(s - m) v. The neutral state (an empty range) is
 * m = -inf, l = 0, acc = 0. Output O = acc / l.
 *
 *   fold a tile into a state:   m' = max(m, max_t s_t); l, acc scaled by exp2(m - m')
 *   merge states s into one:    M = max_s m_s; w_s = exp2(m_s - M);
 *                               L = sum w_s l_s; acc = sum w_s acc_s
 *
 * Edge cases: exp2(-inf - x) is 0 for finite x, so a neutral state contributes
 * nothing; while the running max is still -inf (no token seen) nothing is scaled,
 * since exp2(-inf - -inf) would be NaN. */
#ifndef PKVK_SOFTMAX_H
#define PKVK_SOFTMAX_H

#include <math.h>

#ifdef __CUDACC__
#define PKVK_SM_FN __host__ __device__ __forceinline__
#else
#define PKVK_SM_FN static inline
#endif

/* log2 e: a natural-log score times this is a log2-domain score. */
#define PKVK_LOG2E 1.4426950408889634f

/* Fold a tile whose largest score is tile_max into the running max *m: returns the
 * factor by which the state's l and acc are scaled (1 while no token was seen). The
 * tile's weights are then exp2(s - *m) (0 for all while *m is still -inf). */
PKVK_SM_FN float pkvk_sm_fold(float *m, float tile_max) {
    float m_new = fmaxf(*m, tile_max);
    float c = m_new == -INFINITY ? 1.f : exp2f(*m - m_new);
    *m = m_new;
    return c;
}

/* A score's (or a state's) weight under the max M: exp2(x - M), 0 for -inf. */
PKVK_SM_FN float pkvk_sm_weight(float x, float M) {
    return x == -INFINITY ? 0.f : exp2f(x - M);
}

#endif
