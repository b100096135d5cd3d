// The dense part of a served model (pkvk_model.h): weights drawn on the device,
// cuBLAS GEMMs, the small kernels (norms, RoPE and K/V append, SiLU, sampling), and
// the prefill's causal attention on tensor cores (FlashInfer's kernel or cuBLAS).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "pkvk_cuda.h"
#include "pkvk_fi.h"
#include "pkvk_model.h"

// At most this many prompt pieces in one prefill chunk (they travel as launch
// parameters); and the FP32 score block of the prefill attention, in floats.
enum { MAX_SEGS = 64 };
// A prefill chunk's layer 0 timed in parts (pkvk_model_time_prefill_parts): events
// before it, after the norm and QKV GEMM, the RoPE and K/V append, the attention and
// the rest of the layer.
enum { PROBES = 5 };
static const size_t SCORE_FLOATS = (size_t)128 << 20; // 512 MiB
// Key counts are padded to this in the score GEMMs, so that every row of S and P
// starts 16-byte aligned (cuBLAS's fast kernels need it); the padded keys get P = 0.
enum { KEY_PAD = 64 };
static int key_pad(int n) {
    return (n + KEY_PAD - 1) / KEY_PAD * KEY_PAD;
}

struct seg_t {
    int t0;       // first row of the chunk
    int len;      // rows
    int q0;       // position of the first row in its prompt
    int page_off; // the prompt's first page in the batch's page list
    int req;      // prompt number in the batch
    int last;     // 1: the piece ends its prompt (its last row samples)
};
struct segs_t {
    int n;
    seg_t s[MAX_SEGS];
};

struct pkvk_model {
    const pkvk_ctx *ctx;
    pkvk_model_shape s;
    int32_t cap_tokens, max_prompt, n_pages;
    int32_t kv_rows; // rows of kc and vc: max_prompt padded to KEY_PAD
    uint64_t seed;
    cublasHandle_t h;
    __half *w; // every weight, one allocation
    size_t off[1024][PKVK_W_LAYER_COUNT], off_embed, off_norm, off_head, w_elems;
    __half *kv;                       // [layers][2][pool]
    size_t pool;                      // elements of one pool
    __half *x, *xn, *qkv, *o, *y, *a; // [cap_tokens][...]
    float *inv;                       // [cap_tokens]: the rows' 1 / rms (row_norms)
    __half *logits;                   // [PKVK_MODEL_HEAD_ROWS][vocab]
    int32_t *tok;                     // [cap_tokens]: each row's last sampled token
    pkvk_fi_prefill *fip;             // prefill attention on FlashInfer's kernel (else cuBLAS)
    __half *qp;                 // prefill Q: FlashInfer [T][hq][d], cuBLAS [hkv][cap_tokens][G][d]
    __half *op;                 // cuBLAS prefill: [hkv][cap_tokens][G][d]
    __half *kc, *vc;            // cuBLAS prefill: [hkv][kv_rows][d]
    float *S;                   // cuBLAS prefill: scores
    __half *P;                  // cuBLAS prefill: probabilities
    int32_t *pages_h, *pages_d; // prefill: the batch's pages (pinned host, device)
    int last_rows;              // rows of the last head
    int mix_rows, mix_T, mix_heads; // mixed iteration: decode rows, chunk tokens, heads
    segs_t mix_segs;                // its chunk pieces (t0 from the first chunk token)
    cudaEvent_t probe[PROBES];      // bench: a prefill's layer 0 split by parts (else null)
};

static int cublas_fail(cublasStatus_t st, const char *what) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s failed: cuBLAS status %d", what, (int)st);
    return pkvk_fail_msg(st == CUBLAS_STATUS_ALLOC_FAILED ? PKVK_ERR_OUT_OF_MEMORY : PKVK_ERR_CUDA,
                         msg);
}

// C (n x m, row-major, ldc) = A (n x k, row-major, lda) B (k x m, row-major, ldb)
// (+ C with beta = 1): in cuBLAS's column-major terms C^T = B^T A^T.
static int gemm(cublasHandle_t h, int n, int m, int k, const __half *A, int lda, const __half *B,
                int ldb, __half *C, int ldc, float beta) {
    const float one = 1.f;
    cublasStatus_t st =
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, B, CUDA_R_16F, ldb, A, CUDA_R_16F,
                     lda, &beta, C, CUDA_R_16F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? PKVK_OK : cublas_fail(st, "cublasGemmEx");
}

// ---- weights -----------------------------------------------------------------------
// fold (NULL: none): the RMSNorm weights [n / cols] folded into the rows of this
// [n / cols][cols] tensor, W' = diag(fold) W, rounded once.
__global__ void fill_weights(__half *w, size_t n, uint64_t seed, int l, int t, int fan_in,
                             const __half *fold, size_t cols) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = __float2half(pkvk_model_weight(seed, l, t, i, fan_in) *
                            (fold ? __half2float(fold[i / cols]) : 1.f));
}

// ---- small kernels -----------------------------------------------------------------
__device__ float block_sum(float v, float *sh) {
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

// 1 / rms of one row of x (the whole block takes part). A row of 8k halves takes 16
// bytes a load, up to ROW_LOADS loads a thread issued at once (a decode row is one L2
// round trip, not one per element).
enum { ROW_LOADS = 8 };
__device__ float row_inv_rms(const __half *__restrict__ xr, int hidden, float eps, float *sh) {
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
                const __half2 *h = reinterpret_cast<const __half2 *>(&u[k]);
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 f = __half22float2(h[j]);
                    ss += f.x * f.x + f.y * f.y;
                }
            }
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
            const float v = __half2float(xr[i]);
            ss += v * v;
        }
    }
    return rsqrtf(block_sum(ss, sh) / hidden + eps);
}

// One block per row: inv[row] = 1 / rms(x[row]).
__global__ void inv_rms_kernel(const __half *__restrict__ x, float *__restrict__ inv, int hidden,
                               float eps) {
    __shared__ float sh[32];
    const float r = row_inv_rms(x + (size_t)blockIdx.x * hidden, hidden, eps, sh);
    if (threadIdx.x == 0) inv[blockIdx.x] = r;
}

// The 1 / rms of the rows of x that a kernel reading a GEMM over x W' (an RMSNorm's
// weights folded into W) scales them by: inv[row] where computed (more than
// PKVK_NORM_FUSED_ROWS rows), else from the row itself (the block reduces it; x
// NULL: no norm, 1).
struct norm_in {
    const __half *x = nullptr;
    const float *inv = nullptr;
    int hidden = 0;
    float eps = 0.f;
    __device__ float scale(int row, float *sh) const {
        if (inv) return inv[row];
        return x ? row_inv_rms(x + (size_t)row * hidden, hidden, eps, sh) : 1.f;
    }
};

