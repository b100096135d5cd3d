/* The cuda backend: the real kernels at every simulated decode step.
 *
 * The KV pool lives on the GPU, sized from the experiment, filled once with
 * Gaussian halves from the tensor stream. Block tables and lengths are kept on the
 * device and updated incrementally: each step packs the lengths and only the
 * block-table entries the simulator marked dirty, with the route's plan, into the
 * parameters of one prologue launch (or, where they do not fit, one asynchronous
 * copy before it); the prologue applies them and appends every row's new K/V token
 * (and the step's Q) from prepared random rows. Then the route runs; its device time
 * is taken with events around the route's kernels.
 *
 * With a full model (engine/model.h) the KV pools are the model's, one per layer,
 * and a step runs the whole forward: the embedding, then per layer the dense part
 * before attention (norm, QKV, RoPE and the K/V append), the route on that layer's
 * pools, the dense part after (output projection, norm, MLP), then the head. The
 * step's one plan and metadata serve every layer. Events around each layer's
 * attention give t_device (their sum); the step's interval less that is t_dense. A
 * step with prompt chunks (serving.scheduler chunked) runs them in the same forward:
 * the dense part over the rows and the chunks' tokens at once, the chunks' attention
 * (the prefill's, over their prompts' pages) after the route in each layer, inside
 * t_dense. */
#include "backends.h"
#include "pkv_clock.h"
#include "tensors.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SRC_ROWS = PKV_TENSOR_SRC_ROWS }; /* prepared random token rows, cycled through */
/* Steps between metadata timings: prime, so that the samples do not keep landing on
 * the steps where every row opens a new page. */
enum { META_EVERY = 17 };

/* The backend's own events: the attention's interval, the MLP tail's, the metadata
 * work's start (it ends where attention starts) and the prefill write's. */
enum {
    EV_ATT0,
    EV_ATT1,
    EV_MLP0,
    EV_MLP1,
    EV_META,
    EV_PRE0,
    EV_PRE1,
    EV_SWAP0,
    EV_SWAP1,
    EV_HEAD, /* a full model's step: the last layer done, the head next */
    EV_COUNT
};

typedef struct cuda_backend {
    pkv_backend base;
    pkv_log_fn log; /* the program's (may be NULL) */
    void *log_ctx;
    pkvk_ctx *ctx; /* the GPU's stream and L2-flush buffer; everything below is made in it */
    pkvk_shape shape;
    int32_t cap_rows, bt_stride;
    uint16_t *k, *v;          /* device pools [n_pages][hkv][ps][d] (kv_dtype; FP8: bytes) */
    float *k_scale, *v_scale; /* FP8 pools: device [n_pages][hkv] (pkv_tensors_fp8_scales') */
    uint16_t *q, *o;          /* device [cap_rows][hq][d] */
    float *o_ref;             /* device [cap_rows][hq][d], FP32 reference */
    uint16_t *src_k, *src_v;  /* device [SRC_ROWS][hkv][d] */
    uint16_t *src_q;          /* device [SRC_ROWS][hq][d] */
    int32_t *bt, *lens;       /* device [cap_rows][bt_stride], [cap_rows] */
    int32_t *stage_h;         /* the step's lengths, append pages, (row, idx, page) table updates */
    size_t stage_cap;         /* int32 */
    int32_t stage_n, stage_updates;
    int stage_pending; /* prepared, not yet uploaded with the step's first plan */
    int64_t next_src;
    pkvk_workspace *ws;
    pkvk_mlp *mlp; /* NULL: no MLP tail */
    int use_graph; /* capture each step's work into a CUDA graph and replay it */
    pkvk_upload_mode upload;
    int64_t uploads, upload_copies;    /* plan uploads; those that went by copy */
    int meta_pending;                  /* the step's metadata work started at ev[EV_META], not yet
                                          timed */
    pkvk_event *ev[EV_COUNT];          /* the intervals this backend times, one event each end */
    pkvk_graph *graph;                 /* the study layer's, captured every step */
    pkvk_graph **graphs;               /* a full model's, per (route, bucket, merge) */
    int64_t graph_steps, graph_reused; /* steps replayed; of the study layer's, updated */
    int64_t graph_made;                /* a full model's graphs captured */
    double capture_time;               /* host seconds their captures took */
    int64_t model_steps;               /* a full model's steps run */
    double timer_reads;                /* host seconds they spent reading their timers */
    /* a full model's steps, host seconds summed: from prepare to run (the stage, the
     * policy and the task layout), the upload and the launch (graph replay or the
     * forward's launches) */
    double t_prepared, host_prepare, host_upload, host_launch;
    uint16_t *o_host;
    float *ref_host;
    uint16_t *blk_k, *blk_v; /* device [PKV_TENSOR_BLOCK]: the pool's tiles, for prefill */
    int32_t n_pages;
    int32_t *pages_h, *pages_d; /* pinned host / device [n_pages]: a prefill's page list */
    pkvk_model *model;          /* a full model's dense part and pools; NULL: the study layer */
    int layers;                 /* a full model's layers run for real (run.layers_measured) */
    double layer_scale;         /* the model's layers over those: their time is scaled by it */
    pkvk_event **att_ev;        /* [2 * layers]: each layer's attention interval */
    pkvk_swap *swap;            /* preemption by swap's host pool; NULL: none */
} cuda_backend;

