/* Mixture of experts (engine/moe.h, engine/model.c): the draws conserve tokens, give a
 * token distinct experts, spread as their law says; the cost reads the chosen experts'
 * weights and no others; the presets weigh what their configs say. */
#include "check.h"
#include "pkvk.h"
#include "model.h"
#include "moe.h"
#include "config.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every draw: tokens x k in all, none above the tokens. */
static void conservation(pkv_expert_law law) {
    pkv_moe m;
    CHECK(pkv_moe_init(&m, 128, 8, law, 1.2, 5) == 0, "init");
    const int64_t sizes[] = {1, 3, 64, 511, 512, 2000, 8192};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int rep = 0; rep < 20; rep++) {
            pkv_moe_draw(&m, sizes[i]);
            double sum = 0, most = 0;
            int active = 0;
            for (int e = 0; e < 128; e++) {
                sum += m.counts[e];
                most = fmax(most, m.counts[e]);
                active += m.counts[e] > 0;
            }
            CHECK(sum == 8.0 * (double)sizes[i], "law %d, %lld tokens: %g picks", (int)law,
                  (long long)sizes[i], sum);
            CHECK(most <= (double)sizes[i], "law %d: an expert got %g of %lld tokens", (int)law,
                  most, (long long)sizes[i]);
            /* one token: its k experts are distinct */
            if (sizes[i] == 1) CHECK(active == 8, "one token on %d experts", active);
        }
    }
    pkv_moe_free(&m);
}

/* Uniform: each expert's mean over draws near tokens x k / E, the spread a binomial's
 * (exact draws below PKV_MOE_EXACT_DRAWS picks, the multinomial above). */
static void uniform_spread(int64_t tokens) {
    enum { E = 64, K = 4, DRAWS = 400 };
    pkv_moe m;
    CHECK(pkv_moe_init(&m, E, K, PKV_EXPERTS_UNIFORM, 0, 11) == 0, "init");
    double sum[E] = {0}, sq = 0;
    for (int d = 0; d < DRAWS; d++) {
        pkv_moe_draw(&m, tokens);
        for (int e = 0; e < E; e++) sum[e] += m.counts[e], sq += m.counts[e] * m.counts[e];
    }
    const double p = (double)K / E, mean = (double)tokens * p, var = (double)tokens * p * (1 - p);
    double worst = 0, all = 0;
    for (int e = 0; e < E; e++) {
        worst = fmax(worst, fabs(sum[e] / DRAWS - mean));
        all += sum[e];
    }
    /* the mean of 400 draws: 6 of its standard deviations */
    CHECK(worst <= 6 * sqrt(var / DRAWS), "%lld tokens: an expert's mean %g off %g",
          (long long)tokens, worst, mean);
    const double v =
        sq / ((double)DRAWS * E) - (all / ((double)DRAWS * E)) * (all / ((double)DRAWS * E));
    CHECK(v > 0.7 * var && v < 1.3 * var, "%lld tokens: variance %g, a binomial's %g",
          (long long)tokens, v, var);
    pkv_moe_free(&m);
}

/* Zipf: the first expert busier than the last, more so as the exponent grows; 0 is
 * uniform. */
static void zipf_favours_the_first_experts(void) {
    double first[3], last[3];
    const double exps[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++) {
        pkv_moe m;
        CHECK(pkv_moe_init(&m, 32, 2, PKV_EXPERTS_ZIPF, exps[i], 3) == 0, "init");
        first[i] = last[i] = 0;
        for (int d = 0; d < 200; d++) {
            pkv_moe_draw(&m, 1000);
            first[i] += m.counts[0], last[i] += m.counts[31];
        }
        pkv_moe_free(&m);
    }
    CHECK(fabs(first[0] / last[0] - 1) < 0.1, "exponent 0: first %g, last %g", first[0], last[0]);
    CHECK(first[1] / last[1] > 5 && first[2] / last[2] > first[1] / last[1], "skew: %g, %g",
          first[1] / last[1], first[2] / last[2]);
}

