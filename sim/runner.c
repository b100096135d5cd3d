#include "runner.h"
#include "pkv_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pkv_run_experiment(const pkv_config *cfg, const pkv_run_opts *o, pkv_summary *out, pkv_err *e) {
    const char *in[6], *what[6];
    int n_in = pkv_config_inputs(cfg, in, what);
    if (o->record && pkv_output_ok(cfg->output, in, what, n_in, "output", e)) return -1;
    pkv_calib cal;
    if (pkv_calib_load(&cal, cfg->calibration, e)) return -1;
    if (cfg->calib_overrides && pkv_calib_apply(&cal, cfg->calib_overrides, "route.overrides", e)) {
        pkv_err sub = *e;
        pkv_fail(e, "%s: %s", cfg->file, sub.msg);
        pkv_calib_free(&cal);
        return -1;
    }
    pkv_backend_kind bk = pkv_backend_resolve((pkv_backend_kind)cfg->backend);
    int clock = cfg->clock != PKV_CONFIG_CLOCK_AUTO ? cfg->clock
                : bk == PKV_BACKEND_CUDA            ? PKV_CLOCK_WALL
                                                    : PKV_CLOCK_PREDICTED;
    if (bk == PKV_BACKEND_MODEL && clock != PKV_CLOCK_PREDICTED) {
        pkv_calib_free(&cal);
        return pkv_fail(e, "%s: run.clock: the model backend measures nothing; use \"predicted\"",
                        cfg->file);
    }
    if (cfg->prefill_measure && (bk != PKV_BACKEND_CUDA || clock == PKV_CLOCK_PREDICTED)) {
        pkv_calib_free(&cal);
        return pkv_fail(e,
                        "%s: serving.prefill.measure: only the cuda backend measures the prefill's "
                        "K/V write, on a wall or device clock (here: the %s backend, clock %s)",
                        cfg->file,
                        bk == PKV_BACKEND_CUDA  ? "cuda"
                        : bk == PKV_BACKEND_CPU ? "cpu"
                                                : "model",
                        clock == PKV_CLOCK_WALL     ? "wall"
                        : clock == PKV_CLOCK_DEVICE ? "device"
                                                    : "predicted");
    }
    pkv_engine eng;
    pkv_h5rec *rec = NULL;
    pkv_sim sim = {0};
    int sim_ok = 0, rc = -1;
    pkv_backend_spec bs = {
        .kind = bk,
        .kv_pages = cfg->kv_pages,
        .bt_stride = pkv_sim_bt_stride(cfg),
        .cuda_graph = pkv_config_graphs(cfg),
        .metadata_copy = cfg->metadata_upload == PKV_METADATA_COPY,
        .device = o->gpu,
        .seed = cfg->seed,
        .swap_slots = cfg->preemption == PKV_PREEMPT_SWAP ? cfg->swap_pages : 0,
        .layers_measured = cfg->layers_measured,
    };
    if (pkv_engine_init(&eng, &cfg->model, &cal, cfg->policy, (pkv_bucket_mode)cfg->bucket_mode,
                        cfg->max_active, &bs, (pkv_clock_source)clock, e)) {
        pkv_calib_free(&cal);
        return -1;
    }
    pkv_backend *be = eng.backend;
    pkvk_device_info dev = {.name = "none"};
    if (bk == PKV_BACKEND_CUDA) pkvk_device_info_get(&dev);
    if (bk == PKV_BACKEND_CUDA && strcmp(cal.gpu_name, dev.name) != 0 && !cfg->allow_other_gpu) {
        pkv_fail(e,
                 "%s: the calibration %s was made on \"%s\", but this GPU is \"%s\": run "
                 "`pkvsim calibrate -o FILE` here and name it in route.calibration, or set "
                 "route.allow_other_gpu to true",
                 cfg->file, cfg->calibration, cal.gpu_name, dev.name);
        goto done;
    }
    eng.check_every = cfg->check_every;
    eng.check_first = cfg->check_first;
    eng.oracle_reps = cfg->oracle_repeats;
    if (o->record) {
        pkv_provenance pv = {
            o->command_line ? o->command_line : "", be->name, dev.name, cfg->seed,
            pkv_model_dense(&cfg->model) ? pkv_prefill_attentions[eng.model.prefill_attn] : "none",
            /* the layers the cuda backend ran; the others are scaled from them */
            pkv_model_dense(&cfg->model) && bk == PKV_BACKEND_CUDA
                ? (cfg->layers_measured > 0 ? cfg->layers_measured : cfg->model.layers)
                : 0,
            pkv_config_graphs(cfg)};
        pkv_h5rec_opts ro = {.level = (pkv_record_level)cfg->record,
                             .measured = be->measures,
                             .routes_measured = be->measures && eng.policy.measured_oracle,
                             .candidates = eng.policy.candidates};
        pkv_attr ca[PKV_CALIB_ATTRS];
        int nca = pkv_calib_attrs(&cal, ca, PKV_CALIB_ATTRS);
        if (pkv_h5rec_open(&rec, cfg->output, &ro, e) ||
            pkv_h5rec_config(rec, cfg->text, cfg->resolved, e) ||
            pkv_h5rec_group(rec, "calibration", cal.json, ca, nca, e) ||
            pkv_h5rec_provenance(rec, &pv, e))
            goto done;
    }
    if (pkv_sim_init(&sim, cfg, &eng, rec, e)) goto done;
    sim_ok = 1;
    sim.stop = o->stop;
    sim.observe = o->observe;
    sim.observe_ctx = o->observe_ctx;
    sim.progress = !o->quiet;
    if (pkv_sim_run(&sim, e)) goto done;
    if (pkv_model_dense(&cfg->model)) {
        sim.summary.model_weight_bytes = pkv_model_weight_bytes(&cfg->model);
        sim.summary.model_kv_bytes_per_token =
            pkv_model_page_bytes(&cfg->model) / cfg->model.page_size;
        pkv_dense_cost dc;
        pkv_model_dense_cost(&cfg->model, &cal, 1, 1, &dc);
        sim.summary.model_dense_flops_per_token = dc.flops;
    }
    if (rec && pkv_h5rec_summary(rec, &sim.summary, e)) goto done;
    *out = sim.summary;
    rc = 0;
done:
    if (rec) {
        pkv_err ce;
        if (pkv_h5rec_close(rec, rc == 0, &ce) && rc == 0) {
            *e = ce;
            rc = -1;
        }
    }
    if (sim_ok) pkv_sim_free(&sim);
    pkv_engine_free(&eng);
    pkv_calib_free(&cal);
    return rc;
}
