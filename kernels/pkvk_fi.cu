// The FlashInfer routes: FlashInfer's two paged decode paths run on pkvsim's cache,
// each planned by FlashInfer's own host planner, as its decode wrapper does.
//  - flashinfer:    BatchDecodeWithPagedKVCache (CUDA cores), planned by DecodePlan;
//  - flashinfer_tc: the wrapper's use_tensor_cores=True path, the batch prefill kernel
//                   over the paged cache with one query token per row, planned by
//                   PrefillPlan (fixed uniform query length 1), merged when split.
// A verify step (q_len > 1 query tokens a row) on either route runs on FlashInfer's
// prefill path, as engines run one: the batch prefill kernel, causal, each row's tokens
// a prefill piece at its last positions (pkvk_fi_prefill), planned by PrefillPlan.
// The cache is used in place: FlashInfer's HND layout [page][head][token][d] is
// pkvsim's. Only the page list differs (CSR instead of a strided block table); one
// small kernel packs it from the block table. Every element type pkvsim's kernels take
// is instantiated: FP16, BF16, and Q of either over FP8 E4M3 KV. FlashInfer's FP8 path
// takes one scale for all of K and one for V (as vLLM passes them): K's goes into the
// softmax scale, V's multiplies the output after the kernel (as FlashInfer's Python
// wrapper does; skipped at 1, vLLM's default), so a pool whose scales vary by page and
// head is refused (pkvk_batch's k_scale_all).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>
#include <flashinfer/page.cuh>

#include <exception>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "pkvk_cuda.h"
#include "pkvk_fi.h"
#include "pkvk_fi_common.h"

namespace {

constexpr uint32_t kHeadDim = 128;
constexpr auto kPos = fi::PosEncodingMode::kNone;
// The element types of one instantiation: Q and O (FP16 or BF16), K and V (Q's or FP8).
template <class Q, class KV> struct Types {
    using TQ = Q;
    using TKV = KV;
};
template <class T>
using DecParams = fi::BatchDecodeParams<typename T::TQ, typename T::TKV, typename T::TQ, int32_t>;
template <class T>
using PreParams =
    fi::BatchPrefillPagedParams<typename T::TQ, typename T::TKV, typename T::TQ, int32_t>;
// What the decode wrapper builds by default: no custom mask, no sliding window, no
// soft cap, no ALiBi.
using Variant = fi::DefaultAttention<false, false, false, false>;

// FlashInfer's wrapper defaults: 128 MiB of float workspace, 8 MiB of int workspace.
constexpr size_t kFloatBytes = 128u << 20, kIntBytes = 8u << 20;

// Rows [0, n): indptr[i] = pages before row i (lengths summed by each block: B is
// small), indices from the block-table row, last-page length.
static __global__ void pack_csr_kernel(const int32_t *__restrict__ seq_lens,
                                       const int32_t *__restrict__ bt, int32_t bt_stride, int32_t n,
                                       int32_t ps, int32_t *indptr, int32_t *indices,
                                       int32_t *last) {
    const int row = blockIdx.x;
    __shared__ int32_t base;
    if (threadIdx.x == 0) {
        int32_t b = 0;
        for (int i = 0; i < row; i++) b += (seq_lens[i] + ps - 1) / ps;
        base = b;
        indptr[row] = b;
        int32_t len = seq_lens[row];
        last[row] = len - (len - 1) / ps * ps;
        if (row == n - 1) indptr[n] = b + (len + ps - 1) / ps;
    }
    __syncthreads();
    int32_t pages = (seq_lens[row] + ps - 1) / ps;
    for (int32_t j = threadIdx.x; j < pages; j += blockDim.x)
        indices[base + j] = bt[(size_t)row * bt_stride + j];
}

// o[i] *= scale over n elements: FP8 V's one scale, after the kernel.
template <class O> static __global__ void scale_kernel(O *o, size_t n, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        o[i] = (O)((float)o[i] * scale);
}

// f(Types<...>{}) for the shape's element types (check_shape admits no others).
template <class F> static auto with_types(const pkvk_shape &s, F &&f) {
    const bool bf = s.dtype == PKVK_BF16;
    if (s.kv_dtype == PKVK_FP8_E4M3)
        return bf ? f(Types<__nv_bfloat16, __nv_fp8_e4m3>{}) : f(Types<half, __nv_fp8_e4m3>{});
    return bf ? f(Types<__nv_bfloat16, __nv_bfloat16>{}) : f(Types<half, half>{});
}

// f(std::integral_constant<uint32_t, G>{}) for the group sizes FlashInfer's decode takes.
template <class F> static cudaError_t with_group(int G, F &&f) {
    switch (G) {
    case 1:
        return f(std::integral_constant<uint32_t, 1>{});
    case 2:
        return f(std::integral_constant<uint32_t, 2>{});
    case 4:
        return f(std::integral_constant<uint32_t, 4>{});
    default:
        return f(std::integral_constant<uint32_t, 8>{});
    }
}

} // namespace

