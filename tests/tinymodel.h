/* The tiny model the model tests share (two layers, small widths) and a direct FP32
 * computation of it on the CPU, token by token, from pkvk_model_weight: what the GPU
 * model (test_model_gpu) and the cpu backend's (test_cpu_model) are checked against. */
#ifndef PKV_TINYMODEL_H
#define PKV_TINYMODEL_H

#include <stdint.h>

#include "pkvk.h"

/* The head dimension: 128, or another where a test is built with PKV_TINY_D (64 and 256:
 * test_model_gpu_d64, _d256). */
#ifndef PKV_TINY_D
#define PKV_TINY_D 128
#endif
enum { L = 2, H = 256, HQ = 4, HKV = 2, D = PKV_TINY_D, I = 512, V = 1000, PS = 16 };
enum { NREQ = 3, CAP_TOKENS = 64, MAX_PROMPT = 128, NPAGES = 64, QKVW = (HQ + 2 * HKV) * D };
enum { CHUNK0 = 20, CHUNK1 = 25 }; /* a chunked prompt: 20 tokens, then 25 in a mixed step */
extern const int lens[NREQ];       /* the three prompts; chunks of 64: 50+14, 56+8, 1 */
extern uint64_t seed;
extern pkvk_model_shape S;
/* The CPU model's caches: K (rotated) and V per layer, request, position, KV head
 * (request NREQ: a chunked prompt). */
extern float kc[L][NREQ + 1][MAX_PROMPT + 2][HKV][D], vc[L][NREQ + 1][MAX_PROMPT + 2][HKV][D];

/* The types the model tests run, TINY_TYPES (dtype, kv_dtype) pairs: FP16, BF16, either
 * over FP8 KV. Pair i's into S, and the weights of seed s drawn in them. */
enum { TINY_TYPES = 4 };
void tiny_model_types(int i, uint64_t s);
/* The tests' bounds against the direct computation are FP16's times this: 1, or 2 with
 * BF16 or FP8 in the types (an 8-bit mantissa in the activations, or an FP8 code rounded
 * on the other side of a boundary from the reference's, moves the later layers' inputs). */
double tiny_tol_scale(void);
/* Draw the weights of seed s (rounded to S.dtype, as the GPU holds them; again for
 * another seed or type). */
void tiny_model_init(uint64_t s);
/* One token of request r at position pos through every layer (its K and V into the
 * caches, rounded to S.kv_dtype as the pools hold them); logits [V] when not NULL. */
void forward(int r, int pos, int token, float *logits);
/* |got - want| for a K/V element beyond the rounding S.kv_dtype allows at want: FP8 one
 * unit in the last place (2^-3 |want|: a value the GPU rounds on the other side of a
 * boundary from the reference's), BF16 two (2^-6 |want|: the GPU's QKV GEMM also rounds
 * its output to BF16 before RoPE), FP16 none. */
double kv_excess(double got, double want);
/* Max kv_excess of the pool against the caches over the three prompts' positions of
 * layer l's K (v = 0) or V pool ([pages][HKV][PS][D] S.kv_dtype; prompt r's pages
 * bt[r * bts + p]). */
double kv_max_diff(const void *pool, int l, int v, const int32_t *bt, int bts);
/* Max |gpu - ref| over the V logits (gpu S.dtype), and ref's rms into *rms. */
double max_diff_logits(const uint16_t *gpu, const float *ref, double *rms);

/* The CPU mirror's layer attention through a plan's work-queue CTAs, as a forward's attend
 * hook (ctx: a tiny_cpu_attend; its verify steps'). */
typedef struct tiny_cpu_attend {
    pkvk_cpu_model *m;
    const pkvk_fwd_in *in;
    const pkvk_plan *plan;
    float *part;
} tiny_cpu_attend;
int tiny_cpu_attend_hook(void *ctx, int l);

#endif
