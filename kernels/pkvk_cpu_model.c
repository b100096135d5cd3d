/* The CPU mirror of the served model (pkvk_model.h): the same layer sequence as the
 * GPU's, in FP32 on the host, one token row at a time, with the step's route run by
 * the kernels' CPU mirror (pkvk_cpu_run) on FP16 pages. The cpu backend runs it. */
#include "pkv_clock.h"
#include "pkvk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The pieces of one prefill chunk at most (the GPU's MAX_SEGS), so its heads too. */
enum { MAX_HEADS = 64 };

struct pkvk_cpu_model {
    pkvk_model_shape s;
    int32_t cap_rows, cap_tokens, n_pages;
    float *w[1024][PKVK_W_LAYER_COUNT], *embed, *norm, *head; /* FP16 values, as floats */
    uint16_t *kv;                                             /* [layers][2][pool] */
    size_t pool;                                              /* halves of one pool */
    float *x, *logits;       /* [cap_rows][hidden], [max(cap_rows, MAX_HEADS)][vocab] */
    uint16_t *q;             /* [cap_rows][hq][d]: the layer's Q (FP16, as the GPU's) */
    float *o;                /* [cap_rows][hq][d]: the layer's attention output */
    float *xn, *qkv, *y, *a; /* one row's */
    int32_t *tok;            /* [cap_tokens]: each row's last sampled token */
};

size_t pkvk_cpu_model_bytes(const pkvk_model_shape *s, int32_t cap_rows, int32_t n_pages) {
    size_t w = 2 * pkvk_model_tensor_elems(s, -1, PKVK_W_EMBED) +
               pkvk_model_tensor_elems(s, -1, PKVK_W_NORM);
    for (int t = 0; t < PKVK_W_LAYER_COUNT; t++)
        w += (size_t)s->layers * pkvk_model_tensor_elems(s, 0, t);
    const size_t kv = (size_t)s->layers * 2 * n_pages * s->hkv * s->page_size * s->d;
    const size_t rows = (size_t)cap_rows * (s->hidden + s->vocab + 3 * (size_t)s->hq * s->d);
    return 4 * w + 2 * kv + 4 * rows;
}

static float *weights(const pkvk_model_shape *s, uint64_t seed, int l, int t) {
    const size_t n = pkvk_model_tensor_elems(s, l, t);
    float *w = malloc(n * sizeof *w);
    const int fan_in = pkvk_model_fan_in(s, l, t);
    for (size_t i = 0; w && i < n; i++)
        w[i] = pkvk_h2f(pkvk_f2h(pkvk_model_weight(seed, l, t, i, fan_in)));
    return w;
}

void pkvk_cpu_model_destroy(pkvk_cpu_model *m) {
    if (!m) return;
    for (int l = 0; l < m->s.layers; l++)
        for (int t = 0; t < PKVK_W_LAYER_COUNT; t++) free(m->w[l][t]);
    void *p[] = {m->embed, m->norm, m->head, m->kv, m->x, m->logits, m->q,
                 m->o,     m->xn,   m->qkv,  m->y,  m->a, m->tok};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    free(m);
}

int pkvk_cpu_model_create(pkvk_cpu_model **out, const pkvk_model_shape *s, int32_t cap_rows,
                          int32_t cap_tokens, int32_t n_pages, uint64_t seed) {
    *out = NULL;
    if (s->layers < 1 || s->layers > 1024 || s->hq % s->hkv || s->d % 2 ||
        s->d > PKVK_MAX_HEAD_DIM || s->hidden <= 0 || cap_rows < 1 || cap_tokens < cap_rows)
        return PKVK_ERR_UNSUPPORTED;
    pkvk_cpu_model *m = calloc(1, sizeof *m);
    if (!m) return PKVK_ERR_OUT_OF_MEMORY;
    m->s = *s, m->cap_rows = cap_rows, m->cap_tokens = cap_tokens, m->n_pages = n_pages;
    int ok = 1;
    for (int l = 0; l < s->layers; l++)
        for (int t = 0; t < PKVK_W_LAYER_COUNT; t++) ok &= !!(m->w[l][t] = weights(s, seed, l, t));
    m->embed = weights(s, seed, -1, PKVK_W_EMBED);
    m->norm = weights(s, seed, -1, PKVK_W_NORM);
    m->head = weights(s, seed, -1, PKVK_W_HEAD);
    m->pool = (size_t)n_pages * s->hkv * s->page_size * s->d;
    const size_t hd = (size_t)s->hq * s->d, qkvw = (size_t)(s->hq + 2 * s->hkv) * s->d;
    const size_t widest = qkvw > 2 * (size_t)s->inter ? qkvw : 2 * (size_t)s->inter;
    m->kv = calloc((size_t)s->layers * 2 * m->pool, 2);
    m->x = malloc((size_t)cap_rows * s->hidden * 4);
    m->logits = malloc((size_t)(cap_rows > MAX_HEADS ? cap_rows : MAX_HEADS) * s->vocab * 4);
    m->q = malloc((size_t)cap_rows * hd * 2);
    m->o = malloc((size_t)cap_rows * hd * 4);
    m->xn = malloc((size_t)s->hidden * 4);
    m->qkv = malloc(widest * 4);
    m->y = malloc(2 * (size_t)s->inter * 4);
    m->a = malloc((size_t)s->inter * 4);
    m->tok = calloc((size_t)cap_tokens, 4);
    ok &= m->embed && m->norm && m->head && m->kv && m->x && m->logits && m->q && m->o && m->xn &&
          m->qkv && m->y && m->a && m->tok;
    if (!ok) {
        pkvk_cpu_model_destroy(m);
        return PKVK_ERR_OUT_OF_MEMORY;
    }
    *out = m;
    return PKVK_OK;
}

