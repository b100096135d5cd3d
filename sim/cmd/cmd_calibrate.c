/* pkvsim calibrate: measure the cost model's constants on the present GPU.
 *
 * beta and lambda are the read-only streaming bandwidth and the back-to-back launch
 * time measured in the run; resident_ctas_per_sm is the attention kernel's
 * occupancy. Then a sweep of isolated decode steps (batch sizes x lengths x routes x
 * split counts) is timed, C_min is fitted by minimising the squared relative error
 * of the model over all points (GSL Brent minimiser: the forced split counts are
 * what vary the CTAs per SM), and each route's scale by weighted least squares
 * through the origin (gsl_fit_wmul) on the planner's own plans of that route, the
 * ones the route policy compares. Then each route's structured model (route_model,
 * engine/cost.h: waves, per-CTA bandwidth, fixed and launch costs, merge traffic) by
 * pkv_fit_route on its points of two shapes in three, its error reported on the third
 * (held out); the calibration predicts by it. The shapes run from 1 row to 256, from
 * 128 tokens to 128K, each row's length drawn in [L/2, L] (ragged), for GQA group
 * sizes 1, 2, 4 and 8 (32 query heads over 32, 16, 8 or 4 KV heads; --groups).
 * At the calibration's own group (gqa_group) each shape is timed over FP8 KV as well, the
 * PersistentKV routes at their planners' choice, and kv_fp8_cta_gbps fitted to those
 * points under the fitted route models (pkv_fit_fp8_cap, as `pkvsim fit` does).
 * swap_us and swap_gbps are fitted to timed copies of preemption by swap.
 * The file records the fit's residuals. Gates and margins keep their defaults. */
#include "cli.h"
#include "dense.h"
#include "cmd_calibrate.h"
#include "cost.h"
#include "fit.h"
#include "kcase.h"
#include "pkv_files.h"
#include "pkv_gitrev.h"
#include "planner.h"
#include "rng.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_min.h>

enum { MAX_POINTS = 4096, PKV_CALIBRATE_MIN_CONTEXT = 4096 };

typedef struct point {
    int route;
    int shape;      /* the sweep's shape (G, B, L) index */
    int G;          /* its GQA group size */
    int planned;    /* the planner's own plan (not a forced split count) */
    pkv_counters c; /* counters of the plan (model terms) */
    double t;       /* seconds measured */
} point;

typedef struct fit_ctx {
    const point *p;
    int n;
    pkv_calib cal; /* trial constants */
} fit_ctx;

static double sq_rel_error(double c_min, void *vctx) {
    fit_ctx *f = vctx;
    f->cal.c_min = c_min;
    double sum = 0;
    for (int i = 0; i < f->n; i++) {
        double r = (pkv_cost_time(&f->cal, &f->p[i].c) - f->p[i].t) / f->p[i].t;
        sum += r * r;
    }
    return sum;
}

/* Preemption by swap's copies: a request's pages of Llama-3.1-8B's 64 pools (K and V
 * of 32 layers, 32 KiB a page) out to the host pool and back at four sizes; swap_us
 * and swap_gbps are the least-squares line through the mean of both directions. */
