/* pkvk: the dense part of a served model on the GPU, around the attention routes.
 *
 * Llama-style layers: RMSNorm, the QKV projection, RoPE (rotate-half, theta) with the
 * K/V append into the layer's own pages, [attention: a route of pkvk_run.h, or the
 * prefill attention here], the output projection onto the residual, RMSNorm, the
 * gated MLP (gate and up in one GEMM, SiLU(gate) * up, down onto the residual); after
 * the last layer the final RMSNorm, the LM head and greedy sampling (argmax). Weights
 * and activations are in the shape's dtype, FP16 or BF16; GEMMs are cuBLAS, that type
 * in and out with FP32 accumulation; the small kernels compute in FP32. Weights are
 * drawn on the device from pkvk_model_weight (below), so a CPU reference can rebuild
 * every value; they stay resident. The K/V pools hold the shape's kv_dtype: the
 * activations' type, or FP8 E4M3 codes at scale 1 for every page and head (vLLM's
 * FP8 cache without calibrated scales: code = value, rounded, saturating at 448), so
 * that the routes read them with unit scales. The two RMSNorms of a
 * layer are folded into the GEMMs after them, as RMSNorm(x) W = (x W') / rms(x) with
 * W' = diag(w) W (their weights multiplied into the QKV and gate/up rows once, at
 * creation): the GEMM reads the residual stream x itself and the kernel that reads
 * its output (RoPE, SiLU) scales each row by 1 / rms(x), which it reduces from the
 * row itself up to PKVK_NORM_FUSED_ROWS rows (no norm kernel; a decode step's case)
 * and reads from a small kernel's output beyond.
 *
 * Layouts: activations are row-major [tokens][width]; weights are [in][out]
 * row-major (y = x W); the QKV output row is [q heads | k heads | v heads], each head
 * d wide; the K/V pools of every layer are the attention's
 * [n_pages][hkv][page_size][d], one pool pair per layer.
 *
 * Prefill runs the same layers over the prompts' tokens, a chunk of at most
 * cap_tokens tokens at a time (a chunk may hold parts of several prompts); its
 * attention is causal over each prompt's own tokens, on tensor cores, by one of two
 * kernels (pkvk_model_shape.prefill_attn):
 *  - FlashInfer's batch prefill over the paged cache (fused: scores stay on chip;
 *    builds with FlashInfer, head dimension 128, GQA group 1, 2, 4 or 8; FP8 pages
 *    widened in shared memory);
 *  - cuBLAS: per query block, S = Q K^T over the keys up to the block's last
 *    position (FP32), a causal softmax into P (dtype), O = P V, the keys and values
 *    gathered from the pages first, FP8 codes widened to dtype (every build and shape;
 *    materializes the scores). */
#ifndef PKVK_MODEL_H
#define PKVK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "pkvk_core.h"
#include "pkvk_forward.h"
#include "pkvk_plan.h"
#include "pkvk_ref.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define PKVK_HD __host__ __device__
#else
#define PKVK_HD
#endif

typedef struct pkvk_model_shape {
    int layers, hidden;
    int hq, hkv, d;   /* per GPU */
    int inter, vocab; /* per GPU */
    int page_size;
    float rope_theta, eps;
    int prefill_attn; /* PKVK_PREFILL_*: the prefill attention's kernel */
    int dtype;        /* pkvk_dtype of the weights and activations: FP16 (0) or BF16 */
    int kv_dtype;     /* pkvk_dtype of the K/V pools: dtype's, or FP8 E4M3 at scale 1 */
} pkvk_model_shape;

enum {
    PKVK_PREFILL_AUTO = 0,   /* FlashInfer's where it is built and the shape allows, else cuBLAS */
    PKVK_PREFILL_FLASHINFER, /* FlashInfer's or an error */
    PKVK_PREFILL_CUBLAS,
};
/* The kernel a model of this shape runs its prefill attention on
 * (PKVK_PREFILL_FLASHINFER or PKVK_PREFILL_CUBLAS), or -1 with a message for
 * pkvk_last_error() where FlashInfer's is asked for and cannot be had. */
int pkvk_model_prefill_kernel(const pkvk_model_shape *s);

