/* Latency distributions in bounded memory (analysis/summary.h): exact percentiles
 * while the values are kept, within the histogram's 0.05% once binned, the moments
 * exact either way; a summary of millions of finished requests keeps no per-request
 * array; summaries merged over processes equal one summary. Fresh random values each
 * run (the seed is printed). */
#include "check.h"
#include "testrun.h"
#include "floor.h"
#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted x, linear between ranks (vLLM's numpy default). */
static double quantile(const double *x, size_t n, double q) {
    double h = q * (double)(n - 1);
    size_t i = (size_t)floor(h);
    return i + 1 < n ? x[i] + (h - (double)i) * (x[i + 1] - x[i]) : x[n - 1];
}

/* n log-uniform values over 10 us .. 10 s (float-exact, as the store keeps them) into
 * a distribution keeping `keep`, against a direct computation. */
static void check_dist(gsl_rng *r, size_t n, size_t keep) {
    pkv_dist d = {.keep = keep};
    double *x = malloc(n * sizeof *x), sum = 0, sq = 0;
    int added = 1;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)pow(10, -5 + 6 * gsl_rng_uniform(r));
        added &= pkv_dist_add(&d, x[i]) == 0;
        sum += x[i];
    }
    CHECK(added, "a value was not added");
    CHECK(pkv_dist_add(&d, -1) == 0 && pkv_dist_add(&d, NAN) == 0 && d.n == n,
          "a negative or NaN latency is not counted (n %llu)", (unsigned long long)d.n);
    const int binned = n > keep;
    CHECK(binned ? d.v == NULL && d.hist != NULL : d.hist == NULL,
          "%zu values, keep %zu: values %s kept", n, keep, d.v ? "" : "not");
    const double mean = sum / n;
    for (size_t i = 0; i < n; i++) sq += (x[i] - mean) * (x[i] - mean);
    qsort(x, n, sizeof *x, cmp);
    const double pcts[4] = {50, 90, 99, 99.9};
    pkv_latency l;
    pkv_dist_stats(&d, pcts, 4, &l);
    CHECK(fabs(l.mean / mean - 1) < 1e-12 && fabs(l.std / sqrt(sq / n) - 1) < 1e-9,
          "moments: mean %.17g against %.17g, std %.17g against %.17g", l.mean, mean, l.std,
          sqrt(sq / n));
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        const double want = quantile(x, n, pcts[k] / 100), e = fabs(l.pct[k] / want - 1);
        if (e > worst) worst = e;
    }
    /* Exact: float rounding only; binned: half a bin (2^-11) and the gap to the next
     * rank. */
    CHECK(worst < (binned ? 6e-4 : 1e-6) && l.median == l.pct[0],
          "%zu values, keep %zu: percentiles off by %.3g", n, keep, worst);
    size_t unsorted = 0; /* the kept values sorted: the same values, in order */
    for (size_t i = 0; !binned && i < n; i++) unsorted += d.v[i] != (float)x[i];
    CHECK(unsorted == 0, "%zu values: %zu kept values out of their sorted place", n, unsorted);
    printf("%zu values, keep %zu (%s): percentiles within %.2g\n", n, keep,
           binned ? "binned" : "exact", worst);
    pkv_dist_free(&d);
    free(x);
}

/* The figures' table: single rows have unique names and read their own fields; every
 * row has a unit and a description; the sweep index carries some. */
static void figures_table_reads_its_fields(void) {
    pkv_summary s;
    memset(&s, 0, sizeof s);
    s.finished = 7, s.decode_tok_s = 2.5, s.interrupted = 1, s.e2el.median = 0.25;
    int index = 0;
    for (int i = 0; i < pkv_summary_n_figures; i++) {
        const pkv_summary_figure *f = &pkv_summary_figures[i];
        index += f->index;
        CHECK(f->unit && f->description && *f->description, "row %d (%s): unit and description", i,
              f->name);
        if (f->type > PKV_FIGURE_INT) continue;
        CHECK((*f->name && pkv_summary_figure_find(f->name) == f) || !strcmp(f->name, "completed"),
              "row %d: %s found by its name", i, f->name);
    }
    CHECK(index >= 20, "%d figures in the sweep index", index);
    const char *names[] = {"finished", "completed", "decode_tok_s", "interrupted", "median_e2el"};
    const double want[] = {7, 7, 2.5, 1, 0.25};
    for (int k = 0; k < 5; k++) {
        const pkv_summary_figure *f = pkv_summary_figure_find(names[k]);
        CHECK(f && pkv_summary_figure_value(&s, f) == want[k], "%s reads %g", names[k], want[k]);
    }
    CHECK(pkv_summary_figure_find("no_such_figure") == NULL, "an unknown name");
}

