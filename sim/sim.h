/* The discrete-event serving simulation: arrivals -> FCFS admission under the
 * active-request and KV-page budgets -> prefill -> continuous-batching decode steps
 * -> finish, with preemption (recompute or swap) when the page pool runs dry.
 *
 * The GPU is one serial server. Under serving.scheduler prefill_first it runs either a
 * prefill batch (every admitted prompt whole) or a decode step over every running
 * request, each timed by the engine (a full model's prefill by its forward; the study
 * layer's by the affine prefill model of serving.prefill). Under chunked (a full
 * model) every iteration runs each running request's decode token and, in the rest of
 * serving.token_budget, the next chunk of each admitted prompt in admission order (at
 * most max_prefill_chunk tokens of one prompt); an iteration with decode rows is a
 * step (its chunks counted in it), one without them a prefill batch of chunks.
 * With a full model the prefill samples each request's first token, so TTFT is
 * stamped when that prefill completes (as vLLM reports it) and the decode steps
 * produce the other decode_len - 1 tokens; the study layer keeps the study's
 * convention (TTFT at its first decode step, decode_len steps).
 * The scheduler acts only after every event of the current instant is handled. */
#ifndef PKV_SIM_H
#define PKV_SIM_H

#include <signal.h>

#include "config.h"
#include "h5rec.h"
#include "pkv_heap.h"
#include "kvalloc.h"
#include "prefix.h"

/* The simulator's events (pkv_event.kind). */
typedef enum pkv_event_kind {
    PKV_EVENT_ARRIVAL = 0,
    PKV_EVENT_PREFILL_DONE,
    PKV_EVENT_STEP_DONE,
    PKV_EVENT_FINISH,
} pkv_event_kind;

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
    int32_t *blocks;       /* [cap_pages / pages per block + 1] cache slots of its leading
                              cached blocks */
    int32_t cached_blocks; /* its leading blocks whose pages the cache holds */
    bool swapped;          /* preempted by swap: its n_pages pages are in the host pool, in
                              the slots its pages array names */
    double t_last_token;   /* seconds: when its latest token came (for the inter-token latency) */
    bool live;             /* the slot holds a request still in the simulation */
} pkv_sim_request;

struct pkv_sim;
/* Tests: called as each iteration starts (a decode step, with the chunks of a chunked
 * iteration, or a prefill batch), with the simulation as it stands. */
typedef void (*pkv_sim_observer)(const struct pkv_sim *s, int decode_step, void *ctx);

typedef struct pkv_sim {
    const pkv_config *cfg;
    pkv_engine *eng;
    pkv_h5rec *out; /* may be NULL: nothing recorded */
    pkv_workload wl;
    pkv_kvalloc alloc;
    pkv_prefix cache; /* serving.prefix_caching (its counts go to summary.prefix_*) */
    int32_t *evicted; /* [pages per block] scratch */
    /* preemption by swap: the host pool's slots (a swapped request's pages array holds
     * its slots), a scratch list of slots [bt_stride]; the copies' seconds the next
     * iteration waits for (the counts go to summary.swap_*) */
    pkv_kvalloc host;
    int32_t *swap_slots;
    double swap_pending_s;
    gsl_rng *r_pages;
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
    pkv_request_draw next_draw; /* open loop: the drawn request whose arrival is queued */
    /* waiting queue: ring buffer of request indices (preempted ones go to the front) */
    int64_t *wait;
    size_t wait_head, wait_n, wait_cap;
    /* prefill_first: the prefill batch; chunked: the admitted requests whose prompts are
     * not all prefilled yet, in admission order */
    int64_t *prefill;
    int32_t n_prefill;
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
    int64_t admit_counter;
    double t_now;
    uint64_t steps;
    pkv_summary summary;
    volatile sig_atomic_t *stop; /* set asynchronously (SIGINT): finish the step and stop */
    int progress;                /* print a progress line on stderr */
    pkv_sim_observer observe;    /* may be NULL */
    void *observe_ctx;
} pkv_sim;

int pkv_sim_init(pkv_sim *s, const pkv_config *cfg, pkv_engine *eng, pkv_h5rec *out, pkv_err *e);
/* Run to the end (or to *stop); fills s->summary. Finished requests are recorded as
 * they finish, those still in the system at the end after them. */
int pkv_sim_run(pkv_sim *s, pkv_err *e);
/* Block-table entries per row: the experiment's longest request in pages. */
int32_t pkv_sim_bt_stride(const pkv_config *cfg);
void pkv_sim_free(pkv_sim *s);

#endif
