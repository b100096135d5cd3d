/* pkvk: running on the GPU: device memory, the workspace and its uploads, launches,
 * the step's prologue, prefill's page write, the MLP tail, CUDA graph replay. */
#ifndef PKVK_RUN_H
#define PKVK_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "pkvk_core.h"
#include "pkvk_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

int pkvk_malloc(void **p, size_t bytes);
void pkvk_free(void *p);
int pkvk_h2d(void *dst, const void *src, size_t bytes);
int pkvk_d2h(void *dst, const void *src, size_t bytes);
int pkvk_memset(void *dst, int value, size_t bytes);
int pkvk_sync(const pkvk_ctx *c); /* waits for the context's stream */

/* Device workspace for one batch shape limit: partial states, fused-merge
 * counters, the device copy of a plan and FlashInfer's state; its uploads and
 * launches go to the context's stream. */
typedef struct pkvk_workspace pkvk_workspace;
int pkvk_workspace_create(const pkvk_ctx *c, pkvk_workspace **ws, const pkvk_shape *s,
                          int32_t cap_rows, int32_t cap_slots, int32_t cap_tasks);
void pkvk_workspace_destroy(pkvk_workspace *ws);
/* Copy the plan's arrays to the device (outside the timed region in benchmarks). */
int pkvk_plan_upload(pkvk_workspace *ws, const pkvk_plan *p);
/* Make FlashInfer's state now (its workspaces, 136 MiB) with room for cap_pages pages
 * in its page list, where the routes are built; else nothing. Without it the state
 * is made by the first FlashInfer plan. */
int pkvk_workspace_flashinfer(pkvk_workspace *ws, size_t cap_pages);
/* Make room for plans with up to extra_bytes of step metadata, so that no upload
 * allocates (none may while a CUDA graph is being captured). */
int pkvk_workspace_reserve(pkvk_workspace *ws, size_t extra_bytes);
/* Fixed grids (CUDA graph replay, rows > 0; 0: off): the plans uploaded from now on
 * are laid out for `rows` rows (at most the workspace's), each array at an address
 * that depends on rows only, the rows past a step's given length 0 by its prologue;
 * launches run ref_paged over `rows` rows, pkv_workqueue on one grid of every
 * resident CTA of the GPU that takes the plan's tasks in turn (their count read on
 * the device; CTAs past it return at once), its merge over `rows` rows (rows without
 * splits return at once). So a graph captured from a launch replays any plan of the
 * same route with at most `rows` rows and the same merge flag (pkvk_plan_merges).
 * The other routes are refused. */
int pkvk_workspace_fixed(pkvk_workspace *ws, int32_t rows);
/* Launch the uploaded plan on a device batch. Asynchronous; checks launch errors.
 * *launches receives the number of kernel launches made. */
int pkvk_launch(pkvk_workspace *ws, const pkvk_batch *b, const pkvk_plan *p, int *launches);
/* The FlashInfer routes: 1 when compiled in (CMake -DPKV_FLASHINFER_DIR=...).
 * Before launching a FlashInfer plan, pack its CSR page list from the batch's block
 * table (one launch; again whenever the block table or lengths change). */
int pkvk_flashinfer_built(void);
int pkvk_pack_csr(pkvk_workspace *ws, const pkvk_batch *b);
/* Resident CTAs per SM of FlashInfer's CUDA-core decode kernel for this shape. */
int pkvk_flashinfer_occupancy(const pkvk_shape *s, int *decode_ctas_per_sm);
/* Pinned host memory (for asynchronous uploads) and an asynchronous copy on the
 * context's stream. */
int pkvk_host_alloc(void **p, size_t bytes);
void pkvk_host_free(void *p);
int pkvk_h2d_async(const pkvk_ctx *c, void *dst, const void *src, size_t bytes);

/* One decode step's prologue, as a serving engine runs it before attention, on
 * device arrays. stage (host, 2 * n_rows + 3 * n_updates int32) holds the rows'
 * lengths, then the page each row's new token lands in, then (row, idx, page)
 * block-table updates:
 *  - seq_lens[i] = stage[i] for i < n_rows;
 *  - block_table[row * bt_stride + idx] = page for each update;
 *  - every row appends its new token (position seq_lens[i] - 1, into page
 *    stage[n_rows + i]): K and V of each KV head copied from row
 *    (first_src + i) % src_rows of src_k / src_v ([src_rows][hkv][d], prepared
 *    random content in the caches' 16-bit type; FP8 pools (k_scale set): FP16,
 *    quantized over the page and head's scale, saturating), and Q of the step copied
 *    likewise from src_q ([src_rows][hq][d]) into q. */
typedef struct pkvk_step {
    int32_t n_rows, n_updates;
    const int32_t *stage; /* host */
    int32_t *seq_lens, *block_table;
    int32_t bt_stride;
    uint16_t *k_cache, *v_cache, *q;
    const float *k_scale, *v_scale; /* FP8 pools: [page][hkv]; NULL: the caches' type is src's */
    const uint16_t *src_k, *src_v, *src_q;
    int32_t src_rows;
    int64_t first_src;
} pkvk_step;

