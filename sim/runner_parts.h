/* What the runner's files share (runner.c: a run's set-up, its sink and its end;
 * runner_fleet.c: a fleet's replicas behind the router, over ranks or not). Not for use
 * outside sim/. */
#ifndef PKV_RUNNER_PARTS_H
#define PKV_RUNNER_PARTS_H

#include "runner.h"
#include "fleet.h"
#include "h5rec.h"

/* ---- the run's sink: the HDF5 recorder, the summary, the progress line ---------------- */
typedef struct pkv_run_sink {
    pkv_h5rec *rec; /* NULL: nothing recorded */
    pkv_summary sum;
    double t_progress; /* host seconds of the last progress line */
} pkv_run_sink;

/* run_sink.c: the sink's operations (pkv_sim_sink's, ctx a pkv_run_sink): a step, a
 * prefill, a request to the recorder and the summary, an inter-token gap to the
 * summary, the progress line (at most every half second, and at the end); the run's
 * end (the summary finished). */
int pkv_run_sink_step(void *ctx, const pkv_step_rec *r, double advance, pkv_err *e);
int pkv_run_sink_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e);
int pkv_run_sink_request(void *ctx, const pkv_request_rec *q, pkv_err *e);
int pkv_run_sink_itl(void *ctx, int64_t id, double gap, pkv_err *e);
void pkv_run_sink_progress(void *ctx, const pkv_sim_progress *p, bool final);
int pkv_run_sink_end(void *ctx, double t_end, bool interrupted, const pkv_sim_counts *c,
                     pkv_err *e);

/* run_engine.c. An engine's options: its serving settings from c (the experiment, or a fleet pool's
 * configuration), the run's own from run, under the run's clock. */
pkv_engine_opts pkv_run_engine_opts(const pkv_config *c, const pkv_config *run,
                                    pkv_clock_source clock, bool plan_needed);
/* What eng's backend counted over the run (its stats), and its proposer's time against the
 * cost model's, as lines to log (NULL: nothing). */
void pkv_run_backend_note(const pkv_engine *eng, pkv_log_fn log, void *ctx);
/* The experiment's calibration with its route.overrides. */
int pkv_run_load_calib(const pkv_config *cfg, pkv_calib *cal, pkv_err *e);

/* runner_fleet.c: the fleet's run (more than one replica set up), eng0 the run's engine
 * (replica 0's where the fleet has no pools), into the run's sink k; over ranks (NULL:
 * one process) this process's block of replicas; stop: the run's stop flag. */
int pkv_run_fleet(const pkv_config *cfg, pkv_calib *cal, const pkv_backend_spec *bs,
                  pkv_engine *eng0, pkv_run_sink *k, const pkv_ranks *ranks,
                  volatile sig_atomic_t *stop, pkv_err *e);

#endif
