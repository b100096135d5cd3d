/* The full model's dense part on the GPU against a direct FP32 computation on the
 * CPU, on a tiny model (two layers, small widths) with fresh weights from a random
 * seed: a prefill of three prompts split over chunks (every layer's K/V pages and
 * the last prompt's logits), then a decode step through the reference route (the
 * step's logits), then chunked prefill: a fourth prompt's first chunk alone, its
 * second in a mixed step with the three decode rows (the rows' and the prompt's
 * logits, the prompt's K/V pages), then two decode steps replayed from one CUDA
 * graph of fixed grids. GPU test: skips without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "pkvk.h"

enum { L = 2, H = 256, HQ = 4, HKV = 2, D = 128, I = 512, V = 1000, PS = 16 };
enum { NREQ = 3, CAP_TOKENS = 64, MAX_PROMPT = 128, NPAGES = 64, QKVW = (HQ + 2 * HKV) * D };
static const int lens[NREQ] = {50, 70, 9}; /* chunks of 64: 50+14, 56+8, 1 */
static uint64_t seed;
static float *wt[L + 1][PKVK_W_LAYER_COUNT]; /* [L]: the model-level tensors */

static pkvk_model_shape S = {L, H, HQ, HKV, D, I, V, PS, 10000.f, 1e-5f, PKVK_PREFILL_AUTO};

static float fp16(float x) {
    return pkvk_h2f(pkvk_f2h(x));
}

static float *weights(int l, int t, size_t n) {
    float *w = malloc(n * sizeof *w);
    int fan = pkvk_model_fan_in(&S, l, t);
    for (size_t i = 0; i < n; i++) w[i] = fp16(pkvk_model_weight(seed, l, t, i, fan));
    return w;
}

static void rmsnorm(const float *x, const float *w, float *y) {
    double ss = 0;
    for (int i = 0; i < H; i++) ss += (double)x[i] * x[i];
    float inv = 1.f / sqrtf((float)(ss / H) + S.eps);
    for (int i = 0; i < H; i++) y[i] = x[i] * inv * w[i];
}

static void matvec(const float *x, const float *w, int k, int n, float *y) { /* y = x W */
    for (int j = 0; j < n; j++) y[j] = 0;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < n; j++) y[j] += x[i] * w[(size_t)i * n + j];
}

static void rope(float *v, int pos) {
    for (int i = 0; i < D / 2; i++) {
        float f = powf(S.rope_theta, -2.f * i / D) * pos, c = cosf(f), s = sinf(f);
        float a = v[i], b = v[i + D / 2];
        v[i] = a * c - b * s;
        v[i + D / 2] = b * c + a * s;
    }
}

/* The CPU model's caches: K (rotated) and V per layer, request, position, KV head
 * (request NREQ: the chunked prompt). */
static float kc[L][NREQ + 1][MAX_PROMPT + 2][HKV][D], vc[L][NREQ + 1][MAX_PROMPT + 2][HKV][D];
enum { CHUNK0 = 20, CHUNK1 = 25 }; /* the chunked prompt: 20 tokens, then 25 in a mixed step */

