/* A build without NCCL (PKV_NCCL off): no all-reduce to measure. */
#include "pkvk_comm.h"

#include "pkvk_fi.h" /* pkvk_fail_msg */

int pkvk_comm_built(void) {
    return 0;
}

int pkvk_comm_time_allreduce(int ranks, size_t bytes, int reps, unsigned seed, float *ms,
                             double *max_err) {
    (void)ranks, (void)bytes, (void)reps, (void)seed, (void)ms, (void)max_err;
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                         "the all-reduce was not built: configure with -DPKV_NCCL=ON (NCCL from "
                         "the CUDA toolkit) and CUDA");
}
