/* The cpu backend: runs each step's plan through the kernels' CPU mirror on a host
 * KV pool. It exists to check the whole loop (allocator -> block tables -> plan ->
 * attention) on machines without a GPU; its wall times are CPU times. Both kinds of
 * model run through the one forward (pkvk_forward.h), the route being the backend's
 * attend hook: a full model (a small one: its weights and pools in host memory) runs its
 * CPU mirror's operations in FP32 (pkvk_cpu_model, kernels/pkvk_model.h), the study
 * layer one of the backend's own (a prompt's pages written with the pool's tiles); its
 * new tokens' K/V and Q come from the prepared rows in prepare, as the cuda backend's
 * prologue appends them. */
#include "backends.h"
#include "moe.h"
#include "pkv_clock.h"
#include "routes.h"
#include "tensors.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CPU_POOL_LIMIT_MIB = 2048 };

typedef struct cpu_backend {
    pkv_backend base;
    pkvk_shape shape;
    uint16_t *k, *v, *q;      /* pools [n_pages][hkv][ps][d] (kv_dtype; FP8: bytes); q
                                 [cap_rows][q_len_cap][hq][d] (dtype) */
    float *k_scale, *v_scale; /* FP8 KV: [n_pages][hkv] (pkv_tensors_fp8_scales') */
    float *o, *o_ref, *part;
    size_t part_cap;   /* floats: the planner's most partial states, sized at start */
    int32_t q_len_cap; /* a row's most query tokens (a verify step's k + 1; else 1) */
    pkv_tensors t;
    int64_t next_src;      /* prepared row of the next appended token */
    pkvk_cpu_model *model; /* a full model; NULL: the study layer */
    pkvk_fwd_model fwd;    /* the one forward's operations: the model's or the study's */
} cpu_backend;

static size_t page_elems(const pkvk_shape *s) {
    return (size_t)s->hkv * s->page_size * s->d;
}

/* n elements of a pool from j on, within one page's K (or V) of a KV head, from
 * tensor values (tensors.h: the pool's type, copied as they are; or FP16 for an FP8
 * pool, quantized here over the page and head's scale). */
static void put_kv(const cpu_backend *b, uint16_t *pool, const float *scale, size_t j,
                   const uint16_t *src, size_t n) {
    const pkvk_shape *s = &b->shape;
    if (s->kv_dtype != PKVK_FP8_E4M3) {
        memcpy(pool + j, src, 2 * n);
        return;
    }
    const float c = scale[j / ((size_t)s->page_size * s->d)];
    for (size_t k = 0; k < n; k++) pkvk_store(PKVK_FP8_E4M3, pool, j + k, pkvk_h2f(src[k]) / c);
}

/* The listed pages (all of the first n when pages is NULL) get the pool's tiles. */
static void fill_pages(cpu_backend *b, const int32_t *pages, int32_t n) {
    size_t pe = page_elems(&b->shape);
    for (int32_t i = 0; i < n; i++)
        for (size_t j = (size_t)(pages ? pages[i] : i) * pe, end = j + pe; j < end; j++) {
            put_kv(b, b->k, b->k_scale, j, &b->t.blk_k[j % PKV_TENSOR_BLOCK], 1);
            put_kv(b, b->v, b->v_scale, j, &b->t.blk_v[j % PKV_TENSOR_BLOCK], 1);
        }
}

/* The study layer's operation in the one forward (it has no dense part): a prompt
 * piece's pages written with the pool's tiles. */
static int study_pieces(void *self, int l, const pkvk_fwd_in *in) {
    cpu_backend *b = self;
    (void)l;
    for (int g = 0; g < in->p.n; g++) {
        const pkvk_piece *c = &in->p.s[g];
        fill_pages(b, in->pages + c->page_off,
                   (c->q0 + c->len + b->shape.page_size - 1) / b->shape.page_size);
    }
    return 0;
}

static const pkvk_fwd_ops study_ops = {.pieces = study_pieces};

