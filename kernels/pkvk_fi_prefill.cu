// The model's prefill attention, and the FlashInfer routes' verify steps (pkvk_fi.cu), on
// FlashInfer's batch prefill kernel over the paged cache (pkvk_fi.h): causal, each piece's queries at its prompt's last positions, the
// keys and values read in place from the layer's pages, planned by FlashInfer's own
// PrefillPlan as its prefill wrapper does (split over the keys where the pieces give
// too few CTAs, merged by FlashInfer); queries and outputs FP16 or BF16, the pages of
// their type or FP8 E4M3 at scale 1 (FlashInfer widens the codes in shared memory).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>
#include <flashinfer/page.cuh>

#include <math.h>
#include <string.h>

#include "pkvk_cuda.h"
#include "pkvk_fi.h"
#include "pkvk_fi_common.h"

namespace {
constexpr uint32_t kHeadDim = 128;
template <class DQ, class DKV> using Params = fi::BatchPrefillPagedParams<DQ, DKV, DQ, int32_t>;
using Variant = fi::DefaultAttention<false, false, false, false>;
// The prefill wrapper's float workspace holds the split's partial outputs; the plan
// fails with FlashInfer's message if a plan would need more.
constexpr size_t kFloatBytes = 64u << 20, kIntBytes = 8u << 20;

template <uint32_t TILE, class DQ, class DKV>
cudaError_t launch(Params<DQ, DKV> &p, DQ *tmp_v, float *tmp_s, cudaStream_t st) {
    return fi::BatchPrefillWithPagedKVCacheDispatched<
        /*SAME_KV_STRIDES=*/true, TILE, kHeadDim, kHeadDim, fi::PosEncodingMode::kNone,
        /*USE_FP16_QK_REDUCTION=*/false, fi::MaskMode::kCausal, /*USE_TOKEN_HEAD_SF=*/false,
        Variant>(p, tmp_v, tmp_s, /*enable_pdl=*/false, st);
}
} // namespace

struct pkvk_fi_prefill {
    cudaStream_t stream;
    int hq, hkv, ps, dtype, kv_dtype;
    int32_t cap, n, tokens;
    void *float_ws, *int_ws, *int_host;
    int32_t *meta_h, *meta_d; // qo_indptr [cap + 1], kv_indptr [cap + 1], last [cap]
    const int32_t *pages;
    fi::PrefillPlanInfo info;
};

extern "C" size_t pkvk_fi_prefill_bytes(int32_t cap_pieces) {
    return kFloatBytes + kIntBytes + 2 * (3 * (size_t)cap_pieces + 2) * sizeof(int32_t);
}

extern "C" int pkvk_fi_prefill_create(const pkvk_ctx *c, pkvk_fi_prefill **out, int hq, int hkv,
                                      int d, int page_size, int dtype, int kv_dtype,
                                      int32_t cap_pieces) {
    *out = nullptr;
    const int G = hkv > 0 ? hq / hkv : 0;
    if (d != (int)kHeadDim || hq % hkv || !pkv_flashinfer_group(G))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "FlashInfer prefill: head dimension 128 and "
                                                   "GQA group size 1, 2, 4 or 8 only");
    pkvk_fi_prefill *f = new (std::nothrow) pkvk_fi_prefill();
    if (!f) return PKVK_ERR_OUT_OF_MEMORY;
    f->stream = c->stream, f->hq = hq, f->hkv = hkv, f->ps = page_size, f->cap = cap_pieces;
    f->dtype = dtype, f->kv_dtype = kv_dtype;
    const size_t meta = (3 * (size_t)cap_pieces + 2) * sizeof(int32_t);
    int rc = pkvk_malloc(&f->float_ws, kFloatBytes);
    if (!rc) rc = pkvk_malloc(&f->int_ws, kIntBytes);
    if (!rc) rc = pkvk_host_alloc(&f->int_host, kIntBytes);
    if (!rc) rc = pkvk_host_alloc((void **)&f->meta_h, meta);
    if (!rc) rc = pkvk_malloc((void **)&f->meta_d, meta);
    return pkvk_created(rc, f, out, pkvk_fi_prefill_destroy);
}

extern "C" void pkvk_fi_prefill_destroy(pkvk_fi_prefill *f) {
    if (!f) return;
    pkvk_free_each(f->float_ws, f->int_ws, f->meta_d);
    pkvk_host_free(f->int_host);
    pkvk_host_free(f->meta_h);
    delete f;
}

