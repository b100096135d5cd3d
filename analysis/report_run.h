/* The report's runs (analysis/report.c), as report_load.c reads them from output files:
 * a run's figures, its grouping key and configuration, its pools and checks. Internal to
 * the report. */
#ifndef PKV_REPORT_RUN_H
#define PKV_REPORT_RUN_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pkv_err.h"
#include "pkv_route.h"

enum { MAX_RUNS = 4096, N_VALUES = 10, MAX_COLS = 6 };

/* The /summary figures reported (summary.h's rows), in column order. */
extern const char *const report_value_names[N_VALUES];
enum { V_TTFT_P99 = 4, V_TPOT_P50 = 5 }; /* the latencies given as ratios too */
enum { V_ATTAIN = 9 };                   /* slo_attainment: a group meets its SLOs by it */
/* The structural counters (the study's Table 4): means over a run's steps after warm-up,
 * kept after the summary values in run.v. */
enum { N_COUNTERS = 5 };
extern const char *const report_counter_names[N_COUNTERS];

/* A fleet's pool in one run: its replicas' /replicas rows summed, and the latencies of the
 * requests it served (TTFT where prefilled, TPOT where decoded: one pool unless
 * disaggregated). */
enum { POOL_ROUTED, POOL_FINISHED, POOL_BUSY, POOL_UP_S, POOL_HIT, POOL_TTFT, POOL_TPOT, N_POOL_V };
typedef struct pool_fig {
    char name[64];
    int role, replicas;
    double v[N_POOL_V];
} pool_fig;

typedef struct run {
    char name[128], policy[32], backend[16];
    pool_fig *pools; /* a fleet's pools (owned; NULL: not a fleet) */
    int n_pools;
    char *key;     /* the resolved configuration less what the report shows apart (owned) */
    uint64_t seed; /* run.seed: a group's runs pair with the baseline's by it */
    bool has_seed;
    cJSON *conf; /* the same, parsed (owned) */
    double v[N_VALUES + N_COUNTERS];
    double err_max, err_mean;            /* over the run's checked steps (NaN: none) */
    double route_steps[PKV_ROUTE_COUNT]; /* steps each route ran (/summary steps_ROUTE) */
    double model_err; /* model backend: its calibration's per-step error over the routes the
                         run took (held-out MAPE of pkvsim fit, else calibrate's rms); NaN:
                         measured figures, or none recorded */
    int interrupted;
    bool served; /* every request it offered finished (or was refused: past the context) */
    int gpus;    /* replicas x tensor parallel, over the fleet's pools */
} run;

/* A sweep's axes (the /sweep/index columns that are JSON paths), as the files name them:
 * the report's columns come first. */
typedef struct report_axes {
    char path[MAX_COLS * 2][256];
    int n;
} report_axes;

/* The runs of one file into runs[*n...] (itself, or each point of a sweep, whose axes are
 * noted in ax): at most MAX_RUNS in all. -1 naming the file that cannot be read. */
int report_load_file(const char *path, run *runs, int *n, report_axes *ax, pkv_err *e);

/* report_group.c: a group is the runs of one configuration key, policy and backend. Its
 * value k's mean and sample sd (NaN values skipped; count: the values); its mean model
 * error (NaN: measured, or unknown); whether it meets its SLOs (1: every run served every
 * request it offered and the mean attainment is at least attain; 0: short; -2: a run
 * left requests unserved; -1: no SLO set); paired by seed, value k of each run over the
 * baseline group's run of its seed (*pm the mean ratio, *half its 95% Student t
 * half-width, NaN under two pairs; *np the pairs); its largest and mean check errors and
 * each route's share of its steps (returns its runs); pool p's figure k, mean over the
 * group's runs that have it. */
int report_same_group(const run *a, const run *b);
void report_group_stats(const run *runs, int n, const run *a, int k, double *mean, double *sd,
                        int *count);
double report_group_model_error(const run *runs, int n, const run *g);
int report_group_meets(const run *runs, int n, const run *g, double attain);
void report_paired_ratio(const run *runs, int n, const run *g, const run *base, int k, double *pm,
                         double *half, int *np);
int report_group_checks(const run *runs, int n, const run *g, double *err_max, double *err_mean,
                        double share[PKV_ROUTE_COUNT]);
double report_pool_mean(const run *runs, int n, const run *g, int p, int k);

/* A group's figures as the table, the CSV and the JSON give them. */
typedef struct report_fig {
    double mean[N_VALUES], sd[N_VALUES];
    double ratio;                          /* throughput over the baseline group's */
    double pm, half;                       /* paired by seed: the mean ratio, its 95% half-width */
    int np;                                /* pairs */
    double lat_ratio[2];                   /* TPOT p50 and TTFT p99 over the baseline group's */
    double me;                             /* the group's model error (NaN: none) */
    int count, interrupted, inside, meets; /* runs; any cut; the ratio inside the model
                                              errors; report_group_meets' answer */
} report_fig;

/* report_out.c: /replicas roles by number; the text of the value at a dotted path of a
 * configuration (NULL when absent; caller frees), and as the table and CSV show it (a
 * pool list as pkv_report_pools_text gives it, a path as its file's name); whether value
 * k is a time (best low); the CSV's head and a group's row; a group's JSON object into
 * groups. cols: the configuration paths shown as columns. */
extern const char *const report_role_names[3];
char *report_value_at(const cJSON *o, const char *path);
char *report_value_shown(const cJSON *conf, const char *path);
bool report_value_low(int k);
void report_csv_head(FILE *out, char (*cols)[256], int n_cols);
void report_csv_row(FILE *out, const run *r, const report_fig *f, char (*cols)[256], int n_cols);
void report_group_json(cJSON *groups, const run *runs, int n, const run *r, const run *base,
                       const report_fig *f, char (*cols)[256], int n_cols);

#endif
