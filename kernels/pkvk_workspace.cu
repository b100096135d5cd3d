// The attention's workspace (pkvk_run.h): made once at start, sized by the planner's
// bounds; a step's plan is packed into one pinned staging buffer and copied to one
// device arena (pkvk_step_upload), which grows rarely, by doubling.
#include <stdlib.h>
#include <string.h>

#include "pkvk_workspace.cuh"

static size_t align16(size_t n) {
    return (n + 15) & ~(size_t)15;
}

// Arena bytes of the largest plan the workspace takes.
static size_t plan_bytes(const pkvk_workspace *w) {
    return align16(((size_t)w->cap_rows + 1) * sizeof(int32_t)) +
           align16((size_t)w->cap_rows * sizeof(int32_t)) +
           align16((size_t)w->cap_tasks * sizeof(pkvk_task));
}

// Room for `bytes` in the arena and its staging; grows (rarely) by doubling. The
// staging holds at least the largest metadata a launch carries (pkvk_step_upload
// passes it as one kernel parameter of up to PKVK_PARAM_BYTES).
static int reserve_arena(pkvk_workspace *w, size_t bytes) {
    if (bytes <= w->arena_bytes) return PKVK_OK;
    size_t cap = w->arena_bytes ? w->arena_bytes : PKVK_PARAM_BYTES;
    while (cap < bytes) cap *= 2;
    PKVK_CK(cudaStreamSynchronize(w->ctx->stream)); // the old arena may still be in use
    pkvk_free(w->arena);
    pkvk_host_free(w->staging);
    w->arena = w->staging = nullptr;
    w->arena_bytes = 0;
    int rc = pkvk_malloc((void **)&w->arena, cap);
    if (!rc) rc = pkvk_host_alloc((void **)&w->staging, cap);
    if (!rc) w->arena_bytes = cap;
    return rc;
}

extern "C" int pkvk_workspace_create(const pkvk_ctx *ctx, pkvk_workspace **out, const pkvk_shape *s,
                                     int32_t cap_rows, int32_t cap_slots, int32_t cap_tasks) {
    *out = nullptr;
    pkvk_workspace *w = (pkvk_workspace *)calloc(1, sizeof *w);
    if (!w) return PKVK_ERR_OUT_OF_MEMORY;
    *w = pkvk_workspace{ctx, *s, cap_rows, cap_slots, cap_tasks};
    size_t states = (size_t)cap_slots * s->hq;
    int rc = pkvk_malloc((void **)&w->part_acc, states * s->d * sizeof(float));
    if (!rc) rc = pkvk_malloc((void **)&w->part_ml, states * 2 * sizeof(float));
    if (!rc) rc = pkvk_malloc((void **)&w->counters, (size_t)cap_rows * s->hkv * sizeof(int));
    if (!rc) rc = pkvk_memset(w->counters, 0, (size_t)cap_rows * s->hkv * sizeof(int));
    if (!rc) rc = reserve_arena(w, plan_bytes(w));
    return pkvk_created(rc, w, out, pkvk_workspace_destroy);
}

extern "C" void pkvk_workspace_destroy(pkvk_workspace *w) {
    if (!w) return;
    pkvk_free_each(w->part_acc, w->part_ml, w->counters, w->arena);
    pkvk_host_free(w->staging);
    pkvk_fi_destroy(w->fi);
    free(w);
}

