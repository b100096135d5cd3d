#include "kvalloc.h"
#include "pkv_assert.h"

#include <stdlib.h>

/* Stack order at set-up: page 0 on top, so an unpermuted pool hands out 0, 1, 2, ... */
static inline int32_t first_id(const pkv_kvalloc *a, int32_t pos) {
    return a->n_pages - 1 - pos;
}
static inline int32_t get(const pkv_kvalloc *a, int32_t pos) {
    return a->slot[pos] ^ first_id(a, pos);
}
static inline void set(pkv_kvalloc *a, int32_t pos, int32_t id) {
    a->slot[pos] = id ^ first_id(a, pos);
}

/* gsl_ran_shuffle's loop (position i from the top down, swapped with a uniform one at or
 * below it), run as far as position `pos`: what it leaves there is final, and the draws
 * are the same ones in the same order as a shuffle of the whole stack at set-up. */
static void place_down_to(pkv_kvalloc *a, int32_t pos) {
    while (a->placed > pos) {
        const int32_t i = --a->placed;
        if (i == 0) break;
        const int32_t j = (int32_t)gsl_rng_uniform_int(a->place, (unsigned long)i + 1);
        const int32_t t = get(a, i);
        set(a, i, get(a, j));
        set(a, j, t);
    }
}

int pkv_kvalloc_init(pkv_kvalloc *a, int32_t n_pages, double holes, gsl_rng *place) {
    *a = (pkv_kvalloc){0};
    a->slot = calloc((size_t)n_pages, sizeof *a->slot);
    a->owner1 = calloc((size_t)n_pages, sizeof *a->owner1);
    if (!a->slot || !a->owner1) {
        pkv_kvalloc_free(a);
        return -1;
    }
    a->n_pages = n_pages;
    /* Holes: the bottom of the stack is never reached, so that fraction of the
     * physical ids is never handed out. */
    a->holes = (int32_t)(holes * n_pages);
    a->n_usable = a->n_free = n_pages - a->holes;
    a->place = place;
    a->placed = place ? n_pages : 0;
    return 0;
}

void pkv_kvalloc_free(pkv_kvalloc *a) {
    free(a->slot);
    free(a->owner1);
    *a = (pkv_kvalloc){0};
}

int pkv_kvalloc_take(pkv_kvalloc *a, int32_t n, int64_t owner, int32_t *out) {
    if (n > a->n_free) return -1;
    PKV_ASSERT(owner != -1);
    place_down_to(a, a->holes + a->n_free - n);
    for (int32_t i = 0; i < n; i++) {
        const int32_t p = get(a, a->holes + --a->n_free);
        PKV_ASSERT(a->owner1[p] == 0);
        a->owner1[p] = owner + 1;
        out[i] = p;
    }
    return 0;
}

void pkv_kvalloc_give(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t owner) {
    for (int32_t i = 0; i < n; i++) {
        const int32_t p = pages[i];
        PKV_ASSERT(p >= 0 && p < a->n_pages && a->owner1[p] == owner + 1);
        a->owner1[p] = 0;
        set(a, a->holes + a->n_free++, p);
    }
}

void pkv_kvalloc_transfer(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t from,
                          int64_t to) {
    PKV_ASSERT(to != -1);
    for (int32_t i = 0; i < n; i++) {
        PKV_ASSERT(pages[i] >= 0 && pages[i] < a->n_pages && a->owner1[pages[i]] == from + 1);
        a->owner1[pages[i]] = to + 1;
    }
}
