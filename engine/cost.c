#include "cost.h"

#include <math.h>

void pkv_cost_counters(const pkv_calib *c, const pkvk_shape *s, const pkvk_plan *p,
                       const int32_t *seq_lens, pkv_counters *out) {
    *out = (pkv_counters){0};
    int64_t tokens = 0, multi_slots = 0;
    int32_t longest = 0; /* tokens of the longest range one CTA streams */
    const bool fi = pkv_route_is_flashinfer(p->route);
    for (int32_t i = 0; i < p->n_rows; i++) {
        tokens += seq_lens[i];
        int32_t n = p->split_offsets[i + 1] - p->split_offsets[i];
        if (n > out->max_splits) out->max_splits = n;
        if (n > 1) multi_slots += n;
        int32_t b = 0, t = seq_lens[i]; /* a row's first split is its longest */
        if (fi && p->chunk_tokens > 0 && p->chunk_tokens < t)
            t = p->chunk_tokens;
        else if (!fi && n > 1)
            pkvk_split_range(seq_lens[i], n, 0, &b, &t);
        if (t - b > longest) longest = t - b;
    }
    out->max_cta_bytes = (int64_t)longest * s->d * 2 /* K and V */ * 2 /* fp16 */;
    out->kv_bytes = tokens * s->hkv * s->d * 2 /* K and V */ * 2 /* fp16 */;
    /* Once FlashInfer splits, every row's state goes through its merge, single-chunk
     * rows too. */
    if (fi && multi_slots) multi_slots = p->n_slots;
    /* A split writes G states of d + 2 floats per KV head, and the merge reads them. */
    out->merge_bytes = multi_slots * s->hq * (s->d + 2) * 4 * 2;
    switch (p->route) {
    case PKV_ROUTE_REF_PAGED:
        out->launches = p->n_rows > 0;
        out->ctas = (int64_t)p->n_rows * s->hkv;
        break;
    case PKV_ROUTE_BUCKET:
        for (int32_t b = 0; b < p->n_buckets; b++) {
            const pkvk_bucket *B = &p->buckets[b];
            out->ctas += (int64_t)(B->row_end - B->row_begin) * s->hkv * B->splits;
            out->launches += 1 + (B->splits > 1);
            out->merge_launches += B->splits > 1;
        }
        break;
    case PKV_ROUTE_FLASHINFER:
    case PKV_ROUTE_FLASHINFER_TC:
        /* One CTA per (chunk, KV head). */
        out->ctas = (int64_t)p->n_slots * s->hkv;
        out->merge_launches = multi_slots > 0;
        out->launches = (p->n_rows > 0) + out->merge_launches;
        break;
    case PKV_ROUTE_WORKQUEUE:
    case PKV_ROUTE_FUSED:
        out->ctas = p->n_tasks;
        out->tasks = p->n_tasks;
        out->merge_launches = p->route == PKV_ROUTE_WORKQUEUE && multi_slots > 0;
        out->launches = (p->n_tasks > 0) + out->merge_launches;
        break;
    default:
        break;
    }
    out->cta_work_per_sm = (double)out->ctas / c->sm_count;
    out->t_predicted = pkv_cost_route_time(c, p->route, NULL, out);
}

double pkv_cost_time(const pkv_calib *c, const pkv_counters *k) {
    double under = k->cta_work_per_sm > 0 && k->cta_work_per_sm < c->c_min
                       ? c->c_min / k->cta_work_per_sm
                       : 1.0;
    return (double)k->kv_bytes / c->beta * under + k->launches * c->lambda +
           (double)k->merge_bytes / c->beta;
}

double pkv_cost_route_time(const pkv_calib *c, pkv_route r, const pkv_route_model *m,
                           const pkv_counters *k) {
    if (r >= PKV_ROUTE_COUNT) r = PKV_ROUTE_REF_PAGED;
    if (!m) m = &c->route_model[r];
    if (!m->set) return pkv_cost_time(c, k) * c->route_scale[r];
    const double *v = m->v;
    const int per_sm =
        r == PKV_ROUTE_FLASHINFER ? c->flashinfer_decode_ctas_per_sm : c->resident_ctas_per_sm;
    const double wave = (double)per_sm * c->sm_count;
    const double ctas = (double)k->ctas, b = v[PKV_RM_CTA_GBPS] * 1e9;
    const double waves = ceil(ctas / wave), conc = ctas < wave ? ctas : wave;
    const double peak = v[PKV_RM_PEAK_GBPS] > 0 ? v[PKV_RM_PEAK_GBPS] * 1e9 : c->beta;
    double bw = conc * b < peak ? conc * b : peak, stream = 0, crit = 0;
    if (k->kv_bytes > 0 && bw > 0) stream = (double)k->kv_bytes / bw;
    if (b > 0) crit = (double)k->max_cta_bytes / b;
    return (v[PKV_RM_FIXED_US] + k->launches * v[PKV_RM_LAUNCH_US] + waves * v[PKV_RM_CTA_US]) *
               1e-6 +
           (stream > crit ? stream : crit) +
           (v[PKV_RM_MERGE_GBPS] > 0 ? (double)k->merge_bytes / (v[PKV_RM_MERGE_GBPS] * 1e9) : 0);
}
