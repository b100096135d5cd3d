/* Host planners' mechanism: split ranges, workqueue task emission, length buckets.
 * The policy (how many splits) is the engine's; this file only lays the plan out. */
#include "pkvk.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int pkvk_route_built(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT &&
           (!pkv_route_is_flashinfer(r) || pkvk_flashinfer_built());
}

int pkvk_plan_init(pkvk_plan *p, int32_t cap_rows, int32_t cap_tasks) {
    /* Ordinary memory: the upload packs the arrays into the workspace's pinned
     * staging (or a launch's parameters), so pinning them too would buy nothing. */
    *p = (pkvk_plan){0};
    if (cap_rows < 1 || cap_tasks < 1) return PKVK_ERR_INVALID;
    p->split_offsets = malloc(sizeof(int32_t) * ((size_t)cap_rows + 1));
    p->bucket_rows = malloc(sizeof(int32_t) * (size_t)cap_rows);
    p->buckets = malloc(sizeof(pkvk_bucket) * (size_t)cap_rows);
    p->tasks = malloc(sizeof(pkvk_task) * (size_t)cap_tasks);
    p->lens = malloc(sizeof(int32_t) * (size_t)cap_rows);
    p->memo_pages = malloc(sizeof(int32_t) * (size_t)cap_rows);
    p->memo_n = -1, p->memo_key[0] = -1; /* nothing kept yet */
    if (!p->split_offsets || !p->bucket_rows || !p->buckets || !p->tasks || !p->lens ||
        !p->memo_pages) {
        pkvk_plan_free(p);
        return PKVK_ERR_OUT_OF_MEMORY;
    }
    p->cap_rows = cap_rows;
    p->cap_tasks = cap_tasks;
    return PKVK_OK;
}

void pkvk_plan_free(pkvk_plan *p) {
    free(p->split_offsets);
    free(p->bucket_rows);
    free(p->buckets);
    free(p->tasks);
    free(p->lens);
    free(p->memo_pages);
    *p = (pkvk_plan){0};
}

void pkvk_split_range(int32_t len, int32_t S, int32_t s, int32_t *t_begin, int32_t *t_end) {
    int32_t tiles = pkvk_tiles(len);
    int32_t tps = (tiles + S - 1) / S;
    int64_t tb = (int64_t)s * tps, te = tb + tps;
    if (te > tiles) te = tiles;
    if (tb >= tiles) {
        *t_begin = *t_end = len;
        return;
    }
    *t_begin = (int32_t)(tb * PKVK_TILE);
    *t_end = te * PKVK_TILE < len ? (int32_t)(te * PKVK_TILE) : len;
}

/* Another emitter wrote p: its FlashInfer memo and guess no longer stand. */
static void memo_void(pkvk_plan *p) {
    p->memo_n = -1;
    p->memo_key[0] = -1; /* no route */
}

static int check_rows(const pkvk_plan *p, const int32_t *seq_lens, int32_t n_rows) {
    if (n_rows < 0 || n_rows > p->cap_rows) return PKVK_ERR_INVALID;
    for (int32_t i = 0; i < n_rows; i++)
        if (seq_lens[i] < 1) return PKVK_ERR_INVALID;
    return PKVK_OK;
}

int pkvk_plan_ref(pkvk_plan *p, const int32_t *seq_lens, int32_t n_rows) {
    int rc = check_rows(p, seq_lens, n_rows);
    if (rc) return rc;
    p->route = PKV_ROUTE_REF_PAGED;
    memo_void(p);
    p->n_rows = n_rows;
    for (int32_t i = 0; i <= n_rows; i++) p->split_offsets[i] = i;
    p->n_slots = n_rows;
    p->n_tasks = 0;
    p->n_buckets = 0;
    return PKVK_OK;
}

/* Effective split count: a request for S splits over `tiles` tiles gives runs of
 * ceil(tiles/S) tiles, and only ceil(tiles/run) of those runs are non-empty. */