struct pkvk_fi {
    const pkvk_ctx *ctx;
    cudaStream_t stream;
    pkvk_shape shape;
    int32_t cap_rows;
    void *float_ws, *int_ws, *int_host; // FlashInfer's workspaces (device, device, pinned)
    int32_t *indptr_h, *qo_indptr_h;    // pinned, [cap_rows + 1]
    int32_t *indptr_d, *last_d, *qo_indptr_d, *indices_d;
    size_t cap_indices;
    pkv_route planned;
    int32_t n_rows, q_len;
    fi::DecodePlanInfo dinfo;
    fi::PrefillPlanInfo pinfo;
    pkvk_fi_prefill *verify; // a verify step's prefill path, made at the first
    int32_t *verify_h;       // its query offsets [cap_rows + 1], last-page lengths [cap_rows]
};

static int check_shape(const pkvk_shape *s) {
    int G = s->hkv > 0 ? s->hq / s->hkv : 0;
    if (s->d != (int)kHeadDim)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "FlashInfer routes: head dimension must be 128");
    if (!pkv_flashinfer_group(G))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                             "FlashInfer routes: GQA group size must be 1, 2, 4 or 8");
    if ((s->dtype != PKVK_FP16 && s->dtype != PKVK_BF16) ||
        (s->kv_dtype != s->dtype && s->kv_dtype != PKVK_FP8_E4M3))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "FlashInfer routes: Q FP16 or BF16 and KV of "
                                                   "Q's type or FP8 E4M3");
    return PKVK_OK;
}

template <uint32_t G, class T> static auto decode_estimator() {
    return fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<G, kHeadDim, kPos, Variant,
                                                                   DecParams<T>>;
}

extern "C" int pkvk_flashinfer_built(void) {
    return 1;
}

extern "C" int pkvk_flashinfer_occupancy(const pkvk_shape *s, int *ctas_per_sm) {
    int rc = check_shape(s);
    if (rc) return rc;
    // The same estimate DecodePlan makes: its grid bound is blocks/SM x SMs.
    int32_t indptr[2] = {0, 1};
    bool split;
    uint32_t grid = 0, pages, nb, gdy;
    int G = s->hq / s->hkv, sms = 0, dev = 0;
    rc = guarded("FlashInfer decode occupancy", [&] {
        return with_types(*s, [&](auto t) {
            return with_group(G, [&](auto g) {
                return decode_estimator<decltype(g)::value, decltype(t)>()(
                    split, grid, pages, nb, gdy, 1, indptr, s->hq, s->page_size, false,
                    /*stream=*/nullptr);
            });
        });
    });
    if (rc) return rc;
    PKVK_CK(cudaGetDevice(&dev));
    PKVK_CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    *ctas_per_sm = (int)grid / sms;
    return PKVK_OK;
}

