/* The kernels' CPU mirror and planners, in CI: every route's plan, run through the
 * CPU mirror of the split/merge algorithm, matches the FP32 reference on fresh
 * random inputs (odd lengths, page sizes 1..32, holes, G in 1..8, empty splits);
 * workqueue tasks cover every token exactly once; bucket plans launch once per
 * distinct route length. */
#include "check.h"
#include "testrun.h"
#include "pkv_tol.h"
#include "cost.h"
#include "planner.h"
#include "routes.h"
#include "pkvk.h"
#include "testbatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_rng.h>

static int32_t fixed_splits(int32_t route_len, int32_t rows, void *ctx) {
    return *(int32_t *)ctx;
}

/* Task entries (one per split, hkv CTAs each) cover each row's token range exactly
 * once, none empty, in slot order, slots compact. */
static void check_tasks(const pkvk_plan *p, const pkvk_shape *s, const int32_t *lens, int n) {
    CHECK(p->split_offsets[n] == p->n_slots, "n_slots");
    CHECK(p->n_tasks == p->n_slots * s->hkv, "%d tasks for %d slots", p->n_tasks, p->n_slots);
    char *seen = calloc((size_t)p->n_slots + 1, 1);
    for (int32_t t = 0; t < p->n_slots; t++) {
        const pkvk_task *T = &p->tasks[t];
        CHECK(T->row >= 0 && T->row < n, "task %d", t);
        CHECK(p->split_offsets[T->row] + T->split == t, "task %d out of slot order", t);
        int32_t S = p->split_offsets[T->row + 1] - p->split_offsets[T->row], tb, te;
        CHECK(T->split >= 0 && T->split < S, "task split %d outside row %d's slots", T->split,
              T->row);
        pkvk_split_range(lens[T->row], S, T->split, &tb, &te);
        CHECK(T->t_begin == tb && T->t_end == te && te > tb, "task %d: [%d, %d) for [%d, %d)", t,
              T->t_begin, T->t_end, tb, te);
        size_t k = (size_t)(p->split_offsets[T->row] + T->split);
        CHECK(!seen[k], "row %d split %d twice", T->row, T->split);
        seen[k] = 1;
    }
    free(seen);
    for (int i = 0; i < n; i++) {
        int32_t S = p->split_offsets[i + 1] - p->split_offsets[i], prev = 0, tb, te;
        CHECK(S >= 1, "row %d has no slot", i);
        for (int32_t sp = 0; sp < S; sp++) {
            pkvk_split_range(lens[i], S, sp, &tb, &te);
            CHECK(tb == prev && te > tb, "row %d split %d: gap, overlap or empty", i, sp);
            prev = te;
        }
        CHECK(prev == lens[i], "row %d: %d of %d tokens covered", i, prev, lens[i]);
    }
}

/* FlashInfer's partition, as its planners define it: every row in non-empty chunks of
 * chunk_tokens (whole pages, at least 128 tokens' worth) covering it; the chunk is the
 * smallest whose work fits the grid (DecodePlan: 8 CTAs/SM x SMs over chunks x KV
 * heads; PrefillPlan: 2 x SMs / KV heads chunks), or the whole longest row. */
static int64_t fi_units(const int32_t *lens, int n, int32_t ps, int64_t chunk_pages) {
    int64_t u = 0;
    for (int i = 0; i < n; i++) u += ((lens[i] + ps - 1) / ps + chunk_pages - 1) / chunk_pages;
    return u;
}

static void check_flashinfer(const pkvk_plan *p, const pkvk_shape *s, const int32_t *lens, int n,
                             int sms) {
    int32_t ps = s->page_size, ch = p->chunk_tokens, max_len = 0;
    CHECK(ch > 0 && ch % ps == 0, "chunk %d is not whole pages of %d", ch, ps);
    for (int i = 0; i < n; i++) {
        int32_t k = p->split_offsets[i + 1] - p->split_offsets[i];
        CHECK(k >= 1 && (int64_t)(k - 1) * ch < lens[i] && (int64_t)k * ch >= lens[i],
              "row %d (%d tokens): %d chunks of %d", i, lens[i], k, ch);
        if (lens[i] > max_len) max_len = lens[i];
    }
    CHECK(p->split_offsets[n] == p->n_slots, "n_slots");
    /* PrefillPlan's query tiles: q_len x G rows in tiles of 16, 64 or 128 */
    const int64_t rows = (int64_t)(p->q_len > 1 ? p->q_len : 1) * (s->hq / s->hkv);
    const int64_t tile = rows <= 16 ? 16 : rows <= 64 ? 64 : 128;
    CHECK(p->q_tiles == (rows + tile - 1) / tile, "%d query tiles for %d rows", p->q_tiles,
          (int)rows);
    /* DecodePlan at one query token a row; PrefillPlan else (a verify step on either route) */
    const int decode = p->route == PKV_ROUTE_FLASHINFER && p->q_len <= 1;
    int64_t pages = ch / ps, min_pages = ps < 128 ? 128 / ps : 1;
    int64_t budget = decode ? 8LL * sms : 2LL * sms / s->hkv;
    int64_t per = decode ? s->hkv : p->q_tiles;
    int whole = (int64_t)pages * ps >= max_len;
    int decode_full = decode && (int64_t)n * s->hkv >= budget;
    if (decode_full) CHECK(p->n_slots == n, "decode over a full grid split a row");
    if (!whole) CHECK(fi_units(lens, n, ps, pages) * per <= budget, "chunks overflow the grid");
    if (pages > min_pages && !decode_full)
        CHECK(fi_units(lens, n, ps, pages - 1) * per > budget, "chunk %d pages is not the smallest",
              (int)pages);
}