static int32_t effective_splits(int32_t len, int32_t S) {
    int32_t tiles = pkvk_tiles(len);
    if (S < 1) S = 1;
    if (S > tiles) S = tiles;
    int32_t tps = (tiles + S - 1) / S;
    return (tiles + tps - 1) / tps;
}

int pkvk_plan_workqueue(pkvk_plan *p, pkv_route route, const pkvk_shape *s, const int32_t *seq_lens,
                        const int32_t *splits, int32_t n_rows) {
    int rc = check_rows(p, seq_lens, n_rows);
    if (rc) return rc;
    if (!pkv_route_is_workqueue(route)) return PKVK_ERR_INVALID;
    p->route = route;
    memo_void(p);
    p->n_rows = n_rows;
    p->n_buckets = 0;
    int32_t slot = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        p->split_offsets[i] = slot;
        slot += effective_splits(seq_lens[i], splits[i]);
    }
    p->split_offsets[n_rows] = slot;
    p->n_slots = slot;
    p->n_tasks = slot * s->hkv;
    p->tasks_written = 0;
    return p->counts_only ? PKVK_OK : pkvk_plan_write_tasks(p, s, seq_lens);
}

int pkvk_plan_write_tasks(pkvk_plan *p, const pkvk_shape *s, const int32_t *seq_lens) {
    if (!pkv_route_is_workqueue(p->route)) return PKVK_OK;
    if (p->n_tasks > p->cap_tasks) return PKVK_ERR_INVALID;
    int32_t nt = 0;
    for (int32_t i = 0; i < p->n_rows; i++) {
        int32_t S = p->split_offsets[i + 1] - p->split_offsets[i];
        for (int32_t sp = 0; sp < S; sp++) {
            int32_t tb, te;
            /* S is already effective, so every range is non-empty. */
            pkvk_split_range(seq_lens[i], S, sp, &tb, &te);
            p->tasks[nt++] = (pkvk_task){i, sp, tb, te};
        }
    }
    p->tasks_written = 1;
    return PKVK_OK;
}

typedef struct row_key {
    int32_t len, row;
} row_key;

static bool key_before(row_key x, row_key y) {
    return x.len > y.len || (x.len == y.len && x.row < y.row);
}

/* rows[0..n) = 0..n-1 ordered by key_before: insertion sort for short batches, else a
 * stable least-significant-digit radix sort on the lengths' bytes (descending: on their
 * complements), skipping the bytes every length shares. scratch: 2n keys (the plan's
 * bucket array, 16 bytes a row), so nothing is allocated. */
static void sort_rows(int32_t *rows, const int32_t *lens, int32_t n, row_key *scratch) {
    row_key *a = scratch, *b = scratch + n;
    uint32_t any = 0, all = ~0u; /* the complements' bits set in any, in all */
    for (int32_t i = 0; i < n; i++) {
        row_key k = {lens[i], i};
        int32_t j = i;
        if (n <= 32)
            for (; j > 0 && key_before(k, a[j - 1]); j--) a[j] = a[j - 1];
        a[j] = k;
        any |= ~(uint32_t)lens[i], all &= ~(uint32_t)lens[i];
    }
    for (int sh = 0; n > 32 && sh < 32; sh += 8) {
        if (((any ^ all) >> sh & 0xffu) == 0) continue; /* one byte value: order kept */
        int32_t at[257] = {0};
        for (int32_t i = 0; i < n; i++) at[(~(uint32_t)a[i].len >> sh & 0xffu) + 1]++;
        for (int d = 0; d < 256; d++) at[d + 1] += at[d];
        for (int32_t i = 0; i < n; i++) b[at[~(uint32_t)a[i].len >> sh & 0xffu]++] = a[i];
        row_key *t = a;
        a = b, b = t;
    }
    for (int32_t i = 0; i < n; i++) rows[i] = a[i].row;
}

