/* The schedulers (serving.scheduler), property tests over random arrivals on the
 * model backend: under chunked prefill no iteration exceeds its token budget, every
 * running request is a row of every decode step (never starved by chunks), each
 * prompt's chunks cover it exactly once and in order (from its first token again after
 * a preemption), a prompt with budget left always gets its chunk; requests and tokens
 * are conserved under both schedulers. With prefix caching: a row's pages in cached
 * blocks belong to the cache and its other pages to it, the blocks it maps are cached
 * and referenced, an admission's first chunk starts after its cached blocks, and the
 * tokens prefilled plus those found cached are the admissions' tokens. With
 * preemption by swap (with and without caching) requests go out and come back as
 * often, and a host pool that holds every swap leaves nothing prefilled twice. A mixed step's
 * predicted dense part is the dense forward over the rows and the chunks' tokens plus the chunks'
 * attention and the calibration's prefill terms. Multi-turn sessions find their earlier turns'
 * prompts cached. */
#include "check.h"
#include "testrun.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

enum { MAX_REQ = 4096 };

typedef struct watch {
    int chunked, block_tokens; /* block_tokens: prefix caching's blocks (0: off) */
    int64_t seq[MAX_REQ];      /* by request id: the admission its last chunk belonged to */
    uint64_t chunk_tokens;
    int bad_pages, bad_start;
    int32_t budget, max_chunk;
    int32_t next[MAX_REQ];  /* by request id: the next chunk's expected first position */
    uint64_t step_rows;     /* decode tokens of the steps seen */
    uint64_t prompts_done;  /* chunks that ended a prompt (each samples a token) */
    uint64_t chunks, mixed; /* chunks seen; decode steps holding chunks */
    int bad_budget, starved, bad_chunk, skipped, bad_id;
} watch;

static void observe(const pkv_sim *s, int decode_step, void *ctx) {
    watch *w = ctx;
    int64_t tokens = decode_step ? s->n_run : 0;
    int running = 0;
    for (size_t i = 0; i < s->n_slots; i++)
        running += s->req[i].live && s->req[i].rec.state == PKV_REQ_RUNNING;
    /* Every running request is a row of the step (chunked: a prefill batch runs only
     * when none is; prefill_first runs its batches between the steps). */
    if (decode_step ? running != s->n_run : w->chunked && running) w->starved++;
    if (decode_step) w->step_rows += (uint64_t)s->n_run;
    /* Pages of cached blocks are the cache's, the others the row's own; its blocks are
     * cached and referenced. */
    for (int32_t i = 0; w->block_tokens && i < s->n_run; i++) {
        const pkv_sim_request *r = &s->req[s->run[i]];
        const int32_t shared = r->cached_blocks * s->cache.pages_per_block;
        for (int32_t j = 0; j < r->n_pages; j++)
            w->bad_pages += pkv_kvalloc_owner(&s->alloc, r->pages[j]) !=
                            (j < shared ? PKV_PREFIX_OWNER : r->rec.id);
        for (int32_t b = 0; b < r->cached_blocks; b++)
            w->bad_pages +=
                s->cache.slot[r->blocks[b]].used != 1 || s->cache.slot[r->blocks[b]].refs < 1;
    }
    w->mixed += decode_step && s->n_chunks > 0;
    for (int32_t k = 0; k < s->n_chunks; k++) {
        const pkv_sim_request *r = &s->req[s->chunk_slot[k]];
        const int64_t id = r->rec.id;
        if (id < 0 || id >= MAX_REQ) {
            w->bad_id++;
            continue;
        }
        const int32_t start = s->chunk_start[k], len = s->chunk_len[k];
        const int64_t stored = (int64_t)r->rec.prompt_len + r->rec.generated;
        /* An admission's first chunk starts right after the blocks found cached. */
        const int first = w->seq[id] != r->admit_seq + 1;
        w->seq[id] = r->admit_seq + 1;
        if (first) {
            w->next[id] = start;
            w->bad_start += start != r->cached_blocks * w->block_tokens;
        }
        w->chunk_tokens += (uint64_t)len;
        /* In order and once: each chunk starts where the last one ended, or at 0 (a new
         * admission, after a preemption); it ends the prompt exactly when it says so. */
        if (start != w->next[id] || len < 1 || len > w->max_chunk || start + len > stored ||
            (start + len == stored) != s->chunk_last[k])
            w->bad_chunk++;
        w->next[id] = start + len;
        tokens += len;
        w->chunks++;
        w->prompts_done += s->chunk_last[k];
    }
    if (tokens > w->budget) w->bad_budget++;
    /* A prompt waits for a later iteration only when the budget is spent. */
    if (w->chunked && tokens < w->budget && s->n_chunks < s->n_prefill) w->skipped++;
}

