// The prefill's causal attention over a chunk of prompt pieces: FlashInfer's batch
// prefill kernel over the paged cache where it is built, else cuBLAS (scores, a causal
// softmax, PV) per piece and KV head.
#include <math.h>

#include "pkvk_model_impl.cuh"

namespace pkvkm {

// One block per (token, KV head): the first n tokens of a prompt from its pages
// into kc, vc [hkv][kv_rows][d], as T (FP8 codes widened: scale 1).
template <class T, class KT>
static __global__ void gather_kv_kernel(const KT *__restrict__ kpool, const KT *__restrict__ vpool,
                                        const int32_t *__restrict__ pages, int hkv, int d, int ps,
                                        int kv_rows, T *__restrict__ kc, T *__restrict__ vc) {
    const int t = blockIdx.x, h = blockIdx.y;
    const size_t from = (((size_t)pages[t / ps] * hkv + h) * ps + t % ps) * d;
    const size_t to = ((size_t)h * kv_rows + t) * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        kc[to + i] = from_f<T>(to_f(kpool[from + i]));
        vc[to + i] = from_f<T>(to_f(vpool[from + i]));
    }
}

// One block per score row (KV head, query, group member): P = softmax over the keys
// up to the query's position (the rest 0). Row r of a head is query r / G. Rows of
// up to PKVK_SOFTMAX_SMEM_KEYS keys are read once, into shared memory; longer ones
// three times.
template <class T>
static __global__ void causal_softmax_kernel(const float *__restrict__ S, T *__restrict__ P,
                                             int rows, int cols, int first_pos, int G) {
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
    T *p = P + row * cols;
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
        p[i] = from_f<T>(i < valid ? __expf(s[i] - m) * inv : 0.f);
}

// The prefill attention's output from [hkv][cap_tokens][G][d] to [T][hq][d]: one
// block per (token, query head).
static __global__ void unpermute_kernel(const elem16 *__restrict__ op, elem16 *__restrict__ o,
                                        int G, int d, int cap_tokens) {
    const int t = blockIdx.x, hd = blockIdx.y, h = hd / G, j = hd % G;
    const elem16 *src = op + (((size_t)h * cap_tokens + t) * G + j) * d;
    elem16 *dst = o + ((size_t)t * gridDim.y + hd) * d;
    for (int e = threadIdx.x; e < d; e += blockDim.x) dst[e] = src[e];
}

// The causal attention of one prompt piece g of a chunk, layer l.
static int prefill_attention(pkvk_model *m, int l, const seg_t &g) {
    const pkvk_model_shape *s = &m->s;
    const int G = s->hq / s->hkv, d = s->d, klen_max = g.q0 + g.len;
    cudaStream_t st = m->ctx->stream;
    with_tk(s, [&](auto t, auto kt) {
        using T = decltype(t);
        using KT = decltype(kt);
        gather_kv_kernel<T, KT><<<dim3(klen_max, s->hkv), 64, 0, st>>>(
            (const KT *)pkvk_model_kv(m, l, 0), (const KT *)pkvk_model_kv(m, l, 1),
            m->pages_d + g.page_off, s->hkv, d, s->page_size, m->kv_rows, (T *)m->kc, (T *)m->vc);
        return 0;
    });
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
        const elem16 *Q = m->qp + (size_t)(g.t0 + b) * G * d;
        // S^T (klen x R, column-major) = K (klen x d) Q^T, per KV head.
        cublasStatus_t cs = pkvk_cublas.gemm_strided_batched_ex(
            m->h, CUBLAS_OP_T, CUBLAS_OP_N, klen, R, d, &scale, m->kc, m->ct, d,
            (long long)m->kv_rows * d, Q, m->ct, d, qstride, &zero, m->S, CUDA_R_32F, klen,
            (long long)R * klen, s->hkv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) return pkvk_blas_fail(cs, "prefill QK^T");
        with_t(s->dtype, [&](auto t) {
            using T = decltype(t);
            causal_softmax_kernel<T>
                <<<s->hkv * R, 256, klen <= PKVK_SOFTMAX_SMEM_KEYS ? klen * 4 : 0, st>>>(
                    m->S, (T *)m->P, R, klen, g.q0 + b, G);
            return 0;
        });
        PKVK_CK_LAUNCH();
        // O^T (d x R) = V^T (d x klen) P^T (klen x R), per KV head.
        cs = pkvk_cublas.gemm_strided_batched_ex(
            m->h, CUBLAS_OP_N, CUBLAS_OP_N, d, R, klen, &one, m->vc, m->ct, d,
            (long long)m->kv_rows * d, m->P, m->ct, klen, (long long)R * klen, &zero,
            m->op + (size_t)(g.t0 + b) * G * d, m->ct, d, qstride, s->hkv, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) return pkvk_blas_fail(cs, "prefill PV");
    }
    return PKVK_OK;
}

// FlashInfer's plan for the pieces of a chunk (its metadata from theirs): piece k's
// page list is its prompt's first ceil((q0 + len) / page_size) pages, which start
// at page_off and run up to the next piece's (only a chunk's last piece may stop
// short of its prompt's end, and no piece follows it).
int plan_chunk(pkvk_model *m, const segs_t &segs) {
    const int ps = m->s.page_size, base = segs.s[0].page_off;
    int32_t qo[PKVK_MAX_PIECES + 1], kv[PKVK_MAX_PIECES + 1], last[PKVK_MAX_PIECES];
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
int chunk_attention(pkvk_model *m, int l, const segs_t &segs, int T, elem16 *o) {
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

} // namespace pkvkm
