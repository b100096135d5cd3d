#include "model.h"

#include <math.h>

/* The study's single attention layer: its prefill is a placeholder that samples no
 * token, and its graphs are captured steps over synthetic pools (the study's published
 * figures are of this kind, as it is). */
static const pkv_model_kind study_layer = {
    .id = PKV_KIND_STUDY_LAYER,
    .name = PKV_CALIB_STUDY_LAYER,
    .what = "the study's single attention layer (model.hidden 0)",
    .label = " (the study's single attention layer)",
    .kv_synthetic = true,
    .graph_mode = PKV_GRAPH_CAPTURE,
    .graph_context_gate = true,
};
/* A served model: weights, a predicted (or measured) prefill that samples the first
 * token, chunked prefill, fixed-grid graphs by default. */
static const pkv_model_kind served_model = {
    .id = PKV_KIND_SERVED_MODEL,
    .name = PKV_CALIB_SERVED_MODEL,
    .what = "a served model (model.hidden > 0)",
    .label = "",
    .weights = true,
    .prefill_samples = true,
    .prefill_predicted = true,
    .prefill_attention = true,
    .mixed = true,
    .graph_mode = PKV_GRAPH_FIXED,
    .graphs_default = true,
    .prefill_batch_tokens = PKV_FORWARD_TOKENS,
};
const pkv_model_kind *const pkv_model_kinds[PKV_KIND_COUNT] = {&study_layer, &served_model};

pkvk_shape pkv_model_attn_shape(const pkv_model *m) {
    return (pkvk_shape){.hq = m->hq / m->tp,
                        .hkv = m->hkv / m->tp,
                        .d = m->head_dim,
                        .page_size = m->page_size,
                        .dtype = m->dtype,
                        .kv_dtype = m->kv_dtype};
}

pkvk_model_shape pkv_model_gpu_shape(const pkv_model *m) {
    pkvk_shape s = pkv_model_attn_shape(m);
    return (pkvk_model_shape){m->layers,
                              m->hidden,
                              s.hq,
                              s.hkv,
                              s.d,
                              m->inter / m->tp,
                              m->vocab / m->tp,
                              s.page_size,
                              (float)m->rope_theta,
                              (float)m->norm_eps,
                              m->prefill_attn,
                              s.dtype,
                              s.kv_dtype};
}

pkvk_moe_shape pkv_model_moe_shape(const pkv_model *m) {
    return (pkvk_moe_shape){m->experts, m->experts_per_token,
                            m->experts ? m->expert_inter / m->tp : 0, m->dense_layers};
}

/* An m x k by k x n GEMM's roofline at `tflops`, without its fixed cost. */
static double gemm_roof(const pkv_calib *c, double m, double k, double n, double tflops) {
    const double tf = 2 * m * k * n / (tflops * 1e12),
                 tb = 2 * (k * n + m * k + m * n) / (c->gemm_gbps * 1e9);
    return tf > tb ? tf : tb;
}

double pkv_gemm_time(const pkv_calib *c, double m, double k, double n) {
    return gemm_roof(c, m, k, n, pkv_calib_gemm_tflops(c, m)) + c->gemm_us * 1e-6;
}

/* Per-GPU widths of one layer's four GEMMs (k, n) and the LM head's. */
static void widths(const pkv_model *m, double kn[5][2]) {
    const double tp = m->tp, d = m->head_dim, h = m->hidden;
    kn[0][0] = h, kn[0][1] = (m->hq + 2.0 * m->hkv) / tp * d; /* QKV */
    kn[1][0] = m->hq / tp * d, kn[1][1] = h;                  /* O */
    kn[2][0] = h, kn[2][1] = 2.0 * m->inter / tp;             /* gate and up */
    kn[3][0] = m->inter / tp, kn[3][1] = h;                   /* down */
    kn[4][0] = h, kn[4][1] = m->vocab / tp;                   /* LM head */
}