static const char *EXP =
    "{\"name\": \"sched\", \"model\": {\"layers\": 2, \"hidden\": 512, \"hq\": 8, \"hkv\": 2,"
    " \"head_dim\": 128, \"intermediate\": 1024, \"vocab\": 1000},"
    " \"workload\": {\"arrival\": {\"process\": \"gamma\", \"rate\": %g, \"cv\": %g},"
    "   \"shared_prefix_tokens\": %d, \"shared_prefix_share\": 0.7, \"shared_prefix_groups\": %d,"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 1, \"max\": %d},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": %d},"
    "   \"num_requests\": %d, \"max_context\": 20000},"
    " \"serving\": {\"max_active\": %d, \"kv_pages\": %d, \"admission\": \"%s\","
    "   \"scheduler\": \"%s\", \"token_budget\": %d, \"max_prefill_chunk\": %d,"
    "   \"prefix_caching\": %s, \"prefix_block_tokens\": %d, \"preemption\": \"%s\","
    "   \"swap_pages\": %d},"
    " \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"%s\"},"
    " \"run\": {\"seed\": %d, \"output\": \"%s\"}}";

static int run(const char *text_fmt_args, watch *w, pkv_summary *sum, pkv_err *e) {
    pkv_config cfg;
    if (pkv_config_parse(&cfg, strdup(text_fmt_args), "sched.json", e)) return -1;
    pkv_run_opts o = {.quiet = 1, .record = 1, .observe = observe, .observe_ctx = w};
    int rc = pkv_run_experiment(&cfg, &o, sum, e);
    pkv_config_free(&cfg);
    return rc;
}

static int32_t pages_of(const void *ctx, size_t i) {
    static const int32_t p[4] = {5, 9, 1, 1};
    return p[i];
}
static int32_t priority_of(const void *ctx, size_t i) {
    return (int32_t)(i % 2); /* 0, 1, 0, 1 */
}
static int32_t flat(const void *ctx, size_t i) {
    return 0;
}

/* Random runs (24 trials of pools, budgets, chunks, caching, admission and preemption by
 * recompute or swap, each under prefill_first and chunked) keep the scheduler's invariants
 * and reach every feature: preemption, mixed steps, cache hits and evictions, swaps. */
