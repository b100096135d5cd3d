/* The cuda backend in the loop (label gpu; exits 77 without a GPU): every route and
 * policy runs a small experiment with every step checked against the FP32 GPU
 * reference; the model backend's counters equal the cuda backend's for the same
 * steps; the cpu and cuda backends' outputs agree step by step (FP16 and FP8 KV); the
 * study layer in BF16 and over FP8 KV holds its types' bound; preemption by swap
 * copies to the host pool and back; a pool that does not fit is a clear error that
 * leaves no file; speculative decoding's proposer runs on the GPU. */
#include "check.h"
#include "pkv_tol.h"
#include "tensors.h"
#include "testrun.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *EXP =
    "{\"model\": {\"hq\": 32, \"hkv\": 8, \"head_dim\": 128, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 6},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 40000},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 40},"
    "   \"num_requests\": 16, \"max_context\": 41000},"
    " \"serving\": {\"max_active\": 6, \"kv_pages\": %d},"
    " \"route\": {\"policy\": \"%s\", \"calibration\": \"%s\", \"allow_other_gpu\": true},"
    " \"run\": {\"backend\": \"%s\", \"clock\": \"predicted\", \"check_every\": 1,"
    "   \"output\": \"%s\", \"cuda_graph\": %s, \"metadata_upload\": \"%s\"}}";

static const char *graph = "false", *upload = "params";
static char a[64], b[64]; /* the runs' files, made by setup */
static pkv_err err;       /* the runs' error */

static int run(const char *backend, const char *policy, int pages, const char *out, pkv_err *e) {
    char *text = malloc(4096);
    snprintf(text, 4096, EXP, pages, policy, PKV_SOURCE_DIR "/experiments/calibration/default.json",
             backend, out, graph, upload);
    pkv_config cfg;
    if (pkv_config_parse(&cfg, text, "test.json", e)) return -1;
    pkv_summary sum;
    pkv_run_opts o = {.quiet = 1, .record = 1};
    int rc = pkv_run_experiment(&cfg, &o, &sum, e);
    pkv_config_free(&cfg);
    return rc;
}

/* A step whose output was checked (its error recorded). */
static int s_checked(const pkv_step_rec *s) {
    return !isnan(s->max_err);
}

static int cmp_double(const void *p, const void *q) {
    double x = *(const double *)p, y = *(const double *)q;
    return (x > y) - (x < y);
}

