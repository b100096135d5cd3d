/* What the GPU commands share (bench model, calibrate, bench allreduce): a preset's
 * configuration, and the dense part of a served model measured on the GPU (its GEMMs
 * alone at each width, the prefill attention, a mixture of experts' layer, a prefill
 * layer in parts) with the calibration's dense constants fitted from it. */
#include "dense.h"
#include "cli.h"
#include "pkv_gitrev.h"
#include "cmd_kbench.h"
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_fit.h>

enum { CHUNK = 8192 }; /* the prefill chunk, as the cuda backend runs it */

/* One layer's prefill attention alone over four prompt mixes, on the model's kernel
 * and, where that is FlashInfer's, on cuBLAS's too (a second model). */
static int time_prefill_attn(pkvk_model *m, const pkv_model *md, pkvk_ctx *ctx,
                             const pkvk_model_shape *s, int32_t chunk, int32_t pages, int reps,
                             double peak, FILE *outs[2], double *tflops) {
    static const int mix[4][2] = {{1, 8192}, {4, 2048}, {16, 512}, {64, 128}};
    const int fused = pkvk_model_prefill_kernel(s) == PKVK_PREFILL_FLASHINFER;
    pkvk_model *mc = NULL;
    pkvk_model_shape sc = *s;
    sc.prefill_attn = PKVK_PREFILL_CUBLAS;
    int rc = fused ? pkvk_model_create(ctx, &mc, &sc, chunk, chunk, pages, 1) : 0;
    if (!rc)
        pkv_cli_printf2(
            outs,
            "# prefill attention of one layer alone (causal), median of %d\n%8s %6s %10s "
            "%12s %10s %12s %10s\n",
            reps, "prompts", "len", "GFLOP", "fused_ms", "TFLOP/s", "cublas_ms", "TFLOP/s");
    double fl_sum = 0, t_sum = 0;
    for (int k = 0; k < 4 && !rc; k++) {
        int32_t lens[64];
        for (int i = 0; i < mix[k][0]; i++) lens[i] = mix[k][1];
        const double L = mix[k][1];
        const double flops =
            (double)md->hq / md->tp * 4.0 * md->head_dim * mix[k][0] * L * (L + 1) / 2;
        float ms_f = 0, ms_c = 0;
        if (fused) rc = pkvk_model_time_prefill_attn(m, mix[k][0], lens, reps, &ms_f);
        if (!rc) rc = pkvk_model_time_prefill_attn(fused ? mc : m, mix[k][0], lens, reps, &ms_c);
        if (fused) fl_sum += flops, t_sum += ms_f * 1e-3;
        if (!rc)
            pkv_cli_printf2(outs, "%8d %6d %10.1f %12.3f %10.1f %12.3f %10.1f\n", mix[k][0],
                            mix[k][1], flops * 1e-9, ms_f,
                            fused ? flops / (ms_f * 1e-3) * 1e-12 : 0, ms_c,
                            flops / (ms_c * 1e-3) * 1e-12);
    }
    if (!rc)
        pkv_cli_printf2(outs, "# fit: \"prefill_attn_tflops\": %.0f (%.1f%% of the 8192^3 GEMM)\n",
                        t_sum > 0 ? fl_sum / t_sum * 1e-12 : 0,
                        t_sum > 0 ? 100 * fl_sum / t_sum / peak : 0);
    *tflops = t_sum > 0 ? fl_sum / t_sum * 1e-12 : 0;
    pkvk_model_destroy(mc);
    return rc;
}

/* Whole prefills of one chunk, and their layer 0 in parts, beside the GEMMs alone. */
static int time_prefill_parts(pkvk_model *m, const pkv_model *md, int reps, const float gemm[5],
                              FILE *outs[2]) {
    static const int mix[2][2] = {{1, 8192}, {16, 512}};
    int rc = 0;
    pkv_cli_printf2(outs,
                    "# whole prefills (ms), and their layer 0 in parts beside its GEMMs alone at "
                    "8192 rows (QKV %.3f, O + gate/up + down %.3f), median of %d\n"
                    "%8s %6s %10s %10s %10s %10s %10s %10s %12s\n",
                    gemm[0], gemm[1] + gemm[2] + gemm[3], reps, "prompts", "len", "whole_ms",
                    "norm_qkv", "rope_kv", "attention", "o_mlp", "layer", "x_layers");
    for (int k = 0; k < 2 && !rc; k++) {
        int32_t lens[16];
        for (int i = 0; i < mix[k][0]; i++) lens[i] = mix[k][1];
        float p[5];
        rc = pkvk_model_time_prefill_parts(m, mix[k][0], lens, reps, p);
        const double layer = p[0] + p[1] + p[2] + p[3];
        if (!rc)
            pkv_cli_printf2(outs, "%8d %6d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %12.3f\n",
                            mix[k][0], mix[k][1], p[4], p[0], p[1], p[2], p[3], layer,
                            layer * md->layers);
    }
    return rc;
}