extern "C" int pkvk_fi_create(const pkvk_ctx *c, pkvk_fi **out, const pkvk_shape *s,
                              int32_t cap_rows, size_t cap_pages) {
    *out = nullptr;
    int rc = check_shape(s);
    if (rc) return rc;
    pkvk_fi *f = new (std::nothrow) pkvk_fi();
    if (!f) return PKVK_ERR_OUT_OF_MEMORY;
    f->ctx = c;
    f->stream = c->stream;
    f->shape = *s;
    f->cap_rows = cap_rows;
    f->planned = PKV_ROUTE_COUNT;
    size_t ip = ((size_t)cap_rows + 1) * sizeof(int32_t);
    rc = pkvk_malloc(&f->float_ws, kFloatBytes);
    if (!rc) rc = pkvk_malloc(&f->int_ws, kIntBytes);
    if (!rc) rc = pkvk_host_alloc(&f->int_host, kIntBytes);
    if (!rc) rc = pkvk_host_alloc((void **)&f->indptr_h, ip);
    if (!rc) rc = pkvk_host_alloc((void **)&f->qo_indptr_h, ip);
    if (!rc) rc = pkvk_host_alloc((void **)&f->verify_h, 2 * ip);
    if (!rc) rc = pkvk_malloc((void **)&f->indptr_d, ip);
    if (!rc) rc = pkvk_malloc((void **)&f->qo_indptr_d, ip);
    if (!rc) rc = pkvk_malloc((void **)&f->last_d, ip);
    if (!rc && cap_pages) rc = pkvk_malloc((void **)&f->indices_d, cap_pages * sizeof(int32_t));
    if (!rc) f->cap_indices = cap_pages;
    if (!rc) {
        // One query token per row: qo_indptr is 0, 1, ..., cap_rows for every plan.
        for (int32_t i = 0; i <= cap_rows; i++) f->qo_indptr_h[i] = i;
        rc = pkvk_h2d(f->qo_indptr_d, f->qo_indptr_h, ip);
    }
    return pkvk_created(rc, f, out, pkvk_fi_destroy);
}

extern "C" void pkvk_fi_destroy(pkvk_fi *f) {
    if (!f) return;
    pkvk_free_each(f->float_ws, f->int_ws, f->indptr_d, f->qo_indptr_d, f->last_d, f->indices_d);
    pkvk_host_free(f->int_host);
    pkvk_host_free(f->indptr_h);
    pkvk_host_free(f->qo_indptr_h);
    pkvk_host_free(f->verify_h);
    pkvk_fi_prefill_destroy(f->verify);
    delete f;
}

template <uint32_t G, class T> static cudaError_t decode_plan(pkvk_fi *f, uint32_t n) {
    return fi::DecodePlan<kHeadDim, kPos, Variant, DecParams<T>>(
        f->float_ws, kFloatBytes, f->int_ws, f->int_host, kIntBytes, f->dinfo, f->indptr_h, n,
        f->shape.hq, f->shape.page_size, /*enable_cuda_graph=*/false, f->stream,
        decode_estimator<G, T>());
}

