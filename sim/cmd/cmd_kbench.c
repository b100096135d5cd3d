/* pkvsim bench kernels: each route on isolated decode steps, timed with the L2
 * flushed before every call (plan upload excluded, merge included), against the
 * ceilings measured in the same run. */
#include "pkv_gitrev.h"
#include "cli.h"
#include "cmd_kbench.h"
#include "kcase.h"
#include "cost.h"
#include "planner.h"
#include "pagetable.h"
#include "rng.h"

#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_float.h>

enum { MAX_ROWS = 256, MAX_CASES = 32, MAX_SWEEP = 16 };

typedef struct bench_case {
    char name[32];
    int32_t lens[MAX_ROWS];
    int n;
} bench_case;

static const char *DEFAULT_CASES =
    "b1-8k:8K;b1-32k:32K;b1-64k:64K;b1-128k:128K;b4-32k:32Kx4;b8-32k:32Kx8;"
    "b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K;"
    "b8-uniform:8K,16K,24K,32K,40K,48K,56K,64K;b32-4k:4Kx32;b64-4k:4Kx64";

/* "name:LEN[,LEN...]" separated by ';'; LEN is N, NK (x1024), with an optional xR. */
static int parse_cases(const char *spec, bench_case *c, int *n_cases) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec);
    *n_cases = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok;
         tok = strtok_r(NULL, ";", &save)) {
        if (*n_cases == MAX_CASES) return -1;
        bench_case *bc = &c[(*n_cases)++];
        char *colon = strchr(tok, ':');
        if (!colon || colon == tok) return -1;
        *colon = 0;
        snprintf(bc->name, sizeof bc->name, "%s", tok);
        bc->n = 0;
        for (char *s2 = NULL, *l = strtok_r(colon + 1, ",", &s2); l; l = strtok_r(NULL, ",", &s2)) {
            char *end;
            long v = strtol(l, &end, 10);
            if (*end == 'K' || *end == 'k') v *= 1024, end++;
            long rep = 1;
            if (*end == 'x') rep = strtol(end + 1, &end, 10);
            if (*end || v < 1 || v > (1L << 24) || rep < 1 || bc->n + rep > MAX_ROWS) return -1;
            for (long r = 0; r < rep; r++) bc->lens[bc->n++] = (int32_t)v;
        }
        if (bc->n == 0) return -1;
    }
    return *n_cases ? 0 : -1;
}

static int32_t fixed_splits(int32_t route_len, int32_t rows, void *ctx) {
    return *(int32_t *)ctx;
}

typedef struct bench_out {
    FILE *f;
} bench_out;

