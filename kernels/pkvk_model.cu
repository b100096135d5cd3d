// The served model's operations for the one forward (pkvk_forward.h): a decode step's
// rows, a mixed iteration's rows and prompt pieces, a prefill's chunks; the kernels
// live one operation a file (pkvk_model_*.cu, pkvk_model_impl.cuh).
#include <string.h>

#include <vector>

#include "pkvk_model_impl.cuh"

using namespace pkvkm;

int pkvkm::over(pkvk_model *m, int rows) {
    return rows > m->cap_tokens ? pkvk_fail_msg(PKVK_ERR_INVALID, "model: rows over capacity") : 0;
}

// The norm of rows of x for the kernel that reads a GEMM over x W' (its weights
// folded into W'): over PKVK_NORM_FUSED_ROWS rows their 1 / rms in m->inv (norm_rows
// computes it), else none (the reading kernel reduces each row itself).
static norm_in norm_of(pkvk_model *m, int rows) {
    const pkvk_model_shape *s = &m->s;
    return norm_in{m->x, rows > PKVK_NORM_FUSED_ROWS ? m->inv : nullptr, s->hidden, s->eps};
}
static int norm_rows(pkvk_model *m, int rows) {
    const pkvk_model_shape *s = &m->s;
    if (rows <= PKVK_NORM_FUSED_ROWS) return PKVK_OK;
    return inv_rms(m->ctx->stream, s->dtype, m->x, m->inv, rows, s->hidden, s->eps);
}
// The norm of rows from `first` on.
static norm_in rows_from(norm_in n, int first) {
    n.x += (size_t)first * n.hidden;
    if (n.inv) n.inv += first;
    return n;
}

// A layer after its attention over rows of o: output projection, residual, norm, MLP
// (an MoE layer's: pkvk_model_moe.cu), residual.
static int layer_post(pkvk_model *m, int l, int rows, const uint16_t *o) {
    const pkvk_model_shape *s = &m->s;
    if (over(m, rows)) return PKVK_ERR_INVALID;
    if (rows == 0) return PKVK_OK;
    const int hd = s->hq * s->d, h = s->hidden;
    int rc =
        gemm(m->h, m->ct, rows, h, hd, (const elem16 *)o, hd, W(m, l, PKVK_W_O), h, m->x, h, 1.f);
    if (m->e.experts && l >= m->e.first) return rc ? rc : moe_mlp(m, l, rows);
    if (!rc) rc = norm_rows(m, rows);
    if (!rc) /* y = x W'_GU: the norm's weights folded in, its 1 / rms applied by the SiLU */
        rc = gemm(m->h, m->ct, rows, 2 * s->inter, h, m->x, h, W(m, l, PKVK_W_GU), 2 * s->inter,
                  m->y, 2 * s->inter, 0.f);
    if (!rc) rc = silu_mul(m->ctx->stream, s->dtype, m->y, m->a, rows, s->inter, norm_of(m, rows));
    if (!rc)
        rc = gemm(m->h, m->ct, rows, h, s->inter, m->a, s->inter, W(m, l, PKVK_W_DOWN), h, m->x, h,
                  1.f);
    return rc;
}

// Final norm over rows of src (already gathered), LM head and argmax into tok, in
// groups of PKVK_MODEL_HEAD_ROWS.
static int head(pkvk_model *m, const elem16 *src, int rows, int32_t *tok) {
    const pkvk_model_shape *s = &m->s;
    int rc = rmsnorm(m->ctx->stream, s->dtype, src, m->xn, W(m, -1, PKVK_W_NORM), rows, s->hidden,
                     s->eps);
    for (int r0 = 0; !rc && r0 < rows; r0 += PKVK_MODEL_HEAD_ROWS) {
        int n = rows - r0 < PKVK_MODEL_HEAD_ROWS ? rows - r0 : PKVK_MODEL_HEAD_ROWS;
        rc = gemm(m->h, m->ct, n, s->vocab, s->hidden, m->xn + (size_t)r0 * s->hidden, s->hidden,
                  W(m, -1, PKVK_W_HEAD), s->vocab, m->logits, s->vocab, 0.f);
        if (!rc) rc = argmax(m->ctx->stream, s->dtype, m->logits, n, s->vocab, tok + r0);
    }
    m->last_rows = rows;
    return rc;
}

