// Private to kernels/pkvk_attn.cu (included inside its anonymous namespace, after the
// launch parameters and the tile helpers): the merge of split states, by the segmented
// merge kernel (a launch of its own after the splits) and by the fused route's last CTA.
#pragma once

// Merge n partial states (m, l, acc[d]) of each of NG query heads into out(g)[d], with the NT
// threads of a block (thread = dimension, NT apart). Head g's state s is at ml[s * stride_ml + 2 *
// g] and acc[s * stride_acc + g * D]. The NG * n (m, l) pairs are first read in parallel into
// shared memory (sh: sh_floats) and turned into weights w = exp2(m - M) / L once, one warp per
// head; then each thread's NG * n loads of acc are independent, so they overlap instead of queuing
// one L2 round trip per slot or per head. A neutral state (m = -inf) gets weight 0. LOAD_CG reads
// through L2 only, for states that other CTAs of the same launch wrote (the fused route).
constexpr int MERGE_SLOTS = 512;

template <bool LOAD_CG> __device__ __forceinline__ float ld(const float *x) {
    return LOAD_CG ? __ldcg(x) : *x;
}

template <int D, int NT, int NG, bool LOAD_CG, bool BF, class Out>
__device__ void merge_states(const float *ml, const float *acc, int n, int stride_ml,
                             int stride_acc, float *sh, int sh_floats, Out out) {
    static_assert(NT % 32 == 0, "whole warps");
    const int tid = threadIdx.x;
    if (2 * NG * n > sh_floats) { // more states than the buffer holds: serial but exact
        for (int g = 0; g < NG; g++)
            for (int d = tid; d < D; d += NT) {
                float M = neg_inf(), L = 0.f, a = 0.f;
                for (int s = 0; s < n; s++)
                    M = fmaxf(M, ld<LOAD_CG>(ml + (size_t)s * stride_ml + 2 * g));
                for (int s = 0; s < n; s++) {
                    float m = ld<LOAD_CG>(ml + (size_t)s * stride_ml + 2 * g);
                    if (m == neg_inf()) continue; // a neutral state: weight 0, acc not read
                    float c = pkvk_sm_weight(m, M);
                    L += c * ld<LOAD_CG>(ml + (size_t)s * stride_ml + 2 * g + 1);
                    a += c * ld<LOAD_CG>(acc + (size_t)s * stride_acc + g * D + d);
                }
                store16<BF>(out(g) + d, a / L);
            }
        return;
    }
    float *w = sh, *ls = sh + NG * n; // [NG][n] each
    for (int i = tid; i < NG * n; i += NT) {
        int s = i / NG, g = i % NG; // consecutive threads read consecutive pairs
        w[g * n + s] = ld<LOAD_CG>(ml + (size_t)s * stride_ml + 2 * g);
        ls[g * n + s] = ld<LOAD_CG>(ml + (size_t)s * stride_ml + 2 * g + 1);
    }
    __syncthreads();
    const int warp = tid / 32, lane = tid % 32;
    for (int g = warp; g < NG; g += NT / 32) { // M and L over the slots, then the weights
        float *wg = w + g * n, *lg = ls + g * n;
        float M = neg_inf();
        for (int s = lane; s < n; s += 32) M = fmaxf(M, wg[s]);
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float L = 0.f;
        for (int s = lane; s < n; s += 32) L += pkvk_sm_weight(wg[s], M) * lg[s];
        for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
        __syncwarp();
        // Neutral states weigh 0 even where L is 0 (tested before the division).
        for (int s = lane; s < n; s += 32)
            wg[s] = wg[s] == neg_inf() ? 0.f : pkvk_sm_weight(wg[s], M) / L;
    }
    __syncthreads();
    for (int d = tid; d < D; d += NT) {
        float a[NG];
#pragma unroll
        for (int g = 0; g < NG; g++) a[g] = 0.f;
#pragma unroll 8
        for (int s = 0; s < n; s++)
#pragma unroll
            for (int g = 0; g < NG; g++)
                a[g] += w[g * n + s] * ld<LOAD_CG>(acc + (size_t)s * stride_acc + g * D + d);
#pragma unroll
        for (int g = 0; g < NG; g++) store16<BF>(out(g) + d, a[g]);
    }
    __syncthreads(); // sh may be reused by the caller
}

// Segmented merge: block (row, query token x query head), one thread per dimension. Rows
// with a single slot were written directly by their split and are skipped.
template <int D, bool BF> __global__ void __launch_bounds__(D) merge_kernel(const Params p) {
    // Launched as a programmatic dependent of the split kernel (launch_merge): its
    // blocks may be resident before that kernel ends, and wait here until it has
    // completed and its writes are visible.
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    __shared__ float sh[2 * MERGE_SLOTS];
    int row = p.bucket_rows ? p.bucket_rows[p.row_begin + blockIdx.x] : blockIdx.x;
    const int jq = blockIdx.y / p.hq, h = blockIdx.y % p.hq, kvh = h / p.grp, g = h % p.grp;
    const int NS = p.qlen * p.grp; // a slot's states of a KV head
    int s0 = p.split_offsets[row], n = p.split_offsets[row + 1] - s0;
    if (n <= 1) return;
    size_t base = ((size_t)s0 * p.hkv + kvh) * NS + jq * p.grp + g;
    __half *out = p.o + (((size_t)row * p.qlen + jq) * p.hq + h) * D;
    merge_states<D, D, 1, false, BF>(p.part_ml + base * 2, p.part_acc + base * D, n, p.hkv * NS * 2,
                                     p.hkv * NS * D, sh, 2 * MERGE_SLOTS,
                                     [out](int) { return out; });
}

int launch_merge(cudaStream_t st, const Params &p, int D, unsigned rows) {
    void (*k)(const Params) =
        D == 64    ? (p.bf16 ? merge_kernel<64, true> : merge_kernel<64, false>)
        : D == 128 ? (p.bf16 ? merge_kernel<128, true> : merge_kernel<128, false>)
        : D == 256 ? (p.bf16 ? merge_kernel<256, true> : merge_kernel<256, false>)
                   : nullptr;
    if (!k) return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension must be 64, 128 or 256");
    // Programmatic dependent launch: the merge's launch overlaps the split kernel's
    // run instead of following its end.
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(rows, p.hq * p.qlen);
    cfg.blockDim = dim3(D);
    cfg.stream = st;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    PKVK_CK(cudaLaunchKernelEx(&cfg, k, p));
    return PKVK_OK;
}
