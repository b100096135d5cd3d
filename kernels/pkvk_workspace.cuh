// Private to kernels/: the attention's workspace (partial states, merge counters, the
// uploaded plan's arena, FlashInfer's state), shared by its owner (pkvk_workspace.cu)
// and the launches (pkvk_attn.cu).
#pragma once

#include "pkvk_cuda.h"
#include "pkvk_fi.h"

struct pkvk_workspace {
    const pkvk_ctx *ctx;
    pkvk_shape shape;
    int32_t cap_rows, cap_slots, cap_tasks;
    float *part_acc, *part_ml;
    int *counters;
    // The uploaded plan: one device arena filled by one copy from pinned staging;
    // the array pointers point into it.
    char *arena, *staging;
    size_t arena_bytes;
    int32_t *split_offsets, *bucket_rows;
    pkvk_task *spans;
    pkvk_fi *fi;        // FlashInfer's state: by pkvk_workspace_flashinfer, else at the first plan
    int32_t fixed_rows; // pkvk_workspace_fixed: the grids' rows; 0: each plan's own
    int fixed_ctas;     // the fixed workqueue grid: every resident CTA of the GPU
};