static pkv_step_rec *read_steps(const char *path, hsize_t *n) {
    pkv_step_rec *x;
    size_t m;
    pkv_err e;
    if (pkv_h5_read_steps(path, &x, &m, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return NULL;
    }
    *n = m;
    return x;
}

static int setup(void) {
    if (pkvk_device_count() == 0) {
        printf("no GPU (%s): skipped\n", pkvk_last_error());
        return SKIP_CODE;
    }
    snprintf(a, sizeof a, "/tmp/pkv-cuda-a-%d.h5", (int)getpid());
    snprintf(b, sizeof b, "/tmp/pkv-cuda-b-%d.h5", (int)getpid());
    return 0;
}

static void teardown(void) {
    unlink(a);
    unlink(b);
}

/* Every route and policy runs a small experiment with every step checked against the
 * FP32 GPU reference and timed; the model backend plans the same steps with the same
 * counters. */
static void every_policy_checks_each_step_and_the_model_counts_alike(void) {
    const char *policies[] = {"ref_paged", "pkv_bucket", "pkv_workqueue", "pkv_fused",
                              "adaptive",  "oracle",     "flashinfer",    "flashinfer_tc"};
    for (int k = 0; k < 8; k++) {
        if (!strncmp(policies[k], "flashinfer", 10) && !pkvk_flashinfer_built()) continue;
        int rc = run("cuda", policies[k], 30000, a, &err);
        CHECK(rc == 0, "%s: %s", policies[k], err.msg);
        if (rc) continue;
        hsize_t n = 0;
        pkv_step_rec *s = read_steps(a, &n);
        int checked = 1, metas = 0;
        long untimed = -1; /* the first step whose times do not hold */
        for (hsize_t i = 0; i < n; i++) {
            int ok = s[i].t_device > 0 && s[i].t_wall >= s[i].t_device;
            /* Where sampled, the metadata work and the attention are disjoint
             * intervals of the wall. */
            if (!isnan(s[i].t_meta)) {
                ok &= s[i].t_meta > 0 && s[i].t_wall >= s[i].t_device + s[i].t_meta;
                metas++;
            }
            if (!ok && untimed < 0) untimed = (long)i;
            checked &= pkv_tol_ok(s[i].max_err, s[i].mean_err);
        }
        const pkv_step_rec *u = &s[untimed < 0 ? 0 : untimed];
        CHECK(n > 40 && untimed < 0 && metas >= 1 && metas <= (int)((n + 16) / 17),
              "%s: %llu steps, %d with metadata times; step %ld: wall %.6g s, device %.6g s, "
              "metadata %.6g s",
              policies[k], (unsigned long long)n, metas, untimed, u->t_wall, u->t_device,
              u->t_meta);
        CHECK(checked, "%s: a step was not checked or failed its check", policies[k]);
        printf("%-14s %llu steps checked against the FP32 reference\n", policies[k],
               (unsigned long long)n);
        /* The model backend plans the same steps with the same counters (adaptive's where
         * FlashInfer is built: the model backend predicts its paths, built or not, and
         * adaptive may choose one the cuda backend cannot run). */
        if ((!strcmp(policies[k], "adaptive") && pkvk_flashinfer_built()) ||
            !strcmp(policies[k], "pkv_workqueue") || !strcmp(policies[k], "flashinfer_tc")) {
            CHECK(run("model", policies[k], 30000, b, &err) == 0, "model: %s", err.msg);
            hsize_t m;
            pkv_step_rec *t = read_steps(b, &m);
            int same = m == n;
            for (hsize_t i = 0; same && i < n; i++)
                same = s[i].rows == t[i].rows && s[i].context_tokens == t[i].context_tokens &&
                       s[i].route == t[i].route && s[i].launches == t[i].launches &&
                       s[i].ctas == t[i].ctas && s[i].kv_bytes == t[i].kv_bytes &&
                       s[i].merge_bytes == t[i].merge_bytes && s[i].splits == t[i].splits;
            CHECK(same, "%s: model and cuda counters differ", policies[k]);
            free(t);
        }
        free(s);
    }
}

/* Measured prefill: each batch takes its K/V write's measured time (tens of
 * microseconds) instead of the prefill model's (2 ms base), so every first token
 * comes within 1.5 ms of admission; with the model, none does. */
static void measured_prefill_gives_first_tokens_at_once(void) {
    for (int m = 0; m < 2; m++) {
        char *text = malloc(4096);
        snprintf(text, 4096,
                 "{\"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 2},"
                 " \"prompt\": {\"dist\": \"uniform\", \"min\": 1000, \"max\": 20000},"
                 " \"decode\": {\"dist\": \"uniform\", \"min\": 2, \"max\": 4},"
                 " \"num_requests\": 6, \"max_context\": 20100},"
                 " \"serving\": {\"max_active\": 2, \"kv_pages\": 4000,"
                 " \"prefill\": {\"measure\": %s}},"
                 " \"route\": {\"calibration\": \"%s\", \"allow_other_gpu\": true},"
                 " \"run\": {\"backend\": \"cuda\", \"output\": \"%s\"}}",
                 m ? "true" : "false", TEST_CALIBRATION, a);
        pkv_config cfg;
        pkv_request_rec *rq = NULL;
        size_t nr = 0;
        pkv_summary sum;
        pkv_run_opts o = {.quiet = 1, .record = 1};
        int rc = pkv_config_parse(&cfg, text, "prefill.json", &err);
        if (rc == 0) {
            rc = pkv_run_experiment(&cfg, &o, &sum, &err);
            pkv_config_free(&cfg);
        }
        if (rc == 0) rc = pkv_h5_read_requests(a, &rq, &nr, &err);
        CHECK(rc == 0 && nr == 6, "prefill measure %d: %s", m, rc ? err.msg : "requests missing");
        double lo = INFINITY, hi = 0;
        for (size_t i = 0; i < nr; i++) {
            double d = rq[i].t_first_token - rq[i].t_admitted;
            if (d < lo) lo = d;
            if (!(d <= hi)) hi = d;
        }
        if (m)
            CHECK(hi < 1.5e-3, "measured prefill: a first token %.3g s after admission", hi);
        else
            CHECK(lo > 2e-3, "modelled prefill: a first token %.3g s after admission", lo);
        printf("prefill %-8s first token %.3g..%.3g ms after admission\n",
               m ? "measured" : "modelled", lo * 1e3, hi * 1e3);
        free(rq);
    }
}

/* The cuda and cpu backends see the same tensors (tensors.h): on the same
 * experiment their outputs agree step by step (mean |O| of every step, each
 * step also checked against its own FP32 reference). Over FP8 KV too: both quantize
 * the same values over the same scales, so an append or page write that quantized
 * otherwise on the GPU (its own reference reads its own pool) shows here. */
static void cpu_and_cuda_backends_agree_step_by_step(void) {
    const char *X =
        "{\"model\": {\"hq\": 8, \"hkv\": 2, \"head_dim\": 128, \"page_size\": 16,"
        " \"kv_dtype\": \"%s\"},"
        " \"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 3},"
        " \"prompt\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 3000},"
        " \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 12},"
        " \"num_requests\": 8, \"max_context\": 3100},"
        " \"serving\": {\"max_active\": 3, \"kv_pages\": 2000},"
        " \"route\": {\"policy\": \"adaptive\", \"calibration\": \"%s\", \"allow_other_gpu\": "
        "true,"
        " \"overrides\": {\"min_context_tokens\": 0}},"
        " \"run\": {\"backend\": \"%s\", \"clock\": \"predicted\", \"check_every\": 1,"
        " \"output\": \"%s\"}}";
    const char *backends[2] = {"cpu", "cuda"}, *files[2] = {a, b}, *kvs[2] = {"fp16", "fp8_e4m3"};
    for (int kv = 0; kv < 2; kv++) {
        for (int k = 0; k < 2; k++)
            CHECK(test_run_json(NULL, NULL, &err, X, kvs[kv], TEST_CALIBRATION, backends[k],
                                files[k]) == 0,
                  "%s, %s: %s", backends[k], kvs[kv], err.msg);
        hsize_t nc = 0, ng = 0;
        pkv_step_rec *sc = read_steps(a, &nc), *sg = read_steps(b, &ng);
        int same = nc == ng && nc > 10;
        double worst = 0;
        hsize_t i = 0;
        for (; same && i < nc; i++) {
            double d = fabs(sc[i].out_mean_abs - sg[i].out_mean_abs) / sc[i].out_mean_abs;
            if (!(d <= worst)) worst = d;
            same = sc[i].route == sg[i].route && sc[i].context_tokens == sg[i].context_tokens;
        }
        CHECK(same && worst < 1e-3,
              "%s: cpu and cuda outputs differ: %llu vs %llu steps, worst relative "
              "difference of mean |O| %.3g%s (step %llu: routes %s and %s, context %lld "
              "and %lld tokens)",
              kvs[kv], (unsigned long long)nc, (unsigned long long)ng, worst,
              same ? "" : ", a step's route or context differs", (unsigned long long)i - 1,
              i && i <= nc ? pkv_route_name((pkv_route)sc[i - 1].route) : "-",
              i && i <= ng ? pkv_route_name((pkv_route)sg[i - 1].route) : "-",
              i && i <= nc ? (long long)sc[i - 1].context_tokens : -1,
              i && i <= ng ? (long long)sg[i - 1].context_tokens : -1);
        printf("cpu vs cuda, KV %s: %llu steps, worst relative difference of mean |O| %.2e\n",
               kvs[kv], (unsigned long long)nc, worst);
        free(sc), free(sg);
    }
}

/* The study layer in BF16, and over FP8 KV under FP16 and BF16 queries, on the cuda
 * backend: every step checked against its FP32 reference within the types' bound
 * (pkv_tol_typed_ok; |O| <= max|V|: its rows are averages of V's), V's largest
 * from the tensors themselves; FlashInfer's paths never chosen over FP8 KV (its FP8
 * path takes one scale for the whole cache, the pools one per page and head). */
static void bf16_and_fp8_study_layers_hold_their_bounds(void) {
    const char *XB =
        "{\"model\": {\"hq\": 8, \"hkv\": 2, \"head_dim\": 128, \"page_size\": 16,"
        " \"dtype\": \"%s\", \"kv_dtype\": \"%s\"},"
        " \"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 3},"
        " \"prompt\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 3000},"
        " \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 12},"
        " \"num_requests\": 8, \"max_context\": 3100},"
        " \"serving\": {\"max_active\": 3, \"kv_pages\": 2000},"
        " \"route\": {\"policy\": \"oracle\", \"calibration\": \"%s\", \"allow_other_gpu\": "
        "true},"
        " \"run\": {\"backend\": \"cuda\", \"clock\": \"predicted\", \"check_every\": 1,"
        " \"output\": \"%s\"}}";
    const int types[3][2] = {
        {PKVK_BF16, PKVK_BF16}, {PKVK_FP16, PKVK_FP8_E4M3}, {PKVK_BF16, PKVK_FP8_E4M3}};
    for (int ty = 0; ty < 3; ty++) {
        const char *dn = pkvk_dtype_names[types[ty][0]], *kn = pkvk_dtype_names[types[ty][1]];
        CHECK(test_run_json(NULL, NULL, &err, XB, dn, kn, TEST_CALIBRATION, b) == 0, "%s/%s: %s",
              dn, kn, err.msg);
        const pkvk_shape bs = {.hq = 8,
                               .hkv = 2,
                               .d = 128,
                               .page_size = 16,
                               .dtype = types[ty][0],
                               .kv_dtype = types[ty][1]};
        pkv_tensors t;
        CHECK(pkv_tensors_make(&t, &bs, 1) == 0, "tensors");
        const double vmax = t.v_max;
        pkv_tensors_free(&t);
        hsize_t nb = 0;
        pkv_step_rec *sb = read_steps(b, &nb);
        double bworst = 0, mworst = 0;
        int fi = 0, unchecked = 0;
        for (hsize_t i = 0; i < nb; i++) {
            if (!(sb[i].max_err <= bworst)) bworst = sb[i].max_err;
            if (!(sb[i].mean_err <= mworst)) mworst = sb[i].mean_err;
            fi += pkv_route_is_flashinfer((pkv_route)sb[i].route);
            unchecked += !s_checked(&sb[i]);
        }
        CHECK(nb > 10 && vmax > 3 &&
                  pkv_tol_typed_ok(types[ty][0] == PKVK_BF16, types[ty][1] == PKVK_FP8_E4M3, vmax,
                                   vmax, bworst, mworst) &&
                  (types[ty][1] != PKVK_FP8_E4M3 || !fi) && !unchecked,
              "%s/%s on cuda: %llu steps, worst max|e| %.3g (max|V| %.3g), %d on FlashInfer, "
              "%d unchecked",
              dn, kn, (unsigned long long)nb, bworst, vmax, fi, unchecked);
        printf("%s/%s on cuda: %llu steps, worst max|e| %.2e, mean|e| %.2e (max|V| %.2f)\n", dn, kn,
               (unsigned long long)nb, bworst, mworst, vmax);
        free(sb);
    }
}

/* The MLP tail (Llama widths: hidden 4096, intermediate 11008) runs and is timed
 * every step. */
static void the_mlp_tail_is_timed_every_step(void) {
    CHECK(test_run_json(
              NULL, NULL, &err,
              "{\"model\": {\"mlp_intermediate\": 11008}, \"workload\": {\"arrival\": "
              "{\"process\": \"closed\", \"concurrency\": 4}, \"prompt\": {\"dist\": \"fixed\", "
              "\"value\": 3000}, \"decode\": {\"dist\": \"fixed\", \"value\": 20}, "
              "\"num_requests\": 8}, \"route\": {\"calibration\": \"%s\", \"allow_other_gpu\": "
              "true}, \"run\": "
              "{\"backend\": \"cuda\", \"output\": \"%s\"}}",
              TEST_CALIBRATION, a) == 0,
          "mlp run: %s", err.msg);
    hsize_t n = 0;
    pkv_step_rec *s = read_steps(a, &n);
    int timed = n > 10;
    double mean = 0;
    for (hsize_t i = 0; i < n; i++) {
        timed &= s[i].t_mlp > 0 && s[i].t_wall > s[i].t_device + s[i].t_mlp;
        mean += s[i].t_mlp / n;
    }
    CHECK(timed, "MLP tail not timed on every step");
    printf("mlp tail: %llu steps, mean %.1f us per step at 4 rows\n", (unsigned long long)n,
           mean * 1e6);
    free(s);
}

/* Chunked prefill on a small full model: mixed steps (decode rows with prompt
 * chunks in one forward) run, every step's route is checked, and the run's tokens
 * add up (one per row of each step, one per prompt completed). */
static void chunked_prefill_runs_mixed_steps(void) {
    pkv_summary sum;
    CHECK(
        test_run_json(&sum, NULL, &err,
                      "{\"model\": {\"layers\": 2, \"hidden\": 1024, \"hq\": 8, \"hkv\": 2, "
                      "\"head_dim\": 128, \"intermediate\": 2048, \"vocab\": 4096}, \"workload\": "
                      "{\"arrival\": {\"process\": \"poisson\", \"rate\": 400}, \"prompt\": "
                      "{\"dist\": \"uniform\", \"min\": 10, \"max\": 3000}, \"decode\": "
                      "{\"dist\": \"uniform\", \"min\": 2, \"max\": 40}, \"num_requests\": 40, "
                      "\"max_context\": 4096}, \"serving\": {\"max_active\": 8, \"kv_pages\": "
                      "4000, \"scheduler\": \"chunked\", \"token_budget\": 512}, \"route\": "
                      "{\"calibration\": \"%s\", \"allow_other_gpu\": true, \"policy\": "
                      "\"pkv_workqueue\"}, \"run\": "
                      "{\"backend\": \"cuda\", \"check_every\": 1, \"output\": \"%s\"}}",
                      TEST_CALIBRATION, a) == 0,
        "chunked run: %s", err.msg);
    hsize_t n = 0;
    pkv_step_rec *s = read_steps(a, &n);
    int ok = n > 20;
    uint64_t rows = 0, mixed = 0;
    for (hsize_t i = 0; i < n; i++) {
        ok &= s[i].max_err < PKV_TOL_MAX && s[i].t_device > 0 && s[i].t_dense > 0 &&
              s[i].rows + s[i].prefill_tokens <= 512;
        rows += s[i].rows, mixed += s[i].prefill_chunks > 0;
    }
    CHECK(ok && mixed > 0 && sum.finished == 40, "chunked: %llu of %llu steps mixed",
          (unsigned long long)mixed, (unsigned long long)n);
    CHECK(rows + sum.finished + sum.preemptions == sum.output_tokens,
          "chunked: %llu step rows, %llu output tokens", (unsigned long long)rows,
          (unsigned long long)sum.output_tokens);
    printf("chunked prefill: %llu steps, %llu with chunks, every one checked\n",
           (unsigned long long)n, (unsigned long long)mixed);
    free(s);
}

/* Preemption by swap on a small full model under a pool tight enough that decode
 * growth preempts: requests go to the pinned host pool and back (real copies,
 * timed), every step's route is checked, every request finishes, and the steps
 * wait no longer than the copies took (prefill batches wait for the rest). */
static void swap_preemption_copies_out_and_back(void) {
    pkv_summary sum;
    CHECK(
        test_run_json(&sum, NULL, &err,
                      "{\"model\": {\"layers\": 2, \"hidden\": 1024, \"hq\": 8, \"hkv\": 2, "
                      "\"head_dim\": 128, \"intermediate\": 2048, \"vocab\": 4096}, \"workload\": "
                      "{\"arrival\": {\"process\": \"closed\", \"concurrency\": 8}, \"prompt\": "
                      "{\"dist\": \"uniform\", \"min\": 200, \"max\": 1200}, \"decode\": "
                      "{\"dist\": \"uniform\", \"min\": 100, \"max\": 300}, \"num_requests\": 24, "
                      "\"max_context\": 1600}, \"serving\": {\"max_active\": 8, \"kv_pages\": "
                      "400, \"scheduler\": \"chunked\", \"token_budget\": 1024, \"preemption\": "
                      "\"swap\", \"swap_pages\": 2000}, \"route\": {\"calibration\": \"%s\", "
                      "\"allow_other_gpu\": true, "
                      "\"policy\": \"pkv_workqueue\"}, \"run\": {\"backend\": \"cuda\", "
                      "\"check_every\": 1, \"output\": \"%s\"}}",
                      TEST_CALIBRATION, a) == 0,
        "swap run: %s", err.msg);
    hsize_t n = 0;
    pkv_step_rec *s = read_steps(a, &n);
    int ok = n > 20;
    double waited = 0;
    for (hsize_t i = 0; i < n; i++) {
        ok &= s[i].max_err < PKV_TOL_MAX && s[i].t_swap >= 0;
        waited += s[i].t_swap;
    }
    CHECK(ok && sum.finished == 24, "swap: %llu finished, a step failed its check",
          (unsigned long long)sum.finished);
    CHECK(sum.swap_outs > 0 && sum.swap_ins == sum.swap_outs && sum.swap_time_s > 0 &&
              isfinite(sum.swap_time_s) && waited <= sum.swap_time_s * (1 + 1e-9),
          "swap: %llu out, %llu in, %.3g s, %.3g s waited by steps",
          (unsigned long long)sum.swap_outs, (unsigned long long)sum.swap_ins, sum.swap_time_s,
          waited);
    printf("swap: %llu requests out and back, %llu pages, %.3f ms measured (%.3f ms "
           "predicted)\n",
           (unsigned long long)sum.swap_outs, (unsigned long long)sum.swap_pages,
           sum.swap_time_s * 1e3, sum.swap_predicted_s * 1e3);
    free(s);
}

/* run.layers_measured: a 4-layer model run in full and with one layer measured
 * makes the same steps, and the one layer's times scaled to four come out near
 * the four layers' (medians over the steps, within a third: the same shapes; a
 * layer's K/V, 65 MB a step, and its weights, 71 MB, beyond the L2, so that one
 * layer alone is not served from it). */
static void one_measured_layer_scales_to_the_whole(void) {
    double med[2][2]; /* [layers_measured 0, 1][attention, dense] */
    hsize_t steps[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        CHECK(
            test_run_json(NULL, NULL, &err,
                          "{\"model\": {\"layers\": 4, \"hidden\": 2048, \"hq\": 16, \"hkv\": 4, "
                          "\"head_dim\": 128, \"intermediate\": 4096, \"vocab\": 4096}, "
                          "\"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": "
                          "4}, \"prompt\": {\"dist\": \"fixed\", \"value\": 8000}, \"decode\": "
                          "{\"dist\": \"fixed\", \"value\": 60}, \"num_requests\": 8, "
                          "\"max_context\": 8100}, \"serving\": {\"max_active\": 4, \"kv_pages\": "
                          "2200}, \"route\": {\"calibration\": \"%s\", \"allow_other_gpu\": true, "
                          "\"policy\": "
                          "\"pkv_workqueue\"}, \"run\": {\"backend\": \"cuda\", "
                          "\"layers_measured\": %d, \"output\": \"%s\"}}",
                          TEST_CALIBRATION, k, a) == 0,
            "layers_measured %d: %s", k, err.msg);
        pkv_step_rec *st = read_steps(a, &steps[k]);
        double *x = malloc(sizeof(double) * (steps[k] + 1) * 2);
        for (int part = 0; st && x && part < 2; part++) {
            for (hsize_t i = 0; i < steps[k]; i++) x[i] = part ? st[i].t_dense : st[i].t_device;
            qsort(x, steps[k], sizeof *x, cmp_double);
            med[k][part] = steps[k] ? x[steps[k] / 2] : NAN;
        }
        free(x);
        free(st);
        if (k == 1) { /* the layers run, in /provenance */
            hid_t f = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT);
            unsigned long long lm = 0;
            hid_t at = f < 0 ? -1
                             : H5Aopen_by_name(f, "provenance", "layers_measured", H5P_DEFAULT,
                                               H5P_DEFAULT);
            CHECK(at >= 0 && H5Aread(at, H5T_NATIVE_ULLONG, &lm) >= 0 && lm == 1,
                  "/provenance layers_measured: %llu", lm);
            if (at >= 0) H5Aclose(at);
            if (f >= 0) H5Fclose(f);
        }
    }
    const double ra = med[1][0] / med[0][0], rd = med[1][1] / med[0][1];
    CHECK(steps[0] == steps[1] && steps[0] > 50 && ra > 0.75 && ra < 1.33 && rd > 0.75 && rd < 1.33,
          "layers_measured 1 of 4: %llu and %llu steps, attention %.3g, dense %.3g of the "
          "full run's",
          (unsigned long long)steps[0], (unsigned long long)steps[1], ra, rd);
    printf("layers_measured 1 of 4: median attention %.3fx, dense %.3fx the full run's\n", ra, rd);
}