/* Small kernels: per layer RoPE with the K/V append and SiLU-times-up, and over
 * PKVK_NORM_FUSED_ROWS token rows the two norms' 1 / rms (kernels/pkvk_model.h: the
 * norms are folded into the GEMMs after them); after the last layer the embedding
 * gather, the final norm, the gather of the rows that sample and the argmax. */
enum { SMALL_FINAL = 4 };

/* One GEMM's FLOPs, weights and activations into out, its time returned. */
static double gemm(const pkv_calib *c, double rows, double k, double n, double times,
                   pkv_dense_cost *out) {
    out->flops += times * 2 * rows * k * n;
    out->weight_bytes += times * 2 * k * n;
    out->act_bytes += times * 2 * rows * (k + n);
    out->launches += (int32_t)times;
    return times * pkv_gemm_time(c, rows, k, n);
}

/* One expert's two GEMMs (gate and up, then down, `w` wide) over `rows` tokens, without
 * the grouped launch's fixed cost, at the grouped GEMMs' measured rate for their rows
 * (moe_gemm_tflops_at), else their share of the dense GEMMs' (moe_gemm_share); `share`
 * experts' FLOPs, weights and activations into out (a fraction: the expected spread, or one
 * GPU's share of an expert-parallel one). */
static double expert_gemms(const pkv_calib *c, double rows, double share, double h, double w,
                           pkv_dense_cost *out) {
    out->flops += share * 2 * rows * 3 * h * w;
    out->weight_bytes += share * 2 * 3 * h * w;
    out->act_bytes += share * 2 * rows * (3 * h + 3 * w);
    const double tflops = c->moe_at.n ? pkv_rates_at(&c->moe_at, rows, 0)
                                      : pkv_calib_gemm_tflops(c, rows) *
                                            (c->moe_gemm_share > 0 ? c->moe_gemm_share : 1);
    return gemm_roof(c, rows, h, 2 * w, tflops) + gemm_roof(c, rows, w, h, tflops);
}

/* One MoE layer's MLP over `tokens` tokens: the router's GEMM, the shared experts',
 * the experts' two grouped GEMMs (gate and up, then down) over their tokens (MoE layer
 * l's draw of `moe`: the routing a measuring backend ran for this step where it kept it,
 * else a new draw; or, without `moe`, the tokens spread evenly over `active` experts, the
 * expected count where 0), and the top-k, the permutation of the tokens to their experts and
 * the weighted combine (small kernels streaming k copies). Expert parallel, each GPU runs its
 * whole experts and the layer waits for the busiest GPU (its FLOPs and bytes counted as a
 * GPU's mean share). */
static void moe_layer(const pkv_model *m, const pkv_calib *c, double tokens, pkv_moe *moe, int l,
                      double active, pkv_dense_cost *out) {
    const int ep = m->expert_parallel ? m->tp : 1;
    const double h = m->hidden, E = m->experts, k = m->experts_per_token,
                 w = (double)m->expert_inter / (m->tp / ep);
    out->t_gemm += gemm(c, tokens, h, E, 1, out);
    if (m->shared_experts) {
        const double sw = (double)m->shared_experts * m->expert_inter / m->tp;
        out->t_gemm += gemm(c, tokens, h, 2 * sw, 1, out) + gemm(c, tokens, sw, h, 1, out);
    }
    double t = 0, gpu[PKV_MOE_MAX_EP] = {0};
    if (moe) {
        active = 0;
        const int64_t real = moe->real_tokens > 0 && moe->real_tokens < (int64_t)tokens
                                 ? moe->real_tokens
                                 : (int64_t)tokens;
        pkv_moe_draw_layer(moe, l, real, (int64_t)tokens - real);
        for (int e = 0; e < m->experts; e++) {
            const double n = moe->counts[e];
            if (n <= 0) continue;
            active += 1;
            if (n > out->expert_tokens_max) out->expert_tokens_max = n;
            gpu[moe->place[e] * ep / m->experts] += expert_gemms(c, n, 1.0 / ep, h, w, out);
        }
        for (int g = 0; g < ep; g++) t = t > gpu[g] ? t : gpu[g];
    } else {
        if (active <= 0) active = E * (1 - pow(1 - k / E, tokens));
        const double n = tokens * k / active;
        if (n > out->expert_tokens_max) out->expert_tokens_max = n;
        t = active / ep * expert_gemms(c, n, active / ep, h, w, out);
    }
    /* the two grouped calls' fixed cost: cuBLAS's grouped GEMM's, launched eagerly, where
     * the step is not replayed from a CUDA graph (an engine's captured MoE kernels are
     * launches as the dense GEMMs') */
    const double grouped_us = moe && moe->replayed ? c->gemm_us
                              : c->moe_gemm_us > 0 ? c->moe_gemm_us
                                                   : c->gemm_us;
    out->t_gemm += t + 2 * grouped_us * 1e-6;
    out->launches += 2;
    out->experts_active += active;
    out->t_small += 3 * c->small_kernel_us * 1e-6 + (2 + 2 * k) * 2 * h * tokens / c->beta;
    out->launches += 3;
}