static void random_runs_keep_the_scheduler_invariants(void) {
    char out[] = "/tmp/pkv_sched_XXXXXX";
    test_temp_file(out);
    gsl_rng *g = test_rng(20261201);
    uint64_t preempted = 0, mixed = 0, hits = 0, evictions = 0, swapped = 0, recomputed = 0;
    pkv_calib swap_cal;
    pkv_err ce;
    CHECK(pkv_calib_load(&swap_cal, TEST_CALIBRATION, NULL, &ce) == 0, "%s", ce.msg);
    for (int trial = 0; trial < 24; trial++) {
        /* Preemption by swap on a quarter of the trials, under pools tight enough that
         * decode growth preempts: a host pool that holds every swap, or one so small
         * that most preemptions recompute. */
        const int swap = trial % 4 == 3, swap_pool = trial % 8 == 3 ? 100000 : 40;
        const int max_active =
            swap ? 12 + (int)gsl_rng_uniform_int(g, 12) : 1 + (int)gsl_rng_uniform_int(g, 24);
        const int budget = max_active + 1 + (int)gsl_rng_uniform_int(g, 4096);
        const int max_chunk = trial % 3 == 0 ? 0 : 1 + (int)gsl_rng_uniform_int(g, budget);
        const int prompt_max = swap ? 4000 : 64 + (int)gsl_rng_uniform_int(g, 12000);
        const int decode_max = swap ? 400 : 1 + (int)gsl_rng_uniform_int(g, 200);
        const int n_req = 20 + (int)gsl_rng_uniform_int(g, 120);
        /* A tight pool on some trials, so that running requests are preempted. */
        const int pages = swap ? 700 : trial % 2 ? 1300 + (int)gsl_rng_uniform_int(g, 600) : 200000;
        const double rate = 5 + gsl_rng_uniform(g) * 400, cv = 0.3 + gsl_rng_uniform(g) * 3;
        const char *adm = trial % 4 == 1   ? "first_fit"
                          : trial % 4 == 2 ? "new_token_ratio"
                                           : "fcfs";
        /* Prefix caching on two trials of three (swap trials too): a shared prompt of up
         * to 4000 tokens in up to 5 versions, blocks of 16 to 1024 tokens. */
        const int caching = trial % 3 != 2, block = 16 * (1 + (int)gsl_rng_uniform_int(g, 64));
        const int shared = (int)gsl_rng_uniform_int(g, 4000),
                  groups = 1 + (int)gsl_rng_uniform_int(g, 5);
        pkv_summary sums[2];
        for (int chunked = 0; chunked < 2; chunked++) {
            char text[4096];
            snprintf(text, sizeof text, EXP, rate, cv, shared, groups, prompt_max, decode_max,
                     n_req, max_active, pages, adm, chunked ? "chunked" : "prefill_first", budget,
                     max_chunk, caching ? "true" : "false", block, swap ? "swap" : "recompute",
                     swap ? swap_pool : 0, TEST_CALIBRATION, trial, out);
            watch *w = calloc(1, sizeof *w);
            w->chunked = chunked;
            w->block_tokens = caching ? block : 0;
            w->budget = chunked ? budget : INT32_MAX;
            w->max_chunk = chunked && max_chunk ? max_chunk : INT32_MAX;
            pkv_err e;
            int rc = run(text, w, &sums[chunked], &e);
            CHECK(rc == 0, "trial %d (%s): %s", trial, chunked ? "chunked" : "prefill_first",
                  rc ? e.msg : "");
            if (rc) {
                free(w);
                continue;
            }
            const pkv_summary *s = &sums[chunked];
            CHECK(s->finished == (uint64_t)n_req && s->arrived == (uint64_t)n_req,
                  "trial %d: %llu of %d requests finished", trial, (unsigned long long)s->finished,
                  n_req);
            /* Conservation: each decode step's rows and each completed prompt (its
             * forward samples one) make one token each. */
            CHECK(w->step_rows + w->prompts_done == s->output_tokens || !chunked,
                  "trial %d: %llu step rows + %llu prompts != %llu output tokens", trial,
                  (unsigned long long)w->step_rows, (unsigned long long)w->prompts_done,
                  (unsigned long long)s->output_tokens);
            CHECK(w->bad_budget == 0, "trial %d: %d iterations over the budget", trial,
                  w->bad_budget);
            CHECK(w->starved == 0, "trial %d: %d steps left a running request out", trial,
                  w->starved);
            CHECK(w->bad_chunk == 0 && w->bad_id == 0, "trial %d: %d chunks out of order", trial,
                  w->bad_chunk);
            CHECK(w->skipped == 0, "trial %d: %d iterations left budget and a prompt waiting",
                  trial, w->skipped);
            CHECK(chunked ? w->chunks >= (uint64_t)n_req : w->chunks == 0, "trial %d: %llu chunks",
                  trial, (unsigned long long)w->chunks);
            CHECK(!chunked || s->mixed_steps == w->mixed, "trial %d: %llu mixed steps, saw %llu",
                  trial, (unsigned long long)s->mixed_steps, (unsigned long long)w->mixed);
            CHECK(w->bad_pages == 0 && w->bad_start == 0,
                  "trial %d: %d pages or blocks of the wrong owner, %d first chunks not after "
                  "the cached blocks",
                  trial, w->bad_pages, w->bad_start);
            CHECK(!chunked || !caching ||
                      w->chunk_tokens + s->prefix_hit_tokens == s->prefix_tokens,
                  "trial %d: %llu tokens prefilled + %llu cached != %llu admitted", trial,
                  (unsigned long long)w->chunk_tokens, (unsigned long long)s->prefix_hit_tokens,
                  (unsigned long long)s->prefix_tokens);
            if (caching) hits += s->prefix_hit_tokens, evictions += s->prefix_evictions;
            /* Swapped requests come back whole: in, out and back in as often; with a host
             * pool that holds them all nothing is prefilled twice (what the cache held is
             * not prefilled at all). */
            const uint64_t prefilled = s->prefill_tokens + s->mixed_prefill_tokens;
            CHECK(s->swap_ins == s->swap_outs && s->swap_outs <= s->preemptions &&
                      (swap || s->swap_outs == 0),
                  "trial %d: %llu swapped out, %llu in, %llu preemptions", trial,
                  (unsigned long long)s->swap_outs, (unsigned long long)s->swap_ins,
                  (unsigned long long)s->preemptions);
            if (swap && swap_pool > 1000)
                CHECK(s->swap_outs == s->preemptions &&
                          prefilled + (caching ? s->prefix_hit_tokens : 0) == s->input_tokens,
                      "trial %d: %llu prompt tokens prefilled for %llu, %llu of %llu preemptions "
                      "swapped",
                      trial, (unsigned long long)prefilled, (unsigned long long)s->input_tokens,
                      (unsigned long long)s->swap_outs, (unsigned long long)s->preemptions);
            /* The model backend's copies take the calibration's time: swap_us a copy and
             * every layer's K and V at swap_gbps (the sched model: 2 layers, 2 KV heads
             * of 128, 16-token pages: 32 KiB a page). */
            const double want = 2 * (double)s->swap_outs * swap_cal.swap_us * 1e-6 +
                                (double)s->swap_pages * 32768 / (swap_cal.swap_gbps * 1e9);
            CHECK(s->swap_time_s == s->swap_predicted_s &&
                      fabs(s->swap_time_s - want) <= 1e-9 * want + 1e-15,
                  "trial %d: swaps took %.9g s (predicted %.9g), expected %.9g", trial,
                  s->swap_time_s, s->swap_predicted_s, want);
            if (swap) swapped += s->swap_outs, recomputed += s->preemptions - s->swap_outs;
            if (getenv("SCHED_VERBOSE"))
                printf("trial %d %s: preemptions %llu swaps %llu pool %d\n", trial,
                       chunked ? "chunked" : "prefill_first", (unsigned long long)s->preemptions,
                       (unsigned long long)s->swap_outs, swap ? swap_pool : 0);
            if (chunked) preempted += s->preemptions, mixed += w->mixed;
            free(w);
        }
        CHECK(sums[0].output_tokens == sums[1].output_tokens,
              "trial %d: %llu output tokens under prefill_first, %llu under chunked", trial,
              (unsigned long long)sums[0].output_tokens, (unsigned long long)sums[1].output_tokens);
    }
    CHECK(preempted > 0, "no trial preempted: the tight pools are too large");
    CHECK(mixed > 0, "no decode step held a chunk");
    CHECK(hits > 0 && evictions > 0, "prefix caching: %llu tokens hit, %llu blocks evicted",
          (unsigned long long)hits, (unsigned long long)evictions);
    CHECK(swapped > 0 && recomputed > 0, "swap: %llu preemptions swapped, %llu recomputed",
          (unsigned long long)swapped, (unsigned long long)recomputed);
    gsl_rng_free(g);
    pkv_calib_free(&swap_cal);
    unlink(out);
}