/* run.cuda_graph on a full model: the same steps as without graphs (the clock is
 * predicted), every fifth one run eagerly and checked against the reference, the
 * rest replayed from the graphs of their (route, rows bucket, merge); a route
 * that graphs cannot hold is refused before the run. */
static void full_model_graphs_replay_the_same_steps(void) {
    const char *pol[2] = {"pkv_workqueue", "adaptive"};
    for (int k = 0; k < 2; k++) {
        hsize_t steps[2] = {0, 0};
        int ok = 1;
        for (int gr = 0; gr < 2; gr++) {
            CHECK(test_run_json(
                      NULL, NULL, &err,
                      "{\"model\": {\"layers\": 2, \"hidden\": 1024, \"hq\": 8, \"hkv\": "
                      "2, \"head_dim\": 128, \"intermediate\": 2048, \"vocab\": 4096}, "
                      "\"workload\": {\"arrival\": {\"process\": \"closed\", "
                      "\"concurrency\": 5}, \"prompt\": {\"dist\": \"uniform\", \"min\": "
                      "100, \"max\": 6000}, \"decode\": {\"dist\": \"uniform\", \"min\": 5, "
                      "\"max\": 60}, \"num_requests\": 14, \"max_context\": 6100}, "
                      "\"serving\": {\"max_active\": 5, \"kv_pages\": 2400}, \"route\": "
                      "{\"calibration\": \"%s\", \"allow_other_gpu\": true, \"policy\": "
                      "\"%s\"}, \"run\": "
                      "{\"backend\": \"cuda\", \"clock\": \"predicted\", "
                      "\"check_every\": 5, \"cuda_graph\": %s, \"output\": \"%s\"}}",
                      TEST_CALIBRATION, pol[k], gr ? "true" : "false", a) == 0,
                  "full model, cuda_graph %d, %s: %s", gr, pol[k], err.msg);
            pkv_step_rec *st = read_steps(a, &steps[gr]);
            for (hsize_t i = 0; st && i < steps[gr]; i++)
                ok &= !(s_checked(&st[i]) && !(st[i].max_err < PKV_TOL_MAX)) &&
                      st[i].t_device > 0 && st[i].t_dense > 0;
            free(st);
        }
        CHECK(ok && steps[0] == steps[1] && steps[0] > 50,
              "full model graphs, %s: %llu and %llu steps, or a step failed", pol[k],
              (unsigned long long)steps[0], (unsigned long long)steps[1]);
        printf("full model graph replay %-13s %llu steps, every fifth checked\n", pol[k],
               (unsigned long long)steps[1]);
    }
    CHECK(test_run_json(NULL, NULL, &err,
                        "{\"model\": {\"layers\": 2, \"hidden\": 1024, \"hq\": 8, "
                        "\"hkv\": 2, \"head_dim\": 128, \"intermediate\": 2048, "
                        "\"vocab\": 4096}, \"workload\": {\"arrival\": {\"process\": "
                        "\"closed\", \"concurrency\": 2}, \"prompt\": {\"dist\": \"fixed\", "
                        "\"value\": 100}, \"decode\": {\"dist\": \"fixed\", \"value\": 4}, "
                        "\"num_requests\": 2}, \"route\": "
                        "{\"calibration\": \"%s\", \"allow_other_gpu\": true, \"policy\": "
                        "\"pkv_bucket\"}, \"run\": "
                        "{\"backend\": \"cuda\", \"cuda_graph\": true, \"output\": "
                        "\"%s\"}}",
                        TEST_CALIBRATION, a) == -1 &&
              strstr(err.msg, "pkv_bucket cannot be replayed"),
          "pkv_bucket in a full model's graph not refused: %s", err.msg);
}

