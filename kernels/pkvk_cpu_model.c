/* The CPU mirror of the served model (pkvk_model.h): its operations for the one
 * forward (pkvk_forward.h), in FP32 on the host, one token row at a time, with the
 * step's route run by the kernels' CPU mirror (pkvk_cpu_run) on pages of the shape's
 * kv_dtype. The cpu backend runs it. */
#include "pkv_clock.h"
#include "pkvk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pkvk_cpu_model {
    pkvk_model_shape s;
    int32_t cap_rows, cap_tokens, n_pages;
    float *w[1024][PKVK_W_LAYER_COUNT], *embed, *norm, *head; /* dtype's values, as floats */
    unsigned char *kv;                                        /* [layers][2][pool] */
    size_t pool;                                              /* bytes of one pool */
    float *unit; /* FP8 pools: [n_pages][hkv] scales, 1 (as the GPU model's); else NULL */
    /* [cap_tokens][hidden]; [cap_rows + PKVK_MAX_PIECES][vocab] (the rows', then the
     * pieces' that sample) */
    float *x, *logits;
    uint16_t *q;             /* [cap_tokens][hq][d]: the layer's Q (dtype, as the GPU's) */
    float *o;                /* [cap_tokens][hq][d]: the layer's attention output */
    float *xn, *qkv, *y, *a; /* one row's */
    int32_t *tok;            /* [cap_tokens]: each row's last sampled token */
    /* a mixture of experts (pkvk_cpu_model_experts; experts 0: none): per MoE layer its
     * router, its experts' gate-up and down; scratch of experts + 3 inter floats */
    pkvk_moe_shape e;
    float *router[1024], **egu[1024], **edown[1024], *escratch;
    pkvk_moe_route route; /* the forwards' routing (pkvk_moe_route) and its argument */
    void *route_ctx;
    int32_t *ecount, *eoff; /* [experts], [experts + 1]: the layer's routing */
};

size_t pkvk_cpu_model_bytes(const pkvk_model_shape *s, int32_t cap_rows, int32_t cap_tokens,
                            int32_t n_pages) {
    size_t w = 2 * pkvk_model_tensor_elems(s, -1, PKVK_W_EMBED) +
               pkvk_model_tensor_elems(s, -1, PKVK_W_NORM);
    for (int t = 0; t < PKVK_W_LAYER_COUNT; t++)
        w += (size_t)s->layers * pkvk_model_tensor_elems(s, 0, t);
    const size_t kv = (size_t)s->layers * 2 * n_pages * s->hkv * s->page_size * s->d *
                      pkvk_dtype_bytes(s->kv_dtype);
    const size_t rows = (size_t)cap_tokens * (s->hidden + 3 * (size_t)s->hq * s->d) +
                        (size_t)(cap_rows + PKVK_MAX_PIECES) * s->vocab;
    return 4 * w + kv + 4 * rows + 4 * (size_t)n_pages * s->hkv;
}

static float *weights(const pkvk_model_shape *s, uint64_t seed, int l, int t) {
    const size_t n = pkvk_model_tensor_elems(s, l, t);
    float *w = malloc(n * sizeof *w);
    const int fan_in = pkvk_model_fan_in(s, l, t);
    for (size_t i = 0; w && i < n; i++)
        w[i] = pkvk_round(s->dtype, pkvk_model_weight(seed, l, t, i, fan_in));
    return w;
}

void pkvk_cpu_model_destroy(pkvk_cpu_model *m) {
    if (!m) return;
    for (int l = m->e.first; m->e.experts && l < m->s.layers; l++) {
        for (int x = 0; x < m->e.experts; x++) {
            if (m->egu[l]) free(m->egu[l][x]);
            if (m->edown[l]) free(m->edown[l][x]);
        }
        free(m->router[l]), free(m->egu[l]), free(m->edown[l]);
    }
    free(m->escratch), free(m->ecount), free(m->eoff);
    for (int l = 0; l < m->s.layers; l++)
        for (int t = 0; t < PKVK_W_LAYER_COUNT; t++) free(m->w[l][t]);
    void *p[] = {m->embed, m->norm, m->head, m->kv,  m->unit, m->x, m->logits,
                 m->q,     m->o,    m->xn,   m->qkv, m->y,    m->a, m->tok};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    free(m);
}