/* A mixed step's prediction: the dense forward over rows + chunk tokens (heads: the
 * rows and the chunk that ends its prompt), the chunks' attention from their start,
 * and the rows' route in every layer. */
static void mixed_step_prediction_sums_its_parts(void) {
    const char *out = "/tmp/pkv_sched_mixed.h5"; /* parsed, never written */
    pkv_config cfg;
    pkv_err e;
    char text[4096];
    snprintf(text, sizeof text, EXP, 10.0, 1.0, 0, 1, 100, 10, 1, 8, 4000, "fcfs", "chunked", 4096,
             0, "false", 512, "recompute", 0, TEST_CALIBRATION, 1, out);
    CHECK(pkv_config_parse(&cfg, strdup(text), "mixed.json", &e) == 0, "%s", e.msg);
    pkv_calib cal;
    CHECK(pkv_calib_load(&cal, TEST_CALIBRATION, NULL, &e) == 0, "%s", e.msg);
    /* the fitted prefill terms */
    cal.prefill_fixed_us = 700, cal.prefill_token_us = 3, cal.prefill_score_ps = 2;
    pkv_engine eng;
    pkv_backend_spec bs = {.kind = PKV_BACKEND_MODEL, .kv_pages = 4000, .bt_stride = 1250};
    const pkv_engine_opts eo = {.policy = "pkv_workqueue",
                                .bucket_mode = PKV_BUCKET_MODE_EXACT,
                                .cap_rows = 8,
                                .clock = PKV_CLOCK_PREDICTED};
    CHECK(pkv_engine_init(&eng, &cfg.model, &cal, &eo, &bs, &e) == 0, "%s", e.msg);
    static int32_t bt[4 * 1250], pages[64];
    int32_t lens[4] = {300, 1200, 17, 5000}, dirty[4] = {0, 1, 2, 3}, from[4] = {0};
    for (int i = 0; i < 64; i++) pages[i] = i;
    int32_t clens[2] = {256, 100}, cstarts[2] = {512, 0};
    uint8_t clast[2] = {0, 1};
    pkv_prefill_view cv = {.n_req = 2,
                           .lens = clens,
                           .pages = pages,
                           .n_pages = 48 + 7,
                           .starts = cstarts,
                           .last = clast};
    pkv_batch_view v = {4, lens, bt, 1250, dirty, 4, from, NULL, 0};
    pkv_step_rec plain = {.index = 0}, mix = {.index = 1};
    double adv;
    CHECK(pkv_engine_step(&eng, &v, &plain, &adv, &e) == 0, "%s", e.msg);
    v.chunks = &cv;
    CHECK(pkv_engine_step(&eng, &v, &mix, &adv, &e) == 0, "%s", e.msg);
    pkv_dense_cost dc;
    pkv_model_dense_cost(&cfg.model, &cal, 4 + 356, 4 + 1, NULL, &dc);
    const double attn = pkv_model_prefill_attn_time(&cfg.model, &cal, clens, cstarts, 2);
    /* The causal rectangle: 256 queries from position 512 see 512 + their triangle. */
    const double hq = 8, d = 128, scores = hq * (256.0 * 512 + 256.0 * 257 / 2 + 100.0 * 101 / 2);
    const double extra = (700 + 3 * 356.0) * 1e-6 + 2e-12 * 2 * scores; /* 2 layers */
    CHECK(fabs(mix.t_dense_predicted - (dc.t_predicted + attn + extra)) <= 1e-12 * dc.t_predicted,
          "mixed dense %g, expected %g + %g + %g", mix.t_dense_predicted, dc.t_predicted, attn,
          extra);
    CHECK(fabs(mix.t_predicted - plain.t_predicted -
               (mix.t_dense_predicted - plain.t_dense_predicted)) <= 1e-9 * mix.t_predicted,
          "the rows' attention differs between the plain and the mixed step");
    CHECK(mix.prefill_tokens == 356 && mix.prefill_chunks == 2 && plain.prefill_tokens == 0 &&
              mix.prefill_scores == 2 * scores && plain.prefill_scores == 0,
          "recorded %u chunk tokens in %u chunks, %g scores", mix.prefill_tokens,
          mix.prefill_chunks, mix.prefill_scores);
    const double want = 2 * (4 * d * scores / (cal.gemm_tflops * 1e12) + scores * 12 / cal.beta);
    CHECK(fabs(attn - want) <= 1e-12 * want, "chunk attention %g, expected %g", attn, want);
    pkv_engine_free(&eng);
    pkv_calib_free(&cal);
    pkv_config_free(&cfg);
}

