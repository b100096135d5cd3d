/* The cuda backend's memory: its context on the GPU, the device buffers it owns (one row
 * each in its allocation table, which sizes the check against the GPU's free memory,
 * makes them and frees them), a full model's weights and pools, the workspace, the
 * events, the swap pool; their set-up and teardown (cuda_parts.h). */
#include "cuda_parts.h"
#include "moe.h"
#include "pkv_clock.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Preemption by swap's host pool over the K and V pools of every layer. */
static int make_swap_pool(cuda_backend *b, int32_t slots, pkv_err *e) {
    const int n_pools = 2 * (b->model ? b->layers : 1);
    uint16_t **pools = malloc(sizeof(uint16_t *) * (size_t)n_pools);
    if (!pools) return pkv_fail(e, "out of memory");
    for (int p = 0; p < n_pools; p++)
        pools[p] = b->model ? pkvk_model_kv(b->model, p / 2, p % 2) : p ? b->v : b->k;
    const size_t page_bytes = (size_t)b->shape.hkv * b->shape.page_size * b->shape.d *
                              pkvk_dtype_bytes(b->shape.kv_dtype);
    int rc = pkvk_swap_create(b->ctx, &b->swap, pools, n_pools, page_bytes, slots, b->bt_stride);
    free(pools);
    if (rc)
        return pkv_fail(e, "serving.swap_pages: the host pool of %d pages (%.2f GiB): %s", slots,
                        (double)slots * n_pools * page_bytes / (1 << 30), pkvk_last_error());
    return 0;
}

/* FP8 pools' scales, each page and KV head's of K and V as the cpu backend's; unit: 1
 * everywhere (a full model's pools, kernels/pkvk_model.h). */
static int put_fp8_scales(cuda_backend *b, size_t bytes, int unit) {
    float *h = malloc(2 * bytes); /* K's, then V's */
    int rc = h ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
    if (!rc && unit)
        for (size_t i = 0; i < bytes / 2; i++) h[i] = 1.0f;
    else if (!rc)
        pkv_tensors_fp8_scales(h, h + bytes / 4, bytes / 4);
    if (!rc) rc = pkvk_h2d(b->k_scale, h, bytes);
    if (!rc) rc = pkvk_h2d(b->v_scale, h + bytes / 4, bytes);
    free(h);
    return rc;
}

int cuda_fill_pages(cuda_backend *b, const int32_t *pages, int32_t n_pages, double *t_device,
                    pkv_err *e) {
    float ms;
    if (n_pages > b->n_pages)
        return pkv_fail(e, "cuda backend: a prefill of %d pages in a pool of %d", n_pages,
                        b->n_pages);
    if (pages) memcpy(b->pages_h, pages, sizeof(int32_t) * (size_t)n_pages);
    if (pkvk_h2d_async(b->ctx, b->pages_d, b->pages_h, sizeof(int32_t) * (size_t)n_pages) ||
        pkvk_event_record(b->ev[EV_PRE0]) ||
        pkvk_fill_pages(b->ctx, &b->shape, b->k, b->v, b->k_scale, b->v_scale, b->pages_d, n_pages,
                        b->blk_k, b->blk_v, PKV_TENSOR_BLOCK) ||
        pkvk_event_record(b->ev[EV_PRE1]) ||
        pkvk_event_elapsed(b->ev[EV_PRE0], b->ev[EV_PRE1], &ms))
        return cuda_fail(e, "prefill K/V write");
    *t_device = ms * 1e-3;
    return 0;
}

/* The study layer's operations in the one forward: none (its prologue appends the new
 * tokens with the step's metadata; a prompt's pages are written with the tiles). */
static const pkvk_fwd_ops study_ops = {0};

/* A row of the allocation table. */
static void buf(cuda_backend *b, void *at, size_t bytes) {
    b->bufs[b->n_bufs++] = (cuda_buf){at, bytes};
}

/* The allocation table for the shape: the study layer's pools (a full model's are its
 * own), FP8's scales, the step's rows, the prepared rows, the block table, the tiles and
 * a prefill's page list. */