// One block per row: y = x / rms(x) * w (FP32 inside). VEC: the row in registers,
// 16-byte loads (hidden a multiple of 8, at most 8 x NORM_THREADS x NORM_REGS).
enum { NORM_THREADS = 256, NORM_REGS = 4 };
template <bool VEC>
__global__ void rmsnorm_kernel(const __half *__restrict__ x, __half *__restrict__ y,
                               const __half *__restrict__ w, int hidden, float eps) {
    __shared__ float sh[32];
    const __half *xr = x + (size_t)blockIdx.x * hidden;
    __half *yr = y + (size_t)blockIdx.x * hidden;
    float ss = 0.f;
    if (VEC) {
        uint4 v[NORM_REGS];
        for (int k = 0; k < NORM_REGS; k++) {
            const int i = (k * NORM_THREADS + threadIdx.x) * 8;
            if (i < hidden) {
                v[k] = *(const uint4 *)(xr + i);
                const __half *h = (const __half *)&v[k];
                for (int j = 0; j < 8; j++) ss += __half2float(h[j]) * __half2float(h[j]);
            }
        }
        const float inv = rsqrtf(block_sum(ss, sh) / hidden + eps);
        for (int k = 0; k < NORM_REGS; k++) {
            const int i = (k * NORM_THREADS + threadIdx.x) * 8;
            if (i >= hidden) break;
            uint4 wv = *(const uint4 *)(w + i), o;
            const __half *h = (const __half *)&v[k], *wh = (const __half *)&wv;
            __half *oh = (__half *)&o;
            for (int j = 0; j < 8; j++)
                oh[j] = __float2half(__half2float(h[j]) * inv * __half2float(wh[j]));
            *(uint4 *)(yr + i) = o;
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
            float v = __half2float(xr[i]);
            ss += v * v;
        }
        float inv = rsqrtf(block_sum(ss, sh) / hidden + eps);
        for (int i = threadIdx.x; i < hidden; i += blockDim.x)
            yr[i] = __float2half(__half2float(xr[i]) * inv * __half2float(w[i]));
    }
}

// One block per row: x[row] = embed[token]. tok != NULL: decode rows' tokens; else
// the prefill chunk's prompt tokens.
__global__ void embed_kernel(const __half *__restrict__ emb, __half *__restrict__ x,
                             const int32_t *__restrict__ tok, segs_t segs, int hidden, int vocab) {
    int r = blockIdx.x, t;
    if (tok) {
        t = tok[r] % vocab;
        if (t < 0) t += vocab;
    } else {
        int k = 0;
        while (k + 1 < segs.n && r >= segs.s[k + 1].t0) k++;
        const seg_t &g = segs.s[k];
        t = pkvk_prompt_token(g.req, g.q0 + r - g.t0, vocab);
    }
    const __half *e = emb + (size_t)t * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[(size_t)r * hidden + i] = e[i];
}

// One warp per (row, head of q, k and v), four heads a block: RoPE (rotate-half, at
// the row's position) on q and k, then q to its place (decode and FlashInfer's
// prefill: [rows][hq][d]; cuBLAS's prefill: [hkv][cap_tokens][G][d]) and k, v into
// the layer's pages at the row's position.
enum { ROPE_HEADS = 4 };
template <bool PREFILL>
__global__ void
rope_append_kernel(const __half *__restrict__ qkv, int hq, int hkv, int d, int ps, float theta,
                   const int32_t *__restrict__ lens, const int32_t *__restrict__ bt, int bt_stride,
                   const int32_t *__restrict__ pages, segs_t segs, int cap_tokens, int ragged,
                   __half *__restrict__ kpool, __half *__restrict__ vpool, __half *__restrict__ q,
                   norm_in nin) {
    const int r = blockIdx.x, hd = blockIdx.y * ROPE_HEADS + threadIdx.x / 32,
              lane = threadIdx.x % 32, W = (hq + 2 * hkv) * d;
    if (!PREFILL && lens[r] <= 0) return; // a row past the step's on a fixed grid (graph replay)
    __shared__ float sh[32];
    const float sc = nin.scale(r, sh); // qkv is x W' (the norm folded): RMSNorm(x) W = sc x W'
    if (hd >= hq + 2 * hkv) return;
    int pos, page;
    if (PREFILL) {
        int k = 0;
        while (k + 1 < segs.n && r >= segs.s[k + 1].t0) k++;
        const seg_t &g = segs.s[k];
        pos = g.q0 + r - g.t0;
        page = pages[g.page_off + pos / ps];
    } else {
        pos = lens[r] - 1;
        page = bt[(size_t)r * bt_stride + pos / ps];
    }
    const __half *src = qkv + (size_t)r * W + (size_t)hd * d;
    __half *dst;
    if (hd < hq) {
        const int G = hq / hkv;
        dst = PREFILL && !ragged ? q + (((size_t)(hd / G) * cap_tokens + r) * G + hd % G) * d
                                 : q + ((size_t)r * hq + hd) * d;
    } else {
        const int kh = hd < hq + hkv ? hd - hq : hd - hq - hkv;
        dst = (hd < hq + hkv ? kpool : vpool) + (((size_t)page * hkv + kh) * ps + pos % ps) * d;
    }
    const bool rotate = hd < hq + hkv;
    for (int i = lane; i < d / 2; i += 32) {
        float a = __half2float(src[i]) * sc, b = __half2float(src[i + d / 2]) * sc;
        if (rotate) {
            float f = powf(theta, -2.f * i / d) * pos, c, sn;
            sincosf(f, &sn, &c);
            const float ra = a * c - b * sn;
            b = b * c + a * sn;
            a = ra;
        }
        dst[i] = __float2half(a);
        dst[i + d / 2] = __float2half(b);
    }
}

static dim3 rope_grid(const pkvk_model_shape *s, int rows) {
    return dim3(rows, (s->hq + 2 * s->hkv + ROPE_HEADS - 1) / ROPE_HEADS);
}

// One block per (token, KV head): the first n tokens of a prompt from its pages
// into kc, vc [hkv][kv_rows][d].
__global__ void gather_kv_kernel(const __half *__restrict__ kpool, const __half *__restrict__ vpool,
                                 const int32_t *__restrict__ pages, int hkv, int d, int ps,
                                 int kv_rows, __half *__restrict__ kc, __half *__restrict__ vc) {
    const int t = blockIdx.x, h = blockIdx.y;
    const size_t from = (((size_t)pages[t / ps] * hkv + h) * ps + t % ps) * d;
    const size_t to = ((size_t)h * kv_rows + t) * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        kc[to + i] = kpool[from + i];
        vc[to + i] = vpool[from + i];
    }
}

// One block per score row (KV head, query, group member): P = softmax over the keys
// up to the query's position (the rest 0). Row r of a head is query r / G. Rows of
// up to PKVK_SOFTMAX_SMEM_KEYS keys are read once, into shared memory; longer ones
// three times.
__global__ void causal_softmax_kernel(const float *__restrict__ S, __half *__restrict__ P, int rows,
                                      int cols, int first_pos, int G) {
    __shared__ float sh[32];
    extern __shared__ float row_s[];
    const size_t row = blockIdx.x;
    const int valid = min(cols, first_pos + (int)(row % rows) / G + 1);
    const float *s = S + row * cols;
    if (cols <= PKVK_SOFTMAX_SMEM_KEYS) {
        for (int i = threadIdx.x; i < valid; i += blockDim.x) row_s[i] = s[i];
        __syncthreads();
        s = row_s;
    }
    __half *p = P + row * cols;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < valid; i += blockDim.x) m = fmaxf(m, s[i]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = m;
    __syncthreads();
    m = -INFINITY;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) m = fmaxf(m, sh[i]);
    __syncthreads();
    float z = 0.f;
    for (int i = threadIdx.x; i < valid; i += blockDim.x) z += __expf(s[i] - m);
    const float inv = 1.f / block_sum(z, sh);
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        p[i] = __float2half(i < valid ? __expf(s[i] - m) * inv : 0.f);
}