int pkv_model_preset_config(const char *model, pkv_config *cfg, pkv_err *e) {
    /* The preset through the experiment parser, so that it is checked as a run's is. */
    char *text = malloc(512); /* the config takes it */
    if (!text) return pkv_fail(e, "out of memory");
    snprintf(text, 512,
             "{\"model\": \"%s\", \"workload\": {\"arrival\": {\"process\": \"closed\", "
             "\"concurrency\": 1}, \"num_requests\": 1}}",
             model);
    if (pkv_config_parse(cfg, text, "model preset", e)) return -1;
    if (!pkv_model_kind_of(&cfg->model)->weights) {
        pkv_config_free(cfg);
        return pkv_fail(e, "model %s has no dense part", model);
    }
    return 0;
}

/* A mixture of experts' layer alone (one layer's model, its experts routed by one draw of
 * the preset's law, as a run draws them) at each width: its time against the active
 * experts' weights read at the read ceiling, and its FLOPs' rate (the router's and the
 * experts'); then the grouped GEMMs' constants fitted at cal (pkv_model_moe_fit) and the
 * layer as the cost model prices it with them. */
static int time_moe(pkvk_ctx *ctx, const pkv_model *md, const int *widths, int nw, int reps,
                    double read_gbps, double peak, pkv_calib *cal, FILE *outs[2],
                    pkv_dense_fit *fit) {
    pkvk_model_shape s = pkv_model_gpu_shape(md);
    s.layers = 1;
    pkvk_moe_shape e = pkv_model_moe_shape(md);
    e.first = 0; /* the one layer */
    int most = 1;
    for (int w = 0; w < nw; w++) most = widths[w] > most ? widths[w] : most;
    pkv_moe law = {0};
    pkvk_model *m = NULL;
    int rc = pkv_moe_init(&law, e.experts, e.k, (pkv_expert_law)md->expert_law, md->expert_exponent,
                          md->expert_seed)
                 ? PKVK_ERR_OUT_OF_MEMORY
                 : pkvk_model_create(ctx, &m, &s, most, 16, 1, 1);
    if (!rc) rc = pkvk_model_experts(m, &e, pkv_moe_route, &law);
    if (!rc)
        pkv_cli_printf2(outs,
                        "# one MoE layer alone (%d experts of %d, %d a token, routed by the %s "
                        "law), median of %d\n%6s %8s %10s %12s %10s %8s %9s\n",
                        e.experts, e.inter, e.k, pkv_expert_law_names[md->expert_law], reps, "rows",
                        "active", "moe_ms", "weights_ms", "ratio", "TFLOP/s", "of_peak");
    const double expert_bytes = 2.0 * 3 * s.hidden * e.inter;
    double active[PKV_DENSE_MAX_WIDTHS], seconds[PKV_DENSE_MAX_WIDTHS];
    for (int w = 0; w < nw && !rc; w++) {
        float ms = 0;
        rc = pkvk_model_time_moe(m, widths[w], reps, &ms);
        int a = 0; /* the draw the timed layer ran (staged once, before its repeats) */
        for (int x = 0; x < e.experts; x++) a += law.counts[x] > 0;
        const double t = ms * 1e-3, wt = a * expert_bytes / (read_gbps * 1e9),
                     flops = 2.0 * widths[w] * e.k * 3 * s.hidden * e.inter +
                             2.0 * widths[w] * s.hidden * e.experts;
        active[w] = a, seconds[w] = t;
        if (!rc)
            pkv_cli_printf2(outs, "%6d %8d %10.4f %12.4f %10.3f %8.1f %8.1f%%\n", widths[w], a, ms,
                            wt * 1e3, t / wt, flops / t * 1e-12, 100 * flops / t / peak);
    }
    if (!rc) {
        pkv_model_moe_fit(md, cal, widths, active, seconds, nw, &fit->moe_gemm_us,
                          &fit->moe_gemm_share, &fit->moe_at);
        cal->moe_gemm_us = fit->moe_gemm_us, cal->moe_gemm_share = fit->moe_gemm_share;
        cal->moe_at = fit->moe_at;
        pkv_cli_printf2(outs,
                        "# fit: \"moe_gemm_us\": %.1f, \"moe_gemm_share\": %.3f (each grouped "
                        "call's fixed cost over the widths <= 64 rows; the share of the dense "
                        "GEMMs' rate that prices the widest as measured), \"moe_gemm_tflops_at\": "
                        "{",
                        fit->moe_gemm_us, fit->moe_gemm_share);
        for (int i = 0; i < fit->moe_at.n; i++)
            pkv_cli_printf2(outs, "%s\"%.0f\": %.1f", i ? ", " : "", fit->moe_at.rows[i],
                            fit->moe_at.tflops[i]);
        pkv_cli_printf2(outs,
                        "} (the rate at each width's rows an expert that prices it as measured, "
                        "above 64 rows), at small_kernel_us %.1f; the layer priced with them "
                        "(ms):",
                        cal->small_kernel_us);
        for (int w = 0; w < nw; w++)
            pkv_cli_printf2(outs, " %d %.4f%s", widths[w],
                            1e3 * pkv_model_moe_layer_time(md, cal, widths[w], active[w]),
                            w + 1 < nw ? "," : "\n");
    }
    pkvk_model_destroy(m);
    pkv_moe_free(&law);
    return rc;
}

