/* pkvsim bench allreduce: tensor parallelism's all-reduce measured through NCCL
 * (built with -DPKV_NCCL=ON) at the sizes a served model's layer reduces, beside the
 * calibration's model of it (allreduce_us, allreduce_gbps) that a one-GPU run uses. */
#include "pkv_gitrev.h"
#include "calib.h"
#include "cli.h"
#include "cmd_bmodel.h"
#include "dense.h"
#include "config.h"
#include "pkvk_comm.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_WIDTHS = 16 };

static const char *HELP =
    "usage: pkvsim bench allreduce [--model NAME] [--ranks N] [--rows LIST] [--reps N]\n"
    "                              [-c CALIBRATION] [--out FILE]\n"
    "  Times the all-reduce (FP16 sum, in place, NCCL) of rows x hidden values over N GPUs\n"
    "  of this machine (one process drives every rank; default 1: on one GPU NCCL's own\n"
    "  fixed cost) at each width of LIST (token rows, default 1,8,64,256,1024,4096,8192),\n"
    "  the median of --reps (default 50) after a warm-up, every rank's result checked\n"
    "  against the sum on the CPU. Prints per width the bytes, the measured time, the\n"
    "  bus bandwidth (2 (N - 1) / N x bytes over the time), the time the calibration\n"
    "  models (allreduce_us + 2 (N - 1) / N x bytes / allreduce_gbps; -c, default the\n"
    "  preset's calibration) and a decode step's two all-reduces a layer, all layers.\n"
    "  --model: a preset of experiments/models/ (default llama-3.1-8b); --out: also write\n"
    "  the table there. Set NCCL_NVLS_ENABLE=0 where the GPUs share NVLink with others.";

static void help(void) {
    puts(HELP);
}

int pkv_bench_allreduce_main(int argc, char **argv) {
    const char *model = "llama-3.1-8b", *out = NULL, *cal_path = NULL;
    const char *rows_s = "1,8,64,256,1024,4096,8192";
    int reps = 50, ranks = 1;
    const pkv_cli_opt opts[] = {{"model", 'm', PKV_CLI_STRING, &model, 0},
                                {"rows", 'r', PKV_CLI_STRING, &rows_s, 0},
                                {"reps", 'n', PKV_CLI_COUNT, &reps, 10000},
                                {"ranks", 'k', PKV_CLI_COUNT, &ranks, 8},
                                {"calibration", 'c', PKV_CLI_STRING, &cal_path, 0},
                                {"out", 'o', PKV_CLI_STRING, &out, 0}};
    const int orc = pkv_cli_options("bench allreduce", argc, argv, opts, 6, help);
    if (orc >= 0) return orc;
    int widths[MAX_WIDTHS], nw = 0;
    if (pkv_cli_parse_widths("bench allreduce", rows_s, widths, MAX_WIDTHS, &nw)) return 2;
    if (!pkvk_comm_built()) {
        fprintf(stderr, "pkvsim bench allreduce: this pkvsim was built without NCCL: configure "
                        "with -DPKV_NCCL=ON\n");
        return 1;
    }
    pkv_config cfg;
    pkv_calib cal;
    pkv_err e;
    if (pkv_model_preset_config(model, &cfg, &e)) {
        fprintf(stderr, "pkvsim bench allreduce: %s\n", e.msg);
        return 2;
    }
    /* the GPU's constants: a file's top level */
    if (pkv_calib_load(&cal, cal_path ? cal_path : cfg.calibration, NULL, &e)) {
        fprintf(stderr, "pkvsim bench allreduce: %s\n", e.msg);
        pkv_config_free(&cfg);
        return 2;
    }
    pkv_out po = {0};
    FILE *fo = out ? pkv_cli_out_open("bench allreduce", &po, out) : NULL;
    if (out && !fo) {
        pkv_calib_free(&cal);
        pkv_config_free(&cfg);
        return 1;
    }
    FILE *outs[2] = {stdout, fo};
    const pkv_model *md = &cfg.model;
    const double share = 2.0 * (ranks - 1) / ranks; /* bytes each rank moves, over the buffer's */
    char date[32];
    pkv_cli_utc(date, "%Y-%m-%d %H:%M UTC");
    pkv_cli_printf2(outs,
                    "# pkvsim bench allreduce, %s, pkvsim %s: %s (hidden %d, %d layers), %d "
                    "rank(s), NCCL, median of %d; model from %s\n%8s %12s %10s %10s %10s %14s "
                    "%12s\n",
                    date, PKV_GIT_REV, md->name, md->hidden, md->layers, ranks, reps,
                    cal_path ? cal_path : cfg.calibration, "rows", "bytes", "us", "bus_GB/s",
                    "model_us", "step_2L_ms", "max_err");
    int rc = 0, bad = 0; /* bad: a sum off */
    for (int i = 0; i < nw && !rc; i++) {
        const size_t bytes = (size_t)widths[i] * md->hidden * 2;
        float ms = 0;
        double err = 0;
        rc = pkvk_comm_time_allreduce(ranks, bytes, reps, 1234u + (unsigned)i, &ms, &err);
        if (rc) break;
        const double us = ms * 1e3;
        const double model_us = cal.allreduce_us + share * bytes / (cal.allreduce_gbps * 1e3);
        pkv_cli_printf2(outs, "%8d %12zu %10.2f %10.1f %10.2f %14.3f %12.3g\n", widths[i], bytes,
                        us, share * bytes / (us * 1e3), model_us, 2.0 * md->layers * us * 1e-3,
                        err);
        if (err > 0) {
            fprintf(stderr, "pkvsim bench allreduce: %d rows: the reduced values are off by %g\n",
                    widths[i], err);
            bad = 1;
        }
    }
    if (rc) fprintf(stderr, "pkvsim bench allreduce: %s\n", pkvk_last_error());
    rc = pkv_cli_out_close("bench allreduce", &po, rc || bad ? 1 : 0);
    pkv_calib_free(&cal);
    pkv_config_free(&cfg);
    return rc ? 1 : 0;
}
