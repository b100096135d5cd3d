/* The full model's dense part on the GPU against a direct FP32 computation on the
 * CPU, on a tiny model (two layers, small widths) with fresh weights from a random
 * seed, in each type (FP16, BF16, either over FP8 KV at scale 1): a prefill of three
 * prompts split over chunks (every layer's K/V pages and the last prompt's logits),
 * then a decode step through the reference route (the step's logits), then chunked
 * prefill: a fourth prompt's first chunk alone, its second in a mixed step with the
 * three decode rows (the rows' and the prompt's logits, the prompt's K/V pages), then
 * two decode steps replayed from one CUDA graph of fixed grids; and the cpu backend's
 * model (its CPU mirror) against the GPU's step by step, in the same types, also with a
 * mixture of experts in the last layer. GPU test: skips without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "pkvk.h"

#include "tinymodel.h"

/* FP8 pools' scales: 1 for every page and KV head (device), as the model writes them. */
static float *unit_d;

/* The attention's shape of the tiny model in its current types. */
static pkvk_shape attn_shape(void) {
    return (pkvk_shape){
        .hq = HQ, .hkv = HKV, .d = D, .page_size = PS, .dtype = S.dtype, .kv_dtype = S.kv_dtype};
}
static int fp8(void) {
    return S.kv_dtype == PKVK_FP8_E4M3;
}
/* The logits' bound against the reference (FP16's: 0.03 rms + 0.01, scaled). */
static double logit_tol(double rms) {
    return tiny_tol_scale() * 0.03 * rms + 0.01;
}

/* Layer l's attention over the decode rows (device buffers). */
static pkvk_batch layer_batch(pkvk_model *m, int l, uint16_t *q, uint16_t *o, int32_t *bt, int bts,
                              int32_t *seq_lens) {
    pkvk_batch b = {.shape = attn_shape(),
                    .n_rows = NREQ,
                    .q = q,
                    .o = o,
                    .k_cache = pkvk_model_kv(m, l, 0),
                    .v_cache = pkvk_model_kv(m, l, 1),
                    .block_table = bt,
                    .bt_stride = bts,
                    .seq_lens = seq_lens,
                    .sm_scale = 1.f / sqrtf((float)D),
                    .k_scale = fp8() ? unit_d : NULL,
                    .v_scale = fp8() ? unit_d : NULL,
                    .k_scale_all = fp8() ? 1.f : 0.f,
                    .v_scale_all = fp8() ? 1.f : 0.f};
    return b;
}

/* A step through the one forward (pkvk_forward_step): `rows` decode rows (plan's
 * route on each layer's pools), n prompt pieces. */
typedef struct route_hook {
    pkvk_model *m;
    pkvk_workspace *ws;
    const pkvk_plan *plan;
    pkvk_batch b;
} route_hook;

static int route_attend(void *ctx, int l) {
    route_hook *h = ctx;
    int launches;
    h->b.k_cache = pkvk_model_kv(h->m, l, 0);
    h->b.v_cache = pkvk_model_kv(h->m, l, 1);
    return pkvk_launch(h->ws, &h->b, h->plan, &launches);
}

static int model_forward(pkvk_model *m, pkvk_workspace *ws, const pkvk_plan *plan, uint16_t *q,
                         uint16_t *o, int32_t *bt_d, int bts, int32_t *lens_d, int rows, int q_len,
                         int n, const int32_t *plens, const int32_t *pages, const int32_t *starts,
                         const uint8_t *last) {
    route_hook h = {m, ws, plan, layer_batch(m, 0, q, o, bt_d, bts, lens_d)};
    h.b.n_rows = rows, h.b.q_len = q_len;
    const pkvk_fwd_hooks hooks = {&h, route_attend, NULL};
    const pkvk_fwd_model f = pkvk_model_forward(m);
    pkvk_fwd_in in = {.rows = rows,
                      .lens = lens_d,
                      .block_table = bt_d,
                      .bt_stride = bts,
                      .q_len = q_len,
                      .q = q,
                      .o = o};
    return pkvk_forward_step(&f, &in, n, plens, pages, starts, last, &hooks, NULL);
}
static int model_step(pkvk_model *m, pkvk_workspace *ws, const pkvk_plan *plan, uint16_t *q,
                      uint16_t *o, int32_t *bt_d, int bts, int32_t *lens_d, int rows, int n,
                      const int32_t *plens, const int32_t *pages, const int32_t *starts,
                      const uint8_t *last) {
    return model_forward(m, ws, plan, q, o, bt_d, bts, lens_d, rows, 1, n, plens, pages, starts,
                         last);
}