/* A summary split over three processes (fleet ranks) and merged (pkv_summary_pack and
 * _merge) against one summary of every request: the same counts and percentiles (the
 * same multiset of values, kept or binned), moments within rounding; bytes that are not
 * a summary's are refused. n requests, TTFT stores keeping `keep`. */
static void check_merge(gsl_rng *r, size_t n, size_t keep) {
    pkv_summary one, part[3];
    CHECK(pkv_summary_init(&one) == 0, "init");
    one.ttft_d.keep = one.tpot_d.keep = one.e2el_d.keep = keep;
    for (int k = 0; k < 3; k++) {
        CHECK(pkv_summary_init(&part[k]) == 0, "init");
        part[k].ttft_d.keep = part[k].tpot_d.keep = part[k].e2el_d.keep = keep;
    }
    double gap = 0, *gaps = malloc(n * sizeof *gaps), mean = 0, sq = 0;
    CHECK(gaps != NULL, "memory");
    for (size_t i = 0; gaps && i < n; i++) {
        pkv_request_rec q = {.state = i % 7 ? PKV_REQ_FINISHED : PKV_REQ_RUNNING,
                             .t_arrival = 0.01 * (double)i,
                             .prompt_len = 100,
                             .decode_len = 1 + (int32_t)gsl_rng_uniform_int(r, 50),
                             .generated = 3};
        q.t_first_token = q.t_arrival + 0.5 * gsl_rng_uniform(r);
        q.t_finish = q.t_first_token + 0.01 * gsl_rng_uniform(r) * q.decode_len;
        /* gaps in runs of four equal values, as a decode step's rows share theirs: a
         * part's last run is pending when it is packed */
        if (i % 4 == 0) gap = 1e-3 * (1 + gsl_rng_uniform(r));
        gaps[i] = gap;
        pkv_summary *p = &part[gsl_rng_uniform_int(r, 3)];
        CHECK(pkv_summary_add_request(&one, &q) == 0 && pkv_summary_add_request(p, &q) == 0, "add");
        pkv_summary_add_itl(&one, 0, 0, gap), pkv_summary_add_itl(p, 0, 0, gap);
        pkv_step_rec st = {.rows = 4, .t_sim = q.t_arrival, .route = 1};
        pkv_summary_add_step(&one, &st, 0.002), pkv_summary_add_step(p, &st, 0.002);
    }
    for (int k = 1; k < 3; k++) {
        void *buf;
        size_t len;
        CHECK(pkv_summary_pack(&part[k], &buf, &len) == 0, "pack");
        CHECK(pkv_summary_merge(&part[0], buf, len - 1) == -1, "a short summary was merged");
        CHECK(pkv_summary_merge(&part[0], buf, len) == 0, "merge");
        free(buf);
        pkv_summary_free(&part[k]);
    }
    pkv_summary *m = &part[0];
    CHECK(pkv_summary_finish(&one, 10) == 0 && pkv_summary_finish(m, 10) == 0, "finish");
    CHECK(m->arrived == one.arrived && m->finished == one.finished && m->good == one.good &&
              m->steps == one.steps && m->decode_tokens == one.decode_tokens &&
              m->route_steps[1] == one.route_steps[1] && m->ttft.n == one.ttft.n &&
              m->itl.n == one.itl.n && m->t_first_arrival == one.t_first_arrival &&
              m->t_last_finish == one.t_last_finish && m->t_measure_begin == one.t_measure_begin,
          "%zu requests: the merged counts differ", n);
    CHECK(m->ttft_p50 == one.ttft_p50 && m->ttft_p99 == one.ttft_p99 &&
              m->tpot_p90 == one.tpot_p90 && m->e2el.pct[2] == one.e2el.pct[2] &&
              m->itl.median == one.itl.median && m->itl.pct[2] == one.itl.pct[2],
          "%zu requests (keep %zu): merged percentiles differ (TTFT p50 %.9g against %.9g)", n,
          keep, m->ttft_p50, one.ttft_p50);
    CHECK(fabs(m->ttft.mean / one.ttft.mean - 1) < 1e-12 &&
              fabs(m->e2el.std / one.e2el.std - 1) < 1e-9 &&
              fabs(m->itl.mean / one.itl.mean - 1) < 1e-12 &&
              fabs(m->itl.std / one.itl.std - 1) < 1e-9 &&
              fabs(m->decode_tok_s / one.decode_tok_s - 1) < 1e-12,
          "merged moments differ: TTFT mean %.12g against %.12g", m->ttft.mean, one.ttft.mean);
    for (size_t i = 0; gaps && i < n; i++) mean += gaps[i] / (double)n;
    for (size_t i = 0; gaps && i < n; i++) sq += (gaps[i] - mean) * (gaps[i] - mean);
    CHECK(fabs(one.itl.mean / mean - 1) < 1e-12 && fabs(one.itl.std / sqrt(sq / n) - 1) < 1e-9,
          "ITL moments, equal gaps weighed in runs: mean %.15g against %.15g, std %.15g against "
          "%.15g",
          one.itl.mean, mean, one.itl.std, sqrt(sq / n));
    free(gaps);
}

