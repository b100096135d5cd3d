/* The discrete-event serving simulation of one engine: arrivals -> admission under
 * the active-request and KV-page budgets -> the scheduler's iterations (decode steps,
 * prefill batches, prompt chunks) timed by the engine -> finish, with preemption
 * (recompute or swap) when the page pool runs dry.
 *
 * The GPU is one serial server. The scheduler (sched.h: prefill_first, chunked) picks
 * each iteration once every event of the current instant is handled; the engine says
 * how far it moves the clock (engine.h), and the loop adds that. What happens (steps,
 * prefills, finished requests, progress) goes to a sink the caller installs, so the
 * simulation knows nothing of files, and several simulations can run side by side in
 * one process (a fleet): pkv_sim_start, then pkv_sim_advance while pkv_sim_next_t is
 * the earliest, then pkv_sim_end; pkv_sim_run does all three for one.
 * With a full model the prefill samples each request's first token, so TTFT is
 * stamped when that prefill completes (as vLLM reports it) and the decode steps
 * produce the other decode_len - 1 tokens; the study layer keeps the study's
 * convention (TTFT at its first decode step, decode_len steps). */
#ifndef PKV_SIM_H
#define PKV_SIM_H

#include <signal.h>

#include "config.h"
#include "engine.h"
#include "kvalloc.h"
#include "pkv_heap.h"
#include "prefix.h"

/* What a request has made that its client has not got yet (request.async_output). */
enum { PKV_LATE_FIRST = 1, PKV_LATE_GAP = 2, PKV_LATE_FINISH = 4 };

typedef struct pkv_sim_request {
    pkv_request_rec rec;
    int32_t *pages; /* [cap_pages] physical pages while admitted, else NULL */
    int32_t n_pages, cap_pages;
    int64_t admit_seq;     /* order of the latest admission (preemption picks the largest) */
    int32_t prefilled;     /* tokens of its prompt in its pages, this admission (cached blocks
                              at admission; chunked: and the chunks done) */
    int32_t prefix_group;  /* the shared prompt it starts with (-1: none) */
    const int64_t *hashes; /* the trace's block ids of its prompt (NULL: none) */
    int32_t n_hashes;
    int32_t *blocks;        /* [cap_pages / pages per block + 1] cache slots of its leading
                               cached blocks */
    int32_t cached_blocks;  /* its leading blocks whose pages the cache holds */
    bool swapped;           /* preempted by swap: its n_pages pages are in the host pool, in
                               the slots its pages array names */
    bool kv_arrived;        /* prefilled on another replica (a fleet's prefill pool): its KV
                               comes with it; admitted, it joins the running batch */
    double t_last_token;    /* seconds: when its latest token came (for the inter-token latency;
                               a window's: when its latest tokens reached the client) */
    int32_t held;           /* serving.scheduler_steps: its tokens made in the window in flight,
                               sent to the client at the window's end (vLLM's multi-step) */
    double t_prefill_start; /* seconds: the first piece of its prompt began running, this
                               admission (NaN: not yet) */
    double t_entered;       /* seconds: it reached the engine's waiting queue (past the server's
                               front-end, request.frontend_us; else its arrival) */
    int64_t fe_next;        /* the next request in the front-end (-1: none) */
    uint8_t late;           /* request.async_output: what it has made that the client has not
                               got yet (PKV_LATE_* bits), sent as the next iteration ends */
    int64_t late_next;      /* the next request with something late (-1: none) */
    double t_made;          /* seconds: its first token was made (request.async_output) */
    bool live;              /* the slot holds a request still in the simulation */
    int32_t spec_accepted;  /* speculative decoding: of its running step's proposed tokens,
                               those accepted (drawn as the step starts) */
    double spec_p;          /* speculative decoding: its chance to keep a proposed token */
} pkv_sim_request;

struct pkv_sim;
struct pkv_scheduler;

