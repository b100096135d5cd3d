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
    const int eb = pkvk_dtype_bytes(s.kv_dtype), fp8 = s.kv_dtype == PKVK_FP8_E4M3;
    h->k = malloc(h->kv_elems * eb);
    h->v = malloc(h->kv_elems * eb);
    h->q = malloc(h->q_elems * 2);
    h->kf = h->vf = h->k_scale = h->v_scale = NULL;
    if (!h->k || !h->v || !h->q) abort();
    if (fp8) {
        const size_t heads = (size_t)universe * s.hkv, per = (size_t)s.page_size * s.d;
        h->kf = malloc(h->kv_elems * sizeof(float)), h->vf = malloc(h->kv_elems * sizeof(float));
        h->k_scale = malloc(heads * sizeof(float)), h->v_scale = malloc(heads * sizeof(float));
        if (!h->kf || !h->vf || !h->k_scale || !h->v_scale) abort();
        for (size_t j = 0; j < h->kv_elems; j++)
            h->kf[j] = (float)gsl_ran_gaussian(r, 1.0), h->vf[j] = (float)gsl_ran_gaussian(r, 1.0);
        for (size_t ph = 0; ph < heads; ph++) {
            float ak = 0, av = 0;
            for (size_t j = ph * per; j < (ph + 1) * per; j++)
                ak = fmaxf(ak, fabsf(h->kf[j])), av = fmaxf(av, fabsf(h->vf[j]));
            h->k_scale[ph] = ak > 0 ? ak / 448.f : 1.f, h->v_scale[ph] = av > 0 ? av / 448.f : 1.f;
            for (size_t j = ph * per; j < (ph + 1) * per; j++) {
                pkvk_store(PKVK_FP8_E4M3, h->k, j, h->kf[j] / h->k_scale[ph]);
                pkvk_store(PKVK_FP8_E4M3, h->v, j, h->vf[j] / h->v_scale[ph]);
            }
        }
    } else {
        for (size_t j = 0; j < h->kv_elems; j++) {
            pkvk_store(s.kv_dtype, h->k, j, (float)gsl_ran_gaussian(r, 1.0));
            pkvk_store(s.kv_dtype, h->v, j, (float)gsl_ran_gaussian(r, 1.0));
        }
    }
    for (size_t j = 0; j < h->q_elems; j++)
        pkvk_store(s.dtype, h->q, j, (float)gsl_ran_gaussian(r, 1.0));
    h->n_pages = universe;
    h->b = (pkvk_batch){.shape = s,
                        .n_rows = n,
                        .q = h->q,
                        .k_cache = h->k,
                        .v_cache = h->v,
                        .block_table = h->bt,
                        .bt_stride = stride,
                        .seq_lens = h->lens,
                        .sm_scale = 1.0f / sqrtf((float)s.d),
                        .k_scale = h->k_scale,
                        .v_scale = h->v_scale};
}

void fp8_one_scale(host_batch *h) {
    if (h->b.shape.kv_dtype != PKVK_FP8_E4M3) abort();
    float ak = 0, av = 0;
    for (size_t j = 0; j < h->kv_elems; j++)
        ak = fmaxf(ak, fabsf(h->kf[j])), av = fmaxf(av, fabsf(h->vf[j]));
    const float ks = ak > 0 ? ak / 448.f : 1.f, vs = av > 0 ? av / 448.f : 1.f;
    for (size_t ph = 0; ph < (size_t)h->n_pages * h->b.shape.hkv; ph++)
        h->k_scale[ph] = ks, h->v_scale[ph] = vs;
    for (size_t j = 0; j < h->kv_elems; j++) {
        pkvk_store(PKVK_FP8_E4M3, h->k, j, h->kf[j] / ks);
        pkvk_store(PKVK_FP8_E4M3, h->v, j, h->vf[j] / vs);
    }
    h->b.k_scale_all = ks, h->b.v_scale_all = vs;
}

void free_batch(host_batch *h) {
    free(h->q), free(h->k), free(h->v), free(h->bt), free(h->lens);
    free(h->kf), free(h->vf), free(h->k_scale), free(h->v_scale);
}

int32_t share_prefix(host_batch *h, host_batch *priv) {
    const pkvk_shape s = h->b.shape;
    if (s.dtype != PKVK_FP16 || s.kv_dtype != PKVK_FP16) abort(); /* FP16 batches only */
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
    priv->b = (pkvk_batch){.shape = s,
                           .n_rows = n,
                           .q = priv->q,
                           .k_cache = priv->k,
                           .v_cache = priv->v,
                           .block_table = priv->bt,
                           .bt_stride = stride,
                           .seq_lens = priv->lens,
                           .sm_scale = h->b.sm_scale};
    return m;
}
