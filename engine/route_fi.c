#include "route_fi.h"

static int plan_fi(const pkv_plan_ctx *x, pkvk_plan *p, pkv_route r, const int32_t *seq_lens,
                   int32_t n_rows) {
    return pkvk_plan_flashinfer(p, r, &x->shape, seq_lens, n_rows, x->cal->sm_count,
                                x->cal->flashinfer_decode_ctas_per_sm);
}

/* One CTA per (chunk, KV head, query tile: one at decode); once FlashInfer splits, every
 * row's state goes through its merge, single-chunk rows too; a CTA streams one chunk at
 * most. */
static void count_fi(const pkvk_shape *s, const pkvk_plan *p, const int32_t *seq_lens,
                     pkv_plan_sums *sums, pkv_counters *out) {
    (void)seq_lens;
    if (sums->merged_slots) sums->merged_slots = p->n_slots;
    sums->longest_range =
        p->chunk_tokens > 0 && p->chunk_tokens < sums->max_len ? p->chunk_tokens : sums->max_len;
    out->ctas = (int64_t)p->n_slots * s->hkv * (p->q_tiles > 1 ? p->q_tiles : 1);
    out->merge_launches = sums->merged_slots > 0;
    out->launches = (p->n_rows > 0) + out->merge_launches;
}

/* The CUDA-core decode's grid is bounded by its own occupancy; the tensor-core path
 * runs at the kernels' common one. */
static int fi_decode_ctas(const pkv_calib *c) {
    return c->flashinfer_decode_ctas_per_sm;
}

const pkv_route_ops pkv_route_ops_FLASHINFER = {plan_fi, count_fi, fi_decode_ctas,
                                                pkvk_cpu_attend_chunks};
const pkv_route_ops pkv_route_ops_FLASHINFER_TC = {plan_fi, count_fi, pkv_route_resident_ctas,
                                                   pkvk_cpu_attend_chunks};
