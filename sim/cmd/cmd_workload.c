/* pkvsim workload: the request stream an experiment generates, and its statistics. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cli.h"
#include "pkv_files.h"

/* ---- workload ------------------------------------------------------------------ */
static void print_lengths(FILE *f, const char *name, double *x, size_t n) {
    gsl_sort(x, 1, n);
    fprintf(f, "  %-9s mean %.1f  p50 %.0f  p90 %.0f  p99 %.0f  min %.0f  max %.0f\n", name,
            gsl_stats_mean(x, 1, n), gsl_stats_quantile_from_sorted_data(x, 1, n, 0.5),
            gsl_stats_quantile_from_sorted_data(x, 1, n, 0.9),
            gsl_stats_quantile_from_sorted_data(x, 1, n, 0.99), x[0], x[n - 1]);
}

static void help(void) {
    puts("usage: pkvsim workload EXPERIMENT.json [--csv OUT.csv] [--seed N]\n"
         "Draws the request stream the experiment would simulate (arrival time, prompt\n"
         "and decode length) without simulating, and prints its statistics: count,\n"
         "duration, rate, inter-arrival CV, length percentiles. --csv also writes the\n"
         "stream (t_arrival_s,prompt_len,decode_len). Closed-loop arrival times depend\n"
         "on the simulation, so only lengths are reported for them.");
}

int pkv_cmd_workload(int argc, char **argv) {
    const char *csv = NULL, *seed = NULL;
    const pkv_cli_opt opts[] = {{"csv", 'c', PKV_CLI_STRING, &csv, 0},
                                {"seed", 's', PKV_CLI_STRING, &seed, 0}};
    int rc = pkv_cli_options("workload", argc, argv, opts, 2, help);
    if (rc >= 0) return rc;
    pkv_config cfg;
    rc = pkv_cli_load_experiment(argc, argv, "workload", seed, &cfg);
    if (rc) return rc;
    rc = 1;
    pkv_workload w = {0};
    double *t = NULL, *p = NULL, *d = NULL, *gap = NULL;
    FILE *out = NULL;
    pkv_out csv_out;
    const pkv_workload_spec *ws = &cfg.workload;
    int closed = ws->arrival.kind == PKV_ARRIVAL_CLOSED;
    size_t cap = ws->trace ? ws->trace->n : ws->num_requests > 0 ? (size_t)ws->num_requests : 0;
    if (cap == 0 && !closed && cfg.max_time > 0) cap = SIZE_MAX; /* until max_time_s */
    if (cap == 0) {
        fprintf(stderr,
                "pkvsim workload: %s: set workload.num_requests (or run.max_time_s) to "
                "bound the stream\n",
                cfg.file);
        goto done;
    }
    if (pkv_workload_init(&w, ws, cfg.seed)) {
        fputs("pkvsim: out of memory\n", stderr);
        goto done;
    }
    if (!closed && cfg.max_time > 0) w.limits.t_end = cfg.max_time;
    if (csv) {
        const char *in[PKV_CONFIG_INPUTS], *what[PKV_CONFIG_INPUTS];
        int n_in = pkv_config_inputs(&cfg, in, what);
        pkv_err e;
        if (pkv_output_ok(csv, in, what, n_in, "--csv", &e)) {
            fprintf(stderr, "pkvsim workload: %s\n", e.msg);
            goto done;
        }
        if (!(out = pkv_cli_out_open("workload", &csv_out, csv))) goto done;
        fputs("t_arrival_s,prompt_len,decode_len\n", out);
    }
    size_t n = 0, alloc = 0, first_turns = 0;
    pkv_request_draw r;
    int got = 0;
    while (n < cap && (got = pkv_workload_next(&w, 0.0, &r)) == 0) {
        if (!closed && cfg.max_time > 0 && r.t_arrival > cfg.max_time) break;
        if (n == alloc) {
            alloc = alloc ? 2 * alloc : 4096;
            double *t2 = realloc(t, alloc * sizeof *t2), *p2 = realloc(p, alloc * sizeof *p2),
                   *d2 = realloc(d, alloc * sizeof *d2);
            if (t2) t = t2;
            if (p2) p = p2;
            if (d2) d = d2;
            if (!t2 || !p2 || !d2) {
                fputs("pkvsim: out of memory\n", stderr);
                goto done;
            }
        }
        t[n] = r.t_arrival, p[n] = r.prompt_len, d[n] = r.decode_len;
        first_turns += r.session >= 0 && r.turn == 0;
        if (out)
            fprintf(out, "%.9g,%d,%d\n", closed ? NAN : r.t_arrival, r.prompt_len, r.decode_len);
        n++;
    }
    if (got == -2) {
        fprintf(stderr,
                "pkvsim workload: %s: workload.arrival: the process cannot advance at t = "
                "%.17g s (its periods or gaps are below the clock's resolution there); set "
                "run.max_time_s below that time, or lengthen them\n",
                cfg.file, w.st.t_stuck);
        goto done;
    }
    if (got < 0) {
        fputs("pkvsim: out of memory\n", stderr);
        goto done;
    }
    if (n == 0) {
        fprintf(stderr, "pkvsim workload: %s: the stream is empty\n", cfg.file);
        goto done;
    }
    printf("%s: %zu requests", cfg.name, n);
    if (ws->trace)
        printf(" from %s (%zu rows read, %zu bad rows skipped)", cfg.trace_spec.path,
               ws->trace->lines, ws->trace->skipped);
    putchar('\n');
    if (closed) {
        printf("  arrivals  closed loop of %lld: times depend on the simulation\n",
               (long long)ws->arrival.concurrency);
    } else if (n > 1) {
        gap = malloc(sizeof(double) * (n - 1));
        if (!gap) {
            fputs("pkvsim: out of memory\n", stderr);
            goto done;
        }
        for (size_t i = 1; i < n; i++) gap[i - 1] = t[i] - t[i - 1];
        double dur = t[n - 1] - t[0], mean = gsl_stats_mean(gap, 1, n - 1);
        printf("  duration  %.6g s (first to last arrival)\n", dur);
        printf("  rate      %.6g requests/s\n", dur > 0 ? (n - 1) / dur : NAN);
        printf("  gap CV    %.6g\n", mean > 0 ? gsl_stats_sd_m(gap, 1, n - 1, mean) / mean : NAN);
    }
    if (first_turns)
        printf("  sessions  %zu started, %.3g turns each on average (of those in the stream)\n",
               first_turns, (double)n / (double)first_turns);
    print_lengths(stdout, "prompt", p, n);
    print_lengths(stdout, "decode", d, n);
    if (w.refused || w.clamped)
        printf("  context   %llu requests past workload.max_context (%lld tokens): %s\n",
               (unsigned long long)(w.refused + w.clamped), (long long)ws->max_context,
               w.refused ? "refused by the engine (failed; their lengths above are as drawn)"
                         : "cut to fit (workload.over_context \"cut\"; the lengths above are cut)");
    if (out) {
        out = NULL;
        if (pkv_cli_out_close("workload", &csv_out, 0)) goto done;
        printf("  written   %s\n", csv);
    }
    rc = 0;
done:
    if (out) pkv_out_close(&csv_out, 0);
    free(t), free(p), free(d), free(gap);
    pkv_workload_free(&w);
    pkv_config_free(&cfg);
    return rc;
}