static int cpu_prefill(pkv_backend *base, const pkv_prefill_view *p, double *t_device, pkv_err *e) {
    cpu_backend *b = (cpu_backend *)base;
    *t_device = NAN;
    int rc =
        pkvk_forward_prefill(&b->fwd, p->n_req, p->lens, p->pages, p->starts, p->last, NULL, NULL);
    return rc ? pkv_fail(e, "cpu backend: the prefill failed (status %d)", rc) : 0;
}

/* The study layer's new tokens, once a step (the oracle runs the forward again): K/V
 * appended at position len-1 of every row and the step's Q, from the prepared rows
 * (tensors.h), as the cuda backend's prologue does. A full model appends its rows' K/V
 * in its forward. */
static int cpu_prepare(pkv_backend *base, const pkv_batch_view *v, pkv_err *e) {
    cpu_backend *b = (cpu_backend *)base;
    const pkvk_shape *s = &b->shape;
    (void)e;
    if (b->model) return 0;
    for (int32_t i = 0; i < v->n_rows; i++) {
        int32_t t = v->seq_lens[i] - 1;
        int32_t page = v->block_table[(size_t)i * v->bt_stride + t / s->page_size];
        size_t src = (size_t)((b->next_src + i) % PKV_TENSOR_SRC_ROWS);
        for (int h = 0; h < s->hkv; h++) {
            size_t off = (((size_t)page * s->hkv + h) * s->page_size + t % s->page_size) * s->d;
            const size_t from = (src * s->hkv + h) * s->d;
            put_kv(b, b->k, b->k_scale, off, b->t.src_k + from, (size_t)s->d);
            put_kv(b, b->v, b->v_scale, off, b->t.src_v + from, (size_t)s->d);
        }
        memcpy(b->q + (size_t)i * s->hq * s->d, b->t.src_q + src * s->hq * s->d,
               2 * (size_t)s->hq * s->d);
    }
    b->next_src += v->n_rows;
    return 0;
}

/* The study layer's batch (its Q and pools; FP8: the pool's scales vary by page and head,
 * no k_scale_all), which a full model's layer 0 is checked on too. */
static pkvk_batch study_batch(const cpu_backend *b, const pkv_batch_view *v) {
    const pkvk_shape *s = &b->shape;
    return (pkvk_batch){.shape = *s,
                        .n_rows = v->n_rows,
                        .q = b->q,
                        .k_cache = b->k,
                        .v_cache = b->v,
                        .block_table = v->block_table,
                        .bt_stride = v->bt_stride,
                        .seq_lens = v->seq_lens,
                        .q_len = 1 + v->spec_tokens,
                        .sm_scale = 1.0f / sqrtf((float)s->d),
                        .k_scale = b->k_scale,
                        .v_scale = b->v_scale};
}

/* The backend's part of a step's forward: the route on layer l's pools, timed; a full
 * model's layer 0 output and Q kept for the check. */
typedef struct cpu_step {
    cpu_backend *b;
    const pkv_batch_view *v;
    const pkvk_fwd_in *in;
    const pkvk_plan *plan;
    pkvk_cpu_attend attend;
    double t_attention;
} cpu_step;

static int cpu_attend(void *ctx, int l) {
    cpu_step *h = ctx;
    cpu_backend *b = h->b;
    float *o = b->o;
    const pkvk_batch batch =
        b->model ? pkvk_cpu_model_attention(b->model, l, h->in, &o) : study_batch(b, h->v);
    const double t0 = pkv_clock_now();
    int rc = pkvk_cpu_run(&batch, h->plan, h->attend, b->part, o);
    h->t_attention += pkv_clock_now() - t0;
    if (!rc && l == 0 && b->model) {
        const size_t n = (size_t)h->v->n_rows * batch.q_len * b->shape.hq * b->shape.d;
        memcpy(b->o, o, sizeof(float) * n);
        memcpy(b->q, batch.q, 2 * n);
    }
    return rc;
}