/* Admission by priority: the first waiting request of the highest priority, when
 * its pages fit, and nobody overtakes it; equal priorities are FCFS. */
static void priority_admits_the_first_of_the_highest(void) {
    const pkv_admission_policy *pp = pkv_admission_get(2);
    CHECK(pp && !strcmp(pp->name, "priority"), "the priority policy");
    pkv_admission_view v = {
        .n_waiting = 4, .free_pages = 10, .pages_needed = pages_of, .priority = priority_of};
    CHECK(pp->pick(&v) == 1, "picked %lld, not the first of priority 1", (long long)pp->pick(&v));
    v.free_pages = 8;
    CHECK(pp->pick(&v) == -1, "a lower priority overtook a waiting one");
    v.priority = flat;
    CHECK(pp->pick(&v) == 0, "equal priorities are not FCFS");
}

static int64_t tokens_of(const void *ctx, size_t i) {
    return 1000 + 500 * (int64_t)i;
}

/* SGLang's admission: the head, when its pages fit and its prompt and output are within
 * the tokens left after the active requests' expected output; nobody overtakes it. */
static void new_token_ratio_admits_the_head_within_its_budget(void) {
    const pkv_admission_policy *pp = pkv_admission_get(PKV_ADMIT_NEW_TOKEN_RATIO);
    CHECK(pp && !strcmp(pp->name, "new_token_ratio"), "the new_token_ratio policy");
    pkv_admission_view v = {.n_waiting = 4,
                            .free_pages = 10,
                            .pages_needed = pages_of,
                            .priority = flat,
                            .budget_tokens = 1000,
                            .tokens_needed = tokens_of};
    CHECK(pp->pick(&v) == 0, "the head's 1000 tokens within a budget of 1000 refused");
    v.budget_tokens = 999;
    CHECK(pp->pick(&v) == -1, "the head admitted past its budget, or overtaken");
    v.budget_tokens = 1e9, v.free_pages = 4;
    CHECK(pp->pick(&v) == -1, "the head admitted without its pages");
}