// The prefill attention's output from [hkv][cap_tokens][G][d] to [T][hq][d]: one
// block per (token, query head).
__global__ void unpermute_kernel(const __half *__restrict__ op, __half *__restrict__ o, int G,
                                 int d, int cap_tokens) {
    const int t = blockIdx.x, hd = blockIdx.y, h = hd / G, j = hd % G;
    const __half *src = op + (((size_t)h * cap_tokens + t) * G + j) * d;
    __half *dst = o + ((size_t)t * gridDim.y + hd) * d;
    for (int e = threadIdx.x; e < d; e += blockDim.x) dst[e] = src[e];
}

// a[r][j] = silu(y[r][j]) * y[r][inter + j]: each thread VEC columns of one row
// (VEC = 8: 16-byte loads and stores, when inter is a multiple of 8).
// With the norm folded into the gate and up weights, both are scaled by the row's
// 1 / rms first (nin; none: 1).
template <int VEC>
__global__ void silu_mul_kernel(const __half *__restrict__ y, __half *__restrict__ a, int inter,
                                norm_in nin) {
    const int j = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    const size_t r = blockIdx.y;
    __shared__ float sh[32];
    const float sc = nin.scale((int)r, sh);
    if (j >= inter) return;
    __half g[VEC], u[VEC], out[VEC];
    if (VEC == 8) {
        *(uint4 *)g = *(const uint4 *)(y + r * 2 * inter + j);
        *(uint4 *)u = *(const uint4 *)(y + r * 2 * inter + inter + j);
    } else {
        g[0] = y[r * 2 * inter + j], u[0] = y[r * 2 * inter + inter + j];
    }
    for (int k = 0; k < VEC; k++) {
        const float gf = __half2float(g[k]) * sc;
        out[k] = __float2half(gf / (1.f + __expf(-gf)) * __half2float(u[k]) * sc);
    }
    if (VEC == 8)
        *(uint4 *)(a + r * inter + j) = *(const uint4 *)out;
    else
        a[r * inter + j] = out[0];
}

static int silu_mul(cudaStream_t st, const void *y, void *a, int rows, int inter, norm_in nin) {
    if (rows <= 0) return PKVK_OK;
    if (rows > 65535) return pkvk_fail_msg(PKVK_ERR_INVALID, "silu: more than 65535 rows");
    if (inter % 8 == 0)
        silu_mul_kernel<8><<<dim3((inter / 8 + 255) / 256, rows), 256, 0, st>>>(
            (const __half *)y, (__half *)a, inter, nin);
    else
        silu_mul_kernel<1><<<dim3((inter + 255) / 256, rows), 256, 0, st>>>(
            (const __half *)y, (__half *)a, inter, nin);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

int pkvk_silu_mul(cudaStream_t st, const void *y, void *a, int rows, int inter) {
    return silu_mul(st, y, a, rows, inter, norm_in{});
}

// One block per row: tok[row] = argmax of its logits (the first of equal maxima).
__global__ void argmax_kernel(const __half *__restrict__ logits, int vocab,
                              int32_t *__restrict__ tok) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const __half *l = logits + (size_t)blockIdx.x * vocab;
    float best = -INFINITY;
    int bi = 0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        float v = __half2float(l[i]);
        if (v > best) best = v, bi = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
    }
    if ((threadIdx.x & 31) == 0) sv[threadIdx.x >> 5] = best, si[threadIdx.x >> 5] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); k++)
            if (sv[k] > best || (sv[k] == best && si[k] < bi)) best = sv[k], bi = si[k];
        tok[blockIdx.x] = bi;
    }
}

// Rows of a prefill chunk that sample (each prompt's last token) into dst, in order.
__global__ void gather_rows_kernel(const __half *__restrict__ x, __half *__restrict__ dst,
                                   segs_t segs, int hidden) {
    int k = -1, r = blockIdx.x;
    for (int i = 0; i < segs.n; i++)
        if (segs.s[i].last && r-- == 0) {
            k = i;
            break;
        }
    if (k < 0) return;
    const __half *src = x + (size_t)(segs.s[k].t0 + segs.s[k].len - 1) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        dst[(size_t)blockIdx.x * hidden + i] = src[i];
}

// ---- the model ---------------------------------------------------------------------
static __half *W(pkvk_model *m, int l, int t) {
    return m->w + (l < 0 ? (t == PKVK_W_EMBED  ? m->off_embed
                            : t == PKVK_W_NORM ? m->off_norm
                                               : m->off_head)
                         : m->off[l][t]);
}

static size_t score_floats(const pkvk_model_shape *s, int32_t max_prompt) {
    size_t need = (size_t)s->hq * key_pad(max_prompt); // one query row of every head
    return need > SCORE_FLOATS ? need : SCORE_FLOATS;
}

extern "C" int pkvk_model_prefill_kernel(const pkvk_model_shape *s) {
    if (s->prefill_attn == PKVK_PREFILL_CUBLAS) return PKVK_PREFILL_CUBLAS;
    const int G = s->hkv > 0 ? s->hq / s->hkv : 0;
    if (pkvk_flashinfer_built() && s->d == 128 && (G == 1 || G == 2 || G == 4 || G == 8))
        return PKVK_PREFILL_FLASHINFER;
    if (s->prefill_attn == PKVK_PREFILL_AUTO) return PKVK_PREFILL_CUBLAS;
    pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                  pkvk_flashinfer_built()
                      ? "FlashInfer's prefill attention: head dimension 128 and GQA group size "
                        "1, 2, 4 or 8 only"
                      : "FlashInfer's prefill attention was not built: configure with "
                        "-DPKV_FLASHINFER_DIR=third_party/flashinfer-0.7.4");
    return -1;
}

extern "C" size_t pkvk_model_bytes(const pkvk_model_shape *s, int32_t cap_tokens,
                                   int32_t max_prompt, int32_t n_pages) {
    size_t w = 2 * pkvk_model_tensor_elems(s, -1, PKVK_W_EMBED) +
               pkvk_model_tensor_elems(s, -1, PKVK_W_NORM);
    for (int t = 0; t < PKVK_W_LAYER_COUNT; t++)
        w += (size_t)s->layers * pkvk_model_tensor_elems(s, 0, t);
    const size_t T = cap_tokens, qkvw = (size_t)(s->hq + 2 * s->hkv) * s->d;
    const size_t hd = (size_t)s->hq * s->d;
    size_t act = T * (2 * s->hidden + qkvw + hd * 2 + 3 * (size_t)s->inter) +
                 (size_t)PKVK_MODEL_HEAD_ROWS * s->vocab;
    size_t kv = (size_t)s->layers * 2 * n_pages * s->hkv * s->page_size * s->d;
    size_t fixed = T * 8 + (size_t)n_pages * 4; /* tok, inv; the page list */
    if (pkvk_model_prefill_kernel(s) == PKVK_PREFILL_FLASHINFER)
        fixed += pkvk_fi_prefill_bytes(MAX_SEGS);
    else /* op, kc and vc; S and P */
        act += T * hd + 2 * (size_t)s->hkv * key_pad(max_prompt) * s->d,
            fixed += score_floats(s, max_prompt) * 6;
    return 2 * (w + act + kv) + fixed;
}