extern "C" int pkvk_fi_upload(pkvk_fi *f, const pkvk_plan *p) {
    const pkvk_shape &s = f->shape;
    const uint32_t n = (uint32_t)p->n_rows;
    if (p->n_rows > f->cap_rows)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "plan larger than its workspace");
    f->indptr_h[0] = 0;
    for (uint32_t i = 0; i < n; i++)
        f->indptr_h[i + 1] = f->indptr_h[i] + (p->lens[i] + s.page_size - 1) / s.page_size;
    f->n_rows = p->n_rows;
    f->planned = PKV_ROUTE_COUNT;
    if (n == 0) return PKVK_OK;
    const int32_t ql = p->q_len > 1 ? p->q_len : 1;
    int G = s.hq / s.hkv, rc;
    const int32_t *o_indptr; // FlashInfer's partial-output offsets per row, on the host
    if (!pkv_route_is_flashinfer(p->route))
        return pkvk_fail_msg(PKVK_ERR_INVALID, "not a FlashInfer route");
    if (ql > 1) {
        // A verify step: each row's ql tokens a prefill piece over its pages.
        rc = f->verify ? PKVK_OK
                       : pkvk_fi_prefill_create(f->ctx, &f->verify, s.hq, s.hkv, s.d, s.page_size,
                                                s.dtype, s.kv_dtype, f->cap_rows);
        int32_t *qo = f->verify_h, *last = qo + f->cap_rows + 1;
        for (uint32_t i = 0; !rc && i <= n; i++) {
            qo[i] = (int32_t)i * ql;
            if (i < n && p->lens[i] < ql)
                rc = pkvk_fail_msg(PKVK_ERR_INVALID, "a verify row has fewer keys than query "
                                                     "tokens");
            if (i < n) last[i] = (p->lens[i] - 1) % s.page_size + 1;
        }
        // the page list is packed (and may move) after the upload: the launch passes it
        if (!rc) rc = pkvk_fi_prefill_plan(f->verify, (int)n, qo, f->indptr_h, last, nullptr);
        if (rc) return rc;
        o_indptr = pkvk_fi_prefill_o_indptr(f->verify);
    } else if (p->route == PKV_ROUTE_FLASHINFER) {
        rc = guarded("FlashInfer DecodePlan", [&] {
            return with_types(s, [&](auto t) {
                return with_group(
                    G, [&](auto g) { return decode_plan<decltype(g)::value, decltype(t)>(f, n); });
            });
        });
        o_indptr = fi::GetPtrFromBaseOffset<int32_t>(f->int_host, f->dinfo.o_indptr_offset);
    } else if (p->route == PKV_ROUTE_FLASHINFER_TC) {
        rc = guarded("FlashInfer PrefillPlan", [&] {
            return fi::PrefillPlan<int32_t>(
                f->float_ws, kFloatBytes, f->int_ws, f->int_host, kIntBytes, f->pinfo,
                f->qo_indptr_h, f->indptr_h, /*total_num_rows=*/n, n, s.hq, s.hkv, kHeadDim,
                kHeadDim, s.page_size, /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2,
                /*window_left=*/-1, /*fixed_split_size=*/-1, /*disable_split_kv=*/false,
                /*num_colocated_ctas=*/0, /*uniform_q_len=*/1, /*fixed_uniform_q_len=*/true,
                f->stream);
        });
        if (!rc && f->pinfo.cta_tile_q != 16)
            return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                                 "FlashInfer PrefillPlan chose a query tile other than 16");
        o_indptr = fi::GetPtrFromBaseOffset<int32_t>(f->int_host, f->pinfo.o_indptr_offset);
    }
    if (rc) return rc;
    // The counters every backend records come from the plan's mirror of these
    // planners: refuse to run a partition the mirror did not predict (its KV chunks a
    // row; FlashInfer's offsets count them once for each query token).
    for (uint32_t i = 0; i <= n; i++)
        if (o_indptr[i] != ql * p->split_offsets[i]) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "%s: FlashInfer planned partial-output offset %d for row %u, pkvsim's mirror "
                     "of its planner %d (%d query tokens a row)",
                     pkv_route_name(p->route), o_indptr[i], i, ql * p->split_offsets[i], ql);
            return pkvk_fail_msg(PKVK_ERR_INVALID, msg);
        }
    f->planned = p->route;
    f->q_len = ql;
    return PKVK_OK;
}

extern "C" int pkvk_fi_pack_csr(pkvk_fi *f, const pkvk_batch *b) {
    if (b->n_rows == 0) return PKVK_OK;
    if (b->n_rows != f->n_rows)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "CSR pack: batch differs from the uploaded plan");
    size_t pages = (size_t)f->indptr_h[b->n_rows];
    if (pages > f->cap_indices) { // grows rarely: to the largest step seen, doubled
        size_t cap = pages * 2;
        PKVK_CK(cudaStreamSynchronize(f->stream));
        pkvk_free(f->indices_d);
        f->indices_d = nullptr;
        f->cap_indices = 0;
        int rc = pkvk_malloc((void **)&f->indices_d, cap * sizeof(int32_t));
        if (rc) return rc;
        f->cap_indices = cap;
    }
    pack_csr_kernel<<<b->n_rows, 128, 0, f->stream>>>(b->seq_lens, b->block_table, b->bt_stride,
                                                      b->n_rows, b->shape.page_size, f->indptr_d,
                                                      f->indices_d, f->last_d);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