extern "C" int pkvk_fi_prefill_plan(pkvk_fi_prefill *f, int n, const int32_t *qo_indptr,
                                    const int32_t *kv_indptr, const int32_t *last,
                                    const int32_t *pages) {
    if (n < 1 || n > f->cap)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "FlashInfer prefill: piece count out of range");
    PKVK_CK(cudaStreamSynchronize(f->stream)); // the last plan's copies are done
    int32_t *qo = f->meta_h, *kv = qo + f->cap + 1, *lp = kv + f->cap + 1;
    memcpy(qo, qo_indptr, (n + 1) * sizeof(int32_t));
    memcpy(kv, kv_indptr, (n + 1) * sizeof(int32_t));
    memcpy(lp, last, n * sizeof(int32_t));
    f->n = n, f->tokens = qo[n], f->pages = pages;
    int rc = guarded("FlashInfer PrefillPlan (prefill)", [&] {
        return fi::PrefillPlan<int32_t>(
            f->float_ws, kFloatBytes, f->int_ws, f->int_host, kIntBytes, f->info, qo, kv,
            /*total_num_rows=*/(uint32_t)qo[n], (uint32_t)n, f->hq, f->hkv, kHeadDim, kHeadDim,
            f->ps, /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2, /*window_left=*/-1,
            /*fixed_split_size=*/-1, /*disable_split_kv=*/false, /*num_colocated_ctas=*/0,
            /*uniform_q_len=*/-1, /*fixed_uniform_q_len=*/false, f->stream);
    });
    if (rc) return rc;
    const int t = (int)f->info.cta_tile_q;
    if (t != 16 && t != 64 && t != 128)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "FlashInfer prefill: a query tile other than "
                                                   "16, 64 or 128");
    PKVK_CK(cudaMemcpyAsync(f->meta_d, f->meta_h, (3 * (size_t)f->cap + 2) * sizeof(int32_t),
                            cudaMemcpyHostToDevice, f->stream));
    return PKVK_OK;
}

extern "C" const int32_t *pkvk_fi_prefill_o_indptr(const pkvk_fi_prefill *f) {
    return fi::GetPtrFromBaseOffset<int32_t>(f->int_host, f->info.o_indptr_offset);
}

template <class DQ, class DKV>
static int run(pkvk_fi_prefill *f, const void *q, const void *k_pool, const void *v_pool, void *o,
               const int32_t *pages, float sm_scale) {
    int32_t *qo = f->meta_d, *kvi = qo + f->cap + 1, *lp = kvi + f->cap + 1;
    fi::paged_kv_t<DKV, int32_t> kv(f->hkv, f->ps, kHeadDim, f->n, fi::QKVLayout::kHND,
                                    (DKV *)k_pool, (DKV *)v_pool, (int32_t *)pages, kvi, lp);
    Params<DQ, DKV> p((DQ *)q, kv, nullptr, qo, nullptr, nullptr, (DQ *)o, nullptr, nullptr, f->hq,
                      f->hq * (int32_t)kHeadDim, (int32_t)kHeadDim, /*window_left=*/-1,
                      /*logits_soft_cap=*/0.f, sm_scale, /*rope_scale=*/1.f,
                      /*rope_theta=*/1e4f);
    const fi::PrefillPlanInfo &pi = f->info;
    DQ *tmp_v;
    float *tmp_s;
    set_plan_arrays(f->int_ws, f->float_ws, pi, p, &tmp_v, &tmp_s);
    p.qo_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(f->int_ws, pi.qo_tile_indices_offset);
    p.max_total_num_rows = (uint32_t)pi.total_num_rows;
    if (pi.split_kv)
        p.merge_indptr = fi::GetPtrFromBaseOffset<int32_t>(f->int_ws, pi.merge_indptr_offset);
    return guarded("FlashInfer batch prefill (causal)", [&] {
        switch (pi.cta_tile_q) {
        case 16:
            return launch<16>(p, tmp_v, tmp_s, f->stream);
        case 64:
            return launch<64>(p, tmp_v, tmp_s, f->stream);
        default:
            return launch<128>(p, tmp_v, tmp_s, f->stream);
        }
    });
}

extern "C" int pkvk_fi_prefill_launch(pkvk_fi_prefill *f, const void *q, const void *k_pool,
                                      const void *v_pool, void *o, const int32_t *pages,
                                      float sm_scale, int *launches) {
    const bool bf = f->dtype == PKVK_BF16, fp8 = f->kv_dtype == PKVK_FP8_E4M3;
    if (!pages) pages = f->pages;
    int rc = fp8 ? (bf ? run<__nv_bfloat16, __nv_fp8_e4m3>(f, q, k_pool, v_pool, o, pages, sm_scale)
                       : run<half, __nv_fp8_e4m3>(f, q, k_pool, v_pool, o, pages, sm_scale))
             : bf ? run<__nv_bfloat16, __nv_bfloat16>(f, q, k_pool, v_pool, o, pages, sm_scale)
                  : run<half, half>(f, q, k_pool, v_pool, o, pages, sm_scale);
    if (rc) return rc;
    PKVK_CK_LAUNCH();
    if (launches) *launches = 1 + (int)f->info.split_kv; // the kernel, and its merge
    return PKVK_OK;
}

extern "C" int pkvk_fi_prefill_run(pkvk_fi_prefill *f, const void *q, const void *k_pool,
                                   const void *v_pool, void *o) {
    return pkvk_fi_prefill_launch(f, q, k_pool, v_pool, o, nullptr, 1.f / sqrtf((float)kHeadDim),
                                  nullptr);
}
