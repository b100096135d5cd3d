/* Per-step counters of a plan and the cost model of DESIGN.md:
 *   T_r = s_r * (KVBytes/beta * max(1, C_min/C_r) + L_r * lambda + MergeBytes_r/beta)
 * with C_r the decode CTAs per SM, L_r the launches and s_r the route's fitted scale
 * (calibration route_scale, 1 by default). */
#ifndef PKV_COST_H
#define PKV_COST_H

#include "calib.h"
#include "pkvk.h"

typedef struct pkv_counters {
    int32_t launches;       /* kernel launches, merges included */
    int32_t merge_launches; /* of which merge kernels */
    int64_t ctas;           /* decode CTAs (merge CTAs not counted) */
    double cta_work_per_sm; /* ctas / sm_count */
    int64_t kv_bytes;       /* bytes: K and V of every row's true length */
    int64_t merge_bytes;    /* bytes: partial states written and read back */
    int32_t tasks;          /* workqueue tasks emitted (0 for other routes) */
    int32_t max_splits;     /* largest slot count of a row */
    double t_predicted;     /* seconds, cost model */
} pkv_counters;

/* The formula above without the route's scale s_r (what calibrate fits s_r against). */
double pkv_cost_time(const pkv_calib *c, const pkv_counters *k);
void pkv_cost_counters(const pkv_calib *c, const pkvk_shape *s, const pkvk_plan *p,
                       const int32_t *seq_lens, pkv_counters *out);

#endif
