// Private to the served model's files (kernels/pkvk_model*.cu): the model's state, a
// prefill's pieces, the row norm a fused kernel reads, and what each operation's file
// (kernels then launchers) offers the others, in namespace pkvkm. Not for use outside
// kernels/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "pkvk_blas.h"
#include "pkvk_cuda.h"
#include "pkvk_fi.h"
#include "pkvk_model.h"

// The FP32 score block of the cuBLAS prefill attention, in floats.
static constexpr size_t SCORE_FLOATS = (size_t)128 << 20; // 512 MiB
// Key counts are padded to this in the score GEMMs, so that every row of S and P
// starts 16-byte aligned (cuBLAS's fast kernels need it); the padded keys get P = 0.
enum { KEY_PAD = 64 };
static inline int key_pad(int n) {
    return (n + KEY_PAD - 1) / KEY_PAD * KEY_PAD;
}

// The model's element types: weights and activations T (__half or __nv_bfloat16), the
// K/V pools KT (T or __nv_fp8_e4m3, at scale 1). Buffers hold them as 16-bit words
// (elem16) or, the pools, bytes; the kernels see the typed values.
typedef uint16_t elem16;
static __device__ __forceinline__ float to_f(__half v) {
    return __half2float(v);
}
static __device__ __forceinline__ float to_f(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
static __device__ __forceinline__ float to_f(__nv_fp8_e4m3 v) {
    return (float)v;
}
template <class T> static __device__ __forceinline__ T from_f(float f) {
    return T(f); // __nv_fp8_e4m3: round to nearest, saturating at 448
}
template <> __device__ __forceinline__ __half from_f<__half>(float f) {
    return __float2half_rn(f);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float f) {
    return __float2bfloat16_rn(f);
}
// f(T{}) for the activations' type of dtype.
template <class F> static inline auto with_t(int dtype, F &&f) {
    return dtype == PKVK_BF16 ? f(__nv_bfloat16{}) : f(__half{});
}
// f(T{}, KT{}) for the shape's types.
template <class F> static inline auto with_tk(const pkvk_model_shape *s, F &&f) {
    return with_t(s->dtype, [&](auto t) {
        using T = decltype(t);
        return s->kv_dtype == PKVK_FP8_E4M3 ? f(t, __nv_fp8_e4m3{}) : f(t, T{});
    });
}

// A forward's prompt pieces (pkvk_forward.h), launch parameters of the kernels that
// read them.
typedef pkvk_piece seg_t;
typedef pkvk_pieces segs_t;

struct pkvk_model {
    const pkvk_ctx *ctx;
    pkvk_model_shape s;
    int32_t cap_tokens, max_prompt, n_pages;
    int32_t kv_rows; // rows of kc and vc: max_prompt padded to KEY_PAD
    uint64_t seed;
    cublasHandle_t h;
    cudaDataType_t ct; // the GEMMs' type: CUDA_R_16F or CUDA_R_16BF (s.dtype)
    elem16 *w;         // every weight, one allocation
    int w_shared;      // w is another model's (pkvk_model_create_sharing): not freed here
    size_t off[1024][PKVK_W_LAYER_COUNT], off_embed, off_norm, off_head, w_elems;
    unsigned char *kv;                // [layers][2][pool] (kv_dtype)
    size_t pool;                      // bytes of one pool
    elem16 *x, *xn, *qkv, *o, *y, *a; // [cap_tokens][...]
    float *inv;                       // [cap_tokens]: the rows' 1 / rms (norm_rows)
    elem16 *logits;                   // [PKVK_MODEL_HEAD_ROWS][vocab]
    int32_t *tok;                     // [cap_tokens]: each row's last sampled token
    pkvk_fi_prefill *fip;             // prefill attention on FlashInfer's kernel (else cuBLAS)
    elem16 *qp;                 // prefill Q: FlashInfer [T][hq][d], cuBLAS [hkv][cap_tokens][G][d]
    elem16 *op;                 // cuBLAS prefill: [hkv][cap_tokens][G][d]
    elem16 *kc, *vc;            // cuBLAS prefill: [hkv][kv_rows][d] (dtype)
    float *S;                   // cuBLAS prefill: scores
    elem16 *P;                  // cuBLAS prefill: probabilities
    int32_t *pages_h, *pages_d; // prefill: the batch's pages (pinned host, device)
    int last_rows;              // rows of the last head
    const pkvk_model *donor;    // the model whose weights this one reads (NULL: its own)
    // a mixture of experts (pkvk_model_experts; e.experts 0: none), pkvk_model_moe.cu
    pkvk_moe_shape e;
    pkvk_moe_route route; // each forward's routing, and its argument
    void *route_ctx;
    elem16 *ew;                 // per MoE layer its router, then each expert's gate-up and down
    int ew_shared;              // ew is the donor's
    float *rl;                  // [cap_tokens][experts]: the router's logits
    elem16 *xs, *ys, *as;       // the slots' rows [cap_tokens k][hidden] (the down GEMM's output
                                // over its input), [..][2 inter], [..][inter]
    unsigned char *st_h, *st_d; // the forward's routing, per MoE layer (pinned host, device)
    int *groups;                // host: per MoE layer its groups' count and tokens, then the
                                // grouped calls' fixed arguments and the routing's counts
    float *ab;                  // host [2 experts]: alpha 1 and beta 0 a group
    cublasOperation_t *opn;     // host [experts]: no transpose a group
    cudaEvent_t st_ev;          // the last forward's routing copied from st_h
    int moe_tokens;             // the tokens it was staged for (-1: none)
};

namespace pkvkm {

// ---- device helpers (every block reduction of the model's kernels) -------------------
static __device__ inline float block_sum(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) sh[0] = v;
    }
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

// 1 / rms of one row of x (the whole block takes part). A row of 8k elements takes 16
// bytes a load, up to ROW_LOADS loads a thread issued at once (a decode row is one L2
// round trip, not one per element).
enum { ROW_LOADS = 8 };
template <class T>
static __device__ inline float row_inv_rms(const T *__restrict__ xr, int hidden, float eps,
                                           float *sh) {
    float ss = 0.f;
    if (hidden % 8 == 0) {
        const uint4 *v = reinterpret_cast<const uint4 *>(xr);
        const int n = hidden / 8;
        for (int base = threadIdx.x; base < n; base += ROW_LOADS * blockDim.x) {
            uint4 u[ROW_LOADS];
#pragma unroll
            for (int k = 0; k < ROW_LOADS; k++) {
                const int i = base + k * blockDim.x;
                u[k] = i < n ? v[i] : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int k = 0; k < ROW_LOADS; k++) {
                const T *h = reinterpret_cast<const T *>(&u[k]);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float f = to_f(h[j]);
                    ss += f * f;
                }
            }
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
            const float v = to_f(xr[i]);
            ss += v * v;
        }
    }
    return rsqrtf(block_sum(ss, sh) / hidden + eps);
}

