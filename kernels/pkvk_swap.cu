// Preemption by swap: pages of the device pools to and from a pinned host pool, by
// one copy kernel over the mapped host memory.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkvk_cuda.h"

struct pkvk_swap {
    cudaStream_t stream;
    int n_pools;
    size_t page_bytes;
    int32_t n_slots, max_pages;
    uint16_t **pools_d; // device [n_pools]
    char *host;         // pinned, mapped [n_slots][n_pools][page_bytes]
    char *host_d;       // its device address
    int32_t *lists_h;   // pinned, mapped [2][max_pages]: pages, slots
    int32_t *lists_d;   // their device address
    cudaEvent_t read;   // after the last copy: its lists have been read
};

// Block b of the grid walks (page i, pool p) pairs b, b + gridDim.x, ...; its
// threads move the page's bytes 16 at a time (page_bytes is a multiple of 16).
static __global__ void swap_kernel(uint16_t *const *__restrict__ pools, int n_pools,
                                   size_t page_bytes, const int32_t *__restrict__ pages,
                                   const int32_t *__restrict__ slots, int32_t n,
                                   char *__restrict__ host, int to_host) {
    const size_t words = page_bytes / 16;
    for (int64_t w = blockIdx.x; w < (int64_t)n * n_pools; w += gridDim.x) {
        const int32_t i = (int32_t)(w / n_pools);
        const int p = (int)(w % n_pools);
        uint4 *dev = (uint4 *)((char *)pools[p] + (size_t)pages[i] * page_bytes);
        uint4 *hst = (uint4 *)(host + ((size_t)slots[i] * n_pools + p) * page_bytes);
        const uint4 *src = to_host ? dev : hst;
        uint4 *dst = to_host ? hst : dev;
        for (size_t k = threadIdx.x; k < words; k += blockDim.x) dst[k] = src[k];
    }
}

extern "C" int pkvk_swap_create(const pkvk_ctx *c, pkvk_swap **out, uint16_t *const *pools,
                                int n_pools, size_t page_bytes, int32_t n_slots,
                                int32_t max_pages) {
    *out = nullptr;
    if (n_pools < 1 || n_slots < 1 || max_pages < 1 || page_bytes % 16)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "pkvk_swap_create: bad pool shape");
    pkvk_swap *s = (pkvk_swap *)calloc(1, sizeof *s);
    if (!s) return pkvk_fail_msg(PKVK_ERR_OUT_OF_MEMORY, "swap pool");
    s->stream = c->stream;
    s->n_pools = n_pools, s->page_bytes = page_bytes;
    s->n_slots = n_slots, s->max_pages = max_pages;
    int rc = pkvk_malloc((void **)&s->pools_d, sizeof(uint16_t *) * (size_t)n_pools);
    if (!rc) rc = pkvk_h2d(s->pools_d, pools, sizeof(uint16_t *) * (size_t)n_pools);
    const size_t host_bytes = (size_t)n_slots * n_pools * page_bytes;
    cudaError_t e = cudaSuccess;
    if (!rc) {
        e = cudaHostAlloc((void **)&s->host, host_bytes, cudaHostAllocMapped);
        if (e != cudaSuccess) {
            cudaGetLastError();
            s->host = nullptr;
            char msg[200];
            snprintf(msg, sizeof msg,
                     "pinned host memory of %.2f GiB for %d swap slots: cudaHostAlloc: %s",
                     host_bytes / 1073741824.0, (int)n_slots, cudaGetErrorString(e));
            rc = pkvk_fail_msg(PKVK_ERR_OUT_OF_MEMORY, msg);
        }
    }
    if (!rc) {
        e = cudaHostGetDevicePointer((void **)&s->host_d, s->host, 0);
        if (e == cudaSuccess)
            e = cudaHostAlloc((void **)&s->lists_h, sizeof(int32_t) * 2 * (size_t)max_pages,
                              cudaHostAllocMapped);
        if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&s->lists_d, s->lists_h, 0);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->read, cudaEventDisableTiming);
        if (e != cudaSuccess) rc = pkvk_fail_cuda(e, "swap lists", __FILE__, __LINE__);
    }
    return pkvk_created(rc, s, out, pkvk_swap_destroy);
}

extern "C" int pkvk_swap_copy(pkvk_swap *s, int to_host, const int32_t *pages, const int32_t *slots,
                              int32_t n) {
    if (n < 0 || n > s->max_pages)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "pkvk_swap_copy: more pages than the lists hold");
    if (n == 0) return PKVK_OK;
    for (int32_t i = 0; i < n; i++)
        if (slots[i] < 0 || slots[i] >= s->n_slots)
            return pkvk_fail_msg(PKVK_ERR_INVALID, "pkvk_swap_copy: a slot beyond the pool");
    PKVK_CK(cudaEventSynchronize(s->read));
    memcpy(s->lists_h, pages, sizeof(int32_t) * (size_t)n);
    memcpy(s->lists_h + s->max_pages, slots, sizeof(int32_t) * (size_t)n);
    const int64_t work = (int64_t)n * s->n_pools;
    const int blocks = work < 4096 ? (int)work : 4096;
    swap_kernel<<<blocks, 256, 0, s->stream>>>(s->pools_d, s->n_pools, s->page_bytes, s->lists_d,
                                               s->lists_d + s->max_pages, n, s->host_d, to_host);
    PKVK_CK_LAUNCH();
    PKVK_CK(cudaEventRecord(s->read, s->stream));
    return PKVK_OK;
}

extern "C" const void *pkvk_swap_slot(const pkvk_swap *s, int32_t slot, int p) {
    return s->host + ((size_t)slot * s->n_pools + p) * s->page_bytes;
}

extern "C" void pkvk_swap_destroy(pkvk_swap *s) {
    if (!s) return;
    if (s->read) {
        cudaEventSynchronize(s->read);
        cudaEventDestroy(s->read);
    }
    if (s->host) cudaFreeHost(s->host);
    if (s->lists_h) cudaFreeHost(s->lists_h);
    pkvk_free(s->pools_d);
    free(s);
}