static int cpu_run(pkv_backend *base, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                   pkv_step_rec *rec, pkv_err *e) {
    cpu_backend *b = (cpu_backend *)base;
    const pkvk_shape *s = &b->shape;
    double t0 = pkv_clock_now();
    const int32_t q_len = 1 + v->spec_tokens;
    if (q_len > b->q_len_cap)
        return pkv_fail(e, "cpu backend: a verify of %d query tokens a row, sized for %d", q_len,
                        b->q_len_cap);
    if (pkvk_partial_floats(s, plan->n_slots) * q_len > b->part_cap)
        return pkv_fail(e, "cpu backend: a plan of %d partial states, sized for %zu", plan->n_slots,
                        b->part_cap / pkvk_partial_floats(s, 1));
    const pkv_route_ops *ops = pkv_route_ops_of(plan->route);
    pkvk_fwd_in in = {.rows = v->n_rows,
                      .lens = v->seq_lens,
                      .block_table = v->block_table,
                      .bt_stride = v->bt_stride,
                      .q_len = q_len};
    cpu_step h = {b, v, &in, plan, ops ? ops->cpu_attend : NULL, 0};
    const pkvk_fwd_hooks hooks = {&h, cpu_attend, NULL};
    int rc = pkvk_forward_step(&b->fwd, &in, 0, NULL, NULL, NULL, NULL, &hooks, NULL);
    rec->t_device = h.t_attention; /* the attention work's time, on the CPU */
    if (b->model) rec->t_dense = pkv_clock_now() - t0 - rec->t_device;
    if (rc)
        return pkv_fail(e, "cpu backend: %s failed (status %d)", pkv_route_name(plan->route), rc);
    if (check) {
        const pkvk_batch batch = study_batch(b, v);
        if (pkvk_cpu_reference(&batch, b->o_ref))
            return pkv_fail(e, "cpu backend: the reference does not take head dimension %d", s->d);
        size_t n = (size_t)v->n_rows * q_len * s->hq * s->d;
        pkvk_compare(b->o, NULL, PKVK_FP16, b->o_ref, n, &rec->max_err, &rec->mean_err);
        double l1 = 0;
        for (size_t j = 0; j < n; j++) l1 += fabs(b->o[j]);
        rec->out_mean_abs = n ? l1 / n : 0;
    }
    return 0;
}

static void cpu_destroy(pkv_backend *base) {
    cpu_backend *b = (cpu_backend *)base;
    if (b->model)
        pkvk_cpu_model_destroy(b->model); /* and its pools */
    else
        free(b->k), free(b->v);
    free(b->k_scale), free(b->v_scale);
    free(b->q);
    free(b->o);
    free(b->o_ref);
    free(b->part);
    pkv_tensors_free(&b->t);
    free(b);
}