/* A preset on a GPU's shipped calibration (cal: loaded where not NULL). */
static pkv_model preset_on(const char *name, const char *gpu, pkv_calib *cal) {
    pkv_config cfg;
    char json[256];
    snprintf(json, sizeof json,
             "{\"model\": \"%s\", \"workload\": {\"preset\": \"uniform\"}, \"route\": {\"gpu\": "
             "\"%s\"}}",
             name, gpu);
    pkv_err e;
    pkv_model m = {0};
    if (pkv_config_parse(&cfg, strdup(json), PKV_SOURCE_DIR "/experiments/moe.json", &e)) {
        CHECK(0, "%s: %s", name, e.msg);
        return m;
    }
    m = cfg.model;
    if (cal)
        CHECK(pkv_calib_load(cal, cfg.calibration, pkv_model_calib_section(&m), &e) == 0,
              "calibration: %s", e.msg);
    pkv_config_free(&cfg);
    return m;
}

static pkv_model preset(const char *name, pkv_calib *cal) {
    return preset_on(name, "h200", cal);
}

/* Weights: the presets' totals (Mixtral-8x7B 46.7B, Qwen3-30B-A3B 30.5B parameters in
 * 16 bits); a decode of one token reads k experts a layer and no more. */
static void cost_reads_the_chosen_experts_only(void) {
    pkv_calib cal;
    pkv_model mx = preset("mixtral-8x7b", &cal);
    if (!mx.experts) return;
    CHECK(fabs(pkv_model_weight_bytes(&mx) / 2 / 46.7e9 - 1) < 0.01, "mixtral %g parameters",
          pkv_model_weight_bytes(&mx) / 2);
    pkv_model qw = preset("qwen3-30b-a3b", NULL);
    CHECK(fabs(pkv_model_weight_bytes(&qw) / 2 / 30.5e9 - 1) < 0.01, "qwen3 %g parameters",
          pkv_model_weight_bytes(&qw) / 2);
    pkv_moe m;
    CHECK(pkv_moe_init(&m, mx.experts, mx.experts_per_token, PKV_EXPERTS_UNIFORM, 0, 1) == 0,
          "init");
    pkv_dense_cost one, drawn, big;
    pkv_model_dense_cost(&mx, &cal, 1, 1, NULL, &one);
    pkv_model_dense_cost(&mx, &cal, 1, 1, &m, &drawn);
    /* the same model with its experts as one dense MLP of k experts' width */
    pkv_model dense = mx;
    dense.experts = dense.experts_per_token = dense.expert_inter = 0;
    dense.inter = mx.experts_per_token * mx.expert_inter;
    pkv_dense_cost d;
    pkv_model_dense_cost(&dense, &cal, 1, 1, NULL, &d);
    const double router = mx.layers * 2.0 * mx.hidden * mx.experts;
    CHECK(one.experts_active == 2 && drawn.experts_active == 2, "one token: %g, %g experts",
          one.experts_active, drawn.experts_active);
    CHECK(fabs(one.weight_bytes - (d.weight_bytes + router)) < 1 &&
              fabs(drawn.weight_bytes - one.weight_bytes) < 1,
          "one token reads %g, %g bytes; two experts' and the router's %g", one.weight_bytes,
          drawn.weight_bytes, d.weight_bytes + router);
    CHECK(fabs(one.flops - (d.flops + router)) < 1, "FLOPs %g against %g", one.flops,
          d.flops + router); /* a token's 2 FLOPs a router weight */
    /* 8K prompt tokens: every expert read, the FLOPs the active ones' */
    pkv_model_dense_cost(&mx, &cal, 8192, 1, &m, &big);
    CHECK(big.experts_active == 8 && big.expert_tokens_max <= 8192,
          "8K tokens: %g experts, %g most", big.experts_active, big.expert_tokens_max);
    CHECK(big.t_predicted > one.t_predicted * 20, "8K tokens %g s, one %g s", big.t_predicted,
          one.t_predicted);
    pkv_moe_free(&m);
    pkv_calib_free(&cal);
    /* dense_layers: those layers' MLP is `intermediate` wide */
    pkv_model half = mx;
    half.dense_layers = 16, half.inter = 14336;
    CHECK(fabs(pkv_model_weight_bytes(&mx) - pkv_model_weight_bytes(&half) -
               16 * (2.0 * 3 * 4096 * 14336 * 7 + 2.0 * 4096 * 8)) < 1,
          "dense layers' weights");
}

