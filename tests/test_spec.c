/* Speculative decoding (serving.speculative): with acceptance 1 every proposed token is
 * kept and the steps fall k + 1 fold; with 0 a step yields one token a row; in between
 * the kept share is the truncated geometric law's; the pages a request holds never pass
 * its prompt and output; the verify costs k + 1 tokens a row and the proposer's passes; the
 * cpu backend runs the proposer. */
#include "check.h"
#include "h5rec.h"
#include "model.h"
#include "testrun.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EXP                                                                                        \
    "{\"model\": \"llama-3.1-8b\", \"workload\": {\"arrival\": {\"process\": \"closed\", "         \
    "\"concurrency\": %d}, \"prompt\": {\"dist\": \"fixed\", \"value\": 100}, \"decode\": "        \
    "{\"dist\": \"fixed\", \"value\": %d}, \"num_requests\": %d}, \"serving\": {\"max_active\": "  \
    "8, \"kv_pages\": %d, \"speculative\": {\"method\": \"%s\", \"tokens\": %d, \"acceptance\": "  \
    "%g, \"acceptance_sd\": %g}}, \"route\": {\"calibration\": \"%s\"}, \"run\": {\"backend\": "   \
    "\"model\", \"output\": "                                                                      \
    "\"%s\"}}"
#define CAL PKV_SOURCE_DIR "/experiments/calibration/h200.json"

/* Each case's runs write a file of their own (ctest runs the cases side by side). */
static int run_sd(pkv_summary *s, int conc, int decode, int n, int pages, const char *method, int k,
                  double acc, double sd) {
    pkv_err e;
    char out[64];
    snprintf(out, sizeof out, "test_spec_%ld.h5", (long)getpid());
    int rc = test_run_json(s, NULL, &e, EXP, conc, decode, n, pages, method, k, acc, sd, CAL, out);
    CHECK(rc == 0, "%s k %d acceptance %g: %s", method, k, acc, e.msg);
    remove(out);
    return rc;
}

static int run(pkv_summary *s, int conc, int decode, int n, int pages, const char *method, int k,
               double acc) {
    return run_sd(s, conc, decode, n, pages, method, k, acc, 0);
}

/* One request at a time: 1 token from its prefill, 200 from its steps (the last steps
 * propose only what the request may still keep: 2, 1, 0). With acceptance 1 the steps
 * fall k + 1 fold, with 0 a step yields one token; a verify with its proposals costs
 * more than a plain step, kept tokens bring the time per token below plain decoding's. */
static void acceptance_one_and_zero_bound_the_steps(void) {
    pkv_summary plain, all, none;
    if (run(&plain, 1, 201, 4, 4096, "none", 3, 0) || run(&all, 1, 201, 4, 4096, "draft", 3, 1) ||
        run(&none, 1, 201, 4, 4096, "eagle", 3, 0))
        return;
    CHECK(plain.steps == 4 * 200 && plain.spec_proposed == 0, "plain: %llu steps",
          (unsigned long long)plain.steps);
    CHECK(all.steps == 4 * 50, "acceptance 1: %llu steps, 4 x 200 / (3 + 1) wanted",
          (unsigned long long)all.steps);
    CHECK(all.spec_accepted == all.spec_proposed && all.decode_tokens == 4 * 200,
          "acceptance 1: %llu of %llu kept, %llu tokens", (unsigned long long)all.spec_accepted,
          (unsigned long long)all.spec_proposed, (unsigned long long)all.decode_tokens);
    CHECK(none.steps == 4 * 200 && none.spec_accepted == 0 &&
              none.spec_proposed == 4 * (197 * 3 + 2 + 1),
          "acceptance 0: %llu steps, %llu of %llu kept", (unsigned long long)none.steps,
          (unsigned long long)none.spec_accepted, (unsigned long long)none.spec_proposed);
    CHECK(none.finished == 4 && all.finished == 4, "finished %llu, %llu",
          (unsigned long long)none.finished, (unsigned long long)all.finished);
    CHECK(none.tpot.mean > plain.tpot.mean && all.tpot.mean < plain.tpot.mean / 2,
          "TPOT: plain %g, acceptance 0 %g, 1 %g", plain.tpot.mean, none.tpot.mean, all.tpot.mean);
}

/* Acceptance 0.6, k 3: each kept with 0.6 after a kept one, E[kept] = 0.6 + 0.36 + 0.216
 * of 3 proposed; over thousands of proposals, within 5 standard deviations. */
static void kept_share_is_the_truncated_geometric_law(void) {
    pkv_summary half;
    if (run(&half, 8, 400, 64, 4096, "ngram", 3, 0.6) == 0) {
        const double p = 0.6, m = p + p * p + p * p * p,
                     m2 = p * (1 - p) * 1 + p * p * (1 - p) * 4 + p * p * p * 9, v = m2 - m * m;
        const double rows = half.spec_proposed / 3.0, got = half.spec_accepted / rows;
        CHECK(fabs(got - m) < 5 * sqrt(v / rows), "kept a row-step %g, expected %g (%g rows)", got,
              m, rows);
        CHECK(half.finished == 64, "finished %llu", (unsigned long long)half.finished);
    }
}

/* Each request its own chance (a beta law, mean 0.6, sd 0.3): requests yield 99 tokens
 * in 99 / (1 + f(p)) steps, f(p) = p + p^2 + p^3, so the kept tokens a row-step are
 * 1 / E[1 / (1 + f(p))] - 1 (by numerical integration over the law), within 10% over 256
 * requests; and the requests' TPOTs spread where they do not with one chance. */
