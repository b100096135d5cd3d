/* The cpu backend's full model (pkvk_cpu_model, the CPU mirror of the GPU's layers)
 * against the direct FP32 computation of the tiny model (tinymodel.h) with fresh
 * weights from a random seed, in each type (FP16, BF16, either over FP8 KV): a prefill of three
 * prompts on shuffled pages (the last prompt's logits, every layer's K/V pages), a decode step of
 * the three rows through pkv_workqueue with rows split 1 to 3 ways (every row's logits); then the
 * cpu backend running a tiny model end to end, every step's route checked against the reference;
 * a verify step's rows of four query tokens against the same tokens computed one at a time. */
#include "check.h"
#include "pkv_tol.h"
#include "testrun.h"
#include "tinymodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The mirror's prefill and decode step in the types of S, against the direct computation. */
static void check_mirror(void) {
    enum { BTS = MAX_PROMPT / PS + 1 };
    pkvk_cpu_model *m;
    CHECK(pkvk_cpu_model_create(&m, &S, NREQ, CAP_TOKENS, NPAGES, seed) == 0, "create");
    int32_t bt[NREQ][BTS], pages[NPAGES], perm[NPAGES], n_pages = 0, used = 0;
    for (int i = 0; i < NPAGES; i++) perm[i] = i;
    srand((unsigned)seed);
    for (int i = NPAGES - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + 1 + PS - 1) / PS; p++) bt[r][p] = perm[used++];
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + PS - 1) / PS; p++) pages[n_pages++] = bt[r][p];
    CHECK(pkvk_cpu_model_prefill(m, NREQ, lens, pages, NULL, NULL) == 0, "prefill");

    /* The prompts through the direct computation; the last chunk sampled prompt 2. */
    static float ref[V];
    static uint16_t got[V];
    for (int r = 0; r < NREQ; r++)
        for (int pos = 0; pos < lens[r]; pos++)
            forward(r, pos, pkvk_prompt_token(r, pos, V),
                    r == NREQ - 1 && pos == lens[r] - 1 ? ref : NULL);
    const float *lg = pkvk_cpu_model_logits(m);
    for (int i = 0; i < V; i++) pkvk_store(S.dtype, got, (size_t)i, lg[i]);
    double rms, d = max_diff_logits(got, ref, &rms);
    CHECK(d < tiny_tol_scale() * 0.03 * rms + 0.01, "prefill logits: max |diff| %.4g (rms %.3g)", d,
          rms);
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (lg[i] > lg[best]) best = i;
    CHECK(pkvk_cpu_model_tokens(m)[0] == best, "prefill: token %d is not its logits' argmax %d",
          pkvk_cpu_model_tokens(m)[0], best);
    double dkv = 0;
    for (int l = 0; l < L; l++)
        for (int v = 0; v < 2; v++) {
            double x = kv_max_diff(pkvk_cpu_model_kv(m, l, v), l, v, &bt[0][0], BTS);
            if (x > dkv) dkv = x;
        }
    CHECK(dkv < 0.02 * tiny_tol_scale(), "prefill K/V pages: max |diff| %.4g", dkv);
    printf("%s over %s KV: prefill: last prompt's logits max |diff| %.4g (rms %.3g), K/V max "
           "|diff| %.4g\n",
           pkvk_dtype_names[S.dtype], pkvk_dtype_names[S.kv_dtype], d, rms, dkv);

    /* A decode step through pkv_workqueue. */
    const pkvk_shape as = {
        .hq = HQ, .hkv = HKV, .d = D, .page_size = PS, .dtype = S.dtype, .kv_dtype = S.kv_dtype};
    int32_t seq[NREQ], splits[NREQ], in_tok[NREQ];
    for (int r = 0; r < NREQ; r++)
        seq[r] = lens[r] + 1, splits[r] = 1 + r, in_tok[r] = (int32_t)((seed >> (8 * r)) % V);
    memcpy(pkvk_cpu_model_tokens(m), in_tok, sizeof in_tok);
    pkvk_plan plan;
    float *part = malloc(pkvk_partial_floats(&as, 64) * sizeof(float));
    CHECK(part && pkvk_plan_init(&plan, NREQ, 64) == 0 &&
              pkvk_plan_workqueue(&plan, PKV_ROUTE_WORKQUEUE, &as, seq, splits, NREQ) == 0 &&
              pkvk_plan_merges(&plan),
          "plan");
    double t_att = -1;
    CHECK(pkvk_cpu_model_decode(m, NREQ, seq, &bt[0][0], BTS, &plan, pkvk_cpu_attend_tasks, part,
                                NULL, NULL, &t_att) == 0 &&
              t_att >= 0,
          "decode");
    double worst = 0;
    for (int r = 0; r < NREQ; r++) {
        forward(r, lens[r], in_tok[r], ref);
        for (int i = 0; i < V; i++) pkvk_store(S.dtype, got, (size_t)i, lg[(size_t)r * V + i]);
        d = max_diff_logits(got, ref, &rms);
        CHECK(d < tiny_tol_scale() * 0.03 * rms + 0.01,
              "decode row %d: logits max |diff| %.4g (rms %.3g)", r, d, rms);
        if (d > worst) worst = d;
    }
    printf("decode: logits of %d rows max |diff| %.4g\n", NREQ, worst);
    pkvk_plan_free(&plan);
    free(part);
    pkvk_cpu_model_destroy(m);
}

