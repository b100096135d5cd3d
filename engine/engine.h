/* One decode step: active rows -> route policy -> planner -> backend.run(plan) ->
 * step record. The engine does not own the clock: it returns how far the step
 * advances it. */
#ifndef PKV_ENGINE_H
#define PKV_ENGINE_H

#include "calib.h"
#include "pkv_record.h"
#include "cost.h"
#include "model.h"
#include "planner.h"
#include "policy.h"

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
} pkv_batch_view;

typedef struct pkv_backend pkv_backend;
/* A backend runs a step in two parts: prepare (once per step: metadata updates and
 * the append of every row's new token) and run (one route's kernels for the planned
 * step; the oracle runs several). run fills rec->t_device, max_err and mean_err
 * (NaN where it cannot measure). check: compare with the reference. measures:
 * whether the engine should record the step's host wall time. */
struct pkv_backend {
    const char *name;
    int measures;
    int mixed; /* runs a batch view's prompt chunks with its rows (one iteration) */
    int (*prepare)(pkv_backend *b, const pkv_batch_view *v, pkv_err *e);
    int (*run)(pkv_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
               pkv_step_rec *rec, pkv_err *e);
    /* After the chosen route: the model-level tail (MLP), filling rec->t_mlp. NULL: none. */
    int (*finish)(pkv_backend *b, const pkv_batch_view *v, pkv_step_rec *rec, pkv_err *e);
    /* A prefill batch: write the prompts' K/V pages (the batch's page ids in prompt
     * order) and, for a model with a dense part, run its forward over the prompts;
     * *t_device receives the device time (NaN where not measured). NULL: nothing to
     * write. */
    int (*prefill)(pkv_backend *b, const pkv_prefill_view *p, double *t_device, pkv_err *e);
    /* Preemption by swap: pages[i] (every layer's K and V) to host slot slots[i]
     * (to_host 1) or back (0), finished on return; *t_device: the copy's device time.
     * NULL: the copies are modelled only. */
    int (*swap)(pkv_backend *b, int to_host, const int32_t *pages, const int32_t *slots, int32_t n,
                double *t_device, pkv_err *e);
    void (*destroy)(pkv_backend *b);
    /* Seconds to add to the wall time of the last run or prefill (the engine zeroes
     * it): run.layers_measured's layers not run (the measured layers' time scaled),
     * less the host time spent reading a full model's per-layer timers after the
     * step has finished (measurement, not serving). */
    double t_unrun;
};

typedef enum pkv_clock_source {
    PKV_CLOCK_PREDICTED = 0, /* cost model */
    PKV_CLOCK_WALL,          /* host wall time of the step */
    PKV_CLOCK_DEVICE,        /* device time of the attention work */
} pkv_clock_source;

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
/* The GPU backend kind k runs on: the device's name on the cuda backend, else "none". */
void pkv_backend_device_name(pkv_backend_kind k, char *name, size_t n);

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
} pkv_backend_spec;

enum { PKV_ORACLE_MAX_REPS = 64 }; /* the most runs of each candidate the oracle makes */

typedef struct pkv_engine {
    pkv_model model;
    pkvk_shape shape; /* the attention shape one GPU runs */
    const pkv_calib *cal;
    pkv_route_policy policy;
    bool no_context_gate; /* pkv_step_view.no_context_gate */
    pkv_planner planner;
    pkv_backend *backend; /* owned */
    pkv_clock_source clock;
    int64_t check_every; /* compare every N steps (0 = never); steps < check_first always */
    int64_t check_first;
    int oracle_reps;  /* the measuring oracle's runs of each candidate (their median) */
    double mlp_bytes; /* bytes of MLP weights read per step (0: no MLP tail) */
    int64_t prefills; /* prefill batches run */
    /* The study layer's prefill (serving.prefill): seconds per batch and per token, or
     * (measure) the K/V write's time under the clock */
    double prefill_base_s, prefill_per_token_s;
    bool prefill_measure;
} pkv_engine;

/* The routes (bit r) a decode step replayed as a CUDA graph can run (run.cuda_graph):
 * a full model's graphs, of fixed grids, hold ref_paged and pkv_workqueue
 * (pkv_bucket's launches and pkv_fused's merge vary per step); the study layer's,
 * captured every step, every route but FlashInfer's (their planner may allocate). */
uint32_t pkv_graph_routes(const pkv_model *m);

/* Plan for steps of at most cap_rows rows and make the backend `b` (b NULL: a model
 * backend; tests may set eng->backend afterwards). On the cuda backend the
 * calibration's FlashInfer occupancy is taken from the GPU (their plans must match
 * FlashInfer's own planner). */
int pkv_engine_init(pkv_engine *eng, const pkv_model *m, pkv_calib *cal, const char *policy,
                    pkv_bucket_mode mode, int32_t cap_rows, const pkv_backend_spec *b,
                    pkv_clock_source clock, pkv_err *e);
void pkv_engine_free(pkv_engine *eng);
/* Run one step; rec->index and rec->t_sim are the caller's. *advance: seconds by
 * which the step moves the simulated clock. A check beyond tolerance is an error. */
int pkv_engine_step(pkv_engine *eng, const pkv_batch_view *v, pkv_step_rec *rec, double *advance,
                    pkv_err *e);

/* A prefill batch on the backend: its K/V write and, for a model with a dense part,
 * its forward. rec receives the batch's figures; *advance the seconds by which it
 * moves the clock: a full model's (or a measured write's) time under the engine's
 * clock (NaN where the backend measures nothing), else the study layer's affine
 * prefill model. */
int pkv_engine_prefill(pkv_engine *eng, const pkv_prefill_view *p, pkv_prefill_rec *rec,
                       double *advance, pkv_err *e);

/* Preemption by swap: n pages to the host pool's slots (to_host 1) or back, on the
 * backend where it copies (finished on return). *t: the copy's time under the
 * engine's clock (predicted: the cost model's, from the calibration's host link);
 * *t_predicted: the cost model's. */
int pkv_engine_swap(pkv_engine *eng, int to_host, const int32_t *pages, const int32_t *slots,
                    int32_t n, double *t, double *t_predicted, pkv_err *e);

#endif