static void check_model(pkvk_ctx *ctx);

/* A mixture of experts in the tiny model's last layer (NULL: none): 8 experts of 48, 2 a
 * token. */
static const pkvk_moe_shape tiny_moe = {8, 2, 48, 1}, *moe;

/* A routing both models are given (a function of the layer and the tokens alone, so
 * that the GPU's, drawn at a forward's start, and the CPU's, drawn at each layer, agree):
 * each of the tokens x k slots to an expert from a hash, one in three to expert 0 or 1
 * (uneven loads), the next with room where that one is full. */
static int test_route(void *ctx, int l, int tokens, int32_t *counts) {
    const pkvk_moe_shape *e = ctx;
    memset(counts, 0, sizeof(int32_t) * (size_t)e->experts);
    for (int s = 0; s < tokens * e->k; s++) {
        uint64_t x = (seed ^ (uint64_t)l << 40 ^ (uint64_t)tokens << 20 ^ (uint64_t)s) *
                     0x9E3779B97F4A7C15ull;
        int to = (int)((x >> 33) % (uint64_t)(s % 3 ? e->experts : 2));
        while (counts[to] == tokens) to = (to + 1) % e->experts;
        counts[to]++;
    }
    return 0;
}

/* The cpu backend's model (pkvk_cpu_model) and the GPU's step by step: a prefill of
 * the three prompts (the sampled token and logits), then three decode steps through
 * pkv_workqueue with rows split 1 to 3 ways, both fed the GPU's sampled tokens (each
 * step's logits of every row), then a speculative decoding's verify step of VQ tokens a
 * row (the GPU's verify forward: its rows' tokens packed beside the heads in the route;
 * each row's last token's logits), then every layer's K/V pages. */
