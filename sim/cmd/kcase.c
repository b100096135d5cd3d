#include "kcase.h"
#include "pkv_tol.h"
#include "pagetable.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_float.h>

void pkv_kcase_free(pkv_kcase *d) {
    pkvk_free(d->q), pkvk_free(d->o), pkvk_free(d->k), pkvk_free(d->v);
    pkvk_free(d->bt), pkvk_free(d->lens), pkvk_free(d->ref);
    pkvk_free(d->k_scale), pkvk_free(d->v_scale);
}

/* Device batch for a case: block tables from the study's generator with `holes` of
 * the page universe unused, the shared prefix mapped onto row 0's pages; K and V
 * tiled from blocks of 4 Mi GSL Gaussian values in the shape's KV type (FP8: the values
 * as codes, every page's K and V scale 1, vLLM's default without calibrated scales, so
 * that FlashInfer's FP8 path, one scale for the whole cache, runs the same pool). */
int pkv_kcase_make(const pkvk_ctx *c, pkv_kcase *d, const char *name, const int32_t *lens, int n,
                   int q_len, const pkvk_shape *s, double holes, int32_t share, gsl_rng *r,
                   char *err, size_t errn) {
    memset(d, 0, sizeof *d);
    pkv_pagetable pt;
    if (pkv_pagetable_generate(&pt, lens, n, s->page_size, 0, holes, r)) {
        snprintf(err, errn, "case %.31s: out of memory for its page table", name);
        return -1;
    }
    int32_t stride = pt.stride, *bt = pt.table;
    for (int i = 1; i < n; i++) {
        int32_t tok = share < lens[i] ? share : lens[i];
        if (tok > lens[0]) tok = lens[0];
        memcpy(bt + (size_t)i * stride, bt, sizeof(int32_t) * (size_t)(tok / s->page_size));
    }
    int64_t universe = pt.universe;
    const size_t blk = 4u << 20; /* elements */
    const int eb = pkvk_dtype_bytes(s->kv_dtype), fp8 = s->kv_dtype == PKVK_FP8_E4M3;
    uint16_t *rnd = malloc(blk * 2);
    size_t page_elems = (size_t)s->hkv * s->page_size * s->d, kv = (size_t)universe * page_elems;
    const size_t heads = (size_t)universe * s->hkv;
    float *scales = fp8 ? malloc(2 * heads * sizeof(float)) : NULL; /* K's, then V's */
    d->q_elems = (size_t)n * q_len * s->hq * s->d;
    uint16_t *q = malloc(d->q_elems * 2);
    int rc = !rnd || !q || (fp8 && !scales) ? PKVK_ERR_OUT_OF_MEMORY : PKVK_OK;
    if (!rc) {
        for (size_t j = 0; j < d->q_elems; j++)
            pkvk_store(s->dtype, q, j, (float)gsl_ran_gaussian(r, 1));
        if (!rc) rc = pkvk_malloc(&d->k, kv * eb);
        if (!rc) rc = pkvk_malloc(&d->v, kv * eb);
        if (!rc && fp8) rc = pkvk_malloc((void **)&d->k_scale, heads * sizeof(float));
        if (!rc && fp8) rc = pkvk_malloc((void **)&d->v_scale, heads * sizeof(float));
        if (!rc) rc = pkvk_malloc(&d->q, d->q_elems * 2);
        if (!rc) rc = pkvk_malloc(&d->o, d->q_elems * 2);
        if (!rc) rc = pkvk_malloc((void **)&d->ref, d->q_elems * 4);
        if (!rc) rc = pkvk_malloc(&d->bt, (size_t)n * stride * 4);
        if (!rc) rc = pkvk_malloc(&d->lens, (size_t)n * 4);
        if (rc) snprintf(err, errn, "case %.31s: %.400s", name, pkvk_last_error());
    }
    for (size_t j = 0; fp8 && j < 2 * heads; j++) scales[j] = 1.f;
    for (int which = 0; which < 2 && !rc; which++) {
        char *dst = which ? d->v : d->k;
        for (size_t j = 0; j < blk; j++) {
            const float g = (float)gsl_ran_gaussian(r, 1);
            pkvk_store(s->kv_dtype, rnd, j, g);
            if (which) d->v_max = fmax(d->v_max, fabs(pkvk_elem(s->kv_dtype, rnd, j)));
        }
        for (size_t off = 0; off < kv && !rc; off += blk)
            rc = pkvk_h2d(dst + off * eb, rnd, eb * (kv - off < blk ? kv - off : blk));
        if (!rc && fp8)
            rc = pkvk_h2d(which ? d->v_scale : d->k_scale, scales + which * heads, heads * 4);
    }
    if (!rc)
        rc = pkvk_h2d(d->q, q, d->q_elems * 2) || pkvk_h2d(d->bt, bt, (size_t)n * stride * 4) ||
             pkvk_h2d(d->lens, lens, (size_t)n * 4);
    d->b = (pkvk_batch){.shape = *s,
                        .n_rows = n,
                        .q = d->q,
                        .o = d->o,
                        .k_cache = d->k,
                        .v_cache = d->v,
                        .block_table = d->bt,
                        .bt_stride = stride,
                        .seq_lens = d->lens,
                        .q_len = q_len,
                        .sm_scale = 1.0f / sqrtf((float)s->d),
                        .k_scale = d->k_scale,
                        .v_scale = d->v_scale,
                        .k_scale_all = fp8 ? 1.f : 0.f,
                        .v_scale_all = fp8 ? 1.f : 0.f};
    if (!rc) rc = pkvk_gpu_reference(c, &d->b, d->ref);
    if (rc && !*err) snprintf(err, errn, "case %.31s: %.400s", name, pkvk_last_error());
    pkv_pagetable_free(&pt);
    free(rnd), free(q), free(scales);
    return rc;
}

