/* The cuda backend: the real kernels at every simulated decode step (cuda_parts.h says
 * how). This file runs a step (the study layer's route, or a full model's forward), a
 * prefill, a swap and the MLP tail, and counts what it did in the backend's stats. */
#include "cuda_parts.h"
#include "pkv_clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Steps between metadata timings: prime, so that the samples do not keep landing on
 * the steps where every row opens a new page. */
enum { META_EVERY = 17 };

static int cuda_prepare(pkv_backend *base, const pkv_batch_view *v, pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    int32_t ps = b->shape.page_size, *st = b->stage_h, n_up = 0;
    b->t_prepared = pkv_clock_now();
    if (v->n_rows > b->cap_rows)
        return pkv_fail(e, "cuda backend: %d rows > %d", v->n_rows, b->cap_rows);
    memcpy(st, v->seq_lens, sizeof(int32_t) * (size_t)v->n_rows);
    for (int32_t i = 0; i < v->n_rows; i++)
        st[v->n_rows + i] = v->block_table[(size_t)i * v->bt_stride + (v->seq_lens[i] - 1) / ps];
    int32_t *up = st + 2 * v->n_rows;
    for (int32_t k = 0; k < v->n_dirty; k++) {
        int32_t r = v->dirty_rows[k];
        if (r >= v->n_rows) continue; /* the row left the batch */
        int32_t pages = (v->seq_lens[r] + ps - 1) / ps;
        for (int32_t j = v->dirty_from[r]; j < pages; j++) {
            if ((size_t)(2 * v->n_rows + 3 * (n_up + 1)) > b->stage_cap)
                return pkv_fail(e, "cuda backend: staging buffer too small");
            up[3 * n_up] = r, up[3 * n_up + 1] = j;
            up[3 * n_up + 2] = v->block_table[(size_t)r * v->bt_stride + j];
            n_up++;
        }
    }
    /* The stage goes to the device with the first plan of the step (cuda_run). */
    b->stage_n = v->n_rows, b->stage_updates = n_up;
    b->stage_pending = 1;
    return 0;
}

/* Upload the plan, with the step's stage and its prologue (lengths, block-table
 * updates, the K/V append) on the step's first run. */
static int upload_step(cuda_backend *b, const pkvk_plan *plan, pkv_err *e) {
    pkvk_step st = {.n_rows = b->stage_n,
                    .n_updates = b->stage_updates,
                    .stage = b->stage_h,
                    .seq_lens = b->lens,
                    .block_table = b->bt,
                    .bt_stride = b->bt_stride,
                    .k_cache = b->k,
                    .v_cache = b->v,
                    .q = b->q,
                    .k_scale = b->k_scale,
                    .v_scale = b->v_scale,
                    .src_k = b->src_k,
                    .src_v = b->src_v,
                    .src_q = b->src_q,
                    .src_rows = SRC_ROWS,
                    .first_src = b->next_src};
    int copies;
    if (pkvk_step_upload(b->ws, plan, b->stage_pending ? &st : NULL, b->upload, &copies))
        return cuda_fail(e, "step metadata upload");
    if (b->upload == PKVK_UPLOAD_PARAMS) {
        b->base.stats.uploads++;
        b->base.stats.upload_copies += copies;
    }
    if (b->stage_pending) b->next_src += b->stage_n;
    b->stage_pending = 0;
    return 0;
}

/* The batch of `rows` rows of q_len query tokens each over layer 0's pools (FP8: the study
 * layer's scales vary by page and head, a full model's are one value, scale_all). */
static pkvk_batch rows_batch(const cuda_backend *b, int32_t rows, int32_t q_len) {
    return (pkvk_batch){.shape = b->shape,
                        .n_rows = rows,
                        .q_len = q_len,
                        .q = b->q,
                        .o = b->o,
                        .k_cache = b->k,
                        .v_cache = b->v,
                        .block_table = b->bt,
                        .bt_stride = b->bt_stride,
                        .seq_lens = b->lens,
                        .sm_scale = 1.0f / sqrtf((float)b->shape.d),
                        .k_scale = b->k_scale,
                        .v_scale = b->v_scale,
                        .k_scale_all = b->scale_all,
                        .v_scale_all = b->scale_all};
}

