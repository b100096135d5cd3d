// Device helpers behind the C API: errors, memory, timing, L2 flush, ceilings, graph
// replay. (The FP32 GPU reference that checks large shapes: pkvk_reference.cu.)
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "pkvk_cuda.h"

// The last failure's message, per thread (pkvk_last_error).
static thread_local char g_err[512] = "no error";

extern "C" int pkvk_fail_msg(int status, const char *msg) {
    snprintf(g_err, sizeof g_err, "%s", msg);
    return status;
}

int pkvk_fail_cuda(cudaError_t e, const char *what, const char *file, int line) {
    snprintf(g_err, sizeof g_err, "%s failed at %s:%d: %s", what, file, line,
             cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation                               ? PKVK_ERR_OUT_OF_MEMORY
           : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? PKVK_ERR_NO_DEVICE
                                                                        : PKVK_ERR_CUDA;
}

extern "C" const char *pkvk_last_error(void) {
    return g_err;
}

extern "C" int pkvk_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(g_err, sizeof g_err, "no usable CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    return n;
}

extern "C" int pkvk_device_info_get(pkvk_device_info *out) {
    if (pkvk_device_count() == 0) return pkvk_fail_msg(PKVK_ERR_NO_DEVICE, "no CUDA device");
    cudaDeviceProp prop;
    int dev = 0;
    PKVK_CK(cudaGetDevice(&dev));
    PKVK_CK(cudaGetDeviceProperties(&prop, dev));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->sm_count = prop.multiProcessorCount;
    out->cc_major = prop.major, out->cc_minor = prop.minor;
    out->l2_bytes = (size_t)prop.l2CacheSize;
    PKVK_CK(cudaMemGetInfo(&out->mem_free, &out->mem_total));
    PKVK_CK(cudaDriverGetVersion(&out->driver_version));
    return PKVK_OK;
}

extern "C" int pkvk_malloc(void **p, size_t bytes) {
    *p = nullptr;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        snprintf(g_err, sizeof g_err, "cudaMalloc of %zu bytes failed (%zu bytes free of %zu): %s",
                 bytes, fr, tot, cudaGetErrorString(e));
        *p = nullptr;
        return e == cudaErrorMemoryAllocation ? PKVK_ERR_OUT_OF_MEMORY : PKVK_ERR_CUDA;
    }
    return PKVK_OK;
}

extern "C" void pkvk_free(void *p) {
    if (p) cudaFree(p);
}
extern "C" int pkvk_h2d(void *dst, const void *src, size_t n) {
    PKVK_CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    return PKVK_OK;
}
extern "C" int pkvk_d2h(void *dst, const void *src, size_t n) {
    PKVK_CK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
    return PKVK_OK;
}
extern "C" int pkvk_memset(void *dst, int v, size_t n) {
    PKVK_CK(cudaMemset(dst, v, n));
    return PKVK_OK;
}
extern "C" int pkvk_sync(const pkvk_ctx *c) {
    PKVK_CK(cudaStreamSynchronize(c->stream));
    return PKVK_OK;
}

extern "C" int pkvk_host_alloc(void **p, size_t bytes) {
    *p = nullptr;
    PKVK_CK(cudaMallocHost(p, bytes ? bytes : 16));
    return PKVK_OK;
}
extern "C" void pkvk_host_free(void *p) {
    if (p) cudaFreeHost(p);
}
extern "C" int pkvk_h2d_async(const pkvk_ctx *c, void *dst, const void *src, size_t n) {
    PKVK_CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    return PKVK_OK;
}

// ---- events: each owned by its caller (no shared, index-picked events) ----------
struct pkvk_event {
    cudaEvent_t e;
    cudaStream_t stream;
};
extern "C" int pkvk_event_create(const pkvk_ctx *c, pkvk_event **out) {
    *out = nullptr;
    pkvk_event *ev = (pkvk_event *)calloc(1, sizeof *ev);
    if (!ev) return PKVK_ERR_OUT_OF_MEMORY;
    cudaError_t e = cudaEventCreate(&ev->e);
    if (e != cudaSuccess) {
        free(ev);
        return pkvk_fail_cuda(e, "cudaEventCreate", __FILE__, __LINE__);
    }
    ev->stream = c->stream;
    *out = ev;
    return PKVK_OK;
}
extern "C" void pkvk_event_destroy(pkvk_event *ev) {
    if (!ev) return;
    cudaEventDestroy(ev->e);
    free(ev);
}
extern "C" int pkvk_event_record(pkvk_event *ev) {
    PKVK_CK(cudaEventRecord(ev->e, ev->stream));
    return PKVK_OK;
}
extern "C" int pkvk_event_record_node(pkvk_event *ev) {
    PKVK_CK(cudaEventRecordWithFlags(ev->e, ev->stream, cudaEventRecordExternal));
    return PKVK_OK;
}
extern "C" int pkvk_event_elapsed(pkvk_event *a, pkvk_event *b, float *ms) {
    PKVK_CK(cudaEventSynchronize(b->e));
    PKVK_CK(cudaEventElapsedTime(ms, a->e, b->e));
    return PKVK_OK;
}