extern "C" int pkvk_model_create(const pkvk_ctx *c, pkvk_model **out, const pkvk_model_shape *s,
                                 int32_t cap_tokens, int32_t max_prompt, int32_t n_pages,
                                 uint64_t seed) {
    *out = nullptr;
    if (s->layers < 1 || s->layers > 1024 || s->d > 512 || s->hq % s->hkv || s->hidden <= 0)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "model: unsupported shape");
    pkvk_model *m = (pkvk_model *)calloc(1, sizeof *m);
    if (!m) return PKVK_ERR_OUT_OF_MEMORY;
    m->ctx = c;
    m->s = *s, m->cap_tokens = cap_tokens, m->max_prompt = max_prompt, m->n_pages = n_pages;
    m->seed = seed;
    size_t n = 0;
    for (int l = 0; l < s->layers; l++)
        for (int t = 0; t < PKVK_W_LAYER_COUNT; t++)
            m->off[l][t] = n, n += (pkvk_model_tensor_elems(s, l, t) + 7) / 8 * 8;
    m->off_embed = n, n += pkvk_model_tensor_elems(s, -1, PKVK_W_EMBED);
    m->off_norm = n, n += (pkvk_model_tensor_elems(s, -1, PKVK_W_NORM) + 7) / 8 * 8;
    m->off_head = n, n += pkvk_model_tensor_elems(s, -1, PKVK_W_HEAD);
    m->w_elems = n;
    m->pool = (size_t)n_pages * s->hkv * s->page_size * s->d;
    const size_t T = cap_tokens, qkvw = (size_t)(s->hq + 2 * s->hkv) * s->d;
    const size_t hd = (size_t)s->hq * s->d, sf = score_floats(s, max_prompt);
    const int pk = pkvk_model_prefill_kernel(s);
    int rc = pk < 0 ? PKVK_ERR_UNSUPPORTED : pkvk_malloc((void **)&m->w, n * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->kv, (size_t)s->layers * 2 * m->pool * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->x, T * s->hidden * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->xn, T * s->hidden * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->inv, T * 4);
    if (!rc) rc = pkvk_malloc((void **)&m->qkv, T * qkvw * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->o, T * hd * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->y, T * 2 * s->inter * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->a, T * s->inter * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->qp, T * hd * 2);
    if (!rc) rc = pkvk_memset(m->qp, 0, T * hd * 2);
    if (!rc && pk == PKVK_PREFILL_FLASHINFER)
        rc = pkvk_fi_prefill_create(c, &m->fip, s->hq, s->hkv, s->d, s->page_size, MAX_SEGS);
    m->kv_rows = key_pad(max_prompt);
    const size_t kvc = (size_t)s->hkv * m->kv_rows * s->d * 2;
    if (!rc && !m->fip) {
        rc = pkvk_malloc((void **)&m->op, T * hd * 2);
        if (!rc) rc = pkvk_malloc((void **)&m->kc, kvc);
        if (!rc) rc = pkvk_malloc((void **)&m->vc, kvc);
        if (!rc) rc = pkvk_memset(m->kc, 0, kvc); /* the padded keys stay finite */
        if (!rc) rc = pkvk_memset(m->vc, 0, kvc);
        if (!rc) rc = pkvk_malloc((void **)&m->S, sf * 4);
        if (!rc) rc = pkvk_malloc((void **)&m->P, sf * 2);
    }
    if (!rc) rc = pkvk_malloc((void **)&m->logits, (size_t)PKVK_MODEL_HEAD_ROWS * s->vocab * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->tok, T * 4);
    if (!rc) rc = pkvk_malloc((void **)&m->pages_d, (size_t)n_pages * 4);
    if (!rc) rc = pkvk_host_alloc((void **)&m->pages_h, (size_t)n_pages * 4);
    if (!rc) rc = pkvk_memset(m->tok, 0, T * 4);
    if (!rc) rc = pkvk_memset(m->kv, 0, (size_t)s->layers * 2 * m->pool * 2);
    for (int l = -1; l < s->layers && !rc; l++)
        for (int t = 0; t < (l < 0 ? 3 : (int)PKVK_W_LAYER_COUNT) && !rc; t++) {
            // The norms come before the tensors they fold into (t order).
            const __half *fold = l < 0             ? nullptr
                                 : t == PKVK_W_QKV ? W(m, l, PKVK_W_LN1)
                                 : t == PKVK_W_GU  ? W(m, l, PKVK_W_LN2)
                                                   : nullptr;
            const size_t cols =
                t == PKVK_W_QKV ? (size_t)(s->hq + 2 * s->hkv) * s->d : 2 * (size_t)s->inter;
            fill_weights<<<1024, 256, 0, m->ctx->stream>>>(
                W(m, l, t), pkvk_model_tensor_elems(s, l, t), seed, l, t,
                pkvk_model_fan_in(s, l, t), fold, cols);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) rc = pkvk_fail_cuda(e, "fill_weights", __FILE__, __LINE__);
        }
    if (!rc) {
        cublasStatus_t st = cublasCreate(&m->h);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(m->h, m->ctx->stream);
        if (st != CUBLAS_STATUS_SUCCESS) rc = cublas_fail(st, "cublasCreate");
    }
    if (!rc) rc = pkvk_sync(c);
    if (rc) {
        pkvk_model_destroy(m);
        return rc;
    }
    *out = m;
    return PKVK_OK;
}

extern "C" void pkvk_model_destroy(pkvk_model *m) {
    if (!m) return;
    if (m->h) cublasDestroy(m->h);
    pkvk_fi_prefill_destroy(m->fip);
    void *dev[] = {m->w,  m->kv, m->x,  m->xn, m->inv, m->qkv, m->o,      m->y,   m->a,
                   m->qp, m->op, m->kc, m->vc, m->S,   m->P,   m->logits, m->tok, m->pages_d};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) pkvk_free(dev[i]);
    pkvk_host_free(m->pages_h);
    free(m);
}

extern "C" uint16_t *pkvk_model_kv(pkvk_model *m, int l, int v) {
    return (uint16_t *)(m->kv + ((size_t)l * 2 + v) * m->pool);
}

