/* pkvsim: the command-line program. Only main() decides to exit. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>

#include "calibrate.h"
#include "kbench.h"
#include "report.h"
#include "rng.h"
#include "runner.h"

static volatile sig_atomic_t g_stop = 0;

static void on_sigint(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C stops at once */
}

static void usage(FILE *f) {
    fputs("usage: pkvsim COMMAND [OPTIONS]\n"
          "\n"
          "A discrete-event simulator of LLM decode serving whose decode steps run paged\n"
          "decode-attention kernels (or their cost model), recording every step to HDF5.\n"
          "\n"
          "commands:\n"
          "  run EXPERIMENT.json   simulate an experiment and write its HDF5 dataset\n"
          "      -o, --output FILE       output file (default: the experiment's run.output,\n"
          "                              else NAME.h5 in the current folder)\n"
          "      -b, --backend NAME      auto | model | cpu | cuda (default: run.backend, auto)\n"
          "                              auto = cuda where a GPU is usable, else model\n"
          "      -s, --seed N            experiment seed (default: run.seed, 1)\n"
          "      -c, --calibration FILE  calibration file (default: route.calibration)\n"
          "      -r, --route NAME        route policy (default: route.policy): ref_paged,\n"
          "                              pkv_bucket, pkv_workqueue, pkv_fused, adaptive, oracle\n"
          "      -q, --quiet             no progress line and no summary\n"
          "  workload EXPERIMENT.json [--csv OUT] [--seed N]\n"
          "                        the request stream an experiment would generate, and its\n"
          "                        statistics (count, duration, rate, gap CV, percentiles)\n"
          "  report FILE.h5... [--baseline POLICY] [--csv OUT]\n"
          "                        mean +/- sd over runs (seeds) per experiment, policy and\n"
          "                        backend, with throughput ratios to a baseline policy\n"
          "  calibrate [-o FILE] [--reps N]\n"
          "                        measure beta, lambda, occupancy on the GPU and fit C_min\n"
          "                        and per-route scales; writes a calibration file\n"
          "  bench sim [--out FILE] [--steps N]\n"
          "                        simulated decode steps per second on the model backend,\n"
          "                        recording on, at 8 and 64 active requests\n"
          "  bench traces [--rows N] [--out FILE]\n"
          "                        trace reading speed (rows/s) on a generated CSV\n"
          "  bench kernels [--cases SPEC] [--splits LIST] [--reps N] [--out FILE]\n"
          "                        isolated-kernel benchmark on the GPU (see --help there)\n"
          "\n"
          "  -h, --help            this text\n"
          "  -V, --version         version and build\n"
          "\n"
          "Experiment files are documented in experiments/README.md. Output: h5dump -H FILE,\n"
          "or h5py in Python (README.md shows how).\n",
          f);
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -1;
    *out = v;
    return 0;
}

/* The one EXPERIMENT.json argument left after the options, loaded, with --seed
 * applied. Returns 0, or the exit code (the message is printed). */
static int load_experiment(int argc, char **argv, const char *cmd, const char *seed,
                           pkv_config *cfg) {
    if (optind + 1 != argc) {
        fprintf(stderr, "pkvsim %s: expected exactly one EXPERIMENT.json (see pkvsim --help)\n",
                cmd);
        return 2;
    }
    pkv_err e;
    if (pkv_config_load(cfg, argv[optind], &e)) {
        fprintf(stderr, "pkvsim: %s\n", e.msg);
        return 1;
    }
    if (seed && parse_u64(seed, &cfg->seed)) {
        fprintf(stderr, "pkvsim: --seed: \"%s\" is not a non-negative integer\n", seed);
        pkv_config_free(cfg);
        return 1;
    }
    return 0;
}

static void join_args(char *buf, size_t n, int argc, char **argv) {
    buf[0] = 0;
    for (int i = 0; i < argc; i++) {
        strncat(buf, argv[i], n - strlen(buf) - 1);
        if (i + 1 < argc) strncat(buf, " ", n - strlen(buf) - 1);
    }
}

