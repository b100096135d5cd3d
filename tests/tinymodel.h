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

/* Draw the weights of seed s (FP16-rounded, as the GPU holds them). */
void tiny_model_init(uint64_t s);
/* One token of request r at position pos through every layer (its K and V into the
 * caches); logits [V] when not NULL. */
void forward(int r, int pos, int token, float *logits);
/* Max |pool - the caches| over the three prompts' positions of layer l's K (v = 0) or
 * V pool ([pages][HKV][PS][D] FP16; prompt r's pages bt[r * bts + p]). */
double kv_max_diff(const uint16_t *pool, int l, int v, const int32_t *bt, int bts);
/* Max |gpu - ref| over the V logits (gpu FP16), and ref's rms into *rms. */
double max_diff_logits(const uint16_t *gpu, const float *ref, double *rms);

#endif
