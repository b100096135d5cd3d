/* The tiny model of the model tests (tinymodel.h): a direct FP32 computation, its weights
 * and K/V rounded to the shape's types. */
#include "tinymodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const int lens[NREQ] = {50, 70, 9}; /* chunks of 64: 50+14, 56+8, 1 */
uint64_t seed;
static float *wt[L + 1][PKVK_W_LAYER_COUNT]; /* [L]: the model-level tensors */

pkvk_model_shape S = {L,         H,        HQ, HKV, D, I, V, PS, 10000.f, 1e-5f, PKVK_PREFILL_AUTO,
                      PKVK_FP16, PKVK_FP16};

static float *weights(int l, int t, size_t n) {
    float *w = malloc(n * sizeof *w);
    int fan = pkvk_model_fan_in(&S, l, t);
    for (size_t i = 0; i < n; i++)
        w[i] = pkvk_round(S.dtype, pkvk_model_weight(seed, l, t, i, fan));
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
float kc[L][NREQ + 1][MAX_PROMPT + 2][HKV][D], vc[L][NREQ + 1][MAX_PROMPT + 2][HKV][D];

/* One token of request r at position pos through every layer; logits when wanted. */
void forward(int r, int pos, int token, float *logits) {
    float x[H], xn[H], qkv[QKVW], o[HQ * D], t[H], y[2 * I], a[I];
    for (int i = 0; i < H; i++) x[i] = wt[L][PKVK_W_EMBED][(size_t)token * H + i];
    for (int l = 0; l < L; l++) {
        rmsnorm(x, wt[l][PKVK_W_LN1], xn);
        matvec(xn, wt[l][PKVK_W_QKV], H, QKVW, qkv);
        for (int h = 0; h < HQ + HKV; h++) rope(qkv + h * D, pos);
        for (int h = 0; h < HKV; h++) /* as the pools hold them */
            for (int e = 0; e < D; e++) {
                kc[l][r][pos][h][e] = pkvk_round(S.kv_dtype, qkv[(HQ + h) * D + e]);
                vc[l][r][pos][h][e] = pkvk_round(S.kv_dtype, qkv[(HQ + HKV + h) * D + e]);
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

double max_diff_logits(const uint16_t *gpu, const float *ref, double *rms) {
    double m = 0, ss = 0;
    for (int i = 0; i < V; i++) {
        double d = fabs(pkvk_elem(S.dtype, gpu, i) - ref[i]);
        if (d > m) m = d;
        ss += (double)ref[i] * ref[i];
    }
    *rms = sqrt(ss / V);
    return m;
}

void tiny_model_init(uint64_t s) {
    seed = s;
    for (int l = 0; l <= L; l++)
        for (int t = 0; t < PKVK_W_LAYER_COUNT; t++) free(wt[l][t]), wt[l][t] = NULL;
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
}

void tiny_model_types(int i, uint64_t s) {
    static const int types[TINY_TYPES][2] = {{PKVK_FP16, PKVK_FP16},
                                             {PKVK_BF16, PKVK_BF16},
                                             {PKVK_FP16, PKVK_FP8_E4M3},
                                             {PKVK_BF16, PKVK_FP8_E4M3}};
    S.dtype = types[i][0], S.kv_dtype = types[i][1];
    tiny_model_init(s);
}

double tiny_tol_scale(void) {
    return S.dtype == PKVK_FP16 && S.kv_dtype == PKVK_FP16 ? 1 : 2;
}

double kv_excess(double got, double want) {
    const double ulp = S.kv_dtype == PKVK_FP8_E4M3 ? 0.125 : S.kv_dtype == PKVK_BF16 ? 1.0 / 64 : 0;
    return fabs(got - want) - ulp * fabs(want);
}

double kv_max_diff(const void *pool, int l, int v, const int32_t *bt, int bts) {
    double m = 0;
    for (int r = 0; r < NREQ; r++)
        for (int pos = 0; pos < lens[r]; pos++)
            for (int h = 0; h < HKV; h++)
                for (int e = 0; e < D; e++) {
                    size_t at =
                        (((size_t)bt[r * bts + pos / PS] * HKV + h) * PS + pos % PS) * D + e;
                    float want = v ? vc[l][r][pos][h][e] : kc[l][r][pos][h][e];
                    double d = kv_excess(pkvk_elem(S.kv_dtype, pool, at), want);
                    if (d > m) m = d;
                }
    return m;
}

int tiny_cpu_attend_hook(void *ctx, int l) {
    tiny_cpu_attend *h = ctx;
    float *o;
    const pkvk_batch b = pkvk_cpu_model_attention(h->m, l, h->in, &o);
    return pkvk_cpu_run(&b, h->plan, pkvk_cpu_attend_tasks, h->part, o);
}