int pkvk_cpu_model_create(pkvk_cpu_model **out, const pkvk_model_shape *s, int32_t cap_rows,
                          int32_t cap_tokens, int32_t n_pages, uint64_t seed) {
    *out = NULL;
    if ((s->dtype != PKVK_FP16 && s->dtype != PKVK_BF16) ||
        (s->kv_dtype != s->dtype && s->kv_dtype != PKVK_FP8_E4M3) || s->layers < 1 ||
        s->layers > 1024 || s->hq % s->hkv || s->d % 2 || s->d > PKVK_MAX_HEAD_DIM ||
        s->hidden <= 0 || cap_rows < 1 || cap_tokens < cap_rows)
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
    m->pool = (size_t)n_pages * s->hkv * s->page_size * s->d * pkvk_dtype_bytes(s->kv_dtype);
    const size_t hd = (size_t)s->hq * s->d, qkvw = (size_t)(s->hq + 2 * s->hkv) * s->d;
    const size_t widest = qkvw > 2 * (size_t)s->inter ? qkvw : 2 * (size_t)s->inter;
    m->kv = calloc((size_t)s->layers * 2, m->pool);
    if (s->kv_dtype == PKVK_FP8_E4M3 && (m->unit = malloc((size_t)n_pages * s->hkv * 4)))
        for (size_t i = 0; i < (size_t)n_pages * s->hkv; i++) m->unit[i] = 1.f;
    m->x = malloc((size_t)cap_tokens * s->hidden * 4);
    m->logits = malloc((size_t)(cap_rows + PKVK_MAX_PIECES) * s->vocab * 4);
    m->q = malloc((size_t)cap_tokens * hd * 2);
    m->o = malloc((size_t)cap_tokens * hd * 4);
    m->xn = malloc((size_t)s->hidden * 4);
    m->qkv = malloc(widest * 4);
    m->y = malloc(2 * (size_t)s->inter * 4);
    m->a = malloc((size_t)s->inter * 4);
    m->tok = calloc((size_t)cap_tokens, 4);
    ok &= m->embed && m->norm && m->head && m->kv && m->x && m->logits && m->q && m->o && m->xn &&
          m->qkv && m->y && m->a && m->tok && (s->kv_dtype != PKVK_FP8_E4M3 || m->unit);
    if (!ok) {
        pkvk_cpu_model_destroy(m);
        return PKVK_ERR_OUT_OF_MEMORY;
    }
    *out = m;
    return PKVK_OK;
}

uint16_t *pkvk_cpu_model_kv(pkvk_cpu_model *m, int l, int v) {
    return (uint16_t *)(m->kv + ((size_t)l * 2 + v) * m->pool);
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

/* Layer l's norm, QKV and RoPE of token row x at position pos: Q (dtype) into q, K and
 * V (kv_dtype; FP8 at scale 1) into the layer's page `page` at pos. */
static void layer_pre(pkvk_cpu_model *m, int l, const float *x, int pos, int32_t page,
                      uint16_t *q) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d;
    rmsnorm(x, m->w[l][PKVK_W_LN1], s->hidden, s->eps, m->xn);
    matvec(m->xn, m->w[l][PKVK_W_QKV], s->hidden, qkvw, m->qkv, 0);
    for (int h = 0; h < s->hq + s->hkv; h++)
        rope(m->qkv + (size_t)h * s->d, s->d, s->rope_theta, pos);
    for (int j = 0; j < s->hq * s->d; j++) pkvk_store(s->dtype, q, (size_t)j, m->qkv[j]);
    for (int v = 0; v < 2; v++) {
        uint16_t *pool = pkvk_cpu_model_kv(m, l, v);
        for (int h = 0; h < s->hkv; h++) {
            const float *src = m->qkv + (size_t)(s->hq + v * s->hkv + h) * s->d;
            const size_t at =
                (((size_t)page * s->hkv + h) * s->page_size + pos % s->page_size) * s->d;
            for (int j = 0; j < s->d; j++) pkvk_store(s->kv_dtype, pool, at + j, src[j]);
        }
    }
}