/* End to end, on a pool too small for every request's whole output: FCFS on free pages
 * admits what fits now and preempts as outputs grow; the new-token ratio reserves part of
 * them and preempts less, its ratio rising after each preemption. */
static void new_token_ratio_preempts_less_than_fcfs(void) {
    char out[] = "/tmp/pkv_sched_XXXXXX";
    test_temp_file(out);
    uint64_t preempted[2] = {0};
    for (int ratio = 0; ratio < 2; ratio++) {
        pkv_summary sum;
        pkv_err e;
        CHECK(test_run_json(&sum, NULL, &e,
                            "{\"model\": \"llama-3.1-8b\", \"workload\": {\"arrival\": "
                            "{\"process\": \"poisson\", \"rate\": 50}, \"prompt\": {\"dist\": "
                            "\"uniform\", \"min\": 100, \"max\": 600}, \"decode\": {\"dist\": "
                            "\"uniform\", \"min\": 200, \"max\": 1200}, \"num_requests\": 200}, "
                            "\"serving\": {\"max_active\": 256, \"kv_pages\": 1500, \"admission\": "
                            "\"%s\"}, \"route\": {\"calibration\": \"%s\"}, \"run\": "
                            "{\"output\": \"%s\"}}",
                            ratio ? "new_token_ratio" : "fcfs", TEST_CALIBRATION, out) == 0,
              "run: %s", e.msg);
        CHECK(sum.finished == 200, "%llu of 200 finished", (unsigned long long)sum.finished);
        preempted[ratio] = sum.preemptions;
    }
    CHECK(preempted[0] > 0 && preempted[1] < preempted[0] / 2,
          "preemptions: fcfs %llu, new_token_ratio %llu", (unsigned long long)preempted[0],
          (unsigned long long)preempted[1]);
    printf("admission: %llu preemptions under fcfs, %llu under the new-token ratio\n",
           (unsigned long long)preempted[0], (unsigned long long)preempted[1]);
    remove(out);
}

/* End to end: a class of priority 1 and its SLOs ahead of a batch class: classes
 * drawn by their shares, the first one's TTFT better under priority than FCFS. */
static void a_priority_class_meets_its_slo_better(void) {
    char out[] = "/tmp/pkv_sched_XXXXXX";
    test_temp_file(out);
    double attain[2];
    for (int prio = 0; prio < 2; prio++) {
        pkv_summary sum;
        pkv_err e;
        CHECK(test_run_json(&sum, NULL, &e,
                            "{\"model\": \"llama-3.1-8b\", \"workload\": {\"arrival\": "
                            "{\"process\": \"poisson\", \"rate\": 8}, \"prompt\": {\"dist\": "
                            "\"uniform\", \"min\": 500, \"max\": 8000}, \"decode\": {\"dist\": "
                            "\"uniform\", \"min\": 50, \"max\": 300}, \"num_requests\": 300, "
                            "\"max_context\": 8448, \"classes\": [{\"name\": \"chat\", "
                            "\"share\": 0.3, \"priority\": 1, \"ttft_ms\": 1000}, {\"name\": "
                            "\"batch\", \"share\": 0.7}]}, \"serving\": {\"max_active\": 16, "
                            "\"kv_pages\": 20000, \"scheduler\": \"chunked\", \"admission\": "
                            "\"%s\"}, \"route\": {\"calibration\": \"%s\"}, \"run\": "
                            "{\"output\": \"%s\"}}",
                            prio ? "priority" : "fcfs", TEST_CALIBRATION, out) == 0,
              "classes run: %s", e.msg);
        CHECK(sum.n_classes == 2 && sum.class_finished[0] + sum.class_finished[1] == 300 &&
                  sum.class_finished[0] > 60 && sum.class_finished[0] < 120,
              "classes drawn: %llu and %llu", (unsigned long long)sum.class_finished[0],
              (unsigned long long)sum.class_finished[1]);
        attain[prio] = (double)sum.class_good[0] / (double)sum.class_finished[0];
    }
    printf("classes: the chat class within its TTFT SLO %.2f under priority, %.2f under "
           "FCFS\n",
           attain[1], attain[0]);
    CHECK(attain[1] > attain[0] + 0.2,
          "the chat class's TTFT SLO attainment: %.2f under priority, %.2f under FCFS", attain[1],
          attain[0]);
    unlink(out);
}

