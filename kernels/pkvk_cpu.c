/* CPU side of the kernel layer: a plain FP32 reference, and a mirror of the GPU
 * algorithm (per-split online softmax over 32-token tiles, then the exact merge, by
 * the rules of pkvk_softmax.h)
 * that runs any plan, so that scheduling logic is tested where there is no GPU. */
#include "pkvk.h"
#include "pkvk_softmax.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Token t of (row, kvh) in cache (the batch's K or V, with its FP8 scales), as floats
 * into x[d]: the values the kernels compute with. */
static void kv_load(const pkvk_batch *b, const uint16_t *cache, const float *scale, int32_t row,
                    int kvh, int32_t t, float *x) {
    const pkvk_shape *s = &b->shape;
    const int32_t page = b->block_table[(size_t)row * b->bt_stride + t / s->page_size];
    const size_t at = (((size_t)page * s->hkv + kvh) * s->page_size + t % s->page_size) * s->d;
    const float c = s->kv_dtype == PKVK_FP8_E4M3 ? scale[(size_t)page * s->hkv + kvh] : 1.f;
    pkvk_elems(s->kv_dtype, cache, at, s->d, c, x);
}

/* The batch's types: Q FP16 or BF16, KV any, FP8 with its scales; else a status. */
static int types_ok(const pkvk_batch *b) {
    const pkvk_shape *s = &b->shape;
    if (s->d > PKVK_MAX_HEAD_DIM) return PKVK_ERR_UNSUPPORTED;
    if ((s->dtype != PKVK_FP16 && s->dtype != PKVK_BF16) || s->kv_dtype < 0 ||
        s->kv_dtype >= PKVK_DTYPES ||
        (s->kv_dtype == PKVK_FP8_E4M3 && (!b->k_scale || !b->v_scale)))
        return PKVK_ERR_INVALID;
    return PKVK_OK;
}

/* The batch's query tokens a row (pkvk_batch.q_len). */
static int qlen(const pkvk_batch *b) {
    return b->q_len > 1 ? b->q_len : 1;
}

/* The keys query token j of a row attends: those up to its own position. */
static int32_t key_end(const pkvk_batch *b, int32_t row, int j) {
    return b->seq_lens[row] - qlen(b) + j + 1;
}

/* Query head h of a row's query token j, as floats into q[d]. */
static void q_load(const pkvk_batch *b, int32_t row, int j, int h, float *q) {
    const pkvk_shape *s = &b->shape;
    pkvk_elems(s->dtype, b->q, (((size_t)row * qlen(b) + j) * s->hq + h) * s->d, s->d, 1.f, q);
}

static float dot(const float *q, const float *k, int d) {
    float acc = 0.f;
    for (int j = 0; j < d; j++) acc += q[j] * k[j];
    return acc;
}

/* Two exact passes per head (the maximum score, then the weights exp(s - max) and
 * their sums), the scores computed in both: no buffer, so nothing is allocated. */
int pkvk_cpu_reference(const pkvk_batch *b, float *o) {
    const pkvk_shape *s = &b->shape;
    int G = s->hq / s->hkv, d = s->d;
    int rc = types_ok(b);
    if (rc) return rc;
    double acc[PKVK_MAX_HEAD_DIM];
    float q[PKVK_MAX_HEAD_DIM], x[PKVK_MAX_HEAD_DIM];
    if (qlen(b) > 1)
        for (int32_t i = 0; i < b->n_rows; i++)
            if (b->seq_lens[i] < qlen(b)) return PKVK_ERR_INVALID; /* a verify has its keys */
    for (int32_t i = 0; i < b->n_rows; i++)
        for (int qj = 0; qj < qlen(b); qj++)
            for (int h = 0; h < s->hq; h++) {
                const int kvh = h / G;
                const int32_t n = key_end(b, i, qj);
                q_load(b, i, qj, h, q);
                double m = -INFINITY, l = 0;
                for (int32_t t = 0; t < n; t++) {
                    kv_load(b, b->k_cache, b->k_scale, i, kvh, t, x);
                    double p = (double)dot(q, x, d) * b->sm_scale;
                    if (p > m) m = p;
                }
                memset(acc, 0, sizeof(double) * (size_t)d);
                for (int32_t t = 0; t < n; t++) {
                    kv_load(b, b->k_cache, b->k_scale, i, kvh, t, x);
                    double p = (double)dot(q, x, d) * b->sm_scale;
                    double w = exp(p - m);
                    kv_load(b, b->v_cache, b->v_scale, i, kvh, t, x);
                    l += w;
                    for (int j = 0; j < d; j++) acc[j] += w * x[j];
                }
                float *out = o + (((size_t)i * qlen(b) + qj) * s->hq + h) * d;
                for (int j = 0; j < d; j++) out[j] = (float)(acc[j] / l);
            }
    return PKVK_OK;
}