/* Compare the step's attention output with the FP32 GPU reference on the batch. */
static int check_output(cuda_backend *b, const pkvk_batch *batch, pkv_step_rec *rec, pkv_err *e) {
    const pkvk_shape *s = &b->shape;
    size_t n = (size_t)batch->n_rows * (batch->q_len > 1 ? batch->q_len : 1) * s->hq * s->d;
    if (pkvk_gpu_reference(b->ctx, batch, b->o_ref) || pkvk_d2h(b->o_host, b->o, n * 2) ||
        pkvk_d2h(b->ref_host, b->o_ref, n * 4))
        return cuda_fail(e, "reference check");
    pkvk_compare(NULL, b->o_host, s->dtype, b->ref_host, n, &rec->max_err, &rec->mean_err);
    double l1 = 0;
    for (size_t j = 0; j < n; j++) l1 += fabs(pkvk_elem(s->dtype, b->o_host, j));
    rec->out_mean_abs = n ? l1 / n : 0;
    return 0;
}

/* The backend's part of a step's forward (pkvk_forward.h): the route on each layer's
 * pools between the layer's events, layer 0's check, the head's event. */
typedef struct step_hooks {
    cuda_backend *b;
    pkvk_batch batch;
    const pkvk_plan *plan;
    int check, capture, check_failed;
    pkv_step_rec *rec;
    pkv_err *e;
} step_hooks;

static int step_attend(void *ctx, int l) {
    step_hooks *h = ctx;
    int launches;
    /* layer 0's pools are b->k and b->v (a full model's first) */
    h->batch.k_cache = l ? pkvk_model_kv(h->b->model, l, 0) : h->b->k;
    h->batch.v_cache = l ? pkvk_model_kv(h->b->model, l, 1) : h->b->v;
    return pkvk_launch(h->b->ws, &h->batch, h->plan, &launches);
}

static int step_mark(void *ctx, pkvk_fwd_at at, int l) {
    step_hooks *h = ctx;
    int (*const mark)(pkvk_event *) = h->capture ? pkvk_event_record_node : pkvk_event_record;
    if (at == PKVK_AT_ATTEND) return mark(h->b->att_ev[2 * l]);
    if (at == PKVK_AT_HEAD) return mark(h->b->ev[EV_HEAD]);
    if (at != PKVK_AT_PIECES) return 0;
    int rc = mark(h->b->att_ev[2 * l + 1]); /* the route done */
    if (!rc && h->check && l == 0 && check_output(h->b, &h->batch, h->rec, h->e))
        return h->check_failed = -1;
    return rc;
}

/* How a forward's marks are taken: events recorded around each layer's attention (and
 * layer 0's check), the events as nodes of a graph being captured, or none. */
typedef enum { CUDA_MARKS_EVENTS, CUDA_MARKS_NODES, CUDA_MARKS_NONE } cuda_marks;

/* The step's forward over `rows` rows (the step's, or a graph's bucket; a verify step's
 * 1 + spec_tokens query tokens each) with the step's prompt chunks, the route the attend
 * hook on each layer's pools; check (events only): layer 0's attention compared with the
 * reference. */
static int forward(cuda_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int rows,
                   int check, cuda_marks marks, pkv_step_rec *rec, pkv_err *e) {
    const pkv_prefill_view *c = v->chunks;
    const int32_t q_len = 1 + v->spec_tokens;
    step_hooks h = {b, rows_batch(b, rows, q_len), plan, check, marks == CUDA_MARKS_NODES, 0, rec,
                    e};
    const pkvk_fwd_hooks hooks = {&h, step_attend, marks == CUDA_MARKS_NONE ? NULL : step_mark};
    pkvk_fwd_in in = {.rows = rows,
                      .lens = b->lens,
                      .block_table = b->bt,
                      .bt_stride = b->bt_stride,
                      .q_len = q_len,
                      .q = b->q,
                      .o = b->o};
    pkvk_fwd_at failed = PKVK_AT_BEGIN;
    if (!pkvk_forward_step(&b->fwd, &in, c ? c->n_req : 0, c ? c->lens : NULL, c ? c->pages : NULL,
                           c ? c->starts : NULL, c ? c->last : NULL, &hooks, &failed))
        return 0;
    if (h.check_failed) return -1;
    return cuda_fail(e, failed == PKVK_AT_STAGE ? "a step with prompt chunks (serving.token_budget "
                                                  "at most 8192 tokens and 64 chunks on the cuda "
                                                  "backend)"
                        : failed == PKVK_AT_ATTEND ? pkv_route_name(plan->route)
                                                   : pkvk_fwd_at_name(failed));
}

