#include "route_ref.h"

static int plan_ref(const pkv_plan_ctx *x, pkvk_plan *p, pkv_route r, const int32_t *seq_lens,
                    int32_t n_rows) {
    (void)x, (void)r;
    return pkvk_plan_ref(p, seq_lens, n_rows);
}

/* A CTA streams a whole row. */
static void count_ref(const pkvk_shape *s, const pkvk_plan *p, const int32_t *seq_lens,
                      pkv_plan_sums *sums, pkv_counters *out) {
    (void)seq_lens;
    sums->longest_range = sums->max_len;
    out->launches = p->n_rows > 0;
    out->ctas = (int64_t)p->n_rows * s->hkv;
}

const pkv_route_ops pkv_route_ops_REF_PAGED = {plan_ref, count_ref, pkv_route_resident_ctas,
                                               pkvk_cpu_attend_whole};
