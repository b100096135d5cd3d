/* pkvk: the types every job of the kernel layer shares (status, shape, batch,
 * fp16) and the device query; pkvk.h is the whole API. */
#ifndef PKVK_CORE_H
#define PKVK_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "pkv_route.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tokens per planning tile: split boundaries fall on multiples of it (a CTA then
 * streams its range 64 tokens per iteration, kernels/pkvk_attn.cu). */
enum { PKVK_TILE = 32 };

typedef enum pkvk_status {
    PKVK_OK = 0,
    PKVK_ERR_NO_DEVICE = 1, /* built without CUDA, or no usable GPU */
    PKVK_ERR_CUDA = 2,      /* a CUDA call failed: pkvk_last_error() says which */
    PKVK_ERR_OUT_OF_MEMORY = 3,
    PKVK_ERR_UNSUPPORTED = 4, /* shape not compiled (head dim, group size) */
    PKVK_ERR_INVALID = 5,     /* bad argument: plan too large for its workspace, ... */
} pkvk_status;

/* 1 when this build can launch route r (FlashInfer's only where they are built). */
int pkvk_route_built(pkv_route r);

typedef struct pkvk_shape {
    int hq;        /* query heads */
    int hkv;       /* KV heads; hq % hkv == 0 */
    int d;         /* head dimension */
    int page_size; /* tokens per page */
} pkvk_shape;

/* ---- host-side batch description (host or device pointers) --------------------- */
typedef struct pkvk_batch {
    pkvk_shape shape;
    int32_t n_rows;
    const uint16_t *q;          /* fp16 [n_rows][hq][d] */
    uint16_t *o;                /* fp16 [n_rows][hq][d] (device runs) */
    const uint16_t *k_cache;    /* fp16 [n_pages][hkv][page_size][d] */
    const uint16_t *v_cache;    /* fp16, as k_cache */
    const int32_t *block_table; /* [n_rows][bt_stride] physical page ids */
    int32_t bt_stride;          /* entries per block-table row */
    const int32_t *seq_lens;    /* [n_rows] tokens */
    float sm_scale;             /* softmax scale, usually 1/sqrt(d) */
} pkvk_batch;

/* ---- fp16 ------------------------------------------------------------------ */
uint16_t pkvk_f2h(float f); /* round to nearest even */
float pkvk_h2f(uint16_t h);

/* ---- device ------------------------------------------------------------------- */
/* What the last failing call of this thread failed on (errno-like: per thread, kept
 * until the next failure). */
const char *pkvk_last_error(void);
int pkvk_device_count(void); /* 0 without CUDA or without a usable GPU */

typedef struct pkvk_device_info {
    char name[128];
    int sm_count;
    int cc_major, cc_minor;
    size_t mem_free, mem_total; /* bytes */
    size_t l2_bytes;
    int driver_version;
} pkvk_device_info;
int pkvk_device_info_get(pkvk_device_info *out);

/* The kernel layer's context on one GPU: its stream and the L2-flush buffer. Made
 * once at start (device: the ordinal, made current on the calling thread) and
 * passed in: every object of the layer (workspace, model, MLP, event, graph) is made
 * in a context and enqueues its work on that context's stream, and so does every
 * operation that takes one. Objects must be destroyed before their context. */
typedef struct pkvk_ctx pkvk_ctx;
/* The environment's PKV_CUDA_SCHEDULE (auto, CUDA's default; spin, yield or blocking)
 * sets how the host thread waits for the GPU (cudaDeviceSchedule*), for studying the
 * host's share of a step. */
int pkvk_ctx_create(pkvk_ctx **c, int device);
void pkvk_ctx_destroy(pkvk_ctx *c);

#ifdef __cplusplus
}
#endif

#endif