// The 1 / rms of the rows of x that a kernel reading a GEMM over x W' (an RMSNorm's
// weights folded into W) scales them by: inv[row] where computed (more than
// PKVK_NORM_FUSED_ROWS rows), else from the row itself (the block reduces it; x
// NULL: no norm, 1).
struct norm_in {
    const elem16 *x = nullptr;
    const float *inv = nullptr;
    int hidden = 0;
    float eps = 0.f;
    template <class T> __device__ float scale(int row, float *sh) const {
        if (inv) return inv[row];
        return x ? row_inv_rms(reinterpret_cast<const T *>(x) + (size_t)row * hidden, hidden, eps,
                               sh)
                 : 1.f;
    }
};

// ---- launchers and helpers, by file --------------------------------------------------
// pkvk_model_gemm.cu
// C (n x m, row-major, ldc) = A (n x k, row-major, lda) B (k x m, row-major, ldb)
// (+ C with beta = 1), all of type ct: in cuBLAS's column-major terms C^T = B^T A^T.
int gemm(cublasHandle_t h, cudaDataType_t ct, int n, int m, int k, const elem16 *A, int lda,
         const elem16 *B, int ldb, elem16 *C, int ldc, float beta);

// pkvk_model_norm.cu: y = x / rms(x) * w, one row a block; inv[row] = 1 / rms(x[row]);
// x, y and w of type dtype.
int rmsnorm(cudaStream_t st, int dtype, const elem16 *x, elem16 *y, const elem16 *w, int rows,
            int hidden, float eps);