/* One token of request r at position pos through every layer; logits when wanted. */
static void forward(int r, int pos, int token, float *logits) {
    float x[H], xn[H], qkv[QKVW], o[HQ * D], t[H], y[2 * I], a[I];
    for (int i = 0; i < H; i++) x[i] = wt[L][PKVK_W_EMBED][(size_t)token * H + i];
    for (int l = 0; l < L; l++) {
        rmsnorm(x, wt[l][PKVK_W_LN1], xn);
        matvec(xn, wt[l][PKVK_W_QKV], H, QKVW, qkv);
        for (int h = 0; h < HQ + HKV; h++) rope(qkv + h * D, pos);
        for (int h = 0; h < HKV; h++) {
            memcpy(kc[l][r][pos][h], qkv + (HQ + h) * D, sizeof(float) * D);
            memcpy(vc[l][r][pos][h], qkv + (HQ + HKV + h) * D, sizeof(float) * D);
        }
        for (int h = 0; h < HQ; h++) {
            int g = h / (HQ / HKV);
            double m = -1e30, z = 0, acc[D] = {0}, sc[MAX_PROMPT + 2];
            for (int j = 0; j <= pos; j++) {
                double s = 0;
                for (int e = 0; e < D; e++) s += (double)qkv[h * D + e] * kc[l][r][j][g][e];
                sc[j] = s / sqrt((double)D);
                if (sc[j] > m) m = sc[j];
            }
            for (int j = 0; j <= pos; j++) {
                double p = exp(sc[j] - m);
                z += p;
                for (int e = 0; e < D; e++) acc[e] += p * vc[l][r][j][g][e];
            }
            for (int e = 0; e < D; e++) o[h * D + e] = (float)(acc[e] / z);
        }
        matvec(o, wt[l][PKVK_W_O], HQ * D, H, t);
        for (int i = 0; i < H; i++) x[i] += t[i];
        rmsnorm(x, wt[l][PKVK_W_LN2], xn);
        matvec(xn, wt[l][PKVK_W_GU], H, 2 * I, y);
        for (int j = 0; j < I; j++) a[j] = y[j] / (1.f + expf(-y[j])) * y[I + j];
        matvec(a, wt[l][PKVK_W_DOWN], I, H, t);
        for (int i = 0; i < H; i++) x[i] += t[i];
    }
    if (!logits) return;
    rmsnorm(x, wt[L][PKVK_W_NORM], xn);
    matvec(xn, wt[L][PKVK_W_HEAD], H, V, logits);
}

static double max_diff_logits(const uint16_t *gpu, const float *ref, double *rms) {
    double m = 0, ss = 0;
    for (int i = 0; i < V; i++) {
        double d = fabs(pkvk_h2f(gpu[i]) - ref[i]);
        if (d > m) m = d;
        ss += (double)ref[i] * ref[i];
    }
    *rms = sqrt(ss / V);
    return m;
}

/* Layer l's attention over the decode rows (device buffers). */
static pkvk_batch layer_batch(pkvk_model *m, int l, uint16_t *q, uint16_t *o, int32_t *bt, int bts,
                              int32_t *seq_lens) {
    const pkvk_shape as = {HQ, HKV, D, PS};
    pkvk_batch b = {as,
                    NREQ,
                    q,
                    o,
                    pkvk_model_kv(m, l, 0),
                    pkvk_model_kv(m, l, 1),
                    bt,
                    bts,
                    seq_lens,
                    1.f / sqrtf((float)D)};
    return b;
}

static void check_model(pkvk_ctx *ctx);

/* Graph replay (run.cuda_graph): two decode steps of the three rows (positions
 * lens[r] + 2, then + 3) replayed from one graph captured on a fixed grid of 4 rows
 * (the bucket of 3), through pkv_workqueue with rows split differently in each
 * step; before each replay the prologue brings the step's lengths and plan to the
 * device buffers the graph reads. Both steps' logits against the CPU computation. */
