/* The model backend: nothing runs and nothing is measured; the engine's cost model
 * gives every time. Beside it, what is known of every backend kind before one is
 * made: its name, what `auto` resolves to, the shapes it runs, its graph replays. */
#include "backends.h"

#include <stdio.h>
#include <stdlib.h>

const char *const pkv_backend_names[] = {"auto", "model", "cpu", "cuda", NULL};

pkv_backend_kind pkv_backend_resolve(pkv_backend_kind k) {
    if (k != PKV_BACKEND_AUTO) return k;
    return pkvk_device_count() > 0 ? PKV_BACKEND_CUDA : PKV_BACKEND_MODEL;
}

void pkv_backend_device_name(pkv_backend_kind k, char *name, size_t n) {
    pkvk_device_info dev = {.name = "none"};
    if (pkv_backend_resolve(k) == PKV_BACKEND_CUDA) pkvk_device_info_get(&dev);
    snprintf(name, n, "%s", dev.name);
}

/* The GPU kernels (kernels/pkvk_attn.cu, kernels/pkvk_model*.cu) run head_dim 64, 128 or 256
 * with 1 to 8 query heads per KV head (FlashInfer's routes 1, 2, 4 or 8 at head_dim 128);
 * the model and cpu backends any shape. */
int pkv_backend_supports(pkv_backend_kind k, const pkv_model *m, pkv_err *e) {
    const pkv_backend_kind kind = pkv_backend_resolve(k);
    const pkvk_shape s = pkv_model_attn_shape(m);
    /* the GPU's kernels and their CPU mirrors run FP16 or BF16, and KV of that type or
     * FP8: the study layer and the served model (kernels/pkvk_model.h) alike */
    const bool typed = (s.dtype == PKVK_FP16 || s.dtype == PKVK_BF16) &&
                       (s.kv_dtype == s.dtype || s.kv_dtype == PKVK_FP8_E4M3);
    if (kind != PKV_BACKEND_MODEL && pkv_model_moe_layers(m))
        return pkv_fail(e,
                        "model %s: a mixture of experts (model.experts %d) runs on the model "
                        "backend (--backend model); the %s backend's expert layers are not "
                        "built yet",
                        m->name, m->experts, pkv_backend_names[kind]);
    if (kind == PKV_BACKEND_MODEL || (kind == PKV_BACKEND_CPU && typed)) return 0;
    if (!typed)
        return pkv_fail(e,
                        "model %s: model.dtype %s with model.kv_dtype %s runs on the model "
                        "backend (its cost counts the KV type's bytes); the cpu and cuda "
                        "backends run FP16 or BF16 with KV of that type or FP8",
                        m->name, pkvk_dtype_names[s.dtype], pkvk_dtype_names[s.kv_dtype]);
    const int g = s.hq / s.hkv;
    if ((s.d == 64 || s.d == 128 || s.d == 256) && g >= 1 && g <= 8) return 0;
    return pkv_fail(e,
                    "model %s: the GPU kernels run head_dim 64, 128 or 256 with 1 to 8 query "
                    "heads per KV head on one GPU; this model has head_dim %d and %d (hq %d, "
                    "hkv %d, tensor_parallel %d); run it on the model backend (--backend model)",
                    m->name, s.d, g, m->hq, m->hkv, m->tp);
}

uint32_t pkv_backend_routes(pkv_backend_kind k, const pkv_model *m) {
    const pkvk_shape s = pkv_model_attn_shape(m);
    const uint32_t all = (1u << PKV_ROUTE_COUNT) - 1,
                   fi = 1u << PKV_ROUTE_FLASHINFER | 1u << PKV_ROUTE_FLASHINFER_TC;
    /* FlashInfer's GPU paths are built at head_dim 128, in FP16 and BF16, and over FP8 KV
     * with one scale for the whole cache: the study layer's FP8 pools hold a scale per page
     * and head, so FP8 leaves them out (a served model's too, its codes at scale 1: not
     * measured in a run yet). The cpu backend, which stands in for the GPU, leaves out
     * what the GPU does over FP8 (its FP8 study run chose flashinfer where the GPU could
     * not), its mirror running them at any head_dim */
    const pkv_backend_kind kind = pkv_backend_resolve(k);
    const bool fp8 = s.kv_dtype == PKVK_FP8_E4M3,
               gpu_type = (kind == PKV_BACKEND_CUDA && (fp8 || s.d != 128)) ||
                          (kind == PKV_BACKEND_CPU && fp8);
    return pkv_flashinfer_group(s.hq / s.hkv) && !gpu_type ? all : all & ~fi;
}

uint32_t pkv_backend_graph_routes(const pkv_model *m) {
    return pkv_routes_in_graph(pkv_model_dense(m) ? PKV_GRAPH_FIXED : PKV_GRAPH_CAPTURE);
}

static int model_prepare(pkv_backend *b, const pkv_batch_view *v, pkv_err *e) {
    return 0;
}

static int model_run(pkv_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                     pkv_step_rec *rec, pkv_err *e) {
    return 0; /* the engine already filled the predicted time and counters */
}

static void model_destroy(pkv_backend *b) {
    free(b);
}

pkv_backend *pkv_backend_model_create(void) {
    pkv_backend *b = malloc(sizeof *b);
    if (b)
        *b = (pkv_backend){.name = "model",
                           .measures = 0,
                           .prepare = model_prepare,
                           .run = model_run,
                           .destroy = model_destroy};
    return b;
}