size_t pkvk_cpu_moe_bytes(const pkvk_model_shape *s, const pkvk_moe_shape *e) {
    const size_t layer = (size_t)s->hidden * e->experts * (1 + 3 * (size_t)e->inter);
    return 4 * layer * (size_t)(s->layers - e->first);
}

/* Expert x's tensor of MoE layer l: 0 its gate-up, 1 its down (-1: the router). */
static float *expert_weights(const pkvk_model_shape *s, const pkvk_moe_shape *e, uint64_t seed,
                             int l, int x, int which) {
    const size_t n =
        which < 0 ? (size_t)s->hidden * e->experts : (size_t)s->hidden * e->inter * (which ? 1 : 2);
    const int fan_in = which == 1 ? e->inter : s->hidden,
              t = PKVK_W_LAYER_COUNT + (which < 0 ? 0 : 1 + 2 * x + which);
    float *w = malloc(n * sizeof *w);
    for (size_t i = 0; w && i < n; i++)
        w[i] = pkvk_round(s->dtype, pkvk_model_weight(seed, l, t, i, fan_in));
    return w;
}

int pkvk_moe_shape_ok(const pkvk_model_shape *s, const pkvk_moe_shape *e) {
    return e->experts >= 1 && e->k >= 1 && e->k <= e->experts && e->k <= 64 && e->inter >= 1 &&
           e->first >= 0 && e->first < s->layers && e->experts <= (1 << 14);
}

int pkvk_moe_routing(const pkvk_moe_shape *e, pkvk_moe_route route, void *ctx, int l, int tokens,
                     int32_t *counts, int32_t *offsets) {
    const int E = e->experts;
    const int64_t slots = (int64_t)tokens * e->k;
    if (route) {
        int rc = route(ctx, l, tokens, counts);
        if (rc) return rc;
    } else
        for (int x = 0; x < E; x++) counts[x] = (int32_t)(slots / E + (x < slots % E));
    int64_t sum = 0;
    offsets[0] = 0;
    for (int x = 0; x < E; x++) {
        if (counts[x] < 0 || counts[x] > tokens) return PKVK_ERR_INVALID;
        sum += counts[x];
        offsets[x + 1] = (int32_t)sum;
    }
    return sum == slots ? PKVK_OK : PKVK_ERR_INVALID;
}

int pkvk_cpu_model_experts(pkvk_cpu_model *m, const pkvk_moe_shape *e, uint64_t seed,
                           pkvk_moe_route route, void *ctx) {
    const pkvk_model_shape *s = &m->s;
    if (m->e.experts || !pkvk_moe_shape_ok(s, e)) return PKVK_ERR_UNSUPPORTED;
    m->e = *e;
    m->route = route, m->route_ctx = ctx;
    int ok = !!(m->escratch = malloc(sizeof(float) * (size_t)(e->experts + 3 * e->inter))) &&
             (m->ecount = malloc(sizeof(int32_t) * (size_t)e->experts)) &&
             (m->eoff = malloc(sizeof(int32_t) * (size_t)(e->experts + 1)));
    for (int l = e->first; ok && l < s->layers; l++) {
        m->router[l] = expert_weights(s, e, seed, l, 0, -1);
        m->egu[l] = calloc((size_t)e->experts, sizeof(float *));
        m->edown[l] = calloc((size_t)e->experts, sizeof(float *));
        ok = m->router[l] && m->egu[l] && m->edown[l];
        for (int x = 0; ok && x < e->experts; x++)
            ok = (m->egu[l][x] = expert_weights(s, e, seed, l, x, 0)) &&
                 (m->edown[l][x] = expert_weights(s, e, seed, l, x, 1));
    }
    return ok ? PKVK_OK : PKVK_ERR_OUT_OF_MEMORY;
}

