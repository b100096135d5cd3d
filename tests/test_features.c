/* Every pair of serving features (preemption by swap, prefix caching, chunked prefill,
 * SLO classes with priority admission, multi-turn sessions), and all five together, on
 * small KV and swap pools with random loads: every run either finishes every request
 * that arrived (exit 0, nothing left in the system) or stops with an error that says
 * why the run cannot go on and what to change. Never a run that ends with requests
 * unfinished and no error, never a hang (the run's own bound is not set). */
#include "check.h"
#include "testrun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

enum { SWAP = 1, CACHE = 2, CHUNKED = 4, CLASSES = 8, TURNS = 16, N_FEATURES = 5 };
static const char *const feature_names[N_FEATURES] = {"swap", "caching", "chunked", "classes",
                                                      "turns"};

static const char *EXP =
    "{\"name\": \"features\", \"model\": {\"layers\": 2, \"hidden\": 512, \"hq\": 8, \"hkv\": 2,"
    " \"head_dim\": 128, \"intermediate\": 1024, \"vocab\": 1000},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": %g},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 1, \"max\": %d},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": %d},"
    "   \"num_requests\": %d, \"max_context\": 8000%s%s%s},"
    " \"serving\": {\"max_active\": %d, \"kv_pages\": %d, \"admission\": \"%s\","
    "   \"scheduler\": \"%s\", \"token_budget\": 512,"
    "   \"prefix_caching\": %s, \"preemption\": \"%s\", \"swap_pages\": %d},"
    " \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"%s\"},"
    " \"run\": {\"seed\": %d, \"output\": \"%s\"}}";

static const char *CLASSES_JSON =
    ", \"classes\": [{\"name\": \"chat\", \"share\": 0.3, \"priority\": 1, \"ttft_ms\": 1000},"
    " {\"name\": \"batch\", \"share\": 0.7, \"ttft_ms\": 20000}]";
static const char *TURNS_JSON =
    ", \"turns\": {\"dist\": \"uniform\", \"min\": 2, \"max\": 4}, \"session_think_s\": 0.5";
static const char *SHARED_JSON =
    ", \"shared_prefix_tokens\": 1000, \"shared_prefix_share\": 0.6, \"shared_prefix_groups\": 2";

/* Every pair of features and all of them together, on pools small enough to strand some
 * runs: each run finishes every request, or ends with an error naming the cause and
 * serving.kv_pages; some finish. */
static void feature_pairs_finish_or_name_the_pool(void) {
    char out[] = "/tmp/pkv_features_XXXXXX";
    test_temp_file(out);
    gsl_rng *g = test_rng(20261203);
    int combos[N_FEATURES * (N_FEATURES - 1) / 2 + 1], n_combos = 0;
    for (int a = 0; a < N_FEATURES; a++)
        for (int b = a + 1; b < N_FEATURES; b++) combos[n_combos++] = 1 << a | 1 << b;
    combos[n_combos++] = (1 << N_FEATURES) - 1;
    int finished_runs = 0, refused_runs = 0;
    for (int c = 0; c < n_combos; c++) {
        const int f = combos[c];
        char what[96] = "";
        for (int k = 0; k < N_FEATURES; k++)
            if (f & 1 << k)
                snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", *what ? "+" : "",
                         feature_names[k]);
        for (int trial = 0; trial < 3; trial++) {
            /* Pools of 220 to 600 pages of 16 tokens against prompts of up to 3000
             * tokens and answers of up to 500; a swap pool of 10 or 60 pages. */
            static const int pools[3] = {220, 300, 600};
            const int pages = pools[trial], max_active = 2 + (int)gsl_rng_uniform_int(g, 14);
            const int n_req = 20 + (int)gsl_rng_uniform_int(g, 20);
            const int swap_pool = gsl_rng_uniform_int(g, 2) ? 10 : 60;
            const double rate = 2 + gsl_rng_uniform(g) * 200;
            const int seed = (int)gsl_rng_uniform_int(g, 1000000);
            pkv_summary sum;
            pkv_err e = {0};
            int rc = test_run_json(
                &sum, NULL, &e, EXP, rate, 3000, 500, n_req, f & CLASSES ? CLASSES_JSON : "",
                f & TURNS ? TURNS_JSON : "", f & CACHE ? SHARED_JSON : "", max_active, pages,
                f & CLASSES ? "priority" : "fcfs", f & CHUNKED ? "chunked" : "prefill_first",
                f & CACHE ? "true" : "false", f & SWAP ? "swap" : "recompute", swap_pool,
                TEST_CALIBRATION, seed, out);
            if (rc == 0) {
                finished_runs++;
                CHECK(sum.finished == sum.arrived && sum.arrived > 0 && !sum.interrupted,
                      "%s, pool %d, seed %d: exit 0 with %llu of %llu requests finished", what,
                      pages, seed, (unsigned long long)sum.finished,
                      (unsigned long long)sum.arrived);
            } else {
                refused_runs++;
                /* An error that names the cause and the settings to change. */
                CHECK((strstr(e.msg, "cannot finish") || strstr(e.msg, "cannot make progress")) &&
                          strstr(e.msg, "serving.kv_pages"),
                      "%s, pool %d, seed %d: %s", what, pages, seed, e.msg);
            }
            if (getenv("FEATURES_VERBOSE"))
                printf("%s pool %d: %s\n", what, pages, rc ? e.msg : "finished");
        }
    }
    /* The trials reach both outcomes: the pools are small enough to strand some runs,
     * large enough to finish others. */
    CHECK(finished_runs > 0, "no run finished: the pools are too small to test anything");
    printf("%d runs finished, %d stopped with an error\n", finished_runs, refused_runs);
    unlink(out);
    gsl_rng_free(g);
}

static const pkv_test_case cases[] = {
    PKV_CASE(feature_pairs_finish_or_name_the_pool),
};
PKV_TEST_MAIN(cases)