/* A calibration made on another GPU model is refused, unless allowed. */
static void a_calibration_of_another_gpu_is_refused(void) {
    char cal[64];
    snprintf(cal, sizeof cal, "/tmp/pkv-cal-%d.json", (int)getpid());
    FILE *f = fopen(cal, "w");
    fputs("{\"gpu_name\": \"Some Other GPU\", \"placeholder\": false}", f);
    fclose(f);
    for (int allow = 0; allow < 2; allow++) {
        unlink(a);
        int rc = test_run_json(
            NULL, NULL, &err,
            "{\"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 2}, "
            "\"prompt\": {\"dist\": \"fixed\", \"value\": 5000}, \"decode\": {\"dist\": "
            "\"fixed\", \"value\": 4}, \"num_requests\": 4}, \"route\": {\"calibration\": "
            "\"%s\", \"allow_other_gpu\": %s}, \"run\": {\"backend\": \"cuda\", "
            "\"output\": \"%s\"}}",
            cal, allow ? "true" : "false", a);
        if (allow)
            CHECK(rc == 0 && access(a, F_OK) == 0, "allowed mismatch did not run: %s", err.msg);
        else
            CHECK(rc == -1 && strstr(err.msg, "was made on \"Some Other GPU\"") &&
                      access(a, F_OK) != 0,
                  "mismatch not refused (or a file left behind): %s", err.msg);
    }
    unlink(cal);
}

