/* KV page allocator: a pool of physical page ids with a LIFO free list, so freed
 * pages are reused first and long runs leave holes in every block table. Each page
 * records its owner, so double ownership and leaks are checkable.
 *
 * Nothing is written at set-up: the stack and the owner table start as zeroed memory
 * (the operating system maps it on first touch), a stack entry holding its id XOR the id
 * its position starts with, an owner entry its owner plus one. A pool of millions of
 * pages that a run touches a few thousand of costs that few thousand. */
#ifndef PKV_KVALLOC_H
#define PKV_KVALLOC_H

#include <stdint.h>
#include <gsl/gsl_rng.h>

typedef struct pkv_kvalloc {
    int32_t n_pages;  /* physical page ids 0 .. n_pages-1 */
    int32_t n_usable; /* ids that can ever be handed out (the rest are holes) */
    int32_t n_free;
    int32_t holes;   /* the stack's bottom positions, never reached */
    int32_t placed;  /* positions from here up hold their place in the permutation */
    gsl_rng *place;  /* not owned; NULL: no permutation */
    int32_t *slot;   /* [n_pages] the stack (top at holes + n_free - 1), encoded as above */
    int64_t *owner1; /* [n_pages] owner + 1, 0 when free */
} pkv_kvalloc;

/* place: when non-NULL, the pool hands out its pages in gsl_ran_shuffle's permutation
 * of the initial stack drawn with it (consecutive takes are consecutive slices of a
 * seeded permutation, as in the study's generator), each position's draw taken when the
 * stack first reaches it: `place` must outlive the pool and be drawn from by nothing
 * else. holes: the fraction of the ids that are never handed out. Returns 0; -1 out of
 * memory. */
int pkv_kvalloc_init(pkv_kvalloc *a, int32_t n_pages, double holes, gsl_rng *place);
void pkv_kvalloc_free(pkv_kvalloc *a);
/* Take n pages for `owner` (any id but -1) into out[0..n); all or nothing: returns -1 (and takes
 * none) when fewer than n are free. */
int pkv_kvalloc_take(pkv_kvalloc *a, int32_t n, int64_t owner, int32_t *out);
/* Hand pages from one owner to another; aborts (invariant) if `from` does not own one. */
void pkv_kvalloc_transfer(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t from,
                          int64_t to);
/* Return pages; aborts (invariant) if a page is not owned by `owner`. */
void pkv_kvalloc_give(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t owner);
/* The page's owner, -1 when it is free. */
static inline int64_t pkv_kvalloc_owner(const pkv_kvalloc *a, int32_t page) {
    return a->owner1[page] - 1;
}

#endif
