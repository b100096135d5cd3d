#include "cost.h"

#include "routes.h"

#include <math.h>

void pkv_cost_counters(const pkv_calib *c, const pkvk_shape *s, const pkvk_plan *p,
                       const int32_t *seq_lens, int q_len, pkv_counters *out) {
    *out = (pkv_counters){0};
    const bool fp8 = s->kv_dtype == PKVK_FP8_E4M3;
    int64_t pages = 0; /* FP8 KV: each page's scales are read beside its bytes */
    /* summed in locals: sums' address goes to the route's count, which kept the loop's
     * sums in memory, a chain of stores and loads through every row of every candidate */
    int64_t tokens = 0, merged_slots = 0;
    int32_t max_len = 0, max_splits = 0;
    for (int32_t i = 0; i < p->n_rows; i++) {
        const int32_t n = p->split_offsets[i + 1] - p->split_offsets[i];
        tokens += seq_lens[i];
        if (fp8) pages += (seq_lens[i] + s->page_size - 1) / s->page_size;
        if (seq_lens[i] > max_len) max_len = seq_lens[i];
        if (n > max_splits) max_splits = n;
        if (n > 1) merged_slots += n;
    }
    pkv_plan_sums sums = {.tokens = tokens,
                          .merged_slots = merged_slots,
                          .max_len = max_len,
                          .max_splits = max_splits};
    const pkv_route_ops *ops = pkv_route_ops_of(p->route);
    if (ops) ops->count(s, p, seq_lens, &sums, out);
    if (q_len < 1) q_len = 1;
    out->q_len = q_len;
    /* a verify step's query blocks a range (FlashInfer's: its own tiling, priced as decode) */
    const int blocks = pkv_route_has(p->route, PKV_RP_VERIFY)
                           ? pkvk_verify_blocks(s->hq / s->hkv, s->d, q_len)
                           : 1;
    out->ctas *= blocks;
    out->max_splits = sums.max_splits;
    const int elem = pkvk_dtype_bytes(s->kv_dtype);
    out->max_cta_bytes = (int64_t)sums.longest_range * s->d * 2 /* K and V */ * elem;
    out->kv_bytes = sums.tokens * s->hkv * s->d * 2 /* K and V */ * elem +
                    pages * s->hkv * 2 * (int64_t)sizeof(float);
    /* A verify step's query blocks read a range side by side; L2 holds most of it for the
     * later ones: each block past the first re-reads PKV_VERIFY_REREAD of the KV from
     * memory (bench/RESULTS.md, the verify step on the H100). */
    out->kv_bytes += (int64_t)(PKV_VERIFY_REREAD * (blocks - 1) * (double)out->kv_bytes);
    /* FlashInfer's verify (its prefill path) tiles the q_len x G query rows by 16: over FP8 KV
     * each tile past the first widens and reads the KV again (over 16-bit KV the tiles share
     * it: within 4% of its decode). */
    if (fp8 && q_len > 1 && !pkv_route_has(p->route, PKV_RP_VERIFY)) {
        const int tiles = (q_len * (s->hq / s->hkv) + 15) / 16;
        out->kv_bytes += (int64_t)(PKV_FI_VERIFY_FP8_REREAD * (tiles - 1) * (double)out->kv_bytes);
    }
    /* Measured for PersistentKV's kernels and the reference's (the route's row says). */
    out->cta_bps_max = fp8 && pkv_route_has(p->route, PKV_RP_FP8_CAP) ? c->kv_fp8_cta_gbps : 0;
    /* A split writes G states of d + 2 floats per KV head and query token, and the merge
     * reads them. */
    out->merge_bytes = sums.merged_slots * q_len * s->hq * (s->d + 2) * 4 * 2;
    out->cta_work_per_sm = (double)out->ctas / c->sm_count;
    out->wave_ctas = ops ? ops->ctas_per_sm(c) * c->sm_count : 0;
    out->t_predicted = pkv_cost_route_time(c, p->route, NULL, out);
}

double pkv_cost_time(const pkv_calib *c, const pkv_counters *k) {
    double under = k->cta_work_per_sm > 0 && k->cta_work_per_sm < c->c_min
                       ? c->c_min / k->cta_work_per_sm
                       : 1.0;
    return (double)k->kv_bytes / c->beta * under + k->launches * c->lambda +
           (double)k->merge_bytes / c->beta;
}

double pkv_cost_wave(const pkv_calib *c, pkv_route r, const pkv_counters *k) {
    return k->wave_ctas > 0 ? (double)k->wave_ctas
                            : (double)pkv_route_ops_of(r)->ctas_per_sm(c) * c->sm_count;
}

double pkv_cost_route_time(const pkv_calib *c, pkv_route r, const pkv_route_model *m,
                           const pkv_counters *k) {
    if (r >= PKV_ROUTE_COUNT) r = PKV_ROUTE_REF_PAGED;
    if (!m) m = pkv_calib_route_model(c, r, k->q_len);
    if (!m->set) return pkv_cost_time(c, k) * c->route_scale[r];
    const double *v = m->v;
    const double wave = pkv_cost_wave(c, r, k);
    const double ctas = (double)k->ctas, fit = v[PKV_RM_CTA_GBPS] * 1e9,
                 b = k->cta_bps_max > 0 && k->cta_bps_max < fit ? k->cta_bps_max : fit;
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
