#include "runner_parts.h"
#include "fleet.h"
#include "h5rec.h"
#include "pkv_clock.h"
#include "pkv_files.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backend's side notes (the warm-up's time, a step's host parts), on stderr. */
static void log_line(void *ctx, const char *line) {
    fprintf(stderr, "pkvsim: %s\n", line);
}

/* The summary as the experiment sets it up: its SLOs (a class's, else the run's),
 * percentiles and the model's per-token figures. */
static int summary_init(pkv_summary *s, const pkv_config *cfg) {
    if (pkv_summary_init(s)) return -1;
    s->slo = cfg->slo;
    s->n_classes = cfg->workload.n_classes;
    for (int k = 0; k < cfg->workload.n_classes; k++) {
        const pkv_slo_class *c = &cfg->workload.classes[k];
        snprintf(s->class_names[k], sizeof s->class_names[k], "%s", c->name);
        s->class_slo[k] = (pkv_slo){c->ttft_s > 0 ? c->ttft_s : cfg->slo.ttft,
                                    c->tpot_s > 0 ? c->tpot_s : cfg->slo.tpot,
                                    c->e2el_s > 0 ? c->e2el_s : cfg->slo.e2el};
    }
    s->n_pcts = cfg->n_percentiles;
    s->offered = cfg->workload.trace ? (uint64_t)cfg->workload.trace->n
                                     : (uint64_t)cfg->workload.num_requests;
    memcpy(s->pcts, cfg->percentiles, sizeof s->pcts);
    const pkv_model_figures mf = pkv_model_figures_of(&cfg->model);
    s->model_weight_bytes = mf.weight_bytes;
    s->model_kv_bytes_per_token = mf.kv_bytes_per_token;
    s->model_dense_flops_per_token = mf.dense_flops_per_token;
    return 0;
}

/* What the run or one of its fleet's pools has, for the record's optional columns: an
 * engine profile's host work, speculative decoding (its proposer run for real where the
 * backend measures), a mixture of experts. */
static bool profiled(const pkv_config *c) {
    return *c->engine_file;
}
static bool speculating(const pkv_config *c) {
    return c->spec.method != PKV_SPEC_NONE;
}
static bool proposing(const pkv_config *c) {
    return pkv_proposer_runs(&c->spec, &c->model);
}
static bool chunking(const pkv_config *c) {
    return c->scheduler == PKV_SCHED_CHUNKED;
}
static bool has_experts(const pkv_config *c) {
    return pkv_model_moe_layers(&c->model) > 0;
}
static bool any_pool(const pkv_config *cfg, bool (*has)(const pkv_config *)) {
    bool any = has(cfg);
    for (int p = 0; p < cfg->fleet.n_pools; p++) any |= has(cfg->fleet.pools[p].cfg);
    return any;
}