/* How a step's metadata reaches the device (pkvk_step_upload). */
typedef enum pkvk_upload_mode {
    PKVK_UPLOAD_PARAMS = 0, /* in the prologue launch's parameters when it fits (32 KB),
                               else as COPY */
    PKVK_UPLOAD_COPY = 1,   /* one host-to-device copy, then the prologue launch */
} pkvk_upload_mode;

/* Upload plan p for pkvk_launch together with the step's prologue (step may be NULL:
 * the plan alone, no prologue). With PKVK_UPLOAD_PARAMS and metadata (stage and the
 * plan's arrays) that fit, this is one kernel launch whose parameters carry them: it
 * applies the stage and writes the plan's arrays into the workspace. Otherwise one
 * copy and one launch. *copies (may be NULL) receives the host-to-device copies made
 * (0 or 1). Asynchronous; a FlashInfer plan is also made here (its planner copies
 * on its own). */
int pkvk_step_upload(pkvk_workspace *ws, const pkvk_plan *p, const pkvk_step *step,
                     pkvk_upload_mode mode, int *copies);

/* Prefill's K/V write: every listed page (pages: device, n_pages ids) of both caches
 * gets the content the pool was filled with, element e of a cache being blk[e %
 * blk_n] (blk_k / blk_v: device, blk_n a multiple of 8; an FP8 pool's (s->kv_dtype):
 * FP16, quantized over the page and head's k_scale / v_scale), in one launch. */
int pkvk_fill_pages(const pkvk_ctx *c, const pkvk_shape *s, uint16_t *k_cache, uint16_t *v_cache,
                    const float *k_scale, const float *v_scale, const int32_t *pages,
                    int32_t n_pages, const uint16_t *blk_k, const uint16_t *blk_v, size_t blk_n);

/* Gated MLP tail (a model-level proxy after attention): Y = X [W_gate | W_up],
 * A = silu(Y_gate) * Y_up, Z = A W_down, FP16 with FP32 accumulation (cuBLAS).
 * X: device [rows][hidden]; weights [hidden][2 * inter] and [inter][hidden], tiled
 * from w (w_n halves of prepared random content). */
typedef struct pkvk_mlp pkvk_mlp;
int pkvk_mlp_create(const pkvk_ctx *c, pkvk_mlp **m, int hidden, int inter, int cap_rows,
                    const uint16_t *w, size_t w_n);
/* Asynchronous; *out receives the device output Z [rows][hidden]. */
int pkvk_mlp_run(pkvk_mlp *m, int rows, const uint16_t *x, const uint16_t **out);
void pkvk_mlp_destroy(pkvk_mlp *m);

/* Preemption by swap: a host pool of n_slots page slots in pinned, mapped host
 * memory, each slot holding one page of every one of the n_pools device pools
 * (pools[p]: [n_pages][page_bytes]; a full model's K and V of every layer). A copy
 * moves n pages between the pools and the slots in one launch whose CTAs read and
 * write the host memory over the link directly (no staging, no per-page copy
 * calls); its page and slot lists (at most max_pages) go in pinned memory too.
 * Copies are ordered on the context's stream; a copy waits for the previous one's
 * lists to be read before it reuses them. */
typedef struct pkvk_swap pkvk_swap;
int pkvk_swap_create(const pkvk_ctx *c, pkvk_swap **out, uint16_t *const *pools, int n_pools,
                     size_t page_bytes, int32_t n_slots, int32_t max_pages);
/* to_host 1: page pages[i] of every pool into slot slots[i]; 0: back. Asynchronous. */
int pkvk_swap_copy(pkvk_swap *s, int to_host, const int32_t *pages, const int32_t *slots,
                   int32_t n);
/* The host bytes of pool p's page in slot `slot` (page_bytes; read after a sync). */
const void *pkvk_swap_slot(const pkvk_swap *s, int32_t slot, int p);
void pkvk_swap_destroy(pkvk_swap *s);

/* CUDA graph replay (an ablation): capture what the kernel layer enqueues on the
 * context's stream between begin and end into a graph; end updates the executable graph in place
 * when the topology allows (*reused = 1) or instantiates a new one; launch replays it. On an error
 * between begin and end, call pkvk_graph_abort. */
typedef struct pkvk_graph pkvk_graph;
int pkvk_graph_begin(const pkvk_ctx *c);
int pkvk_graph_end(const pkvk_ctx *c, pkvk_graph **g, int *reused);
int pkvk_graph_launch(pkvk_graph *g); /* on the stream it was captured from */
void pkvk_graph_abort(const pkvk_ctx *c);
void pkvk_graph_destroy(pkvk_graph *g);

/* Resident attention CTAs per SM for head dim d (64, 128 or 256) and group size G
 * (occupancy). */
int pkvk_occupancy(int d, int G, int *ctas_per_sm);

#ifdef __cplusplus
}
#endif
#endif
