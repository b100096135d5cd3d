/* The record schema: one row of /steps (written by the engine, recorded by the
 * analysis layer) and one row of /requests (the simulator's), each declared once as a
 * column table. The C structs, the HDF5 columns and their units all come from these
 * tables, so a field added here is recorded and read back with nothing else to change.
 *
 * X(name, C type, column kind, measured, unit): `measured` columns (1) are NaN unless a
 * backend measures (cpu, cuda); the recorder leaves them out of runs that measure
 * nothing and lists them in the group's `columns_left_out` attribute. Columns marked 2
 * are a fleet's (sim/fleet.h): written only by runs of more than one replica; those
 * marked 3 an engine profile's (serving.engine): written only by runs that have one; those
 * marked 4 a mixture of experts' (model.experts): written only by runs of such a model;
 * those marked 5 speculative decoding's (serving.speculative); those marked 6 its proposer's
 * run for real (a draft or EAGLE on a measuring backend). */
#ifndef PKV_RECORD_H
#define PKV_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "pkv_route.h"

typedef enum pkv_col_kind {
    PKV_COL_U8 = 0,
    PKV_COL_U32,
    PKV_COL_I32,
    PKV_COL_U64,
    PKV_COL_I64,
    PKV_COL_F64,
    PKV_COL_ROUTE, /* uint8 holding a pkv_route: an enum of the route names on disk */
    PKV_COL_STATE, /* uint8 holding a pkv_request_state: an enum of the state names */
} pkv_col_kind;

#define PKV_STEP_COLUMNS(X)                                                                        \
    X(index, uint64_t, PKV_COL_U64, 0, "step number")                                              \
    X(t_sim, double, PKV_COL_F64, 0, "seconds: simulated time at step start")                      \
    X(rows, uint32_t, PKV_COL_U32, 0, "active requests in the step")                               \
    X(context_tokens, uint64_t, PKV_COL_U64, 0, "tokens: sum of the rows' lengths")                \
    X(route, uint8_t, PKV_COL_ROUTE, 0, "the route the step ran")                                  \
    X(warmup, uint8_t, PKV_COL_U8, 0, "1 for warm-up steps (left out of the summary)")             \
    X(splits, uint32_t, PKV_COL_U32, 0, "largest split count of a row")                            \
    X(launches, uint32_t, PKV_COL_U32, 0, "kernel launches, merges included")                      \
    X(merge_launches, uint32_t, PKV_COL_U32, 0, "merge kernel launches")                           \
    X(tasks, uint32_t, PKV_COL_U32, 0, "workqueue tasks")                                          \
    X(ctas, uint64_t, PKV_COL_U64, 0, "decode CTAs")                                               \
    X(cta_work_per_sm, double, PKV_COL_F64, 0, "decode CTAs per SM")                               \
    X(kv_bytes, uint64_t, PKV_COL_U64, 0, "bytes: K and V read")                                   \
    X(merge_bytes, uint64_t, PKV_COL_U64, 0, "bytes: partial states written and read back")        \
    X(max_cta_bytes, uint64_t, PKV_COL_U64, 0,                                                     \
      "bytes: K and V of the longest range one CTA reads")                                         \
    X(prefill_tokens, uint32_t, PKV_COL_U32, 0,                                                    \
      "tokens: prompt chunks run in the same iteration (serving.scheduler chunked)")               \
    X(prefill_chunks, uint32_t, PKV_COL_U32, 0, "prompt chunks run in the same iteration")         \
    X(prefill_scores, double, PKV_COL_F64, 0,                                                      \
      "entries: the chunks' attention scores, every layer (layers x query heads x keys)")          \
    X(queue_depth, uint32_t, PKV_COL_U32, 0, "requests waiting for admission at the step")         \
    X(pages_free, uint32_t, PKV_COL_U32, 0, "KV pages free at the step")                           \
    X(t_swap, double, PKV_COL_F64, 0,                                                              \
      "seconds: swap copies (preemption by swap; measured on cuda) the step waited for")           \
    X(pages_cached, uint32_t, PKV_COL_U32, 0,                                                      \
      "KV pages held only by the prefix cache (evictable) at the step")                            \
    X(policy_why, uint8_t, PKV_COL_U8, 0,                                                          \
      "adaptive's reasons, bits: 1 no gate for the step's G, 2 context below the gate, 4 "         \
      "PersistentKV predicted faster but not by the margin, 8 PersistentKV promoted")              \
    X(candidates, uint8_t, PKV_COL_U8, 0,                                                          \
      "bits: bit r set where route r (the /steps route enum's value) was planned and "             \
      "predicted for the step, a candidate of its policy")                                         \
    X(t_predicted, double, PKV_COL_F64, 0, "seconds: cost model of the whole step")                \
    X(t_dense_predicted, double, PKV_COL_F64, 0,                                                   \
      "seconds: cost model of the step's dense part (0 for the study layer)")                      \
    X(t_device, double, PKV_COL_F64, 1,                                                            \
      "seconds: measured device time of the attention work, every layer")                          \
    X(t_dense, double, PKV_COL_F64, 1,                                                             \
      "seconds: measured device time of the dense part (norms, GEMMs, RoPE, head)")                \
    X(t_wall, double, PKV_COL_F64, 1, "seconds: measured host wall time of the step")              \
    X(max_err, double, PKV_COL_F64, 1, "max |e| against the reference (NaN: unchecked)")           \
    X(mean_err, double, PKV_COL_F64, 1, "mean |e| against the reference (NaN: unchecked)")         \
    X(out_mean_abs, double, PKV_COL_F64, 1, "mean |O| of the step's output where checked")         \
    X(t_mlp, double, PKV_COL_F64, 1, "seconds: measured device time of the MLP tail")              \
    X(t_meta, double, PKV_COL_F64, 1,                                                              \
      "seconds: device time of the step's metadata work before attention (every 17th step; "       \
      "a full model's: every step)")                                                               \
    X(t_noise, double, PKV_COL_F64, 1,                                                             \
      "relative: the oracle's half interquartile range over the median of its route's repeats")    \
    X(t_plan, double, PKV_COL_F64, 1,                                                              \
      "seconds: host time planning the policy's candidates and predicting their costs (in "        \
      "t_wall)")                                                                                   \
    X(t_choose, double, PKV_COL_F64, 1,                                                            \
      "seconds: host time staging the step, choosing its route and laying out its tasks (in "      \
      "t_wall)")                                                                                   \
    X(t_host_engine, double, PKV_COL_F64, 3,                                                       \
      "seconds: the host work serving.engine's profile adds to the iteration (in the clock's "     \
      "advance: added, or overlapped with the GPU's time)")                                        \
    X(replica, uint32_t, PKV_COL_U32, 2, "the fleet's replica that ran the step")                  \
    X(experts_active, double, PKV_COL_F64, 4,                                                      \
      "a mixture of experts': experts given tokens, per MoE layer on average")                     \
    X(expert_tokens_max, uint32_t, PKV_COL_U32, 4,                                                 \
      "a mixture of experts': tokens on the busiest expert of any MoE layer")                      \
    X(spec_proposed, uint32_t, PKV_COL_U32, 5,                                                     \
      "speculative decoding: tokens proposed for the step's rows (beyond their own)")              \
    X(spec_accepted, uint32_t, PKV_COL_U32, 5,                                                     \
      "speculative decoding: of them, the tokens the verify kept")                                 \
    X(t_draft, double, PKV_COL_F64, 6,                                                             \
      "seconds: speculative decoding's proposer (the draft's or EAGLE's k passes, after the "      \
      "step's prompt chunks) as the backend measured it (in t_wall); NaN where predicted")

