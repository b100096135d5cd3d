// The served model's forward (pkvk_model.h): a decode step's layers around the step's
// attention route, a mixed iteration's rows and prompt chunks, and a prefill in chunks;
// each operation lives in its own file (pkvk_model_*.cu, pkvk_model_impl.cuh).
#include <string.h>

#include <vector>

#include "pkvk_model_impl.cuh"

using namespace pkvkm;

int pkvkm::over(pkvk_model *m, int rows) {
    return rows > m->cap_tokens ? pkvk_fail_msg(PKVK_ERR_INVALID, "model: rows over capacity") : 0;
}

// The RMSNorm of rows of x for the kernel that reads a GEMM over x W' (its weights
// folded into W'): over PKVK_NORM_FUSED_ROWS rows their 1 / rms into m->inv by a
// kernel of its own, else nothing (the reading kernel reduces each row itself).
static int row_norms(pkvk_model *m, int rows, norm_in *nin) {
    const pkvk_model_shape *s = &m->s;
    *nin = norm_in{m->x, nullptr, s->hidden, s->eps};
    if (rows <= PKVK_NORM_FUSED_ROWS) return PKVK_OK;
    nin->inv = m->inv;
    return inv_rms(m->ctx->stream, m->x, m->inv, rows, s->hidden, s->eps);
}
// The norm of rows from `first` on.
static norm_in rows_from(norm_in n, int first) {
    n.x += (size_t)first * n.hidden;
    if (n.inv) n.inv += first;
    return n;
}

// The norm and QKV of layer l over rows: qkv = x W'_QKV (the norm's weights folded
// in), *nin the rows' norm for the RoPE that reads it.
static int pre_gemm(pkvk_model *m, int l, int rows, norm_in *nin) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d;
    int rc = row_norms(m, rows, nin);
    return rc ? rc
              : gemm(m->h, rows, qkvw, s->hidden, m->x, s->hidden, W(m, l, PKVK_W_QKV), qkvw,
                     m->qkv, qkvw, 0.f);
}

// A layer after its attention over rows of o: output projection, residual, norm, MLP,
// residual.
static int layer_post(pkvk_model *m, int l, int rows, const uint16_t *o) {
    const pkvk_model_shape *s = &m->s;
    if (over(m, rows)) return PKVK_ERR_INVALID;
    if (rows == 0) return PKVK_OK;
    const int hd = s->hq * s->d, h = s->hidden;
    norm_in nin;
    int rc = gemm(m->h, rows, h, hd, (const __half *)o, hd, W(m, l, PKVK_W_O), h, m->x, h, 1.f);
    if (!rc) rc = row_norms(m, rows, &nin);
    if (!rc) /* y = x W'_GU: the norm's weights folded in, its 1 / rms applied by the SiLU */
        rc = gemm(m->h, rows, 2 * s->inter, h, m->x, h, W(m, l, PKVK_W_GU), 2 * s->inter, m->y,
                  2 * s->inter, 0.f);
    if (!rc) rc = silu_mul(m->ctx->stream, m->y, m->a, rows, s->inter, nin);
    if (!rc)
        rc = gemm(m->h, rows, h, s->inter, m->a, s->inter, W(m, l, PKVK_W_DOWN), h, m->x, h, 1.f);
    return rc;
}

// Final norm over rows of src (already gathered), LM head and argmax into tok, in
// groups of PKVK_MODEL_HEAD_ROWS.
static int head(pkvk_model *m, const __half *src, int rows, int32_t *tok) {
    const pkvk_model_shape *s = &m->s;
    int rc = rmsnorm(m->ctx->stream, src, m->xn, W(m, -1, PKVK_W_NORM), rows, s->hidden, s->eps);
    for (int r0 = 0; !rc && r0 < rows; r0 += PKVK_MODEL_HEAD_ROWS) {
        int n = rows - r0 < PKVK_MODEL_HEAD_ROWS ? rows - r0 : PKVK_MODEL_HEAD_ROWS;
        rc = gemm(m->h, n, s->vocab, s->hidden, m->xn + (size_t)r0 * s->hidden, s->hidden,
                  W(m, -1, PKVK_W_HEAD), s->vocab, m->logits, s->vocab, 0.f);
        if (!rc) rc = argmax(m->ctx->stream, m->logits, n, s->vocab, tok + r0);
    }
    m->last_rows = rows;
    return rc;
}