/* The weight tensors of a layer, and of the model. */
enum {
    PKVK_W_LN1 = 0, /* [hidden] */
    PKVK_W_QKV,     /* [hidden][(hq + 2 hkv) d] */
    PKVK_W_O,       /* [hq d][hidden] */
    PKVK_W_LN2,     /* [hidden] */
    PKVK_W_GU,      /* [hidden][2 inter]: gate columns then up columns */
    PKVK_W_DOWN,    /* [inter][hidden] */
    PKVK_W_LAYER_COUNT,
    /* model-level tensors, layer -1 */
    PKVK_W_EMBED = 0, /* [vocab][hidden] */
    PKVK_W_NORM = 1,  /* [hidden] */
    PKVK_W_HEAD = 2,  /* [hidden][vocab] */
};

/* Element i of tensor t of layer l (l = -1: model-level): the norms' weights are
 * 1 + u/8, the others u / sqrt(fan-in), with u uniform in [-1, 1) from a hash of
 * (seed, l, t, i); its rounding to the model's dtype is what the GPU holds. */
static inline PKVK_HD float pkvk_model_weight(uint64_t seed, int l, int t, uint64_t i, int fan_in) {
    uint64_t x =
        seed ^ ((uint64_t)(l + 1) << 56) ^ ((uint64_t)t << 48) ^ (i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    float u = (float)(x >> 40) * (1.0f / 8388608.0f) - 1.0f; /* 24 bits: [-1, 1) */
    if (fan_in <= 0) return 1.0f + u * 0.125f;
    float s = 1.0f;
    for (float f = (float)fan_in; s * s * f > 1.0f;) s *= 0.5f; /* no sqrt in a header */
    return u * s * 1.41421356f;
}
/* The fan-in of tensor t (0 for the norms). */
static inline int pkvk_model_fan_in(const pkvk_model_shape *s, int l, int t) {
    if (l < 0) return t == PKVK_W_HEAD ? s->hidden : t == PKVK_W_EMBED ? 1 : 0;
    return t == PKVK_W_QKV || t == PKVK_W_GU ? s->hidden
           : t == PKVK_W_O                   ? s->hq * s->d
           : t == PKVK_W_DOWN                ? s->inter
                                             : 0;
}

enum { PKVK_NORM_FUSED_ROWS = 64 };

/* Elements of tensor t of layer l (l = -1: model-level). */
static inline size_t pkvk_model_tensor_elems(const pkvk_model_shape *s, int l, int t) {
    const size_t h = (size_t)s->hidden, d = (size_t)s->d;
    if (l < 0) return t == PKVK_W_NORM ? h : h * (size_t)s->vocab;
    return t == PKVK_W_QKV    ? h * (size_t)(s->hq + 2 * s->hkv) * d
           : t == PKVK_W_O    ? (size_t)s->hq * d * h
           : t == PKVK_W_GU   ? h * 2 * (size_t)s->inter
           : t == PKVK_W_DOWN ? (size_t)s->inter * h
                              : h; /* the norms */
}

typedef struct pkvk_model pkvk_model;

/* Device bytes the model takes: weights, n_pages pages per layer, activations for
 * cap_tokens token rows (decode rows or a prefill chunk) and prompts of up to
 * max_prompt tokens. */
size_t pkvk_model_bytes(const pkvk_model_shape *s, int32_t cap_tokens, int32_t max_prompt,
                        int32_t n_pages);
/* Of them, the weights' (what a model sharing another's weights does not take). */
size_t pkvk_model_weight_bytes(const pkvk_model_shape *s);
/* The model's work goes to the context's stream. */
int pkvk_model_create(const pkvk_ctx *c, pkvk_model **m, const pkvk_model_shape *s,
                      int32_t cap_tokens, int32_t max_prompt, int32_t n_pages, uint64_t seed);
/* The same, reading the weights of `weights` (a model of the same shape and seed on the
 * same device, which must outlive this one: replicas of one model in a fleet) instead of
 * holding its own; its KV pools, activations and handles are its own. */
int pkvk_model_create_sharing(const pkvk_ctx *c, pkvk_model **m, const pkvk_model_shape *s,
                              int32_t cap_tokens, int32_t max_prompt, int32_t n_pages,
                              uint64_t seed, const pkvk_model *weights);
void pkvk_model_destroy(pkvk_model *m);
/* Layer l's K (v = 0) or V (v = 1) pool (kv_dtype; FP8: its bytes). */
uint16_t *pkvk_model_kv(pkvk_model *m, int l, int v);

/* The model's operations for the one forward (pkvk_forward.h): a decode step's rows
 * (device lens and block table as for the attention; their Q into in->q for the
 * route, the route's output read from in->o), a verify step's rows (pkvk_fwd_in.q_len
 * token rows each, as the CPU mirror takes them: Q and the output [rows][q_len][hq][d]; a
 * row samples from its last token), a mixed iteration's rows and prompt pieces (at most
 * PKVK_MAX_PIECES, token rows at most cap_tokens), a prefill's
 * chunks. The dense part runs over the rows and the pieces' tokens at once; the
 * pieces attend through the prefill attention. Asynchronous, allocation-free; a
 * decode step synchronizes nothing, so it can be captured in a CUDA graph. */
pkvk_fwd_model pkvk_model_forward(pkvk_model *m);

/* Prefill of n prompt pieces (pkvk_forward_prefill: host lens, pages, starts, last):
 * every layer's K/V pages of the pieces written (a piece attends to its prompt's
 * earlier positions in the pages), the next token of each prompt a piece ends
 * sampled. Asynchronous, allocation-free. */
int pkvk_model_prefill(pkvk_model *m, int n, const int32_t *lens, const int32_t *pages,
                       const int32_t *starts, const uint8_t *last);

/* Warm-up before a run: layer 0's GEMMs (and the head's up to its rows) at token
 * widths 1 to cap_tokens (every width to 16, every 8th to 512, 32nd to 2048, 128th
 * beyond), then prefills of one prompt of 1, 8, 64, 512 and 4096 tokens and of the
 * most the model holds (at most cap_tokens, max_prompt and its pages), on pages 0, 1,
 * ..., so that the first forward a run times does not load kernels or choose cuBLAS's
 * algorithms (a first prefill took 95-110 ms more on the H200, and a first forward at
 * a width the prefills did not have 10-15 ms). It writes those pages, the activation
 * buffers and the sampled tokens; synchronous. */
int pkvk_model_warmup(pkvk_model *m);

/* The last head's output (a step's or a prefill's), to host: logits [rows][vocab]
 * (dtype) of the last group of at most PKVK_MODEL_HEAD_ROWS rows, and tokens of every
 * row (NULL: skip). Synchronous (tests). */
enum { PKVK_MODEL_HEAD_ROWS = 256 };
int pkvk_model_read(pkvk_model *m, int rows, uint16_t *logits, int32_t *tokens);
/* The prefill softmax reads a row of scores once (into shared memory) when it has at
 * most this many keys, else three times (the model backend's cost model uses it). */
enum { PKVK_SOFTMAX_SMEM_KEYS = 8192 };

/* Bench: median device time (ms) over reps of GEMM g of one layer (0 QKV, 1 O,
 * 2 gate and up, 3 down; 4 the LM head) at `rows` token rows, L2 flushed before each. */
int pkvk_model_time_gemm(pkvk_model *m, int g, int rows, int reps, float *ms);
/* Bench: median device time (ms) over reps of layer 0's prefill attention (the
 * model's kernel) over n whole prompts of these lengths in one chunk, on pages
 * 0, 1, ... in order, L2 flushed before each. */
int pkvk_model_time_prefill_attn(pkvk_model *m, int n, const int32_t *lens, int reps, float *ms);
/* Bench: a whole prefill of n prompts of these lengths (pages 0, 1, ... in order),
 * reps times after a warm-up: the medians (ms) of its layer 0's parts, in order the
 * norm and QKV GEMM, the RoPE and K/V append, the attention, the rest of the layer
 * (output projection, norm, MLP), and of the whole prefill. */
int pkvk_model_time_prefill_parts(pkvk_model *m, int n, const int32_t *lens, int reps,
                                  float parts[5]);
/* Bench: median device time (ms) of one n x n x n FP16 GEMM (FP32 accumulation);
 * _gemms: of count such GEMMs back to back (sustained: the clocks a long forward
 * runs at), per GEMM. */
int pkvk_time_square_gemm(const pkvk_ctx *c, int n, int reps, float *ms);
int pkvk_time_square_gemms(const pkvk_ctx *c, int n, int count, int reps, float *ms);
/* Bench: device time (ms, median of 3) of every layer's four GEMMs at `rows` token
 * rows back to back, in a forward's order, without the small kernels between. */
int pkvk_model_time_gemms_forward(pkvk_model *m, int rows, float *ms);

/* ---- the CPU mirror (host memory, every build; the cpu backend's full model) ----
 * The same layers in FP32, one token row at a time: RMSNorm (not folded), QKV, RoPE,
 * the K/V append (kv_dtype; FP8 at scale 1) into the layer's own pages, the step's route
 * through its CPU mirror (pkvk_cpu_run) on those pages, a prompt piece's attention by
 * the reference, the output projection, RMSNorm, the gated MLP, then the final norm, the
 * LM head and argmax. Weights: pkvk_model_weight rounded to dtype, as the GPU holds them;
 * Q rounded to dtype (the activations otherwise stay FP32). Rows keep
 * their last sampled tokens, and a prefill samples into them, as pkvk_model does (its
 * chunks of cap_tokens tokens or 64 pieces each sampling from row 0 on). */
typedef struct pkvk_cpu_model pkvk_cpu_model;
/* Host bytes of the model: weights, n_pages pages per layer, the state of cap_rows
 * decode rows and of cap_tokens token rows. */
size_t pkvk_cpu_model_bytes(const pkvk_model_shape *s, int32_t cap_rows, int32_t cap_tokens,
                            int32_t n_pages);
int pkvk_cpu_model_create(pkvk_cpu_model **m, const pkvk_model_shape *s, int32_t cap_rows,
                          int32_t cap_tokens, int32_t n_pages, uint64_t seed);
void pkvk_cpu_model_destroy(pkvk_cpu_model *m);
uint16_t *pkvk_cpu_model_kv(pkvk_cpu_model *m, int l, int v);
/* Its operations for the one forward (pkvk_forward.h; host lens, block table and
 * pages; in->q and in->o unused: the rows' Q and the route's output are its own). It takes
 * a verify step's rows (pkvk_fwd_in.q_len: each row's last sampled token, then its
 * proposals as synthetic tokens, through the route with their causal mask; a row samples
 * from its last token). */
pkvk_fwd_model pkvk_cpu_model_forward(pkvk_cpu_model *m);
/* Layer l's attention over a forward's rows, for the caller's attend hook: the batch (the
 * layer's Q, its pools at FP8 scale 1) and *o, where the route's output goes (FP32
 * [rows][hq][d], read by the layer's dense part after). */
pkvk_batch pkvk_cpu_model_attention(pkvk_cpu_model *m, int l, const pkvk_fwd_in *in, float **o);
/* A decode step of rows (host lens and block table, as for the GPU) through plan p,
 * its CTAs by attend (pkvk_cpu_run; part: pkvk_partial_floats(p->n_slots) floats); o0 and q0 (NULL:
 * skip) receive layer 0's attention output [rows][hq][d] and its Q (dtype), *t_attention (NULL:
 * skip) the seconds the route took over all layers. */
int pkvk_cpu_model_decode(pkvk_cpu_model *m, int rows, const int32_t *lens, const int32_t *bt,
                          int bt_stride, const pkvk_plan *p, pkvk_cpu_attend attend, float *part,
                          float *o0, uint16_t *q0, double *t_attention);
/* A prefill of n prompt pieces, arguments as pkvk_model_prefill's. */
int pkvk_cpu_model_prefill(pkvk_cpu_model *m, int n, const int32_t *lens, const int32_t *pages,
                           const int32_t *starts, const uint8_t *last);
/* The last decode step's logits [rows][vocab] (a prefill's: [its heads][vocab]); the
 * rows' tokens (writable: tests set them). */
const float *pkvk_cpu_model_logits(const pkvk_cpu_model *m);
int32_t *pkvk_cpu_model_tokens(pkvk_cpu_model *m);

/* ---- a mixture of experts (the GPU's model and the CPU mirror alike) ----
 * Layers `first` to the last run an MoE MLP of `experts` experts, each `inter` wide (per
 * GPU), `k` (at most 64) of them a token, in place of the dense one: the norm, the router
 * [hidden][experts], and each chosen expert's gate-up [hidden][2 inter] and down
 * [inter][hidden] (tensors PKVK_W_LAYER_COUNT on of pkvk_model_weight: the router, then
 * each expert's two), rounded to dtype; a token's output is its experts' (silu(gate) x
 * up, then down) weighted by the softmax of the router's logits over its k experts. */
typedef struct pkvk_moe_shape {
    int experts, k, inter, first;
} pkvk_moe_shape;
/* Which experts a forward's `tokens` tokens choose in MoE layer l: counts[e] tokens on
 * expert e, each at most tokens, their sum tokens x k (the caller's draw: the law, not the
 * random weights, decides the load). The slots in expert order (expert 0's first) go to
 * the tokens in turn: slot s to token s mod tokens, so token t's k experts are those of
 * slots t, t + tokens, ..., distinct since no expert has more than `tokens`. 0, or a
 * pkvk status. NULL: every expert tokens x k / experts (the remainder to the first). */
typedef int (*pkvk_moe_route)(void *ctx, int l, int tokens, int32_t *counts);
/* Layer l's routing for `tokens` tokens by route (checked) as offsets[experts + 1]: expert
 * e's slots are [offsets[e], offsets[e + 1]); counts: experts int32 of scratch. */
int pkvk_moe_routing(const pkvk_moe_shape *e, pkvk_moe_route route, void *ctx, int l, int tokens,
                     int32_t *counts, int32_t *offsets);
/* The expert of slot s by the offsets. */
static inline PKVK_HD int pkvk_moe_slot_expert(const int32_t *offsets, int experts, int s) {
    int lo = 0, hi = experts; /* offsets[lo] <= s < offsets[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (offsets[mid] <= s)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
/* Whether the shape is one the models take (k <= 64, experts <= 16384, first a layer). */
int pkvk_moe_shape_ok(const pkvk_model_shape *s, const pkvk_moe_shape *e);

/* The GPU's model: device bytes of its experts' weights (the layers' routers and experts)
 * and of the buffers for cap_tokens tokens. */
size_t pkvk_model_moe_bytes(const pkvk_model_shape *s, const pkvk_moe_shape *e, int32_t cap_tokens);
/* Give m the experts of e (after pkvk_model_create, with its seed; a model sharing another's
 * weights shares its experts, which must be the same), its forwards routed by route (ctx its
 * argument; called on the host at each forward's start, for every MoE layer). A layer runs:
 * the norm, the router's GEMM (FP32 logits), the tokens copied to their slots, the experts'
 * gate-up GEMMs (cuBLAS grouped batched GEMM, one group an active expert), SiLU x up, the
 * down GEMMs, and each token's combine onto the residual. Its forwards are not graph
 * replayable (each forward's routing is its own). */
int pkvk_model_experts(pkvk_model *m, const pkvk_moe_shape *e, pkvk_moe_route route, void *ctx);
/* Bench: median device time (ms) over reps of layer e.first's MoE MLP over `tokens` token
 * rows (the activations as they are), L2 flushed before each. */
int pkvk_model_time_moe(pkvk_model *m, int tokens, int reps, float *ms);

/* The CPU mirror's experts: the same (its weights in FP32, host bytes
 * pkvk_cpu_moe_bytes). */
size_t pkvk_cpu_moe_bytes(const pkvk_model_shape *s, const pkvk_moe_shape *e);
int pkvk_cpu_model_experts(pkvk_cpu_model *m, const pkvk_moe_shape *e, uint64_t seed,
                           pkvk_moe_route route, void *ctx);
/* One token row's MoE MLP, added onto x [hidden]: xn [hidden] through the router, its
 * experts `chosen` [k] (NULL: its k largest logits, the lower index first among equals)
 * weighted by the softmax of their logits (over the k: Mixtral's and Qwen3's renormalised
 * top k), each chosen expert's gated MLP (silu(gate) x up, then down) times its weight.
 * gate_up[e], down[e]: expert e's; scratch: experts + 3 inter floats. */
void pkvk_cpu_moe(const float *xn, int hidden, const pkvk_moe_shape *e, const float *router,
                  float *const *gate_up, float *const *down, const int *chosen, float *x,
                  float *scratch);

/* Set the rows' last sampled tokens (the next step's input; tests). */
int pkvk_model_set_tokens(pkvk_model *m, int rows, const int32_t *tokens);
/* The synthetic prompt token at position pos of prompt req of a prefill batch. */
static inline PKVK_HD int pkvk_prompt_token(int req, int pos, int vocab) {
    return (int)(((unsigned)pos * 7919u + (unsigned)req * 104729u + 17u) % (unsigned)vocab);
}
/* The residual stream x [rows][hidden] (dtype), to host (tests). */
int pkvk_model_read_hidden(pkvk_model *m, int rows, uint16_t *x);

#ifdef __cplusplus
}
#endif

#endif