size_t pkvk_partial_floats(const pkvk_shape *s, int32_t n_slots) {
    return (size_t)n_slots * (size_t)s->hq * ((size_t)s->d + 2);
}

/* One online-softmax state (m, l, acc[d]) per query head, stored as acc[0..d-1],
 * m at acc[d], l at acc[d+1]; the rules (log2 domain, neutral states, edge cases)
 * are pkvk_softmax.h's, the ones the GPU kernels use. */
static void state_init(float *st, int d) {
    memset(st, 0, sizeof(float) * (size_t)d);
    st[d] = -INFINITY;
    st[d + 1] = 0.f;
}

static void state_merge(float *dst, const float *src, int d) {
    float M = fmaxf(dst[d], src[d]);
    if (M == -INFINITY) return; /* both neutral */
    float cd = pkvk_sm_weight(dst[d], M), cs = pkvk_sm_weight(src[d], M);
    for (int j = 0; j < d; j++) dst[j] = dst[j] * cd + src[j] * cs;
    dst[d] = M;
    dst[d + 1] = dst[d + 1] * cd + src[d + 1] * cs;
}

/* Attend tokens [t_begin, t_end) of (row, kvh) for its G query heads of each of its query
 * tokens (the tokens past a query token's own position left out: the causal mask), tile by
 * tile, writing q_len x G states of d+2 floats to st (a query token with no key in the range
 * keeps the neutral state). */
static void attend_range(const pkvk_batch *b, int32_t row, int kvh, int32_t t_begin, int32_t t_end,
                         float *st) {
    const pkvk_shape *s = &b->shape;
    int G = s->hq / s->hkv, d = s->d;
    const float scale = b->sm_scale * PKVK_LOG2E;
    float q[PKVK_MAX_HEAD_DIM], sc[PKVK_TILE], kv[PKVK_MAX_HEAD_DIM];
    for (int qg = 0; qg < qlen(b) * G; qg++) {
        const int qj = qg / G, g = qg % G;
        const int32_t end = t_end < key_end(b, row, qj) ? t_end : key_end(b, row, qj);
        float *x = st + (size_t)qg * (d + 2);
        state_init(x, d);
        q_load(b, row, qj, kvh * G + g, q);
        for (int32_t t0 = t_begin; t0 < end; t0 += PKVK_TILE) {
            int n = end - t0 < PKVK_TILE ? end - t0 : PKVK_TILE;
            float mx = -INFINITY;
            for (int t = 0; t < n; t++) {
                kv_load(b, b->k_cache, b->k_scale, row, kvh, t0 + t, kv);
                sc[t] = dot(q, kv, d) * scale;
                mx = fmaxf(mx, sc[t]);
            }
            float c = pkvk_sm_fold(&x[d], mx);
            for (int j = 0; j < d; j++) x[j] *= c;
            x[d + 1] *= c;
            for (int t = 0; t < n; t++) {
                float w = pkvk_sm_weight(sc[t], x[d]);
                kv_load(b, b->v_cache, b->v_scale, row, kvh, t0 + t, kv);
                x[d + 1] += w;
                for (int j = 0; j < d; j++) x[j] += w * kv[j];
            }
        }
    }
}

/* A slot's states of KV head kvh: q_len x G of d+2 floats (pkvk_partial_floats a query
 * token). */
static float *slot_state(const pkvk_batch *b, float *part, int32_t slot, int kvh) {
    const pkvk_shape *s = &b->shape;
    const int G = s->hq / s->hkv;
    return part + ((size_t)slot * s->hkv + kvh) * (size_t)qlen(b) * G * (s->d + 2);
}

static void write_out(const pkvk_batch *b, const float *st, int32_t row, int kvh, float *o) {
    const pkvk_shape *s = &b->shape;
    int G = s->hq / s->hkv, d = s->d;
    for (int qg = 0; qg < qlen(b) * G; qg++) {
        const float *x = st + (size_t)qg * (d + 2);
        float *out = o + (((size_t)row * qlen(b) + qg / G) * s->hq + kvh * G + qg % G) * d;
        for (int j = 0; j < d; j++) out[j] = x[j] / x[d + 1];
    }
}