#define PKV_REQUEST_COLUMNS(X)                                                                     \
    X(id, int64_t, PKV_COL_I64, 0, "request number, in arrival order")                             \
    X(t_arrival, double, PKV_COL_F64, 0, "seconds of simulated time")                              \
    X(t_admitted, double, PKV_COL_F64, 0, "seconds; NaN: not reached")                             \
    X(t_first_token, double, PKV_COL_F64, 0, "seconds; NaN: not reached")                          \
    X(t_finish, double, PKV_COL_F64, 0, "seconds; NaN: not reached")                               \
    X(prompt_len, int32_t, PKV_COL_I32, 0, "tokens")                                               \
    X(decode_len, int32_t, PKV_COL_I32, 0, "tokens")                                               \
    X(generated, int32_t, PKV_COL_I32, 0, "decode tokens produced")                                \
    X(preemptions, int32_t, PKV_COL_I32, 0, "times preempted (recomputed or swapped)")             \
    X(slo_class, uint8_t, PKV_COL_U8, 0, "its class in workload.classes (0 without classes)")      \
    X(session, int64_t, PKV_COL_I64, 0, "its multi-turn session (workload.turns; -1: none)")       \
    X(turn, int32_t, PKV_COL_I32, 0, "its turn in the session, from 0")                            \
    X(state, uint8_t, PKV_COL_STATE, 0, "waiting, prefill, running or finished")                   \
    X(replica, uint32_t, PKV_COL_U32, 2, "the fleet's replica that served it")                     \
    X(prefill_replica, uint32_t, PKV_COL_U32, 2,                                                   \
      "the fleet's replica that prefilled it (its own replica unless disaggregated)")              \
    X(t_transfer_start, double, PKV_COL_F64, 2,                                                    \
      "seconds: its KV's transfer from the prefill replica began (NaN: none)")                     \
    X(t_transfer_end, double, PKV_COL_F64, 2,                                                      \
      "seconds: its KV's transfer ended, the prefill replica's pages freed (NaN: none)")

