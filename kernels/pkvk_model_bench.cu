// Timers of the served model's parts (bench model, calibrate): GEMMs, the prefill's
// attention and a prefill chunk's layer by parts, each the median of repeats after an
// L2 flush; and square GEMMs for the measured GEMM throughput.
#include <algorithm>
#include <vector>

#include "pkvk_model_impl.cuh"

using namespace pkvkm;

static int median_ms(std::vector<float> &v, float *ms) {
    std::sort(v.begin(), v.end());
    *ms = v.empty() ? 0.f : v[v.size() / 2];
    return PKVK_OK;
}

// Times reps calls of f (each after an L2 flush) with events; the median.
template <class F> static int time_reps(const pkvk_ctx *c, int reps, F f, float *ms) {
    pkvk_event *a = nullptr, *b = nullptr;
    int rc = pkvk_event_create(c, &a);
    if (!rc) rc = pkvk_event_create(c, &b);
    std::vector<float> t;
    for (int r = 0; r < reps + 2 && !rc; r++) {
        float x;
        rc = pkvk_flush_l2(c);
        if (!rc) rc = pkvk_event_record(a);
        if (!rc) rc = f();
        if (!rc) rc = pkvk_event_record(b);
        if (!rc) rc = pkvk_event_elapsed(a, b, &x);
        if (!rc && r >= 2) t.push_back(x); // two warm-up calls
    }
    pkvk_event_destroy(a);
    pkvk_event_destroy(b);
    return rc ? rc : median_ms(t, ms);
}

extern "C" int pkvk_model_time_gemm(pkvk_model *m, int g, int rows, int reps, float *ms) {
    const pkvk_model_shape *s = &m->s;
    if (over(m, rows) || g < 0 || g > 4) return PKVK_ERR_INVALID;
    const int qkvw = (s->hq + 2 * s->hkv) * s->d, hd = s->hq * s->d, h = s->hidden;
    const int k[5] = {h, hd, h, s->inter, h}, n[5] = {qkvw, h, 2 * s->inter, h, s->vocab};
    const elem16 *w[5] = {W(m, 0, PKVK_W_QKV), W(m, 0, PKVK_W_O), W(m, 0, PKVK_W_GU),
                          W(m, 0, PKVK_W_DOWN), W(m, -1, PKVK_W_HEAD)};
    if (g == 4 && rows > PKVK_MODEL_HEAD_ROWS) return PKVK_ERR_INVALID;
    // Operands from the activation buffers (each large enough), output to y / logits.
    elem16 *out = g == 4 ? m->logits : g == 0 ? m->qkv : g == 2 ? m->y : m->x;
    const elem16 *in = g == 1 ? m->o : g == 3 ? m->a : m->xn;
    return time_reps(
        m->ctx, reps,
        [&] { return gemm(m->h, m->ct, rows, n[g], k[g], in, k[g], w[g], n[g], out, n[g], 0.f); },
        ms);
}

extern "C" int pkvk_model_time_prefill_attn(pkvk_model *m, int n, const int32_t *lens, int reps,
                                            float *ms) {
    const int ps = m->s.page_size;
    if (n < 1 || n > PKVK_MAX_PIECES)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "prefill timing: 1-64 prompts");
    segs_t segs;
    segs.n = n;
    int T = 0, pages = 0;
    for (int i = 0; i < n; i++) {
        segs.s[i] = seg_t{T, lens[i], 0, pages, i, 1};
        T += lens[i], pages += (lens[i] + ps - 1) / ps;
    }
    if (over(m, T)) return PKVK_ERR_INVALID;
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; i++) ids[i] = i;
    int rc = stage_pages(m, n, lens, nullptr, ids.data());
    if (!rc && m->fip) rc = plan_chunk(m, segs);
    return rc ? rc
              : time_reps(
                    m->ctx, reps, [&] { return chunk_attention(m, 0, segs, T, m->o); }, ms);
}

// A prefill chunk's layer 0 timed in parts: events before it, after the norm and QKV
// GEMM, the RoPE and K/V append, the attention and the rest of the layer (the
// forward's marks; a later chunk's overwrite an earlier one's).
enum { PROBES = 5 };
struct probes {
    cudaStream_t st;
    cudaEvent_t ev[PROBES];
};
static int probe_mark(void *ctx, pkvk_fwd_at at, int l) {
    const int k = at == PKVK_AT_QKV         ? 0
                  : at == PKVK_AT_ROPE      ? 1
                  : at == PKVK_AT_ATTEND    ? 2
                  : at == PKVK_AT_POST      ? 3
                  : at == PKVK_AT_LAYER_END ? 4
                                            : -1;
    if (l != 0 || k < 0) return PKVK_OK;
    probes *p = (probes *)ctx;
    PKVK_CK(cudaEventRecord(p->ev[k], p->st));
    return PKVK_OK;
}

