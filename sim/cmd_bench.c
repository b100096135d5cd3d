/* pkvsim bench sim | bench traces: simulator and trace-reader speed. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>

#include "cli.h"
#include "rng.h"
#include "runner.h"

/* ---- bench sim ---------------------------------------------------------------- */
/* The bench commands share their options: --out FILE and a positive count.
 * Returns -1 to go on, or the exit code (--help, bad input). */
static int bench_options(int argc, char **argv, const char *cmd, const char *count_opt,
                         const char *help, const char **out, uint64_t *count) {
    const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                  {count_opt, required_argument, 0, 'n'},
                                  {"help", no_argument, 0, 'h'},
                                  {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            *out = optarg;
            break;
        case 'n':
            if (pkv_cli_parse_u64(optarg, count) || *count == 0) {
                fprintf(stderr, "pkvsim bench %s: --%s: \"%s\" is not a positive integer\n", cmd,
                        count_opt, optarg);
                return 2;
            }
            break;
        case 'h':
            puts(help);
            return 0;
        default:
            return 2;
        }
    }
    return -1;
}

int pkv_cmd_bench_sim(int argc, char **argv) {
    const char *out = "bench_sim.txt";
    uint64_t steps = 200000;
    int rc0 =
        bench_options(argc, argv, "sim", "steps",
                      "usage: pkvsim bench sim [--out FILE] [--steps N]\n"
                      "Runs closed-loop experiments of 8 and 64 active requests (prompt 2048,\n"
                      "decode long enough to never finish) for N decode steps (default 200000) on\n"
                      "the model backend with adaptive routing and HDF5 recording on, and reports\n"
                      "steps per second of host time. The table goes to stdout and to FILE\n"
                      "(default bench_sim.txt).",
                      &out, &steps);
    if (rc0 >= 0) return rc0;
    FILE *f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "pkvsim bench sim: cannot write %s\n", out);
        return 1;
    }
    const char *hdr = "| active | steps | host s | steps/s | decode tokens/s (simulated) |\n"
                      "|---|---|---|---|---|\n";
    fputs(hdr, stdout);
    fputs(hdr, f);
    int rc = 0;
    const int actives[2] = {8, 64};
    for (int k = 0; k < 2 && rc == 0; k++) {
        char *text = malloc(2048);
        char tmp[64];
        snprintf(tmp, sizeof tmp, "/tmp/pkvsim-bench-%d.h5", (int)getpid());
        snprintf(text, 2048,
                 "{\"name\": \"bench-sim-%d\", \"workload\": {\"arrival\": {\"process\": "
                 "\"closed\", \"concurrency\": %d}, \"prompt\": {\"dist\": \"fixed\", \"value\": "
                 "2048}, \"decode\": {\"dist\": \"fixed\", \"value\": %llu}, \"max_context\": "
                 "%llu}, \"serving\": {\"max_active\": %d, \"kv_pages\": %llu}, \"route\": "
                 "{\"policy\": \"adaptive\"}, \"run\": {\"max_steps\": %llu, \"output\": \"%s\"}}",
                 actives[k], actives[k], (unsigned long long)steps + 10,
                 (unsigned long long)steps + 2100, actives[k],
                 (unsigned long long)(actives[k] * ((steps + 2100) / 16 + 2)),
                 (unsigned long long)steps, tmp);
        pkv_config cfg;
        pkv_err e;
        pkv_summary sum;
        if (pkv_config_parse(&cfg, text, "bench-sim.json", &e)) {
            fprintf(stderr, "pkvsim: %s\n", e.msg);
            rc = 1;
            break;
        }
        pkv_run_opts ro = {.quiet = 1, .record = 1, .command_line = "pkvsim bench sim"};
        double t0 = pkv_cli_wall_s();
        if (pkv_run_experiment(&cfg, &ro, &sum, &e)) {
            fprintf(stderr, "pkvsim: %s\n", e.msg);
            rc = 1;
        } else {
            double dt = pkv_cli_wall_s() - t0;
            char row[256];
            snprintf(row, sizeof row, "| %d | %llu | %.3f | %.0f | %.0f |\n", actives[k],
                     (unsigned long long)sum.steps, dt, sum.steps / dt, sum.decode_tok_s);
            fputs(row, stdout);
            fputs(row, f);
        }
        remove(tmp);
        pkv_config_free(&cfg);
    }
    fclose(f);
    return rc;
}