static size_t plan_bufs(cuda_backend *b, bool forward, size_t pool, size_t scales) {
    const pkvk_shape *s = &b->shape;
    const size_t rows = (size_t)b->cap_rows * b->q_len_cap * s->hq * s->d,
                 src_kv = (size_t)SRC_ROWS * s->hkv * s->d * 2;
    b->n_bufs = 0;
    if (!forward) buf(b, &b->k, pool), buf(b, &b->v, pool);
    if (scales) buf(b, &b->k_scale, scales), buf(b, &b->v_scale, scales);
    buf(b, &b->q, rows * 2), buf(b, &b->o, rows * 2), buf(b, &b->o_ref, rows * 4);
    buf(b, &b->src_k, src_kv), buf(b, &b->src_v, src_kv);
    buf(b, &b->src_q, (size_t)SRC_ROWS * s->hq * s->d * 2);
    buf(b, &b->bt, (size_t)b->cap_rows * b->bt_stride * 4);
    buf(b, &b->lens, (size_t)b->cap_rows * 4);
    buf(b, &b->blk_k, (size_t)PKV_TENSOR_BLOCK * 2), buf(b, &b->blk_v, PKV_TENSOR_BLOCK * 2);
    buf(b, &b->pages_d, (size_t)b->n_pages * 4);
    size_t sum = 0;
    for (int i = 0; i < b->n_bufs; i++) sum += b->bufs[i].bytes;
    return sum;
}

/* The message of a set-up that does not fit in the GPU's free memory. */
static int too_big(const pkv_model *md, const pkvk_model_shape *ms, bool forward, int32_t n_pages,
                   size_t pool, size_t need, const pkvk_device_info *dev, pkv_err *e) {
    if (!forward)
        return pkv_fail(e,
                        "--backend cuda: the KV pool of %d pages needs %.2f GiB on the GPU "
                        "(%.2f GiB with buffers) but %s has %.2f GiB free; lower serving.kv_pages",
                        n_pages, 2.0 * pool / (1 << 30), need / (double)(1 << 30), dev->name,
                        dev->mem_free / (double)(1 << 30));
    pkv_model run = *md; /* the layers on the GPU */
    run.layers = ms->layers;
    return pkv_fail(e,
                    "--backend cuda: model %s needs %.2f GiB on the GPU (%.2f GiB of weights, "
                    "%.2f GiB for %d KV pages of %d layers, the rest activations and "
                    "workspaces) but %s has %.2f GiB free; lower serving.kv_pages%s",
                    md->name, need / (double)(1 << 30),
                    pkv_model_weight_bytes(&run) / (double)(1 << 30),
                    n_pages * pkv_model_page_bytes(&run) / (double)(1 << 30), n_pages, run.layers,
                    dev->name, dev->mem_free / (double)(1 << 30),
                    run.layers < md->layers ? "" : " or run fewer layers (run.layers_measured)");
}

int cuda_fail(pkv_err *e, const char *what) {
    return pkv_fail(e, "cuda backend: %s: %s", what, pkvk_last_error());
}