// The pieces' page lists to the device (each piece's first ceil((start + len) / ps)
// pages of its prompt), once the previous user of pages_h is done.
int pkvkm::stage_pages(pkvk_model *m, int n, const int32_t *lens, const int32_t *starts,
                       const int32_t *pages) {
    const int ps = m->s.page_size;
    int32_t n_pages = 0;
    for (int i = 0; i < n; i++) {
        const int end = (starts ? starts[i] : 0) + lens[i];
        if (lens[i] < 1 || end > m->max_prompt)
            return pkvk_fail_msg(PKVK_ERR_INVALID, "model prefill: prompt longer than max_prompt");
        n_pages += (end + ps - 1) / ps;
    }
    if (n_pages > m->n_pages)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "model prefill: more pages than the pool");
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    memcpy(m->pages_h, pages, (size_t)n_pages * 4);
    return pkvk_h2d_async(m->ctx, m->pages_d, m->pages_h, (size_t)n_pages * 4);
}

extern "C" int pkvk_model_prefill(pkvk_model *m, int n, const int32_t *lens, const int32_t *pages,
                                  const int32_t *starts, const uint8_t *last) {
    const pkvk_fwd_model f = pkvk_model_forward(m);
    return pkvk_forward_prefill(&f, n, lens, pages, starts, last, nullptr, nullptr);
}

// Layer l's four GEMMs over rows of the activation buffers (their values as they are).
int pkvkm::layer_gemms(pkvk_model *m, int l, int rows) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d, hd = s->hq * s->d, h = s->hidden;
    int rc =
        gemm(m->h, m->ct, rows, qkvw, h, m->xn, h, W(m, l, PKVK_W_QKV), qkvw, m->qkv, qkvw, 0.f);
    if (!rc) rc = gemm(m->h, m->ct, rows, h, hd, m->o, hd, W(m, l, PKVK_W_O), h, m->x, h, 1.f);
    if (!rc)
        rc = gemm(m->h, m->ct, rows, 2 * s->inter, h, m->xn, h, W(m, l, PKVK_W_GU), 2 * s->inter,
                  m->y, 2 * s->inter, 0.f);
    if (!rc)
        rc = gemm(m->h, m->ct, rows, h, s->inter, m->a, s->inter, W(m, l, PKVK_W_DOWN), h, m->x, h,
                  1.f);
    return rc;
}

extern "C" int pkvk_model_warmup(pkvk_model *m) {
    const int ps = m->s.page_size;
    // cuBLAS picks its kernel by the width and loads it at its first use (10-15 ms on
    // the H200): every width up to 16, then every 8th to 512, 32nd to 2048, 128th on.
    for (int w = 1; w <= m->cap_tokens; w += w < 16 ? 1 : w < 512 ? 8 : w < 2048 ? 32 : 128) {
        int rc = layer_gemms(m, 0, w);
        if (!rc && w <= PKVK_MODEL_HEAD_ROWS)
            rc = gemm(m->h, m->ct, w, m->s.vocab, m->s.hidden, m->xn, m->s.hidden,
                      W(m, -1, PKVK_W_HEAD), m->s.vocab, m->logits, m->s.vocab, 0.f);
        if (rc) return rc;
    }
    int most = m->cap_tokens < m->max_prompt ? m->cap_tokens : m->max_prompt;
    if (most > m->n_pages * ps) most = m->n_pages * ps;
    std::vector<int32_t> ids((size_t)(most + ps - 1) / ps);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = (int32_t)i;
    int rc = PKVK_OK;
    for (int len = 1; !rc; len *= 8) {
        const int32_t n = len < most ? len : most;
        rc = pkvk_model_prefill(m, 1, &n, ids.data(), nullptr, nullptr);
        if (n == most) break;
    }
    if (rc) return rc;
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    return PKVK_OK;
}