static void check_graph(pkvk_ctx *ctx, pkvk_model *m, int32_t *bt_d, int bts, const int *len0,
                        int32_t *in_tok) {
    enum { GROWS = 4 };
    const pkvk_shape as = {HQ, HKV, D, PS};
    pkvk_workspace *ws;
    pkvk_plan plan;
    pkvk_graph *g = NULL;
    int32_t *lens_d;
    uint16_t *q, *o, *src;
    CHECK(pkvk_malloc((void **)&lens_d, GROWS * 4) == 0 &&
              pkvk_malloc((void **)&q, (size_t)GROWS * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&o, (size_t)GROWS * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&src, (size_t)HQ * D * 2) == 0 &&
              pkvk_memset(src, 0, (size_t)HQ * D * 2) == 0 &&
              pkvk_workspace_create(ctx, &ws, &as, GROWS, 64, 64) == 0 &&
              pkvk_workspace_reserve(ws, 256) == 0 && pkvk_plan_init(&plan, GROWS, 64) == 0 &&
              pkvk_workspace_fixed(ws, GROWS) == 0,
          "graph setup: %s", pkvk_last_error());
    static float ref[V];
    static uint16_t glog[GROWS * V];
    double worst = 0, rms;
    for (int step = 0; step < 2; step++) {
        int32_t seq[NREQ], splits[NREQ], stage[2 * NREQ];
        for (int r = 0; r < NREQ; r++) {
            seq[r] = len0[r] + 3 + step;
            splits[r] = 1 + (r + step) % 3;
            in_tok[r] = (int32_t)((seed >> (8 * r + 5 + step)) % V);
            stage[r] = seq[r];
        }
        CHECK(pkvk_plan_workqueue(&plan, PKV_ROUTE_WORKQUEUE, &as, seq, splits, NREQ) == 0 &&
                  pkvk_plan_merges(&plan),
              "graph step %d: plan", step);
        /* The page each row's new token lands in (the prologue's own append, into
         * layer 0, is overwritten by the layer's). */
        int32_t bt_h[NREQ][MAX_PROMPT / PS + 1];
        CHECK(pkvk_d2h(bt_h, bt_d, sizeof bt_h) == 0, "d2h");
        for (int r = 0; r < NREQ; r++) stage[NREQ + r] = bt_h[r][(seq[r] - 1) / PS];
        pkvk_step st = {.n_rows = NREQ,
                        .stage = stage,
                        .seq_lens = lens_d,
                        .block_table = bt_d,
                        .bt_stride = bts,
                        .k_cache = pkvk_model_kv(m, 0, 0),
                        .v_cache = pkvk_model_kv(m, 0, 1),
                        .q = q,
                        .src_k = src,
                        .src_v = src,
                        .src_q = src,
                        .src_rows = 1};
        CHECK(pkvk_model_set_tokens(m, NREQ, in_tok) == 0 &&
                  pkvk_step_upload(ws, &plan, &st, PKVK_UPLOAD_PARAMS, NULL) == 0,
              "graph step %d: upload: %s", step, pkvk_last_error());
        if (step == 0) { /* captured once, for both steps */
            int ok = pkvk_graph_begin(ctx) == 0 && pkvk_model_decode_begin(m, GROWS) == 0;
            for (int l = 0; ok && l < L; l++) {
                pkvk_batch b = layer_batch(m, l, q, o, bt_d, bts, lens_d);
                int launches;
                b.n_rows = GROWS;
                ok = pkvk_model_decode_pre(m, l, GROWS, lens_d, bt_d, bts, q) == 0 &&
                     pkvk_launch(ws, &b, &plan, &launches) == 0 &&
                     pkvk_model_post(m, l, GROWS, o) == 0;
            }
            int reused;
            ok = ok && pkvk_model_decode_head(m, GROWS) == 0 &&
                 pkvk_graph_end(ctx, &g, &reused) == 0;
            if (!ok) pkvk_graph_abort(ctx);
            CHECK(ok, "graph capture: %s", pkvk_last_error());
        }
        int32_t gtok[GROWS];
        CHECK(g && pkvk_graph_launch(g) == 0 && pkvk_model_read(m, GROWS, glog, gtok) == 0,
              "graph step %d: replay: %s", step, pkvk_last_error());
        for (int r = 0; r < NREQ; r++) {
            forward(r, seq[r] - 1, in_tok[r], ref);
            double d = max_diff_logits(glog + (size_t)r * V, ref, &rms);
            CHECK(d < 0.03 * rms + 0.01, "graph step %d row %d: logits max |diff| %.4g (rms %.3g)",
                  step, r, d, rms);
            if (d > worst) worst = d;
        }
    }
    printf("graph replay: 2 steps of %d rows on a %d-row graph, logits max |diff| %.4g\n", NREQ,
           GROWS, worst);
    pkvk_graph_destroy(g);
    pkvk_plan_free(&plan);
    pkvk_workspace_destroy(ws);
    pkvk_free(lens_d), pkvk_free(q), pkvk_free(o), pkvk_free(src);
}

