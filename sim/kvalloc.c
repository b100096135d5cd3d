#include "kvalloc.h"
#include "pkv_assert.h"

#include <stdlib.h>

/* gsl_ran_shuffle's permutation (the same draws in the same order; test_kvalloc checks
 * that they agree), polling *stop between slices: a pool of a billion pages takes tens
 * of seconds to shuffle. Returns -1 when stopped. */
static int shuffle(gsl_rng *r, int32_t *v, size_t n, volatile sig_atomic_t *stop) {
    for (size_t i = n ? n - 1 : 0; i > 0; i--) {
        if ((i & 0xfffff) == 0 && stop && *stop) return -1;
        size_t j = gsl_rng_uniform_int(r, i + 1);
        int32_t t = v[i];
        v[i] = v[j], v[j] = t;
    }
    return 0;
}

int pkv_kvalloc_init(pkv_kvalloc *a, int32_t n_pages, double holes, gsl_rng *place,
                     volatile sig_atomic_t *stop) {
    *a = (pkv_kvalloc){0};
    a->free_list = malloc(sizeof(int32_t) * (size_t)n_pages);
    a->owner = malloc(sizeof(int64_t) * (size_t)n_pages);
    if (!a->free_list || !a->owner) {
        pkv_kvalloc_free(a);
        return -1;
    }
    /* Stack order: page 0 on top, so an unshuffled pool hands out 0, 1, 2, ... */
    int stopped = 0;
    for (int32_t i = 0; i < n_pages && !stopped; i++) {
        a->free_list[i] = n_pages - 1 - i;
        a->owner[i] = -1;
        stopped = (i & 0xfffff) == 0xfffff && stop && *stop; /* large pools only */
    }
    if (stopped || (place && shuffle(place, a->free_list, (size_t)n_pages, stop))) {
        pkv_kvalloc_free(a);
        return -2;
    }
    a->n_pages = n_pages;
    /* Holes: the bottom of the stack is never reached, so that fraction of the
     * physical ids is never handed out. */
    int32_t unused = (int32_t)(holes * n_pages);
    for (int32_t i = 0; i < n_pages - unused; i++) a->free_list[i] = a->free_list[i + unused];
    a->n_usable = a->n_free = n_pages - unused;
    return 0;
}

void pkv_kvalloc_free(pkv_kvalloc *a) {
    free(a->free_list);
    free(a->owner);
    *a = (pkv_kvalloc){0};
}

int pkv_kvalloc_take(pkv_kvalloc *a, int32_t n, int64_t owner, int32_t *out) {
    if (n > a->n_free) return -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t p = a->free_list[--a->n_free];
        PKV_ASSERT(a->owner[p] == -1);
        a->owner[p] = owner;
        out[i] = p;
    }
    return 0;
}

void pkv_kvalloc_give(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t owner) {
    for (int32_t i = 0; i < n; i++) {
        int32_t p = pages[i];
        PKV_ASSERT(p >= 0 && p < a->n_pages && a->owner[p] == owner);
        a->owner[p] = -1;
        a->free_list[a->n_free++] = p;
    }
}

void pkv_kvalloc_transfer(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t from,
                          int64_t to) {
    for (int32_t i = 0; i < n; i++) {
        PKV_ASSERT(pages[i] >= 0 && pages[i] < a->n_pages && a->owner[pages[i]] == from);
        a->owner[pages[i]] = to;
    }
}