/* A random stream seeded by the time, printed so that a failure can be replayed. */
static gsl_rng *fresh_rng(void) {
    unsigned long seed = (unsigned long)time(NULL);
    printf("seed %lu\n", seed);
    gsl_rng *r = test_rng(seed);
    return r;
}

/* Quantiles of values kept (under the bound and at it) are exact, of binned values
 * within half a bin. */
static void quantiles_exact_kept_binned_close(void) {
    gsl_rng *r = fresh_rng();
    check_dist(r, 5000, PKV_LATENCY_KEEP);
    check_dist(r, 200000, 1000);
    check_dist(r, 1000, 1000); /* at the bound: still exact */
    /* zeros (and -0), ties, a float subnormal and the largest values among random ones:
     * kept in ascending order, every value once */
    const double odd[] = {0.5, 0.0, 1e30, -0.0, 0.5, 1e-40, 0.5, 3.0, 0.0, 1e-7};
    pkv_dist d = {.keep = 100};
    double want[60];
    int n = 0;
    for (; n < 10; n++) pkv_dist_add(&d, want[n] = (float)odd[n]);
    for (; n < 60; n++) pkv_dist_add(&d, want[n] = (float)gsl_rng_uniform(r));
    qsort(want, (size_t)n, sizeof *want, cmp);
    pkv_latency l;
    const double p50 = 50;
    pkv_dist_stats(&d, &p50, 1, &l);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += d.v[i] != (float)want[i];
    CHECK(bad == 0 && d.v[0] == 0 && d.v[n - 1] == 1e30f,
          "zeros, ties and extremes: %d kept values out of place", bad);
    pkv_dist_free(&d);
    gsl_rng_free(r);
}

static void empty_distribution_is_nan(void) {
    pkv_dist empty = {.keep = 10};
    pkv_latency l;
    const double p50 = 50;
    pkv_dist_stats(&empty, &p50, 1, &l);
    CHECK(isnan(l.mean) && isnan(l.pct[0]) && isnan(pkv_dist_quantile(&empty, 0.5)),
          "an empty distribution's figures are NaN");
}

/* A summary of 3M finished requests: the per-request stores go to histograms, and the
 * medians stay where they are. */