static int norm(pkvk_model *m, const __half *x, __half *y, const __half *w, int rows) {
    if (rows <= 0) return PKVK_OK;
    const int h = m->s.hidden;
    if (h % 8 == 0 && h <= 8 * NORM_THREADS * NORM_REGS)
        rmsnorm_kernel<true><<<rows, NORM_THREADS, 0, m->ctx->stream>>>(x, y, w, h, m->s.eps);
    else
        rmsnorm_kernel<false><<<rows, NORM_THREADS, 0, m->ctx->stream>>>(x, y, w, h, m->s.eps);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

static int over(pkvk_model *m, int rows) {
    return rows > m->cap_tokens ? pkvk_fail_msg(PKVK_ERR_INVALID, "model: rows over capacity") : 0;
}

extern "C" int pkvk_model_decode_begin(pkvk_model *m, int rows) {
    if (over(m, rows)) return PKVK_ERR_INVALID;
    if (rows == 0) return PKVK_OK;
    segs_t none;
    none.n = 0;
    embed_kernel<<<rows, 128, 0, m->ctx->stream>>>(W(m, -1, PKVK_W_EMBED), m->x, m->tok, none,
                                                   m->s.hidden, m->s.vocab);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

// The RMSNorm of rows of x for the kernel that reads a GEMM over x W' (its weights
// folded into W'): over PKVK_NORM_FUSED_ROWS rows their 1 / rms into m->inv by a
// kernel of its own, else nothing (the reading kernel reduces each row itself).
static int row_norms(pkvk_model *m, int rows, norm_in *nin) {
    const pkvk_model_shape *s = &m->s;
    *nin = norm_in{m->x, nullptr, s->hidden, s->eps};
    if (rows <= PKVK_NORM_FUSED_ROWS) return PKVK_OK;
    inv_rms_kernel<<<rows, NORM_THREADS, 0, m->ctx->stream>>>(m->x, m->inv, s->hidden, s->eps);
    PKVK_CK_LAUNCH();
    nin->inv = m->inv;
    return PKVK_OK;
}
// The norm of rows from `first` on.
static norm_in rows_from(norm_in n, int first) {
    n.x += (size_t)first * n.hidden;
    if (n.inv) n.inv += first;
    return n;
}

// The norm and QKV of layer l over rows: qkv = x W'_QKV (the norm's weights folded
// in), *nin the rows' norm for the RoPE that reads it.
static int pre_gemm(pkvk_model *m, int l, int rows, norm_in *nin) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d;
    int rc = row_norms(m, rows, nin);
    return rc ? rc
              : gemm(m->h, rows, qkvw, s->hidden, m->x, s->hidden, W(m, l, PKVK_W_QKV), qkvw,
                     m->qkv, qkvw, 0.f);
}

extern "C" int pkvk_model_decode_pre(pkvk_model *m, int l, int rows, const int32_t *lens,
                                     const int32_t *bt, int bt_stride, uint16_t *q) {
    const pkvk_model_shape *s = &m->s;
    if (over(m, rows)) return PKVK_ERR_INVALID;
    if (rows == 0) return PKVK_OK;
    norm_in nin;
    int rc = pre_gemm(m, l, rows, &nin);
    if (rc) return rc;
    segs_t none;
    none.n = 0;
    rope_append_kernel<false><<<rope_grid(s, rows), 32 * ROPE_HEADS, 0, m->ctx->stream>>>(
        m->qkv, s->hq, s->hkv, s->d, s->page_size, s->rope_theta, lens, bt, bt_stride, nullptr,
        none, m->cap_tokens, 1, (__half *)pkvk_model_kv(m, l, 0), (__half *)pkvk_model_kv(m, l, 1),
        (__half *)q, nin);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

extern "C" int pkvk_model_post(pkvk_model *m, int l, int rows, const uint16_t *o) {
    const pkvk_model_shape *s = &m->s;
    if (over(m, rows)) return PKVK_ERR_INVALID;
    if (rows == 0) return PKVK_OK;
    const int hd = s->hq * s->d, h = s->hidden;
    norm_in nin;
    int rc = gemm(m->h, rows, h, hd, (const __half *)o, hd, W(m, l, PKVK_W_O), h, m->x, h, 1.f);
    if (!rc) rc = row_norms(m, rows, &nin);
    if (!rc) /* y = x W'_GU: the norm's weights folded in, its 1 / rms applied by the SiLU */
        rc = gemm(m->h, rows, 2 * s->inter, h, m->x, h, W(m, l, PKVK_W_GU), 2 * s->inter, m->y,
                  2 * s->inter, 0.f);
    if (!rc) rc = silu_mul(m->ctx->stream, m->y, m->a, rows, s->inter, nin);
    if (!rc)
        rc = gemm(m->h, rows, h, s->inter, m->a, s->inter, W(m, l, PKVK_W_DOWN), h, m->x, h, 1.f);
    return rc;
}

// Final norm over rows of src (already gathered), LM head and argmax into tok, in
// groups of PKVK_MODEL_HEAD_ROWS.
static int head(pkvk_model *m, const __half *src, int rows, int32_t *tok) {
    const pkvk_model_shape *s = &m->s;
    int rc = norm(m, src, m->xn, W(m, -1, PKVK_W_NORM), rows);
    for (int r0 = 0; !rc && r0 < rows; r0 += PKVK_MODEL_HEAD_ROWS) {
        int n = rows - r0 < PKVK_MODEL_HEAD_ROWS ? rows - r0 : PKVK_MODEL_HEAD_ROWS;
        rc = gemm(m->h, n, s->vocab, s->hidden, m->xn + (size_t)r0 * s->hidden, s->hidden,
                  W(m, -1, PKVK_W_HEAD), s->vocab, m->logits, s->vocab, 0.f);
        if (rc) break;
        argmax_kernel<<<n, 1024, 0, m->ctx->stream>>>(m->logits, s->vocab, tok + r0);
        PKVK_CK_LAUNCH();
    }
    m->last_rows = rows;
    return rc;
}

extern "C" int pkvk_model_decode_head(pkvk_model *m, int rows) {
    if (over(m, rows)) return PKVK_ERR_INVALID;
    return rows ? head(m, m->x, rows, m->tok) : PKVK_OK;
}

// The causal attention of one prompt piece g of a chunk, layer l.
static int prefill_attention(pkvk_model *m, int l, const seg_t &g) {
    const pkvk_model_shape *s = &m->s;
    const int G = s->hq / s->hkv, d = s->d, klen_max = g.q0 + g.len;
    cudaStream_t st = m->ctx->stream;
    gather_kv_kernel<<<dim3(klen_max, s->hkv), 64, 0, st>>>(
        (const __half *)pkvk_model_kv(m, l, 0), (const __half *)pkvk_model_kv(m, l, 1),
        m->pages_d + g.page_off, s->hkv, d, s->page_size, m->kv_rows, m->kc, m->vc);
    PKVK_CK_LAUNCH();
    const size_t sf = score_floats(s, m->max_prompt);
    int qc = (int)(sf / ((size_t)s->hq * key_pad(klen_max)));
    if (qc > g.len) qc = g.len;
    if (qc < 1) qc = 1;
    const float scale = 1.f / sqrtf((float)d), one = 1.f, zero = 0.f;
    const long long qstride = (long long)m->cap_tokens * G * d;
    for (int b = 0; b < g.len; b += qc) {
        const int nq = g.len - b < qc ? g.len - b : qc, R = nq * G;
        const int klen = key_pad(g.q0 + b + nq); // keys up to the block's last query, padded
        const __half *Q = m->qp + (size_t)(g.t0 + b) * G * d;
        // S^T (klen x R, column-major) = K (klen x d) Q^T, per KV head.
        cublasStatus_t cs = cublasGemmStridedBatchedEx(
            m->h, CUBLAS_OP_T, CUBLAS_OP_N, klen, R, d, &scale, m->kc, CUDA_R_16F, d,
            (long long)m->kv_rows * d, Q, CUDA_R_16F, d, qstride, &zero, m->S, CUDA_R_32F, klen,
            (long long)R * klen, s->hkv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) return cublas_fail(cs, "prefill QK^T");
        causal_softmax_kernel<<<s->hkv * R, 256, klen <= PKVK_SOFTMAX_SMEM_KEYS ? klen * 4 : 0,
                                st>>>(m->S, m->P, R, klen, g.q0 + b, G);
        PKVK_CK_LAUNCH();
        // O^T (d x R) = V^T (d x klen) P^T (klen x R), per KV head.
        cs = cublasGemmStridedBatchedEx(m->h, CUBLAS_OP_N, CUBLAS_OP_N, d, R, klen, &one, m->vc,
                                        CUDA_R_16F, d, (long long)m->kv_rows * d, m->P, CUDA_R_16F,
                                        klen, (long long)R * klen, &zero,
                                        m->op + (size_t)(g.t0 + b) * G * d, CUDA_R_16F, d, qstride,
                                        s->hkv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) return cublas_fail(cs, "prefill PV");
    }
    return PKVK_OK;
}

// FlashInfer's plan for the pieces of a chunk (its metadata from theirs): piece k's
// page list is its prompt's first ceil((q0 + len) / page_size) pages, which start
// at page_off and run up to the next piece's (only a chunk's last piece may stop
// short of its prompt's end, and no piece follows it).
static int plan_chunk(pkvk_model *m, const segs_t &segs) {
    const int ps = m->s.page_size, base = segs.s[0].page_off;
    int32_t qo[MAX_SEGS + 1], kv[MAX_SEGS + 1], last[MAX_SEGS];
    qo[0] = 0, kv[0] = 0;
    for (int k = 0; k < segs.n; k++) {
        const seg_t &g = segs.s[k];
        const int end = g.q0 + g.len, pages = (end + ps - 1) / ps;
        qo[k + 1] = qo[k] + g.len;
        kv[k + 1] = kv[k] + pages;
        last[k] = end - (pages - 1) * ps;
        if (k + 1 < segs.n && segs.s[k + 1].page_off - base != kv[k + 1])
            return pkvk_fail_msg(PKVK_ERR_INVALID, "model prefill: a piece's pages are not its "
                                                   "prompt's first pages");
    }
    return pkvk_fi_prefill_plan(m->fip, segs.n, qo, kv, last, m->pages_d + base);
}

// The causal attention of a chunk's pieces (T tokens, their Q in qp), layer l, into
// o [T][hq][d].
static int chunk_attention(pkvk_model *m, int l, const segs_t &segs, int T, __half *o) {
    const pkvk_model_shape *s = &m->s;
    if (m->fip)
        return pkvk_fi_prefill_run(m->fip, m->qp, pkvk_model_kv(m, l, 0), pkvk_model_kv(m, l, 1),
                                   o);
    for (int k = 0; k < segs.n; k++) {
        int rc = prefill_attention(m, l, segs.s[k]);
        if (rc) return rc;
    }
    unpermute_kernel<<<dim3(T, s->hq), 64, 0, m->ctx->stream>>>(m->op, o, s->hq / s->hkv, s->d,
                                                                m->cap_tokens);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

// One chunk of a prefill: T rows in segs.
static int prefill_chunk(pkvk_model *m, const segs_t &segs, int T, int heads) {
    const pkvk_model_shape *s = &m->s;
    cudaStream_t st = m->ctx->stream;
    if (m->fip) {
        int rc = plan_chunk(m, segs);
        if (rc) return rc;
    }
    embed_kernel<<<T, 128, 0, st>>>(W(m, -1, PKVK_W_EMBED), m->x, nullptr, segs, s->hidden,
                                    s->vocab);
    PKVK_CK_LAUNCH();
    for (int l = 0; l < s->layers; l++) {
        const bool probe = l == 0 && m->probe[0];
        if (probe) PKVK_CK(cudaEventRecord(m->probe[0], st));
        norm_in nin;
        int rc = pre_gemm(m, l, T, &nin);
        if (rc) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[1], st));
        rope_append_kernel<true><<<rope_grid(s, T), 32 * ROPE_HEADS, 0, st>>>(
            m->qkv, s->hq, s->hkv, s->d, s->page_size, s->rope_theta, nullptr, nullptr, 0,
            m->pages_d, segs, m->cap_tokens, m->fip != nullptr, (__half *)pkvk_model_kv(m, l, 0),
            (__half *)pkvk_model_kv(m, l, 1), m->qp, nin);
        PKVK_CK_LAUNCH();
        if (probe) PKVK_CK(cudaEventRecord(m->probe[2], st));
        if ((rc = chunk_attention(m, l, segs, T, m->o))) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[3], st));
        if ((rc = pkvk_model_post(m, l, T, (const uint16_t *)m->o))) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[4], st));
    }
    if (heads == 0) return PKVK_OK;
    // The sampling rows, gathered into qkv (free now), through the head.
    gather_rows_kernel<<<heads, 128, 0, st>>>(m->x, m->qkv, segs, s->hidden);
    PKVK_CK_LAUNCH();
    return head(m, m->qkv, heads, m->tok);
}