void pkv_model_dense_cost(const pkv_model *m, const pkv_calib *c, int64_t tokens, int64_t heads,
                          pkv_moe *moe, pkv_dense_cost *out) {
    *out = (pkv_dense_cost){0};
    if (!pkv_model_kind_of(m)->weights || tokens <= 0) return;
    double kn[5][2];
    widths(m, kn);
    const int moe_layers = pkv_model_moe_layers(m);
    for (int g = 0; g < 5; g++) {
        double rows = g == 4 ? (double)heads : (double)tokens, times = g == 4 ? 1
                                                                       : g >= 2
                                                                           ? m->layers - moe_layers
                                                                           : m->layers;
        if (rows > 0 && times > 0) out->t_gemm += gemm(c, rows, kn[g][0], kn[g][1], times, out);
    }
    for (int l = 0; l < moe_layers; l++) moe_layer(m, c, (double)tokens, moe, l, 0, out);
    if (moe_layers) out->experts_active /= moe_layers;
    if (moe) pkv_moe_forget(moe); /* a measuring backend's forward is this step's alone */
    /* The small kernels stream their activations: a fixed cost plus bytes / beta
     * (RoPE and SiLU read the residual rows for their norm, the norm kernels read
     * them, where they run). */
    const int per_layer = tokens > PKVK_NORM_FUSED_ROWS ? 4 : 2;
    double row_bytes = 2.0 * m->hidden * (double)tokens;
    out->t_small += m->layers * (per_layer * c->small_kernel_us * 1e-6 + 4 * row_bytes / c->beta) +
                    SMALL_FINAL * c->small_kernel_us * 1e-6 + 3 * row_bytes / c->beta;
    out->launches += m->layers * per_layer + SMALL_FINAL;
    if (m->tp > 1)
        out->t_allreduce = 2.0 * m->layers *
                           (c->allreduce_us * 1e-6 +
                            2.0 * (m->tp - 1) / m->tp * row_bytes / (c->allreduce_gbps * 1e9));
    out->t_predicted = out->t_gemm + out->t_small + out->t_allreduce;
}

double pkv_model_moe_layer_time(const pkv_model *m, const pkv_calib *c, double tokens,
                                double active) {
    pkv_dense_cost o = {0};
    moe_layer(m, c, tokens, NULL, 0, active, &o);
    return o.t_gemm + o.t_small + c->small_kernel_us * 1e-6;
}

