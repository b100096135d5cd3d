// Internal to the FlashInfer files of kernels/: what the decode routes (pkvk_fi.cu)
// and the prefill attention (pkvk_fi_prefill.cu) share.
#ifndef PKVK_FI_COMMON_H
#define PKVK_FI_COMMON_H

#include <flashinfer/attention/scheduler.cuh>

#include <exception>
#include <stdio.h>

#include "pkvk_cuda.h"
#include "pkvk_fi.h"

namespace fi = flashinfer;

// FlashInfer reports errors by throwing; nothing may cross the C API.
template <typename F> static int guarded(const char *what, F &&f) {
    try {
        cudaError_t e = f();
        if (e != cudaSuccess) return pkvk_fail_cuda(e, what, __FILE__, __LINE__);
        return PKVK_OK;
    } catch (const std::exception &ex) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: FlashInfer: %s", what, ex.what());
        return pkvk_fail_msg(PKVK_ERR_INVALID, msg);
    }
}

// The arrays both of FlashInfer's plans share, from their places in the workspaces,
// and the split's temporary outputs (null when the plan does not split).
template <class Info, class Params, class O>
static void set_plan_arrays(void *int_ws, void *float_ws, const Info &pi, Params &q, O **tmp_v,
                            float **tmp_s) {
    q.request_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws, pi.request_indices_offset);
    q.kv_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws, pi.kv_tile_indices_offset);
    q.o_indptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws, pi.o_indptr_offset);
    q.kv_chunk_size_ptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws, pi.kv_chunk_size_ptr_offset);
    q.padded_batch_size = (uint32_t)pi.padded_batch_size;
    *tmp_v = pi.split_kv ? fi::GetPtrFromBaseOffset<O>(float_ws, pi.v_offset) : nullptr;
    *tmp_s = pi.split_kv ? fi::GetPtrFromBaseOffset<float>(float_ws, pi.s_offset) : nullptr;
}

#endif