/* A line to the program's log (nothing without one). */
static void note(const cuda_backend *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const cuda_backend *b, const char *fmt, ...) {
    if (!b->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    b->log(b->log_ctx, line);
}

static int fail_dev(pkv_err *e, const char *what) {
    return pkv_fail(e, "cuda backend: %s: %s", what, pkvk_last_error());
}

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
        return fail_dev(e, "step metadata upload");
    b->uploads++;
    b->upload_copies += copies;
    if (b->stage_pending) b->next_src += b->stage_n;
    b->stage_pending = 0;
    return 0;
}

/* Compare the step's attention output with the FP32 GPU reference on the batch. */
static int check_output(cuda_backend *b, const pkvk_batch *batch, pkv_step_rec *rec, pkv_err *e) {
    const pkvk_shape *s = &b->shape;
    size_t n = (size_t)batch->n_rows * s->hq * s->d;
    if (pkvk_gpu_reference(b->ctx, batch, b->o_ref) || pkvk_d2h(b->o_host, b->o, n * 2) ||
        pkvk_d2h(b->ref_host, b->o_ref, n * 4))
        return fail_dev(e, "reference check");
    pkvk_compare(NULL, b->o_host, s->dtype, b->ref_host, n, &rec->max_err, &rec->mean_err);
    double l1 = 0;
    for (size_t j = 0; j < n; j++) l1 += fabs(pkvk_elem(s->dtype, b->o_host, j));
    rec->out_mean_abs = n ? l1 / n : 0;
    return 0;
}

/* The backend's part of a full model's step (pkvk_forward.h): the route on each
 * layer's pools between the layer's events, layer 0's check, the head's event. */
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
    h->batch.k_cache = pkvk_model_kv(h->b->model, l, 0);
    h->batch.v_cache = pkvk_model_kv(h->b->model, l, 1);
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

/* The forward of a full model's step over `rows` rows (the step's, or a graph's
 * bucket) with the step's prompt chunks. check: layer 0's attention is compared with
 * the reference; capture: into a graph being captured (the events as its nodes; no
 * check). */
static int forward(cuda_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int rows,
                   int check, int capture, pkv_step_rec *rec, pkv_err *e) {
    const pkvk_shape *s = &b->shape;
    const pkv_prefill_view *c = v->chunks;
    step_hooks h = {b,
                    {.shape = *s,
                     .n_rows = rows,
                     .q = b->q,
                     .o = b->o,
                     .block_table = b->bt,
                     .bt_stride = b->bt_stride,
                     .seq_lens = b->lens,
                     .sm_scale = 1.0f / sqrtf((float)s->d),
                     .k_scale = b->k_scale, /* FP8: 1 on every page and head */
                     .v_scale = b->v_scale,
                     .k_scale_all = b->k_scale ? 1.0f : 0.0f,
                     .v_scale_all = b->v_scale ? 1.0f : 0.0f},
                    plan,
                    check,
                    capture,
                    0,
                    rec,
                    e};
    const pkvk_fwd_hooks hooks = {&h, step_attend, step_mark};
    const pkvk_fwd_model f = pkvk_model_forward(b->model);
    pkvk_fwd_in in = {.rows = rows,
                      .lens = b->lens,
                      .block_table = b->bt,
                      .bt_stride = b->bt_stride,
                      .q = b->q,
                      .o = b->o};
    pkvk_fwd_at failed = PKVK_AT_BEGIN;
    if (!pkvk_forward_step(&f, &in, c ? c->n_req : 0, c ? c->lens : NULL, c ? c->pages : NULL,
                           c ? c->starts : NULL, c ? c->last : NULL, &hooks, &failed))
        return 0;
    if (h.check_failed) return -1;
    return fail_dev(e, failed == PKVK_AT_STAGE ? "a step with prompt chunks (serving.token_budget "
                                                 "at most 8192 tokens and 64 chunks on the cuda "
                                                 "backend)"
                       : failed == PKVK_AT_ATTEND ? pkv_route_name(plan->route)
                                                  : pkvk_fwd_at_name(failed));
}