/* CUDA graph replay (ablation): the same steps, every one checked. */
static void graph_replay_checks_every_step(void) {
    graph = "true";
    const char *gpol[2] = {"adaptive", "pkv_bucket"};
    for (int k = 0; k < 2; k++) {
        int rc = run("cuda", gpol[k], 30000, a, &err);
        CHECK(rc == 0, "graph %s: %s", gpol[k], err.msg);
        if (rc) continue;
        hsize_t n = 0;
        pkv_step_rec *s = read_steps(a, &n);
        int ok = n > 40;
        for (hsize_t i = 0; i < n; i++) ok &= s[i].max_err < PKV_TOL_MAX && s[i].t_device > 0;
        CHECK(ok, "graph %s: a step failed its check", gpol[k]);
        printf("graph replay %-10s %llu steps checked\n", gpol[k], (unsigned long long)n);
        free(s);
    }
    graph = "false";
}

/* The step's metadata by copy (ablation): the same steps, every one checked. */
static void metadata_by_copy_checks_every_step(void) {
    upload = "copy";
    int rc = run("cuda", "adaptive", 30000, a, &err);
    CHECK(rc == 0, "copy upload: %s", err.msg);
    hsize_t n = 0;
    pkv_step_rec *s = rc ? NULL : read_steps(a, &n);
    int ok = s && n > 40;
    for (hsize_t i = 0; ok && i < n; i++) ok &= s[i].max_err < PKV_TOL_MAX && s[i].t_device > 0;
    CHECK(ok, "copy upload: a step failed its check");
    printf("metadata by copy: %llu steps checked\n", s ? (unsigned long long)n : 0ull);
    free(s);
    upload = "params";
}

