/* One decode step: active rows -> route policy -> planner -> backend.run(plan) ->
 * step record. The engine does not own the clock: it returns how far the step
 * advances it. */
#ifndef PKV_ENGINE_H
#define PKV_ENGINE_H

#include "backend.h"
#include "calib.h"
#include "pkv_record.h"
#include "cost.h"
#include "model.h"
#include "planner.h"
#include "policy.h"

typedef enum pkv_clock_source {
    PKV_CLOCK_PREDICTED = 0, /* cost model */
    PKV_CLOCK_WALL,          /* host wall time of the step */
    PKV_CLOCK_DEVICE,        /* device time of the attention work */
    PKV_CLOCK_AUTO,          /* run.clock "auto": the backend's own (pkv_engine_clock_of) */
} pkv_clock_source;
/* The clock a run of backend kind k takes under run.clock `configured` (a
 * pkv_clock_source; AUTO: the backend's row, pkv_backend_caps.clock). */
pkv_clock_source pkv_engine_clock_of(int configured, pkv_backend_kind k);

/* The batch sizes an engine captured as CUDA graphs: small[] (increasing), then every
 * multiple of step above them up to max. A forward of n token rows at most max runs
 * padded to the smallest captured size >= n (its dense part priced so); above max it
 * runs eagerly, unpadded. max 0: no padding (pkvsim's own loop). mixed: forwards with
 * prompt tokens are padded too (vLLM V1's piecewise graphs), else decode steps only. */
enum { PKV_GRAPH_SMALL = 16 };
typedef struct pkv_engine_graphs {
    int32_t small[PKV_GRAPH_SMALL];
    int n_small;
    int32_t step, max;
    bool mixed;
} pkv_engine_graphs;

/* Whether a forward of n token rows (prompt: with prompt tokens) is replayed from one of
 * g's graphs: none above g->max, with no graphs, or with prompt tokens g does not pad. */
bool pkv_engine_graph_replays(const pkv_engine_graphs *g, int64_t n, bool prompt);
/* The token rows such a forward runs as: its graph's size, else n itself. */
int64_t pkv_engine_graph_rows(const pkv_engine_graphs *g, int64_t n, bool prompt);

/* The host work a serving engine adds to each iteration (serving.engine's profile;
 * all zero for pkvsim's own loop): a fixed part, a part per request of the iteration
 * (decode rows, or prompts of a prefill batch) and one per prompt token it schedules.
 * An engine that overlaps it with the GPU (vLLM's async scheduling, SGLang's overlap
 * scheduler) takes the longer of the two for the iteration; one that does not, their
 * sum; exposed_s and per_output_token_s are added in either case. Under windows of
 * `window` decode steps per scheduling (serving.scheduler_steps) a decode step's host
 * work is its share of the window's, but for exposed_s and per_output_token_s: every
 * step's own. */
typedef struct pkv_engine_host {
    double iteration_s, per_request_s, per_prompt_token_s;
    bool overlap;
    double exposed_s;          /* seconds of each iteration's host work that the next waits for
                                  even when the rest overlaps (the sampled tokens' copy back, the
                                  next launch); added in either case, and in every step of a
                                  window */
    double prefill_token_s;    /* GPU seconds per prompt token the engine's forward takes
                                  beyond pkvsim's calibrated one (its own kernels): part of
                                  the iteration's GPU time, under the overlap */
    double per_output_token_s; /* seconds per token the iteration samples, in series with
                                  the GPU whatever the overlap and in every step of a
                                  window (output processing and detokenization in the
                                  engine's own loop: vLLM V0 before its async output
                                  processor) */
    double per_proposal_s;     /* seconds per proposer pass of a speculative step (each of
                                  its k, draft or EAGLE), in series with the GPU whatever
                                  the overlap: the drafting loop prepares each pass's
                                  inputs on the host between the passes (vLLM V1) */
    double eager_layer_s;      /* host seconds to launch one layer of a forward that is not
                                  replayed from a graph (kernel by kernel from the engine's
                                  Python): such a forward takes at least layers x this, the
                                  GPU waiting on its launches where its own work is shorter */
    double eager_allreduce_s;  /* at tensor parallel > 1, seconds each all-reduce of such a
                                  forward over prompt tokens waits for the slowest rank (each
                                  rank its own process): in series, twice a layer; none in a
                                  decode step */
    int window;                /* decode steps per scheduling (0 or 1: every step) */
    pkv_engine_graphs graphs;
} pkv_engine_host;

/* Speculative decoding (serving.speculative): each decode step first proposes `tokens`
 * (k) tokens a row, then verifies them in one forward of the served model over k + 1
 * tokens a row (its attention over the row's context and the k proposed tokens); a row
 * keeps the accepted prefix and the target's own next token. The proposer: `draft`, a
 * small model's k decode passes (`draft`, its shape); `eagle`, k passes of one decoder
 * layer of the served model's shape with its LM head (EAGLE's head); `ngram`, a lookup in
 * the prompt on the host (no GPU work). */
