#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pkv_backend_kind pkv_backend_resolve(pkv_backend_kind k) {
    if (k != PKV_BACKEND_AUTO) return k;
    return pkvk_device_count() > 0 ? PKV_BACKEND_CUDA : PKV_BACKEND_MODEL;
}

/* The cuda backend is made after the engine, whose planner bounds the plans. */
static pkv_backend *make_backend(const pkv_config *cfg, pkv_backend_kind k, const pkv_engine *eng,
                                 int32_t bt_stride, pkv_err *e) {
    switch (k) {
    case PKV_BACKEND_CPU:
        return pkv_backend_cpu_create(&cfg->shape, cfg->kv_pages, cfg->max_active, cfg->seed, e);
    case PKV_BACKEND_CUDA: {
        int32_t cap = eng->planner.plans[0].cap_tasks;
        return pkv_backend_cuda_create(&cfg->shape, cfg->kv_pages, cfg->max_active, bt_stride, cap,
                                       cap, (int32_t)cfg->mlp_inter, cfg->cuda_graph,
                                       (pkvk_upload_mode)cfg->metadata_upload, cfg->seed, e);
    }
    default: {
        pkv_backend *b = pkv_backend_model_create();
        if (!b) pkv_fail(e, "out of memory");
        return b;
    }
    }
}

int pkv_run_experiment(const pkv_config *cfg, const pkv_run_opts *o, pkv_summary *out, pkv_err *e) {
    pkv_calib cal;
    if (pkv_calib_load(&cal, cfg->calibration, e)) return -1;
    if (cfg->calib_overrides && pkv_calib_apply(&cal, cfg->calib_overrides, "route.overrides", e)) {
        pkv_err sub = *e;
        pkv_fail(e, "%s: %s", cfg->file, sub.msg);
        pkv_calib_free(&cal);
        return -1;
    }
    pkv_backend_kind bk = pkv_backend_resolve(cfg->backend);
    int clock = cfg->clock >= 0          ? cfg->clock
                : bk == PKV_BACKEND_CUDA ? PKV_CLOCK_WALL
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
    if (pkv_engine_init(&eng, &cfg->shape, &cal, cfg->policy, cfg->bucket_mode, cfg->max_active,
                        NULL, (pkv_clock_source)clock, e)) {
        pkv_calib_free(&cal);
        return -1;
    }
    int32_t bt_stride =
        (int32_t)((cfg->workload.max_context + cfg->shape.page_size - 1) / cfg->shape.page_size);
    pkv_backend *be = eng.backend = make_backend(cfg, bk, &eng, bt_stride, e);
    if (!be) goto done;
    pkvk_device_info dev = {.name = "none"};
    if (bk == PKV_BACKEND_CUDA) {
        pkvk_device_info_get(&dev);
        pkv_calib_flashinfer_occupancy(&cal, &cfg->shape);
    }
    if (bk == PKV_BACKEND_CUDA && strcmp(cal.gpu_name, dev.name) != 0 && !cfg->allow_other_gpu) {
        pkv_fail(e,
                 "%s: the calibration %s was made on \"%s\", but this GPU is \"%s\": run "
                 "`pkvsim calibrate -o FILE` here and name it in route.calibration, or set "
                 "route.allow_other_gpu to true",
                 cfg->file, cfg->calibration, cal.gpu_name, dev.name);
        goto done;
    }
    eng.check_every = cfg->check_every;
    eng.mlp_bytes = 3.0 * (double)cfg->mlp_inter * cfg->shape.hq * cfg->shape.d * 2;
    eng.check_first = cfg->check_first;
    if (o->record) {
        pkv_provenance pv = {o->command_line ? o->command_line : "", be->name, dev.name, cfg->seed};
        if (pkv_h5rec_open(&rec, cfg->output, e) ||
            pkv_h5rec_config(rec, cfg->text, cfg->resolved, e) ||
            pkv_h5rec_calibration(rec, &cal, e) || pkv_h5rec_provenance(rec, &pv, e))
            goto done;
    }
    if (pkv_sim_init(&sim, cfg, &eng, rec, e)) goto done;
    sim_ok = 1;
    sim.stop = o->stop;
    sim.progress = !o->quiet;
    if (pkv_sim_run(&sim, e)) goto done;
    if (rec) {
        pkv_request_rec *tab = pkv_sim_request_table(&sim);
        if (!tab) {
            pkv_fail(e, "out of memory");
            goto done;
        }
        int w =
            pkv_h5rec_requests(rec, tab, sim.n_req, e) || pkv_h5rec_summary(rec, &sim.summary, e);
        free(tab);
        if (w) goto done;
    }
    if (o->requests) {
        *o->requests = pkv_sim_request_table(&sim);
        *o->n_requests = sim.n_req;
        if (!*o->requests) {
            pkv_fail(e, "out of memory");
            goto done;
        }
    }
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
