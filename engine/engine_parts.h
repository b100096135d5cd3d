/* What the engine's files share (engine.c: set-up, a step, a prefill, a swap; clock.c:
 * the time under the run's clock and the host work; oracle.c: the oracle's runs;
 * proposer.c: speculative decoding's proposer run for real). Not for use outside
 * engine/. */
#ifndef PKV_ENGINE_PARTS_H
#define PKV_ENGINE_PARTS_H

#include "engine.h"

/* The one place a time under the engine's clock is chosen, for decode steps,
 * prefills and swaps alike: the cost model's prediction, the host's wall time or
 * the device's time. */
double pkv_engine_clock_time(const pkv_engine *eng, double predicted, double wall, double device);
/* An iteration's time with the engine's host work: requests and prompt tokens it
 * scheduled, tokens it sampled, its share of them (a decode step's of its window, else
 * 1), whether its forward is replayed from a graph (else launched layer by layer:
 * host.eager_layer_s a layer, and over several GPUs host.eager_allreduce_s an all-reduce of
 * a forward over prompt tokens); *host receives the host work alone. */
double pkv_engine_with_host(const pkv_engine *eng, double gpu, int64_t requests, int64_t tokens,
                            int64_t sampled, double share, bool replayed, double *host);
/* The oracle: each valid candidate of the step run in isolation oracle_reps times; the
 * fastest under the run's clock is *best (rec: its measured figures; *spent the wall
 * time of every run, *best_wall the chosen one's median). */
int pkv_engine_run_oracle(pkv_engine *eng, const pkv_batch_view *v, const pkv_step_view *sv,
                          int check, pkv_step_rec *rec, pkv_route *best, double *spent,
                          double *best_wall, pkv_err *e);

/* The proposer's planner (where speculative decoding proposes with a model) and its
 * backend, of the engine's backend kind from b (pools of b->kv_pages pages), where the kind
 * measures and the proposer is a dense model; else none (its proposals predicted). */
int pkv_proposer_init(pkv_engine *eng, pkv_backend_kind kind, const pkv_backend_spec *b,
                      int32_t cap_rows, pkv_err *e);
void pkv_proposer_free(pkv_proposer *p);
/* The proposer's forward over prompt pieces (a prefill batch, or an iteration's chunks):
 * their KV in its pools; *t_device its device time (NaN: none ran). Its backend's t_unrun
 * goes to the engine's backend's. */
int pkv_proposer_prefill(pkv_engine *eng, const pkv_prefill_view *pv, double *t_device, pkv_err *e);
/* The cost model's attention time of one of the proposer's layers in a pass over v's rows
 * (*t_layer; the middle pass's lengths, on route r where it can run it): 0 without a
 * proposer. */
int pkv_proposer_price(pkv_engine *eng, const pkv_batch_view *v, pkv_route r, double *t_layer,
                       pkv_err *e);
/* A verify step's proposals run (an iteration's prompt chunks first, as a prefill): k =
 * v->spec_tokens passes over v's rows, one token a row (pass j the token at position seq_len - k -
 * 1 + j), each on route r where the proposer can run it (else pkv_workqueue, else ref_paged);
 * *t_device: their measured device time (NaN where not measured), *t_attn its passes'
 * attention. The proposer's backend's t_unrun goes to the engine's backend's. */
int pkv_proposer_run(pkv_engine *eng, const pkv_batch_view *v, pkv_route r, uint64_t index,
                     double *t_device, double *t_attn, pkv_err *e);

#endif