/* A closed loop in lockstep (fixed decode lengths: four requests finish at each
 * instant): every successor keeps its own draw, so the prompts follow the cycle
 * of draws in arrival order (a queued draw shared by the finishes of one instant
 * had duplicated one and lost the others). In lockstep every TTFT is the same; a start
 * jitter breaks the lockstep up. */
static void closed_loop_successors_keep_their_draws(void) {
    char out[] = "/tmp/pkv_sched_XXXXXX";
    test_temp_file(out);
    pkv_summary sum;
    pkv_err e;
    CHECK(test_run_json(&sum, NULL, &e,
                        "{\"workload\": {\"arrival\": {\"process\": \"closed\", "
                        "\"concurrency\": 4}, \"prompt\": {\"dist\": \"cycle\", \"values\": "
                        "[100, 200, 300, 400, 500, 600, 700]}, \"decode\": {\"dist\": "
                        "\"fixed\", \"value\": 8}, \"num_requests\": 40}, \"serving\": "
                        "{\"max_active\": 4, \"kv_pages\": 4000}, \"route\": "
                        "{\"calibration\": \"%s\"}, \"run\": {\"backend\": \"model\", "
                        "\"record\": \"full\", \"output\": \"%s\"}}",
                        TEST_CALIBRATION, out) == 0,
          "closed loop: %s", e.msg);
    pkv_request_rec *rq = NULL;
    size_t n = 0;
    CHECK(pkv_h5_read_requests(out, &rq, &n, &e) == 0 && n == 40, "closed loop: %zu", n);
    int off = 0;
    for (size_t i = 0; i < n; i++) off += rq[i].prompt_len != (int32_t)(100 * (rq[i].id % 7 + 1));
    CHECK(off == 0, "closed loop: %d of %zu requests' prompts are not their draw's", off, n);
    free(rq);
    /* In lockstep every TTFT is the same; a start jitter breaks the lockstep up. */
    const double lock = sum.ttft_p99 - sum.ttft_p50;
    CHECK(test_run_json(&sum, NULL, &e,
                        "{\"workload\": {\"arrival\": {\"process\": \"closed\", "
                        "\"concurrency\": 4, \"start_jitter_s\": 0.05}, \"prompt\": "
                        "{\"dist\": \"fixed\", \"value\": 2000}, \"decode\": {\"dist\": "
                        "\"fixed\", \"value\": 8}, \"num_requests\": 40}, \"serving\": "
                        "{\"max_active\": 4, \"kv_pages\": 4000}, \"route\": "
                        "{\"calibration\": \"%s\"}, \"run\": {\"backend\": \"model\", "
                        "\"record\": \"full\", \"output\": \"%s\"}}",
                        TEST_CALIBRATION, out) == 0,
          "closed loop with a jitter: %s", e.msg);
    rq = NULL;
    CHECK(pkv_h5_read_requests(out, &rq, &n, &e) == 0 && n == 40, "jitter: %zu", n);
    int early = 0; /* of the first four, those that arrived inside the jitter, apart */
    for (size_t i = 0; i < n; i++)
        early += rq[i].id < 4 && rq[i].t_arrival > 0 && rq[i].t_arrival < 0.05;
    CHECK(early == 4 && sum.finished == 40 && sum.ttft_p99 > sum.ttft_p50,
          "jitter: %d of the first four inside it, TTFT p50 %g p99 %g (lockstep spread %g)", early,
          sum.ttft_p50, sum.ttft_p99, lock);
    free(rq);
    unlink(out);
}

/* Multi-turn sessions with prefix caching and a pool that never evicts: a turn that
 * arrives after its session's last turn was prefilled finds at least that prompt's
 * full blocks cached, within 1% of what a cache that never evicts would (the summary's
 * counterfactual); without caching nothing is found. A pool of 1,500 pages evicts:
 * the counterfactual finds more than the cache. */
