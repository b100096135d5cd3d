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

/* Element types. FP16 and BF16: IEEE binary16 and bfloat16; FP8_E4M3: OCP E4M3 (4
 * exponent bits, bias 7, 3 mantissa bits, no infinity, one NaN code per sign, largest
 * finite 448), stored with a scale per KV head and page (value = code x scale). */
typedef enum pkvk_dtype { PKVK_FP16 = 0, PKVK_BF16 = 1, PKVK_FP8_E4M3 = 2 } pkvk_dtype;
enum { PKVK_DTYPES = 3 };
extern const char *const pkvk_dtype_names[PKVK_DTYPES + 1]; /* "fp16", "bf16", "fp8_e4m3" */
static inline int pkvk_dtype_bytes(int t) {
    return t == PKVK_FP8_E4M3 ? 1 : 2;
}

typedef struct pkvk_shape {
    int hq;        /* query heads */
    int hkv;       /* KV heads; hq % hkv == 0 */
    int d;         /* head dimension */
    int page_size; /* tokens per page */
    int dtype;     /* pkvk_dtype of Q and O (FP16 or BF16; 0: FP16) */
    int kv_dtype;  /* pkvk_dtype of the K and V caches (0: FP16) */
} pkvk_shape;

/* ---- host-side batch description (host or device pointers) --------------------- */
typedef struct pkvk_batch {
    pkvk_shape shape;
    int32_t n_rows;
    const uint16_t *q;          /* shape.dtype [n_rows][hq][d] */
    uint16_t *o;                /* shape.dtype [n_rows][hq][d] (device runs) */
    const uint16_t *k_cache;    /* shape.kv_dtype [n_pages][hkv][page_size][d] (for FP8 its
                                   bytes: read it through pkvk_kv_elem) */
    const uint16_t *v_cache;    /* as k_cache */
    const int32_t *block_table; /* [n_rows][bt_stride] physical page ids */
    int32_t bt_stride;          /* entries per block-table row */
    const int32_t *seq_lens;    /* [n_rows] tokens */
    /* Query tokens per row (0 or 1: one, a decode step's): a verify step's k + 1, token j of
     * a row at position seq_lens - q_len + j attending the keys up to its own (the causal
     * mask among them); q and o then [n_rows][q_len][hq][d]. The CPU reference and mirror,
     * the GPU reference and PersistentKV's routes take it (the tokens packed beside the
     * group's heads, pkvk_verify_pack); FlashInfer's decode routes refuse it (its prefill
     * path, pkvk_fi_prefill, runs a verify step). A workspace holds a verify step's states
     * when its cap_slots is the plan's slots times q_len (the fused route's counters: its
     * cap_rows the rows times the query blocks). */
    int32_t q_len;
    float sm_scale;       /* softmax scale, usually 1/sqrt(d) */
    const float *k_scale; /* FP8 KV only: [n_pages][hkv] scale of each page's K, V */
    const float *v_scale;
    /* FP8 KV: the one value every entry of k_scale (v_scale) holds, for FlashInfer's FP8
     * path, which takes one scale for the whole cache; 0: the scales vary, and FlashInfer's
     * routes refuse the batch. */
    float k_scale_all, v_scale_all;
} pkvk_batch;

/* A verify step's packing in PersistentKV's CTAs (pkvk_batch.q_len tokens a row, G query
 * heads a KV head, head dimension d): a CTA's MMA rows hold *tokens query tokens beside the
 * G heads, in 8 rows where they hold the row's tokens, G does not divide 16 or d is 256 (its
 * O fragments leave no registers for a second row's state), else in all 16; a range runs in
 * ceil(q_len / *tokens) query blocks, the last possibly short. Returns the rows a CTA's
 * kernel is built for (G x *tokens, or 16). The launch and the cost model both count by it
 * (G past 8: the launch refuses it). */
static inline int pkvk_verify_pack(int G, int d, int q_len, int *tokens) {
    if (q_len < 1) q_len = 1;
    if (G < 1 || G > 8) {
        *tokens = 1;
        return G;
    }
    if (G * q_len > 8 && 16 % G == 0 && d <= 128) {
        *tokens = 16 / G;
        return 16;
    }
    *tokens = 8 / G < q_len ? 8 / G : q_len;
    return G * *tokens;
}

/* The query blocks a range of a verify step runs in (pkvk_verify_pack). */
static inline int pkvk_verify_blocks(int G, int d, int q_len) {
    int tokens;
    pkvk_verify_pack(G, d, q_len, &tokens);
    return q_len > 1 ? (q_len + tokens - 1) / tokens : 1;
}

/* ---- element types (host) --------------------------------------------------- */
uint16_t pkvk_f2h(float f); /* round to nearest even */
float pkvk_h2f(uint16_t h);
uint16_t pkvk_f2bf(float f); /* round to nearest even; NaN stays NaN */
float pkvk_bf2f(uint16_t h);
uint8_t pkvk_f2e4m3(float f); /* round to nearest even, saturating at +-448; NaN to NaN */
float pkvk_e4m32f(uint8_t x);
/* Element i of an array of type t (FP8: the code's value, unscaled), as a float. */
float pkvk_elem(int t, const void *base, size_t i);
/* Elements i..i+n-1 as pkvk_elem gives them, times scale, into out: a row at once (the
 * CPU mirror's and reference's loads), the type looked at once. */
void pkvk_elems(int t, const void *base, size_t i, int n, float scale, float *out);
/* f stored as type t at element i of base (FP8: f is already divided by its scale). */
void pkvk_store(int t, void *base, size_t i, float f);
/* f rounded to type t and back, as pkvk_store and pkvk_elem give it (FP8: at scale 1). */
float pkvk_round(int t, float f);

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
