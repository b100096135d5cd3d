/* pkvsim: the command-line program. Only main() decides to exit. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <unistd.h>

#include "cmd_calibrate.h"
#include "cli.h"
#include "pkv_gitrev.h"
#include "cmd_bmodel.h"
#include "cmd_kbench.h"
#include "calib.h"
#include "config_keys.h"
#include "pkv_files.h"
#include "runner.h"
#include "sweep.h"

static volatile sig_atomic_t g_stop = 0;

/* SIGINT, SIGTERM, SIGHUP: the first finishes the step and writes a valid file marked
 * interrupted; a second stops at once, removing the temporary file. */
static void on_stop(int sig) {
    if (g_stop) {
        pkv_cleanup_now();
        _exit(128 + sig);
    }
    g_stop = sig;
}

static void catch_stops(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* The run command's options, in the usage and in `run --help`. */
static const char run_options[] =
    "      -o, --output FILE       output file (default: the experiment's run.output,\n"
    "                              else NAME.h5 in the current folder)\n"
    "      -b, --backend NAME      auto | model | cpu | cuda (default: run.backend, auto)\n"
    "                              auto = cuda where a GPU is usable, else model\n"
    "      -s, --seed N            experiment seed (default: run.seed, 1)\n"
    "      -c, --calibration FILE  calibration file (default: route.calibration)\n"
    "      -r, --route NAME        route policy (default: route.policy): ref_paged,\n"
    "                              pkv_bucket, pkv_workqueue, pkv_fused, flashinfer,\n"
    "                              flashinfer_tc (where built), adaptive, oracle\n"
    "      -q, --quiet             no progress line and no summary\n"
    "          --slo ttft=MS,tpot=MS,e2el=MS   SLOs for goodput (default: the slo section)\n"
    "          --json FILE         the serving metrics (TTFT, TPOT, ITL, E2E latency: mean,\n"
    "                              median, std, percentiles; throughputs, goodput) with\n"
    "                              the key names of vLLM's benchmark result files\n"
    "          --detailed          --json with the per-request arrays too (input_lens,\n"
    "                              output_lens, ttfts, itls, start_times, errors), as vLLM's\n"
    "                              --save-detailed\n"
    "      -n, --dry-run           print the resolved experiment (every key, the model's\n"
    "                              bytes and FLOPs), or a sweep's points, and run nothing\n"
    "                        an experiment with a `sweep` section runs every point into\n"
    "                        one file (resumable; experiments/README.md, Sweeps)\n"
    "                        under mpirun: a sweep's points, or a fleet's replicas, spread\n"
    "                        over the ranks (experiments/README.md)\n";

/* The bench commands, in the usage and in `bench --help`. */
static const char bench_commands[] =
    "  bench sim [--out FILE] [--steps N]\n"
    "                        simulated decode steps per second on the model backend,\n"
    "                        recording on, at 8 and 64 active requests\n"
    "  bench traces [--rows N] [--out FILE]\n"
    "                        trace reading speed (rows/s) on a generated CSV\n"
    "  bench fleet [--requests N] [--out FILE]\n"
    "                        fleets of 1 to 1,000 replicas behind a router: iterations\n"
    "                        per second, the router's cost, peak RSS\n"
    "  bench model [--model NAME] [--rows LIST] [--reps N] [--out FILE]\n"
    "                        a served model's GEMMs alone on the GPU over token widths,\n"
    "                        against the read ceiling and a 8192^3 GEMM; fits the\n"
    "                        calibration's gemm_gbps, gemm_us, gemm_tflops\n"
    "  bench allreduce [--model NAME] [--ranks N] [--rows LIST] [--reps N]\n"
    "                        tensor parallelism's all-reduce through NCCL (built with\n"
    "                        -DPKV_NCCL=ON) beside the calibration's model of it\n"
    "  bench kernels [--cases SPEC] [--splits LIST] [--reps N] [--out FILE]\n"
    "                        isolated-kernel benchmark on the GPU (see --help there)\n";

static void usage(FILE *f) {
    fputs("usage: pkvsim COMMAND [OPTIONS]\n"
          "\n"
          "A discrete-event simulator of LLM decode serving whose decode steps run paged\n"
          "decode-attention kernels (or their cost model), recording every step to HDF5.\n"
          "\n"
          "commands:\n"
          "  run EXPERIMENT.json   simulate an experiment and write its HDF5 dataset\n",
          f);
    fputs(run_options, f);
    fputs("  workload EXPERIMENT.json [--csv OUT] [--seed N]\n"
          "                        the request stream an experiment would generate, and its\n"
          "                        statistics (count, duration, rate, gap CV, percentiles)\n"
          "  keys [experiment | calibration]\n"
          "                        every key of experiment (or calibration) files, its kind\n"
          "                        and default, one per line (tab-separated)\n"
          "  report FILE.h5... [--baseline POLICY] [--csv OUT] [--json OUT] [--counters]\n"
          "                        mean +/- sd over runs (seeds) per configuration, policy\n"
          "                        and backend (the keys that differ as columns, in numeric\n"
          "                        order; a sweep file's points are runs), with throughput\n"
          "                        ratios to a baseline policy (of the means, and paired by\n"
          "                        seed with a 95% interval) and TPOT ratios\n"
          "  fit FILE.h5... [--test FILE.h5]... [--base CAL] [-o OUT.json] [--out TABLE]\n"
          "                        fit the structured cost model of every route to the\n"
          "                        measured steps of cuda runs (GSL nonlinear least squares),\n"
          "                        its error on held-out runs; writes a calibration file\n"
          "  fit --engine PROFILE.json VALIDATION... [-o OUT.json]\n"
          "                        fit an engine profile's host work to the published\n"
          "                        measurements of its engine (experiments/validation/), the\n"
          "                        held-out files' errors beside the fitted ones\n"
          "  validate [FILES | DIR]... [--json OUT]\n"
          "                        replay published measurements of real engines (vLLM,\n"
          "                        SGLang) on the model backend: published, predicted, error\n"
          "  plan PLAN.json [--json OUT] [-b BACKEND] [-q]\n"
          "                        the fewest replicas and the cheapest configuration that\n"
          "                        meet a workload's SLOs at each load, with the margin\n"
          "  calibrate [-o FILE] [--reps N] [--model NAME] [--groups LIST]\n"
          "                        measure beta, lambda, occupancy on the GPU, time a sweep of\n"
          "                        decode steps (rows, contexts, GQA groups) and a model's\n"
          "                        GEMMs, fit every route's cost model; writes a\n"
          "                        calibration file\n",
          f);
    fputs(bench_commands, f);
    fputs("\n"
          "  -h, --help            this text\n"
          "  -V, --version         version and build\n"
          "\n"
          "Experiment files are documented in experiments/README.md. Output: h5dump -H FILE,\n"
          "or h5py in Python (README.md shows how).\n",
          f);
}

/* --json may be written: not one of the run's inputs, and not its output (checked
 * before the run, so a clash does not wait for the run's end). */
static int json_ok(const char *path, const pkv_config *cfg) {
    const char *in[PKV_CONFIG_INPUTS + 1], *what[PKV_CONFIG_INPUTS + 1];
    int n = pkv_config_inputs(cfg, in, what);
    in[n] = cfg->output, what[n++] = "the output file";
    if (pkv_same_path(path, cfg->output)) {
        fprintf(stderr,
                "pkvsim run: --json %s is the run's output file (-o or run.output); name "
                "another file\n",
                path);
        return -1;
    }
    pkv_err e;
    if (pkv_output_ok(path, in, what, n, "--json", &e)) {
        fprintf(stderr, "pkvsim: %s\n", e.msg);
        return -1;
    }
    return 0;
}

/* The offered rate of the arrivals the log holds (requests after the first over the span
 * of their arrivals) and their burstiness, as vLLM's gamma shape: 1 / cv^2 of the gaps. */
static void offered(const pkv_request_log *log, double *rate, double *burstiness) {
    *rate = *burstiness = NAN;
    if (!log || log->n < 3) return;
    double *t = malloc(log->n * sizeof *t);
    if (!t) return;
    for (size_t i = 0; i < log->n; i++) t[i] = log->req[i].t_arrival;
    gsl_sort(t, 1, log->n);
    const double span = t[log->n - 1] - t[0];
    if (span > 0) {
        for (size_t i = log->n - 1; i > 0; i--) t[i] -= t[i - 1]; /* the gaps, in t[1..] */
        const double mean = gsl_stats_mean(t + 1, 1, log->n - 1),
                     var = gsl_stats_variance_m(t + 1, 1, log->n - 1, mean);
        *rate = (double)(log->n - 1) / span;
        *burstiness = var > 0 ? mean * mean / var : NAN;
    }
    free(t);
}

/* --json: vLLM's result file (its per-request arrays with --detailed, as vLLM's
 * --save-detailed), under a temporary name, never over one of the run's inputs or its
 * output. Its setup from the experiment: a renewal process's rate and burstiness (the
 * gamma shape 1 / cv^2); a closed loop's concurrency, all at once; another process, or
 * a trace at its own times, the rate and burstiness of the arrivals offered (over their
 * span, after rate_scale). */
static int write_json(const char *path, const pkv_config *cfg, const pkv_summary *sum,
                      pkv_request_log *log, int detailed) {
    if (json_ok(path, cfg)) return -1;
    const pkv_arrival_spec *a = &cfg->workload.arrival;
    pkv_vllm_meta m = {.backend = "pkvsim",
                       .label = cfg->name,
                       .model_id = cfg->model.name,
                       .request_rate = NAN,
                       .burstiness = NAN,
                       .max_concurrency = -1,
                       .detailed = detailed};
    switch (a->kind) {
    case PKV_ARRIVAL_POISSON:
    case PKV_ARRIVAL_DETERMINISTIC:
        m.request_rate = a->rate, m.burstiness = a->kind == PKV_ARRIVAL_POISSON ? 1 : NAN;
        break;
    case PKV_ARRIVAL_GAMMA:
        m.request_rate = a->rate, m.burstiness = 1 / (a->cv * a->cv);
        break;
    case PKV_ARRIVAL_WEIBULL:
        m.request_rate = a->rate;
        break;
    case PKV_ARRIVAL_CLOSED:
        m.request_rate = INFINITY;
        m.max_concurrency = a->concurrency;
        break;
    default:
        break;
    }
    const bool trace_times = cfg->workload.trace && cfg->workload.trace_times;
    if (trace_times || a->kind == PKV_ARRIVAL_MMPP || a->kind == PKV_ARRIVAL_PIECEWISE)
        offered(log, &m.request_rate, &m.burstiness);
    pkv_out o;
    FILE *f = pkv_out_open(&o, path);
    if (!f || pkv_out_close(&o, pkv_summary_json(sum, &m, log, f) == 0)) {
        fprintf(stderr, "pkvsim: --json %s: cannot write it: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void help(void) {
    fputs("usage: pkvsim run EXPERIMENT.json [OPTIONS]\n"
          "simulate an experiment and write its HDF5 dataset (experiments/README.md)\n\n",
          stdout);
    fputs(run_options, stdout);
}

/* `bench` alone, with --help, or with a subcommand this build lacks. */
/* The benchmarks by name; those on a GPU NULL in a build without CUDA. */
#ifdef PKV_HAVE_CUDA
#define GPU_BENCH(fn) fn
#else
#define GPU_BENCH(fn) NULL
#endif
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} benches[] = {{"sim", pkv_cmd_bench_sim},
               {"traces", pkv_cmd_bench_traces},
               {"fleet", pkv_cmd_bench_fleet},
               {"kernels", GPU_BENCH(pkv_bench_kernels_main)},
               {"model", GPU_BENCH(pkv_bench_model_main)},
               {"allreduce", GPU_BENCH(pkv_bench_allreduce_main)}};

/* pkvsim bench NAME ...: the benchmark NAME, or the list. */
static int bench(int argc, char **argv) {
    for (size_t i = 0; argc >= 3 && i < sizeof benches / sizeof *benches; i++) {
        if (strcmp(argv[2], benches[i].name)) continue;
        if (benches[i].run) return benches[i].run(argc - 2, argv + 2);
        fprintf(stderr, "pkvsim bench: %s\n", pkvk_last_error());
        return 1;
    }
    const int asked = argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h");
    if (!asked) fprintf(stderr, "pkvsim bench: unknown benchmark \"%s\"\n", argv[2]);
    FILE *f = asked && argc >= 3 ? stdout : stderr;
    fputs("usage: pkvsim bench NAME [OPTIONS] (NAME --help for its own)\n\n", f);
    fputs(bench_commands, f);
    return asked && argc >= 3 ? 0 : 2;
}

static int cmd_run(int argc, char **argv) {
    const char *output = NULL, *backend = NULL, *seed = NULL, *route = NULL, *calib = NULL,
               *slo = NULL, *json = NULL;
    int quiet = 0, dry = 0, detailed = 0;
    pkv_request_log log = {0};
    const pkv_cli_opt opts[] = {{"output", 'o', PKV_CLI_STRING, &output, 0},
                                {"backend", 'b', PKV_CLI_STRING, &backend, 0},
                                {"seed", 's', PKV_CLI_STRING, &seed, 0},
                                {"route", 'r', PKV_CLI_STRING, &route, 0},
                                {"calibration", 'c', PKV_CLI_STRING, &calib, 0},
                                {"quiet", 'q', PKV_CLI_FLAG, &quiet, 0},
                                {"dry-run", 'n', PKV_CLI_FLAG, &dry, 0},
                                {"slo", 0, PKV_CLI_STRING, &slo, 0},
                                {"json", 0, PKV_CLI_STRING, &json, 0},
                                {"detailed", 0, PKV_CLI_FLAG, &detailed, 0}};
    char cmdline[4096];
    pkv_cli_join_args(cmdline, sizeof cmdline, argc, argv);
    const int orc =
        pkv_cli_options("run", argc, argv, opts, (int)(sizeof opts / sizeof *opts), help);
    if (orc >= 0) return orc;
    if (detailed && !json) {
        fputs("pkvsim run: --detailed adds the per-request arrays to --json FILE; give both\n",
              stderr);
        return 2;
    }
    const pkv_cli_overrides ov = {output, backend, seed, route, calib, slo};
    if (optind + 1 != argc) {
        fputs("pkvsim run: expected exactly one EXPERIMENT.json (see pkvsim --help)\n", stderr);
        return 2;
    }
    int sweep = pkv_sweep_present(argv[optind]);
    if (sweep < 0) return 1; /* the message is printed */
    if (sweep) {
        if (json) {
            fputs("pkvsim run: --json is for one run; a sweep's /sweep/index holds each point's "
                  "figures\n",
                  stderr);
            return 2;
        }
        if (!dry) catch_stops();
        return pkv_sweep_main(argv[optind], &ov, quiet, dry, &g_stop, cmdline);
    }
    const char *n_ranks = getenv("OMPI_COMM_WORLD_SIZE");
    const int spread = n_ranks && atoi(n_ranks) > 1;
    pkv_config cfg;
    pkv_err e;
    int rc = pkv_cli_load_experiment(argc, argv, "run", NULL, &cfg);
    if (rc) return rc;
    rc = 1;
    if (pkv_cli_apply(&cfg, &ov)) goto out;
    if (json && json_ok(json, &cfg)) goto out;
    if (dry) { /* the resolved experiment, nothing run */
        printf("%s\n", cfg.resolved);
        rc = 0;
        goto out;
    }
    catch_stops(); /* before MPI_Init: a rank signalled there hears it as the others do */
    const pkv_ranks *ranks = NULL;
    if (spread) {
        if (pkv_fleet_slots(&cfg.fleet) < 2) {
            fputs("pkvsim run: under mpirun a sweep's points or a fleet's replicas are spread "
                  "over the ranks; this experiment has neither, and every rank would run it\n",
                  stderr);
            rc = 2;
            goto out;
        }
        if (pkv_cli_ranks_start(&ranks)) goto out;
        if (ranks->rank != 0) quiet = 1, json = NULL; /* rank 0 writes and prints */
    }
    pkv_run_opts ro = {.quiet = quiet || !isatty(2),
                       .record = 1,
                       .stop = &g_stop,
                       .command_line = cmdline,
                       .request_log = json && !spread ? &log : NULL};
    pkv_summary sum;
    if (!quiet)
        fprintf(stderr,
                "pkvsim: %s: %s%s on the %s backend (calibration %s), route %s, seed %llu\n",
                cfg.name, cfg.model.name, pkv_model_kind_of(&cfg.model)->label,
                pkv_backend_names[pkv_backend_resolve(cfg.backend)],
                strrchr(cfg.calibration, '/') ? strrchr(cfg.calibration, '/') + 1 : cfg.calibration,
                cfg.policy, (unsigned long long)cfg.seed);
    ro.ranks = ranks;
    if (pkv_run_experiment(&cfg, &ro, &sum, &e)) {
        if (ranks)
            fprintf(stderr, "pkvsim: rank %d of %d: %s\n", ranks->rank, ranks->size, e.msg);
        else
            fprintf(stderr, "pkvsim: %s\n", e.msg);
        rc = g_stop ? 128 + (int)g_stop : 1; /* a signal during the set-up: its status */
        if (ranks) pkv_cli_ranks_end(rc);
        goto out;
    }
    if (ranks) pkv_cli_ranks_end(0);
    if (ranks && ranks->rank != 0) {
        rc = 0;
        goto out;
    }
    if (!quiet) {
        printf("%s -> %s\n", cfg.name, cfg.output);
        pkv_summary_print(&sum, stdout);
    }
    if (json && write_json(json, &cfg, &sum, ro.request_log, detailed)) goto out;
    rc = sum.interrupted ? 128 + (int)g_stop : 0;
out:
    pkv_request_log_free(&log);
    pkv_config_free(&cfg);
    return rc;
}

/* Every key the files take, with its kind and default, from the tables that parse them. */
static int cmd_keys(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "experiment";
    if (argc > 2 || (strcmp(which, "experiment") && strcmp(which, "calibration"))) {
        fprintf(stderr, "usage: pkvsim keys [experiment | calibration]\n");
        return 2;
    }
    const char *kinds[PKV_KIND_COUNT + 1] = {0}; /* the model kinds a key applies to */
    for (int i = 0; i < PKV_KIND_COUNT; i++) kinds[i] = pkv_model_kinds[i]->name;
    if (!strcmp(which, "experiment"))
        pkv_keys_print(pkv_config_keys(), "", kinds, stdout);
    else
        pkv_keys_print(pkv_calib_keys(), "", NULL, stdout);
    return 0;
}

int main(int argc, char **argv) {
    pkv_h5_init();
    /* GSL returns its errors (a failed allocation gives NULL, which every caller checks)
     * instead of aborting the program. */
    gsl_set_error_handler_off();
    /* A library that exits the process itself (HDF5 does, when an allocation fails
     * deep inside it) still leaves no temporary output behind. */
    atexit(pkv_cleanup_now);
    /* Past the file-size limit (ulimit -f) a write fails with "File too large", which
     * every writer reports, removing its temporary file; the signal would kill. */
    signal(SIGXFSZ, SIG_IGN);
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
        printf("pkvsim %s, revision %s (CUDA kernels: %s)\n", PKV_VERSION, PKV_GIT_REV,
#ifdef PKV_HAVE_CUDA
               "built"
#else
               "not built"
#endif
        );
        return 0;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "workload")) return pkv_cmd_workload(argc - 1, argv + 1);
#ifdef PKV_HAVE_CUDA
    if (!strcmp(cmd, "calibrate")) return pkv_calibrate_main(argc - 1, argv + 1);
#else
    if (!strcmp(cmd, "calibrate")) {
        fprintf(stderr, "pkvsim %s: %s\n", cmd, pkvk_last_error());
        return 1;
    }
#endif
    if (!strcmp(cmd, "report")) return pkv_cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "fit")) {
        for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
            if (!strcmp(argv[i], "--engine") || !strcmp(argv[i], "-e") ||
                !strncmp(argv[i], "--engine=", 9))
                return pkv_cmd_fit_engine(argc - 1, argv + 1);
        return pkv_cmd_fit(argc - 1, argv + 1);
    }
    if (!strcmp(cmd, "validate")) return pkv_cmd_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan")) {
        catch_stops();
        return pkv_cmd_plan(argc - 1, argv + 1, &g_stop);
    }
    if (!strcmp(cmd, "keys")) return cmd_keys(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return bench(argc, argv);
    fprintf(stderr, "pkvsim: unknown command \"%s\" (see pkvsim --help)\n", cmd);
    return 2;
}