void pkvk_cpu_moe(const float *xn, int hidden, const pkvk_moe_shape *e, const float *router,
                  float *const *gate_up, float *const *down, const int *chosen, float *x,
                  float *scratch) {
    float *logit = scratch, *y = scratch + e->experts, *a = y + 2 * e->inter;
    matvec(xn, router, hidden, e->experts, logit, 0);
    const int k = e->k < 64 ? e->k : 64;
    int pick[64];
    double w[64], sum = 0, top = -INFINITY;
    for (int j = 0; j < k; j++) { /* the k largest, the lower index first; each taken out */
        int best = 0;
        if (chosen)
            best = chosen[j];
        else
            for (int c = 1; c < e->experts; c++)
                if (logit[c] > logit[best]) best = c;
        pick[j] = best, w[j] = logit[best], logit[best] = -INFINITY;
        if (w[j] > top) top = w[j];
    }
    for (int j = 0; j < k; j++) sum += w[j] = exp(w[j] - top);
    for (int j = 0; j < k; j++) {
        const float wt = (float)(w[j] / sum);
        matvec(xn, gate_up[pick[j]], hidden, 2 * e->inter, y, 0);
        for (int i = 0; i < e->inter; i++)
            a[i] = wt * (y[i] / (1.f + expf(-y[i])) * y[e->inter + i]);
        matvec(a, down[pick[j]], e->inter, hidden, x, 1);
    }
}

/* Layer l after attention, on token row x: the output projection of o onto it, the
 * norm, the gated MLP (or the MoE layer's) onto it. */