/* Segmented merge of row `row`'s slots into o. */
static void merge_row(const pkvk_batch *b, float *part, const pkvk_plan *p, int32_t row, float *o) {
    const pkvk_shape *s = &b->shape;
    const int states = qlen(b) * (s->hq / s->hkv), d = s->d;
    for (int kvh = 0; kvh < s->hkv; kvh++) {
        float *acc = slot_state(b, part, p->split_offsets[row], kvh);
        for (int32_t sl = p->split_offsets[row] + 1; sl < p->split_offsets[row + 1]; sl++) {
            const float *src = slot_state(b, part, sl, kvh);
            for (int g = 0; g < states; g++)
                state_merge(acc + (size_t)g * (d + 2), src + (size_t)g * (d + 2), d);
        }
        write_out(b, acc, row, kvh, o);
    }
}

int pkvk_cpu_attend_whole(const pkvk_batch *b, const pkvk_plan *p, float *part) {
    const pkvk_shape *s = &b->shape;
    for (int32_t i = 0; i < p->n_rows; i++)
        for (int kvh = 0; kvh < s->hkv; kvh++)
            attend_range(b, i, kvh, 0, b->seq_lens[i],
                         slot_state(b, part, p->split_offsets[i], kvh));
    return PKVK_OK;
}

int pkvk_cpu_attend_buckets(const pkvk_batch *b, const pkvk_plan *p, float *part) {
    const pkvk_shape *s = &b->shape;
    for (int32_t bk = 0; bk < p->n_buckets; bk++) {
        const pkvk_bucket *B = &p->buckets[bk];
        for (int32_t k = B->row_begin; k < B->row_end; k++) {
            int32_t row = p->bucket_rows[k];
            for (int32_t sp = 0; sp < B->splits; sp++) {
                int32_t tb, te;
                pkvk_split_range(b->seq_lens[row], B->splits, sp, &tb, &te);
                for (int kvh = 0; kvh < s->hkv; kvh++)
                    attend_range(b, row, kvh, tb, te,
                                 slot_state(b, part, p->split_offsets[row] + sp, kvh));
            }
        }
    }
    return PKVK_OK;
}

int pkvk_cpu_attend_chunks(const pkvk_batch *b, const pkvk_plan *p, float *part) {
    const pkvk_shape *s = &b->shape;
    for (int32_t i = 0; i < p->n_rows; i++)
        for (int32_t c = 0; c < p->split_offsets[i + 1] - p->split_offsets[i]; c++) {
            int64_t tb = (int64_t)c * p->chunk_tokens, te = tb + p->chunk_tokens;
            if (te > b->seq_lens[i]) te = b->seq_lens[i];
            for (int kvh = 0; kvh < s->hkv; kvh++)
                attend_range(b, i, kvh, (int32_t)tb, (int32_t)te,
                             slot_state(b, part, p->split_offsets[i] + c, kvh));
        }
    return PKVK_OK;
}

int pkvk_cpu_attend_tasks(const pkvk_batch *b, const pkvk_plan *p, float *part) {
    const pkvk_shape *s = &b->shape;
    if (p->n_tasks && !p->tasks_written) return PKVK_ERR_INVALID; /* counts only */
    for (int32_t t = 0; t < p->n_tasks; t++) {
        const pkvk_task *T = &p->tasks[t / s->hkv];
        int kvh = t % s->hkv;
        attend_range(b, T->row, kvh, T->t_begin, T->t_end,
                     slot_state(b, part, p->split_offsets[T->row] + T->split, kvh));
    }
    return PKVK_OK;
}

int pkvk_cpu_run(const pkvk_batch *b, const pkvk_plan *p, pkvk_cpu_attend attend, float *part,
                 float *o) {
    const pkvk_shape *s = &b->shape;
    if (s->hq % s->hkv) return PKVK_ERR_UNSUPPORTED;
    if (!attend) return PKVK_ERR_INVALID;
    int rc = types_ok(b);
    for (int32_t i = 0; !rc && qlen(b) > 1 && i < b->n_rows; i++)
        if (b->seq_lens[i] < qlen(b)) rc = PKVK_ERR_INVALID; /* a verify has its keys */
    if (!rc) rc = attend(b, p, part);
    if (rc) return rc;
    for (int32_t i = 0; i < p->n_rows; i++) merge_row(b, part, p, i, o);
    return PKVK_OK;
}

void pkvk_compare(const float *o32, const uint16_t *o16, int o16_dtype, const float *ref, size_t n,
                  double *max_err, double *mean_err) {
    double mx = 0, sum = 0;
    for (size_t j = 0; j < n; j++) {
        double d = fabs((o32 ? (double)o32[j] : (double)pkvk_elem(o16_dtype, o16, j)) - ref[j]);
        if (!(d <= mx)) mx = d; /* NaN propagates */
        sum += d;
    }
    *max_err = mx;
    *mean_err = n ? sum / n : 0;
}