#define PKV_PREFILL_COLUMNS(X)                                                                     \
    X(index, uint64_t, PKV_COL_U64, 0, "prefill batch number")                                     \
    X(t_sim, double, PKV_COL_F64, 0, "seconds: simulated time at the batch's start")               \
    X(requests, uint32_t, PKV_COL_U32, 0, "prompts (or prompt chunks) in the batch")               \
    X(tokens, uint64_t, PKV_COL_U64, 0, "tokens: the prompts' (or chunks') lengths")               \
    X(scores, double, PKV_COL_F64, 0,                                                              \
      "entries: the batch's attention scores, every layer (layers x query heads x keys)")          \
    X(t_predicted, double, PKV_COL_F64, 0, "seconds: cost model (NaN for the study layer)")        \
    X(t_device, double, PKV_COL_F64, 1, "seconds: measured device time of the batch")              \
    X(t_wall, double, PKV_COL_F64, 1, "seconds: measured host wall time of the batch")             \
    X(t_swap, double, PKV_COL_F64, 0,                                                              \
      "seconds: swap copies (measured on cuda) the batch waited for")                              \
    X(t_advance, double, PKV_COL_F64, 0, "seconds: how far the batch moved the simulated clock")   \
    X(t_host_engine, double, PKV_COL_F64, 3,                                                       \
      "seconds: the host work serving.engine's profile adds to the batch (in t_advance)")          \
    X(replica, uint32_t, PKV_COL_U32, 2, "the fleet's replica that ran the batch")

/* A fleet's /replicas: one row per replica, written at the end of the run. */
#define PKV_REPLICA_COLUMNS(X)                                                                     \
    X(replica, uint32_t, PKV_COL_U32, 0, "the replica's number")                                   \
    X(pool, uint32_t, PKV_COL_U32, 0, "its pool: fleet.pools' order (0 without pools)")            \
    X(role, uint8_t, PKV_COL_U8, 0, "0 mixed, 1 prefill, 2 decode")                                \
    X(kv_pages, uint32_t, PKV_COL_U32, 0, "its KV pool's pages (serving.kv_pages)")                \
    X(routed, uint64_t, PKV_COL_U64, 0, "requests sent to it (by the router, or prefilled ones)")  \
    X(finished, uint64_t, PKV_COL_U64, 0, "requests that finished on it")                          \
    X(handed_off, uint64_t, PKV_COL_U64, 0, "requests it prefilled and sent to a decode replica")  \
    X(steps, uint64_t, PKV_COL_U64, 0, "decode steps it ran")                                      \
    X(prefills, uint64_t, PKV_COL_U64, 0, "prefill batches it ran")                                \
    X(decode_tokens, uint64_t, PKV_COL_U64, 0, "tokens its decode steps produced (a row a step)")  \
    X(busy_s, double, PKV_COL_F64, 0, "seconds its GPU was busy (steps and prefill batches)")      \
    X(mean_pages_used, double, PKV_COL_F64, 0,                                                     \
      "KV pages neither free nor evictable, averaged over its decode steps")                       \
    X(prefix_tokens, uint64_t, PKV_COL_U64, 0, "prompt tokens it admitted (prefix caching)")       \
    X(prefix_hit_tokens, uint64_t, PKV_COL_U64, 0, "of them found in its prefix cache")            \
    X(link_transfers, uint64_t, PKV_COL_U64, 0, "KV transfers its link carried (prefill role)")    \
    X(link_most, uint32_t, PKV_COL_U32, 0, "the most transfers its link carried at once")          \
    X(up_s, double, PKV_COL_F64, 0,                                                                \
      "replica-seconds: from its start (cold start included) to its end or the run's")             \
    X(scale_ups, uint32_t, PKV_COL_U32, 0, "times the autoscaler started it")                      \
    X(scale_downs, uint32_t, PKV_COL_U32, 0, "times the autoscaler drained it")

