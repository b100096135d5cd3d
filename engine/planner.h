/* Planning: each route's plan for a step, made by its family's operations
 * (engine/routes.h; PersistentKV's split policy is in engine/route_pkv.c), laid out
 * by the kernel layer's emitters. All buffers are allocated at init; building a plan
 * on the hot path allocates nothing. */
#ifndef PKV_PLANNER_H
#define PKV_PLANNER_H

#include "calib.h"
#include "pkvk.h"

typedef enum pkv_bucket_mode {
    PKV_BUCKET_MODE_EXACT = 0, /* route length = true length rounded up to a tile */
    PKV_BUCKET_MODE_POW2,      /* route length = next power of two of the tile count */
} pkv_bucket_mode;

typedef struct pkv_planner {
    pkvk_shape shape;
    const pkv_calib *cal;
    pkv_bucket_mode bucket_mode;
    int32_t cap_rows;
    int32_t *splits;     /* [cap_rows] scratch */
    int32_t *route_lens; /* [cap_rows] scratch */
    pkvk_plan plans[PKV_ROUTE_COUNT];
} pkv_planner;

/* cap_rows: most rows of a step. */
int pkv_planner_init(pkv_planner *pl, const pkvk_shape *s, const pkv_calib *cal, int32_t cap_rows,
                     pkv_bucket_mode mode);
void pkv_planner_free(pkv_planner *pl);
/* Build plans[r] for the rows' true lengths. Returns a pkvk_status. */
int pkv_planner_build(pkv_planner *pl, pkv_route r, const int32_t *seq_lens, int32_t n_rows);

#endif