/* Graph replay of a full model's decode step: rows go up to a bucket, 1, 2, 4, then
 * multiples of 8 (as serving engines capture), at most cap_rows. */
static int32_t graph_rows(int32_t rows, int32_t cap) {
    int32_t r = rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : (rows + 7) / 8 * 8;
    return r < cap ? r : cap;
}
static int graph_buckets(int32_t cap) {
    return 3 + (cap + 7) / 8;
}
/* Graphs a full model's backend keeps room for: the routes a fixed grid runs, with
 * and without merge. */
static int graph_slots(int32_t cap) {
    return __builtin_popcount(pkv_routes_in_graph(PKV_GRAPH_FIXED)) * 2 * graph_buckets(cap);
}
/* The graph of (route, bucket, merge), for the routes a fixed grid runs (the ones
 * pkv_backend_graph_routes names for a full model); NULL for another. */
static pkvk_graph **graph_slot(cuda_backend *b, const pkvk_plan *plan, int32_t rows) {
    const unsigned fixed = pkv_routes_in_graph(PKV_GRAPH_FIXED);
    if (!(fixed >> plan->route & 1)) return NULL;
    const int r = __builtin_popcount(fixed & ((1u << plan->route) - 1));
    const int k = rows == 1 ? 0 : rows == 2 ? 1 : rows <= 4 ? 2 : 2 + (rows + 7) / 8;
    return &b->graphs[(r * graph_buckets(b->cap_rows) + k) * 2 + pkvk_plan_merges(plan)];
}

/* A full model's step (see the top of the file); check compares layer 0's attention.
 * With run.cuda_graph, a decode step without prompt chunks or check replays the
 * graph of its (route, bucket, merge), captured at its first use: the prologue
 * before it brings the step's lengths, block-table updates and plan to the device
 * buffers the graph reads. */
static int run_model(cuda_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                     pkv_step_rec *rec, pkv_err *e) {
    const int graph = b->use_graph && !v->chunks && !check;
    const int32_t rows = graph ? graph_rows(v->n_rows, b->cap_rows) : v->n_rows;
    pkvk_graph **g = graph ? graph_slot(b, plan, rows) : NULL;
    if (graph && !g)
        return pkv_fail(e,
                        "run.cuda_graph: route %s cannot be replayed in a full model's graph "
                        "(ref_paged and pkv_workqueue can)",
                        pkv_route_name(plan->route));
    const double t_run = pkv_clock_now();
    b->host_prepare += t_run - b->t_prepared;
    /* EV_META to EV_ATT0: the upload and the prologue on the GPU (t_meta) */
    if (pkvk_workspace_fixed(b->ws, graph ? rows : 0) || pkvk_event_record(b->ev[EV_META]))
        return fail_dev(e, "fixed grid");
    if (upload_step(b, plan, e)) return -1;
    b->host_upload += pkv_clock_now() - t_run;
    pkvk_batch csr = {.shape = b->shape,
                      .n_rows = rows,
                      .block_table = b->bt,
                      .bt_stride = b->bt_stride,
                      .seq_lens = b->lens};
    if (pkv_route_has(plan->route, PKV_RP_CSR) && pkvk_pack_csr(b->ws, &csr))
        return fail_dev(e, "FlashInfer page list");
    /* The first step of its kind captures its graph, then replays it like the rest; a
     * server captures its graphs at start, so the capture's host time (tens of ms at
     * 32 layers) is left out of the step's wall time. */
    double t_capture = 0;
    if (g && !*g) {
        const double t = pkv_clock_now();
        int reused;
        if (pkvk_graph_begin(b->ctx)) return fail_dev(e, "graph capture");
        if (forward(b, v, plan, rows, 0, 1, rec, e)) {
            pkvk_graph_abort(b->ctx);
            return -1;
        }
        if (pkvk_graph_end(b->ctx, g, &reused)) return fail_dev(e, "graph capture");
        t_capture = pkv_clock_now() - t;
        b->graph_made++;
        b->capture_time += t_capture;
    }
    if (pkvk_event_record(b->ev[EV_ATT0])) return fail_dev(e, "event");
    const double t_launch = pkv_clock_now();
    if (g) {
        if (pkvk_graph_launch(*g)) return fail_dev(e, "graph replay");
        b->graph_steps++;
    } else if (forward(b, v, plan, rows, check, 0, rec, e)) {
        return -1;
    }
    /* The wait for the step's end, then the reading of its 2 L + 2 timers (host work
     * of the measurement alone; its mean is printed at the end), which the step's wall
     * time leaves out. */
    float ms, head_ms, att_ms, meta_ms;
    b->host_launch += pkv_clock_now() - t_launch;
    if (pkvk_event_record(b->ev[EV_ATT1]) ||
        pkvk_event_elapsed(b->ev[EV_HEAD], b->ev[EV_ATT1], &head_ms))
        return fail_dev(e, "event");
    const double t_read = pkv_clock_now();
    if (pkvk_event_elapsed(b->ev[EV_ATT0], b->ev[EV_HEAD], &ms) ||
        pkvk_events_elapsed_sum(b->att_ev, b->layers, &att_ms) ||
        pkvk_event_elapsed(b->ev[EV_META], b->ev[EV_ATT0], &meta_ms))
        return fail_dev(e, "event");
    rec->t_meta = meta_ms * 1e-3;
    /* the embedding and the layers run; run.layers_measured: the layers not run take
     * what the run ones took */
    const double layers = ms * 1e-3, att = att_ms * 1e-3;
    rec->t_device = att * b->layer_scale;
    rec->t_dense = (layers - att) * b->layer_scale + head_ms * 1e-3;
    const double read = pkv_clock_now() - t_read;
    b->base.t_unrun = (b->layer_scale - 1) * layers - read - t_capture;
    b->timer_reads += read;
    b->model_steps++;
    return 0;
}

