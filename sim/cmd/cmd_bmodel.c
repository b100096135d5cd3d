/* pkvsim bench model: a served model's GEMMs timed alone on the GPU, one shape at a
 * time over the token widths that occur (decode rows to prefill chunks), against the
 * same run's read ceiling and 8192^3 GEMM throughput; and the dense-part constants
 * of the calibration fitted from them (gemm_gbps, gemm_us, gemm_tflops). */
#include "cli.h"
#include "cmd_bmodel.h"
#include "dense.h"

#include <stdio.h>
#include <stdlib.h>

enum { MAX_WIDTHS = PKV_DENSE_MAX_WIDTHS };

static const char *HELP =
    "usage: pkvsim bench model [--model NAME] [--rows LIST] [--reps N] [--out FILE]\n"
    "  Times each GEMM of one layer of the model (QKV, O, gate+up, down) and its LM head\n"
    "  alone (cuBLAS, L2 flushed, median of N) at each width of LIST (token rows,\n"
    "  default 1,8,64,256,1024,2048,4096,8192), and prints per width the whole model's\n"
    "  GEMM time (layers x the four + the head, the head at most 256 rows), the\n"
    "  weights over the same run's read ceiling, and the FLOP rate against the same\n"
    "  run's 8192^3 GEMM; then gemm_gbps and gemm_us fitted over the widths <= 64\n"
    "  (least squares of time on bytes), gemm_tflops from the widths >= 2048 and\n"
    "  gemm_tflops_at: the rate at each width above 64 rows.\n"
    "  Then one layer's prefill attention alone (causal, 1 x 8192, 4 x 2048, 16 x 512 and\n"
    "  64 x 128 prompt tokens in one chunk) on each kernel the build has (FlashInfer's\n"
    "  fused batch prefill, cuBLAS with materialized scores), and prefill_attn_tflops:\n"
    "  the fused kernel's causal FLOPs over its time, summed over the four. A mixture of\n"
    "  experts (a preset with experts): one MoE layer alone at each width, its experts\n"
    "  routed by one draw of the preset's law, against its active experts' weights over\n"
    "  the read ceiling, and its FLOP rate; then moe_gemm_us, moe_gemm_share and\n"
    "  moe_gemm_tflops_at (the rate by rows an expert, each width above 64 rows) fitted\n"
    "  to it (the grouped GEMMs' fixed cost a call, their share of the dense rate at the\n"
    "  widest, their rate at each width's rows an expert)\n"
    "  and the layer as the cost model prices it with them. Last, whole\n"
    "  prefills of 1 x 8192 and 16 x 512 tokens and their first layer in parts (norm and\n"
    "  QKV GEMM, RoPE and K/V append, attention, the rest) beside the GEMMs alone, and\n"
    "  the sustained rates a forward runs at: 200 8192^3 GEMMs back to back, and every\n"
    "  layer's GEMMs at 8192 rows back to back.\n"
    "  --model: a preset of experiments/models/ (default llama-3.1-8b); --out: also\n"
    "  write the table there (default: stdout only).";

static void help(void) {
    puts(HELP);
}

int pkv_bench_model_main(int argc, char **argv) {
    const char *model = "llama-3.1-8b", *out = NULL, *rows_s = "1,8,64,256,1024,2048,4096,8192";
    int reps = 20;
    const pkv_cli_opt opts[] = {{"model", 'm', PKV_CLI_STRING, &model, 0},
                                {"rows", 'r', PKV_CLI_STRING, &rows_s, 0},
                                {"reps", 'n', PKV_CLI_COUNT, &reps, 10000},
                                {"out", 'o', PKV_CLI_STRING, &out, 0}};
    const int orc = pkv_cli_options("bench model", argc, argv, opts, 4, help);
    if (orc >= 0) return orc;
    int widths[MAX_WIDTHS], nw = 0;
    if (pkv_cli_parse_widths("bench model", rows_s, widths, MAX_WIDTHS, &nw)) return 2;
    pkv_config cfg;
    pkv_err e;
    if (pkv_model_preset_config(model, &cfg, &e)) {
        fprintf(stderr, "pkvsim bench model: %s\n", e.msg);
        return 2;
    }
    pkv_out po = {0};
    FILE *fo = out ? pkv_cli_out_open("bench model", &po, out) : NULL;
    if (out && !fo) {
        pkv_config_free(&cfg);
        return 1;
    }
    FILE *outs[2] = {stdout, fo};
    pkvk_ctx *ctx = NULL;
    pkv_dense_fit fit;
    int rc = pkvk_ctx_create(&ctx, 0);
    if (!rc) rc = pkv_measure_dense(ctx, &cfg.model, widths, nw, reps, 1, outs, &fit);
    if (rc) fprintf(stderr, "pkvsim bench model: %s\n", pkvk_last_error());
    rc = pkv_cli_out_close("bench model", &po, rc ? 1 : 0);
    pkvk_ctx_destroy(ctx);
    pkv_config_free(&cfg);
    return rc ? 1 : 0;
}