/* A verify step's plans on FlashInfer's routes (q_len 2 to 17 query tokens a row, G 1 to
 * 8, grids of 1 to 132 SMs): PrefillPlan's query tiles and its smallest chunk whose tiles
 * fit the grid, for both routes; a decode plan after a verify plan of the same rows is the
 * decode plan made afresh (the kept plan is keyed by its query length). */
static void verify_plans_tile_query_rows_as_prefill_plan(void) {
    gsl_rng *r = test_rng(47);
    const int qls[5] = {2, 4, 5, 8, 17}, Gs[4] = {1, 2, 4, 8}, sms[3] = {1, 8, 132};
    int cases = 0, multi = 0;
    pkvk_plan p, fresh;
    CHECK(pkvk_plan_init(&p, 40, 64) == 0 && pkvk_plan_init(&fresh, 40, 64) == 0, "plan init");
    for (int qi = 0; qi < 5; qi++)
        for (int gi = 0; gi < 4; gi++)
            for (int sc = 0; sc < 3; sc++)
                for (int route = PKV_ROUTE_FLASHINFER; route <= PKV_ROUTE_FLASHINFER_TC; route++) {
                    const pkvk_shape s = {
                        .hq = 2 * Gs[gi], .hkv = 2, .d = 128, .page_size = sc == 1 ? 1 : 16};
                    int32_t lens[40];
                    const int n = 1 + (int)gsl_rng_uniform_int(r, 40);
                    for (int i = 0; i < n; i++)
                        lens[i] = qls[qi] + (int32_t)gsl_rng_uniform_int(r, 1 + (i % 4) * 6000);
                    p.q_len = qls[qi];
                    CHECK(pkvk_plan_flashinfer(&p, (pkv_route)route, &s, lens, n, sms[sc], 8) == 0,
                          "plan");
                    check_flashinfer(&p, &s, lens, n, sms[sc]);
                    multi += p.q_tiles > 1;
                    p.q_len = 1, fresh.q_len = 1;
                    CHECK(pkvk_plan_flashinfer(&p, (pkv_route)route, &s, lens, n, sms[sc], 8) ==
                                  0 &&
                              pkvk_plan_flashinfer(&fresh, (pkv_route)route, &s, lens, n, sms[sc],
                                                   8) == 0,
                          "decode plan");
                    check_flashinfer(&p, &s, lens, n, sms[sc]);
                    CHECK(p.chunk_tokens == fresh.chunk_tokens && p.n_slots == fresh.n_slots &&
                              p.q_tiles == 1,
                          "a decode plan after a verify plan: chunk %d, %d slots, %d tiles "
                          "(afresh: %d, %d)",
                          p.chunk_tokens, p.n_slots, p.q_tiles, fresh.chunk_tokens, fresh.n_slots);
                    cases++;
                }
    CHECK(cases == 120 && multi > 0, "%d cases, %d with several query tiles a row", cases, multi);
    pkvk_plan_free(&p);
    pkvk_plan_free(&fresh);
    gsl_rng_free(r);
}

/* Rows for the chunk search: units(c) = per_unit x sum ceil(t_i / c). */
typedef struct bracket_rows {
    int32_t t[40], n;
    int64_t per_unit;
} bracket_rows;
static int64_t bracket_units(int64_t c, const void *ctx) {
    const bracket_rows *b = ctx;
    int64_t u = 0;
    for (int32_t i = 0; i < b->n; i++) u += (b->t[i] + c - 1) / c;
    return u * b->per_unit;
}

/* Every route on a batch mixing very short and long rows (and random lengths), over G
 * 1 to 8 and pages of 1 to 32 tokens, split 1, 3 and 64 ways (more splits than tiles:
 * empty splits), against the CPU reference. */