static void check_cpu_mirror(pkvk_ctx *ctx) {
    enum { STEPS = 3, VQ = 3, BTS = (MAX_PROMPT + STEPS + VQ + PS - 1) / PS };
    const pkvk_shape as = attn_shape();
    pkvk_model *m;
    pkvk_cpu_model *cm;
    pkvk_workspace *ws;
    pkvk_plan plan;
    int32_t bt[NREQ][BTS], pages[NREQ * BTS], n_pages = 0, *lens_d, *bt_d;
    uint16_t *q, *o;
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < BTS; p++) bt[r][p] = r * BTS + p;
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + PS - 1) / PS; p++) pages[n_pages++] = bt[r][p];
    float *part = malloc(pkvk_partial_floats(&as, 64) * VQ * sizeof(float));
    CHECK(part && pkvk_model_create(ctx, &m, &S, CAP_TOKENS, MAX_PROMPT, NPAGES, seed) == 0 &&
              pkvk_cpu_model_create(&cm, &S, NREQ, CAP_TOKENS, NPAGES, seed) == 0 &&
              pkvk_malloc((void **)&lens_d, NREQ * 4) == 0 &&
              pkvk_malloc((void **)&bt_d, sizeof bt) == 0 && pkvk_h2d(bt_d, bt, sizeof bt) == 0 &&
              pkvk_malloc((void **)&q, (size_t)NREQ * VQ * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&o, (size_t)NREQ * VQ * HQ * D * 2) == 0 &&
              pkvk_workspace_create(ctx, &ws, &as, NREQ * VQ, 64 * VQ, 64) == 0 &&
              pkvk_plan_init(&plan, NREQ, 64) == 0,
          "cpu mirror setup: %s", pkvk_last_error());
    if (moe)
        CHECK(pkvk_model_experts(m, moe, test_route, (void *)moe) == 0 &&
                  pkvk_cpu_model_experts(cm, moe, seed, test_route, (void *)moe) == 0,
              "experts: %s", pkvk_last_error());
    static uint16_t glog[NREQ * V];
    int32_t gtok[NREQ];
    CHECK(pkvk_model_prefill(m, NREQ, lens, pages, NULL, NULL) == 0 &&
              pkvk_cpu_model_prefill(cm, NREQ, lens, pages, NULL, NULL) == 0 &&
              pkvk_model_read(m, 1, glog, gtok) == 0,
          "cpu mirror prefill: %s", pkvk_last_error());
    double rms, worst = 0,
                d = max_diff_logits(glog, pkvk_cpu_model_logits(cm), &rms); /* its last head */
    CHECK(d < logit_tol(rms), "cpu mirror prefill: logits max |diff| %.4g (rms %.3g)", d, rms);
    for (int step = 0; step < STEPS; step++) {
        int32_t seq[NREQ], splits[NREQ];
        for (int r = 0; r < NREQ; r++) seq[r] = lens[r] + 1 + step, splits[r] = 1 + (r + step) % 3;
        /* both take the GPU's tokens: the prefill's, then each step's */
        CHECK(pkvk_model_read(m, NREQ, NULL, gtok) == 0, "read tokens");
        memcpy(pkvk_cpu_model_tokens(cm), gtok, sizeof gtok);
        CHECK(pkvk_plan_workqueue(&plan, PKV_ROUTE_WORKQUEUE, &as, seq, splits, NREQ) == 0 &&
                  pkvk_plan_upload(ws, &plan) == 0 && pkvk_h2d(lens_d, seq, sizeof seq) == 0 &&
                  model_step(m, ws, &plan, q, o, bt_d, BTS, lens_d, NREQ, 0, NULL, NULL, NULL,
                             NULL) == 0,
              "cpu mirror step %d: %s", step, pkvk_last_error());
        CHECK(pkvk_model_read(m, NREQ, glog, gtok) == 0 &&
                  pkvk_cpu_model_decode(cm, NREQ, seq, &bt[0][0], BTS, &plan, pkvk_cpu_attend_tasks,
                                        part, NULL, NULL, NULL) == 0,
              "cpu mirror step %d: %s", step, pkvk_last_error());
        for (int r = 0; r < NREQ; r++) {
            d = max_diff_logits(glog + (size_t)r * V, pkvk_cpu_model_logits(cm) + (size_t)r * V,
                                &rms);
            CHECK(d < logit_tol(rms), "cpu mirror step %d row %d: logits max |diff| %.4g", step, r,
                  d);
            if (d > worst) worst = d;
        }
    }
    { /* the verify step: each row's last sampled token, then VQ - 1 proposals */
        int32_t seq[NREQ], splits[NREQ];
        for (int r = 0; r < NREQ; r++) seq[r] = lens[r] + STEPS + VQ, splits[r] = 1 + r;
        CHECK(pkvk_model_read(m, NREQ, NULL, gtok) == 0, "read tokens");
        memcpy(pkvk_cpu_model_tokens(cm), gtok, sizeof gtok);
        CHECK(pkvk_plan_workqueue(&plan, PKV_ROUTE_WORKQUEUE, &as, seq, splits, NREQ) == 0 &&
                  pkvk_plan_upload(ws, &plan) == 0 && pkvk_h2d(lens_d, seq, sizeof seq) == 0 &&
                  model_forward(m, ws, &plan, q, o, bt_d, BTS, lens_d, NREQ, VQ, 0, NULL, NULL,
                                NULL, NULL) == 0 &&
                  pkvk_model_read(m, NREQ, glog, gtok) == 0,
              "verify step: %s", pkvk_last_error());
        pkvk_fwd_in in = {
            .rows = NREQ, .lens = seq, .block_table = &bt[0][0], .bt_stride = BTS, .q_len = VQ};
        tiny_cpu_attend h = {cm, &in, &plan, part};
        const pkvk_fwd_hooks hooks = {&h, tiny_cpu_attend_hook, NULL};
        const pkvk_fwd_model f = pkvk_cpu_model_forward(cm);
        CHECK(pkvk_forward_step(&f, &in, 0, NULL, NULL, NULL, NULL, &hooks, NULL) == 0,
              "cpu mirror verify: %s", pkvk_last_error());
        for (int r = 0; r < NREQ; r++) {
            d = max_diff_logits(glog + (size_t)r * V, pkvk_cpu_model_logits(cm) + (size_t)r * V,
                                &rms);
            CHECK(d < logit_tol(rms), "verify step row %d: logits max |diff| %.4g", r, d);
            if (d > worst) worst = d;
        }
    }
    const size_t pool = (size_t)NPAGES * HKV * PS * D * pkvk_dtype_bytes(S.kv_dtype);
    uint8_t *host = malloc(pool);
    double dkv = 0;
    for (int l = 0; host && l < L; l++)
        for (int v = 0; v < 2; v++) {
            CHECK(pkvk_d2h(host, pkvk_model_kv(m, l, v), pool) == 0, "d2h");
            const uint16_t *c = pkvk_cpu_model_kv(cm, l, v);
            for (size_t i = 0; i < (size_t)NREQ * BTS * HKV * PS * D; i++) {
                double e = kv_excess(pkvk_elem(S.kv_dtype, host, i), pkvk_elem(S.kv_dtype, c, i));
                if (e > dkv) dkv = e;
            }
        }
    CHECK(host && dkv < 0.02 * tiny_tol_scale(), "cpu mirror: K/V pages max |diff| %.4g", dkv);
    printf("cpu mirror%s: prefill, %d decode steps and a verify of %d tokens a row, logits max "
           "|diff| %.4g, K/V %.4g\n",
           moe ? " with experts" : "", STEPS, VQ, worst, dkv);
    free(host);
    free(part);
    pkvk_plan_free(&plan);
    pkvk_workspace_destroy(ws);
    pkvk_free(lens_d), pkvk_free(bt_d), pkvk_free(q), pkvk_free(o);
    pkvk_cpu_model_destroy(cm);
    pkvk_model_destroy(m);
}

