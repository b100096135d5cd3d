/* pkvk: plans (flat integer offsets the device only launches) and the host
 * planners' mechanism: split ranges, workqueue tasks, length buckets, FlashInfer's
 * planners mirrored in C. The policy (how many splits) is the engine's. */
#ifndef PKVK_PLAN_H
#define PKVK_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "pkvk_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One split of a workqueue plan: tokens [t_begin, t_end) of one row, worked by hkv
 * CTAs, one per KV head (CTA c of the launch takes split c / hkv, KV head c % hkv).
 * The layout is the device's: the upload copies the list as it is. */
typedef struct pkvk_task {
    int32_t row, split;
    int32_t t_begin, t_end; /* tokens; never empty */
} pkvk_task;

/* Rows [row_begin, row_end) of plan->bucket_rows share one launch with `splits`. */
typedef struct pkvk_bucket {
    int32_t row_begin, row_end;
    int32_t splits;
    int32_t route_len; /* tokens: the length the bucket was formed on */
} pkvk_bucket;

/* A flat plan. Arrays are allocated once by pkvk_plan_init (the caller's workspace)
 * and refilled by the pkvk_plan_* emitters without allocating. */
typedef struct pkvk_plan {
    pkv_route route;
    int32_t n_rows;
    int32_t *split_offsets; /* [n_rows + 1] partial-state slots of row i */
    int32_t n_slots;        /* split_offsets[n_rows] */
    pkvk_task *tasks;       /* [n_slots] WORKQUEUE / FUSED: one entry per split */
    int32_t n_tasks;        /* WORKQUEUE / FUSED: CTAs, n_slots * hkv */
    int32_t *bucket_rows;   /* [n_rows] row ids grouped by bucket (BUCKET) */
    pkvk_bucket *buckets;   /* [n_buckets] (BUCKET) */
    int32_t n_buckets;
    int32_t *lens;        /* [n_rows] true lengths (FLASHINFER*: its planner runs at upload) */
    int32_t chunk_tokens; /* FLASHINFER*: KV chunk; row i's chunk c is tokens
                             [c * chunk_tokens, min((c + 1) * chunk_tokens, len)) */
    int32_t q_len;        /* FLASHINFER*, set before planning: query tokens a row (0 or 1: a
                             decode step; more: a verify step, on FlashInfer's prefill path) */
    int32_t q_tiles;      /* FLASHINFER*: the prefill path's query tiles a row (q_len x G rows
                             in tiles of 16, 64 or 128; 1 at decode) */
    int32_t cap_rows, cap_tasks; /* capacities given to pkvk_plan_init */
    int counts_only;             /* workqueue: count the tasks, do not write the list
                                    (enough for the cost model; nothing can launch it) */
    int tasks_written;           /* workqueue: the task list matches the counts */
    /* FLASHINFER*: the rows' pages and the grid this plan was made for: most decode
     * steps' pages are the last one's (a row crosses a page every page_size tokens),
     * and keep its chunk and slots without the search; any other emitter voids it */
    int32_t *memo_pages; /* [cap_rows] */
    int32_t memo_n;      /* rows of memo_pages; -1: none (or more than PKVK_MEMO_ROWS) */
    int64_t memo_key[5]; /* route, KV heads, page size, SMs x CTAs an SM, q_len */
    int64_t memo_chunk;  /* the chunk (pages) found for memo_pages: the next search's guess */
} pkvk_plan;

int pkvk_plan_init(pkvk_plan *p, int32_t cap_rows, int32_t cap_tasks);

/* A workqueue plan in which some row has more than one split: its launch merges. */
static inline int pkvk_plan_merges(const pkvk_plan *p) {
    return p->n_slots > p->n_rows;
}
void pkvk_plan_free(pkvk_plan *p);

/* Tiles of a row of `len` tokens. */
static inline int32_t pkvk_tiles(int32_t len) {
    return (len + PKVK_TILE - 1) / PKVK_TILE;
}

/* Token range of split s of S over a row of true length len: tiles are dealt in
 * contiguous runs of ceil(tiles/S); a split past the last tile is empty (begin ==
 * end == len). */
void pkvk_split_range(int32_t len, int32_t S, int32_t s, int32_t *t_begin, int32_t *t_end);

/* Emitters: fill `p` for n_rows rows with true lengths seq_lens. Return PKVK_OK or
 * PKVK_ERR_INVALID when the plan would exceed the capacities. */
int pkvk_plan_ref(pkvk_plan *p, const int32_t *seq_lens, int32_t n_rows);
/* splits[i]: requested splits of row i (>= 1); only non-empty splits get a slot (and
 * a task entry worked by hkv CTAs), so a row's slot count may be lower than
 * requested. Entries come in slot order. */
int pkvk_plan_workqueue(pkvk_plan *p, pkv_route route, const pkvk_shape *s, const int32_t *seq_lens,
                        const int32_t *splits, int32_t n_rows);
