/* The oracle is an upper bound: on the model backend, over random batches, its step
 * time is never above any fixed route's on the same step; on the cpu backend (a
 * measuring one) it runs every candidate's whole step route.oracle_repeats times and
 * keeps the median, its route is the fastest of those medians, and its wall time is
 * that of one step, not of every run it made to compare. */
#include "check.h"
#include "engine.h"
#include "policy.h"
#include "testrun.h"

#include <math.h>
#include <gsl/gsl_rng.h>

enum { CAP = 8, MAX_LEN = 4096, PS = 16, STRIDE = MAX_LEN / PS };

static int init(pkv_engine *eng, pkv_calib *cal, const pkv_model *m, const char *policy,
                pkv_backend_kind kind, pkv_clock_source clock, int oracle_reps) {
    pkv_backend_spec bs = {.kind = kind, .kv_pages = CAP * STRIDE, .bt_stride = STRIDE, .seed = 3};
    const pkv_engine_opts o = {.policy = policy,
                               .bucket_mode = PKV_BUCKET_MODE_EXACT,
                               .cap_rows = CAP,
                               .clock = clock,
                               .oracle_reps = oracle_reps};
    pkv_err e;
    int rc = pkv_engine_init(eng, m, cal, &o, &bs, &e);
    if (rc) printf("engine %s: %s\n", policy, e.msg);
    return rc;
}

/* The study layer's shape, a block table of every page in order, rows marked dirty. */
static const pkv_model study = TEST_STUDY_LAYER(PS);
static int32_t bt[CAP * STRIDE], dirty[CAP], from[CAP];

/* A layer small enough for the cpu backend. */
static pkv_model small_layer(void) {
    pkv_model m = study;
    m.hq = 4, m.hkv = 2, m.head_dim = 16;
    return m;
}

/* Step `step` of the cpu cases: 1 + step % CAP rows of random lengths (into lens). */
static pkv_batch_view cpu_step(gsl_rng *r, int step, int32_t *lens) {
    const int32_t rows = 1 + step % CAP;
    for (int i = 0; i < rows; i++) lens[i] = 1 + (int32_t)gsl_rng_uniform_int(r, MAX_LEN);
    return (pkv_batch_view){rows, lens, bt, STRIDE, dirty, rows, from, NULL, 0};
}

static gsl_rng *setup(void) {
    for (int i = 0; i < CAP * STRIDE; i++) bt[i] = i;
    for (int i = 0; i < CAP; i++) dirty[i] = i, from[i] = 0;
    gsl_rng *r = test_rng(20261201);
    return r;
}

/* Model backend: the oracle against every fixed route on 200 random steps. */
static void never_slower_than_a_fixed_route(void) {
    gsl_rng *r = setup();
    pkv_calib cal;
    pkv_calib_defaults(&cal);
    pkv_err e;
    int32_t lens[CAP];
    pkv_engine oracle, fixed[PKV_ROUTE_COUNT];
    CHECK(init(&oracle, &cal, &study, "oracle", PKV_BACKEND_MODEL, PKV_CLOCK_PREDICTED, 0) == 0,
          "oracle");
    for (int k = 0; k < PKV_ROUTE_COUNT; k++)
        CHECK(init(&fixed[k], &cal, &study, pkv_route_name((pkv_route)k), PKV_BACKEND_MODEL,
                   PKV_CLOCK_PREDICTED, 0) == 0,
              "fixed %d", k);
    int worse = 0, wins = 0;
    for (int step = 0; step < 200; step++) {
        int32_t rows = 1 + (int32_t)gsl_rng_uniform_int(r, CAP);
        for (int i = 0; i < rows; i++)
            lens[i] = 1 + (int32_t)gsl_rng_uniform_int(r, step % 3 ? MAX_LEN : 64);
        pkv_batch_view v = {rows, lens, bt, STRIDE, dirty, rows, from, NULL, 0};
        pkv_step_rec rec = {.index = (uint64_t)step};
        double t_oracle, t, best = INFINITY;
        CHECK(pkv_engine_step(&oracle, &v, &rec, &t_oracle, &e) == 0, "oracle step: %s", e.msg);
        for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
            CHECK(pkv_engine_step(&fixed[k], &v, &rec, &t, &e) == 0, "step: %s", e.msg);
            if (t < best) best = t;
            worse += t_oracle > t * (1 + 1e-12);
        }
        wins += t_oracle <= best * (1 + 1e-12);
    }
    CHECK(worse == 0 && wins == 200, "the oracle was slower than a fixed route %d times", worse);
    pkv_engine_free(&oracle);
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) pkv_engine_free(&fixed[k]);

    gsl_rng_free(r);
}