extern "C" int pkvk_model_time_prefill_parts(pkvk_model *m, int n, const int32_t *lens, int reps,
                                             float parts[5]) {
    const int ps = m->s.page_size;
    int32_t pages = 0;
    for (int i = 0; i < n; i++) pages += (lens[i] + ps - 1) / ps;
    if (pages > m->n_pages)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "prefill timing: more pages than the model's");
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; i++) ids[i] = i;
    std::vector<float> t[PROBES];
    pkvk_event *a = nullptr, *b = nullptr;
    probes pr = {m->ctx->stream, {}};
    const pkvk_fwd_model f = pkvk_model_forward(m);
    const pkvk_fwd_hooks hooks = {&pr, nullptr, probe_mark};
    int rc = pkvk_event_create(m->ctx, &a);
    if (!rc) rc = pkvk_event_create(m->ctx, &b);
    for (int k = 0; k < PROBES && !rc; k++)
        if (cudaEventCreate(&pr.ev[k]) != cudaSuccess)
            rc = pkvk_fail_msg(PKVK_ERR_CUDA, "prefill timing: cudaEventCreate");
    for (int r = 0; r < reps + 1 && !rc; r++) { // one warm-up
        float x, y;
        rc = pkvk_event_record(a);
        if (!rc)
            rc = pkvk_forward_prefill(&f, n, lens, ids.data(), nullptr, nullptr, &hooks, nullptr);
        if (!rc) rc = pkvk_event_record(b);
        if (!rc) rc = pkvk_event_elapsed(a, b, &x);
        for (int k = 1; k < PROBES && !rc; k++) {
            if (cudaEventElapsedTime(&y, pr.ev[k - 1], pr.ev[k]) != cudaSuccess)
                rc = pkvk_fail_msg(PKVK_ERR_CUDA, "prefill timing: cudaEventElapsedTime");
            else if (r)
                t[k - 1].push_back(y);
        }
        if (!rc && r) t[PROBES - 1].push_back(x);
    }
    for (int k = 0; k < PROBES; k++) {
        if (pr.ev[k]) cudaEventDestroy(pr.ev[k]);
        if (!rc) median_ms(t[k], &parts[k]);
    }
    pkvk_event_destroy(a);
    pkvk_event_destroy(b);
    return rc;
}

extern "C" int pkvk_model_time_gemms_forward(pkvk_model *m, int rows, float *ms) {
    if (over(m, rows)) return PKVK_ERR_INVALID;
    auto forward = [&] {
        int rc = 0;
        for (int l = 0; l < m->s.layers && !rc; l++) rc = layer_gemms(m, l, rows);
        return rc;
    };
    return time_reps(m->ctx, 3, forward, ms);
}

// count back-to-back n^3 GEMMs on fresh operands; reps medians of their mean.
extern "C" int pkvk_time_square_gemm(const pkvk_ctx *ctx, int n, int reps, float *ms) {
    return pkvk_time_square_gemms(ctx, n, 1, reps, ms);
}

extern "C" int pkvk_time_square_gemms(const pkvk_ctx *ctx, int n, int count, int reps, float *ms) {
    elem16 *a = nullptr, *b = nullptr, *c = nullptr;
    cublasHandle_t h = nullptr;
    size_t bytes = (size_t)n * n * 2;
    int rc = pkvk_malloc((void **)&a, bytes);
    if (!rc) rc = pkvk_malloc((void **)&b, bytes);
    if (!rc) rc = pkvk_malloc((void **)&c, bytes);
    if (!rc) rc = pkvk_memset(a, 0x3c, bytes); // small positive halves
    if (!rc) rc = pkvk_memset(b, 0x3c, bytes);
    if (!rc) {
        rc = pkvk_blas_handle(&h, ctx->stream);
    }
    auto run = [&] {
        int rc = 0;
        for (int i = 0; i < count && !rc; i++)
            rc = gemm(h, CUDA_R_16F, n, n, n, a, n, b, n, c, n, 0.f);
        return rc;
    };
    if (!rc) rc = time_reps(ctx, reps, run, ms);
    if (!rc) *ms /= count;
    if (h) pkvk_cublas.destroy(h);
    pkvk_free(a), pkvk_free(b), pkvk_free(c);
    return rc;
}

extern "C" int pkvk_model_time_moe(pkvk_model *m, int tokens, int reps, float *ms) {
    if (!m->e.experts || tokens < 1 || over(m, tokens))
        return pkvk_fail_msg(PKVK_ERR_INVALID, "MoE timing: a model with experts, 1 to its rows");
    int rc = moe_plan(m, tokens);
    return rc ? rc
              : time_reps(
                    m->ctx, reps, [&] { return moe_mlp(m, m->e.first, tokens); }, ms);
}