static void layer_post(pkvk_cpu_model *m, int l, float *x, const float *o, const int *chosen) {
    const pkvk_model_shape *s = &m->s;
    matvec(o, m->w[l][PKVK_W_O], s->hq * s->d, s->hidden, x, 1);
    rmsnorm(x, m->w[l][PKVK_W_LN2], s->hidden, s->eps, m->xn);
    if (m->e.experts && l >= m->e.first) {
        pkvk_cpu_moe(m->xn, s->hidden, &m->e, m->router[l], m->egu[l], m->edown[l], chosen, x,
                     m->escratch);
        return;
    }
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

/* Layer l's attention over rows of Q from row q on, on the layer's pages. */
static pkvk_batch layer_batch(pkvk_cpu_model *m, int l, int rows, uint16_t *q, const int32_t *bt,
                              int bt_stride, const int32_t *lens) {
    const pkvk_model_shape *s = &m->s;
    const pkvk_batch b = {.shape = {.hq = s->hq,
                                    .hkv = s->hkv,
                                    .d = s->d,
                                    .page_size = s->page_size,
                                    .dtype = s->dtype,
                                    .kv_dtype = s->kv_dtype},
                          .n_rows = rows,
                          .q = q,
                          .k_cache = pkvk_cpu_model_kv(m, l, 0),
                          .v_cache = pkvk_cpu_model_kv(m, l, 1),
                          .block_table = bt,
                          .bt_stride = bt_stride,
                          .seq_lens = lens,
                          .sm_scale = 1.0f / sqrtf((float)s->d),
                          .k_scale = m->unit,
                          .v_scale = m->unit,
                          .k_scale_all = m->unit ? 1.f : 0.f,
                          .v_scale_all = m->unit ? 1.f : 0.f};
    return b;
}

static void embed(const pkvk_cpu_model *m, int32_t token, float *x) {
    int32_t t = token % m->s.vocab;
    if (t < 0) t += m->s.vocab;
    memcpy(x, m->embed + (size_t)t * m->s.hidden, sizeof(float) * (size_t)m->s.hidden);
}

/* ---- the forward's operations (pkvk_forward.h) ---- */
static int op_stage(void *self, int n, const int32_t *lens, const int32_t *starts,
                    const int32_t *pages) {
    const pkvk_cpu_model *m = self;
    (void)pages;
    for (int i = 0; i < n; i++)
        if (lens[i] < 1 ||
            ((starts ? starts[i] : 0) + lens[i] + m->s.page_size - 1) / m->s.page_size > m->n_pages)
            return PKVK_ERR_INVALID;
    return PKVK_OK;
}

/* The rows' query tokens each (pkvk_fwd_in.q_len), and their token rows in all. */
static int qlen(const pkvk_fwd_in *in) {
    return in->q_len > 1 ? in->q_len : 1;
}
static int row_tokens(const pkvk_fwd_in *in) {
    return in->rows * qlen(in);
}

/* Token row k of the pieces' j-th token of piece g. */
#define PIECE_ROW(in, g, j) (row_tokens(in) + (in)->p.s[g].t0 + (j))

/* The rows' tokens: each row's last sampled one, then (a verify step) its proposals, here
 * synthetic tokens at their positions (the weights are random). */
static int op_begin(void *self, const pkvk_fwd_in *in) {
    pkvk_cpu_model *m = self;
    const int h = m->s.hidden, Q = qlen(in);
    if (in->rows > m->cap_rows || row_tokens(in) + in->T > m->cap_tokens) return PKVK_ERR_INVALID;
    for (int r = 0; r < in->rows; r++)
        for (int j = 0; j < Q; j++)
            embed(m, j ? pkvk_prompt_token(r, in->lens[r] - Q + j, m->s.vocab) : m->tok[r],
                  m->x + ((size_t)r * Q + j) * h);
    for (int g = 0; g < in->p.n; g++) {
        const pkvk_piece *c = &in->p.s[g];
        for (int j = 0; j < c->len; j++)
            embed(m, pkvk_prompt_token(c->req, c->q0 + j, m->s.vocab),
                  m->x + (size_t)PIECE_ROW(in, g, j) * h);
    }
    return PKVK_OK;
}

/* The norm, QKV, RoPE and K/V append of every token (rope is this one's part). */
static int op_pre(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_cpu_model *m = self;
    const pkvk_model_shape *s = &m->s;
    const size_t hd = (size_t)s->hq * s->d;
    for (int k = 0; k < row_tokens(in); k++) {
        const int r = k / qlen(in), pos = in->lens[r] - qlen(in) + k % qlen(in);
        layer_pre(m, l, m->x + (size_t)k * s->hidden, pos,
                  in->block_table[(size_t)r * in->bt_stride + pos / s->page_size], m->q + k * hd);
    }
    for (int g = 0; g < in->p.n; g++) {
        const pkvk_piece *c = &in->p.s[g];
        for (int j = 0; j < c->len; j++) {
            const int k = PIECE_ROW(in, g, j), pos = c->q0 + j;
            layer_pre(m, l, m->x + (size_t)k * s->hidden, pos,
                      in->pages[c->page_off + pos / s->page_size], m->q + k * hd);
        }
    }
    return PKVK_OK;
}

/* Each piece token's attention to its prompt's positions up to its own. */
static int op_pieces(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_cpu_model *m = self;
    const size_t hd = (size_t)m->s.hq * m->s.d;
    for (int g = 0; g < in->p.n; g++) {
        const pkvk_piece *c = &in->p.s[g];
        const int n_pages = (c->q0 + c->len + m->s.page_size - 1) / m->s.page_size;
        for (int j = 0; j < c->len; j++) {
            const int k = PIECE_ROW(in, g, j);
            const int32_t len = c->q0 + j + 1;
            const pkvk_batch b =
                layer_batch(m, l, 1, m->q + k * hd, in->pages + c->page_off, n_pages, &len);
            int rc = pkvk_cpu_reference(&b, m->o + k * hd);
            if (rc) return rc;
        }
    }
    return PKVK_OK;
}

/* The rest of the layer, token by token; an MoE layer's experts by the forward's routing
 * (pkvk_moe_route: token t's are those of slots t, t + tokens, ...). */
static int op_post(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_cpu_model *m = self;
    const size_t hd = (size_t)m->s.hq * m->s.d;
    const int tokens = row_tokens(in) + in->T, moe = m->e.experts && l >= m->e.first;
    int chosen[64];
    if (moe) {
        int rc = pkvk_moe_routing(&m->e, m->route, m->route_ctx, l, tokens, m->ecount, m->eoff);
        if (rc) return rc;
    }
    for (int t = 0; t < tokens; t++) {
        for (int j = 0; moe && j < m->e.k; j++)
            chosen[j] = pkvk_moe_slot_expert(m->eoff, m->e.experts, t + j * tokens);
        layer_post(m, l, m->x + (size_t)t * m->s.hidden, m->o + t * hd, moe ? chosen : NULL);
    }
    return PKVK_OK;
}

static int op_head(void *self, const pkvk_fwd_in *in) {
    pkvk_cpu_model *m = self;
    const int h = m->s.hidden, v = m->s.vocab;
    /* a verify row samples its last token only (an engine samples each, to judge the
     * proposals; here the acceptance is drawn) */
    for (int r = 0; r < in->rows; r++)
        m->tok[r] =
            head(m, m->x + ((size_t)r * qlen(in) + qlen(in) - 1) * h, m->logits + (size_t)r * v);
    for (int g = 0, k = in->rows; g < in->p.n; g++) {
        const pkvk_piece *c = &in->p.s[g];
        if (!c->last) continue;
        m->tok[k] =
            head(m, m->x + (size_t)PIECE_ROW(in, g, c->len - 1) * h, m->logits + (size_t)k * v);
        k++;
    }
    return PKVK_OK;
}

static const pkvk_fwd_ops cpu_model_ops = {op_stage,  op_begin, op_pre, NULL,
                                           op_pieces, op_post,  op_head};

pkvk_fwd_model pkvk_cpu_model_forward(pkvk_cpu_model *m) {
    return (pkvk_fwd_model){&cpu_model_ops, m, m->s.layers, m->s.page_size, m->cap_tokens, 1};
}

/* A decode step's route on the CPU, each layer's (pkvk_cpu_model_decode). */
typedef struct decode_ctx {
    pkvk_cpu_model *m;
    const pkvk_fwd_in *in;
    const pkvk_plan *p;
    pkvk_cpu_attend attend;
    float *part, *o0;
    uint16_t *q0;
    double *t_attention;
} decode_ctx;

pkvk_batch pkvk_cpu_model_attention(pkvk_cpu_model *m, int l, const pkvk_fwd_in *in, float **o) {
    *o = m->o;
    pkvk_batch b = layer_batch(m, l, in->rows, m->q, in->block_table, in->bt_stride, in->lens);
    b.q_len = qlen(in);
    return b;
}

static int decode_attend(void *ctx, int l) {
    decode_ctx *c = ctx;
    pkvk_cpu_model *m = c->m;
    const size_t n = (size_t)c->in->rows * m->s.hq * m->s.d;
    float *o;
    const pkvk_batch b = pkvk_cpu_model_attention(m, l, c->in, &o);
    const double t0 = pkv_clock_now();
    int rc = pkvk_cpu_run(&b, c->p, c->attend, c->part, o);
    if (c->t_attention) *c->t_attention += pkv_clock_now() - t0;
    if (!rc && l == 0 && c->o0) memcpy(c->o0, m->o, sizeof(float) * n);
    if (!rc && l == 0 && c->q0) memcpy(c->q0, m->q, 2 * n);
    return rc;
}

int pkvk_cpu_model_decode(pkvk_cpu_model *m, int rows, const int32_t *lens, const int32_t *bt,
                          int bt_stride, const pkvk_plan *p, pkvk_cpu_attend attend, float *part,
                          float *o0, uint16_t *q0, double *t_attention) {
    if (rows < 1 || p->n_rows != rows) return PKVK_ERR_INVALID;
    if (t_attention) *t_attention = 0;
    pkvk_fwd_in in = {.rows = rows, .lens = lens, .block_table = bt, .bt_stride = bt_stride};
    decode_ctx c = {m, &in, p, attend, part, o0, q0, t_attention};
    const pkvk_fwd_hooks h = {&c, decode_attend, NULL};
    const pkvk_fwd_model f = pkvk_cpu_model_forward(m);
    return pkvk_forward_step(&f, &in, 0, NULL, NULL, NULL, NULL, &h, NULL);
}

int pkvk_cpu_model_prefill(pkvk_cpu_model *m, int n, const int32_t *lens, const int32_t *pages,
                           const int32_t *starts, const uint8_t *last) {
    const pkvk_fwd_model f = pkvk_cpu_model_forward(m);
    return pkvk_forward_prefill(&f, n, lens, pages, starts, last, NULL, NULL);
}