// ---- the forward's operations (pkvk_forward.h) -----------------------------------------
static int op_stage(void *self, int n, const int32_t *lens, const int32_t *starts,
                    const int32_t *pages) {
    return stage_pages((pkvk_model *)self, n, lens, starts, pages);
}

// The rows' query tokens each (a verify step's k + 1), and their token rows in all.
static int qlen(const pkvk_fwd_in *in) {
    return in->q_len > 1 ? in->q_len : 1;
}
static int row_tokens(const pkvk_fwd_in *in) {
    return in->rows * qlen(in);
}

// The embedding of each row's last sampled token (a verify step's: then its proposals) and
// of the pieces' tokens (after the rows'); a FlashInfer prefill attention's plan for the
// pieces; the experts' routing.
static int op_begin(void *self, const pkvk_fwd_in *in) {
    pkvk_model *m = (pkvk_model *)self;
    const pkvk_model_shape *s = &m->s;
    cudaStream_t st = m->ctx->stream;
    const int R = row_tokens(in);
    int rc = over(m, R + in->T);
    if (!rc && m->fip && in->p.n > 0) rc = plan_chunk(m, in->p);
    if (!rc) rc = moe_plan(m, R + in->T);
    segs_t none;
    none.n = 0;
    if (!rc && R > 0)
        rc = embed(st, W(m, -1, PKVK_W_EMBED), m->x, m->tok, none, R, s->hidden, s->vocab, in->lens,
                   qlen(in));
    if (!rc && in->T > 0)
        rc = embed(st, W(m, -1, PKVK_W_EMBED), m->x + (size_t)R * s->hidden, nullptr, in->p, in->T,
                   s->hidden, s->vocab);
    return rc;
}

// The norm and QKV over every token: qkv = x W'_QKV (the norm's weights folded in).
static int op_qkv(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_model *m = (pkvk_model *)self;
    const pkvk_model_shape *s = &m->s;
    const int rows = row_tokens(in) + in->T, qkvw = (s->hq + 2 * s->hkv) * s->d;
    int rc = norm_rows(m, rows);
    return rc ? rc
              : gemm(m->h, m->ct, rows, qkvw, s->hidden, m->x, s->hidden, W(m, l, PKVK_W_QKV), qkvw,
                     m->qkv, qkvw, 0.f);
}

// RoPE, the norm's scale and the K/V append: the rows' at position lens[i] - 1 (a verify
// step's k + 1 tokens from lens[i] - k - 1) by the block table (their Q into in->q), the
// pieces' by their pages (Q into m->qp).
static int op_rope(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_model *m = (pkvk_model *)self;
    const pkvk_model_shape *s = &m->s;
    const int rows = row_tokens(in), T = in->T, qkvw = (s->hq + 2 * s->hkv) * s->d;
    const norm_in nin = norm_of(m, rows + T);
    void *kp = pkvk_model_kv(m, l, 0), *vp = pkvk_model_kv(m, l, 1);
    segs_t none;
    none.n = 0;
    int rc = PKVK_OK;
    if (rows > 0)
        rc = rope_append(m->ctx->stream, false, s, rows, m->qkv, in->lens, in->block_table,
                         in->bt_stride, nullptr, none, m->cap_tokens, 1, kp, vp, (elem16 *)in->q,
                         nin, qlen(in));
    if (!rc && T > 0)
        rc = rope_append(m->ctx->stream, true, s, T, m->qkv + (size_t)rows * qkvw, nullptr, nullptr,
                         0, m->pages_d, in->p, m->cap_tokens, m->fip != nullptr, kp, vp, m->qp,
                         rows_from(nin, rows));
    return rc;
}

