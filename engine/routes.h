/* A route as one unit in the engine: its planning (in counts-only or full form, by the
 * plan's counts_only), its launch-level counters (what the cost model predicts from),
 * the occupancy its kernels' waves are counted at and its CPU run. One file pair per
 * route family (route_ref: the no-split reference; route_pkv: PersistentKV's split
 * routes; route_fi: FlashInfer's), one row per route in route_table.c: a route without
 * its operations does not link. The planner, the cost model, the fit and the cpu
 * backend reach a route through its row; a family sees only what this header gives
 * it. Its GPU upload and launch are still the kernel layer's (kernels/pkvk_run.h). */
#ifndef PKV_ROUTES_H
#define PKV_ROUTES_H

#include "calib.h"
#include "pkvk.h"

typedef enum pkv_bucket_mode {
    PKV_BUCKET_MODE_EXACT = 0, /* route length = true length rounded up to a tile */
    PKV_BUCKET_MODE_POW2,      /* route length = next power of two of the tile count */
} pkv_bucket_mode;

/* A plan's counters: what the cost model (engine/cost.h) predicts a step from. */
typedef struct pkv_counters {
    int32_t launches;       /* kernel launches, merges included */
    int32_t merge_launches; /* of which merge kernels */
    int64_t ctas;           /* decode CTAs (merge CTAs not counted) */
    double cta_work_per_sm; /* ctas / sm_count */
    int32_t wave_ctas;      /* CTAs of the route's kernel the GPU holds at once, as counted
                               (its occupancy x SMs; 0: from the calibration at use) */
    int64_t kv_bytes;       /* bytes: K and V of every row's true length */
    int64_t merge_bytes;    /* bytes: partial states written and read back */
    int32_t tasks;          /* workqueue tasks emitted (0 for other routes) */
    int32_t max_splits;     /* largest slot count of a row */
    int64_t max_cta_bytes;  /* bytes: K and V of the longest token range one CTA streams */
    double cta_bps_max;     /* bytes/s one CTA streams at most, below its route model's rate
                               (FP8 KV on PersistentKV's kernels: kv_fp8_cta_gbps; 0: none) */
    int32_t q_len;          /* query tokens a row: a verify step's k + 1 (0 or 1: decode);
                               picks the route model (pkv_calib_route_model) */
    double t_predicted;     /* seconds, cost model (device time) */
    double t_host;          /* seconds of host wall beyond it, where the clock is the wall and
                               the route's model has it (else 0); the policy adds it */
} pkv_counters;

/* What a planner found for the rows' lengths of its last step (tiles, or the bucket
 * planner's route lengths): most decode steps' are the last one's (a row crosses a
 * tile every 32 tokens), and take the answer without the search. */
typedef struct pkv_plan_memo {
    int32_t n;     /* rows of lens; -1: none (or more than PKVK_MEMO_ROWS) */
    int64_t chunk; /* the split planner's chunk for lens */
    int32_t *lens; /* [rows] */
} pkv_plan_memo;
enum { PKV_MEMO_SPLIT, PKV_MEMO_BUCKET, PKV_MEMOS };

/* What a route's planning reads: the step's shape, the calibration (the split policy's
 * constants), pkv_bucket's route lengths and two scratch arrays of a step's rows. */
typedef struct pkv_plan_ctx {
    pkvk_shape shape;
    const pkv_calib *cal;
    pkv_bucket_mode bucket_mode;
    int32_t *splits;     /* [rows] scratch */
    int32_t *route_lens; /* [rows] scratch */
    /* [PKV_MEMOS]: the split planner's chunk (pkv_workqueue and pkv_fused: one search a
     * step), the bucket planner's plan (the one in its pkvk_plan) */
    pkv_plan_memo *memo;
} pkv_plan_ctx;

/* What a plan's rows add up to, for a route's counters: every row's true length
 * (tokens), the longest, the slots of the rows split more than once (merged_slots)
 * and the most slots of one row; the route's count sets the longest token range one
 * of its CTAs streams (longest_range) and may replace merged_slots with its own. */
typedef struct pkv_plan_sums {
    int64_t tokens, merged_slots;
    int32_t max_len, max_splits, longest_range;
} pkv_plan_sums;

typedef struct pkv_route_ops {
    /* route r's plan p for the rows' true lengths (pkv_planner_build); a pkvk_status */
    int (*plan)(const pkv_plan_ctx *x, pkvk_plan *p, pkv_route r, const int32_t *seq_lens,
                int32_t n_rows);
    /* the plan's launches, merge launches, decode CTAs and tasks into out, and its
     * longest CTA range into sums */
    void (*count)(const pkvk_shape *s, const pkvk_plan *p, const int32_t *seq_lens,
                  pkv_plan_sums *sums, pkv_counters *out);
    /* decode CTAs resident on one SM: a wave is this x sm_count */
    int (*ctas_per_sm)(const pkv_calib *c);
    /* its CTAs on the CPU, for pkvk_cpu_run (the cpu backend, the CPU mirror) */
    pkvk_cpu_attend cpu_attend;
} pkv_route_ops;

/* Route r's operations; NULL outside the enum. */
const pkv_route_ops *pkv_route_ops_of(pkv_route r);

/* The kernels' own occupancy (calibration resident_ctas_per_sm): the reference's and
 * PersistentKV's. */
static inline int pkv_route_resident_ctas(const pkv_calib *c) {
    return c->resident_ctas_per_sm;
}

#endif