/* route_lens[i]: row i's bucket key (tokens); bucket_splits(route_len) per bucket is
 * given as splits_of_len, evaluated once per distinct length. Rows keep their
 * order inside a bucket; buckets come in decreasing route length. Empty splits keep
 * their slot (the kernel writes the neutral state there). */
/* Write the task list of a workqueue plan made counts-only (its split_offsets say
 * each row's splits): the chosen route of a step is laid out without planning again.
 * A plan of another route has no task list: nothing to write. */
int pkvk_plan_write_tasks(pkvk_plan *p, const pkvk_shape *s, const int32_t *seq_lens);
int pkvk_plan_bucket(pkvk_plan *p, const int32_t *seq_lens, const int32_t *route_lens,
                     int32_t n_rows,
                     int32_t (*splits_of_len)(int32_t route_len, int32_t rows, void *ctx),
                     void *ctx);

/* Where units(c) = per_unit x (the sum over n rows of ceil(t_i / c)) and total is the
 * sum of the t_i: units(c) lies in [per_unit total / c, per_unit (total + n (c - 1)) / c],
 * and is per_unit n at least (a unit a row). So where budget < per_unit n no chunk fits
 * and the search ends at hi; else the smallest chunk that fits budget is at least
 * ceil(per_unit total / budget), and where budget > per_unit n any c >= ceil(per_unit
 * (total - n) / (budget - per_unit n)) fits: [*lo, *hi] narrowed to that bracket. */
static inline void pkvk_chunk_bracket(int64_t total, int64_t n, int64_t per_unit, int64_t budget,
                                      int64_t *lo, int64_t *hi) {
    if (*hi < *lo) *hi = *lo;
    const int64_t room = budget - per_unit * n;
    if (room < 0) { /* many rows (34 at 8 KV heads on 132 SMs for PrefillPlan): no search */
        *lo = *hi;
        return;
    }
    const int64_t least = (per_unit * total + budget - 1) / budget;
    if (least > *lo) *lo = least < *hi ? least : *hi; /* none fits: the search ends at hi */
    if (room > 0) {
        const int64_t fits = (per_unit * (total - n) + room - 1) / room;
        if (fits < *hi) *hi = fits;
    }
}

/* The smallest chunk c in [lo, max(lo, hi)] whose units(c) fit budget, units being
 * non-increasing in c (both the split planner and FlashInfer's use this search). */
static inline int64_t pkvk_smallest_chunk(int64_t lo, int64_t hi, int64_t budget,
                                          int64_t (*units)(int64_t chunk, const void *ctx),
                                          const void *ctx) {
    if (hi < lo) hi = lo;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (units(mid, ctx) > budget)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The most rows whose plans are kept for the next step (pkvk_plan's memo, the engine's
 * planners'): in a larger step some row mostly crosses a page or tile, and comparing and
 * keeping the lengths would cost more than the searches it saves. */
enum { PKVK_MEMO_ROWS = 32 };

/* The same search begun at a guess (the last step's answer, which a step's small
 * change of lengths mostly keeps): two evaluations where the guess stands, else the
 * search on its side of it; the same answer, units being non-increasing. */
static inline int64_t pkvk_smallest_chunk_near(int64_t lo, int64_t hi, int64_t guess,
                                               int64_t budget,
                                               int64_t (*units)(int64_t chunk, const void *ctx),
                                               const void *ctx) {
    if (hi < lo) hi = lo;
    if (guess > lo && guess < hi) {
        if (units(guess, ctx) > budget)
            lo = guess + 1;
        else if (units(guess - 1, ctx) > budget)
            return guess;
        else
            hi = guess - 1;
    }
    return pkvk_smallest_chunk(lo, hi, budget, units, ctx);
}

/* FlashInfer's planners mirrored in C (flashinfer-python 0.7.4, scheduler.cuh), so
 * that every backend, the model one included, counts the CTAs and partial states the
 * FlashInfer routes run: split_offsets[i] are row i's KV chunks. DecodePlan bounds
 * its grid by its kernel's occupancy (decode_ctas_per_sm, from
 * pkvk_flashinfer_occupancy on a GPU); PrefillPlan by 2 CTAs per SM. A verify step
 * (p->q_len > 1) runs on the prefill path whichever FlashInfer route it names, as
 * engines run one: PrefillPlan over q_len query tokens a row, each row's q_len x G query
 * rows in q_tiles tiles (FA2DetermineCtaTileQ's 16, 64 or 128), q_tiles CTAs a chunk.
 * The upload runs FlashInfer's own planner and refuses a partition that differs from
 * this one. */
int pkvk_plan_flashinfer(pkvk_plan *p, pkv_route route, const pkvk_shape *s,
                         const int32_t *seq_lens, int32_t n_rows, int32_t sm_count,
                         int32_t decode_ctas_per_sm);

#ifdef __cplusplus
}
#endif
#endif
