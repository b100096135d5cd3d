#include "testbatch.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>

#include "pagetable.h"

void make_batch(host_batch *h, gsl_rng *r, pkvk_shape s, const int32_t *lens, int n, double holes) {
    pkv_pagetable pt;
    if (pkv_pagetable_generate(&pt, lens, n, s.page_size, 0, holes, r)) abort();
    int32_t stride = pt.stride, universe = (int32_t)pt.universe;
    h->bt = pt.table; /* taken over; unused entries are -1 and never read */
    free(pt.pages);
    h->lens = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) h->lens[i] = lens[i];
    h->kv_elems = (size_t)universe * s.hkv * s.page_size * s.d;
    h->q_elems = (size_t)n * s.hq * s.d;
    h->k = malloc(h->kv_elems * 2);
    h->v = malloc(h->kv_elems * 2);
    h->q = malloc(h->q_elems * 2);
    for (size_t j = 0; j < h->kv_elems; j++) {
        h->k[j] = pkvk_f2h((float)gsl_ran_gaussian(r, 1.0));
        h->v[j] = pkvk_f2h((float)gsl_ran_gaussian(r, 1.0));
    }
    for (size_t j = 0; j < h->q_elems; j++) h->q[j] = pkvk_f2h((float)gsl_ran_gaussian(r, 1.0));
    h->n_pages = universe;
    h->b = (pkvk_batch){s,    n,     h->q,   NULL,    h->k,
                        h->v, h->bt, stride, h->lens, 1.0f / sqrtf((float)s.d)};
}

void free_batch(host_batch *h) {
    free(h->q), free(h->k), free(h->v), free(h->bt), free(h->lens);
}
