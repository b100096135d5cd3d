/* pkvk: tensor parallelism's all-reduce through NCCL (the optional build switch
 * PKV_NCCL; NCCL from the CUDA toolkit). One process drives its GPUs' ranks here: a
 * communicator over the first `ranks` devices (ncclCommInitAll). A machine of one GPU
 * runs it with one rank, which measures NCCL's own fixed cost of a layer's reduce;
 * several GPUs (issue 16) reduce over real links. */
#ifndef PKVK_COMM_H
#define PKVK_COMM_H

#include <stddef.h>

#include "pkvk_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 where this build has NCCL (PKV_NCCL), else 0. */
int pkvk_comm_built(void);

/* The all-reduce of `bytes` of FP16 (a sum, in place) over `ranks` GPUs (devices 0 to
 * ranks - 1), each rank's buffer filled with fresh random values: the median of `reps`
 * timed runs after a warm-up (device time of the slowest rank, events on each rank's
 * stream), and the largest |error| of the result against the sum computed on the CPU
 * (*max_err). Allocates and frees its buffers: a measurement, not a step. */
int pkvk_comm_time_allreduce(int ranks, size_t bytes, int reps, unsigned seed, float *ms,
                             double *max_err);

#ifdef __cplusplus
}
#endif

#endif