static void every_route_matches_the_reference_on_odd_lengths(void) {
    gsl_rng *r = test_rng(2024);
    const int Gs[4] = {1, 2, 4, 8}, pss[4] = {1, 8, 16, 32};
    const int32_t odd[] = {1, 15, 16, 17, 31, 33, 500, 1029};
    int cases = 0;
    for (int gi = 0; gi < 4; gi++) {
        for (int pi = 0; pi < 4; pi++) {
            pkvk_shape s = {.hq = 2 * Gs[gi], .hkv = 2, .d = 64, .page_size = pss[pi]};
            /* A batch mixing very short and long rows, plus random lengths. */
            int32_t lens[10];
            int n = 10;
            memcpy(lens, odd, sizeof odd);
            lens[8] = 1 + (int32_t)gsl_rng_uniform_int(r, 3000);
            lens[9] = 1 + (int32_t)gsl_rng_uniform_int(r, 100);
            host_batch h;
            make_batch(&h, r, s, lens, n, 0.5);
            size_t on = (size_t)n * s.hq * s.d;
            float *ref = malloc(on * 4), *o = malloc(on * 4);
            CHECK(pkvk_cpu_reference(&h.b, ref) == PKVK_OK, "CPU reference");
            pkvk_plan p;
            CHECK(pkvk_plan_init(&p, n, 4096) == 0, "plan init");
            float *part = malloc(pkvk_partial_floats(&s, 4096) * 4);
            for (int route = 0; route < PKV_ROUTE_COUNT; route++) {
                /* Split counts 1, 3 and 64 (more splits than tiles: empty splits). */
                const int32_t split_counts[3] = {1, 3, 64};
                for (int sc = 0; sc < 3; sc++) {
                    int32_t S = split_counts[sc], splits[10];
                    for (int i = 0; i < n; i++) splits[i] = S;
                    int rc;
                    if (route == PKV_ROUTE_REF_PAGED) {
                        if (sc) continue;
                        rc = pkvk_plan_ref(&p, lens, n);
                    } else if (route == PKV_ROUTE_BUCKET) {
                        rc = pkvk_plan_bucket(&p, lens, lens, n, fixed_splits, &S);
                    } else if (route >= PKV_ROUTE_FLASHINFER) {
                        /* FlashInfer's planners choose the chunks; the grid they fill
                         * varies instead: few SMs split long rows, many split all. */
                        const int32_t sms[3] = {1, 8, 132};
                        rc = pkvk_plan_flashinfer(&p, (pkv_route)route, &s, lens, n, sms[sc], 8);
                        if (rc == 0) check_flashinfer(&p, &s, lens, n, sms[sc]);
                    } else {
                        rc = pkvk_plan_workqueue(&p, (pkv_route)route, &s, lens, splits, n);
                        if (rc == 0) check_tasks(&p, &s, lens, n);
                    }
                    CHECK(rc == 0, "plan route %d", route);
                    for (size_t j = 0; j < on; j++) o[j] = NAN; /* poison */
                    CHECK(pkvk_cpu_run(&h.b, &p, pkv_route_ops_of(p.route)->cpu_attend, part, o) ==
                              0,
                          "run");
                    double mx, mean;
                    pkvk_compare(o, NULL, PKVK_FP16, ref, on, &mx, &mean);
                    CHECK(pkv_tol_ok(mx, mean),
                          "G=%d ps=%d route %s S=%d: max|e| %.3g mean|e| %.3g", Gs[gi], pss[pi],
                          pkv_route_name((pkv_route)route), S, mx, mean);
                    cases++;
                }
            }
            free(part);
            pkvk_plan_free(&p);
            free(ref), free(o);
            free_batch(&h);
        }
    }
    CHECK(cases == 16 * (1 + 3 * (PKV_ROUTE_COUNT - 1)), "%d cases ran", cases);

    gsl_rng_free(r);
}

/* The bucket plan's row order, short batches (insertion sort) and long ones (radix
 * sort on the lengths' bytes): every row once, longest first, ties in row order;
 * lengths from a few values (ties), from every byte's range, or both. */