extern "C" int pkvk_events_elapsed_sum(pkvk_event *const *ev, int pairs, float *ms) {
    *ms = 0;
    if (pairs <= 0) return PKVK_OK;
    PKVK_CK(cudaEventSynchronize(ev[2 * pairs - 1]->e));
    for (int i = 0; i < pairs; i++) {
        float t;
        PKVK_CK(cudaEventElapsedTime(&t, ev[2 * i]->e, ev[2 * i + 1]->e));
        *ms += t;
    }
    return PKVK_OK;
}

// A pair of events for the measurements below, made and released by each.
struct event_pair {
    pkvk_event *a = nullptr, *b = nullptr;
    int rc = PKVK_OK;
    explicit event_pair(const pkvk_ctx *c) {
        rc = pkvk_event_create(c, &a);
        if (!rc) rc = pkvk_event_create(c, &b);
    }
    ~event_pair() {
        pkvk_event_destroy(a);
        pkvk_event_destroy(b);
    }
};

static __global__ void read_kernel(const uint4 *__restrict__ src, size_t n, unsigned *sink);

extern "C" int pkvk_ctx_create(pkvk_ctx **out, int device) {
    *out = nullptr;
    int n = pkvk_device_count();
    if (n == 0) return PKVK_ERR_NO_DEVICE; // pkvk_device_count said why
    if (device < 0 || device >= n) {
        snprintf(g_err, sizeof g_err, "CUDA device %d does not exist (%d visible)", device, n);
        return PKVK_ERR_NO_DEVICE;
    }
    pkvk_ctx *c = (pkvk_ctx *)calloc(1, sizeof *c);
    if (!c) return pkvk_fail_msg(PKVK_ERR_OUT_OF_MEMORY, "kernel context");
    c->device = device;
    cudaDeviceProp prop;
    int rc = PKVK_OK;
    cudaError_t e = cudaSetDevice(device);
    static const char *const names[] = {"auto", "spin", "yield", "blocking"};
    static const unsigned flags[] = {cudaDeviceScheduleAuto, cudaDeviceScheduleSpin,
                                     cudaDeviceScheduleYield, cudaDeviceScheduleBlockingSync};
    const char *sched = getenv("PKV_CUDA_SCHEDULE");
    int wait = 0;
    if (sched) {
        int k = 0;
        while (k < 4 && strcmp(sched, names[k]) != 0) k++;
        if (k == 4) {
            snprintf(g_err, sizeof g_err,
                     "PKV_CUDA_SCHEDULE=%s: not one of auto, spin, yield, blocking", sched);
            free(c);
            return PKVK_ERR_INVALID;
        }
        wait = k;
    }
    if (e == cudaSuccess) e = cudaSetDeviceFlags(flags[wait]);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamDefault);
    if (e != cudaSuccess) rc = pkvk_fail_cuda(e, "kernel context", __FILE__, __LINE__);
    if (!rc) {
        c->sms = prop.multiProcessorCount;
        c->flush_bytes = 2 * (size_t)prop.l2CacheSize;
        rc = pkvk_malloc(&c->flush, c->flush_bytes + 16);
    }
    if (!rc) rc = pkvk_memset(c->flush, 0, c->flush_bytes + 16);
    if (!rc) rc = pkvk_attn_configure();
    return pkvk_created(rc, c, out, pkvk_ctx_destroy);
}

extern "C" void pkvk_ctx_destroy(pkvk_ctx *c) {
    if (!c) return;
    if (c->stream) {
        cudaStreamSynchronize(c->stream);
        cudaStreamDestroy(c->stream);
    }
    pkvk_free(c->flush);
    free(c);
}

static __global__ void read_kernel(const uint4 *__restrict__ src, size_t n, unsigned *sink);

