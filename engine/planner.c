#include "planner.h"

#include <stdlib.h>

/* Split policy. The kernels keep resident_ctas_per_sm CTAs on each SM, so a wave is
 * W = resident x sm_count CTAs. A step whose work fits one wave at no more than
 * wave_tiles_max tiles per CTA is split to fill exactly one wave (each row gets its
 * share of W); a larger step is cut into chunk_tiles-tile CTAs, many full waves.
 * Splits never go below min_split_tiles tiles. Measured on the H200 (bench/RESULTS.md):
 * 2.2 waves ran at 74% of the read ceiling where 3.9 waves of the same step ran at 91%. */
static int32_t wave_ctas(const pkv_calib *c) {
    return c->resident_ctas_per_sm * c->sm_count;
}

/* Splits of a row of `tiles` tiles in a step of `total` tiles (over all rows and KV
 * heads) planned in launches of `hkv` CTAs per split. */
static int32_t splits_for(const pkv_calib *c, int64_t tiles, int64_t total) {
    int64_t W = wave_ctas(c), S;
    if (total <= W * c->wave_tiles_max)
        S = tiles * W / total; /* this row's share of one wave */
    else
        S = (tiles + c->chunk_tiles - 1) / c->chunk_tiles;
    int64_t most = tiles / c->min_split_tiles;
    if (S > most) S = most;
    return S < 1 ? 1 : (int32_t)S;
}

int pkv_planner_init(pkv_planner *pl, const pkvk_shape *s, const pkv_calib *cal, int32_t cap_rows,
                     int32_t max_len, pkv_bucket_mode mode) {
    *pl = (pkv_planner){.shape = *s, .cal = cal, .bucket_mode = mode, .cap_rows = cap_rows};
    pl->splits = malloc(sizeof(int32_t) * (size_t)cap_rows);
    pl->route_lens = malloc(sizeof(int32_t) * (size_t)cap_rows);
    /* Task bound: one wave, or every row cut into chunks (plus one partial chunk). */
    int64_t per_row = pkvk_tiles(max_len) / cal->chunk_tiles + 1;
    int64_t cap = (int64_t)cap_rows * s->hkv * per_row;
    if (cap < wave_ctas(cal)) cap = wave_ctas(cal);
    int32_t cap_tasks = (int32_t)(cap + 64);
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

/* Each bucket is its own launch, so it is planned as a step of its own. */
static int32_t bucket_splits(int32_t route_len, int32_t rows, void *ctx) {
    const pkv_planner *pl = ctx;
    int64_t tiles = pkvk_tiles(route_len);
    return splits_for(pl->cal, tiles, tiles * rows * pl->shape.hkv);
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
        int64_t total = 0;
        for (int32_t i = 0; i < n_rows; i++) total += pkvk_tiles(seq_lens[i]);
        total *= pl->shape.hkv;
        for (int32_t i = 0; i < n_rows; i++)
            pl->splits[i] = splits_for(pl->cal, pkvk_tiles(seq_lens[i]), total);
        return pkvk_plan_workqueue(p, r, &pl->shape, seq_lens, pl->splits, n_rows);
    }
    case PKVK_ROUTE_FLASHINFER:
    case PKVK_ROUTE_FLASHINFER_TC:
        return pkvk_plan_flashinfer(p, r, &pl->shape, seq_lens, n_rows, pl->cal->sm_count,
                                    pl->cal->flashinfer_decode_ctas_per_sm);
    default:
        return PKVK_ERR_INVALID;
    }
}
