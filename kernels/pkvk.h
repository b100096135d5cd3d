/* pkvk: paged decode-attention kernels behind a C API.
 *
 * Layout (the PersistentKV study's): K and V caches are FP16
 * [n_pages][hkv][page_size][d]; Q and O are FP16 [n_rows][hq][d]; each row has a
 * block table row (logical page -> physical page) and a true length seq_lens[i].
 * A CTA computes all G = hq/hkv query heads that share one KV head.
 *
 * Plan and run are split: the host builds a pkvk_plan (integer offsets only), the
 * device side only launches. No CUDA type appears here; without CUDA the device
 * entry points return PKVK_ERR_NO_DEVICE and pkvk_device_count() is 0.
 */
#ifndef PKVK_H
#define PKVK_H

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

/* One split of a workqueue plan: tokens [t_begin, t_end) of one row, worked by hkv
 * CTAs, one per KV head (CTA c of the launch takes split c / hkv, KV head c % hkv).
 * The layout is the device's: the upload copies the list as it is. */
typedef struct pkvk_task {
    int32_t row, split;
    int32_t t_begin, t_end; /* tokens; never empty */
} pkvk_task;

/* Rows [row_begin, row_end) of plan->bucket_rows share one launch with `splits`. */
typedef struct pkvk_bucket {
    int32_t row_begin, row_end;
    int32_t splits;
    int32_t route_len; /* tokens: the length the bucket was formed on */
} pkvk_bucket;

/* A flat plan. Arrays are allocated once by pkvk_plan_init (the caller's workspace)
 * and refilled by the pkvk_plan_* emitters without allocating. */
typedef struct pkvk_plan {
    pkv_route route;
    int32_t n_rows;
    int32_t *split_offsets; /* [n_rows + 1] partial-state slots of row i */
    int32_t n_slots;        /* split_offsets[n_rows] */
    pkvk_task *tasks;       /* [n_slots] WORKQUEUE / FUSED: one entry per split */
    int32_t n_tasks;        /* WORKQUEUE / FUSED: CTAs, n_slots * hkv */
    int32_t *bucket_rows;   /* [n_rows] row ids grouped by bucket (BUCKET) */
    pkvk_bucket *buckets;   /* [n_buckets] (BUCKET) */
    int32_t n_buckets;
    int32_t *lens;        /* [n_rows] true lengths (FLASHINFER*: its planner runs at upload) */
    int32_t chunk_tokens; /* FLASHINFER*: KV chunk; row i's chunk c is tokens
                             [c * chunk_tokens, min((c + 1) * chunk_tokens, len)) */
    int32_t cap_rows, cap_tasks; /* capacities given to pkvk_plan_init */
    int counts_only;             /* workqueue: count the tasks, do not write the list
                                    (enough for the cost model; nothing can launch it) */
    int tasks_written;           /* workqueue: the task list matches the counts */
} pkvk_plan;

int pkvk_plan_init(pkvk_plan *p, int32_t cap_rows, int32_t cap_tasks);
void pkvk_plan_free(pkvk_plan *p);

/* Tiles of a row of `len` tokens. */
static inline int32_t pkvk_tiles(int32_t len) {
    return (len + PKVK_TILE - 1) / PKVK_TILE;
}

/* Token range of split s of S over a row of true length len: tiles are dealt in
 * contiguous runs of ceil(tiles/S); a split past the last tile is empty (begin ==
 * end == len). */
void pkvk_split_range(int32_t len, int32_t S, int32_t s, int32_t *t_begin, int32_t *t_end);

/* Emitters: fill `p` for n_rows rows with true lengths seq_lens. Return PKVK_OK or
 * PKVK_ERR_INVALID when the plan would exceed the capacities. */
int pkvk_plan_ref(pkvk_plan *p, const int32_t *seq_lens, int32_t n_rows);
/* splits[i]: requested splits of row i (>= 1); only non-empty splits get a slot (and
 * a task entry worked by hkv CTAs), so a row's slot count may be lower than
 * requested. Entries come in slot order. */
int pkvk_plan_workqueue(pkvk_plan *p, pkv_route route, const pkvk_shape *s, const int32_t *seq_lens,
                        const int32_t *splits, int32_t n_rows);