static void sessions_find_their_history_cached(void) {
    char out[] = "/tmp/pkv_sched_XXXXXX";
    test_temp_file(out);
    for (int caching = 0; caching < 3; caching++) {
        pkv_summary sum;
        pkv_err e;
        CHECK(test_run_json(&sum, NULL, &e,
                            "{\"model\": \"llama-3.1-8b\", \"workload\": {\"arrival\": "
                            "{\"process\": \"poisson\", \"rate\": 1}, \"turns\": {\"dist\": "
                            "\"uniform\", \"min\": 1, \"max\": 6}, \"session_think_s\": 4, "
                            "\"prompt\": {\"dist\": \"uniform\", \"min\": 50, \"max\": 1500}, "
                            "\"decode\": {\"dist\": \"uniform\", \"min\": 10, \"max\": 300}, "
                            "\"num_requests\": 300, \"max_context\": 8192}, \"serving\": "
                            "{\"max_active\": 16, \"kv_pages\": %d, \"scheduler\": "
                            "\"chunked\", \"token_budget\": 1024, \"prefix_caching\": %s, "
                            "\"prefix_block_tokens\": 64}, \"route\": {\"calibration\": "
                            "\"%s\"}, \"run\": {\"backend\": \"model\", \"record\": "
                            "\"full\", \"output\": \"%s\"}}",
                            caching == 2 ? 1500 : 200000, caching ? "true" : "false",
                            TEST_CALIBRATION, out) == 0,
              "sessions: %s", e.msg);
        if (caching == 2) {
            printf("sessions, 1500 pages: %llu tokens found cached, %llu by a cache that never "
                   "evicts (%llu evictions)\n",
                   (unsigned long long)sum.prefix_hit_tokens,
                   (unsigned long long)sum.prefix_unbounded_hit_tokens,
                   (unsigned long long)sum.prefix_evictions);
            CHECK(sum.prefix_evictions > 0 &&
                      sum.prefix_unbounded_hit_tokens > sum.prefix_hit_tokens * 11 / 10,
                  "sessions, 1500 pages: %llu hit tokens, %llu never evicting, %llu evictions",
                  (unsigned long long)sum.prefix_hit_tokens,
                  (unsigned long long)sum.prefix_unbounded_hit_tokens,
                  (unsigned long long)sum.prefix_evictions);
            continue;
        }
        pkv_request_rec *rq = NULL;
        size_t n = 0;
        CHECK(pkv_h5_read_requests(out, &rq, &n, &e) == 0 && n == 300, "sessions: %zu requests", n);
        uint64_t bound = 0;
        int later = 0;
        for (size_t i = 0; i < n; i++) /* the same session's last turn before it */
            for (size_t j = i; rq[i].turn > 0 && j-- > 0;)
                if (rq[j].session == rq[i].session) {
                    if (rq[i].t_arrival > rq[j].t_first_token)
                        bound += (uint64_t)(rq[j].prompt_len / 64 * 64), later++;
                    break;
                }
        free(rq);
        CHECK(later > 50 && sum.prefix_evictions == 0, "sessions: %d later turns, %llu evictions",
              later, (unsigned long long)sum.prefix_evictions);
        if (caching)
            printf("sessions: %d later turns, %llu tokens found cached, at least %llu expected\n",
                   later, (unsigned long long)sum.prefix_hit_tokens, (unsigned long long)bound);
        if (caching)
            CHECK(sum.prefix_hit_tokens >= bound && bound > 0 &&
                      sum.prefix_unbounded_hit_tokens >= sum.prefix_hit_tokens &&
                      sum.prefix_unbounded_hit_tokens <= sum.prefix_hit_tokens * 101 / 100,
                  "sessions: %llu tokens found cached (%llu never evicting), at least %llu "
                  "expected",
                  (unsigned long long)sum.prefix_hit_tokens,
                  (unsigned long long)sum.prefix_unbounded_hit_tokens, (unsigned long long)bound);
        else
            CHECK(sum.prefix_hit_tokens == 0, "sessions: hits without caching");
    }
    unlink(out);
}

static const pkv_test_case cases[] = {
    PKV_CASE(random_runs_keep_the_scheduler_invariants),
    PKV_CASE(mixed_step_prediction_sums_its_parts),
    PKV_CASE(priority_admits_the_first_of_the_highest),
    PKV_CASE(new_token_ratio_admits_the_head_within_its_budget),
    PKV_CASE(new_token_ratio_preempts_less_than_fcfs),
    PKV_CASE(a_priority_class_meets_its_slo_better),
    PKV_CASE(closed_loop_successors_keep_their_draws),
    PKV_CASE(sessions_find_their_history_cached),
};
PKV_TEST_MAIN(cases)