int main(void) {
    if (pkvk_device_count() == 0) {
        printf("SKIP: no GPU (%s)\n", pkvk_last_error());
        return SKIP_CODE;
    }
    pkvk_ctx *ctx = NULL;
    CHECK(pkvk_ctx_create(&ctx, 0) == 0, "context: %s", pkvk_last_error());
    seed = (uint64_t)time(NULL) * 2654435761u;
    printf("seed %llu\n", (unsigned long long)seed);
    for (int l = 0; l < L; l++) {
        wt[l][PKVK_W_LN1] = weights(l, PKVK_W_LN1, H);
        wt[l][PKVK_W_QKV] = weights(l, PKVK_W_QKV, (size_t)H * QKVW);
        wt[l][PKVK_W_O] = weights(l, PKVK_W_O, (size_t)HQ * D * H);
        wt[l][PKVK_W_LN2] = weights(l, PKVK_W_LN2, H);
        wt[l][PKVK_W_GU] = weights(l, PKVK_W_GU, (size_t)H * 2 * I);
        wt[l][PKVK_W_DOWN] = weights(l, PKVK_W_DOWN, (size_t)I * H);
    }
    wt[L][PKVK_W_EMBED] = weights(-1, PKVK_W_EMBED, (size_t)V * H);
    wt[L][PKVK_W_NORM] = weights(-1, PKVK_W_NORM, H);
    wt[L][PKVK_W_HEAD] = weights(-1, PKVK_W_HEAD, (size_t)H * V);
    /* Both prefill attention kernels where FlashInfer's is built, else cuBLAS's. */
    int kinds[2] = {pkvk_model_prefill_kernel(&S), PKVK_PREFILL_CUBLAS};
    for (int k = kinds[0] == PKVK_PREFILL_CUBLAS; k < 2; k++) {
        S.prefill_attn = kinds[k];
        printf("prefill attention: %s\n",
               kinds[k] == PKVK_PREFILL_CUBLAS ? "cuBLAS" : "FlashInfer");
        check_model(ctx);
    }
    pkvk_ctx_destroy(ctx);
    CHECK_DONE();
}

