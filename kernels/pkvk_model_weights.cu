// The served model's memory: its size, its weights drawn on the device (the norms
// folded into the GEMMs that follow them), its activations and KV pools.
#include <stdlib.h>
#include <string.h>

#include "pkvk_model_impl.cuh"

using namespace pkvkm;

// ---- weights -----------------------------------------------------------------------
// fold (NULL: none): the RMSNorm weights [n / cols] folded into the rows of this
// [n / cols][cols] tensor, W' = diag(fold) W, rounded once.
template <class T>
static __global__ void fill_weights(T *w, size_t n, uint64_t seed, int l, int t, int fan_in,
                                    const T *fold, size_t cols) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = from_f<T>(pkvk_model_weight(seed, l, t, i, fan_in) *
                         (fold ? to_f(fold[i / cols]) : 1.f));
}

namespace pkvkm {

size_t score_floats(const pkvk_model_shape *s, int32_t max_prompt) {
    size_t need = (size_t)s->hq * key_pad(max_prompt); // one query row of every head
    return need > SCORE_FLOATS ? need : SCORE_FLOATS;
}

} // namespace pkvkm

extern "C" int pkvk_model_prefill_kernel(const pkvk_model_shape *s) {
    if (s->prefill_attn == PKVK_PREFILL_CUBLAS) return PKVK_PREFILL_CUBLAS;
    const int G = s->hkv > 0 ? s->hq / s->hkv : 0;
    if (pkvk_flashinfer_built() && s->d == 128 && pkv_flashinfer_group(G))
        return PKVK_PREFILL_FLASHINFER;
    if (s->prefill_attn == PKVK_PREFILL_AUTO) return PKVK_PREFILL_CUBLAS;
    pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                  pkvk_flashinfer_built()
                      ? "FlashInfer's prefill attention: head dimension 128, GQA group size "
                        "1, 2, 4 or 8 only"
                      : "FlashInfer's prefill attention was not built: configure with "
                        "-DPKV_FLASHINFER_DIR=third_party/flashinfer-0.7.4");
    return -1;
}

extern "C" size_t pkvk_model_weight_bytes(const pkvk_model_shape *s) {
    size_t w = 2 * pkvk_model_tensor_elems(s, -1, PKVK_W_EMBED) +
               pkvk_model_tensor_elems(s, -1, PKVK_W_NORM);
    for (int t = 0; t < PKVK_W_LAYER_COUNT; t++)
        w += (size_t)s->layers * pkvk_model_tensor_elems(s, 0, t);
    return 2 * w;
}

extern "C" size_t pkvk_model_bytes(const pkvk_model_shape *s, int32_t cap_tokens,
                                   int32_t max_prompt, int32_t n_pages) {
    const size_t w = pkvk_model_weight_bytes(s) / 2;
    const size_t T = cap_tokens, qkvw = (size_t)(s->hq + 2 * s->hkv) * s->d;
    const size_t hd = (size_t)s->hq * s->d;
    size_t act = T * (2 * s->hidden + qkvw + hd * 2 + 3 * (size_t)s->inter) +
                 (size_t)PKVK_MODEL_HEAD_ROWS * s->vocab;
    const size_t kv = (size_t)s->layers * 2 * n_pages * s->hkv * s->page_size * s->d *
                      pkvk_dtype_bytes(s->kv_dtype);
    size_t fixed = T * 8 + (size_t)n_pages * 4; /* tok, inv; the page list */
    if (pkvk_model_prefill_kernel(s) == PKVK_PREFILL_FLASHINFER)
        fixed += pkvk_fi_prefill_bytes(PKVK_MAX_PIECES);
    else /* op, kc and vc; S and P */
        act += T * hd + 2 * (size_t)s->hkv * key_pad(max_prompt) * s->d,
            fixed += score_floats(s, max_prompt) * 6;
    return 2 * (w + act) + kv + fixed;
}

extern "C" int pkvk_model_create(const pkvk_ctx *c, pkvk_model **out, const pkvk_model_shape *s,
                                 int32_t cap_tokens, int32_t max_prompt, int32_t n_pages,
                                 uint64_t seed) {
    return pkvk_model_create_sharing(c, out, s, cap_tokens, max_prompt, n_pages, seed, nullptr);
}

