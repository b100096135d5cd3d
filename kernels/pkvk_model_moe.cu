// A mixture of experts' layers on the GPU (pkvk_model.h): the experts' weights, each
// forward's routing staged at its start, and a layer's MoE MLP: the norm, the router's
// GEMM, the tokens copied to their slots, the experts' gate-up and down GEMMs as cuBLAS
// grouped batched GEMMs (one group an active expert, its slots' rows), SiLU x up between,
// and each token's combine of its k slots onto the residual.
#include <stdlib.h>
#include <string.h>

#include "pkvk_model_impl.cuh"

using namespace pkvkm;

static size_t r8(size_t n) {
    return (n + 7) / 8 * 8;
}
// Elements of one MoE layer's weights: the router, then each expert's gate-up and down.
static size_t expert_elems(const pkvk_model_shape *s, const pkvk_moe_shape *e) {
    return 3 * (size_t)s->hidden * e->inter;
}
static size_t layer_elems(const pkvk_model_shape *s, const pkvk_moe_shape *e) {
    return r8((size_t)s->hidden * e->experts) + (size_t)e->experts * r8(expert_elems(s, e));
}
// Bytes of one MoE layer's staged routing: its offsets, then six arrays of a pointer a
// group (the gate-up GEMMs' weights, inputs and outputs, then the down GEMMs').
enum { PTR_ARRAYS = 6 };
static size_t stage_offsets_bytes(const pkvk_moe_shape *e) {
    return ((size_t)(e->experts + 1) * 4 + 15) / 16 * 16;
}
static size_t stage_bytes(const pkvk_moe_shape *e) {
    return stage_offsets_bytes(e) + (size_t)PTR_ARRAYS * e->experts * sizeof(void *);
}
static int moe_layers(const pkvk_model *m) {
    return m->e.experts ? m->s.layers - m->e.first : 0;
}
// MoE layer l's router, expert x's gate-up (which 0) or down (1).
static elem16 *router_w(pkvk_model *m, int l) {
    return m->ew + (size_t)(l - m->e.first) * layer_elems(&m->s, &m->e);
}
static elem16 *expert_w(pkvk_model *m, int l, int x, int which) {
    const pkvk_model_shape *s = &m->s;
    return router_w(m, l) + r8((size_t)s->hidden * m->e.experts) +
           (size_t)x * r8(expert_elems(s, &m->e)) +
           (which ? 2 * (size_t)s->hidden * m->e.inter : 0);
}

extern "C" size_t pkvk_model_moe_bytes(const pkvk_model_shape *s, const pkvk_moe_shape *e,
                                       int32_t cap_tokens) {
    const size_t layers = (size_t)(s->layers - e->first), slots = (size_t)cap_tokens * e->k;
    return 2 * layers * layer_elems(s, e) + 4 * (size_t)cap_tokens * e->experts +
           2 * slots * ((size_t)s->hidden + 3 * (size_t)e->inter) + layers * stage_bytes(e);
}

// ---- kernels ---------------------------------------------------------------------------
// xs[s] = xn[s mod tokens] for the slots s < tokens k, 16 bytes a thread.
static __global__ void to_slots(const uint4 *__restrict__ xn, uint4 *__restrict__ xs, int tokens,
                                int slots, int row16) {
    const size_t n = (size_t)slots * row16;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t s = i / row16;
        xs[i] = xn[(s % tokens) * row16 + i % row16];
    }
}

// Token t (a block) of `tokens`: the softmax of the router's logits over its k experts
// (those of slots t, t + tokens, ...), then x[t] += the slots' outputs so weighted.
template <class T>
static __global__ void combine(T *__restrict__ x, const T *__restrict__ zs,
                               const float *__restrict__ logits, const int32_t *__restrict__ off,
                               int experts, int k, int tokens, int hidden) {
    __shared__ float w[64];
    const int t = blockIdx.x;
    if (threadIdx.x == 0) {
        float top = -INFINITY, sum = 0.f;
        for (int j = 0; j < k; j++) {
            w[j] = logits[(size_t)t * experts + pkvk_moe_slot_expert(off, experts, t + j * tokens)];
            top = fmaxf(top, w[j]);
        }
        for (int j = 0; j < k; j++) sum += w[j] = expf(w[j] - top);
        for (int j = 0; j < k; j++) w[j] /= sum;
    }
    __syncthreads();
    T *xr = x + (size_t)t * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float acc = to_f(xr[i]);
        for (int j = 0; j < k; j++) acc += w[j] * to_f(zs[(size_t)(t + j * tokens) * hidden + i]);
        xr[i] = from_f<T>(acc);
    }
}

// ---- set-up ----------------------------------------------------------------------------
template <class T>
static __global__ void fill_expert(T *w, size_t n, uint64_t seed, int l, int t, int fan_in) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] = from_f<T>(pkvk_model_weight(seed, l, t, i, fan_in));
}