/* What the simulation counts besides its records (the summary's prefix_* and swap_*):
 * the admissions' full prompt blocks and tokens to prefill, the tokens found cached;
 * requests swapped out and in, pages copied (both ways), the copies' seconds under
 * the run's clock and as the cost model predicts them. */
typedef struct pkv_sim_counts {
    uint64_t prefix_blocks, prefix_tokens, prefix_hit_tokens, prefix_hits, prefix_evictions;
    uint64_t prefix_unbounded_hit_tokens; /* hits a cache that never evicted would give */
    uint64_t clamped; /* requests drawn with a prompt or decode cut to max_context */
    uint64_t swap_outs, swap_ins, swap_pages;
    double swap_time_s, swap_predicted_s;
    /* TTFT taken apart, over the requests whose first token came in their first
     * admission (ttft_n): seconds summed of waiting to be admitted, admitted and waiting
     * for the scheduler to run their prompt's first piece, from then to the first token
     * (the prefill's iterations, and what runs between them), and the client's lag with
     * the server's front-end */
    uint64_t ttft_n;
    double ttft_queue_s, ttft_wait_s, ttft_prefill_s, ttft_client_s;
    uint64_t bounded; /* 1 when run.max_steps or run.max_time_s ended the run (summed over
                         a fleet's replicas: those it ended) */
} pkv_sim_counts;

/* Where the simulation stands, for a progress line. */
typedef struct pkv_sim_progress {
    double done; /* share of the run done by whichever bound ends it first; -1: unbounded */
    uint64_t steps;
    double t_now; /* seconds, simulated */
    int32_t running;
    size_t waiting, finished, arrived;
} pkv_sim_progress;

/* What happens, as it happens; the caller's (the runner: the HDF5 recorder, the
 * summary, the progress line). Every member may be NULL. A member that fails returns
 * -1 with e filled, and the run stops with that error. */
typedef struct pkv_sim_sink {
    void *ctx;
    /* A decode step as it starts, and the seconds it moves the clock. */
    int (*step)(void *ctx, const pkv_step_rec *rec, double advance, pkv_err *e);
    int (*prefill)(void *ctx, const pkv_prefill_rec *rec, pkv_err *e);
    /* A request leaves the run (finished, or still in it at the end). */
    int (*request)(void *ctx, const pkv_request_rec *rec, pkv_err *e);
    /* A token after a request's first came `gap` seconds after its previous one. */
    int (*itl)(void *ctx, int64_t id, double gap, pkv_err *e);
    /* Now and then (every 1024 steps' events), and once at the end (final). */
    void (*progress)(void *ctx, const pkv_sim_progress *p, bool final);
    /* The run ended at t_end (interrupted: by *stop); its counts. */
    int (*end)(void *ctx, double t_end, bool interrupted, const pkv_sim_counts *c, pkv_err *e);
} pkv_sim_sink;

/* Tests: called as each iteration starts (a decode step, with the chunks of a chunked
 * iteration, or a prefill batch), with the simulation as it stands. */
typedef void (*pkv_sim_observer)(const struct pkv_sim *s, int decode_step, void *ctx);