// Flushing by reading (not writing) a buffer twice the L2 leaves only clean lines
// behind, so the timed kernel that follows pays no write-backs.
extern "C" int pkvk_flush_l2(const pkvk_ctx *c) {
    read_kernel<<<c->sms * 4, 512, 0, c->stream>>>((const uint4 *)c->flush, c->flush_bytes / 16,
                                                   (unsigned *)((char *)c->flush + c->flush_bytes));
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

// ---- ceilings ------------------------------------------------------------------
static __global__ void read_kernel(const uint4 *__restrict__ src, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(src + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u) *sink = x; // practically never: keeps the loads alive
}
static __global__ void empty_kernel() {}
static __global__ void tiny_kernel(unsigned *x) {
    if (threadIdx.x == 0) x[blockIdx.x]++;
}

static double host_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The host busy for 20 us, as the simulator works between steps: the GPU drains its
// queue meanwhile.
static void host_busy() {
    for (double t = host_us(); host_us() - t < 20;) {
    }
}

// The launch floor from an idle GPU: the host is busy before each of reps trials.
static int idle_floor(const pkvk_ctx *ctx, unsigned *sink, int reps, pkvk_ceilings *c) {
    std::vector<double> idle, step;
    cudaStream_t st = ctx->stream;
    event_pair ev(ctx);
    if (ev.rc) return ev.rc;
    for (int r = 0; r < reps + 20; r++) {
        host_busy();
        double t0 = host_us();
        empty_kernel<<<1, 32, 0, st>>>();
        PKVK_CK_LAUNCH();
        PKVK_CK(cudaStreamSynchronize(st));
        double t1 = host_us();
        host_busy();
        float ms;
        double t2 = host_us();
        // The step's shape: event, a one-block kernel, event, an empty kernel, event.
        int rc = pkvk_event_record(ev.a);
        tiny_kernel<<<1, 32, 0, st>>>(sink);
        if (!rc) rc = pkvk_event_record(ev.a);
        empty_kernel<<<1, 32, 0, st>>>();
        if (!rc) rc = pkvk_event_record(ev.b);
        if (!rc) rc = pkvk_event_elapsed(ev.a, ev.b, &ms);
        if (rc) return rc;
        PKVK_CK_LAUNCH();
        if (r >= 20) { // warm-up left out
            idle.push_back(t1 - t0);
            step.push_back(host_us() - t2 - ms * 1e3);
        }
    }
    std::sort(idle.begin(), idle.end());
    std::sort(step.begin(), step.end());
    c->idle_launch_us = idle[idle.size() / 2];
    c->step_floor_us = step[step.size() / 2];
    return PKVK_OK;
}

template <typename F> static int median_ms(const pkvk_ctx *c, int reps, F body, float *out) {
    std::vector<float> t;
    event_pair ev(c);
    if (ev.rc) return ev.rc;
    for (int r = 0; r < reps; r++) {
        float ms;
        int rc = pkvk_flush_l2(c);
        if (!rc) rc = pkvk_event_record(ev.a);
        if (!rc) rc = body();
        if (!rc) rc = pkvk_event_record(ev.b);
        if (!rc) rc = pkvk_event_elapsed(ev.a, ev.b, &ms);
        if (rc) return rc;
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    *out = t[t.size() / 2];
    return PKVK_OK;
}

extern "C" int pkvk_time_read(const pkvk_ctx *c, size_t bytes, int reps, float *ms) {
    void *a;
    bytes &= ~(size_t)15;
    int rc = pkvk_malloc(&a, bytes + 16);
    if (rc) return rc;
    rc = pkvk_memset(a, 1, bytes + 16);
    if (!rc)
        rc = median_ms(
            c, reps,
            [&] {
                read_kernel<<<c->sms * 8, 512, 0, c->stream>>>((const uint4 *)a, bytes / 16,
                                                               (unsigned *)((char *)a + bytes));
                PKVK_CK_LAUNCH();
                return (int)PKVK_OK;
            },
            ms);
    pkvk_free(a);
    return rc;
}

extern "C" int pkvk_time_swap(const pkvk_ctx *c, int n_pools, size_t page_bytes, int32_t n_pages,
                              int reps, float *ms_out, float *ms_in) {
    std::vector<uint16_t *> pools(n_pools, nullptr);
    std::vector<int32_t> pages(n_pages), slots(n_pages);
    for (int32_t i = 0; i < n_pages; i++) // a stride coprime with n_pages scatters them
        pages[i] = (int32_t)((int64_t)i * 7919 % n_pages), slots[i] = i;
    int rc = PKVK_OK;
    for (int p = 0; p < n_pools && !rc; p++) {
        rc = pkvk_malloc((void **)&pools[p], page_bytes * n_pages);
        if (!rc) rc = pkvk_memset(pools[p], p, page_bytes * n_pages);
    }
    pkvk_swap *s = nullptr;
    if (!rc) rc = pkvk_swap_create(c, &s, pools.data(), n_pools, page_bytes, n_pages, n_pages);
    for (int dir = 1; dir >= 0 && !rc; dir--)
        rc = median_ms(
            c, reps, [&] { return pkvk_swap_copy(s, dir, pages.data(), slots.data(), n_pages); },
            dir ? ms_out : ms_in);
    pkvk_swap_destroy(s);
    for (uint16_t *p : pools) pkvk_free(p);
    return rc;
}

extern "C" int pkvk_measure_ceilings(const pkvk_ctx *ctx, pkvk_ceilings *c) {
    const size_t bytes = (size_t)2 << 30; // 2 GiB, far past the L2
    void *a, *b;
    unsigned *sink;
    int rc = pkvk_malloc(&a, bytes);
    if (rc) return rc;
    rc = pkvk_malloc(&b, bytes);
    if (rc) {
        pkvk_free(a);
        return rc;
    }
    rc = pkvk_malloc((void **)&sink, 4);
    if (!rc) rc = pkvk_memset(a, 1, bytes);
    float ms = 0;
    const int sms = ctx->sms;
    if (!rc)
        rc = median_ms(
            ctx, 11,
            [&] {
                PKVK_CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
                return (int)PKVK_OK;
            },
            &ms);
    if (!rc) c->copy_gbps = 2.0 * bytes / (ms * 1e-3) / 1e9;
    if (!rc)
        rc = median_ms(
            ctx, 11,
            [&] {
                read_kernel<<<sms * 8, 512, 0, ctx->stream>>>((const uint4 *)a, bytes / 16, sink);
                PKVK_CK_LAUNCH();
                return (int)PKVK_OK;
            },
            &ms);
    if (!rc) c->read_gbps = bytes / (ms * 1e-3) / 1e9;
    if (!rc) {
        const int n = 2000;
        event_pair ev(ctx);
        rc = ev.rc;
        empty_kernel<<<1, 32, 0, ctx->stream>>>();
        if (!rc) rc = pkvk_event_record(ev.a);
        for (int i = 0; i < n && !rc; i++) {
            empty_kernel<<<1, 32, 0, ctx->stream>>>();
            if (cudaGetLastError() != cudaSuccess)
                rc = pkvk_fail_msg(PKVK_ERR_CUDA, "empty launch");
        }
        if (!rc) rc = pkvk_event_record(ev.b);
        if (!rc) rc = pkvk_event_elapsed(ev.a, ev.b, &ms);
        if (!rc) c->launch_us = ms * 1e3 / n;
    }
    if (!rc) rc = idle_floor(ctx, sink, 500, c);
    const size_t link = (size_t)1 << 30;
    void *h = nullptr;
    if (!rc) rc = pkvk_host_alloc(&h, link);
    for (int dir = 0; dir < 2 && !rc; dir++) {
        rc = median_ms(
            ctx, 5,
            [&] {
                PKVK_CK(cudaMemcpyAsync(dir ? a : h, dir ? h : a, link,
                                        dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                        ctx->stream));
                return (int)PKVK_OK;
            },
            &ms);
        if (!rc) (dir ? c->h2d_gbps : c->d2h_gbps) = link / (ms * 1e-3) / 1e9;
    }
    pkvk_host_free(h);
    pkvk_free(a);
    pkvk_free(b);
    pkvk_free(sink);
    return rc;
}

// ---- graph replay ------------------------------------------------------------------
struct pkvk_graph {
    cudaGraphExec_t exec;
    cudaStream_t stream;
};

extern "C" int pkvk_graph_begin(const pkvk_ctx *c) {
    // Relaxed: a kernel first used inside the capture may still be loaded lazily.
    PKVK_CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed));
    return PKVK_OK;
}

