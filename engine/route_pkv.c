#include "route_pkv.h"

#include <stdint.h>
#include <string.h>

/* Split policy. The kernels keep resident_ctas_per_sm CTAs on each SM, so a wave is
 * W = resident x sm_count CTAs. A step's rows are cut into chunks of one size c
 * (tiles), each chunk one CTA per KV head:
 *  - when the rows alone fit one wave, c is the smallest chunk whose CTAs still fit
 *    it: one wave whose longest CTA is as short as it can be; unless that wave's CTAs
 *    are unequal (mean below wave_balance_min of the longest), then the smallest
 *    chunk that fits two waves;
 *  - otherwise c is the wave's mean load (total tiles / W), so that no CTA outlasts
 *    it: rows shorter than that are not split at all.
 * Chunks never go below min_split_tiles. Measured on the H200 (bench/RESULTS.md):
 * per-row shares of a wave rounded down left B=8 8K..64K at 59% of the read
 * ceiling, because one row's CTAs ran 1.7x longer than the rest; equal chunks over
 * one wave reach 90%+, as FlashInfer's planner does. Unequal rows (B=8 bimodal:
 * CTAs of 6.5K and 4K tokens in one wave, 81.9%) ran at 90.1% over two waves. */
static int64_t ceil_div64(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* CTAs of rows with `tiles[i]` tiles (or n rows of `same` tiles when tiles is NULL)
 * cut into chunks of c tiles. */
static int64_t ctas_at(const int32_t *tiles, int32_t same, int32_t n, int hkv, int64_t c) {
    if (!tiles) return (int64_t)n * ceil_div64(same, c) * hkv;
    /* Tile counts and chunks fit 32 bits: 32-bit divisions are the cheaper ones, and
     * this loop is most of a small step's planning. */
    const uint32_t cc = c < INT32_MAX ? (uint32_t)c : INT32_MAX;
    int64_t k = 0;
    for (int32_t i = 0; i < n; i++) k += ((uint32_t)tiles[i] + cc - 1) / cc;
    return k * hkv;
}

typedef struct ctas_ctx {
    const int32_t *tiles;
    int32_t same, n;
    int hkv;
} ctas_ctx;

static int64_t ctas_units(int64_t c, const void *vctx) {
    const ctas_ctx *x = vctx;
    return ctas_at(x->tiles, x->same, x->n, x->hkv, c);
}

/* The smallest chunk (>= lo) whose CTAs fit `budget` (rows of `total` tiles); the
 * search runs over the answer's bracket only. */
static int64_t fit_chunk(const int32_t *tiles, int32_t same, int32_t n, int hkv, int64_t total,
                         int64_t lo, int64_t most, int64_t budget) {
    ctas_ctx x = {tiles, same, n, hkv};
    pkvk_chunk_bracket(total, n, hkv, budget, &lo, &most);
    return pkvk_smallest_chunk(lo, most, budget, ctas_units, &x);
}

/* Mean over longest CTA of rows cut at chunk c (a row of t tiles in ceil(t / c)
 * equal runs). */
static double balance_at(const int32_t *tiles, int32_t n, int64_t c) {
    int64_t total = 0, ctas = 0, longest = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t k = ceil_div64(tiles[i], c), run = ceil_div64(tiles[i], k);
        total += tiles[i], ctas += k;
        if (run > longest) longest = run;
    }
    return longest ? (double)total / ctas / longest : 1.0;
}

static int64_t chunk_tiles(const pkv_plan_ctx *x, const int32_t *tiles, int32_t same, int32_t n) {
    const pkv_calib *c = x->cal;
    const int hkv = x->shape.hkv;
    int64_t W = (int64_t)pkv_route_resident_ctas(c) * c->sm_count, most = same, total = 0,
            lo = c->min_split_tiles;
    for (int32_t i = 0; tiles && i < n; i++) {
        if (tiles[i] > most) most = tiles[i];
        total += tiles[i];
    }
    if (!tiles) total = (int64_t)same * n;
    if ((int64_t)n * hkv > W) {
        const int64_t mean = ceil_div64(total * hkv, W);
        return mean > lo ? mean : lo;
    }
    int64_t one = fit_chunk(tiles, same, n, hkv, total, lo, most, W);
    /* Unequal CTAs in one wave leave SMs idle while the longest finish: plan two
     * waves of shorter chunks instead, which the block scheduler balances. */
    if (!tiles || balance_at(tiles, n, one) >= c->wave_balance_min) return one;
    return fit_chunk(tiles, same, n, hkv, total, lo, most, 2 * W);
}

