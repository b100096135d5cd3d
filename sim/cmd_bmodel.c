/* pkvsim bench model: a served model's GEMMs timed alone on the GPU, one shape at a
 * time over the token widths that occur (decode rows to prefill chunks), against the
 * same run's read ceiling and 8192^3 GEMM throughput; and the dense-part constants
 * of the calibration fitted from them (gemm_gbps, gemm_us, gemm_tflops). */
#include "pkv_gitrev.h"
#include "cli.h"
#include "cmd_kbench.h"
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_fit.h>

enum { MAX_WIDTHS = 16 };

static const char *HELP =
    "usage: pkvsim bench model [--model NAME] [--rows LIST] [--reps N] [--out FILE]\n"
    "  Times each GEMM of one layer of the model (QKV, O, gate+up, down) and its LM head\n"
    "  alone (cuBLAS, L2 flushed, median of N) at each width of LIST (token rows,\n"
    "  default 1,8,64,256,1024,2048,4096,8192), and prints per width the whole model's\n"
    "  GEMM time (layers x the four + the head, the head at most 256 rows), the\n"
    "  weights over the same run's read ceiling, and the FLOP rate against the same\n"
    "  run's 8192^3 GEMM; then gemm_gbps and gemm_us fitted over the widths <= 64\n"
    "  (least squares of time on bytes) and gemm_tflops from the widths >= 2048.\n"
    "  --model: a preset of experiments/models/ (default llama-3.1-8b); --out: also\n"
    "  write the table there (default: stdout only).";

