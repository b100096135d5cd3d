/* The report's runs (analysis/report.c), as report_load.c reads them from output files:
 * a run's figures, its grouping key and configuration, its pools and checks. Internal to
 * the report. */
#ifndef PKV_REPORT_RUN_H
#define PKV_REPORT_RUN_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

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

#endif