int pkvk_plan_bucket(pkvk_plan *p, const int32_t *seq_lens, const int32_t *route_lens,
                     int32_t n_rows,
                     int32_t (*splits_of_len)(int32_t route_len, int32_t rows, void *ctx),
                     void *ctx) {
    int rc = check_rows(p, seq_lens, n_rows);
    if (rc) return rc;
    p->route = PKV_ROUTE_BUCKET;
    memo_void(p);
    p->n_rows = n_rows;
    p->n_tasks = 0;
    /* Row ids by route length, longest first, ties in row order (stable). */
    int32_t *r = p->bucket_rows;
    sort_rows(r, route_lens, n_rows, (row_key *)p->buckets);
    int32_t nb = 0;
    for (int32_t i = 0; i < n_rows;) {
        int32_t j = i;
        while (j < n_rows && route_lens[r[j]] == route_lens[r[i]]) j++;
        int32_t S = splits_of_len(route_lens[r[i]], j - i, ctx);
        p->buckets[nb++] = (pkvk_bucket){i, j, S < 1 ? 1 : S, route_lens[r[i]]};
        i = j;
    }
    p->n_buckets = nb;
    /* Slots are laid out in row order so the merge finds row i's range directly. */
    int32_t slot = 0;
    for (int32_t i = 0; i < n_rows; i++) p->split_offsets[i] = 0;
    for (int32_t b = 0; b < nb; b++)
        for (int32_t k = p->buckets[b].row_begin; k < p->buckets[b].row_end; k++)
            p->split_offsets[r[k]] = p->buckets[b].splits; /* count, prefix-summed below */
    for (int32_t i = 0; i < n_rows; i++) {
        int32_t c = p->split_offsets[i];
        p->split_offsets[i] = slot;
        slot += c;
    }
    p->split_offsets[n_rows] = slot;
    p->n_slots = slot;
    return PKVK_OK;
}

/* FlashInfer's work units at a chunk of `chunk` pages: sum over rows of
 * ceil(max(pages, 1) / chunk), times per_unit. */
typedef struct fi_units_ctx {
    const int32_t *pages; /* [n]: each row's pages, at least 1 */
    int32_t n;
    int64_t per_unit;
} fi_units_ctx;

/* Most of an adaptive step's planning is this loop (the search calls it about ten
 * times a step): the pages are counted once before, and the divisions are 32-bit
 * (pages and chunks fit), the cheaper ones. */
static int64_t fi_units(int64_t chunk, const void *vctx) {
    const fi_units_ctx *c = vctx;
    const uint32_t cc = chunk < INT32_MAX ? (uint32_t)chunk : INT32_MAX;
    int64_t units = 0;
    for (int32_t i = 0; i < c->n; i++) units += ((uint32_t)c->pages[i] + cc - 1) / cc;
    return units * c->per_unit;
}

/* The chunk (pages) FlashInfer's binary searches settle on. */
static int64_t fi_chunk(const int32_t *pages, int32_t n, int64_t total, int64_t lo, int64_t hi,
                        int64_t guess, int64_t per_unit, int64_t budget) {
    pkvk_chunk_bracket(total, n, per_unit, budget, &lo, &hi);
    fi_units_ctx c = {pages, n, per_unit};
    return pkvk_smallest_chunk_near(lo, hi, guess, budget, fi_units, &c);
}