// The pieces' attention, into m->o after the rows'.
static int op_pieces(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_model *m = (pkvk_model *)self;
    return chunk_attention(m, l, in->p, in->T, m->o + (size_t)row_tokens(in) * m->s.hq * m->s.d);
}

// The rest of the layer: over the route's output alone (a decode step), or the rows'
// beside the pieces' in m->o.
static int op_post(void *self, int l, const pkvk_fwd_in *in) {
    pkvk_model *m = (pkvk_model *)self;
    const size_t hd = (size_t)m->s.hq * m->s.d;
    const int R = row_tokens(in);
    if (in->T == 0) return layer_post(m, l, R, in->o);
    if (R > 0 && (const void *)in->o != (const void *)m->o)
        PKVK_CK(cudaMemcpyAsync(m->o, in->o, R * hd * 2, cudaMemcpyDeviceToDevice, m->ctx->stream));
    return layer_post(m, l, R + in->T, (const uint16_t *)m->o);
}

// The head over the rows (a verify step's: each row's last token, as the CPU mirror
// samples; the acceptance is drawn), then the pieces that end their prompts (gathered into
// qkv, free now).
static int op_head(void *self, const pkvk_fwd_in *in) {
    pkvk_model *m = (pkvk_model *)self;
    const pkvk_model_shape *s = &m->s;
    const int rows = in->rows, Q = qlen(in);
    const size_t hb = (size_t)s->hidden * 2; // a token row's bytes
    cudaStream_t st = m->ctx->stream;
    if (in->T == 0 && Q == 1) return head(m, m->x, rows, m->tok);
    if (rows > 0)
        PKVK_CK(cudaMemcpy2DAsync(m->qkv, hb, m->x + (size_t)(Q - 1) * s->hidden, Q * hb, hb, rows,
                                  cudaMemcpyDeviceToDevice, st));
    int rc = PKVK_OK;
    if (in->heads > 0)
        rc = gather_rows(st, m->x + (size_t)row_tokens(in) * s->hidden,
                         m->qkv + (size_t)rows * s->hidden, in->p, in->heads, s->hidden);
    return rc ? rc : head(m, m->qkv, rows + in->heads, m->tok);
}

static const pkvk_fwd_ops model_ops = {op_stage,  op_begin, op_qkv, op_rope,
                                       op_pieces, op_post,  op_head};

extern "C" pkvk_fwd_model pkvk_model_forward(pkvk_model *m) {
    return pkvk_fwd_model{&model_ops, m, m->s.layers, m->s.page_size, m->cap_tokens, 1};
}

extern "C" int pkvk_model_read(pkvk_model *m, int rows, uint16_t *logits, int32_t *tokens) {
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    int last = (rows - 1) % PKVK_MODEL_HEAD_ROWS + 1;
    if (logits)
        PKVK_CK(
            cudaMemcpy(logits, m->logits, (size_t)last * m->s.vocab * 2, cudaMemcpyDeviceToHost));
    if (tokens) PKVK_CK(cudaMemcpy(tokens, m->tok, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    return PKVK_OK;
}

extern "C" int pkvk_model_set_tokens(pkvk_model *m, int rows, const int32_t *tokens) {
    if (over(m, rows)) return PKVK_ERR_INVALID;
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    PKVK_CK(cudaMemcpy(m->tok, tokens, (size_t)rows * 4, cudaMemcpyHostToDevice));
    return PKVK_OK;
}

extern "C" int pkvk_model_read_hidden(pkvk_model *m, int rows, uint16_t *x) {
    PKVK_CK(cudaStreamSynchronize(m->ctx->stream));
    PKVK_CK(cudaMemcpy(x, m->x, (size_t)rows * m->s.hidden * 2, cudaMemcpyDeviceToHost));
    return PKVK_OK;
}
