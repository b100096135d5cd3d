/* A build without CUDA: the capability query (no device, and why). What needs the
 * GPU (the cuda backend, calibrate, bench kernels, the GPU tests) is not compiled. */
#include "pkvk.h"
#include "pkvk_fi.h"

int pkvk_fail_msg(int status, const char *msg) {
    return status; /* pkvk_last_error() already says the build has no CUDA */
}
const char *pkvk_last_error(void) {
    return "pkvsim was built without CUDA (configure with nvcc on PATH, or -DPKV_CUDA=ON)";
}
int pkvk_device_count(void) {
    return 0;
}
int pkvk_device_info_get(pkvk_device_info *out) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_model_prefill_kernel(const pkvk_model_shape *s) {
    return PKVK_PREFILL_CUBLAS; /* no FlashInfer without CUDA */
}