typedef enum pkv_spec_method {
    PKV_SPEC_NONE = 0,
    PKV_SPEC_DRAFT,
    PKV_SPEC_EAGLE,
    PKV_SPEC_NGRAM
} pkv_spec_method;
extern const char *const pkv_spec_method_names[]; /* "none", "draft", "eagle", "ngram" */

typedef struct pkv_speculative {
    int method;           /* pkv_spec_method */
    int32_t tokens;       /* k: tokens proposed a row and step */
    double acceptance;    /* the chance that each proposed token is accepted, given the ones
                             before it were (the run draws each row's accepted prefix) */
    double acceptance_sd; /* > 0: each request's own chance, drawn from a beta law of mean
                             `acceptance` and this standard deviation */
    char draft_model[64]; /* draft: the proposer's preset */
    pkv_model draft;      /* draft: its shape, resolved */
} pkv_speculative;

enum { PKV_ORACLE_MAX_REPS = 64 }; /* the most runs of each candidate the oracle makes */

/* What an engine is made with (pkv_engine_init): the route policy and its planner, the
 * clock, and the run's settings it keeps. */
typedef struct pkv_engine_opts {
    const char *policy;          /* a route's name, "adaptive" or "oracle" */
    pkv_bucket_mode bucket_mode; /* pkv_bucket's split choice */
    int32_t cap_rows;            /* the most rows a step has */
    pkv_clock_source clock;
    int64_t check_every; /* compare every N steps (0 = never); steps < check_first always */
    int64_t check_first;
    int oracle_reps; /* the measuring oracle's runs of each candidate (their median) */
    /* The study layer's prefill (serving.prefill): seconds per batch and per token, or
     * (measure) the K/V write's time under the clock */
    double prefill_base_s, prefill_per_token_s;
    bool prefill_measure;
    /* The step's record keeps no candidates (/steps, /routes: run.record requests or
     * summary): on a backend that measures nothing, plan only what the policy consults
     * (pkv_policy_needed) */
    bool plan_needed;
    pkv_engine_host host; /* serving.engine's host work per iteration (zero: none) */
    pkv_speculative spec; /* serving.speculative (method none: plain decoding) */
} pkv_engine_opts;

/* Speculative decoding's proposer (engine/proposer.c): the draft model, or EAGLE's head
 * (the target's shape, one layer), with a planner for its shape on every backend (the cost
 * model prices its passes by their plans) and, on a measuring backend, run for real as a
 * backend of the target's kind whose pools hold the same pages (the target's block tables
 * are its own, as an engine's draft shares its target's). */
typedef struct pkv_proposer {
    pkv_model model;      /* what proposes (pkv_proposer_model) */
    pkv_planner planner;  /* for its attention shape */
    pkv_backend *backend; /* owned; NULL: the proposals are predicted (pkv_engine_step) */
    uint32_t routes;      /* the routes its passes may run (bit r) */
    int32_t *lens;        /* [cap_rows]: a pass's lengths */
    /* over the steps it ran after warm-up: its measured time, the cost model's, and
     * their passes' attention */
    double measured, predicted, measured_attn, predicted_attn;
    int64_t steps;
} pkv_proposer;

/* What proposes for speculative decoding under spec (m: the served model): the draft, or
 * EAGLE's head (m's first layer alone); false for n-gram lookup or none (no model). */
bool pkv_proposer_model(const pkv_speculative *spec, const pkv_model *m, pkv_model *out);
/* Whether a measuring backend runs it for real (a dense one; else its time is predicted). */
bool pkv_proposer_runs(const pkv_speculative *spec, const pkv_model *m);

typedef struct pkv_engine {
    pkv_model model;
    const pkv_model_kind *kind; /* what the model can do (pkv_model_kind_of) */
    pkvk_shape shape;           /* the attention shape one GPU runs */
    const pkv_calib *cal;
    pkv_route_policy policy;
    bool no_context_gate; /* pkv_step_view.no_context_gate */
    pkv_engine_opts opts; /* as made (opts.policy not kept: the policy's name is policy.name) */
    pkv_planner planner;
    pkv_backend *backend;  /* owned */
    double mlp_bytes;      /* bytes of MLP weights read per step (0: no MLP tail) */
    int64_t prefills;      /* prefill batches run */
    pkv_moe moe;           /* a MoE model's expert draws (experts 0: none) */
    pkv_proposer proposer; /* speculative decoding's (run for real on a measuring backend) */
} pkv_engine;

/* Plan for steps of at most o->cap_rows rows under o's policy and make the backend `b`
 * (b NULL: a model backend; tests may set eng->backend afterwards). On the cuda backend
 * the calibration's FlashInfer occupancy is taken from the GPU (their plans must match
 * FlashInfer's own planner). */
int pkv_engine_init(pkv_engine *eng, const pkv_model *m, pkv_calib *cal, const pkv_engine_opts *o,
                    const pkv_backend_spec *b, pkv_err *e);
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