static void per_request_acceptance_spreads_tpot(void) {
    pkv_summary spread, same;
    if (run_sd(&spread, 8, 100, 256, 4096, "ngram", 3, 0.6, 0.3) == 0 &&
        run_sd(&same, 8, 100, 256, 4096, "ngram", 3, 0.6, 0) == 0) {
        const double m = 0.6, nu = m * (1 - m) / 0.09 - 1;
        double h = 0, w = 0;
        for (int i = 0; i < 10000; i++) {
            const double p = (i + 0.5) / 10000, d = gsl_ran_beta_pdf(p, m * nu, (1 - m) * nu);
            h += d / (1 + p + p * p + p * p * p), w += d;
        }
        const double want = w / h - 1, got = spread.spec_accepted / (spread.spec_proposed / 3.0);
        CHECK(fabs(got / want - 1) < 0.1, "kept a row-step %g with a spread of 0.3, %g expected",
              got, want);
        CHECK(spread.tpot_p90 / spread.tpot_p50 > 1.3 && same.tpot_p90 / same.tpot_p50 < 1.15,
              "TPOT p90 / p50: %g with a spread, %g without", spread.tpot_p90 / spread.tpot_p50,
              same.tpot_p90 / same.tpot_p50);
    }
}

/* A pool too small for every request's lookahead at once: preemption keeps the run whole
 * (each request's pages: at most its prompt and output). */
static void tight_pool_preempts_and_finishes(void) {
    pkv_summary tight;
    if (run(&tight, 8, 400, 16, 8 * 32, "draft", 7, 0.9) == 0)
        CHECK(tight.finished == 16, "tight pool: %llu finished",
              (unsigned long long)tight.finished);
}

/* The cpu backend runs the proposer for real (engine/proposer.c): a small served model
 * speculating with a smaller draft, or with EAGLE's head (its first layer), records each
 * verify step's proposer time (in its wall time); k passes take longer than one; n-gram
 * lookup has no model to run. */
#define SMALL                                                                                      \
    "{\"model\": {\"layers\": 2, \"hidden\": 256, \"hq\": 4, \"hkv\": 2, \"head_dim\": 64, "       \
    "\"intermediate\": 512, \"vocab\": 1000}, \"workload\": {\"arrival\": {\"process\": "          \
    "\"closed\", \"concurrency\": 2}, \"prompt\": {\"dist\": \"fixed\", \"value\": 24}, "          \
    "\"decode\": {\"dist\": \"fixed\", \"value\": 24}, \"num_requests\": 2}, \"serving\": "        \
    "{\"kv_pages\": 200, \"speculative\": {\"method\": \"%s\", \"tokens\": %d, \"draft_model\": "  \
    "\"%s\"}}, \"run\": {\"backend\": \"cpu\", \"output\": \"%s\"}}"

/* The median proposer time of the run's verify steps (a loaded machine's outliers aside;
 * NaN: a step without one, or one past its step's wall time; -1: the run failed). */
static double median_draft(const char *method, int k, const char *draft) {
    char out[] = "/tmp/test_spec_draft_XXXXXX";
    test_temp_file(out);
    pkv_err e;
    pkv_step_rec *steps = NULL;
    size_t n = 0, m = 0;
    int rc = test_run_json(NULL, NULL, &e, SMALL, method, k, draft, out);
    if (!rc) rc = pkv_h5_read_steps(out, &steps, &n, &e);
    CHECK(rc == 0, "%s k %d on the cpu backend: %s", method, k, e.msg);
    double *t = rc ? NULL : malloc(sizeof(double) * (n ? n : 1)), median = NAN;
    bool within = t != NULL;
    for (size_t i = 0; t && i < n; i++) {
        if (!steps[i].rows) continue;
        within &= steps[i].t_draft <= steps[i].t_wall; /* false for NaN */
        t[m++] = steps[i].t_draft;
    }
    if (within && m) {
        gsl_sort(t, 1, m);
        median = gsl_stats_median_from_sorted_data(t, 1, m);
    }
    free(t);
    free(steps);
    remove(out);
    return rc ? -1 : median;
}

static void cpu_backend_runs_the_proposer(void) {
    char draft[] = "/tmp/test_spec_model_XXXXXX";
    test_temp_file(draft);
    FILE *f = fopen(draft, "w");
    CHECK(f != NULL, "cannot write %s", draft);
    if (!f) return;
    fputs("{\"layers\": 1, \"hidden\": 128, \"hq\": 2, \"hkv\": 1, \"head_dim\": 64, "
          "\"intermediate\": 256, \"vocab\": 1000}",
          f);
    fclose(f);
    const double one = median_draft("draft", 1, draft), four = median_draft("draft", 4, draft);
    const double eagle = median_draft("eagle", 3, draft), ngram = median_draft("ngram", 3, draft);
    remove(draft);
    printf("the proposer's median time a step: draft k 1 %.3g s, k 4 %.3g s; EAGLE k 3 %.3g s\n",
           one, four, eagle);
    CHECK(one > 0 && four > 1.5 * one,
          "the draft's passes: median %.3g s at k 1, %.3g s at k 4 (finite, within the step, "
          "more than 1.5x)",
          one, four);
    CHECK(eagle > 0, "EAGLE's head: median %.3g s a step (finite, within the step)", eagle);
    CHECK(isnan(ngram), "n-gram lookup runs no proposer: t_draft %g", ngram);
}

static const pkv_test_case cases[] = {
    PKV_CASE(acceptance_one_and_zero_bound_the_steps),
    PKV_CASE(kept_share_is_the_truncated_geometric_law),
    PKV_CASE(per_request_acceptance_spreads_tpot),
    PKV_CASE(tight_pool_preempts_and_finishes),
    PKV_CASE(cpu_backend_runs_the_proposer),
};
PKV_TEST_MAIN(cases)