// One chunk of a prefill: T rows in segs.
static int prefill_chunk(pkvk_model *m, const segs_t &segs, int T, int heads) {
    const pkvk_model_shape *s = &m->s;
    cudaStream_t st = m->ctx->stream;
    if (m->fip) {
        int rc = plan_chunk(m, segs);
        if (rc) return rc;
    }
    int rc = embed(st, W(m, -1, PKVK_W_EMBED), m->x, nullptr, segs, T, s->hidden, s->vocab);
    if (rc) return rc;
    for (int l = 0; l < s->layers; l++) {
        const bool probe = l == 0 && m->probe[0];
        if (probe) PKVK_CK(cudaEventRecord(m->probe[0], st));
        norm_in nin;
        rc = pre_gemm(m, l, T, &nin);
        if (rc) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[1], st));
        rc = rope_append(st, true, s, T, m->qkv, nullptr, nullptr, 0, m->pages_d, segs,
                         m->cap_tokens, m->fip != nullptr, (__half *)pkvk_model_kv(m, l, 0),
                         (__half *)pkvk_model_kv(m, l, 1), m->qp, nin);
        if (rc) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[2], st));
        if ((rc = chunk_attention(m, l, segs, T, m->o))) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[3], st));
        if ((rc = layer_post(m, l, T, (const uint16_t *)m->o))) return rc;
        if (probe) PKVK_CK(cudaEventRecord(m->probe[4], st));
    }
    if (heads == 0) return PKVK_OK;
    // The sampling rows, gathered into qkv (free now), through the head.
    rc = gather_rows(st, m->x, m->qkv, segs, heads, s->hidden);
    return rc ? rc : head(m, m->qkv, heads, m->tok);
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
    const int ps = m->s.page_size;
    int rc = stage_pages(m, n, lens, starts, pages);
    segs_t segs;
    segs.n = 0;
    int T = 0, heads = 0, page_off = 0;
    for (int i = 0; i < n && !rc; i++) {
        const int q_begin = starts ? starts[i] : 0, q_end = q_begin + lens[i];
        for (int q0 = q_begin; q0 < q_end && !rc;) {
            int len = q_end - q0;
            if (len > m->cap_tokens - T) len = m->cap_tokens - T;
            seg_t &g = segs.s[segs.n++];
            g = seg_t{T, len, q0, page_off, i, q0 + len == q_end && (!last || last[i])};
            T += len, q0 += len, heads += g.last;
            if (T == m->cap_tokens || segs.n == MAX_SEGS) {
                rc = prefill_chunk(m, segs, T, heads);
                segs.n = 0, T = 0, heads = 0;
            }
        }
        page_off += (q_end + ps - 1) / ps;
    }
    if (!rc && segs.n) rc = prefill_chunk(m, segs, T, heads);
    return rc;
}

// Layer l's four GEMMs over rows of the activation buffers (their values as they are).
int pkvkm::layer_gemms(pkvk_model *m, int l, int rows) {
    const pkvk_model_shape *s = &m->s;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d, hd = s->hq * s->d, h = s->hidden;
    int rc = gemm(m->h, rows, qkvw, h, m->xn, h, W(m, l, PKVK_W_QKV), qkvw, m->qkv, qkvw, 0.f);
    if (!rc) rc = gemm(m->h, rows, h, hd, m->o, hd, W(m, l, PKVK_W_O), h, m->x, h, 1.f);
    if (!rc)
        rc = gemm(m->h, rows, 2 * s->inter, h, m->xn, h, W(m, l, PKVK_W_GU), 2 * s->inter, m->y,
                  2 * s->inter, 0.f);
    if (!rc)
        rc = gemm(m->h, rows, h, s->inter, m->a, s->inter, W(m, l, PKVK_W_DOWN), h, m->x, h, 1.f);
    return rc;
}