/* 10^7 pages of 64 KiB do not fit: an error naming bytes, and no file. */
static void a_pool_that_does_not_fit_leaves_no_file(void) {
    unlink(a);
    CHECK(run("cuda", "adaptive", 10000000, a, &err) == -1 && strstr(err.msg, "GiB free"),
          "out of memory: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "a file was left behind");
}

/* Speculative decoding's proposer on the GPU (engine/proposer.c): a small served model
 * speculating with a smaller draft (k 1 and 4; k 3 beside prompt chunks, the verify and
 * the chunks in one forward) or EAGLE's head (k 3, also with the proposer's passes replayed
 * as CUDA graphs; k 3 on FlashInfer's routes, their verify steps on its prefill path), every
 * verify checked: each step records its proposer's device time, within its wall time; four
 * passes take longer than one. */
static const char *SPEC =
    "{\"model\": {\"layers\": 2, \"hidden\": 1024, \"hq\": 8, \"hkv\": 2, \"head_dim\": 128,"
    " \"intermediate\": 2048, \"vocab\": 4000},"
    " \"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 4},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 3000},"
    "   \"decode\": {\"dist\": \"fixed\", \"value\": 30}, \"num_requests\": 8},"
    " \"serving\": {\"kv_pages\": 2000,%s \"speculative\": {\"method\": \"%s\", \"tokens\": %d,"
    "   \"draft_model\": \"%s\"}},"
    " \"route\": {%s\"calibration\": \"%s\", \"allow_other_gpu\": true},"
    " \"run\": {\"backend\": \"cuda\", \"check_every\": 1, \"output\": \"%s\", \"cuda_graph\": "
    "%s}}";

/* The least proposer time of a run's steps (NaN: a step without one, or past its wall
 * time; -1: the run failed). */
static double least_draft(const char *method, int k, const char *draft, const char *graphs,
                          const char *serving, const char *route) {
    pkv_err e;
    int rc = test_run_json(NULL, NULL, &e, SPEC, serving, method, k, draft, route,
                           PKV_SOURCE_DIR "/experiments/calibration/default.json", a, graphs);
    CHECK(rc == 0, "%s k %d %s: %s", method, k, route, e.msg);
    hsize_t n = 0;
    pkv_step_rec *s = rc ? NULL : read_steps(a, &n);
    double least = s ? INFINITY : -1;
    for (hsize_t i = 0; s && i < n; i++) {
        if (!s[i].rows) continue;
        if (!(s[i].t_draft > 0 && s[i].t_draft <= s[i].t_wall)) least = NAN;
        if (s[i].t_draft < least) least = s[i].t_draft;
    }
    free(s);
    return least;
}

static void the_proposer_runs_on_the_gpu(void) {
    char draft[] = "/tmp/pkv-cuda-draft-XXXXXX";
    test_temp_file(draft);
    FILE *f = fopen(draft, "w");
    CHECK(f != NULL, "cannot write %s", draft);
    if (!f) return;
    fputs("{\"layers\": 2, \"hidden\": 512, \"hq\": 4, \"hkv\": 1, \"head_dim\": 128, "
          "\"intermediate\": 1024, \"vocab\": 4000}",
          f);
    fclose(f);
    const double one = least_draft("draft", 1, draft, "false", "", "");
    const double four = least_draft("draft", 4, draft, "false", "", "");
    const double eagle = least_draft("eagle", 3, draft, "false", "", "");
    const double graphs = least_draft("eagle", 3, draft, "true", "", "");
    /* prompt chunks in the verify steps: the mixed forward over k + 1 tokens a row */
    const double mixed = least_draft("draft", 3, draft, "false",
                                     " \"scheduler\": \"chunked\", \"token_budget\": 512,", "");
    /* FlashInfer's routes: the verify steps on its prefill path */
    const char *fi_routes[2] = {"\"policy\": \"flashinfer\", ", "\"policy\": \"flashinfer_tc\", "};
    for (int i = 0; i < 2 && pkvk_flashinfer_built(); i++)
        CHECK(least_draft("eagle", 3, draft, "false", "", fi_routes[i]) > 0,
              "EAGLE k 3 on %s: no proposer time", fi_routes[i]);
    unlink(draft);
    printf("the proposer's least device time a step: draft k 1 %.1f us, k 4 %.1f us (k 3 with "
           "prompt chunks %.1f us); EAGLE k 3 %.1f us, replayed as graphs %.1f us\n",
           1e6 * one, 1e6 * four, 1e6 * mixed, 1e6 * eagle, 1e6 * graphs);
    CHECK(one > 0 && four > 1.5 * one,
          "the draft: least %.3g s at k 1, %.3g s at k 4 (each step's within its wall time; "
          "more than 1.5x)",
          one, four);
    CHECK(eagle > 0 && graphs > 0, "EAGLE's head: least %.3g s, %.3g s replayed as graphs", eagle,
          graphs);
    CHECK(mixed > 0, "the draft beside prompt chunks: least %.3g s", mixed);
}

static const pkv_test_case cases[] = {
    PKV_CASE(every_policy_checks_each_step_and_the_model_counts_alike),
    PKV_CASE(measured_prefill_gives_first_tokens_at_once),
    PKV_CASE(cpu_and_cuda_backends_agree_step_by_step),
    PKV_CASE(bf16_and_fp8_study_layers_hold_their_bounds),
    PKV_CASE(the_mlp_tail_is_timed_every_step),
    PKV_CASE(chunked_prefill_runs_mixed_steps),
    PKV_CASE(swap_preemption_copies_out_and_back),
    PKV_CASE(one_measured_layer_scales_to_the_whole),
    PKV_CASE(full_model_graphs_replay_the_same_steps),
    PKV_CASE(a_calibration_of_another_gpu_is_refused),
    PKV_CASE(graph_replay_checks_every_step),
    PKV_CASE(metadata_by_copy_checks_every_step),
    PKV_CASE(a_pool_that_does_not_fit_leaves_no_file),
    PKV_CASE(the_proposer_runs_on_the_gpu),
};
PKV_TEST_MAIN_WITH(cases, setup, teardown)