/* A full model's step (see the top of the file); check compares layer 0's attention.
 * With run.cuda_graph, a decode step without prompt chunks or check replays the
 * graph of its (route, bucket, merge), captured at its first use: the prologue
 * before it brings the step's lengths, block-table updates and plan to the device
 * buffers the graph reads. */
static int run_model(cuda_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                     pkv_step_rec *rec, pkv_err *e) {
    const int graph = b->use_graph && !v->chunks && !check && !v->spec_tokens;
    const int32_t rows = graph ? cuda_graph_rows(v->n_rows, b->cap_rows) : v->n_rows;
    pkvk_graph **g = graph ? cuda_graph_slot(b, plan, rows) : NULL;
    if (graph && !g)
        return pkv_fail(e,
                        "run.cuda_graph: route %s cannot be replayed in a full model's graph "
                        "(ref_paged and pkv_workqueue can)",
                        pkv_route_name(plan->route));
    const double t_run = pkv_clock_now();
    b->base.stats.host_prepare += t_run - b->t_prepared;
    /* EV_META to EV_ATT0: the upload and the prologue on the GPU (t_meta) */
    if (pkvk_workspace_fixed(b->ws, graph ? rows : 0) || pkvk_event_record(b->ev[EV_META]))
        return cuda_fail(e, "fixed grid");
    if (upload_step(b, plan, e)) return -1;
    b->base.stats.host_upload += pkv_clock_now() - t_run;
    const pkvk_batch csr = rows_batch(b, rows, 1);
    if (pkv_route_has(plan->route, PKV_RP_CSR) && pkvk_pack_csr(b->ws, &csr))
        return cuda_fail(e, "FlashInfer page list");
    /* The first step of its kind captures its graph, then replays it like the rest; a
     * server captures its graphs at start, so the capture's host time (tens of ms at
     * 32 layers) is left out of the step's wall time. */
    double t_capture = 0;
    if (g && !*g) {
        const double t = pkv_clock_now();
        int reused;
        if (pkvk_graph_begin(b->ctx)) return cuda_fail(e, "graph capture");
        if (forward(b, v, plan, rows, 0, CUDA_MARKS_NODES, rec, e)) {
            pkvk_graph_abort(b->ctx);
            return -1;
        }
        if (pkvk_graph_end(b->ctx, g, &reused)) return cuda_fail(e, "graph capture");
        t_capture = pkv_clock_now() - t;
        b->base.stats.graph_made++;
        b->base.stats.capture_time += t_capture;
    }
    if (pkvk_event_record(b->ev[EV_ATT0])) return cuda_fail(e, "event");
    const double t_launch = pkv_clock_now();
    if (g) {
        if (pkvk_graph_launch(*g)) return cuda_fail(e, "graph replay");
        b->base.stats.graph_steps++;
    } else if (forward(b, v, plan, rows, check, CUDA_MARKS_EVENTS, rec, e)) {
        return -1;
    }
    /* The wait for the step's end, then the reading of its 2 L + 2 timers (host work
     * of the measurement alone; its mean is printed at the end), which the step's wall
     * time leaves out. */
    float ms, head_ms, att_ms, meta_ms;
    b->base.stats.host_launch += pkv_clock_now() - t_launch;
    if (pkvk_event_record(b->ev[EV_ATT1]) ||
        pkvk_event_elapsed(b->ev[EV_HEAD], b->ev[EV_ATT1], &head_ms))
        return cuda_fail(e, "event");
    const double t_read = pkv_clock_now();
    if (pkvk_event_elapsed(b->ev[EV_ATT0], b->ev[EV_HEAD], &ms) ||
        pkvk_events_elapsed_sum(b->att_ev, b->layers, &att_ms) ||
        pkvk_event_elapsed(b->ev[EV_META], b->ev[EV_ATT0], &meta_ms))
        return cuda_fail(e, "event");
    rec->t_meta = meta_ms * 1e-3;
    /* the embedding and the layers run; run.layers_measured: the layers not run take
     * what the run ones took */
    const double layers = ms * 1e-3, att = att_ms * 1e-3;
    rec->t_device = att * b->layer_scale;
    rec->t_dense = (layers - att) * b->layer_scale + head_ms * 1e-3;
    const double read = pkv_clock_now() - t_read;
    b->base.t_unrun = (b->layer_scale - 1) * layers - read - t_capture;
    b->base.stats.timer_reads += read;
    b->base.stats.model_steps++;
    return 0;
}

