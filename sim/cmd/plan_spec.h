/* A plan file's plan section (pkvsim plan, sim/cmd/cmd_plan.c): its SLOs, loads,
 * candidates, replica bounds, prices and held-out errors, parsed and checked with errors
 * naming the JSON path; a candidate's values and description; a GPU's price. */
#ifndef PKV_PLAN_SPEC_H
#define PKV_PLAN_SPEC_H

#include "axis.h"
#include "summary.h"
#include "vfile.h"

enum { PKV_PLAN_MAX_SLO = 8, PKV_PLAN_MAX_AXES = 6, PKV_PLAN_MAX_CANDIDATES = 4096 };
/* The share of a kind's held-out figures whose error a margin is weighed against: four in
 * five (a mean would be one figure's past saturation, bench/RESULTS.md 2026-12-07) */
#define PKV_PLAN_HELD_OUT_QUANTILE 0.8

typedef struct pkv_plan_slo {
    const pkv_summary_figure *f;
    double limit; /* in the figure's unit */
    bool is_max;  /* the figure at most limit (else at least) */
    char label[40];
} pkv_plan_slo;

typedef struct pkv_gpu_price {
    char gpu[32];
    double usd_per_hour;
} pkv_gpu_price;

typedef struct pkv_plan_spec {
    pkv_plan_slo slo[PKV_PLAN_MAX_SLO];
    int n_slo;
    pkv_axis load;
    pkv_axis cand[PKV_PLAN_MAX_AXES];
    int n_cand;
    size_t n_candidates;
    char rep_path[128];
    int rep_min, rep_max;
    pkv_gpu_price *prices;
    int n_prices;
    char prices_file[1024], prices_note[256];
    double held_out[PKV_FIG_KINDS]; /* by kind, the absolute held-out error that
                                       PKV_PLAN_HELD_OUT_QUANTILE of its rows are within
                                       (NaN: none) */
    int held_out_n[PKV_FIG_KINDS];
    char held_out_file[1024];
} pkv_plan_spec;

/* The held-out error a figure of kind k is weighed against (a tail's own where the
 * file has tails, else its kind's mean and median's); *used: the kind it is. */
double pkv_plan_held_out(const pkv_plan_spec *p, int k, int *used);
/* The plan section of the experiment at exp (its prices and held-out files found from
 * its folder or the data path); ov: the run options that no axis may name. 0, or -1 with
 * the error. */
int pkv_plan_parse(pkv_plan_spec *p, const cJSON *plan, const char *exp,
                   const pkv_cli_overrides *ov, pkv_err *e);
void pkv_plan_free(pkv_plan_spec *p);
/* Candidate c's value of candidate axis a (the last axis varies fastest). */
const cJSON *pkv_plan_cand_value(const pkv_plan_spec *p, size_t c, int a);
/* "gpu=h200 router=least_requests": candidate c's values by their keys' last names. */
void pkv_plan_describe(const pkv_plan_spec *p, size_t c, char *buf, size_t n);
/* The price of route.gpu `gpu` (NULL: none in the prices file). */
const pkv_gpu_price *pkv_plan_price(const pkv_plan_spec *p, const char *gpu);

#endif
