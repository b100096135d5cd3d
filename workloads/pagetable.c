#include "pagetable.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>

int pkv_pagetable_generate(pkv_pagetable *pt, const int32_t *lens, int32_t n, int32_t page_size,
                           int32_t bucket_len, double rho, gsl_rng *r) {
    *pt = (pkv_pagetable){0};
    if (n < 1 || page_size < 1 || bucket_len < 0 || !(rho >= 0 && rho < 1)) return -1;
    pt->pages = malloc(sizeof(int32_t) * (size_t)n);
    if (!pt->pages) return -1;
    for (int32_t i = 0; i < n; i++) {
        int64_t len = lens[i] < 1 ? 1 : lens[i];
        if (bucket_len > 0) len = (len + bucket_len - 1) / bucket_len * bucket_len;
        pt->pages[i] = (int32_t)((len + page_size - 1) / page_size);
        pt->reserved += pt->pages[i];
        if (pt->pages[i] > pt->stride) pt->stride = pt->pages[i];
    }
    pt->universe = (int64_t)ceil((double)pt->reserved / (1.0 - rho));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pt->universe);
    pt->table = malloc(sizeof(int32_t) * (size_t)n * (size_t)pt->stride);
    if (!perm || !pt->table || pt->universe > INT32_MAX) {
        free(perm);
        pkv_pagetable_free(pt);
        return -1;
    }
    for (int64_t i = 0; i < pt->universe; i++) perm[i] = (int32_t)i;
    gsl_ran_shuffle(r, perm, (size_t)pt->universe, sizeof(int32_t));
    int64_t next = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < pt->stride; j++)
            pt->table[(size_t)i * pt->stride + j] = j < pt->pages[i] ? perm[next++] : -1;
    free(perm);
    pt->n_rows = n;
    return 0;
}

void pkv_pagetable_free(pkv_pagetable *pt) {
    free(pt->table);
    free(pt->pages);
    *pt = (pkv_pagetable){0};
}