static void bucket_order_longest_first_ties_by_row(void) {
    gsl_rng *r = test_rng(2025);
    for (int trial = 0; trial < 24; trial++) {
        const int32_t n = trial < 4 ? 1 + trial * 10 : 33 + (int32_t)gsl_rng_uniform_int(r, 3000);
        int32_t *lens = malloc(sizeof(int32_t) * (size_t)n), S = 1;
        for (int32_t i = 0; i < n; i++) {
            const int kind = (trial + i) % 3;
            lens[i] = kind == 0   ? 64 * (1 + (int32_t)gsl_rng_uniform_int(r, 4))
                      : kind == 1 ? 1 + (int32_t)gsl_rng_uniform_int(r, 1u << (8 * (1 + i % 4) - 2))
                                  : 1 << (int)gsl_rng_uniform_int(r, 31);
        }
        pkvk_plan p;
        CHECK(pkvk_plan_init(&p, n, 4096) == 0 &&
                  pkvk_plan_bucket(&p, lens, lens, n, fixed_splits, &S) == 0,
              "bucket plan of %d rows", n);
        uint8_t *seen = calloc((size_t)n, 1);
        int ordered = 1;
        for (int32_t k = 0; k < n; k++) {
            const int32_t a = p.bucket_rows[k];
            ordered &= a >= 0 && a < n && !seen[a];
            if (a >= 0 && a < n) seen[a] = 1;
            if (k > 0 && ordered) {
                const int32_t b = p.bucket_rows[k - 1];
                ordered &= lens[b] > lens[a] || (lens[b] == lens[a] && b < a);
            }
        }
        CHECK(ordered, "%d rows: the bucket order is not longest first, ties in row order", n);
        free(seen), free(lens);
        pkvk_plan_free(&p);
    }
    gsl_rng_free(r);
}

/* The chunk search over its bracket finds what it finds over the whole range: rows
 * of 1..4096 tiles, budgets from below the rows' count (nothing fits) to above
 * their total, lower bounds above and below the answer, ranges empty or not. */
static void chunk_search_over_its_bracket(void) {
    gsl_rng *r = test_rng(2026);
    for (int trial = 0; trial < 20000; trial++) {
        bracket_rows b = {.n = 1 + (int32_t)gsl_rng_uniform_int(r, 40),
                          .per_unit = 1 + (int64_t)gsl_rng_uniform_int(r, 8)};
        int64_t total = 0, most = 1;
        for (int32_t i = 0; i < b.n; i++) {
            b.t[i] = 1 + (int32_t)gsl_rng_uniform_int(r, trial % 2 ? 64 : 4096);
            total += b.t[i], most = b.t[i] > most ? b.t[i] : most;
        }
        /* a quarter of them at a unit a row, one under and one over (where the bracket
         * changes its form) */
        const int64_t budget =
            trial % 4 == 0
                ? b.per_unit * b.n + trial / 4 % 3 - 1
                : 1 + (int64_t)gsl_rng_uniform_int(r, (unsigned long)(2 * total * b.per_unit));
        int64_t lo = 1 + (int64_t)gsl_rng_uniform_int(r, 8),
                hi = (int64_t)gsl_rng_uniform_int(r, (unsigned long)most + 2);
        const int64_t whole = pkvk_smallest_chunk(lo, hi, budget, bracket_units, &b);
        pkvk_chunk_bracket(total, b.n, b.per_unit, budget, &lo, &hi);
        const int64_t narrow = pkvk_smallest_chunk(lo, hi, budget, bracket_units, &b);
        CHECK(narrow == whole,
              "%d rows, budget %lld: chunk %lld over the bracket, %lld over the range", b.n,
              (long long)budget, (long long)narrow, (long long)whole);
    }
    gsl_rng_free(r);
}

/* Prefix caching's block tables: rows naming the same physical pages give, under
 * every route, the output of the same content in private pages, bit for bit. */
static void shared_prefix_pages_equal_private_ones(void) {
    gsl_rng *r = test_rng(2027);
    for (int trial = 0; trial < 6; trial++) {
        pkvk_shape s = {.hq = 8, .hkv = 2, .d = 128, .page_size = 16};
        int32_t lens[5];
        for (int i = 0; i < 5; i++) lens[i] = 300 + (int32_t)gsl_rng_uniform_int(r, 3000);
        host_batch h, priv;
        make_batch(&h, r, s, lens, 5, 0.3);
        int32_t m = share_prefix(&h, &priv);
        CHECK(m >= 18, "only %d pages shared", m);
        size_t on = (size_t)5 * s.hq * s.d;
        float *o1 = malloc(on * 4), *o2 = malloc(on * 4), *ref = malloc(on * 4);
        float *part = malloc(pkvk_partial_floats(&s, 4096) * 4);
        CHECK(pkvk_cpu_reference(&priv.b, ref) == PKVK_OK, "CPU reference");
        pkvk_plan p;
        CHECK(pkvk_plan_init(&p, 5, 4096) == 0, "plan init");
        for (int route = 0; route < PKV_ROUTE_COUNT; route++) {
            int32_t S = 3, splits[5] = {3, 3, 3, 3, 3};
            int rc = route == PKV_ROUTE_REF_PAGED ? pkvk_plan_ref(&p, lens, 5)
                     : route == PKV_ROUTE_BUCKET
                         ? pkvk_plan_bucket(&p, lens, lens, 5, fixed_splits, &S)
                     : route >= PKV_ROUTE_FLASHINFER
                         ? pkvk_plan_flashinfer(&p, (pkv_route)route, &s, lens, 5, 8, 8)
                         : pkvk_plan_workqueue(&p, (pkv_route)route, &s, lens, splits, 5);
            CHECK(rc == 0, "plan route %d", route);
            const pkvk_cpu_attend attend = pkv_route_ops_of(p.route)->cpu_attend;
            CHECK(pkvk_cpu_run(&h.b, &p, attend, part, o1) == 0 &&
                      pkvk_cpu_run(&priv.b, &p, attend, part, o2) == 0,
                  "run");
            CHECK(memcmp(o1, o2, on * 4) == 0, "route %s: shared pages differ from private ones",
                  pkv_route_name((pkv_route)route));
            double mx, mean;
            pkvk_compare(o1, NULL, PKVK_FP16, ref, on, &mx, &mean);
            CHECK(pkv_tol_ok(mx, mean), "route %s on shared pages: max|e| %.3g",
                  pkv_route_name((pkv_route)route), mx);
        }
        pkvk_plan_free(&p);
        free(o1), free(o2), free(ref), free(part);
        free_batch(&h), free_batch(&priv);
    }
    gsl_rng_free(r);
}