extern "C" int pkvk_model_warmup(pkvk_model *m) {
    const int ps = m->s.page_size;
    // cuBLAS picks its kernel by the width and loads it at its first use (10-15 ms on
    // the H200): every width up to 16, then every 8th to 512, 32nd to 2048, 128th on.
    for (int w = 1; w <= m->cap_tokens; w += w < 16 ? 1 : w < 512 ? 8 : w < 2048 ? 32 : 128) {
        int rc = layer_gemms(m, 0, w);
        if (!rc && w <= PKVK_MODEL_HEAD_ROWS)
            rc = gemm(m->h, w, m->s.vocab, m->s.hidden, m->xn, m->s.hidden, W(m, -1, PKVK_W_HEAD),
                      m->s.vocab, m->logits, m->s.vocab, 0.f);
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

// ---- a step: decode rows, and a mixed iteration's prompt pieces (pkvk_model.h) ----------
extern "C" int pkvk_model_step_begin(pkvk_model *m, int rows, int n, const int32_t *lens,
                                     const int32_t *pages, const int32_t *starts,
                                     const uint8_t *last) {
    const pkvk_model_shape *s = &m->s;
    int T = 0, heads = 0, page_off = 0, rc = PKVK_OK;
    if (n > MAX_SEGS)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "model: more than 64 prompt chunks in one step");
    for (int i = 0; i < n; i++) T += lens[i];
    if (n > 0 && rows < 1)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "model: a mixed step without rows");
    if (over(m, rows + T)) return PKVK_ERR_INVALID;
    // A decode step stages nothing (no wait for the pinned page list: graph capture)
    if (n > 0 && (rc = stage_pages(m, n, lens, starts, pages))) return rc;
    segs_t &segs = m->mix_segs;
    segs.n = n;
    for (int i = 0, t0 = 0; i < n; i++) {
        const int q0 = starts ? starts[i] : 0;
        segs.s[i] = seg_t{t0, lens[i], q0, page_off, i, !last || last[i]};
        t0 += lens[i], heads += segs.s[i].last;
        page_off += (q0 + lens[i] + s->page_size - 1) / s->page_size;
    }
    m->mix_rows = rows, m->mix_T = T, m->mix_heads = heads;
    if (m->fip && n > 0 && (rc = plan_chunk(m, segs))) return rc;
    segs_t none;
    none.n = 0;
    if (rows > 0 && (rc = embed(m->ctx->stream, W(m, -1, PKVK_W_EMBED), m->x, m->tok, none, rows,
                                s->hidden, s->vocab)))
        return rc;
    if (T == 0) return PKVK_OK;
    return embed(m->ctx->stream, W(m, -1, PKVK_W_EMBED), m->x + (size_t)rows * s->hidden, nullptr,
                 segs, T, s->hidden, s->vocab);
}

extern "C" int pkvk_model_step_pre(pkvk_model *m, int l, const int32_t *lens, const int32_t *bt,
                                   int bt_stride, uint16_t *q) {
    const pkvk_model_shape *s = &m->s;
    const int rows = m->mix_rows, T = m->mix_T, W_ = (s->hq + 2 * s->hkv) * s->d;
    if (rows + T == 0) return PKVK_OK;
    norm_in nin;
    int rc = pre_gemm(m, l, rows + T, &nin);
    if (rc) return rc;
    segs_t none;
    none.n = 0;
    __half *kp = (__half *)pkvk_model_kv(m, l, 0), *vp = (__half *)pkvk_model_kv(m, l, 1);
    rc = rope_append(m->ctx->stream, false, s, rows, m->qkv, lens, bt, bt_stride, nullptr, none,
                     m->cap_tokens, 1, kp, vp, (__half *)q, nin);
    if (rc || T == 0) return rc;
    return rope_append(m->ctx->stream, true, s, T, m->qkv + (size_t)rows * W_, nullptr, nullptr, 0,
                       m->pages_d, m->mix_segs, m->cap_tokens, m->fip != nullptr, kp, vp, m->qp,
                       rows_from(nin, rows));
}

extern "C" int pkvk_model_step_post(pkvk_model *m, int l, const uint16_t *o) {
    const pkvk_model_shape *s = &m->s;
    const int rows = m->mix_rows, T = m->mix_T;
    const size_t hd = (size_t)s->hq * s->d;
    cudaStream_t st = m->ctx->stream;
    if (T == 0) return layer_post(m, l, rows, o); // a decode step: the route's o as it is
    // The rows' attention, then the pieces', side by side in m->o.
    if ((const void *)o != (const void *)m->o)
        PKVK_CK(cudaMemcpyAsync(m->o, o, (size_t)rows * hd * 2, cudaMemcpyDeviceToDevice, st));
    int rc = chunk_attention(m, l, m->mix_segs, T, m->o + (size_t)rows * hd);
    return rc ? rc : layer_post(m, l, rows + T, (const uint16_t *)m->o);
}

extern "C" int pkvk_model_step_head(pkvk_model *m) {
    const pkvk_model_shape *s = &m->s;
    const int rows = m->mix_rows, heads = m->mix_heads;
    cudaStream_t st = m->ctx->stream;
    if (m->mix_T == 0) return rows ? head(m, m->x, rows, m->tok) : PKVK_OK; // a decode step
    // The rows, then the chunks that end their prompts, gathered into qkv (free now).
    PKVK_CK(
        cudaMemcpyAsync(m->qkv, m->x, (size_t)rows * s->hidden * 2, cudaMemcpyDeviceToDevice, st));
    if (heads > 0) {
        int rc = gather_rows(st, m->x + (size_t)rows * s->hidden, m->qkv + (size_t)rows * s->hidden,
                             m->mix_segs, heads, s->hidden);
        if (rc) return rc;
    }
    return head(m, m->qkv, rows + heads, m->tok);
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