int pkvk_plan_pack(pkvk_workspace *w, const pkvk_plan *p, const void *extra, size_t extra_bytes,
                   pkvk_packed *out) {
    if (p->n_rows > w->cap_rows || p->n_slots > w->cap_slots || p->n_tasks > w->cap_tasks)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "plan larger than its workspace");
    if (pkv_route_is_workqueue(p->route) && p->n_tasks && !p->tasks_written)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "a counts-only plan cannot be launched");
    const bool fi = pkv_route_is_flashinfer(p->route);
    if (w->fixed_rows && pkv_route_graph_of(p->route) != PKV_GRAPH_FIXED)
        return pkvk_fail_msg(PKVK_ERR_INVALID,
                             "only ref_paged and pkv_workqueue run on fixed grids");
    if (w->fixed_rows && p->n_rows > w->fixed_rows)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "plan has more rows than the fixed grid");
    // Laid out for `rows` rows (a fixed grid's, so that its arrays stay where the
    // captured kernels read them), the rows past the plan's without slots.
    const int32_t rows = w->fixed_rows ? w->fixed_rows : p->n_rows;
    const size_t br = align16(sizeof(int32_t) * (rows + 1));
    const size_t nbr =
        pkv_route_family_of(p->route) == PKV_FAMILY_BUCKET ? sizeof(int32_t) * p->n_rows : 0;
    // One span per split entry of the plan, hkv CTAs each.
    const int32_t hkv = w->shape.hkv, n_spans = p->n_tasks / hkv;
    if (pkv_route_is_workqueue(p->route) && (p->n_tasks % hkv || n_spans != p->n_slots))
        return pkvk_fail_msg(PKVK_ERR_INVALID, "workqueue tasks are not hkv per split entry");
    const size_t tk = br + align16(nbr), plan_end = fi ? 0 : tk + sizeof(pkvk_task) * n_spans;
    const size_t extra_begin = align16(plan_end), end = extra_begin + extra_bytes;
    int rc = reserve_arena(w, end);
    if (rc) return rc;
    if (extra_bytes) memcpy(w->staging + extra_begin, extra, extra_bytes);
    if (!fi) {
        int32_t *so = (int32_t *)w->staging;
        memcpy(so, p->split_offsets, sizeof(int32_t) * (p->n_rows + 1));
        for (int32_t i = p->n_rows + 1; i <= rows; i++) so[i] = p->split_offsets[p->n_rows];
        if (nbr) memcpy(w->staging + br, p->bucket_rows, nbr);
        if (n_spans) memcpy(w->staging + tk, p->tasks, sizeof(pkvk_task) * n_spans);
        w->split_offsets = (int32_t *)w->arena;
        w->bucket_rows = (int32_t *)(w->arena + br);
        w->spans = (pkvk_task *)(w->arena + tk);
    }
    *out = pkvk_packed{w->staging, w->arena, plan_end, extra_begin, end, rows};
    if (!fi) return PKVK_OK;
    rc = w->fi ? PKVK_OK : pkvk_fi_create(w->ctx, &w->fi, &w->shape, w->cap_rows, 0);
    return rc ? rc : pkvk_fi_upload(w->fi, p);
}

const pkvk_shape *pkvk_workspace_shape(const pkvk_workspace *w) {
    return &w->shape;
}
const pkvk_ctx *pkvk_workspace_ctx(const pkvk_workspace *w) {
    return w->ctx;
}

extern "C" int pkvk_workspace_flashinfer(pkvk_workspace *w, size_t cap_pages) {
    if (!pkvk_flashinfer_built() || w->fi) return PKVK_OK;
    int rc = pkvk_fi_create(w->ctx, &w->fi, &w->shape, w->cap_rows, cap_pages);
    // A shape FlashInfer's build lacks: its routes say so when a step asks for them.
    return rc == PKVK_ERR_UNSUPPORTED ? PKVK_OK : rc;
}

extern "C" int pkvk_workspace_fixed(pkvk_workspace *w, int32_t rows) {
    if (rows < 0 || rows > w->cap_rows)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "fixed grid rows outside the workspace's");
    if (rows && !w->fixed_ctas) {
        int per_sm = 0, rc = pkvk_occupancy(w->shape.d, w->shape.hq / w->shape.hkv, &per_sm);
        if (rc) return rc;
        w->fixed_ctas = per_sm * w->ctx->sms;
    }
    w->fixed_rows = rows;
    return PKVK_OK;
}

extern "C" int pkvk_workspace_reserve(pkvk_workspace *w, size_t extra_bytes) {
    return reserve_arena(w, plan_bytes(w) + align16(extra_bytes));
}

extern "C" int pkvk_plan_upload(pkvk_workspace *w, const pkvk_plan *p) {
    return pkvk_step_upload(w, p, nullptr, PKVK_UPLOAD_COPY, nullptr);
}

extern "C" int pkvk_pack_csr(pkvk_workspace *w, const pkvk_batch *b) {
    if (!w->fi) return pkvk_fail_msg(PKVK_ERR_INVALID, "FlashInfer plan not uploaded");
    return pkvk_fi_pack_csr(w->fi, b);
}
