/* What each backend kind can run, in one table: the element types, the shapes, the
 * features (mixtures of experts, speculative decoding, a measured prefill), the clock
 * it runs on by default, FlashInfer's paths; with the model's kind (engine/model.h:
 * its graphs) and the route table's rows (base/pkv_route.h), every "can this backend
 * run that" is answered here, and a backend of a kind made. The engine's set-up and the
 * runner's checks read it. */
#include "backends.h"
#include "engine.h"

/* The rows: the model backend predicts every shape and type (its cost counts the KV
 * type's bytes) and every feature the cost model has; the cpu backend runs the GPU
 * kernels' CPU mirrors (any head_dim, FlashInfer's paths mirrored but not over FP8,
 * as the GPU cannot with per-page scales), a mixture of experts' routed experts and
 * speculative decoding's verify steps (kernels/pkvk_cpu_model.c), its prompts in prefill
 * batches only (no chunks inside a decode step); the cuda backend runs the GPU
 * kernels (kernels/pkvk_attn.cu, kernels/pkvk_model*.cu: head_dim 64, 128 or 256, 1 to 8 query
 * heads per KV head; FlashInfer's at head_dim 128) with a mixture of experts' routed
 * experts (kernels/pkvk_model_moe.cu) and speculative decoding's verify steps (the verify
 * forward, its query tokens packed beside the heads in PersistentKV's routes), measures the
 * prefill's K/V write, and runs on the wall clock by default. The measuring backends run the
 * draft's or EAGLE's passes too, on a second backend of their kind (engine/proposer.c). */
static const pkv_backend_caps rows[] = {
    [PKV_BACKEND_MODEL] = {.any_types = true,
                           .any_shape = true,
                           .experts = true,
                           .experts_more = true,
                           .speculative = true,
                           .chunks = true,
                           .fi_fp8 = true,
                           .clock = PKV_CLOCK_PREDICTED},
    [PKV_BACKEND_CPU] = {.measures = true,
                         .any_shape = true,
                         .experts = true,
                         .speculative = true,
                         .clock = PKV_CLOCK_PREDICTED},
    [PKV_BACKEND_CUDA] = {.measures = true,
                          .gpu = true,
                          .experts = true,
                          .speculative = true,
                          .chunks = true,
                          .prefill_measure = true,
                          .fi_head_dim = 128,
                          .clock = PKV_CLOCK_WALL},
};

const pkv_backend_caps *pkv_backend_caps_of(pkv_backend_kind k) {
    return &rows[pkv_backend_resolve(k)];
}

int pkv_backend_supports(pkv_backend_kind k, const pkv_model *m, pkv_err *e) {
    const pkv_backend_kind kind = pkv_backend_resolve(k);
    const pkv_backend_caps *c = &rows[kind];
    const pkvk_shape s = pkv_model_attn_shape(m);
    /* the GPU's kernels and their CPU mirrors run FP16 or BF16, and KV of that type or
     * FP8: the study layer and the served model (kernels/pkvk_model.h) alike */
    const bool typed = (s.dtype == PKVK_FP16 || s.dtype == PKVK_BF16) &&
                       (s.kv_dtype == s.dtype || s.kv_dtype == PKVK_FP8_E4M3);
    if (!c->experts && pkv_model_moe_layers(m))
        return pkv_fail(e,
                        "model %s: a mixture of experts (model.experts %d) runs on the model "
                        "backend (--backend model); the %s backend's expert layers are not "
                        "built yet",
                        m->name, m->experts, pkv_backend_names[kind]);
    if (!c->experts_more && pkv_model_moe_layers(m) && (m->shared_experts || m->expert_parallel))
        return pkv_fail(e,
                        "model %s: the %s backend runs the routed experts only; shared experts "
                        "(model.shared_experts %d) and expert parallelism run on the model "
                        "backend (--backend model)",
                        m->name, pkv_backend_names[kind], m->shared_experts);
    if (!c->any_types && !typed)
        return pkv_fail(e,
                        "model %s: model.dtype %s with model.kv_dtype %s runs on the model "
                        "backend (its cost counts the KV type's bytes); the cpu and cuda "
                        "backends run FP16 or BF16 with KV of that type or FP8",
                        m->name, pkvk_dtype_names[s.dtype], pkvk_dtype_names[s.kv_dtype]);
    const int g = s.hq / s.hkv;
    if (c->any_shape || ((s.d == 64 || s.d == 128 || s.d == 256) && g >= 1 && g <= 8)) return 0;
    return pkv_fail(e,
                    "model %s: the GPU kernels run head_dim 64, 128 or 256 with 1 to 8 query "
                    "heads per KV head on one GPU; this model has head_dim %d and %d (hq %d, "
                    "hkv %d, tensor_parallel %d); run it on the model backend (--backend model)",
                    m->name, s.d, g, m->hq, m->hkv, m->tp);
}

uint32_t pkv_backend_routes(pkv_backend_kind k, const pkv_model *m) {
    const pkv_backend_caps *c = pkv_backend_caps_of(k);
    const pkvk_shape s = pkv_model_attn_shape(m);
    const uint32_t all = (1u << PKV_ROUTE_COUNT) - 1, fi = pkv_routes_with(PKV_RP_FI_SHAPES);
    /* FlashInfer's GPU paths are built at head_dim 128, in FP16 and BF16, and over FP8 KV
     * with one scale for the whole cache: the study layer's FP8 pools hold a scale per page
     * and head, so FP8 leaves them out (a served model's too, its codes at scale 1: not
     * measured in a run yet). The cpu backend, which stands in for the GPU, leaves out
     * what the GPU does over FP8 (its FP8 study run chose flashinfer where the GPU could
     * not), its mirror running them at any head_dim */
    const bool runs = pkv_flashinfer_group(s.hq / s.hkv) &&
                      (c->fi_fp8 || s.kv_dtype != PKVK_FP8_E4M3) &&
                      (!c->fi_head_dim || s.d == c->fi_head_dim);
    return runs ? all : all & ~fi;
}

uint32_t pkv_backend_graph_routes(const pkv_model *m) {
    return pkv_routes_in_graph((pkv_route_graph)pkv_model_kind_of(m)->graph_mode);
}

pkv_backend *pkv_backend_make(pkv_backend_kind kind, const pkv_model *m, int32_t cap_tasks,
                              int32_t q_len, struct pkv_moe *experts, const pkv_backend_spec *spec,
                              int32_t cap_rows, pkv_err *e) {
    pkv_backend_spec s = *spec;
    s.experts = experts;
    switch (kind) {
    case PKV_BACKEND_CPU:
        return pkv_backend_cpu_create(m, &s, cap_rows, cap_tasks, q_len, e);
    case PKV_BACKEND_CUDA:
#ifdef PKV_HAVE_CUDA
        return pkv_backend_cuda_create(m, &s, cap_rows, cap_tasks, cap_tasks, q_len, e);
#else
        pkv_fail(e, "--backend cuda: %s", pkvk_last_error());
        return NULL;
#endif
    default: {
        pkv_backend *be = pkv_backend_model_create();
        if (!be) pkv_fail(e, "out of memory");
        return be;
    }
    }
}