void pkv_model_moe_fit(const pkv_model *m, const pkv_calib *c, const int *rows,
                       const double *active, const double *seconds, int n, double *us,
                       double *share, pkv_rates *at) {
    pkv_calib f = *c;
    f.moe_gemm_share = 1, f.moe_gemm_us = f.gemm_us; /* the grouped calls as dense GEMMs */
    f.moe_at.n = 0;
    double extra = 0;
    int points = 0, w = -1;
    for (int i = 0; i < n; i++) {
        if (w < 0 || rows[i] > rows[w]) w = i;
        if (rows[i] > 64) continue; /* decode widths: the experts' weights streamed */
        extra += (seconds[i] - pkv_model_moe_layer_time(m, &f, rows[i], active[i])) / 2, points++;
    }
    *us = c->gemm_us + (points && extra > 0 ? extra / points * 1e6 : 0);
    f.moe_gemm_us = *us;
    /* each wider width's rate at its rows an expert: the rate alone in the table (held at
     * every width) that prices it as measured; its time falls as the rate rises */
    at->n = 0;
    for (int i = 0; i < n; i++) {
        const double per = rows[i] * (double)m->experts_per_token / active[i];
        if (rows[i] <= 64 || !(active[i] > 0) || at->n == PKV_GEMM_RATES) continue;
        if (at->n && per <= at->rows[at->n - 1]) continue; /* widths ascending, as measured */
        pkv_calib g = f;
        double lo = 0.01, hi = 1e5;
        g.moe_at.n = 1, g.moe_at.rows[0] = per;
        for (int it = 0; it < 80; it++) {
            g.moe_at.tflops[0] = sqrt(lo * hi);
            if (pkv_model_moe_layer_time(m, &g, rows[i], active[i]) > seconds[i])
                lo = g.moe_at.tflops[0];
            else
                hi = g.moe_at.tflops[0];
        }
        at->rows[at->n] = per, at->tflops[at->n++] = sqrt(lo * hi);
    }
    /* the share that prices the widest layer as measured: its time falls as the share
     * rises, so bisect it in (0, 1] (none: the dense GEMMs' rate is not too fast) */
    *share = 0;
    if (w < 0 || pkv_model_moe_layer_time(m, &f, rows[w], active[w]) >= seconds[w]) return;
    double lo = 0, hi = 1;
    for (int it = 0; it < 50; it++) {
        f.moe_gemm_share = (lo + hi) / 2;
        if (pkv_model_moe_layer_time(m, &f, rows[w], active[w]) > seconds[w])
            lo = f.moe_gemm_share;
        else
            hi = f.moe_gemm_share;
    }
    *share = (lo + hi) / 2;
}

/* The causal triangle of a piece over the rectangle of its earlier keys, per head. */
static double piece_scores(double len, double start) {
    return len * start + len * (len + 1) / 2;
}

double pkv_model_prefill_scores(const pkv_model *m, const int32_t *lens, const int32_t *starts,
                                int32_t n) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += piece_scores(lens[i], starts ? starts[i] : 0);
    return (double)m->layers * m->hq / m->tp * s;
}

double pkv_model_prefill_attn_time(const pkv_model *m, const pkv_calib *c, const int32_t *lens,
                                   const int32_t *starts, int32_t n) {
    double flops = 0, bytes = 0;
    const double hq = (double)m->hq / m->tp, d = m->head_dim;
    for (int32_t i = 0; i < n; i++) {
        const double l = lens[i], q0 = starts ? starts[i] : 0, scores = hq * piece_scores(l, q0);
        flops += 4.0 * d * scores; /* QK^T and PV */
        bytes += scores * (q0 + l <= PKVK_SOFTMAX_SMEM_KEYS ? 12 : 20);
    }
    if (m->prefill_attn == PKVK_PREFILL_FLASHINFER)
        return m->layers * flops /
               ((c->prefill_attn_tflops > 0 ? c->prefill_attn_tflops : c->gemm_tflops) * 1e12);
    return m->layers * (flops / (c->gemm_tflops * 1e12) + bytes / c->beta);
}

double pkv_model_weight_bytes(const pkv_model *m) {
    double kn[5][2];
    widths(m, kn);
    double b = 2.0 * m->vocab / m->tp * m->hidden /* embedding */ + 2 * kn[4][0] * kn[4][1];
    const int moe = pkv_model_moe_layers(m);
    for (int g = 0; g < 4; g++)
        b += (g >= 2 ? m->layers - moe : m->layers) * 2 * kn[g][0] * kn[g][1];
    /* a MoE layer: the router, every expert and the shared ones */
    const double w = (double)m->expert_inter / m->tp;
    b += moe * 2.0 * m->hidden * (m->experts + 3.0 * (m->experts + m->shared_experts) * w);
    return b + m->layers * 2.0 * 2 * m->hidden; /* the norms' weights */
}