int inv_rms(cudaStream_t st, int dtype, const elem16 *x, float *inv, int rows, int hidden,
            float eps);

// pkvk_model_rope.cu: RoPE on q and k of `rows` rows of qkv, q to its place, k and v into
// the pages (decode: by lens and the block table, qlen token rows a row (a verify step's,
// token j at position lens - qlen + j); prefill: by the pieces and pages).
int rope_append(cudaStream_t st, bool prefill, const pkvk_model_shape *s, int rows,
                const elem16 *qkv, const int32_t *lens, const int32_t *bt, int bt_stride,
                const int32_t *pages, const segs_t &segs, int cap_tokens, int ragged, void *kpool,
                void *vpool, elem16 *q, norm_in nin, int qlen = 1);

// pkvk_model_act.cu: a = silu(gate) * up, scaled by the rows' norm (type dtype).
int silu_mul(cudaStream_t st, int dtype, const void *y, void *a, int rows, int inter, norm_in nin);

// pkvk_model_tokens.cu: embedding (tok: decode rows' tokens, qlen token rows a row (a verify
// step's: the row's token, then its proposals, synthetic tokens at their positions by lens);
// NULL: the pieces' prompt tokens), greedy sampling (logits of type dtype), and the rows
// that sample gathered.
int embed(cudaStream_t st, const elem16 *emb, elem16 *x, const int32_t *tok, const segs_t &segs,
          int rows, int hidden, int vocab, const int32_t *lens = nullptr, int qlen = 1);
int argmax(cudaStream_t st, int dtype, const elem16 *logits, int rows, int vocab, int32_t *tok);
int gather_rows(cudaStream_t st, const elem16 *x, elem16 *dst, const segs_t &segs, int heads,
                int hidden);

// pkvk_model_weights.cu: the model's memory and weights.
// Tensor t of layer l (l < 0: the model's embedding, final norm, head); inline, as
// the step's host path asks for it several times a layer.
static inline elem16 *W(pkvk_model *m, int l, int t) {
    return m->w + (l < 0 ? (t == PKVK_W_EMBED  ? m->off_embed
                            : t == PKVK_W_NORM ? m->off_norm
                                               : m->off_head)
                         : m->off[l][t]);
}
size_t score_floats(const pkvk_model_shape *s, int32_t max_prompt);

// pkvk_model_prefill_attn.cu: a chunk's causal attention (FlashInfer's plan first).
int plan_chunk(pkvk_model *m, const segs_t &segs);
int chunk_attention(pkvk_model *m, int l, const segs_t &segs, int T, elem16 *o);

// pkvk_model.cu: the forward's pieces the benchmarks time.
int over(pkvk_model *m, int rows);
int layer_gemms(pkvk_model *m, int l, int rows);
int stage_pages(pkvk_model *m, int n, const int32_t *lens, const int32_t *starts,
                const int32_t *pages);

// pkvk_model_moe.cu: a forward's routing staged (at its start), an MoE layer's MLP over
// its tokens onto m->x, the experts' memory freed.
int moe_plan(pkvk_model *m, int tokens);
int moe_mlp(pkvk_model *m, int l, int rows);
void moe_free(pkvk_model *m);

} // namespace pkvkm
