/* Planning: each route's plan for a step, made by its family's operations
 * (engine/routes.h; PersistentKV's split policy is in engine/route_pkv.c), laid out
 * by the kernel layer's emitters. All buffers are allocated at init; building a plan
 * on the hot path allocates nothing. */
#ifndef PKV_PLANNER_H
#define PKV_PLANNER_H

#include "routes.h"

typedef struct pkv_planner {
    pkv_plan_ctx ctx; /* what every route's planning reads; its scratch of cap_rows */
    int32_t cap_rows;
    pkvk_plan plans[PKV_ROUTE_COUNT];
} pkv_planner;

/* cap_rows: most rows of a step. The planner keeps cal (not a copy): it must outlive it. */
int pkv_planner_init(pkv_planner *pl, const pkvk_shape *s, const pkv_calib *cal, int32_t cap_rows,
                     pkv_bucket_mode mode);
void pkv_planner_free(pkv_planner *pl);
/* Build plans[r] for the rows' true lengths. Returns a pkvk_status. */
int pkv_planner_build(pkv_planner *pl, pkv_route r, const int32_t *seq_lens, int32_t n_rows);

#endif
