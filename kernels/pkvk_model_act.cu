// The gated MLP's activation: a = silu(gate) * up.
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// a[r][j] = silu(y[r][j]) * y[r][inter + j]: each thread VEC columns of one row
// (VEC = 8: 16-byte loads and stores, when inter is a multiple of 8).
// With the norm folded into the gate and up weights, both are scaled by the row's
// 1 / rms first (nin; none: 1).
template <class T, int VEC>
static __global__ void silu_mul_kernel(const T *__restrict__ y, T *__restrict__ a, int inter,
                                       norm_in nin) {
    const int j = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    const size_t r = blockIdx.y;
    __shared__ float sh[32];
    const float sc = nin.scale<T>((int)r, sh);
    if (j >= inter) return;
    T g[VEC], u[VEC], out[VEC];
    if (VEC == 8) {
        *(uint4 *)g = *(const uint4 *)(y + r * 2 * inter + j);
        *(uint4 *)u = *(const uint4 *)(y + r * 2 * inter + inter + j);
    } else {
        g[0] = y[r * 2 * inter + j], u[0] = y[r * 2 * inter + inter + j];
    }
    for (int k = 0; k < VEC; k++) {
        const float gf = to_f(g[k]) * sc;
        out[k] = from_f<T>(gf / (1.f + __expf(-gf)) * to_f(u[k]) * sc);
    }
    if (VEC == 8)
        *(uint4 *)(a + r * inter + j) = *(const uint4 *)out;
    else
        a[r * inter + j] = out[0];
}

int silu_mul(cudaStream_t st, int dtype, const void *y, void *a, int rows, int inter, norm_in nin) {
    if (rows <= 0 || inter <= 0) return PKVK_OK;
    if (rows > 65535) return pkvk_fail_msg(PKVK_ERR_INVALID, "silu: more than 65535 rows");
    with_t(dtype, [&](auto t) {
        using T = decltype(t);
        if (inter % 8 == 0)
            silu_mul_kernel<T, 8><<<dim3((inter / 8 + 255) / 256, rows), 256, 0, st>>>(
                (const T *)y, (T *)a, inter, nin);
        else
            silu_mul_kernel<T, 1>
                <<<dim3((inter + 255) / 256, rows), 256, 0, st>>>((const T *)y, (T *)a, inter, nin);
        return 0;
    });
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace pkvkm

int pkvk_silu_mul(cudaStream_t st, const void *y, void *a, int rows, int inter) {
    return silu_mul(st, PKVK_FP16, y, a, rows, inter, pkvkm::norm_in{});
}