static int calibrate_swap(const pkvk_ctx *ctx, const pkvk_ceilings *ce, pkv_calib *cal,
                          cJSON *fit) {
    enum { POOLS = 64, SIZES = 4 };
    const size_t page = 32768;
    const int32_t ns[SIZES] = {1, 8, 64, 256};
    double x[SIZES], y[SIZES], c0, c1, c00, c01, c11, sumsq;
    printf("host link: %.1f GB/s device to host, %.1f GB/s host to device (1 GiB pinned "
           "copies)\n  swap copy  pages     MiB    out ms  GB/s     in ms  GB/s\n",
           ce->d2h_gbps, ce->h2d_gbps);
    for (int i = 0; i < SIZES; i++) {
        float out, in;
        if (pkvk_time_swap(ctx, POOLS, page, ns[i], 7, &out, &in)) return -1;
        x[i] = (double)ns[i] * POOLS * page;
        y[i] = (out + in) * 0.5e-3;
        printf("  %15d %7.1f %9.3f %5.1f %9.3f %5.1f\n", ns[i], x[i] / (1 << 20), out,
               x[i] / (out * 1e6), in, x[i] / (in * 1e6));
    }
    gsl_fit_linear(x, 1, y, 1, SIZES, &c0, &c1, &c00, &c01, &c11, &sumsq);
    if (!(c1 > 0)) return -1;
    cal->swap_gbps = 1e-9 / c1;
    cal->swap_us = c0 > 0 ? c0 * 1e6 : 0;
    double worst = 0;
    for (int i = 0; i < SIZES; i++) {
        double r = fabs((cal->swap_us * 1e-6 + x[i] / (cal->swap_gbps * 1e9)) / y[i] - 1);
        worst = r > worst ? r : worst;
    }
    printf("  fit: swap_us %.1f, swap_gbps %.1f (largest relative error %.3f)\n", cal->swap_us,
           cal->swap_gbps, worst);
    cJSON *o = cJSON_AddObjectToObject(fit, "swap");
    cJSON_AddNumberToObject(o, "points", SIZES);
    cJSON_AddNumberToObject(o, "max_rel_error", worst);
    cJSON_AddNumberToObject(o, "link_d2h_gbps", ce->d2h_gbps);
    cJSON_AddNumberToObject(o, "link_h2d_gbps", ce->h2d_gbps);
    return 0;
}

/* C_min: a grid finds the basin, Brent's method the minimum inside it. */
static double fit_c_min(fit_ctx *f) {
    double best = 0.25, fb = sq_rel_error(best, f);
    for (double c = 0.25; c <= 32; c *= 1.25) {
        double v = sq_rel_error(c, f);
        if (v < fb) fb = v, best = c;
    }
    double lo = best / 1.25, hi = best * 1.25;
    if (!(sq_rel_error(lo, f) > fb && sq_rel_error(hi, f) > fb)) return best; /* at an edge */
    gsl_function fn = {sq_rel_error, f};
    gsl_min_fminimizer *m = gsl_min_fminimizer_alloc(gsl_min_fminimizer_brent);
    if (!m) return best;
    gsl_min_fminimizer_set(m, &fn, best, lo, hi);
    for (int it = 0; it < 100; it++) {
        gsl_min_fminimizer_iterate(m);
        if (gsl_min_test_interval(gsl_min_fminimizer_x_lower(m), gsl_min_fminimizer_x_upper(m),
                                  1e-4, 0) == GSL_SUCCESS)
            break;
    }
    best = gsl_min_fminimizer_x_minimum(m);
    gsl_min_fminimizer_free(m);
    return best;
}

/* The dense part's constants (engine/model.h) from a model's GEMMs alone at the widths
 * that occur, decode rows to a prefill chunk, and its prefill attention alone
 * (pkvsim bench model's measurement), into cal and the fit record. */