/* ---- bench traces ------------------------------------------------------------- */
int pkv_cmd_bench_traces(int argc, char **argv) {
    const char *out = "bench_traces.txt";
    uint64_t rows = 1000000;
    int rc0 =
        bench_options(argc, argv, "traces", "rows",
                      "usage: pkvsim bench traces [--rows N] [--out FILE]\n"
                      "Writes an N-row CSV trace (default 1,000,000) in each built-in CSV format\n"
                      "(azure with datetimes, vidur with seconds) from GSL draws, then times\n"
                      "reading it back (median of 5 reads) and reports rows per second. The table\n"
                      "goes to stdout and FILE (default bench_traces.txt).",
                      &out, &rows);
    if (rc0 >= 0) return rc0;
    FILE *res = fopen(out, "w");
    if (!res) {
        fprintf(stderr, "pkvsim bench traces: cannot write %s\n", out);
        return 1;
    }
    const char *hdr =
        "| format | rows | file MiB | median read s | rows/s |\n|---|---|---|---|---|\n";
    fputs(hdr, stdout);
    fputs(hdr, res);
    gsl_rng *r = pkv_stream_create(1, PKV_STREAM_PROMPT);
    int rc = 0;
    for (int fmt = 0; fmt < 2 && rc == 0; fmt++) {
        pkv_trace_spec sp;
        pkv_trace_spec_default(&sp);
        pkv_trace_columns_builtin(fmt ? "vidur" : "azure", &sp.cols);
        snprintf(sp.path, sizeof sp.path, "/tmp/pkvsim-bench-trace-%d.csv", (int)getpid());
        FILE *f = fopen(sp.path, "w");
        if (!f) {
            rc = 1;
            break;
        }
        fprintf(f, "%s,%s,%s\n", sp.cols.time, sp.cols.prompt, sp.cols.decode);
        double t = 0;
        for (uint64_t i = 0; i < rows; i++) {
            t += gsl_ran_exponential(r, 0.1);
            int p = 1 + (int)gsl_rng_uniform_int(r, 32768),
                d = 1 + (int)gsl_rng_uniform_int(r, 1024);
            if (fmt == 0) {
                long s = (long)t;
                fprintf(f, "2023-11-%02ld %02ld:%02ld:%02ld.%07ld,%d,%d\n", 1 + s / 86400,
                        s / 3600 % 24, s / 60 % 60, s % 60, (long)((t - s) * 1e7), p, d);
            } else {
                fprintf(f, "%.6f,%d,%d\n", t, p, d);
            }
        }
        long bytes = ftell(f);
        fclose(f);
        double times[5];
        for (int k = 0; k < 5 && rc == 0; k++) {
            pkv_trace tr;
            pkv_err e;
            double t0 = pkv_cli_wall_s();
            if (pkv_trace_load(&tr, &sp, &e)) {
                fprintf(stderr, "pkvsim: %s\n", e.msg);
                rc = 1;
                break;
            }
            times[k] = pkv_cli_wall_s() - t0;
            if (tr.n != rows) rc = 1;
            pkv_trace_free(&tr);
        }
        remove(sp.path);
        if (rc) break;
        gsl_sort(times, 1, 5);
        char row[256];
        snprintf(row, sizeof row, "| %s | %llu | %.1f | %.4f | %.0f |\n",
                 fmt ? "vidur (s)" : "azure (datetime)", (unsigned long long)rows,
                 bytes / 1048576.0, times[2], rows / times[2]);
        fputs(row, stdout);
        fputs(row, res);
    }
    gsl_rng_free(r);
    fclose(res);
    return rc;
}