/* Graph replay (run.cuda_graph): two decode steps of the three rows (positions
 * lens[r] + 2, then + 3) replayed from one graph captured on a fixed grid of 4 rows
 * (the bucket of 3), through pkv_workqueue with rows split differently in each
 * step; before each replay the prologue brings the step's lengths and plan to the
 * device buffers the graph reads. Both steps' logits against the CPU computation. */
static void check_graph(pkvk_ctx *ctx, pkvk_model *m, int32_t *bt_d, int bts, const int *len0,
                        int32_t *in_tok) {
    enum { GROWS = 4 };
    const pkvk_shape as = attn_shape();
    pkvk_workspace *ws;
    pkvk_plan plan;
    pkvk_graph *g = NULL;
    int32_t *lens_d;
    uint16_t *q, *o, *src;
    CHECK(pkvk_malloc((void **)&lens_d, GROWS * 4) == 0 &&
              pkvk_malloc((void **)&q, (size_t)GROWS * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&o, (size_t)GROWS * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&src, (size_t)HQ * D * 2) == 0 &&
              pkvk_memset(src, 0, (size_t)HQ * D * 2) == 0 &&
              pkvk_workspace_create(ctx, &ws, &as, GROWS, 64, 64) == 0 &&
              pkvk_workspace_reserve(ws, 256) == 0 && pkvk_plan_init(&plan, GROWS, 64) == 0 &&
              pkvk_workspace_fixed(ws, GROWS) == 0,
          "graph setup: %s", pkvk_last_error());
    static float ref[V];
    static uint16_t glog[GROWS * V];
    double worst = 0, rms;
    for (int step = 0; step < 2; step++) {
        int32_t seq[NREQ], splits[NREQ], stage[2 * NREQ];
        for (int r = 0; r < NREQ; r++) {
            seq[r] = len0[r] + 3 + step;
            splits[r] = 1 + (r + step) % 3;
            in_tok[r] = (int32_t)((seed >> (8 * r + 5 + step)) % V);
            stage[r] = seq[r];
        }
        CHECK(pkvk_plan_workqueue(&plan, PKV_ROUTE_WORKQUEUE, &as, seq, splits, NREQ) == 0 &&
                  pkvk_plan_merges(&plan),
              "graph step %d: plan", step);
        /* The page each row's new token lands in (the prologue's own append, into
         * layer 0, is overwritten by the layer's). */
        int32_t bt_h[NREQ][MAX_PROMPT / PS + 1];
        CHECK(pkvk_d2h(bt_h, bt_d, sizeof bt_h) == 0, "d2h");
        for (int r = 0; r < NREQ; r++) stage[NREQ + r] = bt_h[r][(seq[r] - 1) / PS];
        pkvk_step st = {.n_rows = NREQ,
                        .stage = stage,
                        .seq_lens = lens_d,
                        .block_table = bt_d,
                        .bt_stride = bts,
                        .k_cache = pkvk_model_kv(m, 0, 0),
                        .v_cache = pkvk_model_kv(m, 0, 1),
                        .q = q,
                        .k_scale = fp8() ? unit_d : NULL,
                        .v_scale = fp8() ? unit_d : NULL,
                        .src_k = src,
                        .src_v = src,
                        .src_q = src,
                        .src_rows = 1};
        CHECK(pkvk_model_set_tokens(m, NREQ, in_tok) == 0 &&
                  pkvk_step_upload(ws, &plan, &st, PKVK_UPLOAD_PARAMS, NULL) == 0,
              "graph step %d: upload: %s", step, pkvk_last_error());
        if (step == 0) { /* captured once, for both steps */
            int reused;
            int ok = pkvk_graph_begin(ctx) == 0 &&
                     model_step(m, ws, &plan, q, o, bt_d, bts, lens_d, GROWS, 0, NULL, NULL, NULL,
                                NULL) == 0 &&
                     pkvk_graph_end(ctx, &g, &reused) == 0;
            if (!ok) pkvk_graph_abort(ctx);
            CHECK(ok, "graph capture: %s", pkvk_last_error());
        }
        int32_t gtok[GROWS];
        CHECK(g && pkvk_graph_launch(g) == 0 && pkvk_model_read(m, GROWS, glog, gtok) == 0,
              "graph step %d: replay: %s", step, pkvk_last_error());
        for (int r = 0; r < NREQ; r++) {
            forward(r, seq[r] - 1, in_tok[r], ref);
            double d = max_diff_logits(glog + (size_t)r * V, ref, &rms);
            CHECK(d < logit_tol(rms), "graph step %d row %d: logits max |diff| %.4g (rms %.3g)",
                  step, r, d, rms);
            if (d > worst) worst = d;
        }
    }
    printf("graph replay: 2 steps of %d rows on a %d-row graph, logits max |diff| %.4g\n", NREQ,
           GROWS, worst);
    pkvk_graph_destroy(g);
    pkvk_plan_free(&plan);
    pkvk_workspace_destroy(ws);
    pkvk_free(lens_d), pkvk_free(q), pkvk_free(o), pkvk_free(src);
}

