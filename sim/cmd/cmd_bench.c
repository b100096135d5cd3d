/* pkvsim bench sim | bench traces: simulator and trace-reader speed. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>

#include "pkv_gitrev.h"
#include "cli.h"
#include "pkv_clock.h"
#include "rng.h"
#include "runner.h"

/* ---- bench sim ---------------------------------------------------------------- */
/* The options the bench commands share (--out FILE, --COUNT_OPT N into *count, a
 * positive count) and the output opened (default `out`; pkv_cli_out_open into o) with the
 * table's head on it and on stdout: the table's FILE, or NULL with *rc the exit status (0
 * after --help). */
static FILE *bench_open(int argc, char **argv, const char *cmd, const char *count_opt,
                        void (*help)(void), const char *out, uint64_t *count, pkv_out *o,
                        const char *head, int *rc) {
    const char *count_s = NULL;
    const pkv_cli_opt opts[] = {{"out", 'o', PKV_CLI_STRING, &out, 0},
                                {count_opt, 'n', PKV_CLI_STRING, &count_s, 0}};
    char name[32];
    snprintf(name, sizeof name, "bench %s", cmd);
    if ((*rc = pkv_cli_options(name, argc, argv, opts, 2, help)) >= 0) return NULL;
    if (count_s && (pkv_cli_parse_u64(count_s, count) || *count == 0)) {
        fprintf(stderr, "pkvsim bench %s: --%s: \"%s\" is not a positive integer\n", cmd, count_opt,
                count_s);
        *rc = 2;
        return NULL;
    }
    FILE *f = pkv_cli_out_open(name, o, out);
    *rc = f ? 0 : 1;
    if (f) fputs(head, stdout), fputs(head, f);
    return f;
}

/* One case of bench sim: its figures, measured in a child process so that peak RSS
 * is the case's own. */
typedef struct sim_case {
    const char *loop;   /* "closed" or "open" */
    int active;         /* rows: max_active (and closed-loop concurrency) */
    const char *record; /* run.record */
    uint64_t steps;     /* max_steps (0: run until num_requests finish) */
    uint64_t requests;  /* num_requests (0: unbounded) */
    double rate;        /* open loop: arrivals per simulated second */
    int decode;         /* mean decode length (uniform over [d/2, 3d/2]) */
} sim_case;

typedef struct sim_result {
    int ok;
    uint64_t steps, finished;
    double host_s, t_sim, rss_mb, file_bytes;
    char err[1100];
} sim_result;

enum { BENCH_PROMPT = 512, BENCH_DECODE = 64 };

static int bench_text(char *text, size_t n, const sim_case *c, const char *out) {
    char arrival[160], reqs[64] = "";
    if (!strcmp(c->loop, "closed"))
        snprintf(arrival, sizeof arrival, "{\"process\": \"closed\", \"concurrency\": %d}",
                 c->active);
    else
        snprintf(arrival, sizeof arrival, "{\"process\": \"poisson\", \"rate\": %.9g}", c->rate);
    if (c->requests)
        snprintf(reqs, sizeof reqs, ", \"num_requests\": %llu", (unsigned long long)c->requests);
    return snprintf(
               text, n,
               "{\"name\": \"bench-sim\", \"workload\": {\"arrival\": %s, \"prompt\": {\"dist\": "
               "\"fixed\", \"value\": %d}, \"decode\": {\"dist\": \"uniform\", \"min\": %d, "
               "\"max\": %d}"
               "%s, \"max_context\": %d}, \"serving\": {\"max_active\": %d, \"kv_pages\": %d}, "
               "\"route\": {\"policy\": \"adaptive\"}, \"run\": {\"max_steps\": %llu, \"record\": "
               "\"%s\", \"output\": \"%s\"}}",
               arrival, BENCH_PROMPT, c->decode / 2, c->decode * 3 / 2, reqs,
               BENCH_PROMPT + c->decode * 2, c->active,
               c->active * ((BENCH_PROMPT + c->decode * 2) / 16 + 2), (unsigned long long)c->steps,
               c->record, out) >= (int)n;
}