/* The study layer's step under run.cuda_graph: its upload, prologue and route captured
 * and replayed as one graph (updated in place where the shape allows); *ms its device
 * time, which covers them all. */
static int study_graph_step(cuda_backend *b, const pkv_batch_view *v, const pkvk_plan *plan,
                            float *ms, pkv_err *e) {
    int reused = 0;
    if (pkv_route_graph_of(plan->route) == PKV_GRAPH_NONE)
        return pkv_fail(e, "run.cuda_graph: the FlashInfer routes cannot be captured (their "
                           "planner may allocate); run them without it");
    if (pkvk_graph_begin(b->ctx)) return cuda_fail(e, "graph capture");
    if (upload_step(b, plan, e) || forward(b, v, plan, v->n_rows, 0, CUDA_MARKS_NONE, NULL, e)) {
        pkvk_graph_abort(b->ctx);
        return -1;
    }
    if (pkvk_graph_end(b->ctx, &b->graph, &reused) || pkvk_event_record(b->ev[EV_ATT0]) ||
        pkvk_graph_launch(b->graph) || pkvk_event_record(b->ev[EV_ATT1]) ||
        pkvk_event_elapsed(b->ev[EV_ATT0], b->ev[EV_ATT1], ms))
        return cuda_fail(e, "graph replay");
    b->base.stats.graph_steps++;
    b->base.stats.graph_reused += reused;
    return 0;
}

/* The study layer's step: its upload and prologue (the new tokens' K/V and Q, as the
 * step's metadata, timed every META_EVERY-th step), then the one forward (no dense part:
 * the route alone, between its layer's events; the check at its end); under
 * run.cuda_graph all of it captured every step and replayed (cuda_graph.c). A full
 * model's step is run_model's. */
static int cuda_run(pkv_backend *base, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                    pkv_step_rec *rec, pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    if (b->model) return run_model(b, v, plan, check, rec, e);
    if (v->spec_tokens) return pkv_fail(e, "cuda backend: a verify step runs on a served model");
    const pkvk_batch batch = rows_batch(b, v->n_rows, 1);
    float ms;
    if (b->use_graph) {
        if (study_graph_step(b, v, plan, &ms, e)) return -1;
        rec->t_device = ms * 1e-3;
        return check ? check_output(b, &batch, rec, e) : 0;
    }
    /* Timing the metadata costs an event pair: every META_EVERY-th step only (by its
     * index: the oracle runs a step several times). The plan upload is part of the step
     * (and of its wall time), not of the attention's device time; FlashInfer's page list
     * too. */
    b->meta_pending = b->stage_pending && rec->index % META_EVERY == 0;
    if (b->meta_pending && pkvk_event_record(b->ev[EV_META])) return cuda_fail(e, "event");
    if (upload_step(b, plan, e)) return -1;
    if (pkv_route_has(plan->route, PKV_RP_CSR) && pkvk_pack_csr(b->ws, &batch))
        return cuda_fail(e, "FlashInfer page list");
    if (forward(b, v, plan, v->n_rows, check, CUDA_MARKS_EVENTS, rec, e)) return -1;
    if (pkvk_event_elapsed(b->att_ev[0], b->att_ev[1], &ms)) return cuda_fail(e, "event");
    rec->t_device = ms * 1e-3;
    if (b->meta_pending) { /* the first route run after prepare */
        if (pkvk_event_elapsed(b->ev[EV_META], b->att_ev[0], &ms)) return cuda_fail(e, "event");
        rec->t_meta = ms * 1e-3;
        b->meta_pending = 0;
    }
    return 0;
}

/* A full model's prefill: its forward over the prompts (every layer's K/V pages
 * written), timed with events. */
static int prefill_model(cuda_backend *b, const pkv_prefill_view *p, double *t_device, pkv_err *e) {
    float ms;
    if (pkvk_event_record(b->ev[EV_PRE0]) ||
        pkvk_model_prefill(b->model, p->n_req, p->lens, p->pages, p->starts, p->last) ||
        pkvk_event_record(b->ev[EV_PRE1]) ||
        pkvk_event_elapsed(b->ev[EV_PRE0], b->ev[EV_PRE1], &ms))
        return cuda_fail(e, "prefill forward");
    /* run.layers_measured: the whole forward scaled (its embedding and LM head, under
     * 1% of a prefill's time, with it) */
    *t_device = ms * 1e-3 * b->layer_scale;
    b->base.t_unrun = ms * 1e-3 * (b->layer_scale - 1);
    return 0;
}

