/* The backends below the engine: the views of a step and of a prefill they are
 * handed, the operations they provide (the optional ones marked), what each kind can
 * run (shapes, graph replays), and what the engine makes one from. The engine calls
 * them; they know nothing of the engine. Backends: model (backend_model.c), cpu
 * (backend_cpu.c), cuda (backend_cuda.c); constructors in backends.h. */
#ifndef PKV_BACKEND_H
#define PKV_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "pkv_err.h"
#include "pkv_record.h"
#include "pkvk.h"

/* A prefill batch, or the prompt chunks of a mixed iteration; host memory. Piece i
 * covers positions [starts[i], starts[i] + lens[i]) of its prompt and attends to
 * every earlier position of it (in the pages, written by earlier chunks); its pages
 * are the first ceil((starts[i] + lens[i]) / page_size) of its prompt, in order. */
typedef struct pkv_prefill_view {
    int32_t n_req;
    const int32_t *lens;  /* [n_req] tokens of each piece */
    const int32_t *pages; /* every piece's pages, concatenated */
    int32_t n_pages;
    const int32_t *starts; /* [n_req] first position of each piece; NULL: all 0 */
    const uint8_t *last;   /* [n_req] 1: the piece ends its prompt and samples; NULL: all */
} pkv_prefill_view;

/* The rows of one step, in batch order; host memory. */
typedef struct pkv_batch_view {
    int32_t n_rows;
    const int32_t *seq_lens;    /* [n_rows] tokens, the appended token included */
    const int32_t *block_table; /* [n_rows][bt_stride] */
    int32_t bt_stride;
    /* Rows whose block-table entries changed since the last step, and from which
     * entry on (a device copy needs only these). */
    const int32_t *dirty_rows; /* [n_dirty]; entries may name rows >= n_rows: ignore */
    int32_t n_dirty;
    const int32_t *dirty_from; /* [row]: first changed entry of a dirty row */
    /* Prompt chunks run in the same iteration (serving.scheduler chunked): the dense
     * part runs over the rows and the chunks' tokens at once; NULL: none. */
    const pkv_prefill_view *chunks;
    /* Speculative decoding's verify step: each row runs this many proposed tokens beside
     * its own (their KV in seq_lens already); 0: a plain decode step. */
    int32_t spec_tokens;
} pkv_batch_view;

/* What a backend counted over its run, for the person running it (the runner logs it at
 * the end); zeros where it did nothing of the kind. */
typedef struct pkv_backend_stats {
    int64_t model_steps; /* a full model's steps run */
    int timers;          /* the timers each of them read */
    double timer_reads;  /* host seconds reading them (measurement, left out of t_wall) */
    /* host seconds of those steps, summed: from prepare to run (the stage, the policy and
     * the task layout), the upload and the launch (graph replay or the forward's) */
    double host_prepare, host_upload, host_launch;
    int64_t graph_steps;   /* steps replayed as CUDA graphs */
    int64_t graph_made;    /* a full model's graphs captured */
    double capture_time;   /* host seconds their captures took (left out of t_wall) */
    int64_t graph_reused;  /* the study layer's, captured every step: replays of an updated
                              graph (the others instantiated anew) */
    int64_t uploads;       /* plan uploads by the launch's parameters */
    int64_t upload_copies; /* of those, copied because they did not fit */
} pkv_backend_stats;

typedef struct pkv_backend pkv_backend;
/* A backend runs a step in two parts: prepare (once per step: metadata updates and
 * the append of every row's new token) and run (one route's kernels for the planned
 * step; the oracle runs several). Members marked optional may be NULL. */
struct pkv_backend {
    const char *name;
    int measures; /* it measures time: the engine records the step's host wall time */
    int mixed;    /* it runs a batch view's prompt chunks with its rows (one iteration) */
    /* required */
    int (*prepare)(pkv_backend *b, const pkv_batch_view *v, pkv_err *e);
    /* required: fills rec->t_device, max_err and mean_err (NaN where it cannot
     * measure); check: compare with the reference. */
    int (*run)(pkv_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
               pkv_step_rec *rec, pkv_err *e);
    /* optional: after the chosen route, the model-level tail (MLP), filling rec->t_mlp */
    int (*finish)(pkv_backend *b, const pkv_batch_view *v, pkv_step_rec *rec, pkv_err *e);
    /* optional (NULL: nothing to write): a prefill batch, the prompts' K/V pages (the
     * batch's page ids in prompt order) and, for a model with a dense part, its forward
     * over the prompts; *t_device receives the device time (NaN where not measured). */
    int (*prefill)(pkv_backend *b, const pkv_prefill_view *p, double *t_device, pkv_err *e);
    /* optional (NULL: the copies are modelled only): preemption by swap, pages[i]
     * (every layer's K and V) to host slot slots[i] (to_host 1) or back (0), finished
     * on return; *t_device: the copy's device time. */
    int (*swap)(pkv_backend *b, int to_host, const int32_t *pages, const int32_t *slots, int32_t n,
                double *t_device, pkv_err *e);
    /* required */
    void (*destroy)(pkv_backend *b);
    /* Seconds to add to the wall time of the last run or prefill (the engine zeroes
     * it): run.layers_measured's layers not run (the measured layers' time scaled),
     * less the host time spent reading a full model's per-layer timers after the
     * step has finished (measurement, not serving). */
    double t_unrun;
    /* The largest |V| its pools hold (0: none computed); with the types it bounds the
     * error a checked output may have (pkv_tol_typed_ok). */
    double v_max;
    pkv_backend_stats stats; /* what it counted so far */
};