/* Expert parallel over 4 GPUs: the same bytes a GPU holds as sliced experts; under a law
 * that sends most tokens to a few experts the layer waits for their GPU, slower than the
 * sliced layer (every GPU a quarter of each expert) on the same draws; uniform, within 15%
 * (whole experts: wider GEMMs, the busiest GPU a little above the mean). */
static void expert_parallel_waits_for_the_busiest_gpu(void) {
    pkv_calib cal;
    pkv_model tp = preset("qwen3-30b-a3b", &cal);
    if (!tp.experts) return;
    tp.tp = 4;
    pkv_model ep = tp;
    ep.expert_parallel = true;
    CHECK(fabs(pkv_model_weight_bytes(&tp) - pkv_model_weight_bytes(&ep)) < 1, "weights %g, %g",
          pkv_model_weight_bytes(&tp), pkv_model_weight_bytes(&ep));
    for (int skewed = 0; skewed < 2; skewed++) {
        pkv_moe a, b;
        const pkv_expert_law law = skewed ? PKV_EXPERTS_ZIPF : PKV_EXPERTS_UNIFORM;
        CHECK(pkv_moe_init(&a, 128, 8, law, 2.5, 9) == 0 &&
                  pkv_moe_init(&b, 128, 8, law, 2.5, 9) == 0,
              "init");
        pkv_dense_cost ct, ce;
        pkv_model_dense_cost(&tp, &cal, 4096, 1, &a, &ct);
        pkv_model_dense_cost(&ep, &cal, 4096, 1, &b, &ce);
        CHECK(ct.experts_active == ce.experts_active, "the same draws: %g, %g experts",
              ct.experts_active, ce.experts_active);
        if (skewed)
            CHECK(ce.t_gemm > 1.1 * ct.t_gemm, "skewed: expert parallel %g s, sliced %g s",
                  ce.t_gemm, ct.t_gemm);
        else
            CHECK(fabs(ce.t_gemm / ct.t_gemm - 1) < 0.15,
                  "uniform: expert parallel %g s, sliced %g s", ce.t_gemm, ct.t_gemm);
        pkv_moe_free(&a);
        pkv_moe_free(&b);
    }
    pkv_calib_free(&cal);
}

/* A CUDA graph's padding rows are copies of one token: 4 requests' tokens padded to 64
 * rows choose at most 5 tokens' experts a layer (40 of Qwen3's 128), where 64 tokens of
 * requests choose nearly all; the picks still sum to rows x k. */
static void padding_rows_choose_one_tokens_experts(void) {
    pkv_calib cal;
    pkv_model qw = preset("qwen3-30b-a3b", &cal);
    if (!qw.experts) return;
    pkv_moe m;
    CHECK(pkv_moe_init(&m, 128, 8, PKV_EXPERTS_UNIFORM, 0, 3) == 0, "init");
    pkv_dense_cost padded, full;
    m.real_tokens = 4;
    pkv_model_dense_cost(&qw, &cal, 64, 1, &m, &padded);
    double picks = 0;
    for (int e = 0; e < 128; e++) picks += m.counts[e];
    m.real_tokens = 0;
    pkv_model_dense_cost(&qw, &cal, 64, 1, &m, &full);
    CHECK(padded.experts_active >= 8 && padded.experts_active <= 40 && picks == 64 * 8,
          "4 tokens and 60 padding rows: %g experts a layer, %g picks", padded.experts_active,
          picks);
    CHECK(full.experts_active > 100 && full.weight_bytes > 2 * padded.weight_bytes,
          "64 tokens: %g experts a layer, %g bytes against %g padded", full.experts_active,
          full.weight_bytes, padded.weight_bytes);
    pkv_moe_free(&m);
    pkv_calib_free(&cal);
}