static int cuda_run(pkv_backend *base, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                    pkv_step_rec *rec, pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    if (b->model) return run_model(b, v, plan, check, rec, e);
    const pkvk_shape *s = &b->shape;
    /* FP8: the pool's scales vary by page and head (no k_scale_all) */
    pkvk_batch batch = {.shape = *s,
                        .n_rows = v->n_rows,
                        .q = b->q,
                        .o = b->o,
                        .k_cache = b->k,
                        .v_cache = b->v,
                        .block_table = b->bt,
                        .bt_stride = b->bt_stride,
                        .seq_lens = b->lens,
                        .sm_scale = 1.0f / sqrtf((float)s->d),
                        .k_scale = b->k_scale,
                        .v_scale = b->v_scale};
    int launches;
    float ms;
    /* The plan upload is part of the step (and of its wall time), not of the
     * attention's device time. */
    if (b->use_graph) {
        /* Graph replay: the step's upload (metadata and plan), the prologue and the
         * route's kernels are captured and run as one graph; its device time covers
         * all of them. */
        int reused = 0;
        if (pkv_route_graph_of(plan->route) == PKV_GRAPH_NONE)
            return pkv_fail(e, "run.cuda_graph: the FlashInfer routes cannot be captured (their "
                               "planner may allocate); run them without it");
        if (pkvk_graph_begin(b->ctx)) return fail_dev(e, "graph capture");
        if (upload_step(b, plan, e)) {
            pkvk_graph_abort(b->ctx);
            return -1;
        }
        if (pkvk_launch(b->ws, &batch, plan, &launches)) {
            pkvk_graph_abort(b->ctx);
            return fail_dev(e, pkv_route_name(plan->route));
        }
        if (pkvk_graph_end(b->ctx, &b->graph, &reused) || pkvk_event_record(b->ev[EV_ATT0]) ||
            pkvk_graph_launch(b->graph) || pkvk_event_record(b->ev[EV_ATT1]) ||
            pkvk_event_elapsed(b->ev[EV_ATT0], b->ev[EV_ATT1], &ms))
            return fail_dev(e, "graph replay");
        b->graph_steps++;
        b->graph_reused += reused;
    } else {
        /* Timing the metadata costs an event pair: every META_EVERY-th step only (by
         * its index: the oracle runs a step several times). */
        b->meta_pending = b->stage_pending && rec->index % META_EVERY == 0;
        if (b->meta_pending && pkvk_event_record(b->ev[EV_META])) return fail_dev(e, "event");
        if (upload_step(b, plan, e)) return -1;
        /* FlashInfer's page list, like the prologue, is the step's metadata: outside
         * the attention's device time. */
        if (pkv_route_has(plan->route, PKV_RP_CSR) && pkvk_pack_csr(b->ws, &batch))
            return fail_dev(e, "FlashInfer page list");
        if (pkvk_event_record(b->ev[EV_ATT0]) || pkvk_launch(b->ws, &batch, plan, &launches) ||
            pkvk_event_record(b->ev[EV_ATT1]) ||
            pkvk_event_elapsed(b->ev[EV_ATT0], b->ev[EV_ATT1], &ms))
            return fail_dev(e, pkv_route_name(plan->route));
    }
    rec->t_device = ms * 1e-3;
    if (b->meta_pending) { /* the first route run after prepare */
        if (pkvk_event_elapsed(b->ev[EV_META], b->ev[EV_ATT0], &ms)) return fail_dev(e, "event");
        rec->t_meta = ms * 1e-3;
        b->meta_pending = 0;
    }
    return check ? check_output(b, &batch, rec, e) : 0;
}