// Tensor t (PKVK_W_LAYER_COUNT on: the router, then each expert's two) of MoE layer l,
// as the CPU mirror draws it.
static int fill_layer(pkvk_model *m, int l) {
    const pkvk_model_shape *s = &m->s;
    const pkvk_moe_shape *e = &m->e;
    for (int t = -1; t < 2 * e->experts; t++) {
        const int x = t / 2, which = t < 0 ? -1 : t % 2;
        elem16 *w = t < 0 ? router_w(m, l) : expert_w(m, l, x, which);
        const size_t n =
            t < 0 ? (size_t)s->hidden * e->experts : (size_t)s->hidden * e->inter * (which ? 1 : 2);
        const int fan_in = which == 1 ? e->inter : s->hidden;
        with_t(s->dtype, [&](auto ty) {
            using T = decltype(ty);
            fill_expert<T><<<256, 256, 0, m->ctx->stream>>>((T *)w, n, m->seed, l,
                                                            PKVK_W_LAYER_COUNT + 1 + t, fan_in);
            return 0;
        });
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return pkvk_fail_cuda(err, "fill_expert", __FILE__, __LINE__);
    }
    return PKVK_OK;
}

extern "C" int pkvk_model_experts(pkvk_model *m, const pkvk_moe_shape *e, pkvk_moe_route route,
                                  void *ctx) {
    const pkvk_model_shape *s = &m->s;
    if (m->e.experts || !pkvk_moe_shape_ok(s, e) || s->hidden % 8)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "model: unsupported mixture of experts "
                                                   "(1-16384 experts, 1-64 a token, hidden a "
                                                   "multiple of 8)");
    const pkvk_model *donor = m->donor;
    if (donor && (!donor->ew || memcmp(&donor->e, e, sizeof *e)))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                             "model: shares the weights of a model of other experts");
    m->e = *e, m->route = route, m->route_ctx = ctx;
    const int L = moe_layers(m), E = e->experts;
    const size_t slots = (size_t)m->cap_tokens * e->k, w = (size_t)L * layer_elems(s, e);
    m->ew_shared = donor != nullptr;
    int rc = donor ? (m->ew = donor->ew, PKVK_OK) : pkvk_malloc((void **)&m->ew, w * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->rl, (size_t)m->cap_tokens * E * 4);
    if (!rc) rc = pkvk_malloc((void **)&m->xs, slots * s->hidden * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->ys, slots * 2 * e->inter * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->as, slots * e->inter * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->st_d, (size_t)L * stage_bytes(e));
    if (!rc) rc = pkvk_host_alloc((void **)&m->st_h, (size_t)L * stage_bytes(e));
    if (!rc && (!(m->groups = (int *)calloc((size_t)L * (E + 1) + 5 * (size_t)E, sizeof(int))) ||
                !(m->ab = (float *)malloc(2 * sizeof(float) * E)) ||
                !(m->opn = (cublasOperation_t *)malloc(sizeof(cublasOperation_t) * E))))
        rc = PKVK_ERR_OUT_OF_MEMORY;
    if (!rc && cudaEventCreateWithFlags(&m->st_ev, cudaEventDisableTiming) != cudaSuccess)
        rc = pkvk_fail_msg(PKVK_ERR_CUDA, "model: cudaEventCreate");
    if (!rc) rc = pkvk_memset(m->xs, 0, slots * s->hidden * 2);
    if (!rc) { // the grouped calls' fixed arguments: 2I, hidden, I, 1 a group
        int *c = m->groups + (size_t)L * (E + 1);
        for (int g = 0; g < E; g++) {
            c[g] = 2 * e->inter, c[E + g] = s->hidden, c[2 * E + g] = e->inter, c[3 * E + g] = 1;
            m->ab[g] = 1.f, m->ab[E + g] = 0.f, m->opn[g] = CUBLAS_OP_N;
        }
    }
    for (int l = e->first; l < s->layers && !rc && !donor; l++) rc = fill_layer(m, l);
    if (!rc) rc = pkvk_sync(m->ctx);
    m->moe_tokens = -1;
    return rc;
}