void pkv_dense_fit_apply(const pkv_dense_fit *d, pkv_calib *c) {
    if (d->gemm_gbps > 0) c->gemm_gbps = d->gemm_gbps, c->gemm_us = d->gemm_us > 0 ? d->gemm_us : 0;
    if (d->gemm_tflops > 0) c->gemm_tflops = d->gemm_tflops;
    c->gemm_at = d->gemm_at;
    c->prefill_attn_tflops = d->prefill_attn_tflops; /* 0 where FlashInfer's is not built */
    c->moe_gemm_us = d->moe_gemm_us, c->moe_gemm_share = d->moe_gemm_share; /* 0: dense */
    c->moe_at = d->moe_at;
}

int pkv_measure_dense(pkvk_ctx *ctx, const pkv_model *md, const int *widths, int nw, int reps,
                      int full, FILE *outs[2], pkv_dense_fit *fit) {
    pkvk_shape as = pkv_model_attn_shape(md);
    pkvk_model_shape s = pkv_model_gpu_shape(md);
    pkvk_model *m = NULL;
    pkvk_ceilings ceil;
    float sq_ms;
    *fit = (pkv_dense_fit){0};
    if (nw < 1 || nw > PKV_DENSE_MAX_WIDTHS) return PKVK_ERR_INVALID; /* the callers give 1 to 16 */
    int rc = pkvk_measure_ceilings(ctx, &ceil);
    if (!rc) rc = pkvk_time_square_gemm(ctx, 8192, reps, &sq_ms);
    const int32_t pages = CHUNK / s.page_size + 64;
    if (!rc) rc = pkvk_model_create(ctx, &m, &s, CHUNK, CHUNK, pages, 1);
    if (rc) {
        pkvk_model_destroy(m);
        return rc;
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
    pkv_cli_utc(when, "%Y-%m-%d");
    pkv_cli_printf2(outs,
                    "# pkvsim bench model --model %s --reps %d, %s, %s, pkvsim %s\n"
                    "# read ceiling %.0f GB/s; 8192^3 FP16 GEMM %.1f TFLOP/s; weights read per "
                    "forward %.3f GB\n"
                    "%6s %10s %10s %10s %8s %10s\n",
                    md->name, reps, dev.name, when, PKV_GIT_REV, ceil.read_gbps, peak * 1e-12,
                    pkv_model_weight_bytes(md) * 1e-9, "rows", "gemms_ms", "weights_ms", "ratio",
                    "TFLOP/s", "of_peak");
    /* Memory-bound points for the bandwidth fit: (bytes, seconds) of each shape. */
    double fb[5 * PKV_DENSE_MAX_WIDTHS], ft[5 * PKV_DENSE_MAX_WIDTHS], tflops_best = 0;
    float gemm_chunk[5] = {0}; /* each GEMM alone at CHUNK rows (if a width) */
    int nf = 0;
    for (int w = 0; w < nw && !rc; w++) {
        double total = 0, flops = 0;
        for (int g = 0; g < 5 && !rc; g++) {
            if (kn[g][0] <= 0 || kn[g][1] <= 0) continue; /* an MoE model: no dense MLP */
            int rows =
                g == 4 && widths[w] > PKVK_MODEL_HEAD_ROWS ? PKVK_MODEL_HEAD_ROWS : widths[w];
            float ms;
            rc = pkvk_model_time_gemm(m, g, rows, reps, &ms);
            if (widths[w] == CHUNK) gemm_chunk[g] = ms;
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
        pkv_rates *at = &fit->gemm_at;
        if (widths[w] > 64 && at->n < PKV_GEMM_RATES) /* above the bandwidth fit's widths */
            at->rows[at->n] = widths[w], at->tflops[at->n++] = rate * 1e-12;
        if (!rc)
            pkv_cli_printf2(outs, "%6d %10.3f %10.3f %10.3f %8.1f %9.1f%%\n", widths[w],
                            total * 1e3, weights * 1e3, total / weights, rate * 1e-12,
                            100 * rate / peak);
    }
    double c0 = 0, c1 = 0, cov00, cov01, cov11, sumsq;
    if (!rc && nf >= 2) gsl_fit_linear(fb, 1, ft, 1, nf, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (!rc)
        pkv_cli_printf2(outs,
                        "# fit: \"gemm_gbps\": %.0f, \"gemm_us\": %.2f (time = bytes / gemm_gbps + "
                        "gemm_us over %d points at <= 64 rows), \"gemm_tflops\": %.0f (the best "
                        "rate at >= 2048 rows)\n",
                        c1 > 0 ? 1e-9 / c1 : 0, c0 * 1e6, nf, tflops_best * 1e-12);
    for (int i = 0; !rc && i < fit->gemm_at.n; i++)
        pkv_cli_printf2(outs, "%s\"%.0f\": %.0f%s", i ? ", " : "# fit: \"gemm_tflops_at\": {",
                        fit->gemm_at.rows[i], fit->gemm_at.tflops[i],
                        i + 1 < fit->gemm_at.n ? "" : "}\n");
    fit->gemm_gbps = c1 > 0 ? 1e-9 / c1 : 0, fit->gemm_us = c0 * 1e6;
    fit->gemm_tflops = tflops_best * 1e-12, fit->points = nf;
    if (!rc)
        rc = time_prefill_attn(m, md, ctx, &s, CHUNK, pages, reps, peak, outs,
                               &fit->prefill_attn_tflops);
    if (!rc && pkv_model_moe_layers(md)) { /* at the constants fitted above */
        pkv_calib cal;
        pkv_calib_defaults(&cal);
        pkv_dense_fit_apply(fit, &cal);
        cal.beta = ceil.read_gbps * 1e9;
        rc = time_moe(ctx, md, widths, nw, reps, ceil.read_gbps, peak, &cal, outs, fit);
    }
    if (!full || rc) {
        pkvk_model_destroy(m);
        return rc;
    }
    /* Sustained: the clocks a forward of a quarter second runs at. */
    float sq_sus = 0, fwd = 0;
    if (!rc) rc = pkvk_time_square_gemms(ctx, 8192, 200, 3, &sq_sus);
    if (!rc) rc = pkvk_model_time_gemms_forward(m, CHUNK, &fwd);
    double fwd_flops = 0;
    for (int g = 0; g < 4; g++) fwd_flops += md->layers * 2.0 * CHUNK * kn[g][0] * kn[g][1];
    if (!rc)
        pkv_cli_printf2(outs,
                        "# sustained: 8192^3 FP16 GEMM %.1f TFLOP/s (200 back to back); the "
                        "forward's GEMMs at %d rows back to back %.3f ms (%.1f TFLOP/s)\n",
                        2.0 * 8192.0 * 8192 * 8192 / (sq_sus * 1e-3) * 1e-12, CHUNK, fwd,
                        fwd_flops / (fwd * 1e-3) * 1e-12);
    if (!rc) rc = time_prefill_parts(m, md, reps, gemm_chunk, outs);
    pkvk_model_destroy(m);
    return rc;
}