typedef struct pkv_sim {
    const pkv_config *cfg;
    pkv_engine *eng;
    const struct pkv_scheduler *sched; /* serving.scheduler's */
    pkv_sim_sink sink;
    pkv_workload wl;
    pkv_kvalloc alloc;
    pkv_prefix cache; /* serving.prefix_caching */
    int32_t *evicted; /* [pages per block] scratch */
    /* preemption by swap: the host pool's slots (a swapped request's pages array holds
     * its slots), a scratch list of slots [bt_stride]; the copies' seconds the next
     * iteration waits for */
    pkv_kvalloc host;
    int32_t *swap_slots;
    double swap_pending_s;
    double new_token_ratio; /* serving.admission new_token_ratio: the share of their remaining
                               output the active requests are expected to write */
    gsl_rng *r_pages;
    gsl_rng *r_spec; /* speculative decoding's accepted prefixes (NULL: plain decoding) */
    pkv_heap heap;
    int32_t *prefill_pages; /* [max_active][bt_stride] scratch: the page list of a prefill
                               batch (a shared page once for each prompt) */
    int32_t *prefill_lens;  /* [max_active] scratch: its prompts' lengths */
    pkv_sim_request *req;   /* [n_slots] requests in the system (and free slots) */
    size_t n_slots, cap_slots;
    int64_t *free_slots; /* [cap_slots] slots to reuse */
    size_t n_free_slots;
    size_t n_arrived;           /* requests arrived so far */
    size_t n_finished;          /* requests finished so far */
    size_t n_refused;           /* requests refused so far (workload.over_context) */
    pkv_request_draw next_draw; /* open loop: the drawn request whose arrival is queued */
    pkv_request_draw *first;    /* closed loop with a start jitter: its first requests,
                                   their arrivals queued (event arg: index + 1) */
    /* waiting queue: ring buffer of request indices (preempted ones go to the front) */
    int64_t *wait;
    size_t wait_head, wait_n, wait_cap;
    /* the server's front-end (request.frontend_us): busy until fe_free with the requests
     * from fe_head to fe_tail (linked by fe_next, in arrival order; -1: none) */
    double fe_free;
    int64_t fe_head, fe_tail;
    /* request.async_output: the requests whose outputs of the iteration before are due
     * as the one in flight ends, from late_head to late_tail (linked by late_next) */
    int64_t late_head, late_tail;
    /* the admitted requests whose prompts are not all prefilled yet, in admission order
     * (prefill_first: its first prefill_batch are the batch in flight) */
    int64_t *prefill;
    int32_t n_prefill, prefill_batch;
    int32_t window;      /* decode steps left in the window of serving.scheduler_steps (0: the
                            scheduler runs before the next iteration) */
    int32_t *short_rows; /* [max_active] scratch: the rows whose next step crosses a page */
    int64_t *held_done;  /* [max_active] requests that finished inside the window in flight:
                           they finish, as the client sees it, at its end */
    int32_t n_held_done;
    /* chunked: the prompt chunks of the iteration in flight, one per request (prefill
     * order): its slot, first position, tokens, and whether it ends the prompt
     * (prefill_first: chunk_start holds its batch's first positions) */
    int64_t *chunk_slot;
    int32_t *chunk_start, *chunk_len;
    uint8_t *chunk_last;
    int32_t n_chunks;
    /* running batch, dense: row i is request run[i] */
    int64_t *run;
    int32_t n_run;
    int32_t *seq_lens;    /* [max_active] */
    int32_t *block_table; /* [max_active][bt_stride] */
    int32_t bt_stride;
    int32_t *dirty_rows; /* [max_active] rows whose table changed since the last step */
    int32_t n_dirty;
    int32_t *dirty_from; /* [max_active] first changed entry; INT32_MAX when clean */
    int busy;
    double busy_until; /* where busy: the iteration in progress ends then */
    int64_t admit_counter;
    double t_now;
    uint64_t steps;
    pkv_sim_counts counts;
    bool interrupted;            /* *stop ended the run */
    bool over;                   /* nothing more will happen */
    bool bounded;                /* run.max_steps or run.max_time_s ended the run */
    uint64_t preempt_run;        /* preemptions since the last decode step started */
    volatile sig_atomic_t *stop; /* set asynchronously (SIGINT): finish the step and stop */
    bool external;               /* arrivals come from pkv_sim_inject (a fleet's router), not
                                    from its own workload; set before pkv_sim_start */
    /* A fleet's prefill replica: a request whose prompt is done (its first token sampled)
     * and which has tokens still to come leaves for a decode replica: handoff is told
     * (the request keeps its pages until pkv_sim_release); NULL: it decodes here. */
    int (*handoff)(void *ctx, struct pkv_sim *s, int64_t slot, pkv_err *e);
    /* A fleet's autoscaler watching TTFT: told of each first token sampled here, at t,
     * ttft seconds after its request arrived; NULL: nobody watches. */
    int (*first_token)(void *ctx, double t, double ttft);
    void *fleet_ctx;          /* handoff's and first_token's */
    uint64_t handed_off;      /* requests that left by handoff */
    pkv_sim_observer observe; /* may be NULL */
    void *observe_ctx;
} pkv_sim;

