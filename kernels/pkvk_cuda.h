/* Internal to kernels/: CUDA error handling shared by the .cu files. */
#ifndef PKVK_CUDA_H
#define PKVK_CUDA_H

#include <cuda_runtime.h>

#include "pkvk.h"
#include "pkvk_run.h"

/* Record "what failed at file:line: CUDA's message" for pkvk_last_error() and map
 * the CUDA error to a pkvk_status. */
int pkvk_fail_cuda(cudaError_t e, const char *what, const char *file, int line);
extern "C" int pkvk_fail_msg(int status, const char *msg);

/* The kernel layer's context (pkvk_core.h). stream: every operation of the layer made
 * in this context is enqueued on it; a blocking stream (it synchronises with the
 * legacy default stream, so the synchronous copies stay ordered) that can be captured
 * into a CUDA graph. flush: the L2-flush buffer (flush_bytes, twice the L2) and its
 * sink word, made at creation; sms: the device's multiprocessor count. */
struct pkvk_ctx {
    int device;
    cudaStream_t stream;
    void *flush;
    size_t flush_bytes;
    int sms;
};

/* A plan laid out for its device arena: host[0, bytes) (pinned staging) holds the
 * plan's arrays in [0, plan_end), exactly as they must land at dev (the workspace's
 * arena; the workspace already points its arrays there), then from extra_begin the
 * caller's extra bytes. The arrays are laid out for `rows` rows (the plan's, or a
 * fixed grid's: pkvk_workspace_fixed). FlashInfer's plan is made and uploaded by the
 * pack itself (plan_end 0). Valid until the next pack. */
struct pkvk_packed {
    const char *host;
    char *dev;
    size_t plan_end, extra_begin, bytes;
    int32_t rows;
};
int pkvk_plan_pack(pkvk_workspace *w, const pkvk_plan *p, const void *extra, size_t extra_bytes,
                   pkvk_packed *out);
const pkvk_shape *pkvk_workspace_shape(const pkvk_workspace *w);

/* Raise the dynamic shared memory limit of every attention kernel on the current
 * device (pkvk_ctx_create does, for its device): no attribute call on a step. */
int pkvk_attn_configure(void);
const pkvk_ctx *pkvk_workspace_ctx(const pkvk_workspace *w);

/* a [rows][inter] = silu(y gate) * y up, y [rows][2 inter] FP16 (gate columns first),
 * on stream st (pkvk_model_act.cu; the MLP tail uses it too). */
int pkvk_silu_mul(cudaStream_t st, const void *y, void *a, int rows, int inter);

/* The largest metadata one launch carries in its parameters (CUDA 12.1+ allows
 * 32764 bytes of parameters in all; the prologue's other parameters fit in the rest). */
enum { PKVK_PARAM_BYTES = 32256 };

#define PKVK_CK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return pkvk_fail_cuda(e_, #call, __FILE__, __LINE__);               \
    } while (0)

/* After every launch. */
#define PKVK_CK_LAUNCH() PKVK_CK(cudaGetLastError())

/* pkvk_free on each device pointer (null ones are skipped), for the destructors. */
template <class... P> static inline void pkvk_free_each(P *...p) {
    void *all[] = {(void *)p...};
    for (void *q : all) pkvk_free(q);
}

/* A constructor's end: on failure (rc non-zero) the half-made object is destroyed
 * (destroy takes what is null or unset) and rc returned; else *out = obj. */
template <class T> static inline int pkvk_created(int rc, T *obj, T **out, void (*destroy)(T *)) {
    if (rc) {
        destroy(obj);
        return rc;
    }
    *out = obj;
    return PKVK_OK;
}

#endif