double pkv_model_page_bytes(const pkv_model *m) {
    pkvk_shape s = pkv_model_attn_shape(m);
    /* FP8: the page's K and V scale of each KV head beside its bytes */
    const double scales = s.kv_dtype == PKVK_FP8_E4M3 ? 2.0 * s.hkv * sizeof(float) : 0;
    return m->layers *
           (2.0 /* K, V */ * s.hkv * s.page_size * s.d * pkvk_dtype_bytes(s.kv_dtype) + scales);
}

pkv_model_figures pkv_model_figures_of(const pkv_model *m) {
    pkv_calib none; /* FLOPs are counts: any calibration's */
    pkv_calib_defaults(&none);
    pkv_dense_cost dc;
    pkv_model_dense_cost(m, &none, 1, 1, NULL, &dc);
    return (pkv_model_figures){pkv_model_weight_bytes(m), pkv_model_page_bytes(m) / m->page_size,
                               dc.flops};
}

/* A mixture of experts' keys: all of them or experts 0 (a dense model). */
static int check_experts(const pkv_model *m, pkv_err *e) {
    if (!m->experts) {
        if (m->experts_per_token || m->expert_inter || m->shared_experts || m->dense_layers ||
            m->expert_parallel)
            return pkv_fail(e, "model.experts: experts_per_token, expert_intermediate, "
                               "shared_experts, dense_layers and expert_parallel describe a "
                               "mixture of experts; give model.experts too (0: a dense model)");
        return 0;
    }
    if (m->experts_per_token < 1 || m->experts_per_token > m->experts)
        return pkv_fail(e, "model.experts_per_token: %d must be 1 to model.experts (%d)",
                        m->experts_per_token, m->experts);
    if (m->expert_inter <= 0)
        return pkv_fail(e, "model.expert_intermediate: a mixture of experts needs each expert's "
                           "width (its config's moe_intermediate_size)");
    if (m->expert_parallel && (m->tp < 2 || m->experts % m->tp))
        return pkv_fail(e,
                        "model.expert_parallel: spreads the experts over the tensor-parallel "
                        "GPUs; model.tensor_parallel (%d) must be 2 or more and divide "
                        "model.experts (%d)",
                        m->tp, m->experts);
    if (!m->expert_parallel && m->expert_inter % m->tp)
        return pkv_fail(e, "model.tensor_parallel: %d does not divide expert_intermediate (%d)",
                        m->tp, m->expert_inter);
    if (m->dense_layers >= m->layers)
        return pkv_fail(e, "model.dense_layers: %d leaves no MoE layer of %d", m->dense_layers,
                        m->layers);
    return 0;
}

int pkv_model_check(const pkv_model *m, pkv_err *e) {
    if (m->hq % m->hkv)
        return pkv_fail(e, "model.hq: %d is not a multiple of model.hkv (%d)", m->hq, m->hkv);
    if (m->head_dim % 8)
        return pkv_fail(e, "model.head_dim: must be a multiple of 8 (got %d)", m->head_dim);
    if (m->hq % m->tp || m->hkv % m->tp)
        return pkv_fail(e, "model.tensor_parallel: %d does not divide hq (%d) and hkv (%d)", m->tp,
                        m->hq, m->hkv);
    if (!pkv_model_kind_of(m)->weights) {
        if (m->layers != 1)
            return pkv_fail(e, "model.layers: a model without a hidden size is the study's "
                               "single attention layer (layers 1)");
        return 0;
    }
    if ((m->inter <= 0 && (!m->experts || m->dense_layers)) || m->vocab <= 0)
        return pkv_fail(e, "model: a model with a hidden size needs intermediate (the dense "
                           "layers' MLP) and vocab");
    if (m->inter % m->tp || m->vocab % m->tp)
        return pkv_fail(e,
                        "model.tensor_parallel: %d does not divide intermediate (%d) and vocab "
                        "(%d)",
                        m->tp, m->inter, m->vocab);
    return check_experts(m, e);
}