pkv_backend *pkv_backend_cpu_create(const pkv_model *md, const pkv_backend_spec *spec,
                                    int32_t cap_rows, int32_t cap_slots, int32_t q_len_cap,
                                    pkv_err *e) {
    const int32_t n_pages = spec->kv_pages;
    const uint64_t seed = spec->seed;
    const pkvk_shape sh = pkv_model_attn_shape(md), *s = &sh;
    const pkvk_model_shape ms = pkv_model_gpu_shape(md);
    size_t pool = (size_t)n_pages * s->hkv * s->page_size * s->d;
    const pkv_model_kind *mk = pkv_model_kind_of(md);
    const bool forward = !mk->kv_synthetic; /* the model's forward, over its own KV */
    const int32_t chunk = cap_rows > PKV_FORWARD_TOKENS ? cap_rows : PKV_FORWARD_TOKENS;
    const pkvk_moe_shape moe = pkv_model_moe_shape(md);
    const size_t model_bytes = forward ? pkvk_cpu_model_bytes(&ms, cap_rows, chunk, n_pages) +
                                             (moe.experts ? pkvk_cpu_moe_bytes(&ms, &moe) : 0)
                                       : 0;
    if (model_bytes > (size_t)CPU_POOL_LIMIT_MIB << 20) {
        pkv_fail(e,
                 "the cpu backend runs a full model in host memory, in FP32, and is meant for "
                 "small ones: model %s with %d KV pages needs %zu MiB (limit %d MiB); run it on "
                 "the model or cuda backend, or give a smaller shape",
                 md->name, n_pages, model_bytes >> 20, CPU_POOL_LIMIT_MIB);
        return NULL;
    }
    if (!forward && pool * 4 > (size_t)CPU_POOL_LIMIT_MIB << 20) {
        pkv_fail(e,
                 "the cpu backend holds the KV pool in host memory and is meant for small "
                 "shapes: %d pages need %zu MiB (limit %d MiB); lower serving.kv_pages or use "
                 "--backend model",
                 n_pages, pool * 4 >> 20, CPU_POOL_LIMIT_MIB);
        return NULL;
    }
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->base = (pkv_backend){.name = "cpu",
                            .measures = 1,
                            .prepare = cpu_prepare,
                            .run = cpu_run,
                            .prefill = cpu_prefill,
                            .destroy = cpu_destroy};
    b->shape = *s;
    size_t qn = (size_t)cap_rows * s->hq * s->d;
    if (forward) {
        if (pkvk_cpu_model_create(&b->model, &ms, cap_rows, chunk, n_pages, seed) ||
            (moe.experts &&
             pkvk_cpu_model_experts(b->model, &moe, seed, pkv_moe_route, spec->experts))) {
            cpu_destroy(&b->base);
            pkv_fail(e, "cpu backend: out of host memory for model %s", md->name);
            return NULL;
        }
        b->k = pkvk_cpu_model_kv(b->model, 0, 0); /* layer 0's, which the check reads */
        b->v = pkvk_cpu_model_kv(b->model, 0, 1);
    }
    if (forward && s->kv_dtype == PKVK_FP8_E4M3) { /* the model's codes are at scale 1 */
        const size_t heads = (size_t)n_pages * s->hkv;
        b->k_scale = malloc(heads * sizeof(float));
        b->v_scale = malloc(heads * sizeof(float));
        for (size_t i = 0; b->k_scale && b->v_scale && i < heads; i++)
            b->k_scale[i] = b->v_scale[i] = 1.f;
    } else if (!forward) {
        b->k = malloc(pool * pkvk_dtype_bytes(s->kv_dtype));
        b->v = malloc(pool * pkvk_dtype_bytes(s->kv_dtype));
        if (s->kv_dtype == PKVK_FP8_E4M3) {
            const size_t heads = (size_t)n_pages * s->hkv;
            b->k_scale = malloc(heads * sizeof(float));
            b->v_scale = malloc(heads * sizeof(float));
            if (b->k_scale && b->v_scale) pkv_tensors_fp8_scales(b->k_scale, b->v_scale, heads);
        }
    }
    b->q_len_cap = q_len_cap > 1 ? q_len_cap : 1;
    qn *= (size_t)b->q_len_cap;
    b->q = malloc(qn * 2);
    b->o = malloc(qn * 4);
    b->o_ref = malloc(qn * 4);
    b->part_cap = pkvk_partial_floats(s, cap_slots) * (size_t)b->q_len_cap;
    b->part = malloc(b->part_cap * sizeof(float));
    if (!b->k || !b->v || !b->q || !b->o || !b->o_ref || !b->part ||
        (s->kv_dtype == PKVK_FP8_E4M3 && (!b->k_scale || !b->v_scale)) ||
        pkv_tensors_make(&b->t, s, seed)) {
        cpu_destroy(&b->base);
        pkv_fail(e, "cpu backend: out of host memory for a %zu MiB KV pool", pool * 4 >> 20);
        return NULL;
    }
    /* The pool starts tiled from the shared blocks; prefill writes a prompt's pages
     * with the same tiles, and a page freed and taken again by a decode step keeps
     * stale values, as in a server (the reference reads the same memory). A full
     * model's pools start at 0, as on the GPU. */
    if (!forward) fill_pages(b, NULL, (int32_t)(pool / page_elems(s)));
    b->fwd = forward ? pkvk_cpu_model_forward(b->model)
                     : (pkvk_fwd_model){&study_ops, b, 1, s->page_size, INT32_MAX / 2, 0};
    b->base.v_max = forward ? 0 : b->t.v_max; /* a full model's pools hold its own K and V */
    return &b->base;
}