/* A verify step's forward (issue 47): each of the three rows' last sampled token and three
 * proposals (q_len 4) through every layer at once, the route (pkv_workqueue, rows split 1
 * to 3 ways) attending each query token over the keys up to its own; its last token's logits
 * against the direct computation fed the same four tokens one at a time. */
enum { VERIFY_Q = 4 };

static void check_verify(void) {
    enum { BTS = (MAX_PROMPT + VERIFY_Q + PS - 1) / PS };
    pkvk_cpu_model *m;
    CHECK(pkvk_cpu_model_create(&m, &S, NREQ, CAP_TOKENS, NPAGES, seed) == 0, "create");
    int32_t bt[NREQ][BTS], pages[NPAGES], n_pages = 0;
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < BTS; p++) bt[r][p] = r * BTS + p;
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + PS - 1) / PS; p++) pages[n_pages++] = bt[r][p];
    CHECK(pkvk_cpu_model_prefill(m, NREQ, lens, pages, NULL, NULL) == 0, "prefill");
    for (int r = 0; r < NREQ; r++)
        for (int pos = 0; pos < lens[r]; pos++) forward(r, pos, pkvk_prompt_token(r, pos, V), NULL);
    const pkvk_shape as = {
        .hq = HQ, .hkv = HKV, .d = D, .page_size = PS, .dtype = S.dtype, .kv_dtype = S.kv_dtype};
    int32_t seq[NREQ], splits[NREQ], in_tok[NREQ];
    for (int r = 0; r < NREQ; r++)
        seq[r] = lens[r] + VERIFY_Q, splits[r] = 1 + r,
        in_tok[r] = (int32_t)((seed >> (8 * r)) % V);
    memcpy(pkvk_cpu_model_tokens(m), in_tok, sizeof in_tok);
    pkvk_plan plan;
    float *part = malloc(pkvk_partial_floats(&as, 64) * VERIFY_Q * sizeof(float));
    CHECK(part && pkvk_plan_init(&plan, NREQ, 64) == 0 &&
              pkvk_plan_workqueue(&plan, PKV_ROUTE_WORKQUEUE, &as, seq, splits, NREQ) == 0 &&
              pkvk_plan_merges(&plan),
          "plan");
    pkvk_fwd_in in = {
        .rows = NREQ, .lens = seq, .block_table = &bt[0][0], .bt_stride = BTS, .q_len = VERIFY_Q};
    tiny_cpu_attend h = {m, &in, &plan, part};
    const pkvk_fwd_hooks hooks = {&h, tiny_cpu_attend_hook, NULL};
    const pkvk_fwd_model f = pkvk_cpu_model_forward(m);
    CHECK(pkvk_forward_step(&f, &in, 0, NULL, NULL, NULL, NULL, &hooks, NULL) == 0, "verify");
    static float ref[V];
    static uint16_t got[V];
    const float *lg = pkvk_cpu_model_logits(m);
    double worst = 0, rms;
    for (int r = 0; r < NREQ; r++) {
        for (int j = 0; j < VERIFY_Q; j++) /* the same tokens one at a time */
            forward(r, lens[r] + j, j ? pkvk_prompt_token(r, lens[r] + j, V) : in_tok[r],
                    j == VERIFY_Q - 1 ? ref : NULL);
        for (int i = 0; i < V; i++) pkvk_store(S.dtype, got, (size_t)i, lg[(size_t)r * V + i]);
        const double d = max_diff_logits(got, ref, &rms);
        CHECK(d < tiny_tol_scale() * 0.03 * rms + 0.01,
              "verify row %d: its last token's logits max |diff| %.4g (rms %.3g)", r, d, rms);
        if (d > worst) worst = d;
    }
    printf("%s over %s KV: a verify of %d tokens a row: logits max |diff| %.4g\n",
           pkvk_dtype_names[S.dtype], pkvk_dtype_names[S.kv_dtype], VERIFY_Q, worst);
    /* a model whose forward takes one query token a row refuses the verify */
    pkvk_fwd_model one = f;
    one.verify = 0;
    CHECK(pkvk_forward_step(&one, &in, 0, NULL, NULL, NULL, NULL, &hooks, NULL) ==
              PKVK_ERR_UNSUPPORTED,
          "a forward without verify rows refuses q_len %d", VERIFY_Q);
    pkvk_plan_free(&plan);
    free(part);
    pkvk_cpu_model_destroy(m);
}