/* Time one plan: median of reps calls, each after an L2 flush. */
int pkv_kcase_time(const pkvk_ctx *c, pkvk_workspace *ws, pkv_kcase *d, const pkvk_plan *p,
                   int reps, float *med_ms, int *launches, double *mx, double *mean) {
    int rc = pkvk_plan_upload(ws, p);
    if (!rc && pkv_route_has(p->route, PKV_RP_CSR))
        rc = pkvk_pack_csr(ws, &d->b); /* FlashInfer's page list: plan work, not timed */
    if (rc) return rc;
    float *t = malloc(sizeof(float) * reps);
    pkvk_event *e0 = NULL, *e1 = NULL;
    rc = t ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
    if (!rc) rc = pkvk_event_create(c, &e0);
    if (!rc) rc = pkvk_event_create(c, &e1);
    for (int w = 0; w < 3 && !rc; w++) rc = pkvk_launch(ws, &d->b, p, launches);
    if (!rc) rc = pkvk_memset(d->o, 0xff, d->q_elems * 2); /* poison: NaN halves */
    for (int i = 0; i < reps && !rc; i++) {
        rc = pkvk_flush_l2(c);
        if (!rc) rc = pkvk_event_record(e0);
        if (!rc) rc = pkvk_launch(ws, &d->b, p, launches);
        if (!rc) rc = pkvk_event_record(e1);
        if (!rc) rc = pkvk_event_elapsed(e0, e1, &t[i]);
    }
    if (!rc) {
        gsl_sort_float(t, 1, reps);
        *med_ms = (float)gsl_stats_float_median_from_sorted_data(t, 1, reps);
        uint16_t *o = malloc(d->q_elems * 2);
        float *ref = malloc(d->q_elems * 4), *o32 = malloc(d->q_elems * 4);
        rc = !o || !ref || !o32 ? PKVK_ERR_OUT_OF_MEMORY : pkvk_d2h(o, d->o, d->q_elems * 2);
        if (!rc) rc = pkvk_d2h(ref, d->ref, d->q_elems * 4);
        d->o_max = 0;
        for (size_t j = 0; !rc && j < d->q_elems; j++) {
            o32[j] = pkvk_elem(d->b.shape.dtype, o, j);
            d->o_max = fmax(d->o_max, fabs(ref[j]));
        }
        if (!rc) pkvk_compare(o32, NULL, PKVK_FP16, ref, d->q_elems, mx, mean);
        free(o), free(ref), free(o32);
    }
    free(t);
    pkvk_event_destroy(e0);
    pkvk_event_destroy(e1);
    return rc;
}

int pkv_kcase_ok(const pkv_kcase *d, double mx, double mean) {
    return pkv_tol_typed_ok(d->b.shape.dtype == PKVK_BF16, d->b.shape.kv_dtype == PKVK_FP8_E4M3,
                            d->v_max, d->o_max, mx, mean);
}