/* A full model's prefill: its forward over the prompts (every layer's K/V pages
 * written), timed with events. */
static int prefill_model(cuda_backend *b, const pkv_prefill_view *p, double *t_device, pkv_err *e) {
    float ms;
    if (pkvk_event_record(b->ev[EV_PRE0]) ||
        pkvk_model_prefill(b->model, p->n_req, p->lens, p->pages, p->starts, p->last) ||
        pkvk_event_record(b->ev[EV_PRE1]) ||
        pkvk_event_elapsed(b->ev[EV_PRE0], b->ev[EV_PRE1], &ms))
        return fail_dev(e, "prefill forward");
    /* run.layers_measured: the whole forward scaled (its embedding and LM head, under
     * 1% of a prefill's time, with it) */
    *t_device = ms * 1e-3 * b->layer_scale;
    b->base.t_unrun = ms * 1e-3 * (b->layer_scale - 1);
    return 0;
}

/* FP8 pools: each page and KV head's scales of K and V, as the cpu backend's; unit: 1
 * everywhere (a full model's pools, kernels/pkvk_model.h). */
static int make_fp8_scales(cuda_backend *b, size_t bytes, int unit) {
    float *h = malloc(2 * bytes); /* K's, then V's */
    int rc = h ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
    if (!rc && unit)
        for (size_t i = 0; i < bytes / 2; i++) h[i] = 1.0f;
    else if (!rc)
        pkv_tensors_fp8_scales(h, h + bytes / 4, bytes / 4);
    if (!rc) rc = pkvk_malloc((void **)&b->k_scale, bytes);
    if (!rc) rc = pkvk_malloc((void **)&b->v_scale, bytes);
    if (!rc) rc = pkvk_h2d(b->k_scale, h, bytes);
    if (!rc) rc = pkvk_h2d(b->v_scale, h + bytes / 4, bytes);
    free(h);
    return rc;
}

/* Prefill's K/V write: the listed pages get the pool's tiles, timed with events. */
static int fill_prompt_pages(cuda_backend *b, const int32_t *pages, int32_t n_pages,
                             double *t_device, pkv_err *e) {
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
        return fail_dev(e, "prefill K/V write");
    *t_device = ms * 1e-3;
    return 0;
}

static int cuda_prefill(pkv_backend *base, const pkv_prefill_view *p, double *t_device,
                        pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    return b->model ? prefill_model(b, p, t_device, e)
                    : fill_prompt_pages(b, p->pages, p->n_pages, t_device, e);
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
        return fail_dev(e, to_host ? "swap-out copy" : "swap-in copy");
    *t_device = ms * 1e-3 * b->layer_scale; /* run.layers_measured: every layer's pages */
    b->base.t_unrun = ms * 1e-3 * (b->layer_scale - 1);
    return 0;
}

/* The host pool of preemption by swap over the K and V pools of every layer. */
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

/* The MLP tail on the attention output (rows x hq*d), timed with events. */
static int cuda_finish(pkv_backend *base, const pkv_batch_view *v, pkv_step_rec *rec, pkv_err *e) {
    cuda_backend *b = (cuda_backend *)base;
    if (!b->mlp) return 0;
    const uint16_t *z;
    float ms;
    if (pkvk_event_record(b->ev[EV_MLP0]) || pkvk_mlp_run(b->mlp, v->n_rows, b->o, &z) ||
        pkvk_event_record(b->ev[EV_MLP1]) ||
        pkvk_event_elapsed(b->ev[EV_MLP0], b->ev[EV_MLP1], &ms))
        return fail_dev(e, "MLP tail");
    rec->t_mlp = ms * 1e-3;
    return 0;
}

