/* What an engine is made of, from a configuration: its options and its calibration
 * (the run's, and each fleet pool's). */
#include "runner_parts.h"

#include <stdio.h>

/* An engine's options: its serving settings from c (the experiment, or a fleet pool's
 * configuration), the run's own from run (its checks, the oracle's runs, the prefill's
 * measurement), under the run's clock; the run's record decides what its steps plan. */
pkv_engine_opts pkv_run_engine_opts(const pkv_config *c, const pkv_config *run,
                                    pkv_clock_source clock, bool plan_needed) {
    pkv_engine_opts eo = {.policy = c->policy,
                          .bucket_mode = (pkv_bucket_mode)c->bucket_mode,
                          .cap_rows = c->max_active,
                          .clock = clock,
                          .check_every = run->check_every,
                          .check_first = run->check_first,
                          .oracle_reps = run->oracle_repeats,
                          .prefill_base_s = c->prefill_base_s,
                          .prefill_per_token_s = c->prefill_per_token_s,
                          .prefill_measure = run->prefill_measure,
                          .plan_needed = plan_needed,
                          .host = c->engine.host,
                          .spec = c->spec};
    eo.host.window = c->scheduler_steps;
    return eo;
}

/* The experiment's calibration with its route.overrides. */
int pkv_run_load_calib(const pkv_config *cfg, pkv_calib *cal, pkv_err *e) {
    if (pkv_calib_load(cal, cfg->calibration, pkv_model_calib_section(&cfg->model), e)) return -1;
    if (cfg->calib_overrides && pkv_calib_apply(cal, cfg->calib_overrides, "route.overrides", e)) {
        pkv_err sub = *e;
        pkv_calib_free(cal);
        return pkv_fail(e, "%s: %s", cfg->file, sub.msg);
    }
    return 0;
}

void pkv_run_backend_note(const pkv_engine *eng, pkv_log_fn log, void *ctx) {
    const pkv_backend_stats *s = &eng->backend->stats;
    const pkv_proposer *p = &eng->proposer;
    char line[320];
    if (!log) return;
    if (p->steps) {
        const double per = 1e3 / p->steps;
        snprintf(line, sizeof line,
                 "speculative decoding's proposer (%s) run on the %s backend: %.3f ms a step "
                 "measured, %.3f ms predicted by the cost model (its passes' attention %.3f / "
                 "%.3f ms; mean of %lld steps after warm-up)",
                 p->model.name, p->backend->name, per * p->measured, per * p->predicted,
                 per * p->measured_attn, per * p->predicted_attn, (long long)p->steps);
        log(ctx, line);
    }
    if (s->model_steps) {
        const double per = 1e6 / s->model_steps;
        snprintf(line, sizeof line,
                 "reading a step's %d timers took %.1f us of host time (mean of %lld steps; left "
                 "out of t_wall)",
                 s->timers, s->timer_reads * per, (long long)s->model_steps);
        log(ctx, line);
        snprintf(line, sizeof line,
                 "host time of a step (mean; in t_wall): prepare, policy and task layout %.1f us, "
                 "upload %.1f us, launch %.1f us",
                 s->host_prepare * per, s->host_upload * per, s->host_launch * per);
        log(ctx, line);
    }
    if (s->graph_steps && s->model_steps)
        snprintf(line, sizeof line,
                 "cuda graphs: %lld steps replayed, %lld graphs captured (route, rows bucket, "
                 "merge) in %.1f ms of host time (left out of t_wall)",
                 (long long)s->graph_steps, (long long)s->graph_made, 1e3 * s->capture_time);
    else if (s->graph_steps)
        snprintf(line, sizeof line,
                 "cuda graphs: %lld steps, %lld replays of an updated graph, %lld instantiations",
                 (long long)s->graph_steps, (long long)s->graph_reused,
                 (long long)(s->graph_steps - s->graph_reused));
    if (s->graph_steps) log(ctx, line);
    if (s->upload_copies) {
        snprintf(line, sizeof line,
                 "%lld of %lld plan uploads exceeded the launch's parameters and were copied",
                 (long long)s->upload_copies, (long long)s->uploads);
        log(ctx, line);
    }
}