// The uploaded plan's kernels in types T, the softmax scale sm_scale (FP8: K's folded in).
template <class T>
static int launch_typed(pkvk_fi *f, const pkvk_batch *b, const pkvk_plan *p, float sm_scale,
                        int *launches) {
    using TQ = typename T::TQ;
    using TKV = typename T::TKV;
    const pkvk_shape &s = b->shape;
    fi::paged_kv_t<TKV, int32_t> kv(s.hkv, s.page_size, kHeadDim, p->n_rows, fi::QKVLayout::kHND,
                                    (TKV *)b->k_cache, (TKV *)b->v_cache, f->indices_d, f->indptr_d,
                                    f->last_d);
    const int32_t q_stride_n = s.hq * s.d, q_stride_h = s.d;
    int rc;
    TQ *tmp_v;
    float *tmp_s;
    if (f->q_len > 1) {
        rc = pkvk_fi_prefill_launch(f->verify, b->q, b->k_cache, b->v_cache, b->o, f->indices_d,
                                    sm_scale, launches);
        if (rc) *launches = 0;
    } else if (p->route == PKV_ROUTE_FLASHINFER) {
        DecParams<T> q((TQ *)b->q, nullptr, kv, (TQ *)b->o, nullptr, nullptr, s.hq, q_stride_n,
                       q_stride_h, /*window_left=*/-1, /*logits_soft_cap=*/0.f, sm_scale,
                       /*rope_scale=*/1.f, /*rope_theta=*/1e4f);
        const fi::DecodePlanInfo &pi = f->dinfo;
        set_plan_arrays(f->int_ws, f->float_ws, pi, q, &tmp_v, &tmp_s);
        rc = guarded("FlashInfer batch decode", [&] {
            return fi::BatchDecodeWithPagedKVCacheDispatched<kHeadDim, kPos, Variant>(
                q, tmp_v, tmp_s, /*enable_pdl=*/false, f->stream);
        });
        *launches = rc ? 0 : 1 + (int)pi.split_kv;
    } else {
        PreParams<T> q((TQ *)b->q, kv, nullptr, f->qo_indptr_d, nullptr, nullptr, (TQ *)b->o,
                       nullptr, nullptr, s.hq, q_stride_n, q_stride_h, /*window_left=*/-1,
                       /*logits_soft_cap=*/0.f, sm_scale, /*rope_scale=*/1.f,
                       /*rope_theta=*/1e4f);
        const fi::PrefillPlanInfo &pi = f->pinfo;
        set_plan_arrays(f->int_ws, f->float_ws, pi, q, &tmp_v, &tmp_s);
        q.qo_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(f->int_ws, pi.qo_tile_indices_offset);
        q.max_total_num_rows = (uint32_t)pi.total_num_rows;
        if (pi.split_kv)
            q.merge_indptr = fi::GetPtrFromBaseOffset<int32_t>(f->int_ws, pi.merge_indptr_offset);
        rc = guarded("FlashInfer batch prefill (tensor-core decode)", [&] {
            return fi::BatchPrefillWithPagedKVCacheDispatched<
                /*SAME_KV_STRIDES=*/true, /*CTA_TILE_Q=*/16, kHeadDim, kHeadDim, kPos,
                /*USE_FP16_QK_REDUCTION=*/false, fi::MaskMode::kNone,
                /*USE_TOKEN_HEAD_SF=*/false, Variant>(q, tmp_v, tmp_s, /*enable_pdl=*/false,
                                                      f->stream);
        });
        *launches = rc ? 0 : 1 + (int)pi.split_kv;
    }
    if (rc) return rc;
    PKVK_CK_LAUNCH();
    if constexpr (std::is_same_v<TKV, __nv_fp8_e4m3>) {
        if (b->v_scale_all == 1.f) return PKVK_OK;
        const size_t n = (size_t)p->n_rows * f->q_len * s.hq * s.d;
        scale_kernel<<<(unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), 256, 0,
                       f->stream>>>((TQ *)b->o, n, b->v_scale_all);
        PKVK_CK_LAUNCH();
        ++*launches;
    }
    return PKVK_OK;
}

extern "C" int pkvk_fi_launch(pkvk_fi *f, const pkvk_batch *b, const pkvk_plan *p, int *launches) {
    const pkvk_shape &s = b->shape;
    *launches = 0;
    if (p->n_rows == 0) return PKVK_OK;
    if (s.dtype != f->shape.dtype || s.kv_dtype != f->shape.kv_dtype)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "FlashInfer route: batch types differ from the "
                                               "workspace's");
    // FP8: one scale for all of K (checked by pkvk_launch), folded into the softmax's
    const float sm_scale = b->sm_scale * (s.kv_dtype == PKVK_FP8_E4M3 ? b->k_scale_all : 1.f);
    if (f->planned != p->route || f->n_rows != p->n_rows || !f->indices_d)
        return pkvk_fail_msg(PKVK_ERR_INVALID,
                             "FlashInfer route: upload the plan and pack the page list first");
    if ((b->q_len > 1 ? b->q_len : 1) != f->q_len)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "FlashInfer route: the batch's query tokens a row "
                                               "differ from the uploaded plan's");
    return with_types(
        s, [&](auto t) { return launch_typed<decltype(t)>(f, b, p, sm_scale, launches); });
}
