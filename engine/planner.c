#include "planner.h"

#include <math.h>
#include <stdlib.h>

static int32_t target_ctas(const pkv_planner *pl) {
    return (int32_t)ceil(pl->cal->target_ctas_per_sm * pl->cal->sm_count);
}

int pkv_planner_init(pkv_planner *pl, const pkvk_shape *s, const pkv_calib *cal, int32_t cap_rows,
                     pkv_bucket_mode mode) {
    *pl = (pkv_planner){.shape = *s, .cal = cal, .bucket_mode = mode, .cap_rows = cap_rows};
    pl->splits = malloc(sizeof(int32_t) * (size_t)cap_rows);
    pl->route_lens = malloc(sizeof(int32_t) * (size_t)cap_rows);
    /* Task bound: the workqueue emits at most target + one extra split per (row, kvh). */
    int32_t cap_tasks = target_ctas(pl) + 2 * cap_rows * s->hkv + 64;
    int rc = pl->splits && pl->route_lens ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
    for (int r = 0; r < PKVK_ROUTE_COUNT && rc == PKVK_OK; r++)
        rc = pkvk_plan_init(&pl->plans[r], cap_rows, cap_tasks);
    if (rc) pkv_planner_free(pl);
    return rc;
}

void pkv_planner_free(pkv_planner *pl) {
    free(pl->splits);
    free(pl->route_lens);
    for (int r = 0; r < PKVK_ROUTE_COUNT; r++) pkvk_plan_free(&pl->plans[r]);
    pl->splits = pl->route_lens = NULL;
}

/* Bucket splits: each bucket is its own launch, so it alone should fill the GPU to
 * the CTA target, without splits shorter than min_split_tiles. */
static int32_t bucket_splits(int32_t route_len, int32_t rows, void *ctx) {
    const pkv_planner *pl = ctx;
    int64_t per_split = (int64_t)rows * pl->shape.hkv;
    int32_t want = (int32_t)((target_ctas(pl) + per_split - 1) / per_split);
    int32_t most = pkvk_tiles(route_len) / pl->cal->min_split_tiles;
    if (want > most) want = most;
    return want < 1 ? 1 : want;
}

static int32_t route_len(pkv_bucket_mode mode, int32_t len) {
    int32_t tiles = pkvk_tiles(len);
    if (mode == PKV_BUCKET_MODE_POW2) {
        int32_t p = 1;
        while (p < tiles) p <<= 1;
        tiles = p;
    }
    return tiles * PKVK_TILE;
}

int pkv_planner_build(pkv_planner *pl, pkvk_route r, const int32_t *seq_lens, int32_t n_rows) {
    pkvk_plan *p = &pl->plans[r];
    if (n_rows > pl->cap_rows) return PKVK_ERR_INVALID;
    switch (r) {
    case PKVK_ROUTE_REF_PAGED:
        return pkvk_plan_ref(p, seq_lens, n_rows);
    case PKVK_ROUTE_BUCKET:
        for (int32_t i = 0; i < n_rows; i++)
            pl->route_lens[i] = route_len(pl->bucket_mode, seq_lens[i]);
        return pkvk_plan_bucket(p, seq_lens, pl->route_lens, n_rows, bucket_splits, pl);
    case PKVK_ROUTE_WORKQUEUE:
    case PKVK_ROUTE_FUSED: {
        /* One chunk size for the whole step: the batch's tiles over the CTA target,
         * never below min_split_tiles, so long rows get more splits than short ones. */
        int64_t tiles = 0;
        for (int32_t i = 0; i < n_rows; i++) tiles += pkvk_tiles(seq_lens[i]);
        int64_t chunk = (tiles * pl->shape.hkv + target_ctas(pl) - 1) / target_ctas(pl);
        if (chunk < pl->cal->min_split_tiles) chunk = pl->cal->min_split_tiles;
        for (int32_t i = 0; i < n_rows; i++)
            pl->splits[i] = (int32_t)((pkvk_tiles(seq_lens[i]) + chunk - 1) / chunk);
        return pkvk_plan_workqueue(p, r, &pl->shape, seq_lens, pl->splits, n_rows);
    }
    default:
        return PKVK_ERR_INVALID;
    }
}