/* Which backend runs the steps. */
typedef enum pkv_backend_kind {
    PKV_BACKEND_AUTO = 0, /* cuda where a GPU is usable, else model */
    PKV_BACKEND_MODEL,
    PKV_BACKEND_CPU,
    PKV_BACKEND_CUDA,
} pkv_backend_kind;
extern const char *const pkv_backend_names[]; /* "auto", "model", "cpu", "cuda", NULL */
/* The backend `auto` resolves to on this machine. */
pkv_backend_kind pkv_backend_resolve(pkv_backend_kind k);
/* What a backend kind can run (engine/backend_caps.c, one row per kind). */
typedef struct pkv_backend_caps {
    bool measures;        /* it runs what it is given and times it (run.clock wall, device);
                             else it predicts every route, built here or not */
    bool gpu;             /* on the GPU: the kernels this build has (FlashInfer's occupancy,
                             the prefill kernel), graphs replayed for real */
    bool any_types;       /* every model.dtype x kv_dtype (else FP16 or BF16, KV of that
                             type or FP8 E4M3) */
    bool any_shape;       /* every head_dim and query group (else the GPU kernels': head_dim
                             64, 128 or 256, 1 to 8 query heads per KV head) */
    bool experts;         /* a mixture of experts' layers */
    bool experts_more;    /* and their shared experts, expert parallelism */
    bool speculative;     /* serving.speculative's draft and verify steps */
    bool chunks;          /* prompt chunks inside a decode step (serving.scheduler chunked) */
    bool prefill_measure; /* serving.prefill.measure: the prefill's K/V write timed */
    bool fi_fp8;          /* FlashInfer's paths over FP8 KV (as the pools' scales are) */
    int fi_head_dim;      /* FlashInfer's paths at this head_dim only (0: any) */
    int clock;            /* pkv_clock_source of run.clock "auto" */
} pkv_backend_caps;
/* Backend kind k's row (auto resolved). */
const pkv_backend_caps *pkv_backend_caps_of(pkv_backend_kind k);
/* Whether backend kind k runs model m's attention shape: 0, or -1 with e saying why
 * and what to do (from k's row of the table). */
int pkv_backend_supports(pkv_backend_kind k, const pkv_model *m, pkv_err *e);
/* The routes (bit r) backend kind k can run for model m's attention shape: FlashInfer's
 * paths only at 1, 2, 4 or 8 query heads per KV head, on the GPU at head_dim 128, and
 * over 16-bit KV only (their FP8 path takes one scale for the whole cache; the pools
 * hold one per page and head). */
uint32_t pkv_backend_routes(pkv_backend_kind k, const pkv_model *m);
/* The routes (bit r) a decode step replayed as a CUDA graph can run (run.cuda_graph):
 * a full model's graphs, of fixed grids, hold ref_paged and pkv_workqueue
 * (pkv_bucket's launches and pkv_fused's merge vary per step); the study layer's,
 * captured every step, every route but FlashInfer's (their planner may allocate). */
uint32_t pkv_backend_graph_routes(const pkv_model *m);
/* The GPU backend kind k runs on: the device's name on the cuda backend, else "none". */
void pkv_backend_device_name(pkv_backend_kind k, char *name, size_t n);

/* A line for the person running the program (a measurement's side note: the warm-up's
 * time, host parts of a step); the program decides where it goes. */
typedef void (*pkv_log_fn)(void *ctx, const char *line);

/* What the engine makes its backend from. */
typedef struct pkv_backend_spec {
    pkv_backend_kind kind; /* AUTO is resolved here */
    int32_t kv_pages;      /* pages of the KV pool */
    int32_t bt_stride;     /* block-table entries per row */
    bool cuda_graph;       /* replay each step as a CUDA graph (an ablation) */
    bool metadata_copy;    /* step metadata by one copy instead of launch parameters */
    int device;            /* the GPU's ordinal (the cuda backend) */
    uint64_t seed;         /* tensor contents */
    int32_t swap_slots;    /* pages of the host pool of preemption by swap (0: none) */
    int layers_measured;   /* cuda backend, a full model: layers run for real (0: all) */
    /* cuda backend, a full model: read this backend's weights where it is a cuda
     * backend of the same model (shape, layers on the GPU, seed), instead of holding
     * its own (a fleet's replicas); it must outlive this one. NULL: its own. */
    const struct pkv_backend *weights_from;
    /* a mixture of experts' routing: the engine's draws (engine/moe.h: pkv_moe_route), which
     * the backend's forwards take each MoE layer's from, so that a fleet's replicas draw
     * apart as their engines do; it must outlive the backend. NULL: a dense model. */
    struct pkv_moe *experts;
    pkv_log_fn log; /* may be NULL: the backend says nothing */
    void *log_ctx;
} pkv_backend_spec;

#endif
