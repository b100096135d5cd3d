// The gated MLP's activation: a = silu(gate) * up.
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// a[r][j] = silu(y[r][j]) * y[r][inter + j]: each thread VEC columns of one row
// (VEC = 8: 16-byte loads and stores, when inter is a multiple of 8).
// With the norm folded into the gate and up weights, both are scaled by the row's
// 1 / rms first (nin; none: 1).
template <int VEC>
static __global__ void silu_mul_kernel(const __half *__restrict__ y, __half *__restrict__ a,
                                       int inter, norm_in nin) {
    const int j = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    const size_t r = blockIdx.y;
    __shared__ float sh[32];
    const float sc = nin.scale((int)r, sh);
    if (j >= inter) return;
    __half g[VEC], u[VEC], out[VEC];
    if (VEC == 8) {
        *(uint4 *)g = *(const uint4 *)(y + r * 2 * inter + j);
        *(uint4 *)u = *(const uint4 *)(y + r * 2 * inter + inter + j);
    } else {
        g[0] = y[r * 2 * inter + j], u[0] = y[r * 2 * inter + inter + j];
    }
    for (int k = 0; k < VEC; k++) {
        const float gf = __half2float(g[k]) * sc;
        out[k] = __float2half(gf / (1.f + __expf(-gf)) * __half2float(u[k]) * sc);
    }
    if (VEC == 8)
        *(uint4 *)(a + r * inter + j) = *(const uint4 *)out;
    else
        a[r * inter + j] = out[0];
}

int silu_mul(cudaStream_t st, const void *y, void *a, int rows, int inter, norm_in nin) {
    if (rows <= 0) return PKVK_OK;
    if (rows > 65535) return pkvk_fail_msg(PKVK_ERR_INVALID, "silu: more than 65535 rows");
    if (inter % 8 == 0)
        silu_mul_kernel<8><<<dim3((inter / 8 + 255) / 256, rows), 256, 0, st>>>(
            (const __half *)y, (__half *)a, inter, nin);
    else
        silu_mul_kernel<1><<<dim3((inter + 255) / 256, rows), 256, 0, st>>>(
            (const __half *)y, (__half *)a, inter, nin);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace pkvkm

int pkvk_silu_mul(cudaStream_t st, const void *y, void *a, int rows, int inter) {
    return silu_mul(st, y, a, rows, inter, pkvkm::norm_in{});
}
