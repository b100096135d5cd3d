/* The PersistentKV study's page-table generator, for experiments and benchmarks
 * that want block tables with a controlled hole fraction instead of the live
 * allocator's: each request reserves its length rounded up to the page size (or
 * to an optional bucket length); the physical universe has ceil(L / (1 - rho))
 * pages for L reserved pages and hole fraction rho; a seeded permutation of the
 * universe is dealt out as one consecutive slice per request, in logical order. */
#ifndef PKV_PAGETABLE_H
#define PKV_PAGETABLE_H

#include <stdint.h>
#include <gsl/gsl_rng.h>

typedef struct pkv_pagetable {
    int32_t n_rows;
    int32_t stride;   /* entries per block-table row (the longest reservation) */
    int32_t *table;   /* [n_rows][stride] physical page ids; unused entries -1 */
    int32_t *pages;   /* [n_rows] reserved pages per row */
    int64_t reserved; /* L: pages reserved over all rows */
    int64_t universe; /* ceil(L / (1 - rho)) */
} pkv_pagetable;

/* lens: tokens per row; bucket_len: 0, or round reservations up to a multiple of it
 * (tokens); rho in [0, 1). Returns -1 on bad arguments or allocation failure. */
int pkv_pagetable_generate(pkv_pagetable *pt, const int32_t *lens, int32_t n, int32_t page_size,
                           int32_t bucket_len, double rho, gsl_rng *r);
void pkv_pagetable_free(pkv_pagetable *pt);

#endif
