/* KV page allocator: a pool of physical page ids with a LIFO free list, so freed
 * pages are reused first and long runs leave holes in every block table. Each page
 * records its owner, so double ownership and leaks are checkable. */
#ifndef PKV_KVALLOC_H
#define PKV_KVALLOC_H

#include <signal.h>
#include <stdint.h>
#include <gsl/gsl_rng.h>

typedef struct pkv_kvalloc {
    int32_t n_pages;  /* physical page ids 0 .. n_pages-1 */
    int32_t n_usable; /* ids that can ever be handed out (the rest are holes) */
    int32_t n_free;
    int32_t *free_list; /* [n_pages] stack; top at n_free - 1 */
    int64_t *owner;     /* [n_pages] owner id, -1 when free */
} pkv_kvalloc;

/* place: when non-NULL, the initial free list is shuffled with it, so that even a
 * fresh pool hands out physical pages in no particular order (consecutive takes are
 * consecutive slices of a seeded permutation, as in the study's generator). holes:
 * the fraction of the ids that are never handed out. stop (may be NULL) is polled
 * while a large pool is shuffled. Returns 0; -1 out of memory; -2 stopped. */
int pkv_kvalloc_init(pkv_kvalloc *a, int32_t n_pages, double holes, gsl_rng *place,
                     volatile sig_atomic_t *stop);
void pkv_kvalloc_free(pkv_kvalloc *a);
/* Take n pages for `owner` into out[0..n); all or nothing: returns -1 (and takes
 * none) when fewer than n are free. */
int pkv_kvalloc_take(pkv_kvalloc *a, int32_t n, int64_t owner, int32_t *out);
/* Hand pages from one owner to another; aborts (invariant) if `from` does not own one. */
void pkv_kvalloc_transfer(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t from,
                          int64_t to);
/* Return pages; aborts (invariant) if a page is not owned by `owner`. */
void pkv_kvalloc_give(pkv_kvalloc *a, const int32_t *pages, int32_t n, int64_t owner);

#endif