/* route_lens[i]: row i's bucket key (tokens); bucket_splits(route_len) per bucket is
 * given as splits_of_len, evaluated once per distinct length. Rows keep their
 * order inside a bucket; buckets come in decreasing route length. Empty splits keep
 * their slot (the kernel writes the neutral state there). */
/* Write the task list of a workqueue plan made counts-only (its split_offsets say
 * each row's splits): the chosen route of a step is laid out without planning again. */
int pkvk_plan_write_tasks(pkvk_plan *p, const pkvk_shape *s, const int32_t *seq_lens);
int pkvk_plan_bucket(pkvk_plan *p, const int32_t *seq_lens, const int32_t *route_lens,
                     int32_t n_rows,
                     int32_t (*splits_of_len)(int32_t route_len, int32_t rows, void *ctx),
                     void *ctx);

/* The smallest chunk c in [lo, max(lo, hi)] whose units(c) fit budget, units being
 * non-increasing in c (both the split planner and FlashInfer's use this search). */
static inline int64_t pkvk_smallest_chunk(int64_t lo, int64_t hi, int64_t budget,
                                          int64_t (*units)(int64_t chunk, const void *ctx),
                                          const void *ctx) {
    if (hi < lo) hi = lo;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (units(mid, ctx) > budget)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* FlashInfer's planners mirrored in C (flashinfer-python 0.7.4, scheduler.cuh), so
 * that every backend, the model one included, counts the CTAs and partial states the
 * FlashInfer routes run: split_offsets[i] are row i's KV chunks. DecodePlan bounds
 * its grid by its kernel's occupancy (decode_ctas_per_sm, from
 * pkvk_flashinfer_occupancy on a GPU); PrefillPlan by 2 CTAs per SM. The upload runs
 * FlashInfer's own planner and refuses a partition that differs from this one. */
int pkvk_plan_flashinfer(pkvk_plan *p, pkv_route route, const pkvk_shape *s,
                         const int32_t *seq_lens, int32_t n_rows, int32_t sm_count,
                         int32_t decode_ctas_per_sm);

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

/* ---- CPU reference and mirror (host pointers) ------------------------------------ */
/* Plain FP32 attention: o [n_rows][hq][d]. Allocates nothing; PKVK_ERR_UNSUPPORTED
 * for a head dimension above PKVK_MAX_HEAD_DIM. */
enum { PKVK_MAX_HEAD_DIM = 512 };
int pkvk_cpu_reference(const pkvk_batch *b, float *o);
/* The same algorithm the GPU runs, in plain C: each split's online-softmax partial
 * state over its token range, then the segmented merge. part: workspace of
 * pkvk_partial_floats(shape, plan->n_slots) floats. o as above. */
int pkvk_cpu_run(const pkvk_batch *b, const pkvk_plan *p, float *part, float *o);
size_t pkvk_partial_floats(const pkvk_shape *s, int32_t n_slots);
/* Max and mean of |o - ref| over n elements, o given as floats (o32) or as fp16
 * (o16; pass NULL for the other). A NaN in o (an unwritten output) makes max NaN. */
void pkvk_compare(const float *o32, const uint16_t *o16, const float *ref, size_t n,
                  double *max_err, double *mean_err);

/* ---- device ------------------------------------------------------------------- */
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

int pkvk_malloc(void **p, size_t bytes);
void pkvk_free(void *p);
int pkvk_h2d(void *dst, const void *src, size_t bytes);
int pkvk_d2h(void *dst, const void *src, size_t bytes);
int pkvk_memset(void *dst, int value, size_t bytes);
int pkvk_sync(void);

/* Device workspace for one batch shape limit: partial states, fused-merge
 * counters and the device copy of a plan. */
typedef struct pkvk_workspace pkvk_workspace;
int pkvk_workspace_create(pkvk_workspace **ws, const pkvk_shape *s, int32_t cap_rows,
                          int32_t cap_slots, int32_t cap_tasks);
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
 * kernels' stream. */
int pkvk_host_alloc(void **p, size_t bytes);
void pkvk_host_free(void *p);
int pkvk_h2d_async(void *dst, const void *src, size_t bytes);