/* Prefill, decode and a mixed step of the model against the CPU computation. */
static void check_model(pkvk_ctx *ctx) {
    pkvk_model *m;
    CHECK(pkvk_model_create(ctx, &m, &S, CAP_TOKENS, MAX_PROMPT, NPAGES, seed) == 0, "create: %s",
          pkvk_last_error());
    /* Pages: each prompt's in a shuffled order, with room for one decode token. */
    int32_t pages[NPAGES], bt[NREQ][MAX_PROMPT / PS + 1], n_pages = 0, perm[NPAGES];
    for (int i = 0; i < NPAGES; i++) perm[i] = i;
    srand((unsigned)seed);
    for (int i = NPAGES - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int used = 0;
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + 1 + PS - 1) / PS; p++) bt[r][p] = perm[used++];
    for (int r = 0; r < NREQ; r++)
        for (int p = 0; p < (lens[r] + PS - 1) / PS; p++) pages[n_pages++] = bt[r][p];
    CHECK(pkvk_model_prefill(m, NREQ, lens, pages, NULL, NULL) == 0, "prefill: %s",
          pkvk_last_error());

    /* The CPU model over the prompts. */
    static float ref_logits[V];
    for (int r = 0; r < NREQ; r++)
        for (int pos = 0; pos < lens[r]; pos++)
            forward(r, pos, pkvk_prompt_token(r, pos, V),
                    r == NREQ - 1 && pos == lens[r] - 1 ? ref_logits : NULL);
    static uint16_t logits[V];
    int32_t tok;
    CHECK(pkvk_model_read(m, 1, logits, &tok) == 0, "read: %s", pkvk_last_error());
    double rms, dl = max_diff_logits(logits, ref_logits, &rms);
    CHECK(dl < 0.03 * rms + 0.01, "prefill logits: max |diff| %.4g (rms %.3g)", dl, rms);
    printf("prefill: last prompt's logits max |diff| %.4g, rms %.3g\n", dl, rms);
    /* Every layer's K and V pages of every prompt token. */
    size_t pool = (size_t)NPAGES * HKV * PS * D;
    uint16_t *host = malloc(pool * 2);
    double dkv = 0;
    for (int l = 0; l < L; l++)
        for (int v = 0; v < 2; v++) {
            CHECK(pkvk_d2h(host, pkvk_model_kv(m, l, v), pool * 2) == 0, "d2h");
            for (int r = 0; r < NREQ; r++)
                for (int pos = 0; pos < lens[r]; pos++)
                    for (int h = 0; h < HKV; h++)
                        for (int e = 0; e < D; e++) {
                            size_t at =
                                (((size_t)bt[r][pos / PS] * HKV + h) * PS + pos % PS) * D + e;
                            float want = v ? vc[l][r][pos][h][e] : kc[l][r][pos][h][e];
                            double d = fabs(pkvk_h2f(host[at]) - want);
                            if (d > dkv) dkv = d;
                        }
        }
    CHECK(dkv < 0.02, "prefill K/V pages: max |diff| %.4g", dkv);
    printf("prefill: K/V pages of %d layers max |diff| %.4g\n", L, dkv);

    /* A decode step: each row's input token at position lens[r], the reference route. */
    int32_t in_tok[NREQ], seq[NREQ];
    for (int r = 0; r < NREQ; r++)
        in_tok[r] = (int32_t)((seed >> (8 * r)) % V), seq[r] = lens[r] + 1;
    int32_t *lens_d, *bt_d;
    uint16_t *q, *o;
    const pkvk_shape as = {HQ, HKV, D, PS};
    const int bts = MAX_PROMPT / PS + 1;
    pkvk_workspace *ws;
    pkvk_plan plan;
    CHECK(pkvk_malloc((void **)&lens_d, sizeof seq) == 0 &&
              pkvk_malloc((void **)&bt_d, sizeof bt) == 0 &&
              pkvk_malloc((void **)&q, (size_t)NREQ * HQ * D * 2) == 0 &&
              pkvk_malloc((void **)&o, (size_t)NREQ * HQ * D * 2) == 0 &&
              pkvk_h2d(lens_d, seq, sizeof seq) == 0 && pkvk_h2d(bt_d, bt, sizeof bt) == 0 &&
              pkvk_workspace_create(ctx, &ws, &as, NREQ, 64, 64) == 0 &&
              pkvk_plan_init(&plan, NREQ, 64) == 0 && pkvk_plan_ref(&plan, seq, NREQ) == 0 &&
              pkvk_plan_upload(ws, &plan) == 0,
          "decode setup: %s", pkvk_last_error());
    CHECK(pkvk_model_set_tokens(m, NREQ, in_tok) == 0 && pkvk_model_decode_begin(m, NREQ) == 0,
          "decode begin: %s", pkvk_last_error());
    for (int l = 0; l < L; l++) {
        pkvk_batch b = layer_batch(m, l, q, o, bt_d, bts, lens_d);
        int launches;
        CHECK(pkvk_model_decode_pre(m, l, NREQ, lens_d, bt_d, bts, q) == 0 &&
                  pkvk_launch(ws, &b, &plan, &launches) == 0 && pkvk_model_post(m, l, NREQ, o) == 0,
              "decode layer %d: %s", l, pkvk_last_error());
    }
    CHECK(pkvk_model_decode_head(m, NREQ) == 0, "decode head: %s", pkvk_last_error());
    static uint16_t dlog[NREQ * V];
    int32_t dtok[NREQ];
    CHECK(pkvk_model_read(m, NREQ, dlog, dtok) == 0, "read: %s", pkvk_last_error());
    double worst = 0;
    for (int r = 0; r < NREQ; r++) {
        forward(r, lens[r], in_tok[r], ref_logits);
        double d = max_diff_logits(dlog + (size_t)r * V, ref_logits, &rms);
        CHECK(d < 0.03 * rms + 0.01, "decode row %d: logits max |diff| %.4g (rms %.3g)", r, d, rms);
        if (d > worst) worst = d;
        /* Greedy sampling: the GPU's token is an argmax of its own logits. */
        for (int i = 0; i < V; i++)
            CHECK(pkvk_h2f(dlog[(size_t)r * V + i]) <= pkvk_h2f(dlog[(size_t)r * V + dtok[r]]),
                  "row %d: token %d is not the argmax", r, dtok[r]);
    }
    printf("decode: logits of %d rows max |diff| %.4g\n", NREQ, worst);

    /* Chunked prefill: prompt NREQ's first CHUNK0 tokens alone (a chunk that does not
     * end its prompt), then a mixed step: the three rows' next tokens at position
     * lens[r] + 1 and the prompt's next CHUNK1 tokens, which end it. */
    int32_t cpages[(CHUNK0 + CHUNK1 + PS - 1) / PS];
    for (int p = 0; p < (CHUNK0 + CHUNK1 + PS - 1) / PS; p++) cpages[p] = perm[used++];
    const int32_t c0_len = CHUNK0, c0_start = 0, c1_len = CHUNK1, c1_start = CHUNK0;
    const uint8_t not_last = 0, is_last = 1;
    CHECK(pkvk_model_prefill(m, 1, &c0_len, cpages, &c0_start, &not_last) == 0, "first chunk: %s",
          pkvk_last_error());
    for (int r = 0; r < NREQ; r++)
        in_tok[r] = (int32_t)((seed >> (8 * r + 3)) % V), seq[r] = lens[r] + 2;
    CHECK(pkvk_h2d(lens_d, seq, sizeof seq) == 0 && pkvk_plan_ref(&plan, seq, NREQ) == 0 &&
              pkvk_plan_upload(ws, &plan) == 0 && pkvk_model_set_tokens(m, NREQ, in_tok) == 0,
          "mixed setup: %s", pkvk_last_error());
    CHECK(pkvk_model_mixed_begin(m, NREQ, 1, &c1_len, cpages, &c1_start, &is_last) == 0,
          "mixed begin: %s", pkvk_last_error());
    for (int l = 0; l < L; l++) {
        pkvk_batch b = layer_batch(m, l, q, o, bt_d, bts, lens_d);
        int launches;
        CHECK(pkvk_model_mixed_pre(m, l, lens_d, bt_d, bts, q) == 0 &&
                  pkvk_launch(ws, &b, &plan, &launches) == 0 && pkvk_model_mixed_post(m, l, o) == 0,
              "mixed layer %d: %s", l, pkvk_last_error());
    }
    CHECK(pkvk_model_mixed_head(m) == 0, "mixed head: %s", pkvk_last_error());
    static uint16_t mlog[(NREQ + 1) * V];
    int32_t mtok[NREQ + 1];
    CHECK(pkvk_model_read(m, NREQ + 1, mlog, mtok) == 0, "read: %s", pkvk_last_error());
    worst = 0;
    for (int r = 0; r <= NREQ; r++) {
        if (r < NREQ) {
            forward(r, lens[r] + 1, in_tok[r], ref_logits);
        } else { /* the chunked prompt (piece 0 of both batches: its tokens' request 0) */
            for (int pos = 0; pos < CHUNK0 + CHUNK1; pos++)
                forward(NREQ, pos, pkvk_prompt_token(0, pos, V),
                        pos == CHUNK0 + CHUNK1 - 1 ? ref_logits : NULL);
        }
        double d = max_diff_logits(mlog + (size_t)r * V, ref_logits, &rms);
        CHECK(d < 0.03 * rms + 0.01, "mixed step row %d: logits max |diff| %.4g (rms %.3g)", r, d,
              rms);
        if (d > worst) worst = d;
    }
    double dck = 0;
    for (int l = 0; l < L; l++)
        for (int v = 0; v < 2; v++) {
            CHECK(pkvk_d2h(host, pkvk_model_kv(m, l, v), pool * 2) == 0, "d2h");
            for (int pos = 0; pos < CHUNK0 + CHUNK1; pos++)
                for (int h = 0; h < HKV; h++)
                    for (int e = 0; e < D; e++) {
                        size_t at = (((size_t)cpages[pos / PS] * HKV + h) * PS + pos % PS) * D + e;
                        float want = v ? vc[l][NREQ][pos][h][e] : kc[l][NREQ][pos][h][e];
                        double d = fabs(pkvk_h2f(host[at]) - want);
                        if (d > dck) dck = d;
                    }
        }
    CHECK(dck < 0.02, "chunked prompt's K/V pages: max |diff| %.4g", dck);
    printf("chunked prefill: mixed step logits max |diff| %.4g, the prompt's K/V max |diff| %.4g\n",
           worst, dck);
    check_graph(ctx, m, bt_d, bts, lens, in_tok);
    pkvk_plan_free(&plan);
    pkvk_workspace_destroy(ws);
    pkvk_free(lens_d), pkvk_free(bt_d), pkvk_free(q), pkvk_free(o);
    pkvk_model_destroy(m);
    free(host);
}
