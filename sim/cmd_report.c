/* pkvsim report: the command line of the report tables (analysis/report.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "pkv_files.h"
#include "report.h"

static void usage(void) {
    puts("usage: pkvsim report FILE.h5... [--baseline POLICY] [--csv OUT.csv] [--counters]\n"
         "Groups the runs (a sweep file's points are runs) by their resolved configuration\n"
         "(the keys that differ between groups become columns, in numeric order), route\n"
         "policy and backend, and prints, per group, the mean +/- sample standard deviation\n"
         "over its runs (seeds) of decode tokens/s (simulated clock, wall, device), TTFT\n"
         "p50/p99, TPOT p50, host overhead per step and goodput, with the simulated-clock\n"
         "throughput as a ratio to the baseline policy's group of the same configuration\n"
         "and backend (default ref_paged; of the means, and paired by seed with a 95%\n"
         "interval) and the TPOT p50 and TTFT p99 ratios to it.\n"
         "--counters adds a table of the structural counters per step after warm-up\n"
         "(launches, merge launches, CTA work per SM, useful KV MB, merge MB: the study's\n"
         "Table 4), from the runs' /steps. Interrupted runs are reported but flagged.");
}

int pkv_cmd_report(int argc, char **argv) {
    static const struct option opts[] = {{"baseline", required_argument, 0, 'b'},
                                         {"csv", required_argument, 0, 'c'},
                                         {"counters", no_argument, 0, 'k'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *baseline = "ref_paged", *csv = NULL;
    int ch, counters = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "b:c:kh", opts, NULL)) != -1) {
        switch (ch) {
        case 'k':
            counters = 1;
            break;
        case 'b':
            baseline = optarg;
            break;
        case 'c':
            csv = optarg;
            break;
        case 'h':
            usage();
            return 0;
        default:
            return 2;
        }
    }
    int n = argc - optind;
    if (n < 1) {
        fputs("pkvsim report: give one or more pkvsim output files (see --help)\n", stderr);
        return 2;
    }
    pkv_err e;
    char tmp[1100] = "";
    FILE *out = NULL;
    if (csv) { /* never one of the inputs; written under a temporary name */
        const char **what = malloc(sizeof *what * (size_t)n);
        for (int i = 0; what && i < n; i++) what[i] = "an input file";
        int bad =
            !what || pkv_output_ok(csv, (const char *const *)argv + optind, what, n, "--csv", &e);
        free(what);
        if (bad) {
            fprintf(stderr, "pkvsim report: %s\n", what ? e.msg : "out of memory");
            return 1;
        }
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", csv, (int)getpid());
        if (!(out = fopen(tmp, "w"))) {
            fprintf(stderr, "pkvsim report: cannot write %s\n", csv);
            return 1;
        }
    }
    int rc = pkv_report_write((const char *const *)argv + optind, n, baseline, counters, stdout,
                              out, &e);
    if (rc) fprintf(stderr, "pkvsim report: %s\n", e.msg);
    if (out && (ferror(out) | fclose(out)) && rc == 0) {
        fprintf(stderr, "pkvsim report: cannot write %s\n", csv);
        rc = -1;
    }
    if (out && (rc || rename(tmp, csv) != 0)) {
        if (!rc) fprintf(stderr, "pkvsim report: cannot write %s\n", csv);
        unlink(tmp);
        rc = -1;
    }
    return rc ? 1 : 0;
}