/* One decode step's prologue, as a serving engine runs it before attention, on
 * device arrays. stage (host, 2 * n_rows + 3 * n_updates int32) holds the rows'
 * lengths, then the page each row's new token lands in, then (row, idx, page)
 * block-table updates:
 *  - seq_lens[i] = stage[i] for i < n_rows;
 *  - block_table[row * bt_stride + idx] = page for each update;
 *  - every row appends its new token (position seq_lens[i] - 1, into page
 *    stage[n_rows + i]): K and V of each KV head copied from row
 *    (first_src + i) % src_rows of src_k / src_v ([src_rows][hkv][d] fp16, prepared
 *    random content), and Q of the step copied likewise from src_q
 *    ([src_rows][hq][d]) into q. */
typedef struct pkvk_step {
    int32_t n_rows, n_updates;
    const int32_t *stage; /* host */
    int32_t *seq_lens, *block_table;
    int32_t bt_stride;
    uint16_t *k_cache, *v_cache, *q;
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
 * blk_n] (blk_k / blk_v: device, blk_n a multiple of 8), in one launch. */
int pkvk_fill_pages(const pkvk_shape *s, uint16_t *k_cache, uint16_t *v_cache, const int32_t *pages,
                    int32_t n_pages, const uint16_t *blk_k, const uint16_t *blk_v, size_t blk_n);

/* Gated MLP tail (a model-level proxy after attention): Y = X [W_gate | W_up],
 * A = silu(Y_gate) * Y_up, Z = A W_down, FP16 with FP32 accumulation (cuBLAS).
 * X: device [rows][hidden]; weights [hidden][2 * inter] and [inter][hidden], tiled
 * from w (w_n halves of prepared random content). */
typedef struct pkvk_mlp pkvk_mlp;
int pkvk_mlp_create(pkvk_mlp **m, int hidden, int inter, int cap_rows, const uint16_t *w,
                    size_t w_n);
/* Asynchronous; *out receives the device output Z [rows][hidden]. */
int pkvk_mlp_run(pkvk_mlp *m, int rows, const uint16_t *x, const uint16_t **out);
void pkvk_mlp_destroy(pkvk_mlp *m);

/* CUDA graph replay (an ablation): capture what the kernel layer enqueues between
 * begin and end into a graph; end updates the executable graph in place when the
 * topology allows (*reused = 1) or instantiates a new one; launch replays it. On an
 * error between begin and end, call pkvk_graph_abort. */
typedef struct pkvk_graph pkvk_graph;
int pkvk_graph_begin(void);
int pkvk_graph_end(pkvk_graph **g, int *reused);
int pkvk_graph_launch(pkvk_graph *g);
void pkvk_graph_abort(void);
void pkvk_graph_destroy(pkvk_graph *g);

/* Resident attention CTAs per SM for head dim d and group size G (occupancy). */
int pkvk_occupancy(int d, int G, int *ctas_per_sm);

/* FP32 GPU reference into o32 (device, float [n_rows][hq][d]): one launch on the
 * kernels' stream, nothing allocated (head dim up to 256). */
int pkvk_gpu_reference(const pkvk_batch *b, float *o32);

/* Event timer on the kernels' stream: milliseconds between start and stop. */
int pkvk_timer_start(void);
int pkvk_timer_stop(float *ms);
/* Events for intervals inside a step: record mark k (0..7) on the stream now;
 * pkvk_mark_elapsed waits for mark b and returns ms between marks a and b. */
int pkvk_mark(int k);
int pkvk_mark_elapsed(int a, int b, float *ms);
/* Evict the L2 by writing a buffer twice its size. */
int pkvk_flush_l2(void);

typedef struct pkvk_ceilings {
    double copy_gbps; /* device-to-device copy, bytes read + written per second / 1e9 */
    double read_gbps; /* read-only streaming kernel */
    double launch_us; /* back-to-back empty kernel launch */
    /* From an idle GPU (the host busy for 20 us before each): */
    double idle_launch_us; /* host wall of one empty launch and the wait for it */
    double step_floor_us;  /* the least host overhead of a step shaped like the cuda
                              backend's: event, a one-block kernel, event, an empty
                              kernel, event, wait; wall minus the time between the
                              last two events */
} pkvk_ceilings;
int pkvk_measure_ceilings(pkvk_ceilings *c);
/* The read-only streaming kernel over `bytes` contiguous bytes, L2 flushed: median
 * of reps calls, in ms. */
int pkvk_time_read(size_t bytes, int reps, float *ms);

#ifdef __cplusplus
}
#endif
#endif
