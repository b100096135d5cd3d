/* The all-reduce through NCCL (kernels/pkvk_comm.h) on this machine's GPUs: every rank
 * count the machine has, at a decode row's and a prefill chunk's size of
 * llama-3.1-8b's hidden vector, against the sum computed on the CPU from fresh random
 * inputs (exit 77, skipped, without NCCL or a GPU). */
#include "check.h"
#include "pkvk.h"
#include "pkvk_comm.h"

#include <stdio.h>

static int gpus; /* the machine's, counted by setup */

static int setup(void) {
    if (!pkvk_comm_built()) {
        float ms;
        double err;
        CHECK(pkvk_comm_time_allreduce(1, 8192, 1, 1, &ms, &err) == PKVK_ERR_UNSUPPORTED,
              "a build without NCCL measures nothing");
        printf("built without NCCL (-DPKV_NCCL=ON builds it): skipped\n");
        return check_failures ? 1 : SKIP_CODE;
    }
    gpus = pkvk_device_count();
    if (gpus == 0) {
        printf("no GPU (%s): skipped\n", pkvk_last_error());
        return SKIP_CODE;
    }
    return 0;
}

/* Every rank count the machine has, at a decode row's and a prefill chunk's size. */
static void the_allreduce_sums_on_every_rank_count(void) {
    const size_t sizes[] = {4096 * 2, (size_t)4096 * 2 * 512};
    for (int ranks = 1; ranks <= gpus && ranks <= 8; ranks *= 2)
        for (int k = 0; k < 2; k++) {
            float ms = -1;
            double err = -1;
            int rc = pkvk_comm_time_allreduce(ranks, sizes[k], 5, 17u + (unsigned)k, &ms, &err);
            CHECK(rc == PKVK_OK, "%d ranks, %zu bytes: %s", ranks, sizes[k], pkvk_last_error());
            CHECK(err == 0, "%d ranks, %zu bytes: the sum is off by %g", ranks, sizes[k], err);
            CHECK(ms > 0 && ms < 1000, "%d ranks, %zu bytes: %g ms", ranks, sizes[k], ms);
        }
}

static void more_ranks_than_gpus_and_odd_sizes_are_refused(void) {
    float ms;
    double err;
    CHECK(pkvk_comm_time_allreduce(gpus + 1, 8192, 1, 1, &ms, &err) == PKVK_ERR_INVALID,
          "more ranks than GPUs refused");
    CHECK(pkvk_comm_time_allreduce(1, 3, 1, 1, &ms, &err) == PKVK_ERR_INVALID,
          "an odd byte count refused");
}

static const pkv_test_case cases[] = {
    PKV_CASE(the_allreduce_sums_on_every_rank_count),
    PKV_CASE(more_ranks_than_gpus_and_odd_sizes_are_refused),
};
PKV_TEST_MAIN_WITH(cases, setup, NULL)