/* cpu backend, device clock: every candidate measured, the route the fastest median;
 * the wall time is one step's. */
static void cpu_route_is_the_fastest_median(void) {
    gsl_rng *r = setup();
    pkv_calib cal;
    pkv_calib_defaults(&cal);
    const pkv_model small = small_layer();
    pkv_err e;
    int32_t lens[CAP];
    pkv_engine eng;
    CHECK(init(&eng, &cal, &small, "oracle", PKV_BACKEND_CPU, PKV_CLOCK_DEVICE, 5) == 0, "cpu");
    for (int step = 0; step < 20; step++) {
        const pkv_batch_view v = cpu_step(r, step, lens);
        pkv_step_rec rec = {.index = (uint64_t)step};
        double adv, sum = 0, best = INFINITY;
        CHECK(pkv_engine_step(&eng, &v, &rec, &adv, &e) == 0, "cpu oracle step: %s", e.msg);
        int measured = 0;
        for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
            double t = rec.t_route_measured[k];
            if (!pkvk_route_built((pkv_route)k)) {
                CHECK(isnan(t), "%s measured but not built", pkv_route_name((pkv_route)k));
                continue;
            }
            CHECK(t > 0, "step %d: %s not measured", step, pkv_route_name((pkv_route)k));
            measured++;
            sum += t;
            if (t < best) best = t;
        }
        CHECK(measured >= 4, "step %d: %d candidates measured", step, measured);
        CHECK(rec.t_device == best && adv == best && rec.t_route_measured[rec.route] == best,
              "step %d: the oracle's step %.3g s is not its fastest median %.3g s", step,
              rec.t_device, best);
        CHECK(rec.t_noise >= 0 && rec.t_noise < 10, "step %d: noise %g", step, rec.t_noise);
        CHECK(isnan(rec.t_plan) && isnan(rec.t_choose), "step %d: the oracle's host parts set",
              step);
        /* Five runs of every candidate took at least 5 x sum; one step's wall is far
         * below that. */
        CHECK(rec.t_wall > 0 && rec.t_wall < 2.5 * sum, "step %d: wall %.3g s of %.3g s of runs",
              step, rec.t_wall, 5 * sum);
    }
    pkv_engine_free(&eng);

    gsl_rng_free(r);
}

/* cpu backend, adaptive on the wall clock: the host's parts before the run are measured
 * and lie inside the step's wall time. */
static void host_parts_inside_the_wall(void) {
    gsl_rng *r = setup();
    pkv_calib cal;
    pkv_calib_defaults(&cal);
    pkv_err e;
    int32_t lens[CAP];
    const pkv_model small = small_layer();
    pkv_engine eng;
    CHECK(init(&eng, &cal, &small, "adaptive", PKV_BACKEND_CPU, PKV_CLOCK_WALL, 0) == 0,
          "adaptive");
    for (int step = 0; step < 20; step++) {
        const pkv_batch_view v = cpu_step(r, step, lens);
        pkv_step_rec rec = {.index = (uint64_t)step};
        double adv;
        CHECK(pkv_engine_step(&eng, &v, &rec, &adv, &e) == 0, "cpu adaptive step: %s", e.msg);
        CHECK(rec.t_plan > 0 && rec.t_choose > 0 && rec.t_plan + rec.t_choose < rec.t_wall,
              "step %d: planning %.3g s and choice %.3g s in a wall of %.3g s", step, rec.t_plan,
              rec.t_choose, rec.t_wall);
    }
    pkv_engine_free(&eng);
    gsl_rng_free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(never_slower_than_a_fixed_route),
    PKV_CASE(cpu_route_is_the_fastest_median),
    PKV_CASE(host_parts_inside_the_wall),
};
PKV_TEST_MAIN(cases)