static pkvk_ctx *gpu; /* the context, made by setup */

static int setup(void) {
    if (pkvk_device_count() == 0) {
        printf("SKIP: no GPU (%s)\n", pkvk_last_error());
        return SKIP_CODE;
    }
    CHECK(pkvk_ctx_create(&gpu, 0) == 0, "context: %s", pkvk_last_error());
    float ones[NPAGES * HKV];
    for (int i = 0; i < NPAGES * HKV; i++) ones[i] = 1.f;
    CHECK(pkvk_malloc((void **)&unit_d, sizeof ones) == 0 &&
              pkvk_h2d(unit_d, ones, sizeof ones) == 0,
          "scales: %s", pkvk_last_error());
    return 0;
}

static void teardown(void) {
    pkvk_free(unit_d);
    pkvk_ctx_destroy(gpu);
}

/* check in every type of the tiny model (fresh weights from a seed of the clock), with
 * both prefill attention kernels where FlashInfer's is built and takes the types, else
 * cuBLAS's. */
static void in_every_type(void (*check)(pkvk_ctx *)) {
    const uint64_t s0 = (uint64_t)time(NULL) * 2654435761u;
    printf("seed %llu\n", (unsigned long long)s0);
    for (int t = 0; t < TINY_TYPES; t++) {
        tiny_model_types(t, s0);
        S.prefill_attn = PKVK_PREFILL_AUTO;
        int kinds[2] = {pkvk_model_prefill_kernel(&S), PKVK_PREFILL_CUBLAS};
        for (int k = kinds[0] == PKVK_PREFILL_CUBLAS; k < 2; k++) {
            S.prefill_attn = kinds[k];
            printf("%s over %s KV, prefill attention: %s\n", pkvk_dtype_names[S.dtype],
                   pkvk_dtype_names[S.kv_dtype],
                   kinds[k] == PKVK_PREFILL_CUBLAS ? "cuBLAS" : "FlashInfer");
            check(gpu);
        }
    }
}