/* The cpu backend's MoE MLP (kernels/pkvk_cpu_model.c) against a plain one: every expert
 * computed on the row, then the k of the largest router logits kept, weighted by their
 * softmax; fresh random rows and weights, k of 1, 2 and 8. */
static int by_logit_desc(const void *a, const void *b) {
    const double *x = a, *y = b; /* (logit, index) pairs */
    return x[0] != y[0] ? (x[0] < y[0] ? 1 : -1) : (x[1] > y[1]) - (x[1] < y[1]);
}

static void cpu_moe_matches_every_expert_computed(void) {
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 41);
    enum { H = 48, E = 16, W = 24 };
    const int ks[] = {1, 2, 8};
    static float router[H * E], gu[E][H * 2 * W], down[E][W * H], xn[H], x[H];
    static float scratch[E + 3 * W];
    float *gup[E], *dp[E];
    for (int i = 0; i < H * E; i++) router[i] = (float)gsl_ran_gaussian(r, 0.3);
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < H * 2 * W; i++) gu[e][i] = (float)gsl_ran_gaussian(r, 0.2);
        for (int i = 0; i < W * H; i++) down[e][i] = (float)gsl_ran_gaussian(r, 0.2);
        gup[e] = gu[e], dp[e] = down[e];
    }
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
        for (int rep = 0; rep < 10; rep++) {
            double ref[H], y[E][H], pairs[E][2], worst = 0, scale = 0;
            for (int i = 0; i < H; i++)
                xn[i] = (float)gsl_ran_gaussian(r, 1.0), x[i] = (float)gsl_ran_gaussian(r, 1.0);
            for (int e = 0; e < E; e++) { /* every expert, and its logit */
                double g[2 * W], l = 0;
                for (int j = 0; j < 2 * W; j++) {
                    g[j] = 0;
                    for (int i = 0; i < H; i++) g[j] += (double)xn[i] * gu[e][i * 2 * W + j];
                }
                for (int o = 0; o < H; o++) {
                    y[e][o] = 0;
                    for (int j = 0; j < W; j++)
                        y[e][o] += g[j] / (1 + exp(-g[j])) * g[W + j] * down[e][j * H + o];
                }
                for (int i = 0; i < H; i++) l += (double)xn[i] * router[i * E + e];
                pairs[e][0] = l, pairs[e][1] = e;
            }
            qsort(pairs, E, sizeof pairs[0], by_logit_desc);
            /* odd repeats: the experts given, the k of lowest logits (a routing's draw) */
            const int given = rep % 2, k = ks[c];
            int chosen[E];
            double(*pick)[2] = given ? pairs + E - k : pairs, z = 0;
            for (int j = 0; j < k; j++) chosen[j] = (int)pick[j][1];
            for (int j = 0; j < k; j++) z += exp(pick[j][0] - pick[0][0]);
            for (int o = 0; o < H; o++) {
                ref[o] = x[o];
                for (int j = 0; j < k; j++)
                    ref[o] += exp(pick[j][0] - pick[0][0]) / z * y[(int)pick[j][1]][o];
            }
            const pkvk_moe_shape s = {E, k, W, 0};
            pkvk_cpu_moe(xn, H, &s, router, gup, dp, given ? chosen : NULL, x, scratch);
            for (int o = 0; o < H; o++)
                worst = fmax(worst, fabs(x[o] - ref[o])), scale = fmax(scale, fabs(ref[o]));
            CHECK(worst <= 1e-4 * scale, "k %d: max |error| %g against %g", ks[c], worst, scale);
        }
    }
    gsl_rng_free(r);
}

/* A measuring backend's routing (pkv_moe_route through pkvk_moe_routing): at every size
 * (the exact draw and the multinomial one) and law, each token's k slots name k distinct
 * experts and each expert's slots are its count; a routing over `tokens` on an expert or
 * of another sum is refused. */