/* The planner's cases: 32 query and 8 KV heads of 128, the default calibration
 * (H200-like: 132 SMs, waves of 264 CTAs), a planner of 256 rows; returns the case's
 * random stream. */
static const pkvk_shape shape32 = {.hq = 32, .hkv = 8, .d = 128, .page_size = 16};
static gsl_rng *planner_case(unsigned long seed, pkv_calib *cal, pkv_planner *pl) {
    gsl_rng *r = test_rng(seed);
    pkv_calib_defaults(cal);
    CHECK(pkv_planner_init(pl, &shape32, cal, 256, PKV_BUCKET_MODE_EXACT) == 0, "planner");
    return r;
}

/* Planner properties over random batches: task coverage, the wave rule, and one
 * bucket (one split launch) per distinct route length. */
static void planner_properties_over_random_batches(void) {
    pkv_calib cal;
    pkv_planner pl;
    const pkvk_shape s = shape32;
    gsl_rng *r = planner_case(2028, &cal, &pl);
    for (int trial = 0; trial < 500; trial++) {
        int n = 1 + (int)gsl_rng_uniform_int(r, trial % 3 ? 256 : 33);
        int32_t lens[256];
        for (int i = 0; i < n; i++)
            lens[i] = 1 + (int32_t)gsl_rng_uniform_int(r, trial % 2 ? 131072 : 2000);
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, lens, n) == 0, "wq plan");
        check_tasks(&pl.plans[PKV_ROUTE_WORKQUEUE], &s, lens, n);
        {
            /* Rows that fit one wave make one wave (two when its CTAs would be
             * unequal) whose longest task could not be shorter; past a wave no task
             * is longer than the mean load. */
            const pkvk_plan *wq = &pl.plans[PKV_ROUTE_WORKQUEUE];
            int64_t W = (int64_t)cal.resident_ctas_per_sm * cal.sm_count, total = 0, longest = 0;
            for (int32_t t = 0; t < wq->n_slots; t++) {
                int64_t k = pkvk_tiles(wq->tasks[t].t_end) - wq->tasks[t].t_begin / PKVK_TILE;
                if (k > longest) longest = k;
            }
            for (int i = 0; i < n; i++) total += pkvk_tiles(lens[i]) * s.hkv;
            if ((int64_t)n * s.hkv <= W) {
                int64_t budget = wq->n_tasks > W ? 2 * W : W;
                CHECK(wq->n_tasks <= 2 * W, "%d tasks over two waves of %lld", wq->n_tasks,
                      (long long)W);
                int64_t shorter = 0;
                for (int i = 0; longest > cal.min_split_tiles && i < n; i++)
                    shorter += (pkvk_tiles(lens[i]) + longest - 2) / (longest - 1) * s.hkv;
                CHECK(longest <= cal.min_split_tiles || shorter > budget,
                      "tasks of %lld tiles would also fit %lld CTAs", (long long)(longest - 1),
                      (long long)budget);
                if (budget > W) {
                    /* Two waves only where the one-wave split is unbalanced: its
                     * smallest fitting chunk, found by scanning, gives a mean CTA
                     * below wave_balance_min of the longest. */
                    int64_t c1 = cal.min_split_tiles, k, runs, run_max;
                    for (;; c1++) {
                        k = 0;
                        for (int i = 0; i < n; i++) k += (pkvk_tiles(lens[i]) + c1 - 1) / c1;
                        if (k * s.hkv <= W) break;
                    }
                    runs = run_max = 0;
                    for (int i = 0; i < n; i++) {
                        int64_t t = pkvk_tiles(lens[i]), S = (t + c1 - 1) / c1;
                        runs += S;
                        if ((t + S - 1) / S > run_max) run_max = (t + S - 1) / S;
                    }
                    CHECK((double)(total / s.hkv) / runs / run_max < cal.wave_balance_min,
                          "two waves for a balanced one-wave split");
                }
            } else {
                int64_t mean = (total + W - 1) / W;
                CHECK(longest <= (mean > cal.min_split_tiles ? mean : cal.min_split_tiles),
                      "a task of %lld tiles past the mean load %lld", (long long)longest,
                      (long long)mean);
            }
        }
        /* The model backend's counts-only plans have the same counters. */
        pkv_counters full, counted;
        pkv_cost_counters(&cal, &s, &pl.plans[PKV_ROUTE_WORKQUEUE], lens, 1, &full);
        pl.plans[PKV_ROUTE_WORKQUEUE].counts_only = 1;
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, lens, n) == 0, "counts-only plan");
        pkv_cost_counters(&cal, &s, &pl.plans[PKV_ROUTE_WORKQUEUE], lens, 1, &counted);
        pl.plans[PKV_ROUTE_WORKQUEUE].counts_only = 0;
        CHECK(memcmp(&full, &counted, sizeof full) == 0, "counts-only plan counters differ");
        /* A verify step of 4 query tokens a row (G = 32 / 8): the 16 MMA rows of a CTA hold
         * them all, so the CTAs and the KV read are the decode step's and the states 4 times
         * as many; of 8 tokens, two query blocks: twice the CTAs, the KV read once and its
         * re-read share. */
        pkv_counters v4, v8;
        pkv_cost_counters(&cal, &s, &pl.plans[PKV_ROUTE_WORKQUEUE], lens, 4, &v4);
        pkv_cost_counters(&cal, &s, &pl.plans[PKV_ROUTE_WORKQUEUE], lens, 8, &v8);
        CHECK(v4.ctas == full.ctas && v4.kv_bytes == full.kv_bytes &&
                  v4.merge_bytes == 4 * full.merge_bytes && v8.ctas == 2 * full.ctas &&
                  v8.kv_bytes == full.kv_bytes + (int64_t)(PKV_VERIFY_REREAD * full.kv_bytes) &&
                  v8.merge_bytes == 8 * full.merge_bytes,
              "verify counters: CTAs %lld, %lld (decode %lld), merge %lld (decode %lld)",
              (long long)v4.ctas, (long long)v8.ctas, (long long)full.ctas,
              (long long)v4.merge_bytes, (long long)full.merge_bytes);
        /* The packing: 16 rows where G divides 16, else whole tokens in 8, the last block
         * short where the tokens do not divide evenly. */
        int per, rows3 = pkvk_verify_pack(4, 128, 3, &per);
        CHECK(rows3 == 16 && per == 4 && pkvk_verify_blocks(4, 128, 3) == 1 &&
                  pkvk_verify_pack(3, 128, 5, &per) == 6 && per == 2 &&
                  pkvk_verify_blocks(3, 128, 5) == 3 && pkvk_verify_pack(4, 128, 2, &per) == 8 &&
                  per == 2 && pkvk_verify_pack(1, 64, 12, &per) == 16 && per == 16 &&
                  pkvk_verify_blocks(8, 128, 5) == 3 && pkvk_verify_blocks(4, 128, 1) == 1 &&
                  pkvk_verify_blocks(4, 256, 4) == 2,
              "verify packing");
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_BUCKET, lens, n) == 0, "bucket plan");
        int distinct = 0;
        for (int i = 0; i < n; i++) {
            int32_t key = pkvk_tiles(lens[i]);
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = pkvk_tiles(lens[j]) == key;
            distinct += !seen;
        }
        const pkvk_plan *bp = &pl.plans[PKV_ROUTE_BUCKET];
        pkv_counters c;
        pkv_cost_counters(&cal, &s, bp, lens, 1, &c);
        CHECK(bp->n_buckets == distinct, "%d buckets for %d distinct lengths", bp->n_buckets,
              distinct);
        CHECK(c.launches - c.merge_launches == distinct, "split launches %d != %d",
              c.launches - c.merge_launches, distinct);
        int rows = 0;
        for (int b = 0; b < bp->n_buckets; b++)
            rows += bp->buckets[b].row_end - bp->buckets[b].row_begin;
        CHECK(rows == n, "bucket rows %d of %d", rows, n);
    }
    {
        /* The study's cases on an H200-like calibration: equal rows make one wave of
         * equal CTAs; B=8 bimodal (CTAs of 6.5K and 4K tokens in one wave) goes over
         * two waves. */
        const int32_t b1[1] = {32768},
                      b8[8] = {32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768};
        const int32_t bi[8] = {65536, 8192, 8192, 8192, 65536, 8192, 8192, 8192};
        const pkvk_plan *wq = &pl.plans[PKV_ROUTE_WORKQUEUE];
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, b1, 1) == 0 && wq->n_tasks == 256,
              "B=1 32K: %d tasks", wq->n_tasks);
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, b8, 8) == 0 && wq->n_tasks == 256,
              "B=8 32K: %d tasks", wq->n_tasks);
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, bi, 8) == 0 && wq->n_tasks > 264 &&
                  wq->n_tasks <= 528,
              "B=8 bimodal: %d tasks", wq->n_tasks);
    }
    {
        /* FP8 KV in the cost model: half the bytes plus a scale of K and of V per page and
         * KV head; on PersistentKV's routes a CTA streams at most kv_fp8_cta_gbps (the
         * kernels are issue-bound there), on FlashInfer's at its route model's rate. Under
         * the H200's study-layer model of pkv_workqueue, B = 1 32K: an FP8 step costs more
         * than half the FP16 step, less than all of it. */
        const int32_t b1[1] = {32768};
        pkv_calib c8 = cal;
        pkv_route_model *m = &c8.route_model[PKV_ROUTE_WORKQUEUE];
        *m = (pkv_route_model){.set = 1};
        m->v[PKV_RM_CTA_GBPS] = 29.1, m->v[PKV_RM_CTA_US] = 3.27, m->v[PKV_RM_LAUNCH_US] = 2.57;
        m->v[PKV_RM_MERGE_GBPS] = 614, m->v[PKV_RM_PEAK_GBPS] = 4106;
        pkvk_shape s16 = {.hq = 32, .hkv = 8, .d = 128, .page_size = 16}, s8 = s16;
        s8.kv_dtype = PKVK_FP8_E4M3;
        pkv_planner p8;
        CHECK(pkv_planner_init(&p8, &s8, &c8, 1, PKV_BUCKET_MODE_EXACT) == 0, "planner");
        CHECK(pkv_planner_build(&p8, PKV_ROUTE_WORKQUEUE, b1, 1) == 0 &&
                  pkv_planner_build(&p8, PKV_ROUTE_FLASHINFER_TC, b1, 1) == 0,
              "FP8 plans");
        pkv_counters k16, k8, fi8;
        pkv_cost_counters(&c8, &s16, &p8.plans[PKV_ROUTE_WORKQUEUE], b1, 1, &k16);
        pkv_cost_counters(&c8, &s8, &p8.plans[PKV_ROUTE_WORKQUEUE], b1, 1, &k8);
        pkv_cost_counters(&c8, &s8, &p8.plans[PKV_ROUTE_FLASHINFER_TC], b1, 1, &fi8);
        CHECK(k8.kv_bytes == 32768LL * 8 * 128 * 2 + 2048LL * 8 * 2 * 4 &&
                  k16.kv_bytes == 32768LL * 8 * 128 * 4,
              "FP8 KV bytes %lld, FP16 %lld", (long long)k8.kv_bytes, (long long)k16.kv_bytes);
        CHECK(k8.cta_bps_max == c8.kv_fp8_cta_gbps && k16.cta_bps_max == 0 && fi8.cta_bps_max == 0,
              "CTA caps: FP8 %g, FP16 %g, FlashInfer's FP8 %g", k8.cta_bps_max, k16.cta_bps_max,
              fi8.cta_bps_max);
        CHECK(k8.t_predicted > 0.5 * k16.t_predicted && k8.t_predicted < k16.t_predicted,
              "FP8 step %.1f us against FP16's %.1f", k8.t_predicted * 1e6, k16.t_predicted * 1e6);
        /* FlashInfer's verify over FP8 KV: 4 tokens at G 4 fill one 16-row tile (priced as
         * its decode), 5 take two (the KV again at PKV_FI_VERIFY_FP8_REREAD); over FP16 KV
         * as its decode. */
        pkv_counters fv4, fv5, fv16;
        pkv_planner p16;
        CHECK(pkv_planner_init(&p16, &s16, &c8, 1, PKV_BUCKET_MODE_EXACT) == 0 &&
                  pkv_planner_build(&p16, PKV_ROUTE_FLASHINFER_TC, b1, 1) == 0,
              "FP16 plan");
        pkv_cost_counters(&c8, &s8, &p8.plans[PKV_ROUTE_FLASHINFER_TC], b1, 4, &fv4);
        pkv_cost_counters(&c8, &s8, &p8.plans[PKV_ROUTE_FLASHINFER_TC], b1, 5, &fv5);
        pkv_counters fd16;
        pkv_cost_counters(&c8, &s16, &p16.plans[PKV_ROUTE_FLASHINFER_TC], b1, 1, &fd16);
        pkv_cost_counters(&c8, &s16, &p16.plans[PKV_ROUTE_FLASHINFER_TC], b1, 8, &fv16);
        CHECK(fv4.kv_bytes == fi8.kv_bytes &&
                  fv5.kv_bytes ==
                      fi8.kv_bytes + (int64_t)(PKV_FI_VERIFY_FP8_REREAD * (double)fi8.kv_bytes) &&
                  fv5.t_predicted > fv4.t_predicted && fv16.kv_bytes == fd16.kv_bytes,
              "FlashInfer's FP8 verify: KV %lld at 4 tokens, %lld at 5 (decode %lld); FP16 at "
              "8 tokens %lld (decode %lld)",
              (long long)fv4.kv_bytes, (long long)fv5.kv_bytes, (long long)fi8.kv_bytes,
              (long long)fv16.kv_bytes, (long long)fd16.kv_bytes);
        pkv_planner_free(&p16);
        pkv_counters all = k8; /* no cap: the bytes alone */
        all.cta_bps_max = 0;
        CHECK(pkv_cost_route_time(&c8, PKV_ROUTE_WORKQUEUE, NULL, &all) < k8.t_predicted,
              "the FP8 cap does not slow the CTAs");
        pkv_planner_free(&p8);
    }
    pkv_planner_free(&pl);
    gsl_rng_free(r);
}