/* A fleet's /scale: the autoscaler's decisions and what became of them, in time order. */
#define PKV_SCALE_COLUMNS(X)                                                                       \
    X(t, double, PKV_COL_F64, 0, "seconds of simulated time")                                      \
    X(event, uint8_t, PKV_COL_U8, 0,                                                               \
      "0 a decision, 1 a replica started (cold), 2 ready (serves from now), 3 drained (takes "     \
      "no more requests), 4 off (empty, left), 5 back from draining")                              \
    X(replica, int32_t, PKV_COL_I32, 0, "the replica (-1 for a decision)")                         \
    X(active, uint32_t, PKV_COL_U32, 0, "the pool's replicas taking requests, after the event")    \
    X(starting, uint32_t, PKV_COL_U32, 0, "its replicas in their cold start, after the event")     \
    X(metric, double, PKV_COL_F64, 0,                                                              \
      "a decision's metric over the active replicas (ttft: the pool's percentile in ms, NaN "      \
      "when no first token came in its window; NaN for an event)")                                 \
    X(desired, uint32_t, PKV_COL_U32, 0, "a decision's replica count (0 else)")

#define PKV_RECORD_FIELD_(name, ctype, kind, measured, unit) ctype name;
#define PKV_RECORD_COUNT_(name, ctype, kind, measured, unit) +1
/* The tables' column counts, at compile time (writers size their buffers by them). */
enum {
    PKV_STEP_COLUMN_COUNT = 0 PKV_STEP_COLUMNS(PKV_RECORD_COUNT_),
    PKV_REQUEST_COLUMN_COUNT = 0 PKV_REQUEST_COLUMNS(PKV_RECORD_COUNT_),
    PKV_PREFILL_COLUMN_COUNT = 0 PKV_PREFILL_COLUMNS(PKV_RECORD_COUNT_),
    PKV_REPLICA_COLUMN_COUNT = 0 PKV_REPLICA_COLUMNS(PKV_RECORD_COUNT_),
    PKV_SCALE_COLUMN_COUNT = 0 PKV_SCALE_COLUMNS(PKV_RECORD_COUNT_),
};

/* One row of /steps, plus the per-candidate times that go to /routes and
 * /routes_measured. */
typedef struct pkv_step_rec {
    PKV_STEP_COLUMNS(PKV_RECORD_FIELD_)
    double t_route[PKV_ROUTE_COUNT];          /* seconds: predictions, NaN if not planned */
    double t_route_measured[PKV_ROUTE_COUNT]; /* seconds: the oracle's measured device times
                                                 (median of its repeats) */
} pkv_step_rec;

/* One row of /requests. */
typedef struct pkv_request_rec {
    PKV_REQUEST_COLUMNS(PKV_RECORD_FIELD_)
} pkv_request_rec;

/* One row of /prefills. */
typedef struct pkv_prefill_rec {
    PKV_PREFILL_COLUMNS(PKV_RECORD_FIELD_)
} pkv_prefill_rec;

/* One row of /replicas. */
typedef struct pkv_replica_rec {
    PKV_REPLICA_COLUMNS(PKV_RECORD_FIELD_)
} pkv_replica_rec;

/* /scale's events, in the order its `event` column's documentation lists them. */
enum {
    PKV_SCALE_DECIDE = 0,
    PKV_SCALE_START,
    PKV_SCALE_READY,
    PKV_SCALE_DRAIN,
    PKV_SCALE_OFF,
    PKV_SCALE_BACK
};

/* One row of /scale. */
typedef struct pkv_scale_rec {
    PKV_SCALE_COLUMNS(PKV_RECORD_FIELD_)
} pkv_scale_rec;

typedef enum pkv_request_state {
    PKV_REQ_WAITING = 0,
    PKV_REQ_PREFILL,
    PKV_REQ_RUNNING,
    PKV_REQ_FINISHED,
    PKV_REQ_REFUSED, /* past the model's context: answered with an error (workload.over_context) */
    PKV_REQ_STATE_COUNT
} pkv_request_state;

const char *pkv_request_state_name(pkv_request_state s);

/* A column of a record table, for writers and readers. */
typedef struct pkv_column {
    const char *name;
    size_t offset; /* bytes into the record struct */
    pkv_col_kind kind;
    int measured;
    const char *unit;
} pkv_column;

extern const pkv_column pkv_step_columns[];
extern const int pkv_step_column_count;
extern const pkv_column pkv_request_columns[];
extern const int pkv_request_column_count;
extern const pkv_column pkv_prefill_columns[];
extern const int pkv_prefill_column_count;
extern const pkv_column pkv_replica_columns[];
extern const int pkv_replica_column_count;
extern const pkv_column pkv_scale_columns[];
extern const int pkv_scale_column_count;

/* Bytes of one value of a column kind. */
size_t pkv_col_size(pkv_col_kind k);

#endif