// The pieces' page lists to the device (each piece's first ceil((start + len) / ps)
// pages of its prompt), once the previous user of pages_h is done.
static int stage_pages(pkvk_model *m, int n, const int32_t *lens, const int32_t *starts,
                       const int32_t *pages) {
    const int ps = m->s.page_size;
    int32_t n_pages = 0;
    for (int i = 0; i < n; i++) {
        const int end = (starts ? starts[i] : 0) + lens[i];
        if (lens[i] < 1 || end > m->max_prompt)
            return pkvk_fail_msg(PKVK_ERR_INVALID, "model prefill: prompt longer than max_prompt");
        n_pages += (end + ps - 1) / ps;
    }
    if (n_pages > m->n_pages)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "model prefill: more pages than the pool");
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    memcpy(m->pages_h, pages, (size_t)n_pages * 4);
    return pkvk_h2d_async(m->ctx, m->pages_d, m->pages_h, (size_t)n_pages * 4);
}

extern "C" int pkvk_model_prefill(pkvk_model *m, int n, const int32_t *lens, const int32_t *pages,
                                  const int32_t *starts, const uint8_t *last) {
    const int ps = m->s.page_size;
    int rc = stage_pages(m, n, lens, starts, pages);
    segs_t segs;
    segs.n = 0;
    int T = 0, heads = 0, page_off = 0;
    for (int i = 0; i < n && !rc; i++) {
        const int q_begin = starts ? starts[i] : 0, q_end = q_begin + lens[i];
        for (int q0 = q_begin; q0 < q_end && !rc;) {
            int len = q_end - q0;
            if (len > m->cap_tokens - T) len = m->cap_tokens - T;
            seg_t &g = segs.s[segs.n++];
            g = seg_t{T, len, q0, page_off, i, q0 + len == q_end && (!last || last[i])};
            T += len, q0 += len, heads += g.last;
            if (T == m->cap_tokens || segs.n == MAX_SEGS) {
                rc = prefill_chunk(m, segs, T, heads);
                segs.n = 0, T = 0, heads = 0;
            }
        }
        page_off += (q_end + ps - 1) / ps;
    }
    if (!rc && segs.n) rc = prefill_chunk(m, segs, T, heads);
    return rc;
}

// Layer l's four GEMMs over rows of the activation buffers (their values as they are).
static int layer_gemms(pkvk_model *m, int l, int rows) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d, hd = s->hq * s->d, h = s->hidden;
    int rc = gemm(m->h, rows, qkvw, h, m->xn, h, W(m, l, PKVK_W_QKV), qkvw, m->qkv, qkvw, 0.f);
    if (!rc) rc = gemm(m->h, rows, h, hd, m->o, hd, W(m, l, PKVK_W_O), h, m->x, h, 1.f);
    if (!rc)
        rc = gemm(m->h, rows, 2 * s->inter, h, m->xn, h, W(m, l, PKVK_W_GU), 2 * s->inter, m->y,
                  2 * s->inter, 0.f);
    if (!rc)
        rc = gemm(m->h, rows, h, s->inter, m->a, s->inter, W(m, l, PKVK_W_DOWN), h, m->x, h, 1.f);
    return rc;
}

