// PersistentKV paged decode attention: split, bucket, workqueue and fused routes,
// the segmented merge, and the ref_paged baseline, all from one CTA body.
//
// A CTA owns one (row, KV head, token range) and computes all G query heads that
// share the KV head. Its 128 threads form GROUPS token groups of D/8 lanes; a lane
// holds 8 dimensions of q for each of the G heads. Each 32-token tile is streamed
// through a STAGES-deep cp.async pipeline into shared memory; every thread copies
// exactly the 16-byte chunks it later reads itself, so the pipeline needs no
// barrier, only cp.async.wait_group. Each token group keeps its own exact online
// softmax state (m, l, acc) in FP32; the GROUPS states are merged once at the end.
// Scores are kept in the log2 domain (q pre-scaled by sm_scale * log2 e) so that
// every exponential is one exp2f.
#include <cuda_fp16.h>
#include <stdint.h>

#include "pkvk_cuda.h"

namespace {

constexpr int THREADS = 128;
constexpr int STAGES = 4;

enum Mode { MODE_REF = 0, MODE_BUCKET = 1, MODE_TASKS = 2, MODE_FUSED = 3 };

struct Params {
    const __half *q;
    __half *o;
    const __half *k, *v;
    const int32_t *bt;
    int32_t bt_stride;
    const int32_t *seq_lens;
    int hq, hkv, ps, ps_shift; // ps_shift >= 0 when the page size is a power of two
    float scale_log2;
    const int32_t *split_offsets;
    const int32_t *bucket_rows;
    int32_t row_begin, splits;
    const pkvk_task *tasks;
    float *part_acc; // [slot][hkv][G][D]
    float *part_ml;  // [slot][hkv][G][2]: m (log2 domain), l
    int *counters;   // [n_rows * hkv] fused completion counters, left at 0
};

__device__ __forceinline__ float neg_inf() {
    return __int_as_float(0xff800000);
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void unpack8(const uint4 &u, float *f) {
    const __half2 *h = reinterpret_cast<const __half2 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 x = __half22float2(h[i]);
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}

// Merge n partial states (m, l, acc[d]) of one query head into O[d]. A neutral
// state (m = -inf) contributes nothing; LOAD_CG reads through L2 only, for states
// other CTAs of the same launch wrote (the fused route).
template <bool LOAD_CG>
__device__ __forceinline__ float merge_states(const float *ml, const float *acc, int n,
                                              int stride_ml, int stride_acc) {
    float M = neg_inf();
    for (int s = 0; s < n; s++)
        M = fmaxf(M, LOAD_CG ? __ldcg(ml + s * stride_ml) : ml[s * stride_ml]);
    float L = 0.f, a = 0.f;
    for (int s = 0; s < n; s++) {
        float m = LOAD_CG ? __ldcg(ml + s * stride_ml) : ml[s * stride_ml];
        if (m == neg_inf()) continue;
        float w = exp2f(m - M);
        L += w * (LOAD_CG ? __ldcg(ml + s * stride_ml + 1) : ml[s * stride_ml + 1]);
        a += w * (LOAD_CG ? __ldcg(acc + (size_t)s * stride_acc) : acc[(size_t)s * stride_acc]);
    }
    return a / L;
}

template <int D, int G, int MODE>
__global__ void __launch_bounds__(THREADS) attn_kernel(const Params p) {
    constexpr int LANES = D / 8;            // threads per token group
    constexpr int GROUPS = THREADS / LANES; // token groups per CTA
    constexpr int TOK = PKVK_TILE / GROUPS; // tokens per group per tile
    static_assert(LANES <= 32 && (32 % LANES) == 0 && PKVK_TILE % GROUPS == 0, "shape");

    int row, kvh, split, tb, te;
    if (MODE == MODE_REF) {
        row = blockIdx.x, kvh = blockIdx.y, split = 0, tb = 0, te = p.seq_lens[row];
    } else if (MODE == MODE_BUCKET) {
        row = p.bucket_rows[p.row_begin + blockIdx.x], kvh = blockIdx.y, split = blockIdx.z;
        // pkvk_split_range on the row's true length.
        int len = p.seq_lens[row], tiles = (len + PKVK_TILE - 1) / PKVK_TILE;
        int tps = (tiles + p.splits - 1) / p.splits, t0 = split * tps;
        tb = min(t0, tiles) * PKVK_TILE;
        te = min(min(t0 + tps, tiles) * PKVK_TILE, len);
        if (tb > len) tb = len;
    } else {
        pkvk_task t = p.tasks[blockIdx.x];
        row = t.row, kvh = t.kvh, split = t.split, tb = t.t_begin, te = t.t_end;
    }
    const int slot0 = MODE == MODE_REF ? 0 : p.split_offsets[row];
    const int nslots = MODE == MODE_REF ? 1 : p.split_offsets[row + 1] - slot0;
    const bool direct = nslots == 1;
    const size_t sidx = ((size_t)(slot0 + split) * p.hkv + kvh) * G; // first state of this CTA
    const int tid = threadIdx.x;

    if (tb >= te) { // empty split: the neutral state, before touching Q or shared memory
        for (int i = tid; i < G * D; i += THREADS) p.part_acc[sidx * D + i] = 0.f;
        if (tid < G) {
            p.part_ml[(sidx + tid) * 2] = neg_inf();
            p.part_ml[(sidx + tid) * 2 + 1] = 0.f;
        }
        return;
    }

    extern __shared__ uint4 smem[]; // [STAGES][2 (K, V)][PKVK_TILE][LANES]
    const int lane = tid % LANES, grp = tid / LANES;

    float q[G][8];
#pragma unroll
    for (int g = 0; g < G; g++) {
        uint4 u = *reinterpret_cast<const uint4 *>(p.q + ((size_t)row * p.hq + kvh * G + g) * D +
                                                   lane * 8);
        unpack8(u, q[g]);
#pragma unroll
        for (int i = 0; i < 8; i++) q[g][i] *= p.scale_log2;
    }
    float m[G], l[G], acc[G][8];
#pragma unroll
    for (int g = 0; g < G; g++) {
        m[g] = neg_inf(), l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[g][i] = 0.f;
    }

    const int n_tiles = (te - tb + PKVK_TILE - 1) / PKVK_TILE;
    const int32_t *bt_row = p.bt + (size_t)row * p.bt_stride;
    const size_t page_stride = (size_t)p.hkv * p.ps * D,
                 head_off = (size_t)kvh * p.ps * D + lane * 8;

    auto issue = [&](int it) {
        if (it < n_tiles) {
            uint4 *st = smem + (size_t)(it % STAGES) * 2 * PKVK_TILE * LANES;
#pragma unroll
            for (int j = 0; j < TOK; j++) {
                int tt = j * GROUPS + grp, t = tb + it * PKVK_TILE + tt;
                if (t < te) {
                    int pi = p.ps_shift >= 0 ? t >> p.ps_shift : t / p.ps;
                    int in = t - pi * p.ps;
                    size_t off = (size_t)bt_row[pi] * page_stride + head_off + (size_t)in * D;
                    cp_async16(st + tt * LANES + lane, p.k + off);
                    cp_async16(st + (PKVK_TILE + tt) * LANES + lane, p.v + off);
                }
            }
        }
        cp_async_commit(); // empty groups keep the wait count uniform
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) issue(s);

    for (int it = 0; it < n_tiles; it++) {
        issue(it + STAGES - 1);
        cp_async_wait<STAGES - 1>();
        const uint4 *st = smem + (size_t)(it % STAGES) * 2 * PKVK_TILE * LANES;
        float s[G][TOK];
#pragma unroll
        for (int j = 0; j < TOK; j++) {
            int tt = j * GROUPS + grp;
            bool valid = tb + it * PKVK_TILE + tt < te;
            float kf[8];
            unpack8(st[tt * LANES + lane], kf);
#pragma unroll
            for (int g = 0; g < G; g++) {
                float d = 0.f;
#pragma unroll
                for (int i = 0; i < 8; i++) d = fmaf(q[g][i], kf[i], d);
#pragma unroll
                for (int off = LANES / 2; off > 0; off >>= 1)
                    d += __shfl_xor_sync(0xffffffffu, d, off);
                s[g][j] = valid ? d : neg_inf();
            }
        }
#pragma unroll
        for (int g = 0; g < G; g++) {
            float mx = s[g][0];
#pragma unroll
            for (int j = 1; j < TOK; j++) mx = fmaxf(mx, s[g][j]);
            float m_new = fmaxf(m[g], mx);
            if (m_new == neg_inf()) { // this group has seen no valid token yet
#pragma unroll
                for (int j = 0; j < TOK; j++) s[g][j] = 0.f;
                continue;
            }
            float c = exp2f(m[g] - m_new); // 0 when m[g] = -inf
            l[g] *= c;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[g][i] *= c;
            m[g] = m_new;
#pragma unroll
            for (int j = 0; j < TOK; j++) {
                s[g][j] = exp2f(s[g][j] - m_new);
                l[g] += s[g][j];
            }
        }
#pragma unroll
        for (int j = 0; j < TOK; j++) {
            int tt = j * GROUPS + grp;
            if (tb + it * PKVK_TILE + tt >= te) continue; // its V chunk was never copied
            float vf[8];
            unpack8(st[(PKVK_TILE + tt) * LANES + lane], vf);
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[g][i] = fmaf(s[g][j], vf[i], acc[g][i]);
        }
    }
    cp_async_wait<0>();
    __syncthreads(); // the pipeline buffers become the reduction buffer

    // Merge the GROUPS states: red_ml[grp][g] = (m, l), red_acc[grp][g][D].
    float *red_ml = reinterpret_cast<float *>(smem);
    float *red_acc = red_ml + 2 * GROUPS * G;
    if (lane == 0)
#pragma unroll
        for (int g = 0; g < G; g++) {
            red_ml[(grp * G + g) * 2] = m[g];
            red_ml[(grp * G + g) * 2 + 1] = l[g];
        }
    __syncthreads();
    float M[G], L[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        M[g] = neg_inf();
        for (int k = 0; k < GROUPS; k++) M[g] = fmaxf(M[g], red_ml[(k * G + g) * 2]);
        L[g] = 0.f;
        for (int k = 0; k < GROUPS; k++) {
            float mk = red_ml[(k * G + g) * 2];
            if (mk != neg_inf()) L[g] += exp2f(mk - M[g]) * red_ml[(k * G + g) * 2 + 1];
        }
        float c = m[g] == neg_inf() ? 0.f : exp2f(m[g] - M[g]);
#pragma unroll
        for (int i = 0; i < 8; i++) red_acc[(grp * G + g) * D + lane * 8 + i] = acc[g][i] * c;
    }
    __syncthreads();
    for (int idx = tid; idx < G * D; idx += THREADS) {
        int g = idx / D, d = idx % D;
        float a = 0.f;
        for (int k = 0; k < GROUPS; k++) a += red_acc[(k * G + g) * D + d];
        float Lg = 0.f;
#pragma unroll
        for (int gg = 0; gg < G; gg++)
            if (gg == g) Lg = L[gg]; // constant-index select keeps L in registers
        if (direct)
            p.o[((size_t)row * p.hq + kvh * G + g) * D + d] = __float2half(a / Lg);
        else
            p.part_acc[(sidx + g) * D + d] = a;
    }
    if (direct) return;
    if (tid < G) {
        float Mg = 0.f, Lg = 0.f;
#pragma unroll
        for (int gg = 0; gg < G; gg++)
            if (gg == tid) Mg = M[gg], Lg = L[gg];
        p.part_ml[(sidx + tid) * 2] = Mg;
        p.part_ml[(sidx + tid) * 2 + 1] = Lg;
    }
    if (MODE != MODE_FUSED) return;

    // Fused: the last CTA of this (row, kvh) to finish merges all its splits.
    __shared__ int s_last;
    __threadfence(); // publish this CTA's partial state before counting it
    __syncthreads();
    if (tid == 0) {
        int *ctr = p.counters + (size_t)row * p.hkv + kvh;
        s_last = atomicAdd(ctr, 1) == nslots - 1;
        if (s_last) *ctr = 0; // ready for the next launch
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const size_t base = ((size_t)slot0 * p.hkv + kvh) * G;
    for (int idx = tid; idx < G * D; idx += THREADS) {
        int g = idx / D, d = idx % D;
        float out = merge_states<true>(p.part_ml + (base + g) * 2, p.part_acc + (base + g) * D + d,
                                       nslots, p.hkv * G * 2, p.hkv * G * D);
        p.o[((size_t)row * p.hq + kvh * G + g) * D + d] = __float2half(out);
    }
}

// Segmented merge: block (row, query head), one thread per dimension. Rows with a
// single slot were written directly by their split and are skipped.
template <int D> __global__ void __launch_bounds__(D) merge_kernel(const Params p, int G) {
    int row = p.bucket_rows ? p.bucket_rows[p.row_begin + blockIdx.x] : blockIdx.x;
    int h = blockIdx.y, kvh = h / G, g = h % G;
    int s0 = p.split_offsets[row], n = p.split_offsets[row + 1] - s0;
    if (n <= 1) return;
    size_t base = ((size_t)s0 * p.hkv + kvh) * G + g;
    float out = merge_states<false>(p.part_ml + base * 2, p.part_acc + base * D + threadIdx.x, n,
                                    p.hkv * G * 2, p.hkv * G * D);
    p.o[((size_t)row * p.hq + h) * D + threadIdx.x] = __float2half(out);
}

constexpr size_t smem_bytes(int D) {
    return (size_t)STAGES * 2 * PKVK_TILE * D * sizeof(__half);
}

template <int D, int G, int MODE> int launch_attn(dim3 grid, const Params &p) {
    constexpr int GROUPS = THREADS / (D / 8);
    static_assert((2 * GROUPS * G + GROUPS * G * D) * sizeof(float) <= smem_bytes(D),
                  "the group reduction fits in the pipeline's shared memory");
    static bool configured = false; // raise the dynamic shared memory limit once
    if (!configured) {
        PKVK_CK(cudaFuncSetAttribute(attn_kernel<D, G, MODE>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)smem_bytes(D)));
        configured = true;
    }
    attn_kernel<D, G, MODE><<<grid, THREADS, smem_bytes(D)>>>(p);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

template <int D, int MODE> int launch_g(int G, dim3 grid, const Params &p) {
    switch (G) {
    case 1:
        return launch_attn<D, 1, MODE>(grid, p);
    case 2:
        return launch_attn<D, 2, MODE>(grid, p);
    case 4:
        return launch_attn<D, 4, MODE>(grid, p);
    case 8:
        return launch_attn<D, 8, MODE>(grid, p);
    default:
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "GQA group size must be 1, 2, 4 or 8");
    }
}

template <int MODE> int launch_mode(int D, int G, dim3 grid, const Params &p) {
    if (D == 128) return launch_g<128, MODE>(G, grid, p);
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension must be 128 on the GPU");
}

int launch_merge(const Params &p, int G, int D, unsigned rows) {
    if (D != 128) return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension must be 128");
    merge_kernel<128><<<dim3(rows, p.hq), 128>>>(p, G);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace

struct pkvk_workspace {
    pkvk_shape shape;
    int32_t cap_rows, cap_slots, cap_tasks;
    float *part_acc, *part_ml;
    int *counters;
    int32_t *split_offsets, *bucket_rows;
    pkvk_task *tasks;
};

extern "C" int pkvk_workspace_create(pkvk_workspace **out, const pkvk_shape *s, int32_t cap_rows,
                                     int32_t cap_slots, int32_t cap_tasks) {
    *out = nullptr;
    pkvk_workspace *w = (pkvk_workspace *)calloc(1, sizeof *w);
    if (!w) return PKVK_ERR_OUT_OF_MEMORY;
    *w = pkvk_workspace{*s, cap_rows, cap_slots, cap_tasks};
    size_t states = (size_t)cap_slots * s->hq;
    int rc = pkvk_malloc((void **)&w->part_acc, states * s->d * sizeof(float));
    if (!rc) rc = pkvk_malloc((void **)&w->part_ml, states * 2 * sizeof(float));
    if (!rc) rc = pkvk_malloc((void **)&w->counters, (size_t)cap_rows * s->hkv * sizeof(int));
    if (!rc) rc = pkvk_memset(w->counters, 0, (size_t)cap_rows * s->hkv * sizeof(int));
    if (!rc) rc = pkvk_malloc((void **)&w->split_offsets, ((size_t)cap_rows + 1) * sizeof(int32_t));
    if (!rc) rc = pkvk_malloc((void **)&w->bucket_rows, (size_t)cap_rows * sizeof(int32_t));
    if (!rc) rc = pkvk_malloc((void **)&w->tasks, (size_t)cap_tasks * sizeof(pkvk_task));
    if (rc) {
        pkvk_workspace_destroy(w);
        return rc;
    }
    *out = w;
    return PKVK_OK;
}

extern "C" void pkvk_workspace_destroy(pkvk_workspace *w) {
    if (!w) return;
    pkvk_free(w->part_acc);
    pkvk_free(w->part_ml);
    pkvk_free(w->counters);
    pkvk_free(w->split_offsets);
    pkvk_free(w->bucket_rows);
    pkvk_free(w->tasks);
    free(w);
}

extern "C" int pkvk_plan_upload(pkvk_workspace *w, const pkvk_plan *p) {
    if (p->n_rows > w->cap_rows || p->n_slots > w->cap_slots || p->n_tasks > w->cap_tasks)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "plan larger than its workspace");
    PKVK_CK(cudaMemcpyAsync(w->split_offsets, p->split_offsets, sizeof(int32_t) * (p->n_rows + 1),
                            cudaMemcpyHostToDevice));
    if (p->route == PKVK_ROUTE_BUCKET)
        PKVK_CK(cudaMemcpyAsync(w->bucket_rows, p->bucket_rows, sizeof(int32_t) * p->n_rows,
                                cudaMemcpyHostToDevice));
    if (p->n_tasks)
        PKVK_CK(cudaMemcpyAsync(w->tasks, p->tasks, sizeof(pkvk_task) * p->n_tasks,
                                cudaMemcpyHostToDevice));
    return PKVK_OK;
}

extern "C" int pkvk_launch(pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                           int *launches) {
    const pkvk_shape &s = b->shape;
    *launches = 0;
    if (s.hq % s.hkv || s.hq != w->shape.hq || s.hkv != w->shape.hkv || s.d != w->shape.d)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "batch shape differs from the workspace's");
    if (plan->n_rows == 0) return PKVK_OK;
    int G = s.hq / s.hkv, shift = -1;
    for (int k = 0; k < 31; k++)
        if ((1 << k) == s.page_size) shift = k;
    Params p = {};
    p.q = (const __half *)b->q;
    p.o = (__half *)b->o;
    p.k = (const __half *)b->k_cache;
    p.v = (const __half *)b->v_cache;
    p.bt = b->block_table;
    p.bt_stride = b->bt_stride;
    p.seq_lens = b->seq_lens;
    p.hq = s.hq, p.hkv = s.hkv, p.ps = s.page_size, p.ps_shift = shift;
    p.scale_log2 = b->sm_scale * 1.4426950408889634f;
    p.split_offsets = w->split_offsets;
    p.tasks = w->tasks;
    p.part_acc = w->part_acc, p.part_ml = w->part_ml, p.counters = w->counters;
    int rc = PKVK_OK;
    switch (plan->route) {
    case PKVK_ROUTE_REF_PAGED:
        rc = launch_mode<MODE_REF>(s.d, G, dim3(plan->n_rows, s.hkv), p);
        *launches += rc == PKVK_OK;
        break;
    case PKVK_ROUTE_BUCKET:
        p.bucket_rows = w->bucket_rows;
        for (int k = 0; k < plan->n_buckets && rc == PKVK_OK; k++) {
            const pkvk_bucket &B = plan->buckets[k];
            p.row_begin = B.row_begin, p.splits = B.splits;
            unsigned rows = (unsigned)(B.row_end - B.row_begin);
            rc = launch_mode<MODE_BUCKET>(s.d, G, dim3(rows, s.hkv, B.splits), p);
            *launches += rc == PKVK_OK;
            if (rc == PKVK_OK && B.splits > 1) {
                rc = launch_merge(p, G, s.d, rows);
                *launches += rc == PKVK_OK;
            }
        }
        break;
    case PKVK_ROUTE_WORKQUEUE:
    case PKVK_ROUTE_FUSED: {
        bool fused = plan->route == PKVK_ROUTE_FUSED;
        rc = fused ? launch_mode<MODE_FUSED>(s.d, G, dim3(plan->n_tasks), p)
                   : launch_mode<MODE_TASKS>(s.d, G, dim3(plan->n_tasks), p);
        *launches += rc == PKVK_OK;
        bool multi = plan->n_slots > plan->n_rows; // some row has more than one split
        if (rc == PKVK_OK && !fused && multi) {
            rc = launch_merge(p, G, s.d, (unsigned)plan->n_rows);
            *launches += rc == PKVK_OK;
        }
        break;
    }
    default:
        rc = pkvk_fail_msg(PKVK_ERR_INVALID, "unknown route");
    }
    return rc;
}
