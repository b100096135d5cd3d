/* Internal to kernels/: CUDA error handling shared by the .cu files. */
#ifndef PKVK_CUDA_H
#define PKVK_CUDA_H

#include <cuda_runtime.h>

#include "pkvk.h"

/* Record "what failed at file:line: CUDA's message" for pkvk_last_error() and map
 * the CUDA error to a pkvk_status. */
int pkvk_fail_cuda(cudaError_t e, const char *what, const char *file, int line);
extern "C" int pkvk_fail_msg(int status, const char *msg);

/* The stream every kernel-layer operation is enqueued on: a blocking stream (it
 * synchronises with the legacy default stream, so the synchronous copies stay
 * ordered) that can be captured into a CUDA graph. */
cudaStream_t pkvk_stream(void);

#define PKVK_CK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return pkvk_fail_cuda(e_, #call, __FILE__, __LINE__);               \
    } while (0)

/* After every launch. */
#define PKVK_CK_LAUNCH() PKVK_CK(cudaGetLastError())

#endif