static int calibrate_dense(pkvk_ctx *ctx, const char *model, int reps, pkv_calib *cal, cJSON *fit) {
    static const int widths[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    pkv_config cfg;
    pkv_err e;
    if (pkv_model_preset_config(model, &cfg, &e)) {
        fprintf(stderr, "pkvsim calibrate: --model: %s\n", e.msg);
        return -1;
    }
    printf("dense part: %s's GEMMs alone and its prefill attention alone\n", model);
    FILE *outs[2] = {stdout, NULL};
    pkv_dense_fit d;
    int rc = pkv_measure_dense(ctx, &cfg.model, widths, sizeof widths / sizeof widths[0], reps, 0,
                               outs, &d);
    pkv_config_free(&cfg);
    if (rc) {
        fprintf(stderr, "pkvsim calibrate: %s's dense part: %s\n", model, pkvk_last_error());
        return -1;
    }
    pkv_dense_fit_apply(&d, cal);
    cJSON *o = cJSON_AddObjectToObject(fit, "dense");
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddNumberToObject(o, "bandwidth_points", d.points);
    return 0;
}

static int32_t fixed_splits(int32_t route_len, int32_t rows, void *ctx) {
    return *(int32_t *)ctx;
}

/* Time shape s's step over B rows of lengths lens (the sweep's shape index `shape`, its
 * group G): each built route at its planner's choice and, with forced, pkv_bucket and
 * pkv_workqueue at each forced split count (FP8 KV: the PersistentKV routes' own plans
 * only); each a point of pts (at most MAX_POINTS, *n of them) and a row of the table. */
static int sweep_shape(pkvk_ctx *ctx, pkv_calib *cal, const pkvk_shape *s, const int32_t *lens,
                       int B, int G, int shape, int forced, int reps, gsl_rng *r, point *pts,
                       int *n) {
    static const int32_t splits[] = {4, 16, 64};
    const int fp8 = s->kv_dtype == PKVK_FP8_E4M3, L = lens[0];
    pkv_kcase kc;
    pkv_planner pl;
    pkvk_plan fixed;
    pkvk_workspace *ws = NULL;
    char err[512] = "", name[40];
    snprintf(name, sizeof name, "G%d-B%d-%d%s", G, B, L, fp8 ? "-fp8" : "");
    int rc = 0;
    if (pkv_kcase_make(ctx, &kc, name, lens, B, 1, s, 0.5, 0, r, err, sizeof err) ||
        pkv_planner_init(&pl, s, cal, B, PKV_BUCKET_MODE_EXACT) ||
        pkvk_plan_init(&fixed, B, 64 * B * s->hkv + 64) ||
        pkvk_workspace_create(ctx, &ws, s, B, pl.plans[0].cap_tasks + 64 * B,
                              pl.plans[0].cap_tasks + 64 * B * s->hkv)) {
        fprintf(stderr, "pkvsim calibrate: %s\n", *err ? err : pkvk_last_error());
        pkv_kcase_free(&kc);
        return 1;
    }
    const int n_forced = forced ? 2 * (int)(sizeof splits / sizeof splits[0]) : 0;
    for (int run = 0; run < PKV_ROUTE_COUNT + n_forced && !rc && *n < MAX_POINTS; run++) {
        const pkvk_plan *p;
        if (run < PKV_ROUTE_COUNT && !pkvk_route_built((pkv_route)run)) continue;
        if (run < PKV_ROUTE_COUNT && fp8 && !pkv_route_has((pkv_route)run, PKV_RP_FP8_CAP))
            continue;
        if (run < PKV_ROUTE_COUNT) {
            rc = pkv_planner_build(&pl, (pkv_route)run, lens, B);
            p = &pl.plans[run];
        } else {
            int32_t S = splits[(run - PKV_ROUTE_COUNT) / 2], per[256];
            for (int i = 0; i < B; i++) per[i] = S;
            rc = (run - PKV_ROUTE_COUNT) % 2
                     ? pkvk_plan_workqueue(&fixed, PKV_ROUTE_WORKQUEUE, s, lens, per, B)
                     : pkvk_plan_bucket(&fixed, lens, lens, B, fixed_splits, &S);
            p = &fixed;
        }
        float ms;
        int launches;
        double mx, mean;
        if (!rc) rc = pkv_kcase_time(ctx, ws, &kc, p, reps, &ms, &launches, &mx, &mean);
        if (rc) {
            fprintf(stderr, "pkvsim calibrate: %s: %s\n", name, pkvk_last_error());
            break;
        }
        point *pt = &pts[(*n)++];
        pt->route = p->route;
        pt->shape = shape;
        pt->G = G;
        pt->planned = run < PKV_ROUTE_COUNT;
        pkv_cost_counters(cal, s, p, lens, 1, &pt->c);
        pt->t = ms * 1e-3;
        printf("| %d | %d | %d | %s%s | %d | %.1f | %.1f |\n", G, B, L, pkv_route_name(p->route),
               fp8 ? " (fp8)" : "", pt->c.max_splits, pt->t * 1e6,
               pkv_cost_time(cal, &pt->c) * 1e6);
    }
    pkvk_workspace_destroy(ws);
    pkvk_plan_free(&fixed);
    pkv_planner_free(&pl);
    pkv_kcase_free(&kc);
    return rc;
}

static void usage(void) {
    puts("usage: pkvsim calibrate [-o FILE] [--reps N] [--model NAME] [--groups LIST]\n"
         "Measures on the present GPU the read bandwidth (beta), the launch overhead (lambda),\n"
         "the SM count and the attention kernel's occupancy, times a sweep of isolated decode\n"
         "steps (B = 1..256 rows, 128..128K tokens, ragged lengths, every route, forced split\n"
         "counts; for each GQA group size G of --groups, default 1,2,4,8: 32 query heads\n"
         "over 32/G KV heads), fits C_min and a scale per route with GSL least squares and\n"
         "each route's structured model (route_model: GSL nonlinear least squares on two\n"
         "shapes in three, its error printed on the third, also per G, and with several\n"
         "groups one model per G as well: route_model_by_group), and writes a\n"
         "calibration file (default calibration.json) with the GPU's name, driver, date and\n"
         "the fit's residuals. At the calibration's own group (gqa_group) each shape is\n"
         "timed over FP8 KV too, the PersistentKV routes at their planner's choice, and the\n"
         "most one CTA streams there (kv_fp8_cta_gbps) fitted under the routes' models.\n"
         "It also times the copies of preemption by swap (swap_us, swap_gbps) and the\n"
         "dense part of the preset --model (default llama-3.1-8b; none: skip): its GEMMs\n"
         "alone at 1-8192 token rows (gemm_gbps, gemm_us, gemm_tflops) and its prefill\n"
         "attention alone (prefill_attn_tflops), and for a mixture of experts one MoE layer\n"
         "(moe_gemm_us, moe_gemm_share, moe_gemm_tflops_at), as pkvsim bench model does.\n"
         "Experiments use it with route.calibration; the route policy refuses a file made on\n"
         "another GPU model unless route.allow_other_gpu is true.");
}

int pkv_calibrate_main(int argc, char **argv) {
    const char *out = "calibration.json", *model = "llama-3.1-8b", *groups_s = "1,2,4,8";
    int reps = 10, groups[4], n_groups = 0;
    const pkv_cli_opt opts[] = {{"output", 'o', PKV_CLI_STRING, &out, 0},
                                {"reps", 'r', PKV_CLI_COUNT, &reps, 1000},
                                {"model", 'm', PKV_CLI_STRING, &model, 0},
                                {"groups", 'g', PKV_CLI_STRING, &groups_s, 0}};
    const int orc = pkv_cli_options("calibrate", argc, argv, opts, 4, usage);
    if (orc >= 0) return orc;
    /* --groups: distinct sizes of 1, 2, 4 and 8, in any order */
    for (const char *q = groups_s; *q;) {
        char *end;
        long G = strtol(q, &end, 10);
        int dup = 0;
        for (int i = 0; i < n_groups; i++) dup |= groups[i] == G;
        if (end == q || (G != 1 && G != 2 && G != 4 && G != 8) || dup || n_groups == 4 ||
            (*end && *end != ',') || (*end == ',' && !end[1])) {
            fprintf(stderr,
                    "pkvsim calibrate: --groups: \"%s\" is not a list of distinct GQA group "
                    "sizes 1, 2, 4 or 8 (as 1,2,4,8)\n",
                    groups_s);
            return 2;
        }
        groups[n_groups++] = (int)G;
        q = *end ? end + 1 : end;
    }
    if (n_groups == 0) {
        fprintf(stderr, "pkvsim calibrate: --groups: an empty list\n");
        return 2;
    }
    pkvk_device_info dev;
    pkvk_ceilings ceil_;
    int resident = 0;
    pkvk_ctx *ctx = NULL;
    if (pkvk_ctx_create(&ctx, 0) || pkvk_device_info_get(&dev) ||
        pkvk_measure_ceilings(ctx, &ceil_) || pkvk_occupancy(128, 4, &resident)) {
        fprintf(stderr, "pkvsim calibrate: needs a usable GPU: %s\n", pkvk_last_error());
        pkvk_ctx_destroy(ctx);
        return 1;
    }
    pkv_calib cal;
    pkv_calib_defaults(&cal);
    /* The gate on a step's context is not fitted: the H200 measurements put it at 4K
     * (bench/RESULTS.md: at B=1 8K the PersistentKV routes ran 12x faster than
     * ref_paged, so the study's 16K gate left that unused). */
    cal.min_context = PKV_CALIBRATE_MIN_CONTEXT;
    cal.beta = ceil_.read_gbps * 1e9;
    cal.lambda = ceil_.launch_us * 1e-6;
    cal.sm_count = dev.sm_count;
    cal.resident_ctas_per_sm = resident;
    printf("%s, %d SMs: read %.0f GB/s, launch %.2f us, %d attention CTAs per SM\n", dev.name,
           dev.sm_count, ceil_.read_gbps, ceil_.launch_us, resident);

    static point pts[MAX_POINTS], pts8[MAX_POINTS];
    int n = 0, n8 = 0, rc = 0;
    const int Bs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    const int32_t Ls[] = {128, 512, 2048, 4096, 8192, 32768, 131072};
    int shape = 0;
    /* FlashInfer's occupancy at the calibration's own group size (gqa_group), the one
     * written; each group's points are planned and counted at their own (its decode
     * kernel's CTAs per SM differ by G: planned at G = 4's, G = 1 and 2 failed the
     * mirror's check) */
    pkvk_shape s = {.hq = 32, .hkv = 32 / cal.gqa_group, .d = 128, .page_size = 16};
    pkv_calib_flashinfer_occupancy(&cal, &s);
    const int own_occupancy = cal.flashinfer_decode_ctas_per_sm;
    int occupancy[4];
    for (int gi = 0; gi < n_groups; gi++) {
        s.hkv = 32 / groups[gi];
        cal.flashinfer_decode_ctas_per_sm = own_occupancy;
        pkv_calib_flashinfer_occupancy(&cal, &s);
        occupancy[gi] = cal.flashinfer_decode_ctas_per_sm;
        if (n_groups > 1 && pkvk_flashinfer_built())
            cal.fi_ctas_group[pkv_calib_group_index(groups[gi])] = occupancy[gi];
    }
    gsl_rng *r = pkv_stream_create(7, PKV_STREAM_TENSORS);
    printf("| G | B | len | route | splits | time us | model us |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int gi = 0; gi < n_groups && !rc; gi++)
        for (size_t bi = 0; bi < sizeof Bs / sizeof Bs[0] && !rc; bi++)
            for (size_t li = 0; li < sizeof Ls / sizeof Ls[0] && !rc; li++) {
                const int B = Bs[bi], G = groups[gi];
                s.hkv = 32 / G;
                cal.flashinfer_decode_ctas_per_sm = occupancy[gi];
                int32_t L = Ls[li], lens[256];
                if ((int64_t)B * L > 262144) continue; /* keep the sweep to a few GB */
                for (int i = 0; i < B; i++) lens[i] = L - (37 * i) % (L / 2); /* ragged, distinct */
                shape++;
                rc = sweep_shape(ctx, &cal, &s, lens, B, G, shape, 1, reps, r, pts, &n);
                /* FP8 KV at the calibration's own group: the planner's own plans of the
                 * PersistentKV routes (kv_fp8_cta_gbps is fitted to them) */
                pkvk_shape s8 = s;
                s8.kv_dtype = PKVK_FP8_E4M3;
                if (!rc && G == cal.gqa_group)
                    rc = sweep_shape(ctx, &cal, &s8, lens, B, G, shape, 0, reps, r, pts8, &n8);
            }
    gsl_rng_free(r);
    cal.flashinfer_decode_ctas_per_sm = own_occupancy;
    cJSON *root = cJSON_CreateObject(), *fit = cJSON_CreateObject(), *rf = cJSON_CreateObject();
    cJSON *rs = cJSON_CreateObject();
    if (!rc && calibrate_swap(ctx, &ceil_, &cal, fit)) {
        fprintf(stderr, "pkvsim calibrate: swap copies: %s\n", pkvk_last_error());
        rc = 1;
    }
    if (!rc && strcmp(model, "none") != 0 && calibrate_dense(ctx, model, reps, &cal, fit)) rc = 1;
    pkvk_ctx_destroy(ctx);
    if (rc || n < 8) {
        fprintf(stderr, "pkvsim calibrate: the sweep did not complete\n");
        cJSON_Delete(root), cJSON_Delete(fit), cJSON_Delete(rf), cJSON_Delete(rs);
        return 1;
    }
    fit_ctx f = {pts, n, cal};
    cal.c_min = fit_c_min(&f);
    f.cal.c_min = cal.c_min;
    double rms_all = sqrt(sq_rel_error(cal.c_min, &f) / n);
    printf("fit over %d points: C_min %.3f, rms relative error %.3f before route scales\n", n,
           cal.c_min, rms_all);
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        double x[MAX_POINTS], w[MAX_POINTS], y[MAX_POINTS], c1, cov, sumsq;
        int m = 0;
        for (int i = 0; i < n; i++)
            if (pts[i].route == k && pts[i].planned) {
                x[m] = pkv_cost_time(&cal, &pts[i].c);
                y[m] = pts[i].t;
                w[m] = 1.0 / (pts[i].t * pts[i].t);
                m++;
            }
        if (m == 0 || gsl_fit_wmul(x, 1, w, 1, y, 1, (size_t)m, &c1, &cov, &sumsq)) continue;
        cal.route_scale[k] = c1;
        double sse = 0;
        for (int i = 0; i < m; i++)
            sse += ((c1 * x[i] - y[i]) / y[i]) * ((c1 * x[i] - y[i]) / y[i]);
        cJSON *o = cJSON_AddObjectToObject(rf, pkv_route_name((pkv_route)k));
        cJSON_AddNumberToObject(o, "points", m);
        cJSON_AddNumberToObject(o, "scale", c1);
        cJSON_AddNumberToObject(o, "rms_rel_error", sqrt(sse / m));
        cJSON_AddNumberToObject(rs, pkv_route_name((pkv_route)k), c1);
        printf("  %-14s scale %.3f, rms relative error %.3f over %d points\n",
               pkv_route_name((pkv_route)k), c1, sqrt(sse / m), m);
    }
    /* The structured model of each route: fitted on two shapes in three, checked on the
     * third. */
    cJSON *rmf = cJSON_CreateObject();
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        static pkv_counters kf[MAX_POINTS], kt[MAX_POINTS];
        static double tf[MAX_POINTS], tt[MAX_POINTS];
        size_t nf = 0, nt = 0;
        for (int i = 0; i < n; i++) {
            if (pts[i].route != k) continue;
            if (pts[i].shape % 3 == 0)
                kt[nt] = pts[i].c, tt[nt++] = pts[i].t;
            else
                kf[nf] = pts[i].c, tf[nf++] = pts[i].t;
        }
        pkv_route_model m;
        pkv_err fe;
        if (nf == 0) continue;
        if (pkv_fit_route(&cal, (pkv_route)k, kf, tf, nf, &m, &fe)) {
            printf("  %-14s structured model not fitted: %s\n", pkv_route_name((pkv_route)k),
                   fe.msg);
            continue;
        }
        double f_mape, f_sum, t_mape = NAN, t_sum = NAN;
        pkv_fit_error(&cal, (pkv_route)k, &m, kf, tf, nf, &f_mape, &f_sum);
        if (nt) pkv_fit_error(&cal, (pkv_route)k, &m, kt, tt, nt, &t_mape, &t_sum);
        cal.route_model[k] = m; /* host_us 0: a step's device time only */
        printf("  %-14s structured model: MAPE %.1f%% over %zu points, %.1f%% over %zu held out "
               "(summed %+.1f%%)\n",
               pkv_route_name((pkv_route)k), 100 * f_mape, nf, 100 * t_mape, nt, 100 * t_sum);
        cJSON *o = cJSON_AddObjectToObject(rmf, pkv_route_name((pkv_route)k));
        cJSON_AddNumberToObject(o, "points", (double)nf);
        cJSON_AddNumberToObject(o, "mape", f_mape);
        cJSON_AddNumberToObject(o, "held_out", (double)nt);
        if (nt) cJSON_AddNumberToObject(o, "mape_held_out", t_mape);
        if (nt) cJSON_AddNumberToObject(o, "sum_err_held_out", t_sum);
        /* The held-out error per GQA group size (the model has no term of its own for G),
         * and that of a model fitted to the group's points alone (route_model_by_group). */
        cJSON *pg =
            n_groups > 1 && nt ? cJSON_AddObjectToObject(o, "mape_held_out_by_group") : NULL;
        cJSON *po = pg ? cJSON_AddObjectToObject(o, "mape_held_out_own_group") : NULL;
        for (int gi = 0; pg && gi < n_groups; gi++) {
            static pkv_counters kg[MAX_POINTS];
            static double tg[MAX_POINTS];
            size_t ng = 0, nfg = 0;
            for (int i = 0; i < n; i++) {
                if (pts[i].route != k || pts[i].G != groups[gi]) continue;
                if (pts[i].shape % 3 == 0)
                    kt[ng] = pts[i].c, tt[ng++] = pts[i].t;
                else
                    kg[nfg] = pts[i].c, tg[nfg++] = pts[i].t;
            }
            if (!ng) continue;
            double g_mape, g_sum, o_mape, o_sum;
            char key[8];
            pkv_fit_error(&cal, (pkv_route)k, &m, kt, tt, ng, &g_mape, &g_sum);
            snprintf(key, sizeof key, "%d", groups[gi]);
            cJSON_AddNumberToObject(pg, key, g_mape);
            printf("    G=%d: %.1f%% over %zu held out (summed %+.1f%%)", groups[gi], 100 * g_mape,
                   ng, 100 * g_sum);
            pkv_route_model own;
            if (pkv_fit_route(&cal, (pkv_route)k, kg, tg, nfg, &own, &fe)) {
                printf("; its own model not fitted: %s\n", fe.msg);
                continue;
            }
            pkv_fit_error(&cal, (pkv_route)k, &own, kt, tt, ng, &o_mape, &o_sum);
            cal.group_model[pkv_calib_group_index(groups[gi])][k] = own;
            cJSON_AddNumberToObject(po, key, o_mape);
            printf("; its own model %.1f%% (summed %+.1f%%)\n", 100 * o_mape, 100 * o_sum);
        }
    }
    /* FP8 KV: the per-CTA cap under the fitted models, the group's own as a run takes them */
    if (n8) {
        static pkv_counters k8[PKV_ROUTE_COUNT][MAX_POINTS];
        static double t8[PKV_ROUTE_COUNT][MAX_POINTS];
        pkv_counters *kp[PKV_ROUTE_COUNT];
        const double *tp[PKV_ROUTE_COUNT];
        size_t c8[PKV_ROUTE_COUNT] = {0};
        for (int i = 0; i < n8; i++) {
            const int k = pts8[i].route;
            k8[k][c8[k]] = pts8[i].c, t8[k][c8[k]++] = pts8[i].t;
        }
        for (int k = 0; k < PKV_ROUTE_COUNT; k++) kp[k] = k8[k], tp[k] = t8[k];
        pkv_calib g = cal;
        pkv_calib_use_group(&g, cal.gqa_group);
        double bps, err[2];
        pkv_err fe;
        cJSON *o = cJSON_AddObjectToObject(fit, "kv_fp8");
        cJSON_AddNumberToObject(o, "points", n8);
        if (pkv_fit_fp8_cap(&g, kp, tp, c8, &bps, err, &fe)) {
            printf("FP8 KV: %d points, kv_fp8_cta_gbps not fitted: %s\n", n8, fe.msg);
        } else {
            printf("FP8 KV: %d points at G=%d; kv_fp8_cta_gbps %.2f (default %.2f): summed "
                   "error %+.2f%% (%+.2f%% at the default)\n",
                   n8, cal.gqa_group, bps / 1e9, cal.kv_fp8_cta_gbps / 1e9, 100 * err[1],
                   100 * err[0]);
            cal.kv_fp8_cta_gbps = bps;
            cJSON_AddNumberToObject(o, "sum_err", err[1]);
        }
    }
    char when[32], driver[64];
    pkv_cli_utc(when, "%Y-%m-%d");
    snprintf(driver, sizeof driver, "CUDA driver API %d.%d", dev.driver_version / 1000,
             dev.driver_version % 1000 / 10);
    snprintf(cal.gpu_name, sizeof cal.gpu_name, "%s", dev.name);
    snprintf(cal.driver, sizeof cal.driver, "%s", driver);
    snprintf(cal.date, sizeof cal.date, "%s", when);
    cal.placeholder = false;
    pkv_keys_write(pkv_calib_keys(), "", &cal, root);
    pkv_calib_route_model_json(&cal, root);
    pkv_calib_gemm_rates_json(&cal, root);
    cJSON_AddStringToObject(
        root, "note",
        "Measured by pkvsim calibrate: beta, launch_us, sm_count and "
        "resident_ctas_per_sm measured; c_min, route_scale, route_model "
        "(device time; its host_us 0), kv_fp8_cta_gbps (over FP8 KV), "
        "swap_us and swap_gbps fitted; gemm_gbps, gemm_us, gemm_tflops, gemm_tflops_at and "
        "prefill_attn_tflops fitted to a model's GEMMs and prefill "
        "attention alone (fit.dense; unless --model none), moe_gemm_us, moe_gemm_share "
        "and moe_gemm_tflops_at to a mixture's layer alone (0 for a dense model: the dense GEMMs' "
        "constants); "
        "min_context_tokens set to 4096 (not fitted); the other gates, "
        "margins and split constants are the defaults.");
    cJSON_AddItemToObject(root, "route_scale", rs);
    cJSON_AddNumberToObject(fit, "points", n);
    cJSON_AddNumberToObject(fit, "rms_rel_error_before_scales", rms_all);
    cJSON_AddNumberToObject(fit, "reps", reps);
    cJSON_AddStringToObject(fit, "pkvsim_revision", PKV_GIT_REV);
    cJSON_AddItemToObject(fit, "routes", rf);
    cJSON_AddItemToObject(fit, "route_model", rmf);
    cJSON_AddItemToObject(root, "fit", fit);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text || pkv_write_atomic(out, text)) {
        fprintf(stderr, "pkvsim calibrate: cannot write %s: %s\n", out,
                text ? strerror(errno) : "out of memory");
        free(text);
        return 1;
    }
    free(text);
    printf("wrote %s\n", out);
    return 0;
}