/* The route table: every route has its operations, and through them plans (in full
 * form, and in counts-only form with the same counters), predicts and runs on the
 * CPU against the reference. */
static void route_table_plans_counts_and_runs(void) {
    pkv_calib cal;
    pkv_planner pl;
    const pkvk_shape s = shape32;
    gsl_rng *r = planner_case(2029, &cal, &pl);
    CHECK(pkv_route_ops_of(PKV_ROUTE_COUNT) == NULL, "no operations outside the enum");
    {
        const int32_t lens[4] = {100, 5000, 12000, 17};
        host_batch h;
        make_batch(&h, r, s, lens, 4, 0.25);
        const size_t on = (size_t)4 * s.hq * s.d;
        float *ref = malloc(on * 4), *o = malloc(on * 4),
              *part = malloc(pkvk_partial_floats(&s, 4096) * 4);
        CHECK(pkvk_cpu_reference(&h.b, ref) == PKVK_OK, "CPU reference");
        for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
            const pkv_route_ops *ops = pkv_route_ops_of((pkv_route)k);
            const char *name = pkv_route_name((pkv_route)k);
            CHECK(ops && ops->plan && ops->count && ops->ctas_per_sm && ops->cpu_attend,
                  "%s: operations", name);
            if (!ops || !ops->plan || !ops->count || !ops->ctas_per_sm || !ops->cpu_attend)
                continue;
            pkv_counters full, counted;
            pkvk_plan *p = &pl.plans[k];
            p->counts_only = 1;
            CHECK(pkv_planner_build(&pl, (pkv_route)k, lens, 4) == 0, "%s: counts-only", name);
            pkv_cost_counters(&cal, &s, p, lens, 1, &counted);
            p->counts_only = 0;
            CHECK(pkv_planner_build(&pl, (pkv_route)k, lens, 4) == 0, "%s: plan", name);
            pkv_cost_counters(&cal, &s, p, lens, 1, &full);
            CHECK(full.launches >= 1 && full.ctas >= 4 * s.hkv &&
                      full.kv_bytes == (int64_t)(100 + 5000 + 12000 + 17) * s.hkv * s.d * 4 &&
                      full.t_predicted > 0 && isfinite(full.t_predicted) &&
                      ops->ctas_per_sm(&cal) >= 1,
                  "%s: %d launches, %lld CTAs, %.3g s predicted", name, full.launches,
                  (long long)full.ctas, full.t_predicted);
            CHECK(counted.ctas == full.ctas && counted.launches == full.launches &&
                      counted.t_predicted == full.t_predicted,
                  "%s: the counts-only plan counts as the full one", name);
            for (size_t j = 0; j < on; j++) o[j] = NAN;
            double mx = INFINITY, mean = INFINITY;
            const int run = pkvk_cpu_run(&h.b, p, ops->cpu_attend, part, o);
            CHECK(run == 0, "%s: CPU run", name);
            if (run == 0) pkvk_compare(o, NULL, PKVK_FP16, ref, on, &mx, &mean);
            CHECK(pkv_tol_ok(mx, mean), "%s: max|e| %.3g mean|e| %.3g", name, mx, mean);
        }
        free(ref), free(o), free(part);
        free_batch(&h);
    }
    pkv_planner_free(&pl);
    gsl_rng_free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(every_route_matches_the_reference_on_odd_lengths),
    PKV_CASE(bucket_order_longest_first_ties_by_row),
    PKV_CASE(chunk_search_over_its_bracket),
    PKV_CASE(verify_plans_tile_query_rows_as_prefill_plan),
    PKV_CASE(shared_prefix_pages_equal_private_ones),
    PKV_CASE(planner_properties_over_random_batches),
    PKV_CASE(route_table_plans_counts_and_runs),
};
PKV_TEST_MAIN(cases)
