#include "testbatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
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

int32_t share_prefix(host_batch *h, host_batch *priv) {
    const pkvk_shape s = h->b.shape;
    const int n = h->b.n_rows, stride = h->b.bt_stride, ps = s.page_size;
    int32_t m = (h->lens[0] + ps - 1) / ps;
    for (int i = 1; i < n; i++) {
        int32_t own = (h->lens[i] + ps - 1) / ps - 1;
        if (own < m) m = own;
    }
    if (m < 0) m = 0;
    for (int i = 1; i < n; i++)
        for (int j = 0; j < m; j++) h->bt[(size_t)i * stride + j] = h->bt[j];
    const size_t page = (size_t)s.hkv * ps * s.d;
    const int32_t universe = h->n_pages + (n - 1) * m;
    *priv = *h;
    priv->n_pages = universe;
    priv->kv_elems = (size_t)universe * page;
    priv->k = malloc(priv->kv_elems * 2), priv->v = malloc(priv->kv_elems * 2);
    priv->q = malloc(h->q_elems * 2), priv->lens = malloc(sizeof(int32_t) * n);
    priv->bt = malloc(sizeof(int32_t) * (size_t)n * stride);
    if (!priv->k || !priv->v || !priv->q || !priv->lens || !priv->bt) abort();
    memcpy(priv->k, h->k, h->kv_elems * 2), memcpy(priv->v, h->v, h->kv_elems * 2);
    memcpy(priv->q, h->q, h->q_elems * 2), memcpy(priv->lens, h->lens, sizeof(int32_t) * n);
    memcpy(priv->bt, h->bt, sizeof(int32_t) * (size_t)n * stride);
    for (int i = 1; i < n; i++)
        for (int j = 0; j < m; j++) {
            const int32_t to = h->n_pages + (i - 1) * m + j, from = h->bt[j];
            memcpy(priv->k + (size_t)to * page, h->k + (size_t)from * page, page * 2);
            memcpy(priv->v + (size_t)to * page, h->v + (size_t)from * page, page * 2);
            priv->bt[(size_t)i * stride + j] = to;
        }
    priv->b = (pkvk_batch){s,       n,        priv->q, NULL,       priv->k,
                           priv->v, priv->bt, stride,  priv->lens, h->b.sm_scale};
    return m;
}