static void bench_child(const void *arg, void *result) {
    const sim_case *c = arg;
    sim_result r = {0};
    char out[64], *text = malloc(4096);
    snprintf(out, sizeof out, "/tmp/pkvsim-bench-%d.h5", (int)getpid());
    pkv_config cfg;
    pkv_err e;
    pkv_summary sum;
    if (!text || bench_text(text, 4096, c, out)) {
        snprintf(r.err, sizeof r.err, "experiment text too long");
    } else if (pkv_config_parse(&cfg, text, "bench-sim.json", &e)) {
        snprintf(r.err, sizeof r.err, "%s", e.msg);
    } else {
        pkv_run_opts ro = {.quiet = 1, .record = 1, .command_line = "pkvsim bench sim"};
        double t0 = pkv_clock_now();
        if (pkv_run_experiment(&cfg, &ro, &sum, &e)) {
            snprintf(r.err, sizeof r.err, "%s", e.msg);
        } else {
            struct rusage ru;
            struct stat st;
            getrusage(RUSAGE_SELF, &ru);
            r = (sim_result){.ok = 1,
                             .steps = sum.steps,
                             .finished = sum.finished,
                             .host_s = pkv_clock_now() - t0,
                             .t_sim = sum.t_end,
                             .rss_mb = ru.ru_maxrss / 1024.0,
                             .file_bytes = stat(out, &st) == 0 ? (double)st.st_size : NAN};
        }
        pkv_config_free(&cfg);
    }
    remove(out);
    *(sim_result *)result = r;
}

int pkv_bench_in_child(void (*run)(const void *arg, void *result), const void *arg, void *result,
                       size_t size) {
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        run(arg, result);
        _exit(write(fd[1], result, size) == (ssize_t)size ? 0 : 1);
    }
    close(fd[1]);
    const int rc = pid < 0 || read(fd[0], result, size) != (ssize_t)size ? -1 : 0;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return rc;
}

static sim_result bench_case(const sim_case *c) {
    sim_result r = {0};
    if (pkv_bench_in_child(bench_child, c, &r, sizeof r))
        snprintf(r.err, sizeof r.err, "the benchmark's child process failed");
    return r;
}

/* Run one case and print its row (to stdout and f) under the loop's label. */
static int bench_row(const sim_case *c, const char *label, FILE *f, sim_result *r) {
    *r = bench_case(c);
    if (!r->ok) {
        fprintf(stderr, "pkvsim bench sim: %s\n", r->err);
        return -1;
    }
    char row[320];
    snprintf(row, sizeof row, "| %s | %d | %s | %llu | %.3f | %.0f | %.0f | %.3f | %.1f | %.1f |\n",
             label, c->active, c->record, (unsigned long long)r->steps, r->host_s,
             r->steps / r->host_s, r->finished / r->host_s, 1e6 * r->host_s / r->steps, r->rss_mb,
             r->file_bytes / r->steps);
    fputs(row, stdout), fputs(row, f);
    fflush(stdout);
    return 0;
}

static void help_sim(void) {
    puts("usage: pkvsim bench sim [--out FILE] [--steps N]\n"
         "Runs the simulator on the model backend with adaptive routing, prompts of 512 and\n"
         "decodes of 32..96 tokens, at 8, 64, 256, 1024 and 4096 active rows, for N decode\n"
         "steps (default 200000; at most 16e6/rows, at least 2000), in a closed\n"
         "loop and in an open loop (Poisson arrivals at 1.05x the closed loop's measured\n"
         "service rate, as many requests as the closed loop finishes plus 5%, so prefills,\n"
         "finishes and a queue all happen), each with recording\n"
         "`full` and `summary`; then one closed-loop run of 10,000,000 requests (8 rows,\n"
         "decodes of 2..6) with `full` recording. Reports steps/s and requests/s of host\n"
         "time, the case's peak RSS and bytes per step of the output file. The table goes to\n"
         "stdout and to FILE (default bench_sim.txt).");
}