/* Each bucket is its own launch, so it is planned as a step of its own. */
static int32_t bucket_splits(int32_t route_len, int32_t rows, void *ctx) {
    int32_t tiles = pkvk_tiles(route_len);
    return (int32_t)ceil_div64(tiles, chunk_tiles(ctx, NULL, tiles, rows));
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

/* Whether m holds lens[0, n) (what was found for them stands). */
static bool memo_holds(const pkv_plan_memo *m, const int32_t *lens, int32_t n) {
    return n <= PKVK_MEMO_ROWS && m->n == n && !memcmp(m->lens, lens, sizeof(int32_t) * (size_t)n);
}

/* What was found for lens[0, n) kept (a step of at most PKVK_MEMO_ROWS rows). */
static void memo_keep(pkv_plan_memo *m, const int32_t *lens, int32_t n) {
    m->n = -1;
    if (n > PKVK_MEMO_ROWS) return;
    memcpy(m->lens, lens, sizeof(int32_t) * (size_t)n);
    m->n = n;
}

static int plan_bucket(const pkv_plan_ctx *x, pkvk_plan *p, pkv_route r, const int32_t *seq_lens,
                       int32_t n_rows) {
    (void)r;
    for (int32_t i = 0; i < n_rows; i++) x->route_lens[i] = route_len(x->bucket_mode, seq_lens[i]);
    /* The buckets depend on the route lengths alone: the last step's plan stands when
     * they are its (its pkvk_plan is written by this planner only). */
    pkv_plan_memo *m = &x->memo[PKV_MEMO_BUCKET];
    if (memo_holds(m, x->route_lens, n_rows)) return PKVK_OK;
    m->n = -1;
    int rc = pkvk_plan_bucket(p, seq_lens, x->route_lens, n_rows, bucket_splits, (void *)x);
    if (rc == PKVK_OK) memo_keep(m, x->route_lens, n_rows);
    return rc;
}

static int plan_workqueue(const pkv_plan_ctx *x, pkvk_plan *p, pkv_route r, const int32_t *seq_lens,
                          int32_t n_rows) {
    for (int32_t i = 0; i < n_rows; i++) x->route_lens[i] = pkvk_tiles(seq_lens[i]);
    pkv_plan_memo *m = &x->memo[PKV_MEMO_SPLIT];
    if (!memo_holds(m, x->route_lens, n_rows)) {
        m->chunk = chunk_tiles(x, x->route_lens, 0, n_rows);
        memo_keep(m, x->route_lens, n_rows);
    }
    const int64_t c = m->chunk;
    for (int32_t i = 0; i < n_rows; i++) x->splits[i] = (int32_t)ceil_div64(x->route_lens[i], c);
    return pkvk_plan_workqueue(p, r, &x->shape, seq_lens, x->splits, n_rows);
}

/* The longest range a CTA streams: a row's first split is its longest. */
static int32_t longest_split(const pkvk_plan *p, const int32_t *seq_lens) {
    int32_t longest = 0;
    for (int32_t i = 0; i < p->n_rows; i++) {
        const int32_t n = p->split_offsets[i + 1] - p->split_offsets[i];
        int32_t b = 0, t = seq_lens[i];
        if (n > 1) pkvk_split_range(seq_lens[i], n, 0, &b, &t);
        if (t - b > longest) longest = t - b;
    }
    return longest;
}

/* Each bucket is a launch, and its merge another where it splits. */
static void count_bucket(const pkvk_shape *s, const pkvk_plan *p, const int32_t *seq_lens,
                         pkv_plan_sums *sums, pkv_counters *out) {
    sums->longest_range = longest_split(p, seq_lens);
    for (int32_t b = 0; b < p->n_buckets; b++) {
        const pkvk_bucket *B = &p->buckets[b];
        out->ctas += (int64_t)(B->row_end - B->row_begin) * s->hkv * B->splits;
        out->launches += 1 + (B->splits > 1);
        out->merge_launches += B->splits > 1;
    }
}

/* One launch over the tasks (a CTA each), and pkv_workqueue's one segmented merge
 * where a row splits; pkv_fused merges in-kernel. */
static void count_tasks(const pkvk_plan *p, const int32_t *seq_lens, pkv_plan_sums *sums,
                        int merge_launches, pkv_counters *out) {
    sums->longest_range = longest_split(p, seq_lens);
    out->ctas = p->n_tasks;
    out->tasks = p->n_tasks;
    out->merge_launches = merge_launches;
    out->launches = (p->n_tasks > 0) + out->merge_launches;
}
static void count_workqueue(const pkvk_shape *s, const pkvk_plan *p, const int32_t *seq_lens,
                            pkv_plan_sums *sums, pkv_counters *out) {
    (void)s;
    count_tasks(p, seq_lens, sums, sums->merged_slots > 0, out);
}
static void count_fused(const pkvk_shape *s, const pkvk_plan *p, const int32_t *seq_lens,
                        pkv_plan_sums *sums, pkv_counters *out) {
    (void)s;
    count_tasks(p, seq_lens, sums, 0, out);
}

const pkv_route_ops pkv_route_ops_BUCKET = {plan_bucket, count_bucket, pkv_route_resident_ctas,
                                            pkvk_cpu_attend_buckets};
const pkv_route_ops pkv_route_ops_WORKQUEUE = {plan_workqueue, count_workqueue,
                                               pkv_route_resident_ctas, pkvk_cpu_attend_tasks};
const pkv_route_ops pkv_route_ops_FUSED = {plan_workqueue, count_fused, pkv_route_resident_ctas,
                                           pkvk_cpu_attend_tasks};
