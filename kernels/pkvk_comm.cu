/* Tensor parallelism's all-reduce through NCCL (pkvk_comm.h). */
#include <cuda_fp16.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "pkvk_comm.h"
#include "pkvk_cuda.h"

enum { MAX_RANKS = 8 };

static int nccl_fail(ncclResult_t r, const char *what) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: NCCL: %s", what, ncclGetErrorString(r));
    return pkvk_fail_msg(PKVK_ERR_CUDA, msg);
}

#define PKVK_NCCL(call)                                                                            \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) return nccl_fail(r_, #call);                                        \
    } while (0)

extern "C" int pkvk_comm_built(void) {
    return 1;
}

/* The ranks' state: one communicator, stream, buffer and event pair per GPU. */
struct ranks_t {
    int n = 0;
    ncclComm_t comm[MAX_RANKS] = {};
    cudaStream_t st[MAX_RANKS] = {};
    __half *buf[MAX_RANKS] = {};
    cudaEvent_t ev[MAX_RANKS][2] = {};
};

static void ranks_free(ranks_t &R) {
    for (int r = 0; r < R.n; r++) {
        if (!R.comm[r] && !R.st[r]) continue; /* never set up (e.g. past the machine's GPUs) */
        cudaSetDevice(r);
        if (R.comm[r]) ncclCommDestroy(R.comm[r]);
        if (R.buf[r]) cudaFree(R.buf[r]);
        for (int k = 0; k < 2; k++)
            if (R.ev[r][k]) cudaEventDestroy(R.ev[r][k]);
        if (R.st[r]) cudaStreamDestroy(R.st[r]);
    }
}

/* One all-reduce on every rank, issued as one NCCL group (one thread drives them all). */
static int reduce(ranks_t &R, size_t count, bool timed) {
    PKVK_NCCL(ncclGroupStart());
    for (int r = 0; r < R.n; r++) {
        PKVK_CK(cudaSetDevice(r));
        if (timed) PKVK_CK(cudaEventRecord(R.ev[r][0], R.st[r]));
        PKVK_NCCL(
            ncclAllReduce(R.buf[r], R.buf[r], count, ncclFloat16, ncclSum, R.comm[r], R.st[r]));
    }
    PKVK_NCCL(ncclGroupEnd());
    for (int r = 0; r < R.n; r++) {
        PKVK_CK(cudaSetDevice(r));
        if (timed) PKVK_CK(cudaEventRecord(R.ev[r][1], R.st[r]));
    }
    return PKVK_OK;
}

static int run(ranks_t &R, size_t bytes, int reps, unsigned seed, float *ms, double *max_err) {
    const size_t count = bytes / 2;
    int devices = 0;
    PKVK_CK(cudaGetDeviceCount(&devices));
    if (R.n > devices) {
        char msg[128];
        snprintf(msg, sizeof msg, "an all-reduce over %d ranks needs %d GPUs; this machine has %d",
                 R.n, R.n, devices);
        return pkvk_fail_msg(PKVK_ERR_INVALID, msg);
    }
    int dev[MAX_RANKS];
    for (int r = 0; r < R.n; r++) dev[r] = r;
    PKVK_NCCL(ncclCommInitAll(R.comm, R.n, dev));
    /* Each rank's values are small integers / 8, so that their FP16 sums are exact. */
    std::vector<std::vector<uint16_t>> host(R.n, std::vector<uint16_t>(count));
    std::vector<double> sum(count, 0.0);
    srand(seed);
    for (int r = 0; r < R.n; r++)
        for (size_t i = 0; i < count; i++) {
            float v = (float)(rand() % 33 - 16) / 8.0f;
            host[r][i] = pkvk_f2h(v);
            sum[i] += v;
        }
    for (int r = 0; r < R.n; r++) {
        PKVK_CK(cudaSetDevice(r));
        PKVK_CK(cudaStreamCreateWithFlags(&R.st[r], cudaStreamNonBlocking));
        PKVK_CK(cudaEventCreate(&R.ev[r][0]));
        PKVK_CK(cudaEventCreate(&R.ev[r][1]));
        PKVK_CK(cudaMalloc(&R.buf[r], count * 2));
        PKVK_CK(cudaMemcpy(R.buf[r], host[r].data(), count * 2, cudaMemcpyHostToDevice));
    }
    /* The first reduce is checked (its inputs are the known ones), then warm-up and
     * timed repeats over the reduced buffers (their values no longer matter). */
    int rc = reduce(R, count, false);
    if (rc) return rc;
    double err = 0;
    for (int r = 0; r < R.n; r++) {
        PKVK_CK(cudaSetDevice(r));
        PKVK_CK(cudaMemcpy(host[r].data(), R.buf[r], count * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++)
            err = std::max(err, std::fabs((double)pkvk_h2f(host[r][i]) - sum[i]));
    }
    *max_err = err;
    for (int i = 0; i < 3 && !rc; i++) rc = reduce(R, count, false);
    std::vector<float> t;
    for (int i = 0; i < reps && !rc; i++) {
        rc = reduce(R, count, true);
        float slowest = 0;
        for (int r = 0; r < R.n && !rc; r++) {
            float x;
            PKVK_CK(cudaSetDevice(r));
            PKVK_CK(cudaEventSynchronize(R.ev[r][1]));
            PKVK_CK(cudaEventElapsedTime(&x, R.ev[r][0], R.ev[r][1]));
            slowest = std::max(slowest, x);
        }
        t.push_back(slowest);
    }
    if (rc) return rc;
    std::sort(t.begin(), t.end());
    *ms = t[t.size() / 2];
    return PKVK_OK;
}

extern "C" int pkvk_comm_time_allreduce(int ranks, size_t bytes, int reps, unsigned seed, float *ms,
                                        double *max_err) {
    if (ranks < 1 || ranks > MAX_RANKS || bytes < 2 || bytes % 2 || reps < 1)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "all-reduce: 1-8 ranks, an even byte count and "
                                               "at least one repeat");
    int prev = 0;
    PKVK_CK(cudaGetDevice(&prev));
    ranks_t R;
    R.n = ranks;
    int rc = run(R, bytes, reps, seed, ms, max_err);
    ranks_free(R);
    cudaSetDevice(prev);
    return rc;
}