static void millions_of_requests_go_to_histograms(void) {
    gsl_rng *r = fresh_rng();
    pkv_summary s;
    CHECK(pkv_summary_init(&s) == 0, "init");
    const uint64_t n = 3 * (uint64_t)PKV_LATENCY_KEEP;
    int added = 1;
    for (uint64_t i = 0; i < n; i++) {
        pkv_request_rec q = {.state = PKV_REQ_FINISHED,
                             .t_arrival = (double)i,
                             .t_first_token = (double)i + 0.1 + 0.1 * gsl_rng_uniform(r),
                             .decode_len = 11,
                             .generated = 11};
        q.t_finish = q.t_first_token + 10 * 0.02;
        added &= pkv_summary_add_request(&s, &q) == 0;
    }
    CHECK(added, "a request was not added");
    CHECK(s.ttft_d.v == NULL && s.tpot_d.v == NULL && s.e2el_d.v == NULL,
          "%llu finished requests: a per-request array is kept", (unsigned long long)n);
    CHECK(pkv_summary_finish(&s, (double)n) == 0, "finish");
    CHECK(fabs(s.ttft.median / 0.15 - 1) < 2e-3 && fabs(s.tpot.median / 0.02 - 1) < 1e-3 &&
              s.ttft.n == n,
          "TTFT median %.6g (0.15), TPOT median %.6g (0.02)", s.ttft.median, s.tpot.median);
    gsl_rng_free(r);
}

/* Summaries merged (over ranks) give the figures of one summary of every request. */
static void merged_summaries_equal_one(void) {
    gsl_rng *r = fresh_rng();
    check_merge(r, 3000, PKV_LATENCY_KEEP); /* values kept */
    check_merge(r, 3000, 500);              /* each part's under the bound, the whole over */
    check_merge(r, 3000, 100);              /* every part binned */
    gsl_rng_free(r);
}

/* The TTFT floor (analysis/floor.h): known answers by hand (three prompts at once served
 * shortest first; a short one arriving during a long one preempts it), then on fresh
 * random arrivals and works no worse than first come first served, each order statistic
 * of FCFS's flows at or above the floor's bound. */
static void the_floor_is_shortest_remaining_first(void) {
    double mean, sorted[3];
    const double at_once[3] = {0, 0, 0}, works[3] = {3, 1, 2};
    CHECK(pkv_floor_flows(at_once, works, 3, &mean, sorted) == 0 && fabs(mean - 10.0 / 3) < 1e-12 &&
              sorted[0] == 1 && sorted[1] == 3 && sorted[2] == 6,
          "at once: mean %g (10/3), bounds %g %g %g (1 3 6)", mean, sorted[0], sorted[1],
          sorted[2]);
    const double staggered[2] = {0, 1}, works2[2] = {4, 1};
    CHECK(pkv_floor_flows(staggered, works2, 2, &mean, sorted) == 0 && fabs(mean - 3) < 1e-12 &&
              sorted[0] == 1 && sorted[1] == 4,
          "preempted: mean %g (3: flows 5 and 1), bounds %g %g (1 4)", mean, sorted[0], sorted[1]);
    gsl_rng *r = fresh_rng();
    enum { N = 400 };
    double a[N], w[N], fcfs[N], bound[N];
    int below = 0;
    for (int trial = 0; trial < 20; trial++) {
        const int burst = trial % 4 == 0; /* every fourth: all at once */
        for (int i = 0; i < N; i++)
            a[i] = burst ? 5 : (i ? a[i - 1] : 0) + gsl_ran_exponential(r, 1.0),
            w[i] = gsl_ran_exponential(r, 0.9);
        double t = 0, sum = 0; /* first come first served (a[] ascends) */
        for (int i = 0; i < N; i++) t = fmax(t, a[i]) + w[i], fcfs[i] = t - a[i], sum += fcfs[i];
        CHECK(pkv_floor_flows(a, w, N, &mean, bound) == 0, "floor");
        qsort(fcfs, N, sizeof *fcfs, cmp);
        below += !(mean <= sum / N + 1e-9);
        for (int i = 0; i < N; i++) below += !(bound[i] <= fcfs[i] + 1e-9);
    }
    CHECK(below == 0, "%d times FCFS's flows lay below the floor", below);
    gsl_rng_free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(the_floor_is_shortest_remaining_first),
    PKV_CASE(quantiles_exact_kept_binned_close),
    PKV_CASE(empty_distribution_is_nan),
    PKV_CASE(millions_of_requests_go_to_histograms),
    PKV_CASE(merged_summaries_equal_one),
    PKV_CASE(figures_table_reads_its_fields),
};
PKV_TEST_MAIN(cases)