/* check in each type (FP16, BF16, either over FP8 KV) on fresh weights. */
static void in_every_type(void (*check)(void)) {
    const uint64_t s0 = (uint64_t)time(NULL) * 2654435761u;
    printf("seed %llu\n", (unsigned long long)s0);
    for (int t = 0; t < TINY_TYPES; t++) {
        tiny_model_types(t, s0);
        check();
    }
}

static void verify_step_is_its_tokens_one_at_a_time(void) {
    in_every_type(check_verify);
}

static void mirror_matches_the_direct_computation(void) {
    in_every_type(check_mirror);
}

/* The cpu backend end to end on a tiny model: every step's route checked, adaptive's
 * candidates the two routes graphs hold. */
static void cpu_backend_checks_every_step(void) {
    const uint64_t s0 = (uint64_t)time(NULL) * 2654435761u;
    printf("seed %llu\n", (unsigned long long)s0);
    tiny_model_types(0, s0);
    char out[64];
    snprintf(out, sizeof out, "/tmp/pkv-cpu-model-%d.h5", (int)getpid());
    pkv_summary sum;
    pkv_err e;
    CHECK(test_run_json(&sum, NULL, &e,
                        "{\"model\": {\"layers\": 2, \"hidden\": 256, \"hq\": 4, \"hkv\": 2, "
                        "\"head_dim\": 128, \"intermediate\": 512, \"vocab\": 1000}, "
                        "\"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": "
                        "3}, \"prompt\": {\"dist\": \"uniform\", \"min\": 20, \"max\": 200}, "
                        "\"decode\": {\"dist\": \"uniform\", \"min\": 2, \"max\": 30}, "
                        "\"num_requests\": 8, \"max_context\": 300}, \"serving\": "
                        "{\"max_active\": 3, \"kv_pages\": 120}, \"route\": {\"calibration\": "
                        "\"%s\"}, \"run\": {\"backend\": \"cpu\", \"check_every\": 1, "
                        "\"output\": \"%s\"}}",
                        TEST_CALIBRATION, out) == 0,
          "cpu backend run: %s", e.msg);
    pkv_step_rec *st;
    size_t n = 0;
    CHECK(pkv_h5_read_steps(out, &st, &n, &e) == 0, "read steps: %s", e.msg);
    /* adaptive on a full model replays graphs by default (run.cuda_graph auto): its
     * candidates are the two routes graphs hold, on every backend */
    const uint8_t graphs = 1u << PKV_ROUTE_REF_PAGED | 1u << PKV_ROUTE_WORKQUEUE;
    int ok = n > 10 && sum.finished == 8, cand = 1;
    for (size_t i = 0; i < n; i++) {
        ok &= pkv_tol_ok(st[i].max_err, st[i].mean_err) && st[i].out_mean_abs > 0 &&
              st[i].t_device > 0 && st[i].t_dense > 0;
        cand &= st[i].candidates == graphs;
    }
    CHECK(ok, "cpu backend: %zu steps, %llu finished, a step unchecked or out of tolerance", n,
          (unsigned long long)sum.finished);
    CHECK(cand, "cpu backend: candidates %u, not ref_paged and pkv_workqueue",
          n ? st[0].candidates : 0);
    printf("cpu backend: %zu steps of a 2-layer model, every one checked\n", n);
    free(st);
    unlink(out);
}

static const pkv_test_case cases[] = {
    PKV_CASE(mirror_matches_the_direct_computation),
    PKV_CASE(cpu_backend_checks_every_step),
    PKV_CASE(verify_step_is_its_tokens_one_at_a_time),
};
PKV_TEST_MAIN(cases)