static void the_model_matches_the_cpu_computation(void) {
    in_every_type(check_model);
}

static void the_cpu_mirror_matches_the_gpu_step_by_step(void) {
    in_every_type(check_cpu_mirror);
}

/* The same with the last layer a mixture of experts: the GPU's grouped GEMMs, slots and
 * combine against the CPU mirror's expert by expert, on the same routing. */
static void check_cpu_mirror_experts(pkvk_ctx *ctx) {
    moe = &tiny_moe;
    check_cpu_mirror(ctx);
    moe = NULL;
}

static void the_experts_match_the_cpu_mirror(void) {
    in_every_type(check_cpu_mirror_experts);
}

static const pkv_test_case cases[] = {
    PKV_CASE(the_model_matches_the_cpu_computation),
    PKV_CASE(the_cpu_mirror_matches_the_gpu_step_by_step),
    PKV_CASE(the_experts_match_the_cpu_mirror),
};
PKV_TEST_MAIN_WITH(cases, setup, teardown)

/* Prefill, decode and a mixed step of the model against the CPU computation. */
static void check_model(pkvk_ctx *ctx) {
    pkvk_model *m;
    CHECK(pkvk_model_create(ctx, &m, &S, CAP_TOKENS, MAX_PROMPT, NPAGES, seed) == 0, "create: %s",
          pkvk_last_error());
    /* Pages: each prompt's in a shuffled order, with room for one decode token. */
    int32_t pages[NPAGES], bt[NREQ][MAX_PROMPT / PS + 1], n_pages = 0, perm[NPAGES];
    for (int i = 0; i < NPAGES; i++) perm[i] = i;
    srand((unsigned)seed);
    for (int i = NPAGES - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int used = 0;
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + 1 + PS - 1) / PS; p++) bt[r][p] = perm[used++];
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + PS - 1) / PS; p++) pages[n_pages++] = bt[r][p];
    CHECK(pkvk_model_prefill(m, NREQ, lens, pages, NULL, NULL) == 0, "prefill: %s",
          pkvk_last_error());

    /* The CPU model over the prompts. */
    static float ref_logits[V];
    for (int r = 0; r < NREQ; r++)
        for (int pos = 0; pos < lens[r]; pos++)
            forward(r, pos, pkvk_prompt_token(r, pos, V),
                    r == NREQ - 1 && pos == lens[r] - 1 ? ref_logits : NULL);
    static uint16_t logits[V];
    int32_t tok;
    CHECK(pkvk_model_read(m, 1, logits, &tok) == 0, "read: %s", pkvk_last_error());
    double rms, dl = max_diff_logits(logits, ref_logits, &rms);
    CHECK(dl < logit_tol(rms), "prefill logits: max |diff| %.4g (rms %.3g)", dl, rms);
    printf("prefill: last prompt's logits max |diff| %.4g, rms %.3g\n", dl, rms);
    { /* A replica's model reading these weights gives the same logits bit for bit and
       * leaves them in place when it goes; another shape's weights are refused. */
        pkvk_model *m2 = NULL, *bad = NULL;
        pkvk_device_info before, after;
        static uint16_t logits2[V];
        int32_t tok2;
        CHECK(pkvk_device_info_get(&before) == 0 &&
                  pkvk_model_create_sharing(ctx, &m2, &S, CAP_TOKENS, MAX_PROMPT, NPAGES, seed,
                                            m) == 0 &&
                  pkvk_device_info_get(&after) == 0,
              "create sharing: %s", pkvk_last_error());
        const size_t took = before.mem_free - after.mem_free,
                     own = pkvk_model_bytes(&S, CAP_TOKENS, MAX_PROMPT, NPAGES);
        CHECK(pkvk_model_prefill(m2, NREQ, lens, pages, NULL, NULL) == 0 &&
                  pkvk_model_read(m2, 1, logits2, &tok2) == 0,
              "sharing prefill: %s", pkvk_last_error());
        CHECK(!memcmp(logits, logits2, sizeof logits) && tok == tok2,
              "a model sharing the weights gives other logits");
        pkvk_model_shape other = S;
        other.inter += 8;
        CHECK(pkvk_model_create_sharing(ctx, &bad, &other, CAP_TOKENS, MAX_PROMPT, NPAGES, seed,
                                        m) != 0 &&
                  !bad,
              "the weights of another shape were shared");
        printf("sharing: logits equal; %.1f MiB of weights read, not copied (the model took "
               "%.1f MiB with cuBLAS's handle, %.1f MiB with its own weights)\n",
               pkvk_model_weight_bytes(&S) / 1048576.0, took / 1048576.0, own / 1048576.0);
        pkvk_model_destroy(m2);
        CHECK(pkvk_model_prefill(m, NREQ, lens, pages, NULL, NULL) == 0 &&
                  pkvk_model_read(m, 1, logits2, &tok2) == 0 &&
                  !memcmp(logits, logits2, sizeof logits),
              "the weights changed when the model sharing them went: %s", pkvk_last_error());
    }
    /* Every layer's K and V pages of every prompt token. */
    const size_t pool = (size_t)NPAGES * HKV * PS * D * pkvk_dtype_bytes(S.kv_dtype);
    uint8_t *host = malloc(pool);
    double dkv = 0;
    for (int l = 0; l < L; l++)
        for (int v = 0; v < 2; v++) {
            CHECK(pkvk_d2h(host, pkvk_model_kv(m, l, v), pool) == 0, "d2h");
            double d = kv_max_diff(host, l, v, &bt[0][0], MAX_PROMPT / PS + 1);
            if (d > dkv) dkv = d;
        }
    CHECK(dkv < 0.02 * tiny_tol_scale(), "prefill K/V pages: max |diff| %.4g", dkv);
    printf("prefill: K/V pages of %d layers max |diff| %.4g\n", L, dkv);

    /* A decode step: each row's input token at position lens[r], the reference route. */
    int32_t in_tok[NREQ], seq[NREQ];
    for (int r = 0; r < NREQ; r++)
        in_tok[r] = (int32_t)((seed >> (8 * r)) % V), seq[r] = lens[r] + 1;
    int32_t *lens_d, *bt_d;
    uint16_t *q, *o;
    const pkvk_shape as = attn_shape();
    const int bts = MAX_PROMPT / PS + 1;
    pkvk_workspace *ws;
    pkvk_plan plan;
    CHECK(pkvk_malloc((void **)&lens_d, sizeof seq) == 0 &&
              pkvk_malloc((void **)&bt_d, sizeof bt) == 0 &&
              pkvk_malloc((void **)&q, (size_t)NREQ * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&o, (size_t)NREQ * HQ * D * 2) == 0 &&
              pkvk_h2d(lens_d, seq, sizeof seq) == 0 && pkvk_h2d(bt_d, bt, sizeof bt) == 0 &&
              pkvk_workspace_create(ctx, &ws, &as, NREQ, 64, 64) == 0 &&
              pkvk_plan_init(&plan, NREQ, 64) == 0 && pkvk_plan_ref(&plan, seq, NREQ) == 0 &&
              pkvk_plan_upload(ws, &plan) == 0,
          "decode setup: %s", pkvk_last_error());
    CHECK(pkvk_model_set_tokens(m, NREQ, in_tok) == 0 &&
              model_step(m, ws, &plan, q, o, bt_d, bts, lens_d, NREQ, 0, NULL, NULL, NULL, NULL) ==
                  0,
          "decode step: %s", pkvk_last_error());
    static uint16_t dlog[NREQ * V];
    int32_t dtok[NREQ];
    CHECK(pkvk_model_read(m, NREQ, dlog, dtok) == 0, "read: %s", pkvk_last_error());
    double worst = 0;
    for (int r = 0; r < NREQ; r++) {
        forward(r, lens[r], in_tok[r], ref_logits);
        double d = max_diff_logits(dlog + (size_t)r * V, ref_logits, &rms);
        CHECK(d < logit_tol(rms), "decode row %d: logits max |diff| %.4g (rms %.3g)", r, d, rms);
        if (d > worst) worst = d;
        /* Greedy sampling: the GPU's token is an argmax of its own logits. */
        for (int i = 0; i < V; i++)
            CHECK(pkvk_elem(S.dtype, dlog, (size_t)r * V + i) <=
                      pkvk_elem(S.dtype, dlog, (size_t)r * V + dtok[r]),
                  "row %d: token %d is not the argmax", r, dtok[r]);
    }
    printf("decode: logits of %d rows max |diff| %.4g\n", NREQ, worst);

    /* Chunked prefill: prompt NREQ's first CHUNK0 tokens alone (a chunk that does not
     * end its prompt), then a mixed step: the three rows' next tokens at position
     * lens[r] + 1 and the prompt's next CHUNK1 tokens, which end it. */
    int32_t cpages[(CHUNK0 + CHUNK1 + PS - 1) / PS];
    for (int p = 0; p < (CHUNK0 + CHUNK1 + PS - 1) / PS; p++) cpages[p] = perm[used++];
    const int32_t c0_len = CHUNK0, c0_start = 0, c1_len = CHUNK1, c1_start = CHUNK0;
    const uint8_t not_last = 0, is_last = 1;
    CHECK(pkvk_model_prefill(m, 1, &c0_len, cpages, &c0_start, &not_last) == 0, "first chunk: %s",
          pkvk_last_error());
    for (int r = 0; r < NREQ; r++)
        in_tok[r] = (int32_t)((seed >> (8 * r + 3)) % V), seq[r] = lens[r] + 2;
    CHECK(pkvk_h2d(lens_d, seq, sizeof seq) == 0 && pkvk_plan_ref(&plan, seq, NREQ) == 0 &&
              pkvk_plan_upload(ws, &plan) == 0 && pkvk_model_set_tokens(m, NREQ, in_tok) == 0,
          "mixed setup: %s", pkvk_last_error());
    CHECK(model_step(m, ws, &plan, q, o, bt_d, bts, lens_d, NREQ, 1, &c1_len, cpages, &c1_start,
                     &is_last) == 0,
          "mixed step: %s", pkvk_last_error());
    static uint16_t mlog[(NREQ + 1) * V];
    int32_t mtok[NREQ + 1];
    CHECK(pkvk_model_read(m, NREQ + 1, mlog, mtok) == 0, "read: %s", pkvk_last_error());
    worst = 0;
    for (int r = 0; r <= NREQ; r++) {
        if (r < NREQ) {
            forward(r, lens[r] + 1, in_tok[r], ref_logits);
        } else { /* the chunked prompt (piece 0 of both batches: its tokens' request 0) */
            for (int pos = 0; pos < CHUNK0 + CHUNK1; pos++)
                forward(NREQ, pos, pkvk_prompt_token(0, pos, V),
                        pos == CHUNK0 + CHUNK1 - 1 ? ref_logits : NULL);
        }
        double d = max_diff_logits(mlog + (size_t)r * V, ref_logits, &rms);
        CHECK(d < logit_tol(rms), "mixed step row %d: logits max |diff| %.4g (rms %.3g)", r, d,
              rms);
        if (d > worst) worst = d;
    }
    double dck = 0;
    for (int l = 0; l < L; l++)
        for (int v = 0; v < 2; v++) {
            CHECK(pkvk_d2h(host, pkvk_model_kv(m, l, v), pool) == 0, "d2h");
            for (int pos = 0; pos < CHUNK0 + CHUNK1; pos++)
                for (int h = 0; h < HKV; h++)
                    for (int e = 0; e < D; e++) {
                        size_t at = (((size_t)cpages[pos / PS] * HKV + h) * PS + pos % PS) * D + e;
                        float want = v ? vc[l][NREQ][pos][h][e] : kc[l][NREQ][pos][h][e];
                        double d = kv_excess(pkvk_elem(S.kv_dtype, host, at), want);
                        if (d > dck) dck = d;
                    }
        }
    CHECK(dck < 0.02 * tiny_tol_scale(), "chunked prompt's K/V pages: max |diff| %.4g", dck);
    printf("chunked prefill: mixed step logits max |diff| %.4g, the prompt's K/V max |diff| %.4g\n",
           worst, dck);
    check_graph(ctx, m, bt_d, bts, lens, in_tok);
    pkvk_plan_free(&plan);
    pkvk_workspace_destroy(ws);
    pkvk_free(lens_d), pkvk_free(bt_d), pkvk_free(q), pkvk_free(o);
    pkvk_model_destroy(m);
    free(host);
}