namespace pkvkm {

void moe_free(pkvk_model *m) {
    if (m->st_ev) cudaEventDestroy(m->st_ev);
    pkvk_free_each(m->ew_shared ? nullptr : m->ew, m->rl, m->xs, m->ys, m->as, m->st_d);
    pkvk_host_free(m->st_h);
    free(m->groups), free(m->ab), free(m->opn);
}

// The forward's routing over `tokens` tokens, every MoE layer's: its offsets and its
// groups (the active experts, in order) staged and copied to the device once the last
// forward's copy has left the staging buffer.
int moe_plan(pkvk_model *m, int tokens) {
    if (!m->e.experts || tokens < 1) return PKVK_OK;
    const pkvk_model_shape *s = &m->s;
    const int E = m->e.experts, L = moe_layers(m), I = m->e.inter, h = s->hidden;
    const size_t sb = stage_bytes(&m->e), ob = stage_offsets_bytes(&m->e);
    PKVK_CK(cudaEventSynchronize(m->st_ev));
    int32_t *counts = (int32_t *)(m->groups + (size_t)L * (E + 1) + 4 * (size_t)E);
    for (int li = 0; li < L; li++) {
        const int l = m->e.first + li;
        unsigned char *st = m->st_h + li * sb;
        int32_t *off = (int32_t *)st;
        if (pkvk_moe_routing(&m->e, m->route, m->route_ctx, l, tokens, counts, off))
            return pkvk_fail_msg(PKVK_ERR_INVALID,
                                 "model: an MoE layer's routing is not tokens x k slots with at "
                                 "most tokens on an expert");
        const void **p = (const void **)(st + ob);
        int *gn = m->groups + (size_t)li * (E + 1) + 1, g = 0;
        for (int x = 0; x < E; x++) {
            const int c = off[x + 1] - off[x];
            if (c == 0) continue;
            gn[g] = c;
            p[g] = expert_w(m, l, x, 0), p[E + g] = m->xs + (size_t)off[x] * h;
            p[2 * E + g] = m->ys + (size_t)off[x] * 2 * I;
            p[3 * E + g] = expert_w(m, l, x, 1), p[4 * E + g] = m->as + (size_t)off[x] * I;
            p[5 * E + g] = m->xs + (size_t)off[x] * h; // the down GEMM's output over its input
            g++;
        }
        gn[-1] = g;
    }
    int rc = pkvk_h2d_async(m->ctx, m->st_d, m->st_h, (size_t)L * sb);
    if (!rc && cudaEventRecord(m->st_ev, m->ctx->stream) != cudaSuccess)
        rc = pkvk_fail_msg(PKVK_ERR_CUDA, "model: cudaEventRecord");
    m->moe_tokens = rc ? -1 : tokens;
    return rc;
}

static int grouped(pkvk_model *m, int li, int second) {
    const int E = m->e.experts, L = moe_layers(m);
    const int *gn = m->groups + (size_t)li * (E + 1), *c = m->groups + (size_t)L * (E + 1);
    const int *wide = second ? c + E : c, *deep = second ? c + 2 * E : c + E;
    const void *const *p =
        (const void *const *)(m->st_d + li * stage_bytes(&m->e) + stage_offsets_bytes(&m->e)) +
        (second ? 3 * E : 0);
    cublasStatus_t st = pkvk_cublas.gemm_grouped_batched_ex(
        m->h, m->opn, m->opn, wide, gn + 1, deep, m->ab, p, m->ct, wide, p + E, m->ct, deep,
        m->ab + E, (void *const *)(p + 2 * E), m->ct, wide, gn[0], c + 3 * E, CUBLAS_COMPUTE_32F);
    return st == CUBLAS_STATUS_SUCCESS ? PKVK_OK : pkvk_blas_fail(st, "cublasGemmGroupedBatchedEx");
}

// MoE layer l's MLP over the forward's `rows` tokens, onto the residual m->x.
int moe_mlp(pkvk_model *m, int l, int rows) {
    const pkvk_model_shape *s = &m->s;
    const int E = m->e.experts, k = m->e.k, h = s->hidden, li = l - m->e.first;
    cudaStream_t st = m->ctx->stream;
    if (rows != m->moe_tokens)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "model: an MoE layer's rows are not its forward's");
    int rc = rmsnorm(st, s->dtype, m->x, m->xn, W(m, l, PKVK_W_LN2), rows, h, s->eps);
    if (!rc) {
        const float one = 1.f, zero = 0.f;
        cublasStatus_t cs = pkvk_cublas.gemm_ex(
            m->h, CUBLAS_OP_N, CUBLAS_OP_N, E, rows, h, &one, router_w(m, l), m->ct, E, m->xn,
            m->ct, h, &zero, m->rl, CUDA_R_32F, E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) rc = pkvk_blas_fail(cs, "cublasGemmEx (router)");
    }
    if (!rc) {
        const int blocks = rows * k < 1024 ? rows * k : 1024;
        to_slots<<<blocks, 256, 0, st>>>((const uint4 *)m->xn, (uint4 *)m->xs, rows, rows * k,
                                         h / 8);
        PKVK_CK(cudaGetLastError());
        rc = grouped(m, li, 0);
    }
    for (int r0 = 0; !rc && r0 < rows * k; r0 += 32768) { // the kernel's grid: 65535 rows
        const size_t I = m->e.inter;
        rc = silu_mul(st, s->dtype, m->ys + r0 * 2 * I, m->as + r0 * I,
                      rows * k - r0 < 32768 ? rows * k - r0 : 32768, m->e.inter, norm_in{});
    }
    if (!rc) rc = grouped(m, li, 1);
    if (!rc) {
        const int32_t *off = (const int32_t *)(m->st_d + li * stage_bytes(&m->e));
        with_t(s->dtype, [&](auto ty) {
            using T = decltype(ty);
            combine<T>
                <<<rows, 256, 0, st>>>((T *)m->x, (const T *)m->xs, m->rl, off, E, k, rows, h);
            return 0;
        });
        PKVK_CK(cudaGetLastError());
    }
    return rc;
}

} // namespace pkvkm
