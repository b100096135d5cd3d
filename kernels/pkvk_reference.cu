// The FP32 GPU reference that checks large shapes (pkvk_gpu_reference), of every Q and
// KV type the kernels take.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

#include "pkvk_cuda.h"

// One block per (row, query token, query head), two exact passes and no scratch memory: the
// maximum score over the row (a max reduction), then, blockDim tokens at a time, the
// weights exp(s - max) into shared memory, summed, and one thread per dimension
// accumulating w * v. The scores are computed in both passes. Slow and plain.
constexpr int REF_THREADS = 256;

// Element i of an array of type t (pkvk_dtype; FP8: the code times scale), as a float.
__device__ __forceinline__ float elem(const void *x, size_t i, int t, float scale) {
    if (t == PKVK_FP8_E4M3)
        return __half2float(__half(__nv_cvt_fp8_to_halfraw(
                   static_cast<const __nv_fp8_storage_t *>(x)[i], __NV_E4M3))) *
               scale;
    return t == PKVK_BF16 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(x)[i])
                          : __half2float(static_cast<const __half *>(x)[i]);
}

struct RefArgs {
    const void *q, *k, *v;
    const float *k_scale, *v_scale; // FP8 KV: [page][hkv]
    const int32_t *bt, *lens;
    int32_t bt_stride;
    int hq, hkv, ps, d, qt, kvt; // qt, kvt: Q's and KV's pkvk_dtype
    int qlen;                    // query tokens a row (pkvk_batch.q_len, at least 1)
    float scale;
    float *o;
};

// Token t of (row, kvh): its page's K (or V) head row's first element, and its scale.
__device__ size_t ref_at(const RefArgs &a, int row, int kvh, int t, const float *scales,
                         float *sc) {
    const int page = a.bt[(size_t)row * a.bt_stride + t / a.ps];
    *sc = a.kvt == PKVK_FP8_E4M3 ? scales[(size_t)page * a.hkv + kvh] : 1.f;
    return (((size_t)page * a.hkv + kvh) * a.ps + t % a.ps) * a.d;
}

__device__ float ref_score(const RefArgs &a, const float *qs, int row, int kvh, int t) {
    float sc;
    const size_t at = ref_at(a, row, kvh, t, a.k_scale, &sc);
    float s = 0;
    for (int j = 0; j < a.d; j++) s += qs[j] * elem(a.k, at + j, a.kvt, sc);
    return s * a.scale;
}

static __global__ void reference_kernel(const RefArgs a) {
    extern __shared__ float sh[]; // q[d], red[REF_THREADS], w[REF_THREADS]
    const int d = a.d;
    float *qs = sh, *red = sh + d, *w = red + REF_THREADS;
    // Query token jq attends the keys up to its own position (a verify step's causal mask).
    const int row = blockIdx.x, jq = blockIdx.y / a.hq, h = blockIdx.y % a.hq;
    const int kvh = h / (a.hq / a.hkv), len = a.lens[row] - a.qlen + jq + 1;
    const size_t at = (((size_t)row * a.qlen + jq) * a.hq + h) * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) qs[j] = elem(a.q, at + j, a.qt, 1.f);
    __syncthreads();
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < len; t += blockDim.x)
        mx = fmaxf(mx, ref_score(a, qs, row, kvh, t));
    red[threadIdx.x] = mx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0, acc = 0; // acc: this thread's dimension (threadIdx.x < d)
    for (int t0 = 0; t0 < len; t0 += blockDim.x) {
        int t = t0 + threadIdx.x;
        float x = t < len ? expf(ref_score(a, qs, row, kvh, t) - mx) : 0.f;
        w[threadIdx.x] = x;
        sum += x;
        __syncthreads();
        int n = min((int)blockDim.x, len - t0);
        if (threadIdx.x < d)
            for (int i = 0; i < n; i++) {
                float sc;
                const size_t at = ref_at(a, row, kvh, t0 + i, a.v_scale, &sc);
                acc += w[i] * elem(a.v, at + threadIdx.x, a.kvt, sc);
            }
        __syncthreads();
    }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x < d) a.o[at + threadIdx.x] = acc / red[0];
}

// Enqueued on the context's stream: no allocation, no copy, no wait.
extern "C" int pkvk_gpu_reference(const pkvk_ctx *c, const pkvk_batch *b, float *o32) {
    const pkvk_shape &s = b->shape;
    if (b->n_rows == 0) return PKVK_OK;
    if (s.d > REF_THREADS) return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "reference: head dim > 256");
    if ((s.dtype != PKVK_FP16 && s.dtype != PKVK_BF16) || s.kv_dtype < 0 ||
        s.kv_dtype >= PKVK_DTYPES)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "reference: Q FP16 or BF16 on the GPU");
    if (s.kv_dtype == PKVK_FP8_E4M3 && (!b->k_scale || !b->v_scale))
        return pkvk_fail_msg(PKVK_ERR_INVALID, "reference: FP8 KV without its scales");
    const RefArgs a = {
        b->q,           b->k_cache,  b->v_cache,   b->k_scale, b->v_scale,
        b->block_table, b->seq_lens, b->bt_stride, s.hq,       s.hkv,
        s.page_size,    s.d,         s.dtype,      s.kv_dtype, b->q_len > 1 ? b->q_len : 1,
        b->sm_scale,    o32};
    const dim3 grid(b->n_rows, s.hq * a.qlen);
    reference_kernel<<<grid, REF_THREADS, (s.d + 2 * REF_THREADS) * sizeof(float), c->stream>>>(a);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}