static int cmd_run(int argc, char **argv) {
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"backend", required_argument, 0, 'b'},
                                         {"seed", required_argument, 0, 's'},
                                         {"route", required_argument, 0, 'r'},
                                         {"calibration", required_argument, 0, 'c'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *output = NULL, *backend = NULL, *seed = NULL, *route = NULL, *calib = NULL;
    int quiet = 0, c;
    char cmdline[4096];
    join_args(cmdline, sizeof cmdline, argc, argv);
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:b:s:r:c:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            output = optarg;
            break;
        case 'b':
            backend = optarg;
            break;
        case 's':
            seed = optarg;
            break;
        case 'r':
            route = optarg;
            break;
        case 'c':
            calib = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fputs("pkvsim run: see pkvsim --help\n", stderr);
            return 2;
        }
    }
    pkv_config cfg;
    pkv_err e;
    int rc = load_experiment(argc, argv, "run", seed, &cfg);
    if (rc) return rc;
    rc = 1;
    if (backend) {
        int k = -1;
        for (int i = 0; pkv_backend_names[i]; i++)
            if (strcmp(pkv_backend_names[i], backend) == 0) k = i;
        if (k < 0) {
            fprintf(stderr, "pkvsim: --backend: \"%s\" is not one of auto, model, cpu, cuda\n",
                    backend);
            goto out;
        }
        cfg.backend = (pkv_backend_kind)k;
    }
    if (output) snprintf(cfg.output, sizeof cfg.output, "%s", output);
    if (calib) snprintf(cfg.calibration, sizeof cfg.calibration, "%s", calib);
    if (route) {
        pkv_route_policy probe;
        if (pkv_policy_init(&probe, route)) {
            fprintf(stderr,
                    "pkvsim: --route: \"%s\" is not a route or policy (ref_paged, pkv_bucket, "
                    "pkv_workqueue, pkv_fused, adaptive, oracle)\n",
                    route);
            goto out;
        }
        snprintf(cfg.policy, sizeof cfg.policy, "%s", route);
    }
    if (pkv_config_resolve(&cfg)) {
        fputs("pkvsim: out of memory\n", stderr);
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    pkv_run_opts ro = {
        .quiet = quiet || !isatty(2), .record = 1, .stop = &g_stop, .command_line = cmdline};
    pkv_summary sum;
    if (!quiet)
        fprintf(stderr, "pkvsim: %s on the %s backend, route %s, seed %llu\n", cfg.name,
                pkv_backend_names[pkv_backend_resolve(cfg.backend)], cfg.policy,
                (unsigned long long)cfg.seed);
    if (pkv_run_experiment(&cfg, &ro, &sum, &e)) {
        fprintf(stderr, "pkvsim: %s\n", e.msg);
        goto out;
    }
    if (!quiet) {
        printf("%s -> %s\n", cfg.name, cfg.output);
        pkv_summary_print(&sum, stdout);
    }
    rc = sum.interrupted ? 130 : 0;
out:
    pkv_config_free(&cfg);
    return rc;
}

/* ---- workload ------------------------------------------------------------------ */
static void print_lengths(FILE *f, const char *name, double *x, size_t n) {
    gsl_sort(x, 1, n);
    fprintf(f, "  %-9s mean %.1f  p50 %.0f  p90 %.0f  p99 %.0f  min %.0f  max %.0f\n", name,
            gsl_stats_mean(x, 1, n), gsl_stats_quantile_from_sorted_data(x, 1, n, 0.5),
            gsl_stats_quantile_from_sorted_data(x, 1, n, 0.9),
            gsl_stats_quantile_from_sorted_data(x, 1, n, 0.99), x[0], x[n - 1]);
}