extern "C" int pkvk_model_warmup(pkvk_model *m) {
    const int ps = m->s.page_size;
    // cuBLAS picks its kernel by the width and loads it at its first use (10-15 ms on
    // the H200): every width up to 16, then every 8th to 512, 32nd to 2048, 128th on.
    for (int w = 1; w <= m->cap_tokens; w += w < 16 ? 1 : w < 512 ? 8 : w < 2048 ? 32 : 128) {
        int rc = layer_gemms(m, 0, w);
        if (!rc && w <= PKVK_MODEL_HEAD_ROWS)
            rc = gemm(m->h, w, m->s.vocab, m->s.hidden, m->xn, m->s.hidden, W(m, -1, PKVK_W_HEAD),
                      m->s.vocab, m->logits, m->s.vocab, 0.f);
        if (rc) return rc;
    }
    int most = m->cap_tokens < m->max_prompt ? m->cap_tokens : m->max_prompt;
    if (most > m->n_pages * ps) most = m->n_pages * ps;
    std::vector<int32_t> ids((size_t)(most + ps - 1) / ps);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = (int32_t)i;
    int rc = PKVK_OK;
    for (int len = 1; !rc; len *= 8) {
        const int32_t n = len < most ? len : most;
        rc = pkvk_model_prefill(m, 1, &n, ids.data(), nullptr, nullptr);
        if (n == most) break;
    }
    if (rc) return rc;
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    return PKVK_OK;
}

extern "C" int pkvk_model_mixed_begin(pkvk_model *m, int rows, int n, const int32_t *lens,
                                      const int32_t *pages, const int32_t *starts,
                                      const uint8_t *last) {
    const pkvk_model_shape *s = &m->s;
    int T = 0, heads = 0, page_off = 0;
    if (n > MAX_SEGS)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "model: more than 64 prompt chunks in one step");
    for (int i = 0; i < n; i++) T += lens[i];
    if (rows < 1) return pkvk_fail_msg(PKVK_ERR_INVALID, "model: a mixed step without rows");
    if (over(m, rows + T)) return PKVK_ERR_INVALID;
    int rc = stage_pages(m, n, lens, starts, pages);
    if (rc) return rc;
    segs_t &segs = m->mix_segs;
    segs.n = n;
    for (int i = 0, t0 = 0; i < n; i++) {
        const int q0 = starts ? starts[i] : 0;
        segs.s[i] = seg_t{t0, lens[i], q0, page_off, i, !last || last[i]};
        t0 += lens[i], heads += segs.s[i].last;
        page_off += (q0 + lens[i] + s->page_size - 1) / s->page_size;
    }
    m->mix_rows = rows, m->mix_T = T, m->mix_heads = heads;
    if (m->fip && n > 0 && (rc = plan_chunk(m, segs))) return rc;
    if ((rc = pkvk_model_decode_begin(m, rows))) return rc;
    if (T == 0) return PKVK_OK;
    embed_kernel<<<T, 128, 0, m->ctx->stream>>>(W(m, -1, PKVK_W_EMBED),
                                                m->x + (size_t)rows * s->hidden, nullptr, segs,
                                                s->hidden, s->vocab);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

