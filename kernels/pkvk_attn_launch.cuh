// Private to kernels/pkvk_attn.cu (included inside its anonymous namespace, after the
// kernel): its launch by head dimension (64, 128, 256), MMA rows (1-8, 16) and types, each
// instantiated kernel's shared-memory limit raised.
#pragma once

template <int D, int G, int MODE, bool FIXED, bool BF, bool F8>
int launch_attn(cudaStream_t st, dim3 grid, const Params &p) {
    static_assert((2 * WARPS * G + 2 * G + WARPS * G * D) * sizeof(float) <= smem_bytes<F8>(D),
                  "the warp reduction fits in the pipeline's shared memory");
    // The dynamic shared memory limit was raised by pkvk_attn_configure.
    attn_kernel<D, G, MODE, FIXED, BF, F8><<<grid, THREADS, smem_bytes<F8>(D), st>>>(p);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

// The kernel of g MMA rows (G, G + 1, ... 8 tried in turn; 16: a verify step's, D <= 128).
template <int D, int MODE, bool FIXED, bool BF, bool F8, int G = 1>
int launch_g(cudaStream_t st, int g, dim3 grid, const Params &p) {
    if constexpr (G == 1 && D <= 128)
        if (g == 16) return launch_attn<D, 16, MODE, FIXED, BF, F8>(st, grid, p);
    if (g == G) return launch_attn<D, G, MODE, FIXED, BF, F8>(st, grid, p);
    if constexpr (G < 8)
        return launch_g<D, MODE, FIXED, BF, F8, G + 1>(st, g, grid, p);
    else
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "GQA group size must be 1 to 8");
}

template <int D, int MODE, bool FIXED>
int launch_types(cudaStream_t st, int G, dim3 grid, const Params &p) {
    if (p.kv8)
        return p.bf16 ? launch_g<D, MODE, FIXED, true, true>(st, G, grid, p)
                      : launch_g<D, MODE, FIXED, false, true>(st, G, grid, p);
    return p.bf16 ? launch_g<D, MODE, FIXED, true, false>(st, G, grid, p)
                  : launch_g<D, MODE, FIXED, false, false>(st, G, grid, p);
}

template <int MODE, bool FIXED = false>
int launch_mode(cudaStream_t st, int D, int G, dim3 grid, const Params &p) {
    switch (D) {
    case 64:
        return launch_types<64, MODE, FIXED>(st, G, grid, p);
    case 128:
        return launch_types<128, MODE, FIXED>(st, G, grid, p);
    case 256:
        return launch_types<256, MODE, FIXED>(st, G, grid, p);
    }
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension must be 64, 128 or 256 on the GPU");
}

template <int D, int G, bool BF, bool F8> int configure_gt() {
    const void *ks[] = {(const void *)attn_kernel<D, G, MODE_REF, false, BF, F8>,
                        (const void *)attn_kernel<D, G, MODE_BUCKET, false, BF, F8>,
                        (const void *)attn_kernel<D, G, MODE_TASKS, false, BF, F8>,
                        (const void *)attn_kernel<D, G, MODE_FUSED, false, BF, F8>,
                        (const void *)attn_kernel<D, G, MODE_TASKS, true, BF, F8>};
    for (const void *k : ks)
        PKVK_CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)smem_bytes<F8>(D)));
    return PKVK_OK;
}

// Every type's kernels (FP16, BF16; each with 16-bit or FP8 KV) of G..8 MMA rows, and 16
// (pkvk_verify_pack).
template <int D, int G = 1> int configure_g() {
    int rc = configure_gt<D, G, false, false>();
    if (!rc) rc = configure_gt<D, G, true, false>();
    if (!rc) rc = configure_gt<D, G, false, true>();
    if (!rc) rc = configure_gt<D, G, true, true>();
    if constexpr (G < 8)
        if (!rc) rc = configure_g<D, G + 1>();
    if constexpr (G == 8 && D <= 128)
        if (!rc) rc = configure_g<D, 16>();
    return rc;
}
