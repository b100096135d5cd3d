/* What the cuda backend's files share: backend_cuda.c runs a step, a prefill, a swap and
 * the MLP tail and counts what it did; cuda_graph.c holds the graphs a step is replayed
 * from; cuda_pool.c holds the backend's memory (every device buffer one row of its
 * allocation table), its set-up and its teardown. Not for use outside engine/.
 *
 * The KV pool lives on the GPU, sized from the experiment, filled once with Gaussian
 * halves from the tensor stream. Block tables and lengths are kept on the device and
 * updated incrementally: each step packs the lengths and only the block-table entries
 * the simulator marked dirty, with the route's plan, into the parameters of one
 * prologue launch (or, where they do not fit, one asynchronous copy before it); the
 * prologue applies them and appends every row's new K/V token (and the step's Q) from
 * prepared random rows. Then the route runs; its device time is taken with events
 * around the route's kernels.
 *
 * With a full model (engine/model.h) the KV pools are the model's, one per layer, and a
 * step runs the whole forward: the embedding, then per layer the dense part before
 * attention (norm, QKV, RoPE and the K/V append), the route on that layer's pools, the
 * dense part after (output projection, norm, MLP), then the head. The step's one plan
 * and metadata serve every layer. Events around each layer's attention give t_device
 * (their sum); the step's interval less that is t_dense. A step with prompt chunks
 * (serving.scheduler chunked) runs them in the same forward: the dense part over the
 * rows and the chunks' tokens at once, the chunks' attention (the prefill's, over their
 * prompts' pages) after the route in each layer, inside t_dense. */
#ifndef PKV_CUDA_PARTS_H
#define PKV_CUDA_PARTS_H

#include "backends.h"
#include "tensors.h"

enum { SRC_ROWS = PKV_TENSOR_SRC_ROWS }; /* prepared random token rows, cycled through */

/* The backend's own events: the attention's interval, the MLP tail's, the metadata
 * work's start (it ends where attention starts) and the prefill write's. */
enum {
    EV_ATT0,
    EV_ATT1,
    EV_MLP0,
    EV_MLP1,
    EV_META,
    EV_PRE0,
    EV_PRE1,
    EV_SWAP0,
    EV_SWAP1,
    EV_HEAD, /* a full model's step: the last layer done, the head next */
    EV_COUNT
};

/* A device buffer the backend owns: where its pointer is kept, and its bytes. */
typedef struct cuda_buf {
    void **at;
    size_t bytes;
} cuda_buf;
enum { CUDA_BUFS = 16 };

typedef struct cuda_backend {
    pkv_backend base;
    pkvk_ctx *ctx; /* the GPU's stream and L2-flush buffer; everything below is made in it */
    pkvk_shape shape;
    int32_t cap_rows, bt_stride;
    int32_t q_len_cap;        /* a row's most query tokens (a verify step's k + 1; else 1) */
    uint16_t *k, *v;          /* device pools [n_pages][hkv][ps][d] (kv_dtype; FP8: bytes) */
    float *k_scale, *v_scale; /* FP8 pools: device [n_pages][hkv] (pkv_tensors_fp8_scales') */
    uint16_t *q, *o;          /* device [cap_rows][q_len_cap][hq][d] */
    float *o_ref;             /* device [cap_rows][q_len_cap][hq][d], FP32 reference */
    uint16_t *src_k, *src_v;  /* device [SRC_ROWS][hkv][d] */
    uint16_t *src_q;          /* device [SRC_ROWS][hq][d] */
    int32_t *bt, *lens;       /* device [cap_rows][bt_stride], [cap_rows] */
    uint16_t *blk_k, *blk_v;  /* device [PKV_TENSOR_BLOCK]: the pool's tiles, for prefill */
    int32_t *pages_d;         /* device [n_pages]: a prefill's page list */
    cuda_buf bufs[CUDA_BUFS]; /* the allocation table: every buffer above the set-up made */
    int n_bufs;
    int32_t *stage_h; /* the step's lengths, append pages, (row, idx, page) table updates */
    size_t stage_cap; /* int32 */
    int32_t stage_n, stage_updates;
    int stage_pending; /* prepared, not yet uploaded with the step's first plan */
    int64_t next_src;
    pkvk_workspace *ws;
    pkvk_mlp *mlp; /* NULL: no MLP tail */
    int use_graph; /* capture each step's work into a CUDA graph and replay it */
    pkvk_upload_mode upload;
    int meta_pending;         /* the step's metadata work started at ev[EV_META], not yet
                                 timed */
    pkvk_event *ev[EV_COUNT]; /* the intervals this backend times, one event each end */
    pkvk_graph *graph;        /* the study layer's, captured every step */
    pkvk_graph **graphs;      /* a full model's, per (route, bucket, merge) */
    /* a full model's step: when prepare began (its host work up to the run) */
    double t_prepared;
    uint16_t *o_host;
    float *ref_host;
    int32_t n_pages;
    int32_t *pages_h;    /* pinned host [n_pages]: a prefill's page list */
    pkvk_model *model;   /* a full model's dense part and pools; NULL: the study layer */
    pkvk_fwd_model fwd;  /* the one forward's operations: the model's, or none (the study
                            layer: its prologue appends the new tokens, as metadata) */
    float scale_all;     /* FP8 pools' one scale (a full model's, 1), else 0: per page */
    int layers;          /* layers run for real (a full model's: run.layers_measured) */
    double layer_scale;  /* the model's layers over those: their time is scaled by it */
    pkvk_event **att_ev; /* [2 * layers]: each layer's attention interval */
    pkvk_swap *swap;     /* preemption by swap's host pool; NULL: none */
} cuda_backend;

/* cuda_graph.c */
/* A full model's decode step replays the graph of its (route, rows bucket, merge): the
 * bucket of rows (1, 2, 4, then multiples of 8, at most cap), the slot of its graph
 * (NULL: the route cannot be replayed in a full model's graph). */
int32_t cuda_graph_rows(int32_t rows, int32_t cap);
pkvk_graph **cuda_graph_slot(cuda_backend *b, const pkvk_plan *plan, int32_t rows);
/* A full model's graph slots (-1: out of memory); every graph freed. */
int cuda_graphs_make(cuda_backend *b);
void cuda_graphs_free(cuda_backend *b);

/* cuda_pool.c */
/* A failed device call: "cuda backend: WHAT: " and the kernels' last error. */
int cuda_fail(pkv_err *e, const char *what);
/* The backend's memory for model md and spec (the GPU's free memory checked first, with
 * a message naming what does not fit), filled: the pools tiled (the study layer) or the
 * model made and warmed up, the prepared rows uploaded, the swap pool where asked. other:
 * another cuda backend (spec->weights_from's, NULL: none), whose weights a full model of
 * the same shape and layers reads instead of holding its own. */
int cuda_pool_make(cuda_backend *b, const pkv_model *md, const pkv_backend_spec *spec,
                   const cuda_backend *other, int32_t cap_slots, int32_t cap_tasks, pkv_err *e);
/* Everything cuda_pool_make made (any part of it), the context last. */
void cuda_pool_free(cuda_backend *b);
/* Prefill's K/V write: the listed pages (the first n_pages: NULL) get the pool's tiles,
 * timed with events. */
int cuda_fill_pages(cuda_backend *b, const int32_t *pages, int32_t n_pages, double *t_device,
                    pkv_err *e);

#endif
