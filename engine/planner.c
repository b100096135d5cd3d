#include "planner.h"

#include "routes.h"

#include <stdint.h>
#include <stdlib.h>

/* A wave: the kernels' resident CTAs on every SM. */
static int64_t wave_ctas(const pkv_calib *c) {
    return (int64_t)pkv_route_resident_ctas(c) * c->sm_count;
}

int pkv_planner_init(pkv_planner *pl, const pkvk_shape *s, const pkv_calib *cal, int32_t cap_rows,
                     pkv_bucket_mode mode) {
    *pl =
        (pkv_planner){.ctx = {.shape = *s, .cal = cal, .bucket_mode = mode}, .cap_rows = cap_rows};
    pl->ctx.splits = malloc(sizeof(int32_t) * (size_t)cap_rows);
    pl->ctx.route_lens = malloc(sizeof(int32_t) * (size_t)cap_rows);
    pl->ctx.memo = calloc(PKV_MEMOS, sizeof *pl->ctx.memo);
    int rc =
        pl->ctx.splits && pl->ctx.route_lens && pl->ctx.memo ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
    for (int k = 0; rc == PKVK_OK && k < PKV_MEMOS; k++) {
        pl->ctx.memo[k] = (pkv_plan_memo){-1, 0, malloc(sizeof(int32_t) * (size_t)cap_rows)};
        if (!pl->ctx.memo[k].lens) rc = PKVK_ERR_OUT_OF_MEMORY;
    }
    /* Task bound: one wave, or (past one wave) chunks of at least the mean load, at
     * most one partial chunk per row. */
    int64_t cap = 2 * wave_ctas(cal) + (int64_t)cap_rows * s->hkv;
    int32_t cap_tasks = (int32_t)(cap + 64);
    for (int r = 0; r < PKV_ROUTE_COUNT && rc == PKVK_OK; r++)
        rc = pkvk_plan_init(&pl->plans[r], cap_rows, cap_tasks);
    if (rc) pkv_planner_free(pl);
    return rc;
}

void pkv_planner_free(pkv_planner *pl) {
    free(pl->ctx.splits);
    free(pl->ctx.route_lens);
    for (int k = 0; pl->ctx.memo && k < PKV_MEMOS; k++) free(pl->ctx.memo[k].lens);
    free(pl->ctx.memo);
    pl->ctx.memo = NULL;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) pkvk_plan_free(&pl->plans[r]);
    pl->ctx.splits = pl->ctx.route_lens = NULL;
}

int pkv_planner_build(pkv_planner *pl, pkv_route r, const int32_t *seq_lens, int32_t n_rows) {
    const pkv_route_ops *ops = pkv_route_ops_of(r);
    if (n_rows > pl->cap_rows || !ops) return PKVK_ERR_INVALID;
    return ops->plan(&pl->ctx, &pl->plans[r], r, seq_lens, n_rows);
}