int pkv_run_experiment(const pkv_config *cfg, const pkv_run_opts *o, pkv_summary *out, pkv_err *e) {
    const char *in[PKV_CONFIG_INPUTS], *what[PKV_CONFIG_INPUTS];
    int n_in = pkv_config_inputs(cfg, in, what);
    if (o->record && pkv_output_ok(cfg->output, in, what, n_in, "output", e)) return -1;
    pkv_calib cal;
    if (pkv_run_load_calib(cfg, &cal, e)) return -1;
    if (pkv_config_check_memory(cfg, cal.memory_gib, cal.gpu_name, e)) { /* the one it runs on */
        pkv_err sub = *e;
        pkv_calib_free(&cal);
        return pkv_fail(e, "%s: %s", cfg->file, sub.msg);
    }
    pkv_backend_kind bk = pkv_backend_resolve((pkv_backend_kind)cfg->backend);
    const pkv_backend_caps *caps = pkv_backend_caps_of(bk);
    const pkv_clock_source clock = pkv_engine_clock_of(cfg->clock, bk);
    if (!caps->speculative && any_pool(cfg, speculating)) {
        pkv_calib_free(&cal);
        return pkv_fail(e,
                        "%s: serving.speculative runs on the model, cpu and cuda backends; "
                        "the %s backend's verify steps are not built",
                        cfg->file, pkv_backend_names[bk]);
    }
    if (!caps->chunks && any_pool(cfg, chunking)) {
        pkv_calib_free(&cal);
        return pkv_fail(e,
                        "%s: serving.scheduler \"chunked\"%s runs prompt chunks inside decode "
                        "steps, which the %s backend does not; run it on the model or cuda "
                        "backend, or with serving.scheduler \"prefill_first\"",
                        cfg->file,
                        *cfg->engine_file ? " (the experiment's, or serving.engine's profile's)"
                                          : "",
                        pkv_backend_names[bk]);
    }
    if (!caps->measures && clock != PKV_CLOCK_PREDICTED) {
        pkv_calib_free(&cal);
        return pkv_fail(e, "%s: run.clock: the model backend measures nothing; use \"predicted\"",
                        cfg->file);
    }
    if (cfg->prefill_measure && (!caps->prefill_measure || clock == PKV_CLOCK_PREDICTED)) {
        pkv_calib_free(&cal);
        return pkv_fail(e,
                        "%s: serving.prefill.measure: only the cuda backend measures the prefill's "
                        "K/V write, on a wall or device clock (here: the %s backend, clock %s)",
                        cfg->file, pkv_backend_names[bk], pkv_clock_names[clock]);
    }
    pkv_engine eng;
    pkv_run_sink sink = {0};
    pkv_h5rec *rec = NULL;
    pkv_sim sim = {0};
    int sim_ok = 0, sum_ok = 0, rc = -1;
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
        .log = log_line,
    };
    const pkv_engine_opts eo = pkv_run_engine_opts(
        cfg, cfg, (pkv_clock_source)clock, !o->record || cfg->record >= PKV_RECORD_REQUESTS);
    if (pkv_engine_init(&eng, &cfg->model, &cal, &eo, &bs, e)) {
        pkv_calib_free(&cal);
        return -1;
    }
    pkv_backend *be = eng.backend;
    char gpu[128];
    pkv_backend_device_name(bk, gpu, sizeof gpu);
    if (caps->gpu && strcmp(cal.gpu_name, gpu) != 0 && !cfg->allow_other_gpu) {
        pkv_fail(e,
                 "%s: the calibration %s was made on \"%s\", but this GPU is \"%s\": run "
                 "`pkvsim calibrate -o FILE` here and name it in route.calibration, or set "
                 "route.allow_other_gpu to true",
                 cfg->file, cfg->calibration, cal.gpu_name, gpu);
        goto done;
    }
    if (o->record && (!o->ranks || o->ranks->rank == 0)) { /* over ranks: rank 0's file */
        pkv_provenance pv = {
            o->command_line ? o->command_line : "", be->name, gpu, cfg->seed,
            eng.kind->prefill_attention ? pkv_prefill_attentions[eng.model.prefill_attn] : "none",
            /* the layers the cuda backend ran; the others are scaled from them */
            !eng.kind->kv_synthetic && caps->gpu
                ? (cfg->layers_measured > 0 ? cfg->layers_measured : cfg->model.layers)
                : 0,
            pkv_config_graphs(cfg), o->sweep_point};
        pkv_h5rec_opts ro = {.level = (pkv_record_level)cfg->record,
                             .measured = be->measures,
                             .routes_measured = be->measures && eng.policy.measured_oracle,
                             .candidates = eng.policy.candidates,
                             .fleet = pkv_fleet_slots(&cfg->fleet) > 1,
                             .engine_host = any_pool(cfg, profiled),
                             .moe = any_pool(cfg, has_experts),
                             .speculative = any_pool(cfg, speculating),
                             .proposer = be->measures && any_pool(cfg, proposing)};
        pkv_attr ca[PKV_CALIB_ATTRS];
        int nca = pkv_calib_attrs(&cal, ca, PKV_CALIB_ATTRS);
        if (pkv_h5rec_open(&rec, cfg->output, &ro, e) ||
            pkv_h5rec_config(rec, cfg->text, cfg->resolved, e) ||
            pkv_h5rec_group(rec, "calibration", cal.json, ca, nca, e) ||
            pkv_h5rec_provenance(rec, &pv, e))
            goto done;
    }
    if (summary_init(&sink.sum, cfg)) {
        pkv_fail(e, "out of memory");
        goto done;
    }
    sink.sum.log = o->ranks ? NULL : o->request_log; /* over ranks: rank 0 sees its own */
    sum_ok = 1;
    sink.rec = rec;
    const pkv_sim_sink ss = {.ctx = &sink,
                             .step = pkv_run_sink_step,
                             .prefill = pkv_run_sink_prefill,
                             .request = pkv_run_sink_request,
                             .itl = pkv_run_sink_itl,
                             .progress = o->quiet ? NULL : pkv_run_sink_progress,
                             .end = pkv_run_sink_end};
    if (!o->quiet && (double)cfg->kv_pages + (double)cfg->swap_pages >= 1e8)
        fprintf(stderr, "pkvsim: setting up %d KV pages%s (a few seconds a hundred million)\n",
                cfg->kv_pages, cfg->preemption == PKV_PREEMPT_SWAP ? " and the swap pool" : "");
    if (pkv_fleet_slots(&cfg->fleet) > 1) {
        if (pkv_run_fleet(cfg, &cal, &bs, &eng, &sink, o->ranks, o->stop, e)) goto done;
        goto ran;
    }
    if (pkv_sim_init(&sim, cfg, &eng, &ss, o->stop, e)) goto done;
    sim_ok = 1;
    sim.observe = o->observe;
    sim.observe_ctx = o->observe_ctx;
    sink.t_progress = pkv_clock_now();
    if (pkv_sim_run(&sim, e)) goto done;
ran:
    if (rec && pkv_h5rec_summary(rec, &sink.sum, e)) goto done;
    *out = sink.sum;
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
    if (sum_ok) pkv_summary_free(&sink.sum);
    pkv_run_backend_note(&eng, bs.log, bs.log_ctx);
    pkv_engine_free(&eng);
    pkv_calib_free(&cal);
    return rc;
}