static int bad_route(void *ctx, int l, int tokens, int32_t *counts) {
    const pkvk_moe_shape *e = ctx;
    memset(counts, 0, sizeof(int32_t) * (size_t)e->experts);
    counts[0] = l ? tokens + 1 : tokens; /* l 1: too many on one expert; 0: too few slots */
    counts[1] = l ? tokens * e->k - tokens - 1 : 0;
    return 0;
}

static void routing_gives_each_token_k_distinct_experts(void) {
    enum { E = 64, K = 8 };
    const pkvk_moe_shape s = {E, K, 16, 0};
    int32_t counts[E], off[E + 1];
    for (int law = 0; law < 2; law++) {
        pkv_moe m;
        CHECK(pkv_moe_init(&m, E, K, (pkv_expert_law)law, 1.2, 7) == 0, "init");
        const int sizes[] = {1, 3, 50, 511, 2000};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            const int T = sizes[i];
            CHECK(pkvk_moe_routing(&s, pkv_moe_route, &m, 0, T, counts, off) == 0,
                  "law %d, %d tokens: refused", law, T);
            int seen[E], per[E] = {0};
            for (int t = 0; t < T; t++) {
                memset(seen, 0, sizeof seen);
                for (int j = 0; j < K; j++) {
                    const int x = pkvk_moe_slot_expert(off, E, t + j * T);
                    CHECK(x >= 0 && x < E && !seen[x],
                          "law %d, %d tokens: token %d has expert "
                          "%d twice",
                          law, T, t, x);
                    seen[x] = 1, per[x]++;
                }
            }
            for (int x = 0; x < E; x++)
                CHECK(per[x] == counts[x], "law %d, %d tokens: expert %d has %d slots, count %d",
                      law, T, x, per[x], counts[x]);
        }
        pkv_moe_free(&m);
    }
    CHECK(pkvk_moe_routing(&s, bad_route, (void *)&s, 1, 10, counts, off) == PKVK_ERR_INVALID &&
              pkvk_moe_routing(&s, bad_route, (void *)&s, 0, 10, counts, off) == PKVK_ERR_INVALID,
          "a routing over tokens on an expert, or of too few slots, is refused");
}

/* A measuring backend's forward kept (pkv_moe_keep): the step's cost takes each MoE layer's
 * routing the backend ran, for those tokens only, once; a new forward (a layer routed again)
 * replaces it; the padding rows still draw one token's experts on top. */
static void cost_reads_the_routing_the_backend_ran(void) {
    enum { E = 16, K = 2, LAYERS = 3 };
    pkv_moe m;
    CHECK(pkv_moe_init(&m, E, K, PKV_EXPERTS_ZIPF, 1.2, 11) == 0 && pkv_moe_keep(&m, LAYERS) == 0,
          "init");
    int32_t ran[LAYERS][E];
    for (int pass = 0; pass < 2; pass++) /* the second forward replaces the first */
        for (int l = 0; l < LAYERS; l++) pkv_moe_route(&m, 4 + l, 10, ran[l]);
    int same = 1;
    for (int l = 0; l < LAYERS; l++) {
        pkv_moe_draw_layer(&m, l, 10, 0);
        for (int e = 0; e < E; e++) same &= m.counts[e] == ran[l][e];
    }
    CHECK(same, "the cost's draws are not the routing the last forward ran");
    pkv_moe_draw_layer(&m, 0, 10, 3); /* three padding rows: one token's k experts, thrice */
    double extra = 0;
    for (int e = 0; e < E; e++) extra += m.counts[e] - ran[0][e];
    CHECK(extra == 3.0 * K, "padding on the kept routing adds %g slots, not %d", extra, 3 * K);
    pkv_moe_draw_layer(&m, 0, 11, 0); /* other tokens: a draw of its own */
    double sum = 0;
    for (int e = 0; e < E; e++) sum += m.counts[e];
    CHECK(sum == 11.0 * K, "a draw of 11 tokens has %g slots", sum);
    pkv_moe_forget(&m);
    pkv_moe_draw_layer(&m, 1, 10, 0);
    same = 1;
    for (int e = 0; e < E; e++) same &= m.counts[e] == ran[1][e];
    CHECK(!same, "a forgotten forward was read again");
    pkv_moe_free(&m);
}