int cuda_pool_make(cuda_backend *b, const pkv_model *md, const pkv_backend_spec *spec,
                   const cuda_backend *other, int32_t cap_slots, int32_t cap_tasks, pkv_err *e) {
    pkvk_device_info dev;
    if (pkvk_ctx_create(&b->ctx, spec->device) || pkvk_device_info_get(&dev))
        return pkv_fail(e, "--backend cuda: no usable GPU: %s", pkvk_last_error());
    const pkvk_shape *s = &b->shape;
    const bool forward = !pkv_model_kind_of(md)->kv_synthetic; /* the model's own KV */
    const int32_t mlp_inter = (int32_t)md->mlp_tail, cap_rows = b->cap_rows;
    pkvk_model_shape ms = pkv_model_gpu_shape(md);
    /* run.layers_measured: only the first layers exist on the GPU (weights, pools) */
    if (forward && spec->layers_measured > 0 && spec->layers_measured < ms.layers)
        ms.layers = spec->layers_measured;
    /* a verify step's rows: q_len_cap token rows each, its states q_len_cap a slot */
    const int32_t q_rows = cap_rows * b->q_len_cap, q_slots = cap_slots * b->q_len_cap;
    const int32_t cap_tokens = q_rows > PKV_FORWARD_TOKENS ? q_rows : PKV_FORWARD_TOKENS;
    const int32_t max_prompt = b->bt_stride * s->page_size;
    /* a replica of a model another cuda backend holds reads that one's weights */
    const cuda_backend *donor =
        pkv_model_kind_of(md)->weights && other && other->model && other->layers == ms.layers
            ? other
            : NULL;
    /* bytes: the study layer's K (or V) pool, FP8's scales, the buffers of the table, a
     * full model's pools of every layer with its weights and activations, the
     * workspace's stage and partial states, the MLP tail */
    const size_t pool = (size_t)b->n_pages * s->hkv * s->page_size * s->d *
                        pkvk_dtype_bytes(s->kv_dtype),
                 scales = s->kv_dtype == PKVK_FP8_E4M3 ? (size_t)b->n_pages * s->hkv * 4 : 0;
    size_t need = plan_bufs(b, forward, pool, scales) + (size_t)cap_rows * b->bt_stride * 12 +
                  (size_t)q_slots * s->hq * (s->d + 2) * 4 + (size_t)mlp_inter * s->hq * s->d * 6 +
                  (size_t)cap_rows * mlp_inter * 6;
    /* a mixture of experts' layers among those on the GPU: their routed experts */
    const pkvk_moe_shape moe = pkv_model_moe_shape(md);
    const bool experts = forward && md->experts && moe.first < ms.layers;
    if (forward)
        need += pkvk_model_bytes(&ms, cap_tokens, max_prompt, b->n_pages) -
                (donor ? pkvk_model_weight_bytes(&ms) : 0);
    if (experts)
        need += pkvk_model_moe_bytes(&ms, &moe, cap_tokens) -
                (donor ? pkvk_model_moe_bytes(&ms, &moe, 0) : 0);
    if (need + (256u << 20) > dev.mem_free)
        return too_big(md, &ms, forward, b->n_pages, pool, need, &dev, e);
    const size_t rows = (size_t)q_rows * s->hq * s->d;
    pkv_tensors t = {0};
    b->o_host = malloc(rows * 2);
    b->ref_host = malloc(rows * 4);
    b->stage_h = malloc(b->stage_cap * 4);
    int rc = !b->o_host || !b->ref_host || !b->stage_h ? PKVK_ERR_OUT_OF_MEMORY : PKVK_OK;
    if (!rc && pkv_tensors_make(&t, s, spec->seed)) rc = PKVK_ERR_OUT_OF_MEMORY;
    for (int i = 0; !rc && i < b->n_bufs; i++) rc = pkvk_malloc(b->bufs[i].at, b->bufs[i].bytes);
    if (!rc && forward) {
        b->layers = ms.layers;
        b->layer_scale = (double)md->layers / ms.layers;
        b->base.stats.timers = 2 * b->layers + 3;
        rc = pkvk_model_create_sharing(b->ctx, &b->model, &ms, cap_tokens, max_prompt, b->n_pages,
                                       spec->seed, donor ? donor->model : NULL);
        if (!rc && experts) rc = pkvk_model_experts(b->model, &moe, pkv_moe_route, spec->experts);
        if (!rc) {
            b->k = pkvk_model_kv(b->model, 0, 0); /* the prologue's append lands in layer 0 */
            b->v = pkvk_model_kv(b->model, 0, 1);
            b->fwd = pkvk_model_forward(b->model);
            b->scale_all = scales ? 1.0f : 0.0f; /* its FP8 pools' codes are at scale 1 */
        }
    } else { /* the study layer: one layer, no operations of its own in the forward */
        b->layers = 1;
        b->fwd = (pkvk_fwd_model){&study_ops, NULL, 1, s->page_size, INT32_MAX / 2, 0};
    }
    if (!rc && !(b->att_ev = calloc(2 * (size_t)b->layers, sizeof *b->att_ev)))
        rc = PKVK_ERR_OUT_OF_MEMORY;
    for (int k = 0; !rc && k < 2 * b->layers; k++) rc = pkvk_event_create(b->ctx, &b->att_ev[k]);
    if (!rc && scales) rc = put_fp8_scales(b, scales, forward);
    if (!rc) rc = pkvk_memset(b->o, 0, rows * 2); /* a graph's rows past the step's read it */
    if (!rc) rc = pkvk_workspace_create(b->ctx, &b->ws, s, q_rows, q_slots, cap_tasks);
    if (!rc) rc = pkvk_workspace_reserve(b->ws, b->stage_cap * 4);
    /* FlashInfer's state and its page list for the largest step, made now: a step
     * allocates nothing. */
    if (!rc) rc = pkvk_workspace_flashinfer(b->ws, (size_t)cap_rows * b->bt_stride);
    if (!rc) rc = pkvk_memset(b->bt, 0, (size_t)cap_rows * b->bt_stride * 4);
    if (!rc) rc = pkvk_host_alloc((void **)&b->pages_h, (size_t)b->n_pages * 4);
    for (int k = 0; k < EV_COUNT && !rc; k++) rc = pkvk_event_create(b->ctx, &b->ev[k]);
    /* The pool starts tiled from the shared blocks (prefill writes a prompt's pages
     * with the same tiles; a page taken again by a decode step keeps stale values, as
     * in a server); new tokens and queries come from the prepared rows. */
    double t_fill;
    if (!rc) {
        for (int32_t i = 0; i < b->n_pages; i++) b->pages_h[i] = i;
        rc = pkvk_h2d(b->blk_k, t.blk_k, (size_t)PKV_TENSOR_BLOCK * 2);
        if (!rc) rc = pkvk_h2d(b->blk_v, t.blk_v, (size_t)PKV_TENSOR_BLOCK * 2);
        if (!rc && !forward) rc = cuda_fill_pages(b, NULL, b->n_pages, &t_fill, e);
    }
    if (!rc) rc = pkvk_h2d(b->src_k, t.src_k, t.src_kv * 2);
    if (!rc) rc = pkvk_h2d(b->src_v, t.src_v, t.src_kv * 2);
    if (!rc) rc = pkvk_h2d(b->src_q, t.src_q, t.src_q_n * 2);
    if (!rc && mlp_inter > 0)
        rc = pkvk_mlp_create(b->ctx, &b->mlp, s->hq * s->d, mlp_inter, cap_rows, t.blk_v,
                             PKV_TENSOR_BLOCK);
    b->base.v_max = forward ? 0 : t.v_max; /* a full model's pools hold its own K and V */
    pkv_tensors_free(&t);
    if (!rc && spec->swap_slots > 0 && make_swap_pool(b, spec->swap_slots, e)) return -1;
    /* A server warms up before it serves: the first forward's kernel loads and cuBLAS's
     * choices are made here, not in the first prefill the run times. */
    if (!rc && forward) {
        const double t_warm = pkv_clock_now();
        if (!(rc = pkvk_model_warmup(b->model)) && spec->log) {
            char line[96];
            snprintf(line, sizeof line, "warm-up forwards took %.1f ms (before the run)",
                     1e3 * (pkv_clock_now() - t_warm));
            spec->log(spec->log_ctx, line);
        }
    }
    if (rc == PKVK_ERR_OUT_OF_MEMORY)
        return pkv_fail(e, "--backend cuda: out of memory setting up the GPU pool (%s)",
                        pkvk_last_error());
    return rc ? cuda_fail(e, "setting up the GPU pool") : 0;
}

void cuda_pool_free(cuda_backend *b) {
    for (int i = 0; i < b->n_bufs; i++) pkvk_free(*(void **)b->bufs[i].at);
    pkvk_swap_destroy(b->swap);
    pkvk_model_destroy(b->model); /* and a full model's pools */
    for (int k = 0; b->att_ev && k < 2 * b->layers; k++) pkvk_event_destroy(b->att_ev[k]);
    free(b->att_ev);
    pkvk_host_free(b->pages_h);
    free(b->stage_h);
    pkvk_workspace_destroy(b->ws);
    for (int k = 0; k < EV_COUNT; k++) pkvk_event_destroy(b->ev[k]);
    pkvk_mlp_destroy(b->mlp);
    pkvk_ctx_destroy(b->ctx);
    free(b->o_host);
    free(b->ref_host);
}