uint16_t *pkvk_cpu_model_kv(pkvk_cpu_model *m, int l, int v) {
    return m->kv + ((size_t)l * 2 + v) * m->pool;
}
const float *pkvk_cpu_model_logits(const pkvk_cpu_model *m) {
    return m->logits;
}
int32_t *pkvk_cpu_model_tokens(pkvk_cpu_model *m) {
    return m->tok;
}

static void rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

/* y [n] (+)= x [k] W, W [k][n] row-major. */
static void matvec(const float *x, const float *w, int k, int n, float *y, int add) {
    if (!add) memset(y, 0, sizeof(float) * (size_t)n);
    for (int i = 0; i < k; i++) {
        const float xi = x[i], *wr = w + (size_t)i * n;
        for (int j = 0; j < n; j++) y[j] += xi * wr[j];
    }
}

/* Rotate-half RoPE of one head at position pos. */
static void rope(float *v, int d, float theta, int pos) {
    for (int i = 0; i < d / 2; i++) {
        const double f = pow(theta, -2.0 * i / d) * pos, c = cos(f), s = sin(f);
        const float a = v[i], b = v[i + d / 2];
        v[i] = (float)(a * c - b * s);
        v[i + d / 2] = (float)(b * c + a * s);
    }
}

/* Layer l's norm, QKV and RoPE of token row x at position pos: Q (FP16) into q, K and
 * V (FP16) into the layer's page `page` at pos. */
static void layer_pre(pkvk_cpu_model *m, int l, const float *x, int pos, int32_t page,
                      uint16_t *q) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d;
    rmsnorm(x, m->w[l][PKVK_W_LN1], s->hidden, s->eps, m->xn);
    matvec(m->xn, m->w[l][PKVK_W_QKV], s->hidden, qkvw, m->qkv, 0);
    for (int h = 0; h < s->hq + s->hkv; h++)
        rope(m->qkv + (size_t)h * s->d, s->d, s->rope_theta, pos);
    for (int j = 0; j < s->hq * s->d; j++) q[j] = pkvk_f2h(m->qkv[j]);
    for (int v = 0; v < 2; v++) {
        uint16_t *pool = pkvk_cpu_model_kv(m, l, v);
        for (int h = 0; h < s->hkv; h++) {
            const float *src = m->qkv + (size_t)(s->hq + v * s->hkv + h) * s->d;
            uint16_t *dst =
                pool + (((size_t)page * s->hkv + h) * s->page_size + pos % s->page_size) * s->d;
            for (int j = 0; j < s->d; j++) dst[j] = pkvk_f2h(src[j]);
        }
    }
}

/* Layer l after attention, on token row x: the output projection of o onto it, the
 * norm, the gated MLP onto it. */
static void layer_post(pkvk_cpu_model *m, int l, float *x, const float *o) {
    const pkvk_model_shape *s = &m->s;
    matvec(o, m->w[l][PKVK_W_O], s->hq * s->d, s->hidden, x, 1);
    rmsnorm(x, m->w[l][PKVK_W_LN2], s->hidden, s->eps, m->xn);
    matvec(m->xn, m->w[l][PKVK_W_GU], s->hidden, 2 * s->inter, m->y, 0);
    for (int j = 0; j < s->inter; j++)
        m->a[j] = m->y[j] / (1.f + expf(-m->y[j])) * m->y[s->inter + j];
    matvec(m->a, m->w[l][PKVK_W_DOWN], s->inter, s->hidden, x, 1);
}