static int cuda_prefill(pkv_backend *base, const pkv_prefill_view *p, double *t_device,
                        pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    return b->model ? prefill_model(b, p, t_device, e)
                    : cuda_fill_pages(b, p->pages, p->n_pages, t_device, e);
}

/* Preemption by swap: the pages of every layer's K and V pools to or from the host
 * pool, timed with events. */
static int cuda_swap(pkv_backend *base, int to_host, const int32_t *pages, const int32_t *slots,
                     int32_t n, double *t_device, pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    float ms;
    if (pkvk_event_record(b->ev[EV_SWAP0]) || pkvk_swap_copy(b->swap, to_host, pages, slots, n) ||
        pkvk_event_record(b->ev[EV_SWAP1]) ||
        pkvk_event_elapsed(b->ev[EV_SWAP0], b->ev[EV_SWAP1], &ms))
        return cuda_fail(e, to_host ? "swap-out copy" : "swap-in copy");
    *t_device = ms * 1e-3 * b->layer_scale; /* run.layers_measured: every layer's pages */
    b->base.t_unrun = ms * 1e-3 * (b->layer_scale - 1);
    return 0;
}

/* The MLP tail on the attention output (rows x hq*d), timed with events. */
static int cuda_finish(pkv_backend *base, const pkv_batch_view *v, pkv_step_rec *rec, pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    if (!b->mlp) return 0;
    const uint16_t *z;
    float ms;
    if (pkvk_event_record(b->ev[EV_MLP0]) || pkvk_mlp_run(b->mlp, v->n_rows, b->o, &z) ||
        pkvk_event_record(b->ev[EV_MLP1]) ||
        pkvk_event_elapsed(b->ev[EV_MLP0], b->ev[EV_MLP1], &ms))
        return cuda_fail(e, "MLP tail");
    rec->t_mlp = ms * 1e-3;
    return 0;
}

static void cuda_destroy(pkv_backend *base) {
    cuda_graphs_free((cuda_backend *)base);
    cuda_pool_free((cuda_backend *)base);
    free(base);
}

pkv_backend *pkv_backend_cuda_create(const pkv_model *md, const pkv_backend_spec *spec,
                                     int32_t cap_rows, int32_t cap_slots, int32_t cap_tasks,
                                     int32_t q_len_cap, pkv_err *e) {
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) {
        pkv_fail(e, "out of memory");
        return NULL;
    }
    b->base = (pkv_backend){.name = "cuda",
                            .measures = 1,
                            .mixed = pkv_model_kind_of(md)->mixed,
                            .prepare = cuda_prepare,
                            .run = cuda_run,
                            .finish = cuda_finish,
                            .prefill = cuda_prefill,
                            .swap = spec->swap_slots > 0 ? cuda_swap : NULL,
                            .destroy = cuda_destroy};
    b->shape = pkv_model_attn_shape(md);
    b->n_pages = spec->kv_pages;
    b->cap_rows = cap_rows;
    b->q_len_cap = q_len_cap > 1 ? q_len_cap : 1;
    b->bt_stride = spec->bt_stride;
    b->stage_cap = 2 * (size_t)cap_rows + 3 * (size_t)cap_rows * spec->bt_stride;
    b->use_graph = spec->cuda_graph;
    if (b->use_graph && pkv_model_moe_layers(md)) {
        pkv_fail(e, "run.cuda_graph: a mixture of experts' steps are not replayed as graphs on "
                    "the cuda backend (each step's routing sizes its grouped GEMMs); leave "
                    "run.cuda_graph auto or false");
        free(b);
        return NULL;
    }
    b->upload = spec->metadata_copy ? PKVK_UPLOAD_COPY : PKVK_UPLOAD_PARAMS;
    b->layer_scale = 1; /* a full model's, set up with it */
    const pkv_backend *w = spec->weights_from;
    if (cuda_pool_make(b, md, spec,
                       w && w->destroy == cuda_destroy ? (const cuda_backend *)w : NULL, cap_slots,
                       cap_tasks, e) ||
        (b->model && b->use_graph && cuda_graphs_make(b) && pkv_fail(e, "out of memory"))) {
        cuda_destroy(&b->base);
        return NULL;
    }
    return &b->base;
}