static void cuda_destroy(pkv_backend *base) {
    cuda_backend *b = (cuda_backend *)base;
    if (!b->model) { /* else the pools are the model's */
        pkvk_free(b->k);
        pkvk_free(b->v);
    }
    void *dev[] = {b->q,    b->o,     b->o_ref, b->src_k,   b->src_v,   b->src_q,  b->bt,
                   b->lens, b->blk_k, b->blk_v, b->pages_d, b->k_scale, b->v_scale};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) pkvk_free(dev[i]);
    pkvk_swap_destroy(b->swap);
    pkvk_model_destroy(b->model);
    for (int k = 0; b->att_ev && k < 2 * b->layers; k++) pkvk_event_destroy(b->att_ev[k]);
    free(b->att_ev);
    pkvk_host_free(b->pages_h);
    free(b->stage_h);
    pkvk_workspace_destroy(b->ws);
    for (int k = 0; k < EV_COUNT; k++) pkvk_event_destroy(b->ev[k]);
    pkvk_mlp_destroy(b->mlp);
    pkvk_graph_destroy(b->graph);
    for (int k = 0; b->graphs && k < graph_slots(b->cap_rows); k++)
        pkvk_graph_destroy(b->graphs[k]);
    free(b->graphs);
    if (b->model_steps) {
        const double per = 1e6 / b->model_steps;
        note(b,
             "reading a step's %d timers took %.1f us of host time (mean of %lld "
             "steps; left out of t_wall)",
             2 * b->layers + 3, b->timer_reads * per, (long long)b->model_steps);
        note(b,
             "host time of a step (mean; in t_wall): prepare, policy and task layout "
             "%.1f us, upload %.1f us, launch %.1f us",
             b->host_prepare * per, b->host_upload * per, b->host_launch * per);
    }
    if (b->graph_steps && b->model)
        note(b,
             "cuda graphs: %lld steps replayed, %lld graphs captured (route, rows "
             "bucket, merge) in %.1f ms of host time (left out of t_wall)",
             (long long)b->graph_steps, (long long)b->graph_made, 1e3 * b->capture_time);
    else if (b->graph_steps)
        note(b,
             "cuda graphs: %lld steps, %lld replays of an updated graph, %lld "
             "instantiations",
             (long long)b->graph_steps, (long long)b->graph_reused,
             (long long)(b->graph_steps - b->graph_reused));
    if (b->upload == PKVK_UPLOAD_PARAMS && b->upload_copies)
        note(b,
             "%lld of %lld plan uploads exceeded the launch's parameters and were "
             "copied",
             (long long)b->upload_copies, (long long)b->uploads);
    pkvk_ctx_destroy(b->ctx);
    free(b->o_host);
    free(b->ref_host);
    free(b);
}