static void emit(bench_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(bench_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    if (o->f) vfprintf(o->f, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void usage(void) {
    printf("usage: pkvsim bench kernels [--cases SPEC] [--splits LIST] [--reps N]\n"
           "                            [--holes F] [--share TOKENS] [--calibration FILE]\n"
           "                            [--heads HQ/HKV] [--head-dim D] [--dtype T]\n"
           "                            [--kv-dtype T] [--q-len N] [--out FILE]\n"
           "Times every route (ref_paged, pkv_bucket, pkv_workqueue, pkv_fused, and flashinfer,\n"
           "flashinfer_tc where built) on isolated decode steps of shape Hq=32 Hkv=8 d=128\n"
           "(--heads HQ/HKV for another group: 1 to 8 query heads per KV head;\n"
           "FlashInfer's paths run 1, 2, 4 or 8)\n"
           "page 16, median of N calls (default 30) with the L2 flushed before each, plan\n"
           "upload excluded, merge included; reports KV GB/s against the read ceiling\n"
           "measured in the same run, launches, CTAs, merge bytes and the error against the\n"
           "FP32 GPU reference. A second table sets each case's fastest PersistentKV route\n"
           "against the read-only streaming kernel over the same bytes (one launch, L2\n"
           "flushed); with FlashInfer built, a last one compares it with the faster of\n"
           "FlashInfer's two paths. The header also gives the launch floor from an idle\n"
           "GPU: one launch and its wait, and the least host overhead of a two-launch step.\n"
           "  --cases SPEC   name:LEN[,LEN...] cases separated by ';'; LEN like 8K, 32Kx4\n"
           "                 (default: %s)\n"
           "  --splits LIST  also run pkv_bucket and pkv_workqueue at these split counts\n"
           "  --holes F      fraction of the page universe left unused (default 0.5)\n"
           "  --share TOKENS every row's first TOKENS (whole pages) are row 0's pages, as\n"
           "                 prefix caching maps a shared prompt (default 0); KV GB/s counts\n"
           "                 each row's reads, so above the read ceiling it shows L2 reuse\n"
           "  --calibration  planner constants (default: built-in placeholders)\n"
           "  --heads HQ/HKV query and KV heads (default 32/8)\n"
           "  --head-dim D   64, 128 (default) or 256 (FlashInfer's paths are built for\n"
           "                 128 only: no FlashInfer table at another)\n"
           "  --dtype T      fp16 (default) or bf16: Q, K, V and O (FlashInfer's paths in\n"
           "                 the same type)\n"
           "  --kv-dtype T   the KV cache's: --dtype's (default) or fp8_e4m3 (a scale per\n"
           "                 page and KV head, all 1 as vLLM's default, so that FlashInfer's\n"
           "                 FP8 path, one scale for the cache, runs the same pool; KV GB/s\n"
           "                 counts its bytes, scales included)\n"
           "  --q-len N      query tokens a row (default 1, a decode step): a speculative\n"
           "                 decoding verify step's k + 1, each token attending the keys up\n"
           "                 to its own position; PersistentKV's routes pack the tokens beside\n"
           "                 the group's heads (8 or 16 MMA rows a CTA), FlashInfer's routes\n"
           "                 run it on its prefill path (both the same kernel); CTAs and merge\n"
           "                 KB count the query blocks or tiles and tokens as the cost model does\n"
           "  --out FILE     also write the table to FILE (default bench_kernels.txt)\n",
           DEFAULT_CASES);
}

int pkv_bench_kernels_main(int argc, char **argv) {
    const char *cases = DEFAULT_CASES, *out = "bench_kernels.txt", *calfile = NULL;
    const char *holes_s = NULL, *splits_s = NULL, *heads_s = NULL, *dtype_s = "fp16",
               *kv_dtype_s = NULL;
    int reps = 30, n_sweep = 0, share = 0, hd = 128, q_len = 1;
    int32_t sweep[MAX_SWEEP];
    double holes = 0.5;
    const pkv_cli_opt opts[] = {{"cases", 'c', PKV_CLI_STRING, &cases, 0},
                                {"splits", 's', PKV_CLI_STRING, &splits_s, 0},
                                {"reps", 'r', PKV_CLI_COUNT, &reps, 10000},
                                {"holes", 'H', PKV_CLI_STRING, &holes_s, 0},
                                {"out", 'o', PKV_CLI_STRING, &out, 0},
                                {"calibration", 'C', PKV_CLI_STRING, &calfile, 0},
                                {"share", 'S', PKV_CLI_COUNT, &share, 1 << 24},
                                {"heads", 0, PKV_CLI_STRING, &heads_s, 0},
                                {"dtype", 0, PKV_CLI_STRING, &dtype_s, 0},
                                {"kv-dtype", 0, PKV_CLI_STRING, &kv_dtype_s, 0},
                                {"head-dim", 0, PKV_CLI_COUNT, &hd, 256},
                                {"q-len", 0, PKV_CLI_COUNT, &q_len, 64}};
    const int orc = pkv_cli_options("bench kernels", argc, argv, opts, 12, usage);
    if (orc >= 0) return orc;
    const int dt = !strcmp(dtype_s, "fp16") ? PKVK_FP16 : !strcmp(dtype_s, "bf16") ? PKVK_BF16 : -1;
    if (dt < 0) {
        fprintf(stderr, "pkvsim bench kernels: --dtype: \"%s\" is not fp16 or bf16\n", dtype_s);
        return 2;
    }
    const int kdt = !kv_dtype_s                       ? dt
                    : !strcmp(kv_dtype_s, "fp8_e4m3") ? PKVK_FP8_E4M3
                    : !strcmp(kv_dtype_s, dtype_s)    ? dt
                                                      : -1;
    if (kdt < 0) {
        fprintf(stderr, "pkvsim bench kernels: --kv-dtype: \"%s\" is not %s or fp8_e4m3\n",
                kv_dtype_s, dtype_s);
        return 2;
    }
    int hq = 32, hkv = 8;
    if (heads_s && (sscanf(heads_s, "%d/%d", &hq, &hkv) != 2 || hkv < 1 || hq < hkv || hq % hkv ||
                    hq / hkv > 8 || hq > 256)) {
        fprintf(stderr,
                "pkvsim bench kernels: --heads: \"%s\" is not HQ/HKV with 1 to 8 query heads "
                "per KV head (32/8, 28/4)\n",
                heads_s);
        return 2;
    }
    if (hd != 64 && hd != 128 && hd != 256) {
        fprintf(stderr, "pkvsim bench kernels: --head-dim: %d is not 64, 128 or 256\n", hd);
        return 2;
    }
    char *end;
    if (holes_s && (holes = strtod(holes_s, &end), *end || !(holes >= 0 && holes < 0.95))) {
        fprintf(stderr, "pkvsim bench kernels: --holes: \"%s\" is not in [0, 0.95)\n", holes_s);
        return 2;
    }
    if (splits_s) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", splits_s);
        for (char *sv = NULL, *tk = strtok_r(buf, ",", &sv); tk; tk = strtok_r(NULL, ",", &sv)) {
            long v = strtol(tk, &end, 10);
            if (*end || v < 1 || v > 4096 || n_sweep == MAX_SWEEP) {
                fprintf(stderr, "pkvsim bench kernels: --splits: bad list \"%s\"\n", splits_s);
                return 2;
            }
            sweep[n_sweep++] = (int32_t)v;
        }
    }
    static bench_case bc[MAX_CASES];
    int n_cases;
    if (parse_cases(cases, bc, &n_cases)) {
        fprintf(stderr, "pkvsim bench kernels: --cases: cannot parse \"%s\" (see --help)\n", cases);
        return 2;
    }
    for (int ci = 0; ci < n_cases; ci++)
        for (int i = 0; i < bc[ci].n; i++)
            if (bc[ci].lens[i] < q_len) {
                fprintf(stderr,
                        "pkvsim bench kernels: --q-len %d: case %s has a row of %d tokens (a "
                        "verify row holds its query tokens)\n",
                        q_len, bc[ci].name, bc[ci].lens[i]);
                return 2;
            }
    pkv_calib cal;
    pkv_err e;
    if (calfile ? pkv_calib_load(&cal, calfile, pkv_calib_section(false), &e)
                : (pkv_calib_defaults(&cal), 0)) {
        fprintf(stderr, "pkvsim bench kernels: %s\n", e.msg);
        return 1;
    }
    pkvk_device_info dev;
    pkvk_ctx *ctx = NULL;
    if (pkvk_ctx_create(&ctx, 0) || pkvk_device_info_get(&dev)) {
        fprintf(stderr, "pkvsim bench kernels: no usable GPU: %s\n", pkvk_last_error());
        pkvk_ctx_destroy(ctx);
        pkv_calib_free(&cal);
        return 1;
    }
    pkv_out po;
    bench_out bo = {pkv_cli_out_open("bench kernels", &po, out)};
    if (!bo.f) {
        pkvk_ctx_destroy(ctx);
        pkv_calib_free(&cal);
        return 1;
    }
    pkvk_ceilings ceil_;
    if (pkvk_measure_ceilings(ctx, &ceil_)) {
        fprintf(stderr, "pkvsim bench kernels: measuring ceilings: %s\n", pkvk_last_error());
        pkv_cli_out_close("bench kernels", &po, 1);
        pkvk_ctx_destroy(ctx);
        pkv_calib_free(&cal);
        return 1;
    }
    char when[32];
    pkv_cli_utc(when, "%Y-%m-%d %H:%M UTC");
    emit(&bo,
         "# pkvsim bench kernels, %s, %s (%d SMs), %s; Hq %d Hkv %d d %d page 16 %s KV %s; %d "
         "query token%s a row%s\n",
         when, dev.name, dev.sm_count, PKV_GIT_REV, hq, hkv, hd, pkvk_dtype_names[dt],
         pkvk_dtype_names[kdt], q_len, q_len > 1 ? "s" : "",
         q_len > 1 ? " (verify steps, causal among them)" : "");
    emit(&bo,
         "# ceilings: D2D copy %.0f GB/s (read+write), read-only stream %.0f GB/s, "
         "empty launch %.2f us; median of %d calls, L2 flushed, holes %.2f, shared prefix "
         "%d tokens\n",
         ceil_.copy_gbps, ceil_.read_gbps, ceil_.launch_us, reps, holes, share);
    emit(&bo,
         "# from an idle GPU: one empty launch and its wait %.2f us of host wall; least host "
         "overhead of a two-launch step (append, attention) %.2f us\n",
         ceil_.idle_launch_us, ceil_.step_floor_us);
    emit(&bo, "| case | route | splits | time us | KV GB/s | %% of read | launches | CTAs | "
              "merge KB | max err | mean err |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    pkvk_shape s = {.hq = hq, .hkv = hkv, .d = hd, .page_size = 16, .dtype = dt, .kv_dtype = kdt};
    const int g = hq / hkv, fi_g = hd == 128 && pkv_flashinfer_group(g);
    if (fi_g) pkv_calib_flashinfer_occupancy(&cal, &s);
    gsl_rng *r = pkv_stream_create(1, PKV_STREAM_TENSORS);
    int rc = 0;
    /* Per case, the fastest route of each family at its own split choice. */
    enum { OWN_PKV, OWN_ANY, FI_ANY, FAMILIES };
    double best[MAX_CASES][FAMILIES], stream_ms[MAX_CASES], case_bytes[MAX_CASES];
    const char *best_r[MAX_CASES][FAMILIES];
    for (int ci = 0; ci < n_cases && rc == 0; ci++) {
        pkv_kcase d;
        char err[512] = "";
        pkv_planner pl;
        pkvk_workspace *ws = NULL;
        if (pkv_kcase_make(ctx, &d, bc[ci].name, bc[ci].lens, bc[ci].n, q_len, &s, holes, share, r,
                           err, sizeof err) ||
            pkv_planner_init(&pl, &s, &cal, bc[ci].n, PKV_BUCKET_MODE_EXACT)) {
            fprintf(stderr, "pkvsim bench kernels: %s\n", *err ? err : "out of memory");
            pkv_kcase_free(&d);
            rc = 1;
            break;
        }
        /* Slots and tasks of any plan here are bounded by the largest sweep count. */
        int32_t most = 4096;
        for (int k = 0; k < n_sweep; k++)
            if (sweep[k] > most) most = sweep[k];
        int32_t cap = bc[ci].n * most + pl.plans[0].cap_tasks;
        pkvk_plan fixed;
        /* A verify step's states: q_len a slot (the fused route's counters: a row's). */
        if (pkvk_workspace_create(ctx, &ws, &s, bc[ci].n * q_len, cap * q_len, cap * s.hkv) ||
            pkvk_plan_init(&fixed, bc[ci].n, cap * s.hkv)) {
            fprintf(stderr, "pkvsim bench kernels: workspace: %s\n", pkvk_last_error());
            rc = 1;
        }
        int64_t tokens = 0;
        for (int i = 0; i < bc[ci].n; i++) tokens += bc[ci].lens[i];
        /* K and V of every token, and FP8's scales (K's, V's) once per page and head. */
        double kv_bytes = (double)tokens * s.hkv * s.d * 2 * pkvk_dtype_bytes(kdt);
        if (kdt == PKVK_FP8_E4M3)
            for (int i = 0; i < bc[ci].n; i++)
                kv_bytes += 8.0 * s.hkv * ((bc[ci].lens[i] + s.page_size - 1) / s.page_size);
        /* The streaming kernel over as many bytes: what one launch can reach at this
         * size, its own ramp and launch included. */
        float sms = 0;
        if (rc == 0 && pkvk_time_read(ctx, (size_t)kv_bytes, reps, &sms)) {
            fprintf(stderr, "pkvsim bench kernels: %s: read stream: %s\n", bc[ci].name,
                    pkvk_last_error());
            rc = 1;
        }
        stream_ms[ci] = sms, case_bytes[ci] = kv_bytes;
        /* Runs: each route at its planner's choice, then the sweep. */
        for (int f = 0; f < FAMILIES; f++) best[ci][f] = INFINITY;
        for (int run = 0; run < PKV_ROUTE_COUNT + 2 * n_sweep && rc == 0; run++) {
            const pkvk_plan *p;
            char splits[16] = "auto";
            if (run < PKV_ROUTE_COUNT && !pkvk_route_built((pkv_route)run)) continue;
            if (run < PKV_ROUTE_COUNT && pkv_route_has((pkv_route)run, PKV_RP_FI_SHAPES) && !fi_g)
                continue;
            if (run < PKV_ROUTE_COUNT) {
                pl.plans[run].q_len = q_len; /* FlashInfer's: a verify on its prefill path */
                rc = pkv_planner_build(&pl, (pkv_route)run, bc[ci].lens, bc[ci].n);
                p = &pl.plans[run];
            } else {
                int k = (run - PKV_ROUTE_COUNT) / 2;
                int32_t S = sweep[k], per_row[MAX_ROWS];
                for (int i = 0; i < bc[ci].n; i++) per_row[i] = S;
                snprintf(splits, sizeof splits, "%d", S);
                rc = (run - PKV_ROUTE_COUNT) % 2 == 0
                         ? pkvk_plan_bucket(&fixed, bc[ci].lens, bc[ci].lens, bc[ci].n,
                                            fixed_splits, &S)
                         : pkvk_plan_workqueue(&fixed, PKV_ROUTE_WORKQUEUE, &s, bc[ci].lens,
                                               per_row, bc[ci].n);
                p = &fixed;
            }
            if (rc) {
                fprintf(stderr, "pkvsim bench kernels: planning failed (status %d)\n", rc);
                break;
            }
            pkv_counters c;
            pkv_cost_counters(&cal, &s, p, bc[ci].lens, q_len, &c);
            if (strcmp(splits, "auto") == 0) snprintf(splits, sizeof splits, "%d", c.max_splits);
            float ms = 0;
            int launches = 0;
            double mx = 0, mean = 0;
            rc = pkv_kcase_time(ctx, ws, &d, p, reps, &ms, &launches, &mx, &mean);
            if (rc) {
                fprintf(stderr, "pkvsim bench kernels: %s %s: %s\n", bc[ci].name,
                        pkv_route_name(p->route), pkvk_last_error());
                break;
            }
            double gbps = kv_bytes / (ms * 1e-3) / 1e9;
            if (run < PKV_ROUTE_COUNT) {
                int fi = pkv_route_family_of((pkv_route)run) == PKV_FAMILY_FI; /* its column */
                int pkv = pkv_route_role_of((pkv_route)run) != PKV_ROLE_BASELINE;
                for (int f = 0; f < FAMILIES; f++)
                    if ((f == FI_ANY ? fi : f == OWN_PKV ? pkv : !fi) && ms < best[ci][f])
                        best[ci][f] = ms, best_r[ci][f] = pkv_route_name((pkv_route)run);
            }
            emit(&bo,
                 "| %s | %s | %s%s | %.1f | %.0f | %.1f%% | %d | %lld | %.0f | %.2e | %.2e |\n",
                 bc[ci].name, pkv_route_name(p->route), splits, run < PKV_ROUTE_COUNT ? "" : "*",
                 ms * 1e3, gbps, 100 * gbps / ceil_.read_gbps, launches, (long long)c.ctas,
                 c.merge_bytes / 1024.0, mx, mean);
            if (!pkv_kcase_ok(&d, mx, mean)) {
                fprintf(stderr, "pkvsim bench kernels: %s %s: error beyond tolerance\n",
                        bc[ci].name, pkv_route_name(p->route));
                rc = 1;
            }
        }
        pkvk_plan_free(&fixed);
        pkvk_workspace_destroy(ws);
        pkv_planner_free(&pl);
        pkv_kcase_free(&d);
    }
    emit(&bo, "# splits marked * are forced by --splits; FlashInfer routes: %s\n",
         pkvk_flashinfer_built() ? "flashinfer-python 0.7.4 headers" : "not built");
    if (rc == 0) {
        /* The share of the read ceiling a single streaming launch itself reaches over
         * each case's bytes bounds what any one-step kernel can reach there. */
        emit(&bo, "\n| case | KV MB | read stream at this size us | %% of read ceiling | best "
                  "PersistentKV us | %% of read ceiling | %% of the stream at this size "
                  "|\n|---|---|---|---|---|---|---|\n");
        for (int ci = 0; ci < n_cases; ci++) {
            double ceil_ms = case_bytes[ci] / (ceil_.read_gbps * 1e9) * 1e3;
            emit(&bo, "| %s | %.1f | %.1f | %.1f%% | %.1f | %.1f%% | %.1f%% |\n", bc[ci].name,
                 case_bytes[ci] / 1e6, stream_ms[ci] * 1e3, 100 * ceil_ms / stream_ms[ci],
                 best[ci][OWN_PKV] * 1e3, 100 * ceil_ms / best[ci][OWN_PKV],
                 100 * stream_ms[ci] / best[ci][OWN_PKV]);
        }
    }
    if (rc == 0 && pkvk_flashinfer_built() && fi_g) {
        /* The study's claim is always against the faster of FlashInfer's two paths (which
         * run 1, 2, 4 or 8 query heads per KV head: no table for another group). */
        emit(&bo, "\n| case | faster FlashInfer | us | best PersistentKV | us | speedup | best "
                  "pkvsim route | us | speedup |\n|---|---|---|---|---|---|---|---|---|\n");
        for (int ci = 0; ci < n_cases; ci++)
            emit(&bo, "| %s | %s | %.1f | %s | %.1f | %.3fx | %s | %.1f | %.3fx |\n", bc[ci].name,
                 best_r[ci][FI_ANY], best[ci][FI_ANY] * 1e3, best_r[ci][OWN_PKV],
                 best[ci][OWN_PKV] * 1e3, best[ci][FI_ANY] / best[ci][OWN_PKV], best_r[ci][OWN_ANY],
                 best[ci][OWN_ANY] * 1e3, best[ci][FI_ANY] / best[ci][OWN_ANY]);
    }
    gsl_rng_free(r);
    rc = pkv_cli_out_close("bench kernels", &po, rc);
    pkvk_ctx_destroy(ctx);
    pkv_calib_free(&cal);
    return rc;
}
