/* A verify step on FlashInfer's prefill path (pkvk_bench.h): the rows' query tokens as
 * prefill pieces over their pages, causal, planned once by FlashInfer's PrefillPlan
 * (pkvk_fi_prefill, pkvk_fi.h). */
#include <stdlib.h>

#include "pkvk_fi.h"

struct pkvk_fi_verify {
    pkvk_fi_prefill *f;
    int32_t *pages; /* device: the rows' pages, one list */
};

int pkvk_fi_verify_create(const pkvk_ctx *c, pkvk_fi_verify **out, const pkvk_batch *b,
                          const int32_t *lens, const int32_t *bt) {
    *out = NULL;
    const pkvk_shape *s = &b->shape;
    const int n = b->n_rows, ql = b->q_len > 1 ? b->q_len : 1, ps = s->page_size;
    pkvk_fi_verify *v = calloc(1, sizeof *v);
    int32_t *qo = malloc((n + 1) * sizeof *qo), *kv = malloc((n + 1) * sizeof *kv);
    int32_t *last = malloc(n * sizeof *last), *pages = NULL;
    int rc = v && qo && kv && last ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
    if (!rc) qo[0] = kv[0] = 0;
    for (int i = 0; !rc && i < n; i++) {
        if (lens[i] < ql)
            rc = pkvk_fail_msg(PKVK_ERR_INVALID, "a verify row has fewer keys "
                                                 "than query tokens");
        qo[i + 1] = qo[i] + ql;
        kv[i + 1] = kv[i] + (lens[i] + ps - 1) / ps;
        last[i] = (lens[i] - 1) % ps + 1;
    }
    if (!rc && !(pages = malloc((size_t)kv[n] * sizeof *pages))) rc = PKVK_ERR_OUT_OF_MEMORY;
    for (int i = 0; !rc && i < n; i++)
        for (int32_t j = 0; j < kv[i + 1] - kv[i]; j++)
            pages[kv[i] + j] = bt[(size_t)i * b->bt_stride + j];
    if (!rc)
        rc = pkvk_fi_prefill_create(c, &v->f, s->hq, s->hkv, s->d, ps, s->dtype, s->kv_dtype, n);
    if (!rc) rc = pkvk_malloc((void **)&v->pages, (size_t)kv[n] * sizeof *pages);
    if (!rc) rc = pkvk_h2d(v->pages, pages, (size_t)kv[n] * sizeof *pages);
    if (!rc) rc = pkvk_fi_prefill_plan(v->f, n, qo, kv, last, v->pages);
    free(qo), free(kv), free(last), free(pages);
    if (rc) {
        pkvk_fi_verify_destroy(v);
        return rc;
    }
    *out = v;
    return PKVK_OK;
}

int pkvk_fi_verify_run(pkvk_fi_verify *v, const pkvk_batch *b) {
    return pkvk_fi_prefill_run(v->f, b->q, b->k_cache, b->v_cache, b->o);
}

void pkvk_fi_verify_destroy(pkvk_fi_verify *v) {
    if (!v) return;
    pkvk_fi_prefill_destroy(v->f);
    pkvk_free(v->pages);
    free(v);
}
