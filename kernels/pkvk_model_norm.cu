// RMSNorm: the normalized rows (the final norm before the head) and the rows' 1 / rms
// alone (read by the kernels that fold the norm's weights into a GEMM).
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// One block per row: inv[row] = 1 / rms(x[row]).
static __global__ void inv_rms_kernel(const __half *__restrict__ x, float *__restrict__ inv,
                                      int hidden, float eps) {
    __shared__ float sh[32];
    const float r = row_inv_rms(x + (size_t)blockIdx.x * hidden, hidden, eps, sh);
    if (threadIdx.x == 0) inv[blockIdx.x] = r;
}

// One block per row: y = x / rms(x) * w (FP32 inside). VEC: the row in registers,
// 16-byte loads (hidden a multiple of 8, at most 8 x NORM_THREADS x NORM_REGS).
enum { NORM_THREADS = 256, NORM_REGS = 4 };
template <bool VEC>
static __global__ void rmsnorm_kernel(const __half *__restrict__ x, __half *__restrict__ y,
                                      const __half *__restrict__ w, int hidden, float eps) {
    __shared__ float sh[32];
    const __half *xr = x + (size_t)blockIdx.x * hidden;
    __half *yr = y + (size_t)blockIdx.x * hidden;
    float ss = 0.f;
    if (VEC) {
        uint4 v[NORM_REGS];
        for (int k = 0; k < NORM_REGS; k++) {
            const int i = (k * NORM_THREADS + threadIdx.x) * 8;
            if (i < hidden) {
                v[k] = *(const uint4 *)(xr + i);
                const __half *h = (const __half *)&v[k];
                for (int j = 0; j < 8; j++) ss += __half2float(h[j]) * __half2float(h[j]);
            }
        }
        const float inv = rsqrtf(block_sum(ss, sh) / hidden + eps);
        for (int k = 0; k < NORM_REGS; k++) {
            const int i = (k * NORM_THREADS + threadIdx.x) * 8;
            if (i >= hidden) break;
            uint4 wv = *(const uint4 *)(w + i), o;
            const __half *h = (const __half *)&v[k], *wh = (const __half *)&wv;
            __half *oh = (__half *)&o;
            for (int j = 0; j < 8; j++)
                oh[j] = __float2half(__half2float(h[j]) * inv * __half2float(wh[j]));
            *(uint4 *)(yr + i) = o;
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
            float v = __half2float(xr[i]);
            ss += v * v;
        }
        float inv = rsqrtf(block_sum(ss, sh) / hidden + eps);
        for (int i = threadIdx.x; i < hidden; i += blockDim.x)
            yr[i] = __float2half(__half2float(xr[i]) * inv * __half2float(w[i]));
    }
}

int rmsnorm(cudaStream_t st, const __half *x, __half *y, const __half *w, int rows, int h,
            float eps) {
    if (rows <= 0) return PKVK_OK;
    if (h % 8 == 0 && h <= 8 * NORM_THREADS * NORM_REGS)
        rmsnorm_kernel<true><<<rows, NORM_THREADS, 0, st>>>(x, y, w, h, eps);
    else
        rmsnorm_kernel<false><<<rows, NORM_THREADS, 0, st>>>(x, y, w, h, eps);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

int inv_rms(cudaStream_t st, const __half *x, float *inv, int rows, int hidden, float eps) {
    inv_rms_kernel<<<rows, NORM_THREADS, 0, st>>>(x, inv, hidden, eps);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace pkvkm
