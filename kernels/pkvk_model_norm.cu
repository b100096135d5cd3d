// RMSNorm: the normalized rows (the final norm before the head) and the rows' 1 / rms
// alone (read by the kernels that fold the norm's weights into a GEMM).
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// One block per row: inv[row] = 1 / rms(x[row]).
template <class T>
static __global__ void inv_rms_kernel(const T *__restrict__ x, float *__restrict__ inv, int hidden,
                                      float eps) {
    __shared__ float sh[32];
    const float r = row_inv_rms(x + (size_t)blockIdx.x * hidden, hidden, eps, sh);
    if (threadIdx.x == 0) inv[blockIdx.x] = r;
}

// One block per row: y = x / rms(x) * w (FP32 inside). VEC: the row in registers,
// 16-byte loads (hidden a multiple of 8, at most 8 x NORM_THREADS x NORM_REGS).
enum { NORM_THREADS = 256, NORM_REGS = 4 };
template <class T, bool VEC>
static __global__ void rmsnorm_kernel(const T *__restrict__ x, T *__restrict__ y,
                                      const T *__restrict__ w, int hidden, float eps) {
    __shared__ float sh[32];
    const T *xr = x + (size_t)blockIdx.x * hidden;
    T *yr = y + (size_t)blockIdx.x * hidden;
    float ss = 0.f;
    if (VEC) {
        uint4 v[NORM_REGS];
        for (int k = 0; k < NORM_REGS; k++) {
            const int i = (k * NORM_THREADS + threadIdx.x) * 8;
            if (i < hidden) {
                v[k] = *(const uint4 *)(xr + i);
                const T *h = (const T *)&v[k];
                for (int j = 0; j < 8; j++) ss += to_f(h[j]) * to_f(h[j]);
            }
        }
        const float inv = rsqrtf(block_sum(ss, sh) / hidden + eps);
        for (int k = 0; k < NORM_REGS; k++) {
            const int i = (k * NORM_THREADS + threadIdx.x) * 8;
            if (i >= hidden) break;
            uint4 wv = *(const uint4 *)(w + i), o;
            const T *h = (const T *)&v[k], *wh = (const T *)&wv;
            T *oh = (T *)&o;
            for (int j = 0; j < 8; j++) oh[j] = from_f<T>(to_f(h[j]) * inv * to_f(wh[j]));
            *(uint4 *)(yr + i) = o;
        }
    } else {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
            float v = to_f(xr[i]);
            ss += v * v;
        }
        float inv = rsqrtf(block_sum(ss, sh) / hidden + eps);
        for (int i = threadIdx.x; i < hidden; i += blockDim.x)
            yr[i] = from_f<T>(to_f(xr[i]) * inv * to_f(w[i]));
    }
}

int rmsnorm(cudaStream_t st, int dtype, const elem16 *x, elem16 *y, const elem16 *w, int rows,
            int h, float eps) {
    if (rows <= 0) return PKVK_OK;
    with_t(dtype, [&](auto t) {
        using T = decltype(t);
        if (h % 8 == 0 && h <= 8 * NORM_THREADS * NORM_REGS)
            rmsnorm_kernel<T, true>
                <<<rows, NORM_THREADS, 0, st>>>((const T *)x, (T *)y, (const T *)w, h, eps);
        else
            rmsnorm_kernel<T, false>
                <<<rows, NORM_THREADS, 0, st>>>((const T *)x, (T *)y, (const T *)w, h, eps);
        return 0;
    });
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

int inv_rms(cudaStream_t st, int dtype, const elem16 *x, float *inv, int rows, int hidden,
            float eps) {
    with_t(dtype, [&](auto t) {
        using T = decltype(t);
        inv_rms_kernel<T><<<rows, NORM_THREADS, 0, st>>>((const T *)x, inv, hidden, eps);
        return 0;
    });
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace pkvkm