extern "C" int pkvk_model_mixed_pre(pkvk_model *m, int l, const int32_t *lens, const int32_t *bt,
                                    int bt_stride, uint16_t *q) {
    const pkvk_model_shape *s = &m->s;
    const int rows = m->mix_rows, T = m->mix_T, W_ = (s->hq + 2 * s->hkv) * s->d;
    norm_in nin;
    int rc = pre_gemm(m, l, rows + T, &nin);
    if (rc) return rc;
    segs_t none;
    none.n = 0;
    __half *kp = (__half *)pkvk_model_kv(m, l, 0), *vp = (__half *)pkvk_model_kv(m, l, 1);
    rope_append_kernel<false><<<rope_grid(s, rows), 32 * ROPE_HEADS, 0, m->ctx->stream>>>(
        m->qkv, s->hq, s->hkv, s->d, s->page_size, s->rope_theta, lens, bt, bt_stride, nullptr,
        none, m->cap_tokens, 1, kp, vp, (__half *)q, nin);
    PKVK_CK_LAUNCH();
    if (T == 0) return PKVK_OK;
    rope_append_kernel<true><<<rope_grid(s, T), 32 * ROPE_HEADS, 0, m->ctx->stream>>>(
        m->qkv + (size_t)rows * W_, s->hq, s->hkv, s->d, s->page_size, s->rope_theta, nullptr,
        nullptr, 0, m->pages_d, m->mix_segs, m->cap_tokens, m->fip != nullptr, kp, vp, m->qp,
        rows_from(nin, rows));
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

extern "C" int pkvk_model_mixed_post(pkvk_model *m, int l, const uint16_t *o) {
    const pkvk_model_shape *s = &m->s;
    const int rows = m->mix_rows, T = m->mix_T;
    const size_t hd = (size_t)s->hq * s->d;
    cudaStream_t st = m->ctx->stream;
    if ((const void *)o != (const void *)m->o)
        PKVK_CK(cudaMemcpyAsync(m->o, o, (size_t)rows * hd * 2, cudaMemcpyDeviceToDevice, st));
    if (T > 0) {
        int rc = chunk_attention(m, l, m->mix_segs, T, m->o + (size_t)rows * hd);
        if (rc) return rc;
    }
    return pkvk_model_post(m, l, rows + T, (const uint16_t *)m->o);
}

extern "C" int pkvk_model_mixed_head(pkvk_model *m) {
    const pkvk_model_shape *s = &m->s;
    const int rows = m->mix_rows, heads = m->mix_heads;
    cudaStream_t st = m->ctx->stream;
    // The rows, then the chunks that end their prompts, gathered into qkv (free now).
    PKVK_CK(
        cudaMemcpyAsync(m->qkv, m->x, (size_t)rows * s->hidden * 2, cudaMemcpyDeviceToDevice, st));
    if (heads > 0) {
        gather_rows_kernel<<<heads, 128, 0, st>>>(m->x + (size_t)rows * s->hidden,
                                                  m->qkv + (size_t)rows * s->hidden, m->mix_segs,
                                                  s->hidden);
        PKVK_CK_LAUNCH();
    }
    return head(m, m->qkv, rows + heads, m->tok);
}

extern "C" int pkvk_model_read(pkvk_model *m, int rows, uint16_t *logits, int32_t *tokens) {
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    int last = (rows - 1) % PKVK_MODEL_HEAD_ROWS + 1;
    if (logits)
        PKVK_CK(
            cudaMemcpy(logits, m->logits, (size_t)last * m->s.vocab * 2, cudaMemcpyDeviceToHost));
    if (tokens) PKVK_CK(cudaMemcpy(tokens, m->tok, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    return PKVK_OK;
}

static int median_ms(std::vector<float> &v, float *ms) {
    std::sort(v.begin(), v.end());
    *ms = v.empty() ? 0.f : v[v.size() / 2];
    return PKVK_OK;
}

// Times reps calls of f (each after an L2 flush) with events; the median.
template <class F> static int time_reps(const pkvk_ctx *c, int reps, F f, float *ms) {
    pkvk_event *a = nullptr, *b = nullptr;
    int rc = pkvk_event_create(c, &a);
    if (!rc) rc = pkvk_event_create(c, &b);
    std::vector<float> t;
    for (int r = 0; r < reps + 2 && !rc; r++) {
        float x;
        rc = pkvk_flush_l2(c);
        if (!rc) rc = pkvk_event_record(a);
        if (!rc) rc = f();
        if (!rc) rc = pkvk_event_record(b);
        if (!rc) rc = pkvk_event_elapsed(a, b, &x);
        if (!rc && r >= 2) t.push_back(x); // two warm-up calls
    }
    pkvk_event_destroy(a);
    pkvk_event_destroy(b);
    return rc ? rc : median_ms(t, ms);
}

extern "C" int pkvk_model_time_gemm(pkvk_model *m, int g, int rows, int reps, float *ms) {
    const pkvk_model_shape *s = &m->s;
    if (over(m, rows) || g < 0 || g > 4) return PKVK_ERR_INVALID;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d, hd = s->hq * s->d, h = s->hidden;
    const int k[5] = {h, hd, h, s->inter, h}, n[5] = {qkvw, h, 2 * s->inter, h, s->vocab};
    const __half *w[5] = {W(m, 0, PKVK_W_QKV), W(m, 0, PKVK_W_O), W(m, 0, PKVK_W_GU),
                          W(m, 0, PKVK_W_DOWN), W(m, -1, PKVK_W_HEAD)};
    if (g == 4 && rows > PKVK_MODEL_HEAD_ROWS) return PKVK_ERR_INVALID;
    // Operands from the activation buffers (each large enough), output to y / logits.
    __half *out = g == 4 ? m->logits : g == 0 ? m->qkv : g == 2 ? m->y : m->x;
    const __half *in = g == 1 ? m->o : g == 3 ? m->a : m->xn;
    return time_reps(
        m->ctx, reps,
        [&] { return gemm(m->h, rows, n[g], k[g], in, k[g], w[g], n[g], out, n[g], 0.f); }, ms);
}

extern "C" int pkvk_model_time_prefill_attn(pkvk_model *m, int n, const int32_t *lens, int reps,
                                            float *ms) {
    const int ps = m->s.page_size;
    if (n < 1 || n > MAX_SEGS)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "prefill timing: 1-64 prompts");
    segs_t segs;
    segs.n = n;
    int T = 0, pages = 0;
    for (int i = 0; i < n; i++) {
        segs.s[i] = seg_t{T, lens[i], 0, pages, i, 1};
        T += lens[i], pages += (lens[i] + ps - 1) / ps;
    }
    if (over(m, T)) return PKVK_ERR_INVALID;
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; i++) ids[i] = i;
    int rc = stage_pages(m, n, lens, nullptr, ids.data());
    if (!rc && m->fip) rc = plan_chunk(m, segs);
    return rc ? rc
              : time_reps(
                    m->ctx, reps, [&] { return chunk_attention(m, 0, segs, T, m->o); }, ms);
}

extern "C" int pkvk_model_time_prefill_parts(pkvk_model *m, int n, const int32_t *lens, int reps,
                                             float parts[5]) {
    const int ps = m->s.page_size;
    int32_t pages = 0;
    for (int i = 0; i < n; i++) pages += (lens[i] + ps - 1) / ps;
    if (pages > m->n_pages)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "prefill timing: more pages than the model's");
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; i++) ids[i] = i;
    std::vector<float> t[PROBES];
    pkvk_event *a = nullptr, *b = nullptr;
    int rc = pkvk_event_create(m->ctx, &a);
    if (!rc) rc = pkvk_event_create(m->ctx, &b);
    for (int k = 0; k < PROBES && !rc; k++)
        if (cudaEventCreate(&m->probe[k]) != cudaSuccess)
            rc = pkvk_fail_msg(PKVK_ERR_CUDA, "prefill timing: cudaEventCreate");
    for (int r = 0; r < reps + 1 && !rc; r++) { // one warm-up
        float x, y;
        rc = pkvk_event_record(a);
        if (!rc) rc = pkvk_model_prefill(m, n, lens, ids.data(), nullptr, nullptr);
        if (!rc) rc = pkvk_event_record(b);
        if (!rc) rc = pkvk_event_elapsed(a, b, &x);
        for (int k = 1; k < PROBES && !rc; k++) {
            if (cudaEventElapsedTime(&y, m->probe[k - 1], m->probe[k]) != cudaSuccess)
                rc = pkvk_fail_msg(PKVK_ERR_CUDA, "prefill timing: cudaEventElapsedTime");
            else if (r)
                t[k - 1].push_back(y);
        }
        if (!rc && r) t[PROBES - 1].push_back(x);
    }
    for (int k = 0; k < PROBES; k++) {
        if (m->probe[k]) cudaEventDestroy(m->probe[k]);
        m->probe[k] = nullptr;
        if (!rc) median_ms(t[k], &parts[k]);
    }
    pkvk_event_destroy(a);
    pkvk_event_destroy(b);
    return rc;
}

extern "C" int pkvk_model_time_gemms_forward(pkvk_model *m, int rows, float *ms) {
    if (over(m, rows)) return PKVK_ERR_INVALID;
    auto forward = [&] {
        int rc = 0;
        for (int l = 0; l < m->s.layers && !rc; l++) rc = layer_gemms(m, l, rows);
        return rc;
    };
    return time_reps(m->ctx, 3, forward, ms);
}

// count back-to-back n^3 GEMMs on fresh operands; reps medians of their mean.
extern "C" int pkvk_time_square_gemm(const pkvk_ctx *ctx, int n, int reps, float *ms) {
    return pkvk_time_square_gemms(ctx, n, 1, reps, ms);
}

extern "C" int pkvk_time_square_gemms(const pkvk_ctx *ctx, int n, int count, int reps, float *ms) {
    __half *a = nullptr, *b = nullptr, *c = nullptr;
    cublasHandle_t h = nullptr;
    size_t bytes = (size_t)n * n * 2;
    int rc = pkvk_malloc((void **)&a, bytes);
    if (!rc) rc = pkvk_malloc((void **)&b, bytes);
    if (!rc) rc = pkvk_malloc((void **)&c, bytes);
    if (!rc) rc = pkvk_memset(a, 0x3c, bytes); // small positive halves
    if (!rc) rc = pkvk_memset(b, 0x3c, bytes);
    if (!rc) {
        cublasStatus_t st = cublasCreate(&h);
        if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(h, ctx->stream);
        if (st != CUBLAS_STATUS_SUCCESS) rc = cublas_fail(st, "cublasCreate");
    }
    auto run = [&] {
        int rc = 0;
        for (int i = 0; i < count && !rc; i++) rc = gemm(h, n, n, n, a, n, b, n, c, n, 0.f);
        return rc;
    };
    if (!rc) rc = time_reps(ctx, reps, run, ms);
    if (!rc) *ms /= count;
    if (h) cublasDestroy(h);
    pkvk_free(a), pkvk_free(b), pkvk_free(c);
    return rc;
}

extern "C" int pkvk_model_set_tokens(pkvk_model *m, int rows, const int32_t *tokens) {
    if (over(m, rows)) return PKVK_ERR_INVALID;
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    PKVK_CK(cudaMemcpy(m->tok, tokens, (size_t)rows * 4, cudaMemcpyHostToDevice));
    return PKVK_OK;
}

extern "C" int pkvk_model_read_hidden(pkvk_model *m, int rows, uint16_t *x) {
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    PKVK_CK(cudaMemcpy(x, m->x, (size_t)rows * m->s.hidden * 2, cudaMemcpyDeviceToHost));
    return PKVK_OK;
}