/* The sink is copied; its ctx must outlive the simulation. stop (may be NULL) is
 * polled at every step and by the workload's arrival draws (the KV pool's set-up
 * writes nothing, so there is nothing to poll there). */
int pkv_sim_init(pkv_sim *s, const pkv_config *cfg, pkv_engine *eng, const pkv_sim_sink *sink,
                 volatile sig_atomic_t *stop, pkv_err *e);
/* Run to the end (or to *stop): start, advance while anything happens, end. Finished
 * requests reach the sink as they finish, those still in the system at the end after
 * them. */
int pkv_sim_run(pkv_sim *s, pkv_err *e);
/* The first arrivals, and the first iteration. */
int pkv_sim_start(pkv_sim *s, pkv_err *e);
/* Seconds: when the next event happens; INFINITY when nothing more will. */
double pkv_sim_next_t(const pkv_sim *s);
/* Handle the next event (and, once its instant is done, schedule). */
int pkv_sim_advance(pkv_sim *s, pkv_err *e);
/* Retire the requests still in the system and tell the sink the run ended. A run that
 * ran out of events (no bound, no *stop) with requests still in it fails, naming them:
 * none of them could run again. */
int pkv_sim_end(pkv_sim *s, pkv_err *e);
/* A request that arrived at t_arrival (at the fleet's router) reaches this simulation
 * at t (>= its clock) from outside (s->external): it joins the queue, and an idle
 * engine starts on it once this instant's events are handled. Its latencies count from
 * t_arrival, the router's wait included. `prefilled` (NULL: a new request) is its row
 * as another replica prefilled it (first token, tokens generated, transfer): it comes
 * with its KV, and admitted it joins the running batch without a prefill. */
int pkv_sim_inject(pkv_sim *s, const pkv_request_draw *d, double t_arrival, double t,
                   const pkv_request_rec *prefilled, pkv_err *e);
/* A request that arrived at t_arrival and was at the fleet's router, or on its way to this
 * replica, when a bound or a stop cut the run: recorded here as waiting (arrived, not
 * finished), nothing scheduled. */
int pkv_sim_record_waiting(pkv_sim *s, const pkv_request_draw *d, double t_arrival, pkv_err *e);
/* The request in `slot`, handed off, leaves at t (>= its clock): its pages free. */
int pkv_sim_release(pkv_sim *s, int64_t slot, double t, pkv_err *e);
/* The draw a request in the simulation came from (to inject it elsewhere). */
pkv_request_draw pkv_sim_draw_of(const pkv_sim_request *r);
/* What a router may read of a replica (what a real one could: no request's future):
 * requests in it (waiting, prefilling, running), the tokens they hold or will hold once
 * prefilled (prompts and tokens generated so far; counted only when `tokens`: a walk
 * over the requests), KV pages free or evictable. */
typedef struct pkv_sim_load {
    int64_t requests, tokens;
    int32_t free_pages;
} pkv_sim_load;
pkv_sim_load pkv_sim_load_of(const pkv_sim *s, bool tokens);
/* Tokens of d's prompt whose KV blocks this replica's prefix cache holds now (0 without
 * prefix caching): what admission would map, as a prefix-aware router sees it. */
int32_t pkv_sim_cached_tokens(const pkv_sim *s, const pkv_request_draw *d);
/* Block-table entries per row: the experiment's longest request in pages. */
int32_t pkv_sim_bt_stride(const pkv_config *cfg);
/* Bytes of host memory a simulation of cfg sets aside for its bookkeeping (its KV and swap
 * pools' pages, its block tables): what pkv_sim_init checks against the process's limit. */
double pkv_sim_memory_need(const pkv_config *cfg);
void pkv_sim_free(pkv_sim *s);

#endif