int pkv_bench_model_main(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"rows", required_argument, 0, 'r'},
        {"reps", required_argument, 0, 'n'},  {"out", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *model = "llama-3.1-8b", *out = NULL, *rows_s = "1,8,64,256,1024,2048,4096,8192";
    int reps = 20, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:r:n:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            model = optarg;
            break;
        case 'r':
            rows_s = optarg;
            break;
        case 'n':
            if (pkv_cli_parse_count("bench model", "--reps", optarg, 10000, &reps)) return 2;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            puts(HELP);
            return 0;
        default:
            fputs("pkvsim bench model: see --help\n", stderr);
            return 2;
        }
    }
    int widths[MAX_WIDTHS], nw = 0;
    for (const char *p = rows_s; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 8192 || nw == MAX_WIDTHS || (*end && *end != ',')) {
            fprintf(stderr,
                    "pkvsim bench model: --rows: \"%s\" is not a list of up to %d widths in "
                    "1..8192\n",
                    rows_s, MAX_WIDTHS);
            return 2;
        }
        widths[nw++] = (int)v;
        p = *end ? end + 1 : end;
    }
    /* The preset through the experiment parser, so that it is checked as a run's is. */
    char *text = malloc(512);
    if (!text) return 1;
    snprintf(text, 512,
             "{\"model\": \"%s\", \"workload\": {\"arrival\": {\"process\": \"closed\", "
             "\"concurrency\": 1}, \"num_requests\": 1}}",
             model);
    pkv_config cfg;
    pkv_err e;
    if (pkv_config_parse(&cfg, text, "bench model", &e)) {
        fprintf(stderr, "pkvsim bench model: %s\n", e.msg);
        return 2;
    }
    const pkv_model *md = &cfg.model;
    if (!pkv_model_dense(md)) {
        fprintf(stderr, "pkvsim bench model: %s has no dense part\n", md->name);
        pkv_config_free(&cfg);
        return 2;
    }
    pkvk_shape as = pkv_model_attn_shape(md);
    pkvk_model_shape s = pkv_model_gpu_shape(md);
    pkvk_model *m = NULL;
    pkvk_ceilings ceil;
    float sq_ms;
    pkvk_ctx *ctx = NULL;
    int rc = pkvk_ctx_create(&ctx, 0);
    if (!rc) rc = pkvk_measure_ceilings(ctx, &ceil);
    if (!rc) rc = pkvk_time_square_gemm(ctx, 8192, reps, &sq_ms);
    if (!rc) rc = pkvk_model_create(ctx, &m, &s, 8192, 16, 16, 1);
    if (rc) {
        fprintf(stderr, "pkvsim bench model: %s\n", pkvk_last_error());
        pkvk_model_destroy(m);
        pkvk_ctx_destroy(ctx);
        pkv_config_free(&cfg);
        return 1;
    }
    const double peak = 2.0 * 8192.0 * 8192 * 8192 / (sq_ms * 1e-3);
    const double kn[5][2] = {{md->hidden, (as.hq + 2.0 * as.hkv) * as.d},
                             {as.hq * (double)as.d, md->hidden},
                             {md->hidden, 2.0 * s.inter},
                             {s.inter, md->hidden},
                             {md->hidden, s.vocab}};
    pkvk_device_info dev;
    pkvk_device_info_get(&dev);
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d", gmtime(&now));
    FILE *fo = out ? fopen(out, "w") : NULL;
    if (out && !fo) {
        fprintf(stderr, "pkvsim bench model: cannot write %s\n", out);
        pkvk_model_destroy(m);
        pkvk_ctx_destroy(ctx);
        pkv_config_free(&cfg);
        return 1;
    }
    FILE *outs[2] = {stdout, fo};
    for (int f = 0; f < 2; f++)
        if (outs[f])
            fprintf(outs[f],
                    "# pkvsim bench model --model %s --reps %d, %s, %s, pkvsim %s\n"
                    "# read ceiling %.0f GB/s; 8192^3 FP16 GEMM %.1f TFLOP/s; weights read per "
                    "forward %.3f GB\n"
                    "%6s %10s %10s %10s %8s %10s\n",
                    md->name, reps, dev.name, when, PKV_GIT_REV, ceil.read_gbps, peak * 1e-12,
                    pkv_model_weight_bytes(md) * 1e-9, "rows", "gemms_ms", "weights_ms", "ratio",
                    "TFLOP/s", "of_peak");
    /* Memory-bound points for the bandwidth fit: (bytes, seconds) of each shape. */
    double fb[5 * MAX_WIDTHS], ft[5 * MAX_WIDTHS], tflops_best = 0;
    int nf = 0;
    for (int w = 0; w < nw && !rc; w++) {
        double total = 0, flops = 0;
        for (int g = 0; g < 5 && !rc; g++) {
            int rows =
                g == 4 && widths[w] > PKVK_MODEL_HEAD_ROWS ? PKVK_MODEL_HEAD_ROWS : widths[w];
            float ms;
            rc = pkvk_model_time_gemm(m, g, rows, reps, &ms);
            double times = g == 4 ? 1 : md->layers, t = ms * 1e-3;
            total += times * t;
            flops += times * 2.0 * rows * kn[g][0] * kn[g][1];
            if (widths[w] <= 64) {
                fb[nf] = 2 * (kn[g][0] * kn[g][1] + rows * (kn[g][0] + kn[g][1]));
                ft[nf++] = t;
            }
        }
        double weights = pkv_model_weight_bytes(md) / (ceil.read_gbps * 1e9);
        double rate = flops / total;
        if (widths[w] >= 2048 && rate > tflops_best) tflops_best = rate;
        for (int f = 0; f < 2 && !rc; f++)
            if (outs[f])
                fprintf(outs[f], "%6d %10.3f %10.3f %10.3f %8.1f %9.1f%%\n", widths[w], total * 1e3,
                        weights * 1e3, total / weights, rate * 1e-12, 100 * rate / peak);
    }
    double c0 = 0, c1 = 0, cov00, cov01, cov11, sumsq;
    if (!rc && nf >= 2) gsl_fit_linear(fb, 1, ft, 1, nf, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    for (int f = 0; f < 2 && !rc; f++)
        if (outs[f])
            fprintf(outs[f],
                    "# fit: \"gemm_gbps\": %.0f, \"gemm_us\": %.2f (time = bytes / gemm_gbps + "
                    "gemm_us over %d points at <= 64 rows), \"gemm_tflops\": %.0f (the best "
                    "rate at >= 2048 rows)\n",
                    c1 > 0 ? 1e-9 / c1 : 0, c0 * 1e6, nf, tflops_best * 1e-12);
    if (rc) fprintf(stderr, "pkvsim bench model: %s\n", pkvk_last_error());
    if (fo && fclose(fo) != 0) rc = 1;
    pkvk_model_destroy(m);
    pkvk_ctx_destroy(ctx);
    pkv_config_free(&cfg);
    return rc ? 1 : 0;
}
