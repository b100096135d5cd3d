// Tokens in and out of the served model: the embedding, greedy sampling, and the
// rows of a prefill chunk that sample.
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// One block per row: x[row] = embed[token]. tok != NULL: decode rows' tokens; else
// the prefill chunk's prompt tokens.
static __global__ void embed_kernel(const elem16 *__restrict__ emb, elem16 *__restrict__ x,
                                    const int32_t *__restrict__ tok, segs_t segs, int hidden,
                                    int vocab, const int32_t *__restrict__ lens, int qlen) {
    int r = blockIdx.x, t;
    if (tok) { // token row r: row i's token j (j > 0: a verify step's proposal)
        const int i = r / qlen, j = r % qlen;
        t = j ? pkvk_prompt_token(i, lens[i] - qlen + j, vocab) : tok[i] % vocab;
        if (t < 0) t += vocab;
    } else {
        int k = 0;
        while (k + 1 < segs.n && r >= segs.s[k + 1].t0) k++;
        const seg_t &g = segs.s[k];
        t = pkvk_prompt_token(g.req, g.q0 + r - g.t0, vocab);
    }
    const elem16 *e = emb + (size_t)t * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[(size_t)r * hidden + i] = e[i];
}

// One block per row: tok[row] = argmax of its logits (the first of equal maxima).
template <class T>
static __global__ void argmax_kernel(const T *__restrict__ logits, int vocab,
                                     int32_t *__restrict__ tok) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const T *l = logits + (size_t)blockIdx.x * vocab;
    float best = -INFINITY;
    int bi = 0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        float v = to_f(l[i]);
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
static __global__ void gather_rows_kernel(const elem16 *__restrict__ x, elem16 *__restrict__ dst,
                                          segs_t segs, int hidden) {
    int k = -1, r = blockIdx.x;
    for (int i = 0; i < segs.n; i++)
        if (segs.s[i].last && r-- == 0) {
            k = i;
            break;
        }
    if (k < 0) return;
    const elem16 *src = x + (size_t)(segs.s[k].t0 + segs.s[k].len - 1) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        dst[(size_t)blockIdx.x * hidden + i] = src[i];
}

int embed(cudaStream_t st, const elem16 *emb, elem16 *x, const int32_t *tok, const segs_t &segs,
          int rows, int hidden, int vocab, const int32_t *lens, int qlen) {
    embed_kernel<<<rows, 128, 0, st>>>(emb, x, tok, segs, hidden, vocab, lens, qlen);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

int argmax(cudaStream_t st, int dtype, const elem16 *logits, int rows, int vocab, int32_t *tok) {
    with_t(dtype, [&](auto t) {
        using T = decltype(t);
        argmax_kernel<T><<<rows, 1024, 0, st>>>((const T *)logits, vocab, tok);
        return 0;
    });
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

int gather_rows(cudaStream_t st, const elem16 *x, elem16 *dst, const segs_t &segs, int heads,
                int hidden) {
    gather_rows_kernel<<<heads, 128, 0, st>>>(x, dst, segs, hidden);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace pkvkm