int pkvk_plan_flashinfer(pkvk_plan *p, pkv_route route, const pkvk_shape *s,
                         const int32_t *seq_lens, int32_t n_rows, int32_t sm_count,
                         int32_t decode_ctas_per_sm) {
    int rc = check_rows(p, seq_lens, n_rows);
    if (rc) return rc;
    if (!pkv_route_is_flashinfer(route)) return PKVK_ERR_INVALID;
    const uint32_t ps = (uint32_t)s->page_size;
    int64_t max_pages = 1, total = 0;
    /* p->lens holds each row's pages (at least 1: lengths are) for the search, then the
     * lengths; 32-bit divisions, the cheaper ones, on the hot path of every step */
    for (int32_t i = 0; i < n_rows; i++) {
        const int32_t pages = (int32_t)(((uint32_t)seq_lens[i] + ps - 1) / ps);
        p->lens[i] = pages;
        total += pages;
        if (pages > max_pages) max_pages = pages;
    }
    const int64_t min_chunk = ps < 128 ? 128 / ps : 1;
    const int32_t q_len = p->q_len > 1 ? p->q_len : 1;
    const int64_t key[5] = {route, s->hkv, ps, (int64_t)sm_count * decode_ctas_per_sm, q_len};
    const size_t bytes = sizeof(int32_t) * (size_t)n_rows;
    const bool same_grid = !memcmp(p->memo_key, key, sizeof key);
    if (same_grid && n_rows <= PKVK_MEMO_ROWS && p->memo_n == n_rows &&
        !memcmp(p->memo_pages, p->lens, bytes)) {
        /* the last plan's pages and grid: its chunk and slots stand (this plan is the one
         * that made them: nothing else writes it) */
        memcpy(p->lens, seq_lens, bytes);
        return PKVK_OK;
    }
    /* the last plan's chunk, where it was made for this grid: the search's guess */
    const int64_t guess = same_grid ? p->memo_chunk : 0;
    int64_t chunk;
    /* the prefill path's query tiles a row (FA2DetermineCtaTileQ at head dimension 128 on
     * sm_80 and later: one tile of 16 rows at decode) */
    const int64_t rows = (int64_t)q_len * (s->hkv > 0 ? s->hq / s->hkv : 1);
    const int64_t tile = rows > 64 ? 128 : rows > 16 ? 64 : 16;
    const int32_t tiles = (int32_t)((rows + tile - 1) / tile);
    if (route == PKV_ROUTE_FLASHINFER && q_len == 1) {
        /* DecodePlan: no split once the rows alone fill the grid; else the smallest
         * chunk whose CTAs (chunks x KV heads) fit one grid. */
        int64_t grid = (int64_t)decode_ctas_per_sm * sm_count;
        chunk = (int64_t)n_rows * s->hkv >= grid
                    ? max_pages
                    : fi_chunk(p->lens, n_rows, total, min_chunk, max_pages, guess, s->hkv, grid);
    } else {
        /* PrefillPlan: 2 CTAs per SM, the budget counted in query tiles (it divides the
         * grid by the KV heads), each chunk of a row taking its tiles. */
        int64_t budget = 2 * (int64_t)sm_count / s->hkv;
        chunk = fi_chunk(p->lens, n_rows, total, min_chunk, max_pages, guess, tiles, budget);
    }
    if (n_rows <= PKVK_MEMO_ROWS) memcpy(p->memo_pages, p->lens, bytes);
    memcpy(p->memo_key, key, sizeof key);
    p->memo_n = n_rows <= PKVK_MEMO_ROWS ? n_rows : -1, p->memo_chunk = chunk;
    p->route = route;
    p->n_rows = n_rows;
    p->q_tiles = tiles;
    p->chunk_tokens = (int32_t)(chunk * ps < INT32_MAX ? chunk * ps : INT32_MAX);
    p->split_offsets[0] = 0;
    const uint32_t c32 = (uint32_t)chunk; /* <= max_pages, or no row splits */
    for (int32_t i = 0; i < n_rows; i++) {
        const int32_t chunks =
            chunk >= max_pages ? 1 : (int32_t)(((uint32_t)p->lens[i] + c32 - 1) / c32);
        p->split_offsets[i + 1] = p->split_offsets[i] + chunks;
        p->lens[i] = seq_lens[i];
    }
    p->n_slots = p->split_offsets[n_rows];
    p->n_tasks = 0;
    p->n_buckets = 0;
    return PKVK_OK;
}