extern "C" int pkvk_model_create_sharing(const pkvk_ctx *c, pkvk_model **out,
                                         const pkvk_model_shape *s, int32_t cap_tokens,
                                         int32_t max_prompt, int32_t n_pages, uint64_t seed,
                                         const pkvk_model *weights) {
    *out = nullptr;
    if (s->layers < 1 || s->layers > 1024 || s->d > 512 || s->hq % s->hkv || s->hidden <= 0)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "model: unsupported shape");
    if ((s->dtype != PKVK_FP16 && s->dtype != PKVK_BF16) ||
        (s->kv_dtype != s->dtype && s->kv_dtype != PKVK_FP8_E4M3))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "model: FP16 or BF16 weights and activations, "
                                                   "their type or FP8 E4M3 in the K/V pools");
    if (weights && (memcmp(&weights->s, s, sizeof *s) || weights->seed != seed))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                             "model: shares the weights of a model of another shape or seed");
    pkvk_model *m = (pkvk_model *)calloc(1, sizeof *m);
    if (!m) return PKVK_ERR_OUT_OF_MEMORY;
    m->ctx = c;
    m->s = *s, m->cap_tokens = cap_tokens, m->max_prompt = max_prompt, m->n_pages = n_pages;
    m->seed = seed;
    m->ct = s->dtype == PKVK_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    size_t n = 0;
    for (int l = 0; l < s->layers; l++)
        for (int t = 0; t < PKVK_W_LAYER_COUNT; t++)
            m->off[l][t] = n, n += (pkvk_model_tensor_elems(s, l, t) + 7) / 8 * 8;
    m->off_embed = n, n += pkvk_model_tensor_elems(s, -1, PKVK_W_EMBED);
    m->off_norm = n, n += (pkvk_model_tensor_elems(s, -1, PKVK_W_NORM) + 7) / 8 * 8;
    m->off_head = n, n += pkvk_model_tensor_elems(s, -1, PKVK_W_HEAD);
    m->w_elems = n;
    m->pool = (size_t)n_pages * s->hkv * s->page_size * s->d * pkvk_dtype_bytes(s->kv_dtype);
    const size_t T = cap_tokens, qkvw = (size_t)(s->hq + 2 * s->hkv) * s->d;
    const size_t hd = (size_t)s->hq * s->d, sf = score_floats(s, max_prompt);
    const int pk = pkvk_model_prefill_kernel(s);
    m->w_shared = weights != nullptr;
    m->donor = weights;
    if (weights) m->w = weights->w;
    int rc = pk < 0        ? PKVK_ERR_UNSUPPORTED
             : m->w_shared ? PKVK_OK
                           : pkvk_malloc((void **)&m->w, n * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->kv, (size_t)s->layers * 2 * m->pool);
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
        rc = pkvk_fi_prefill_create(c, &m->fip, s->hq, s->hkv, s->d, s->page_size, s->dtype,
                                    s->kv_dtype, PKVK_MAX_PIECES);
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
    if (!rc) rc = pkvk_memset(m->kv, 0, (size_t)s->layers * 2 * m->pool);
    for (int l = -1; l < s->layers && !rc && !m->w_shared; l++)
        for (int t = 0; t < (l < 0 ? 3 : (int)PKVK_W_LAYER_COUNT) && !rc; t++) {
            // The norms come before the tensors they fold into (t order).
            const elem16 *fold = l < 0             ? nullptr
                                 : t == PKVK_W_QKV ? W(m, l, PKVK_W_LN1)
                                 : t == PKVK_W_GU  ? W(m, l, PKVK_W_LN2)
                                                   : nullptr;
            const size_t cols =
                t == PKVK_W_QKV ? (size_t)(s->hq + 2 * s->hkv) * s->d : 2 * (size_t)s->inter;
            with_t(s->dtype, [&](auto ty) {
                using T = decltype(ty);
                fill_weights<T><<<1024, 256, 0, m->ctx->stream>>>(
                    (T *)W(m, l, t), pkvk_model_tensor_elems(s, l, t), seed, l, t,
                    pkvk_model_fan_in(s, l, t), (const T *)fold, cols);
                return 0;
            });
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) rc = pkvk_fail_cuda(e, "fill_weights", __FILE__, __LINE__);
        }
    if (!rc) {
        rc = pkvk_blas_handle(&m->h, m->ctx->stream);
    }
    if (!rc) rc = pkvk_sync(c);
    return pkvk_created(rc, m, out, pkvk_model_destroy);
}

extern "C" void pkvk_model_destroy(pkvk_model *m) {
    if (!m) return;
    if (m->h) pkvk_cublas.destroy(m->h);
    pkvk_fi_prefill_destroy(m->fip);
    moe_free(m);
    void *dev[] = {m->w_shared ? nullptr : m->w,
                   m->kv,
                   m->x,
                   m->xn,
                   m->inv,
                   m->qkv,
                   m->o,
                   m->y,
                   m->a,
                   m->qp,
                   m->op,
                   m->kc,
                   m->vc,
                   m->S,
                   m->P,
                   m->logits,
                   m->tok,
                   m->pages_d};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) pkvk_free(dev[i]);
    pkvk_host_free(m->pages_h);
    free(m);
}

extern "C" uint16_t *pkvk_model_kv(pkvk_model *m, int l, int v) {
    return (uint16_t *)(m->kv + ((size_t)l * 2 + v) * m->pool);
}
