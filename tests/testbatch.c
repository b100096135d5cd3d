#include "testbatch.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>

void make_batch(host_batch *h, gsl_rng *r, pkvk_shape s, const int32_t *lens, int n, double holes) {
    int32_t stride = 0, total = 0;
    for (int i = 0; i < n; i++) {
        int32_t p = (lens[i] + s.page_size - 1) / s.page_size;
        if (p > stride) stride = p;
        total += p;
    }
    int32_t universe = (int32_t)ceil(total / (1 - holes)) + 1;
    int32_t *perm = malloc(sizeof(int32_t) * universe);
    for (int32_t i = 0; i < universe; i++) perm[i] = i;
    gsl_ran_shuffle(r, perm, universe, sizeof(int32_t));
    h->bt = calloc((size_t)n * stride, sizeof(int32_t));
    h->lens = malloc(sizeof(int32_t) * n);
    int32_t next = 0;
    for (int i = 0; i < n; i++) {
        h->lens[i] = lens[i];
        for (int32_t p = 0; p < (lens[i] + s.page_size - 1) / s.page_size; p++)
            h->bt[(size_t)i * stride + p] = perm[next++];
    }
    free(perm);
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

void compare_out(const float *o, const float *ref, size_t n, double *mx, double *mean) {
    *mx = 0;
    double sum = 0;
    for (size_t j = 0; j < n; j++) {
        double d = fabs((double)o[j] - ref[j]);
        if (!(d <= *mx)) *mx = d;
        sum += d;
    }
    *mean = n ? sum / n : 0;
}