int pkv_cmd_bench_sim(int argc, char **argv) {
    char head[512];
    snprintf(head, sizeof head,
             "pkvsim %s, revision %s, one core\n\n| loop | rows | record | steps | host s | "
             "steps/s | requests/s | us/step | peak RSS MB | bytes/step |\n"
             "|---|---|---|---|---|---|---|---|---|---|\n",
             PKV_VERSION, PKV_GIT_REV);
    uint64_t steps = 200000;
    pkv_out fo;
    int rc = 0;
    FILE *f =
        bench_open(argc, argv, "sim", "steps", help_sim, "bench_sim.txt", &steps, &fo, head, &rc);
    if (!f) return rc;
    const int rows[] = {8, 64, 256, 1024, 4096};
    const char *records[] = {"full", "summary"};
    for (int k = 0; k < 5 && rc == 0; k++) {
        /* Fewer steps at more rows: about the same host time per case. */
        uint64_t n = 16000000ull / rows[k] > 2000 ? 16000000ull / rows[k] : 2000;
        if (n > steps) n = steps;
        double rate = 0;
        for (int loop = 0; loop < 2 && rc == 0; loop++) {
            for (int m = 0; m < 2 && rc == 0; m++) {
                /* The open loop's arrivals (which outpace its service: each arrival's
                 * prefill runs alone) stop after about the closed loop's count, so the
                 * queue, and memory, stay bounded. */
                uint64_t reqs = loop ? n * rows[k] / BENCH_DECODE * 21 / 20 + rows[k] : 0;
                sim_case c = {
                    loop ? "open" : "closed", rows[k], records[m], n, reqs, rate, BENCH_DECODE};
                sim_result r;
                if (bench_row(&c, c.loop, f, &r)) {
                    rc = 1;
                    break;
                }
                /* Open loop at a little over the closed loop's service rate. */
                if (!loop && m == 0) rate = 1.05 * r.finished / r.t_sim;
            }
        }
    }
    if (rc == 0) {
        /* Ten million requests through one run: memory must not grow with them. */
        sim_case c = {"closed", 8, "full", 0, 10000000, 0, 4};
        sim_result r;
        if (bench_row(&c, "closed, 10,000,000 requests", f, &r)) rc = 1;
    }
    return pkv_cli_out_close("bench sim", &fo, rc);
}

/* ---- bench traces ------------------------------------------------------------- */
static void help_traces(void) {
    puts("usage: pkvsim bench traces [--rows N] [--out FILE]\n"
         "Writes an N-row CSV trace (default 1,000,000) in each built-in CSV format\n"
         "(azure with datetimes, vidur with seconds) from GSL draws, then times\n"
         "reading it back (median of 5 reads) and reports rows per second. The table\n"
         "goes to stdout and FILE (default bench_traces.txt).");
}

int pkv_cmd_bench_traces(int argc, char **argv) {
    uint64_t rows = 1000000;
    pkv_out ro;
    int rc = 0;
    FILE *res =
        bench_open(argc, argv, "traces", "rows", help_traces, "bench_traces.txt", &rows, &ro,
                   "| format | rows | file MiB | median read s | rows/s |\n"
                   "|---|---|---|---|---|\n",
                   &rc);
    if (!res) return rc;
    gsl_rng *r = pkv_stream_create(1, PKV_STREAM_PROMPT);
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
            double t0 = pkv_clock_now();
            if (pkv_trace_load(&tr, &sp, &e)) {
                fprintf(stderr, "pkvsim: %s\n", e.msg);
                rc = 1;
                break;
            }
            times[k] = pkv_clock_now() - t0;
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
    return pkv_cli_out_close("bench traces", &ro, rc);
}