/* The final norm, LM head and argmax (the first of equal maxima) of row x. */
static int32_t head(pkvk_cpu_model *m, const float *x, float *logits) {
    const pkvk_model_shape *s = &m->s;
    rmsnorm(x, m->norm, s->hidden, s->eps, m->xn);
    matvec(m->xn, m->head, s->hidden, s->vocab, logits, 0);
    int32_t best = 0;
    for (int32_t i = 1; i < s->vocab; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Layer l's attention over rows of Q in m->q, on the layer's pages. */
static pkvk_batch layer_batch(pkvk_cpu_model *m, int l, int rows, const int32_t *bt, int bt_stride,
                              const int32_t *lens) {
    const pkvk_model_shape *s = &m->s;
    const pkvk_batch b = {
        {s->hq, s->hkv, s->d, s->page_size}, rows, m->q,      NULL, pkvk_cpu_model_kv(m, l, 0),
        pkvk_cpu_model_kv(m, l, 1),          bt,   bt_stride, lens, 1.0f / sqrtf((float)s->d)};
    return b;
}

static void embed(const pkvk_cpu_model *m, int32_t token, float *x) {
    int32_t t = token % m->s.vocab;
    if (t < 0) t += m->s.vocab;
    memcpy(x, m->embed + (size_t)t * m->s.hidden, sizeof(float) * (size_t)m->s.hidden);
}

int pkvk_cpu_model_decode(pkvk_cpu_model *m, int rows, const int32_t *lens, const int32_t *bt,
                          int bt_stride, const pkvk_plan *p, pkvk_cpu_attend attend, float *part,
                          float *o0, uint16_t *q0, double *t_attention) {
    const pkvk_model_shape *s = &m->s;
    if (rows < 1 || rows > m->cap_rows || p->n_rows != rows) return PKVK_ERR_INVALID;
    const size_t hd = (size_t)s->hq * s->d;
    if (t_attention) *t_attention = 0;
    for (int r = 0; r < rows; r++) embed(m, m->tok[r], m->x + (size_t)r * s->hidden);
    for (int l = 0; l < s->layers; l++) {
        for (int r = 0; r < rows; r++) {
            const int pos = lens[r] - 1;
            layer_pre(m, l, m->x + (size_t)r * s->hidden, pos,
                      bt[(size_t)r * bt_stride + pos / s->page_size], m->q + (size_t)r * hd);
        }
        const pkvk_batch b = layer_batch(m, l, rows, bt, bt_stride, lens);
        const double t0 = pkv_clock_now();
        int rc = pkvk_cpu_run(&b, p, attend, part, m->o);
        if (rc) return rc;
        if (t_attention) *t_attention += pkv_clock_now() - t0;
        if (l == 0 && o0) memcpy(o0, m->o, sizeof(float) * rows * hd);
        if (l == 0 && q0) memcpy(q0, m->q, 2 * rows * hd);
        for (int r = 0; r < rows; r++)
            layer_post(m, l, m->x + (size_t)r * s->hidden, m->o + r * hd);
    }
    for (int r = 0; r < rows; r++)
        m->tok[r] = head(m, m->x + (size_t)r * s->hidden, m->logits + (size_t)r * s->vocab);
    return PKVK_OK;
}

/* One prompt token (request req of the batch, position pos) through every layer,
 * attending to its prompt's positions 0..pos in its pages; logits and the sampled
 * token into tok when it samples. */
static int prompt_token(pkvk_cpu_model *m, int req, int pos, const int32_t *pages, int n_pages,
                        float *logits, int32_t *tok) {
    const pkvk_model_shape *s = &m->s;
    float *x = m->x; /* row 0 of the decode rows' buffer is free during a prefill */
    const int32_t len = pos + 1;
    embed(m, pkvk_prompt_token(req, pos, s->vocab), x);
    for (int l = 0; l < s->layers; l++) {
        layer_pre(m, l, x, pos, pages[pos / s->page_size], m->q);
        const pkvk_batch b = layer_batch(m, l, 1, pages, n_pages, &len);
        int rc = pkvk_cpu_reference(&b, m->o);
        if (rc) return rc;
        layer_post(m, l, x, m->o);
    }
    if (tok) *tok = head(m, x, logits);
    return PKVK_OK;
}

int pkvk_cpu_model_prefill(pkvk_cpu_model *m, int n, const int32_t *lens, const int32_t *pages,
                           const int32_t *starts, const uint8_t *last) {
    const int ps = m->s.page_size;
    /* The GPU's chunks (pkvk_model_prefill): a chunk of cap_tokens tokens or 64 pieces
     * samples its ending prompts into tok[0], tok[1], ... */
    int T = 0, segs = 0, heads = 0, page_off = 0;
    for (int i = 0; i < n; i++) {
        const int q_begin = starts ? starts[i] : 0, q_end = q_begin + lens[i];
        const int n_pages = (q_end + ps - 1) / ps;
        if (lens[i] < 1 || n_pages > m->n_pages) return PKVK_ERR_INVALID;
        for (int q0 = q_begin; q0 < q_end;) {
            int len = q_end - q0;
            if (len > m->cap_tokens - T) len = m->cap_tokens - T;
            const int samples = q0 + len == q_end && (!last || last[i]);
            for (int pos = q0; pos < q0 + len; pos++) {
                const int at = samples && pos == q_end - 1;
                int rc = prompt_token(m, i, pos, pages + page_off, n_pages,
                                      at ? m->logits + (size_t)heads * m->s.vocab : NULL,
                                      at ? m->tok + heads : NULL);
                if (rc) return rc;
            }
            heads += samples, T += len, q0 += len, segs++;
            if (T == m->cap_tokens || segs == MAX_HEADS) T = 0, segs = 0, heads = 0;
        }
        page_off += n_pages;
    }
    return PKVK_OK;
}
