/* A route as one unit in the engine: its planning (in counts-only or full form, by the
 * plan's counts_only), its launch-level counters (what the cost model predicts from)
 * and the occupancy its kernels' waves are counted at. One file pair per route family
 * (route_ref: the no-split reference; route_pkv: PersistentKV's split routes;
 * route_fi: FlashInfer's), one row per route in routes.c: a route without its
 * operations does not link. The planner, the cost model and the fit reach a route
 * through its row. Its kernels' operations (CPU run, upload, launch) are the kernel
 * layer's (kernels/pkvk.h). */
#ifndef PKV_ROUTES_H
#define PKV_ROUTES_H

#include "cost.h"
#include "planner.h"

/* What a plan's rows add up to, for a route's counters: every row's true length
 * (tokens), the longest, the slots of the rows split more than once (merged_slots),
 * the most slots of one row, and the longest token range one CTA streams where each
 * row's first split is its longest (longest_range). A route's count may replace
 * merged_slots and longest_range with its own. */
typedef struct pkv_plan_sums {
    int64_t tokens, merged_slots;
    int32_t max_len, max_splits, longest_range;
} pkv_plan_sums;

typedef struct pkv_route_ops {
    /* plans[r] for the rows' true lengths (pkv_planner_build); a pkvk_status */
    int (*plan)(pkv_planner *pl, pkv_route r, const int32_t *seq_lens, int32_t n_rows);
    /* the plan's launches, merge launches, decode CTAs and tasks into out */
    void (*count)(const pkvk_shape *s, const pkvk_plan *p, pkv_plan_sums *sums, pkv_counters *out);
    /* decode CTAs resident on one SM: a wave is this x sm_count */
    int (*ctas_per_sm)(const pkv_calib *c);
} pkv_route_ops;

/* Route r's operations; NULL outside the enum. */
const pkv_route_ops *pkv_route_ops_of(pkv_route r);

/* The kernels' own occupancy (calibration resident_ctas_per_sm): the reference's and
 * PersistentKV's. */
int pkv_route_resident_ctas(const pkv_calib *c);

#endif
