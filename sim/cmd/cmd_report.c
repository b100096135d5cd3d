/* pkvsim report: the command line of the report tables (analysis/report.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pkv_files.h"
#include "report.h"

static void usage(void) {
    puts("usage: pkvsim report FILE.h5... [--baseline POLICY] [--csv OUT.csv] [--json OUT.json]\n"
         "                    [--routes] [--counters] [--best FIGURE|cheapest] [--attain SHARE]\n"
         "Groups the runs (a sweep file's points are runs) by their resolved configuration\n"
         "(the calibration by its file name and a hash of its text, a trace by its file\n"
         "name, so that runs made on two machines group together; the keys that differ\n"
         "between groups become columns, in numeric order), route policy and backend,\n"
         "and prints, per group, the mean +/- sample standard deviation over its runs\n"
         "(seeds) of decode tokens/s (simulated clock, wall, device), TTFT p50/p99, TPOT\n"
         "p50/p99, host overhead per step, goodput and SLO attainment (the share of\n"
         "finished requests within the experiment's slo section), whether the group meets\n"
         "its SLOs (every request served, refused ones aside, and at least --attain SHARE\n"
         "of them within: default 0.99), the simulated-clock throughput as a ratio to the\n"
         "baseline policy's group of the same configuration and backend (default\n"
         "ref_paged; of the means, and paired by seed with a 95% interval) and the TPOT\n"
         "p50 and TTFT p99 ratios to it. A model-backend group's\n"
         "figures are predicted: its `model error` is its calibration's per-step error over\n"
         "the routes it ran (pkvsim fit's held-out MAPE, else calibrate's rms), and a ratio\n"
         "to the baseline smaller than the two groups' errors summed says so.\n"
         "--routes adds a table of wall and device decode tokens/s with their ratios to\n"
         "the baseline paired by seed (95% interval), the largest and the mean error of\n"
         "the checked steps (run.check_every) and each route's share of the steps: the\n"
         "study's Table 2.\n"
         "--counters adds a table of the structural counters per step after warm-up\n"
         "(launches, merge launches, CTA work per SM, useful KV MB, merge MB: the study's\n"
         "Table 4), from the runs' /steps. --csv writes the first table's numbers, --json\n"
         "every group's figures (counters included) as one JSON document. --best FIGURE\n"
         "(decode_tok_s, ttft_p99, tpot_p50, request_goodput, ...) adds the best group of\n"
         "each policy and backend by it: a sweep's best point (lowest for latencies);\n"
         "--best cheapest the group of fewest GPUs (replicas x tensor parallel) that meets\n"
         "its SLOs, for each setting but the fleet's size (each load of a sweep; prices and\n"
         "a search without the grid: pkvsim plan).\n"
         "Interrupted runs are reported but flagged.");
}

/* An output of the report (--csv, --json): never one of the inputs; a pkv_out. */
typedef struct out_file {
    const char *path, *option;
    pkv_out o;
    FILE *f;
} out_file;

static int out_open(out_file *o, const char *const *inputs, int n) {
    if (!o->path) return 0;
    pkv_err e;
    const char **what = malloc(sizeof *what * (size_t)n);
    for (int i = 0; what && i < n; i++) what[i] = "an input file";
    int bad = !what || pkv_output_ok(o->path, inputs, what, n, o->option, &e);
    free(what);
    if (bad) {
        fprintf(stderr, "pkvsim report: %s\n", what ? e.msg : "out of memory");
        return -1;
    }
    return (o->f = pkv_cli_out_open("report", &o->o, o->path)) ? 0 : -1;
}

/* Close, and keep the file only when the report succeeded (rc 0). */
static int out_close(out_file *o, int rc) {
    if (!o->f) return rc;
    o->f = NULL;
    return pkv_cli_out_close("report", &o->o, rc) ? -1 : 0;
}

int pkv_cmd_report(int argc, char **argv) {
    const char *baseline = "ref_paged", *best = NULL, *attain_s = "0.99";
    out_file csv = {.option = "--csv"}, json = {.option = "--json"};
    unsigned tables = 0;
    const pkv_cli_opt opts[] = {{"baseline", 'b', PKV_CLI_STRING, &baseline, 0},
                                {"csv", 'c', PKV_CLI_STRING, &csv.path, 0},
                                {"json", 'j', PKV_CLI_STRING, &json.path, 0},
                                {"counters", 'k', PKV_CLI_BITS, &tables, PKV_REPORT_COUNTERS},
                                {"routes", 'r', PKV_CLI_BITS, &tables, PKV_REPORT_ROUTES},
                                {"best", 'B', PKV_CLI_STRING, &best, 0},
                                {"attain", 'a', PKV_CLI_STRING, &attain_s, 0}};
    const int orc = pkv_cli_options("report", argc, argv, opts, 7, usage);
    if (orc >= 0) return orc;
    char *end;
    const double attain = strtod(attain_s, &end);
    if (end == attain_s || *end || !(attain > 0 && attain <= 1)) {
        fprintf(stderr,
                "pkvsim report: --attain %s: give the share of requests that must meet the "
                "SLOs, a number in (0, 1] (0.99: 99%%)\n",
                attain_s);
        return 2;
    }
    int n = argc - optind;
    if (n < 1) {
        fputs("pkvsim report: give one or more pkvsim output files (see --help)\n", stderr);
        return 2;
    }
    const char *const *inputs = (const char *const *)argv + optind;
    /* A run counted twice would pass one seed off as two. */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (pkv_same_file(inputs[i], inputs[j])) {
                fprintf(stderr,
                        "pkvsim report: %s and %s are one file (named twice, or a link); a run "
                        "counts once: name each file once\n",
                        inputs[i], inputs[j]);
                return 2;
            }
    if (csv.path && json.path && pkv_same_path(csv.path, json.path)) {
        fprintf(stderr, "pkvsim report: --csv and --json name one file (%s); name two\n", csv.path);
        return 2;
    }
    if (out_open(&csv, inputs, n) || out_open(&json, inputs, n)) {
        out_close(&csv, -1);
        return 1;
    }
    pkv_err e;
    int rc = pkv_report_write(inputs, n, baseline, tables, best, attain, stdout, csv.f, json.f, &e);
    if (rc) fprintf(stderr, "pkvsim report: %s\n", e.msg);
    rc = out_close(&csv, rc);
    rc = out_close(&json, rc);
    return rc ? 1 : 0;
}