static int cmd_workload(int argc, char **argv) {
    static const struct option opts[] = {{"csv", required_argument, 0, 'c'},
                                         {"seed", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *csv = NULL, *seed = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            csv = optarg;
            break;
        case 's':
            seed = optarg;
            break;
        case 'h':
            puts("usage: pkvsim workload EXPERIMENT.json [--csv OUT.csv] [--seed N]\n"
                 "Draws the request stream the experiment would simulate (arrival time, prompt\n"
                 "and decode length) without simulating, and prints its statistics: count,\n"
                 "duration, rate, inter-arrival CV, length percentiles. --csv also writes the\n"
                 "stream (t_arrival_s,prompt_len,decode_len). Closed-loop arrival times depend\n"
                 "on the simulation, so only lengths are reported for them.");
            return 0;
        default:
            return 2;
        }
    }
    pkv_config cfg;
    int rc = load_experiment(argc, argv, "workload", seed, &cfg);
    if (rc) return rc;
    rc = 1;
    pkv_workload w = {0};
    double *t = NULL, *p = NULL, *d = NULL, *gap = NULL;
    FILE *out = NULL;
    char tmp[1100] = "";
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
    if (csv) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", csv, (int)getpid());
        out = fopen(tmp, "w");
        if (!out) {
            fprintf(stderr, "pkvsim workload: cannot write %s\n", csv);
            goto done;
        }
        fputs("t_arrival_s,prompt_len,decode_len\n", out);
    }
    size_t n = 0, alloc = 0;
    pkv_request_draw r;
    while (n < cap && pkv_workload_next(&w, 0.0, &r) == 0) {
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
        if (out)
            fprintf(out, "%.9g,%d,%d\n", closed ? NAN : r.t_arrival, r.prompt_len, r.decode_len);
        n++;
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
        if (!gap) goto done;
        for (size_t i = 1; i < n; i++) gap[i - 1] = t[i] - t[i - 1];
        double dur = t[n - 1] - t[0], mean = gsl_stats_mean(gap, 1, n - 1);
        printf("  duration  %.6g s (first to last arrival)\n", dur);
        printf("  rate      %.6g requests/s\n", dur > 0 ? (n - 1) / dur : NAN);
        printf("  gap CV    %.6g\n", mean > 0 ? gsl_stats_sd_m(gap, 1, n - 1, mean) / mean : NAN);
    }
    print_lengths(stdout, "prompt", p, n);
    print_lengths(stdout, "decode", d, n);
    if (out) {
        int bad = ferror(out);
        bad |= fclose(out) != 0;
        out = NULL;
        if (bad || rename(tmp, csv) != 0) {
            fprintf(stderr, "pkvsim workload: cannot write %s\n", csv);
            goto done;
        }
        *tmp = 0;
        printf("  written   %s\n", csv);
    }
    rc = 0;
done:
    if (out) fclose(out);
    if (*tmp) remove(tmp);
    free(t), free(p), free(d), free(gap);
    pkv_workload_free(&w);
    pkv_config_free(&cfg);
    return rc;
}

/* ---- bench sim ---------------------------------------------------------------- */
static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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
            if (parse_u64(optarg, count) || *count == 0) {
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

static int cmd_bench_sim(int argc, char **argv) {
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
        double t0 = wall_s();
        if (pkv_run_experiment(&cfg, &ro, &sum, &e)) {
            fprintf(stderr, "pkvsim: %s\n", e.msg);
            rc = 1;
        } else {
            double dt = wall_s() - t0;
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
static int cmd_bench_traces(int argc, char **argv) {
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
            double t0 = wall_s();
            if (pkv_trace_load(&tr, &sp, &e)) {
                fprintf(stderr, "pkvsim: %s\n", e.msg);
                rc = 1;
                break;
            }
            times[k] = wall_s() - t0;
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

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("pkvsim %s (CUDA kernels: %s)\n", PKV_VERSION,
#ifdef PKV_HAVE_CUDA
               "built"
#else
               "not built"
#endif
        );
        return 0;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "workload")) return cmd_workload(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate")) return pkv_calibrate_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return pkv_report_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench") && argc >= 3 && !strcmp(argv[2], "sim"))
        return cmd_bench_sim(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench") && argc >= 3 && !strcmp(argv[2], "traces"))
        return cmd_bench_traces(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench") && argc >= 3 && !strcmp(argv[2], "kernels"))
        return pkv_bench_kernels_main(argc - 2, argv + 2);
    fprintf(stderr, "pkvsim: unknown command \"%s\" (see pkvsim --help)\n", cmd);
    return 2;
}
