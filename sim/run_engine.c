/* What an engine is made of, from a configuration: its options and its calibration
 * (the run's, and each fleet pool's). */
#include "runner_parts.h"

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