pkv_backend *pkv_backend_cuda_create(const pkv_model *md, const pkv_backend_spec *spec,
                                     int32_t cap_rows, int32_t cap_slots, int32_t cap_tasks,
                                     pkv_err *e) {
    const int32_t n_pages = spec->kv_pages, bt_stride = spec->bt_stride;
    const int use_graph = spec->cuda_graph, device = spec->device;
    const uint64_t seed = spec->seed;
    pkvk_device_info dev;
    pkvk_ctx *ctx = NULL;
    if (pkvk_ctx_create(&ctx, device) || pkvk_device_info_get(&dev)) {
        pkv_fail(e, "--backend cuda: no usable GPU: %s", pkvk_last_error());
        pkvk_ctx_destroy(ctx);
        return NULL;
    }
    const pkvk_shape sh = pkv_model_attn_shape(md), *s = &sh;
    const pkv_model_kind *mk = pkv_model_kind_of(md);
    const bool forward = !mk->kv_synthetic; /* the model's forward, over its own KV */
    const int32_t mlp_inter = (int32_t)md->mlp_tail;
    pkvk_model_shape ms = pkv_model_gpu_shape(md);
    /* run.layers_measured: only the first layers exist on the GPU (weights, pools) */
    if (forward && spec->layers_measured > 0 && spec->layers_measured < ms.layers)
        ms.layers = spec->layers_measured;
    const int32_t cap_tokens = cap_rows > PKV_FORWARD_TOKENS ? cap_rows : PKV_FORWARD_TOKENS;
    const int32_t max_prompt = bt_stride * s->page_size;
    /* a replica of a model another cuda backend holds reads that one's weights */
    const cuda_backend *donor =
        mk->weights && spec->weights_from && spec->weights_from->destroy == cuda_destroy &&
                ((const cuda_backend *)spec->weights_from)->model &&
                ((const cuda_backend *)spec->weights_from)->layers == ms.layers
            ? (const cuda_backend *)spec->weights_from
            : NULL;
    /* bytes: the study layer's K (or V) pool; a full model's pools of every layer with
     * its weights and activations */
    const size_t pool =
                     (size_t)n_pages * s->hkv * s->page_size * s->d * pkvk_dtype_bytes(s->kv_dtype),
                 scales = s->kv_dtype == PKVK_FP8_E4M3 ? (size_t)n_pages * s->hkv * 4 : 0;
    const size_t pools = forward ? pkvk_model_bytes(&ms, cap_tokens, max_prompt, n_pages) -
                                       (donor ? pkvk_model_weight_bytes(&ms) : 0) + 2 * scales
                                 : 2 * (pool + scales);
    size_t rows = (size_t)cap_rows * s->hq * s->d;
    size_t need = pools + rows * 8 + (size_t)SRC_ROWS * (2 * s->hkv + s->hq) * s->d * 2 +
                  (size_t)cap_rows * bt_stride * 16 + (size_t)cap_slots * s->hq * (s->d + 2) * 4 +
                  (size_t)mlp_inter * s->hq * s->d * 6 + (size_t)cap_rows * mlp_inter * 6 +
                  (size_t)PKV_TENSOR_BLOCK * 4 + (size_t)n_pages * 4;
    if (need + (256u << 20) > dev.mem_free) {
        pkv_model run = *md; /* the layers on the GPU */
        run.layers = ms.layers;
        if (forward)
            pkv_fail(e,
                     "--backend cuda: model %s needs %.2f GiB on the GPU (%.2f GiB of weights, "
                     "%.2f GiB for %d KV pages of %d layers, the rest activations and "
                     "workspaces) but %s has %.2f GiB free; lower serving.kv_pages%s",
                     md->name, need / (double)(1 << 30),
                     pkv_model_weight_bytes(&run) / (double)(1 << 30),
                     n_pages * pkv_model_page_bytes(&run) / (double)(1 << 30), n_pages, run.layers,
                     dev.name, dev.mem_free / (double)(1 << 30),
                     run.layers < md->layers ? "" : " or run fewer layers (run.layers_measured)");
        else
            pkv_fail(e,
                     "--backend cuda: the KV pool of %d pages needs %.2f GiB on the GPU (%.2f GiB "
                     "with buffers) but %s has %.2f GiB free; lower serving.kv_pages",
                     n_pages, 2.0 * pool / (1 << 30), need / (double)(1 << 30), dev.name,
                     dev.mem_free / (double)(1 << 30));
        pkvk_ctx_destroy(ctx);
        return NULL;
    }
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) {
        pkvk_ctx_destroy(ctx);
        pkv_fail(e, "out of memory");
        return NULL;
    }
    b->ctx = ctx;
    b->log = spec->log, b->log_ctx = spec->log_ctx;
    b->base = (pkv_backend){.name = "cuda",
                            .measures = 1,
                            .mixed = mk->mixed,
                            .prepare = cuda_prepare,
                            .run = cuda_run,
                            .finish = cuda_finish,
                            .prefill = cuda_prefill,
                            .swap = spec->swap_slots > 0 ? cuda_swap : NULL,
                            .destroy = cuda_destroy};
    b->n_pages = n_pages;
    b->layer_scale = 1; /* a full model's, below */
    b->shape = sh;
    b->use_graph = use_graph;
    b->upload = spec->metadata_copy ? PKVK_UPLOAD_COPY : PKVK_UPLOAD_PARAMS;
    b->cap_rows = cap_rows;
    b->bt_stride = bt_stride;
    b->stage_cap = 2 * (size_t)cap_rows + 3 * (size_t)cap_rows * bt_stride;
    pkv_tensors t = {0};
    b->o_host = malloc(rows * 2);
    b->ref_host = malloc(rows * 4);
    int rc = !b->o_host || !b->ref_host ? PKVK_ERR_OUT_OF_MEMORY : PKVK_OK;
    if (!rc && pkv_tensors_make(&t, s, seed)) rc = PKVK_ERR_OUT_OF_MEMORY;
    if (!rc && forward) {
        b->layers = ms.layers;
        b->layer_scale = (double)md->layers / ms.layers;
        rc = pkvk_model_create_sharing(ctx, &b->model, &ms, cap_tokens, max_prompt, n_pages, seed,
                                       donor ? donor->model : NULL);
        if (!rc) {
            b->k = pkvk_model_kv(b->model, 0, 0); /* the prologue's append lands in layer 0 */
            b->v = pkvk_model_kv(b->model, 0, 1);
            if (scales) rc = make_fp8_scales(b, scales, 1);
            b->att_ev = calloc(2 * (size_t)b->layers, sizeof *b->att_ev);
            if (use_graph) b->graphs = calloc((size_t)graph_slots(cap_rows), sizeof *b->graphs);
            if (!b->att_ev || (use_graph && !b->graphs)) rc = PKVK_ERR_OUT_OF_MEMORY;
        }
        for (int k = 0; !rc && k < 2 * b->layers; k++) rc = pkvk_event_create(ctx, &b->att_ev[k]);
    } else {
        if (!rc) rc = pkvk_malloc((void **)&b->k, pool);
        if (!rc) rc = pkvk_malloc((void **)&b->v, pool);
        if (!rc && scales) rc = make_fp8_scales(b, scales, 0);
    }
    if (!rc) rc = pkvk_malloc((void **)&b->q, rows * 2);
    if (!rc) rc = pkvk_malloc((void **)&b->o, rows * 2);
    if (!rc) rc = pkvk_memset(b->o, 0, rows * 2); /* a graph's rows past the step's read it */
    if (!rc) rc = pkvk_malloc((void **)&b->o_ref, rows * 4);
    if (!rc) rc = pkvk_malloc((void **)&b->src_k, t.src_kv * 2);
    if (!rc) rc = pkvk_malloc((void **)&b->src_v, t.src_kv * 2);
    if (!rc) rc = pkvk_malloc((void **)&b->src_q, t.src_q_n * 2);
    if (!rc) rc = pkvk_malloc((void **)&b->bt, (size_t)cap_rows * bt_stride * 4);
    if (!rc) rc = pkvk_malloc((void **)&b->lens, (size_t)cap_rows * 4);
    if (!rc && !(b->stage_h = malloc(b->stage_cap * 4))) rc = PKVK_ERR_OUT_OF_MEMORY;
    if (!rc) rc = pkvk_workspace_create(ctx, &b->ws, s, cap_rows, cap_slots, cap_tasks);
    if (!rc) rc = pkvk_workspace_reserve(b->ws, b->stage_cap * 4);
    /* FlashInfer's state and its page list for the largest step, made now: a step
     * allocates nothing. */
    if (!rc) rc = pkvk_workspace_flashinfer(b->ws, (size_t)cap_rows * bt_stride);
    if (!rc) rc = pkvk_memset(b->bt, 0, (size_t)cap_rows * bt_stride * 4);
    if (!rc) rc = pkvk_malloc((void **)&b->blk_k, (size_t)PKV_TENSOR_BLOCK * 2);
    if (!rc) rc = pkvk_malloc((void **)&b->blk_v, (size_t)PKV_TENSOR_BLOCK * 2);
    if (!rc) rc = pkvk_malloc((void **)&b->pages_d, (size_t)n_pages * 4);
    if (!rc) rc = pkvk_host_alloc((void **)&b->pages_h, (size_t)n_pages * 4);
    for (int k = 0; k < EV_COUNT && !rc; k++) rc = pkvk_event_create(ctx, &b->ev[k]);
    /* The pool starts tiled from the shared blocks (prefill writes a prompt's pages
     * with the same tiles; a page taken again by a decode step keeps stale values, as
     * in a server); new tokens and queries come from the prepared rows. */
    double t_fill;
    if (!rc) {
        for (int32_t i = 0; i < n_pages; i++) b->pages_h[i] = i;
        if (!rc) rc = pkvk_h2d(b->blk_k, t.blk_k, (size_t)PKV_TENSOR_BLOCK * 2);
        if (!rc) rc = pkvk_h2d(b->blk_v, t.blk_v, (size_t)PKV_TENSOR_BLOCK * 2);
        if (!rc && !forward) rc = fill_prompt_pages(b, NULL, n_pages, &t_fill, e);
    }
    if (!rc) rc = pkvk_h2d(b->src_k, t.src_k, t.src_kv * 2);
    if (!rc) rc = pkvk_h2d(b->src_v, t.src_v, t.src_kv * 2);
    if (!rc) rc = pkvk_h2d(b->src_q, t.src_q, t.src_q_n * 2);
    if (!rc && mlp_inter > 0)
        rc = pkvk_mlp_create(ctx, &b->mlp, s->hq * s->d, mlp_inter, cap_rows, t.blk_v,
                             PKV_TENSOR_BLOCK);
    b->base.v_max = forward ? 0 : t.v_max; /* a full model's pools hold its own K and V */
    pkv_tensors_free(&t);
    if (!rc && spec->swap_slots > 0 && make_swap_pool(b, spec->swap_slots, e)) {
        cuda_destroy(&b->base);
        return NULL;
    }
    /* A server warms up before it serves: the first forward's kernel loads and cuBLAS's
     * choices are made here, not in the first prefill the run times. */
    if (!rc && forward) {
        const double t_warm = pkv_clock_now();
        if (!(rc = pkvk_model_warmup(b->model)))
            note(b, "warm-up forwards took %.1f ms (before the run)",
                 1e3 * (pkv_clock_now() - t_warm));
    }
    if (rc) {
        if (rc == PKVK_ERR_OUT_OF_MEMORY)
            pkv_fail(e, "--backend cuda: out of memory setting up the GPU pool (%s)",
                     pkvk_last_error());
        else
            fail_dev(e, "setting up the GPU pool");
        cuda_destroy(&b->base);
        return NULL;
    }
    return &b->base;
}