static void draws_conserve_tokens_uniform(void) {
    conservation(PKV_EXPERTS_UNIFORM);
}

static void draws_conserve_tokens_zipf(void) {
    conservation(PKV_EXPERTS_ZIPF);
}

static void uniform_spreads_as_a_binomial(void) {
    uniform_spread(100);   /* exact */
    uniform_spread(20000); /* multinomial */
}

/* The grouped expert GEMMs' constants (moe_gemm_us, moe_gemm_share, moe_gemm_tflops_at)
 * fitted from one MoE layer timed alone: those that made a table are recovered from it; the
 * H100's measured table (Qwen3-30B-A3B at 1-8192 rows, bench/RESULTS.md "The cuda backend
 * runs a mixture's routed experts" and "A mixture's grouped GEMMs past 4K rows") gives
 * h100-sxm.json's, which price that layer within 5% at every width (the dense GEMMs'
 * constants: 33% low at one row, 48% at 4096; the share alone, fitted at the widest, 1.5x
 * at 2048 rows); a step replayed from a CUDA graph pays its grouped calls as dense GEMMs. */
static void grouped_gemm_constants_are_fitted(void) {
    pkv_calib cal;
    pkv_model qw = preset_on("qwen3-30b-a3b", "h100-sxm", &cal);
    if (!qw.experts) return;
    enum { N = 10 };
    /* 2048, 6144 and 8192 rows on another H100 (2026-12-07, 1024 and 4096 there within 2.5%
     * of these) */
    static const int rows[N] = {1, 4, 16, 64, 256, 1024, 2048, 4096, 6144, 8192};
    static const double active[N] = {8, 28, 81, 127, 128, 128, 128, 128, 128, 128};
    static const double measured_ms[N] = {0.0835, 0.1487, 0.3106, 0.4559, 0.4779,
                                          0.5615, 0.7802, 1.3396, 1.9511, 2.6022};
    double t[N], us, share;
    pkv_rates at;
    pkv_calib made = cal;
    made.moe_gemm_us = 20, made.moe_gemm_share = 0.4, made.moe_at.n = 0;
    for (int i = 0; i < N; i++) t[i] = pkv_model_moe_layer_time(&qw, &made, rows[i], active[i]);
    pkv_model_moe_fit(&qw, &cal, rows, active, t, N, &us, &share, &at);
    CHECK(fabs(us - 20) < 1e-6 && fabs(share - 0.4) < 1e-6, "recovered %g us and share %g", us,
          share);
    /* a table of rates by rows an expert: each width above 64 rows priced as made (its rate
     * recovered where the FLOPs bound the time, not where the weights' bytes do) */
    made.moe_at = (pkv_rates){.n = 3, .rows = {16, 128, 512}, .tflops = {50, 230, 260}};
    for (int i = 0; i < N; i++) t[i] = pkv_model_moe_layer_time(&qw, &made, rows[i], active[i]);
    pkv_model_moe_fit(&qw, &cal, rows, active, t, N, &us, &share, &at);
    pkv_calib refit = made;
    refit.moe_gemm_us = us, refit.moe_at = at;
    CHECK(at.n == 6 && fabs(us - 20) < 1e-6, "%d rates for the 6 widths above 64 rows, %g us", at.n,
          us);
    for (int i = 0; i < N; i++) {
        const double r = pkv_model_moe_layer_time(&qw, &refit, rows[i], active[i]) / t[i];
        CHECK(fabs(r - 1) < 1e-6, "%d rows: the fitted table prices %.9fx the made", rows[i], r);
    }
    CHECK(fabs(at.tflops[at.n - 1] - 260) < 1e-6, "512 rows an expert: %g TFLOP/s, 260 made",
          at.tflops[at.n - 1]);
    for (int i = 0; i < N; i++) t[i] = measured_ms[i] * 1e-3;
    pkv_model_moe_fit(&qw, &cal, rows, active, t, N, &us, &share, &at);
    CHECK(fabs(us - cal.moe_gemm_us) < 0.1 && at.n == cal.moe_at.n,
          "the H100's table: %g us, %d rates; h100-sxm.json %g, %d", us, at.n, cal.moe_gemm_us,
          cal.moe_at.n);
    for (int i = 0; i < at.n && i < cal.moe_at.n; i++)
        CHECK(at.rows[i] == cal.moe_at.rows[i] &&
                  fabs(at.tflops[i] / cal.moe_at.tflops[i] - 1) < 0.01,
              "the H100's table at %g rows an expert: %g TFLOP/s, h100-sxm.json %g at %g",
              at.rows[i], at.tflops[i], cal.moe_at.tflops[i], cal.moe_at.rows[i]);
    pkv_calib dense = cal, shared = cal;
    dense.moe_gemm_us = dense.moe_gemm_share = 0, dense.moe_at.n = shared.moe_at.n = 0;
    for (int i = 0; i < N; i++) {
        const double fitted = pkv_model_moe_layer_time(&qw, &cal, rows[i], active[i]) / t[i],
                     plain = pkv_model_moe_layer_time(&qw, &dense, rows[i], active[i]) / t[i],
                     by_share = pkv_model_moe_layer_time(&qw, &shared, rows[i], active[i]) / t[i];
        CHECK(fabs(fitted - 1) < 0.05, "%d rows: priced %.3fx the measured layer", rows[i], fitted);
        if (i == 0 || rows[i] == 4096)
            CHECK(plain < 0.7, "%d rows: the dense constants %.3fx", rows[i], plain);
        if (rows[i] == 2048) CHECK(by_share > 1.4, "2048 rows: the share alone %.3fx", by_share);
    }
    pkv_moe a, b;
    CHECK(!pkv_moe_init(&a, qw.experts, qw.experts_per_token, PKV_EXPERTS_UNIFORM, 0, 5) &&
              !pkv_moe_init(&b, qw.experts, qw.experts_per_token, PKV_EXPERTS_UNIFORM, 0, 5),
          "init");
    pkv_dense_cost eager, replayed;
    b.replayed = true;
    pkv_model_dense_cost(&qw, &cal, 8, 8, &a, &eager);
    pkv_model_dense_cost(&qw, &cal, 8, 8, &b, &replayed);
    const double saved = 2.0 * pkv_model_moe_layers(&qw) * (cal.moe_gemm_us - cal.gemm_us) * 1e-6;
    CHECK(fabs(eager.t_predicted - replayed.t_predicted - saved) < 1e-9,
          "replayed from a graph: %g s less, %g expected", eager.t_predicted - replayed.t_predicted,
          saved);
    pkv_moe_free(&a);
    pkv_moe_free(&b);
    pkv_calib_free(&cal);
}

static const pkv_test_case cases[] = {
    PKV_CASE(draws_conserve_tokens_uniform),
    PKV_CASE(draws_conserve_tokens_zipf),
    PKV_CASE(uniform_spreads_as_a_binomial),
    PKV_CASE(zipf_favours_the_first_experts),
    PKV_CASE(cost_reads_the_chosen_experts_only),
    PKV_CASE(expert_parallel_waits_for_the_busiest_gpu),
    PKV_CASE(padding_rows_choose_one_tokens_experts),
    PKV_CASE(grouped_gemm_constants_are_fitted),
    PKV_CASE(cpu_moe_matches_every_expert_computed),
    PKV_CASE(routing_gives_each_token_k_distinct_experts),
    PKV_CASE(cost_reads_the_routing_the_backend_ran),
};
PKV_TEST_MAIN(cases)