extern "C" int pkvk_graph_end(const pkvk_ctx *c, pkvk_graph **g, int *reused) {
    cudaGraph_t graph;
    PKVK_CK(cudaStreamEndCapture(c->stream, &graph));
    *reused = 0;
    if (!*g && !(*g = (pkvk_graph *)calloc(1, sizeof **g))) {
        cudaGraphDestroy(graph);
        return pkvk_fail_msg(PKVK_ERR_OUT_OF_MEMORY, "graph");
    }
    pkvk_graph *G = *g;
    G->stream = c->stream;
    if (G->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(G->exec, graph, &info) == cudaSuccess) {
            *reused = 1;
        } else { // another topology (route, bucket count): instantiate afresh
            cudaGetLastError();
            cudaGraphExecDestroy(G->exec);
            G->exec = nullptr;
        }
    }
    cudaError_t e = G->exec ? cudaSuccess : cudaGraphInstantiate(&G->exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) return pkvk_fail_cuda(e, "cudaGraphInstantiate", __FILE__, __LINE__);
    return PKVK_OK;
}

extern "C" int pkvk_graph_launch(pkvk_graph *g) {
    PKVK_CK(cudaGraphLaunch(g->exec, g->stream));
    return PKVK_OK;
}

extern "C" void pkvk_graph_abort(const pkvk_ctx *c) {
    cudaStreamCaptureStatus st;
    if (cudaStreamIsCapturing(c->stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        cudaGraph_t graph = nullptr;
        cudaStreamEndCapture(c->stream, &graph);
        if (graph) cudaGraphDestroy(graph);
    }
    cudaGetLastError();
}

extern "C" void pkvk_graph_destroy(pkvk_graph *g) {
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    free(g);
}
