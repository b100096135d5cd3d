/* The served model's forward (pkvk_forward.h): the one layer loop. */
#include "pkvk_forward.h"

#include "pkvk_core.h"
#include "pkvk_fi.h" /* pkvk_fail_msg */

#include <stddef.h>

static int mark(const pkvk_fwd_hooks *h, pkvk_fwd_at at, int l) {
    return h && h->mark ? h->mark(h->ctx, at, l) : PKVK_OK;
}

/* A layer's part: the mark before it, then the model's operation (NULL: none). */
static int part(const pkvk_fwd_model *m, const pkvk_fwd_hooks *h, pkvk_fwd_at at, int l,
                int (*op)(void *, int, const pkvk_fwd_in *), const pkvk_fwd_in *in) {
    int rc = mark(h, at, l);
    return rc || !op ? rc : op(m->self, l, in);
}

const char *pkvk_fwd_at_name(pkvk_fwd_at at) {
    switch (at) {
    case PKVK_AT_STAGE:
        return "prompt pieces";
    case PKVK_AT_BEGIN:
        return "embedding";
    case PKVK_AT_QKV:
    case PKVK_AT_ROPE:
        return "layer before attention";
    case PKVK_AT_ATTEND:
        return "attention";
    case PKVK_AT_PIECES:
        return "prompt pieces' attention";
    case PKVK_AT_POST:
    case PKVK_AT_LAYER_END:
        return "layer after attention";
    case PKVK_AT_HEAD:
        return "LM head";
    }
    return "forward";
}

int pkvk_forward(const pkvk_fwd_model *m, const pkvk_fwd_in *in, const pkvk_fwd_hooks *h,
                 pkvk_fwd_at *failed) {
    const pkvk_fwd_ops *ops = m->ops;
    pkvk_fwd_at at = PKVK_AT_BEGIN;
    int rc = in->q_len > 1 && !m->verify
                 ? pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                                 "forward: this model runs one query token a row (a verify "
                                 "step's run on the CPU mirror)")
                 : PKVK_OK;
    if (!rc && ops->begin) rc = ops->begin(m->self, in);
    for (int l = 0; !rc && l < m->layers; l++) {
        rc = part(m, h, at = PKVK_AT_QKV, l, ops->qkv, in);
        if (!rc) rc = part(m, h, at = PKVK_AT_ROPE, l, ops->rope, in);
        if (!rc) rc = mark(h, at = PKVK_AT_ATTEND, l);
        if (!rc && in->rows && h && h->attend) rc = h->attend(h->ctx, l);
        if (!rc) rc = part(m, h, at = PKVK_AT_PIECES, l, in->p.n ? ops->pieces : NULL, in);
        if (!rc) rc = part(m, h, at = PKVK_AT_POST, l, ops->post, in);
        if (!rc) rc = mark(h, at = PKVK_AT_LAYER_END, l);
    }
    if (!rc) {
        rc = mark(h, at = PKVK_AT_HEAD, m->layers);
        if (!rc && ops->head && in->rows + in->heads > 0) rc = ops->head(m->self, in);
    }
    if (rc && failed) *failed = at;
    return rc;
}

/* The pieces of one forward from n prompt pieces; *in's rows are kept. */
static int set_pieces(const pkvk_fwd_model *m, pkvk_fwd_in *in, int n, const int32_t *lens,
                      const int32_t *pages, const int32_t *starts, const uint8_t *last) {
    if (n > PKVK_MAX_PIECES)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "forward: more than 64 prompt pieces");
    in->pages = pages, in->p.n = n, in->T = 0, in->heads = 0;
    for (int i = 0, page_off = 0; i < n; i++) {
        const int q0 = starts ? starts[i] : 0, ends = !last || last[i];
        in->p.s[i] = (pkvk_piece){in->T, lens[i], q0, page_off, i, ends};
        in->T += lens[i], in->heads += ends;
        page_off += (q0 + lens[i] + m->page_size - 1) / m->page_size;
    }
    return in->rows * (in->q_len > 1 ? in->q_len : 1) + in->T > m->cap_tokens
               ? pkvk_fail_msg(PKVK_ERR_INVALID, "forward: more tokens than the model's rows")
               : PKVK_OK;
}

int pkvk_forward_step(const pkvk_fwd_model *m, pkvk_fwd_in *in, int n, const int32_t *lens,
                      const int32_t *pages, const int32_t *starts, const uint8_t *last,
                      const pkvk_fwd_hooks *h, pkvk_fwd_at *failed) {
    int rc = set_pieces(m, in, n, lens, pages, starts, last);
    if (!rc && n > 0 && m->ops->stage) rc = m->ops->stage(m->self, n, lens, starts, pages);
    if (rc) {
        if (failed) *failed = PKVK_AT_STAGE;
        return rc;
    }
    return pkvk_forward(m, in, h, failed);
}

int pkvk_forward_prefill(const pkvk_fwd_model *m, int n, const int32_t *lens, const int32_t *pages,
                         const int32_t *starts, const uint8_t *last, const pkvk_fwd_hooks *h,
                         pkvk_fwd_at *failed) {
    int rc = m->ops->stage ? m->ops->stage(m->self, n, lens, starts, pages) : PKVK_OK;
    if (rc && failed) *failed = PKVK_AT_STAGE;
    pkvk_fwd_in in = {.pages = pages};
    for (int i = 0, page_off = 0; i < n && !rc; i++) {
        const int q_begin = starts ? starts[i] : 0, q_end = q_begin + lens[i];
        for (int q0 = q_begin; q0 < q_end && !rc;) {
            int len = q_end - q0;
            if (len > m->cap_tokens - in.T) len = m->cap_tokens - in.T;
            const int ends = q0 + len == q_end && (!last || last[i]);
            in.p.s[in.p.n++] = (pkvk_piece){in.T, len, q0, page_off, i, ends};
            in.T += len, q0 += len, in.heads += ends;
            if (in.T == m->cap_tokens || in.p.n == PKVK_MAX_PIECES) {
                rc = pkvk_forward(m, &in, h, failed);
                in.p.n = 0, in.T = 0, in.heads = 0;
            }
        }
        page_off += (q_end + m->page_size - 1) / m->page_size;
    }
    if (!rc && in.p.n) rc = pkvk_forward(m, &in, h, failed);
    return rc;
}
