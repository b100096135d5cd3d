#include "runner.h"
#include "fleet.h"
#include "rng.h"
#include "h5rec.h"
#include "pkv_clock.h"
#include "pkv_files.h"
#include "pkv_mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the run's sink: the HDF5 recorder, the summary, the progress line ---------------- */
typedef struct run_sink {
    pkv_h5rec *rec; /* NULL: nothing recorded */
    pkv_summary sum;
    double t_progress; /* host seconds of the last progress line */
} run_sink;

static int sink_step(void *ctx, const pkv_step_rec *r, double advance, pkv_err *e) {
    run_sink *k = ctx;
    pkv_summary_add_step(&k->sum, r, advance);
    return k->rec ? pkv_h5rec_step(k->rec, r, e) : 0;
}

static int sink_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e) {
    run_sink *k = ctx;
    pkv_summary_add_prefill(&k->sum, p);
    return k->rec ? pkv_h5rec_prefill(k->rec, p, e) : 0;
}

static int sink_request(void *ctx, const pkv_request_rec *q, pkv_err *e) {
    run_sink *k = ctx;
    if (pkv_summary_add_request(&k->sum, q)) return pkv_fail(e, "out of memory");
    return k->rec ? pkv_h5rec_request(k->rec, q, e) : 0;
}

static int sink_itl(void *ctx, int64_t id, double gap, pkv_err *e) {
    return pkv_summary_add_itl(&((run_sink *)ctx)->sum, 0, id, gap) ? pkv_fail(e, "out of memory")
                                                                    : 0;
}

/* On stderr, at most every half second (and at the end). */
static void sink_progress(void *ctx, const pkv_sim_progress *p, bool final) {
    run_sink *k = ctx;
    if (!final && pkv_clock_now() - k->t_progress <= 0.5) return;
    k->t_progress = pkv_clock_now();
    char pct[16] = "";
    if (p->done >= 0) snprintf(pct, sizeof pct, "%5.1f%%  ", 100 * fmin(p->done, 1));
    fprintf(stderr, "\r  %sstep %llu  t=%.4g s  running %d  waiting %zu  finished %zu/%zu%s", pct,
            (unsigned long long)p->steps, p->t_now, p->running, p->waiting, p->finished, p->arrived,
            final ? "\n" : "   ");
}

static int sink_end(void *ctx, double t_end, bool interrupted, const pkv_sim_counts *c,
                    pkv_err *e) {
    pkv_summary *s = &((run_sink *)ctx)->sum;
    s->interrupted = interrupted;
    s->prefix_blocks = c->prefix_blocks, s->prefix_tokens = c->prefix_tokens;
    s->prefix_hits = c->prefix_hits, s->prefix_hit_tokens = c->prefix_hit_tokens;
    s->prefix_evictions = c->prefix_evictions;
    s->prefix_unbounded_hit_tokens = c->prefix_unbounded_hit_tokens;
    s->clamped = c->clamped;
    s->swap_outs = c->swap_outs, s->swap_ins = c->swap_ins, s->swap_pages = c->swap_pages;
    s->swap_time_s = c->swap_time_s, s->swap_predicted_s = c->swap_predicted_s;
    s->bounded = c->bounded > 0 && !interrupted;
    s->ttft_parts_n = c->ttft_n;
    s->ttft_parts_s[0] = c->ttft_queue_s, s->ttft_parts_s[1] = c->ttft_wait_s;
    s->ttft_parts_s[2] = c->ttft_prefill_s, s->ttft_parts_s[3] = c->ttft_client_s;
    return pkv_summary_finish(s, t_end) ? pkv_fail(e, "out of memory") : 0;
}

/* The backend's side notes (the warm-up's time, a step's host parts), on stderr. */
static void log_line(void *ctx, const char *line) {
    fprintf(stderr, "pkvsim: %s\n", line);
}

/* ---- a fleet (more than one replica set up): replicas behind the router, one sink --- */
/* Each replica's records go to the run's sink with the replica's number. */
typedef struct replica_sink {
    run_sink *k;
    pkv_replica_rec row; /* its /replicas row as it grows */
    double pages_used;   /* summed over its steps */
} replica_sink;

static int replica_step(void *ctx, const pkv_step_rec *r, double advance, pkv_err *e) {
    replica_sink *s = ctx;
    pkv_step_rec c = *r;
    c.replica = s->row.replica;
    s->row.steps++, s->row.decode_tokens += r->rows, s->row.busy_s += advance;
    s->pages_used += (double)s->row.kv_pages - r->pages_free - r->pages_cached;
    return sink_step(s->k, &c, advance, e);
}

static int replica_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e) {
    replica_sink *s = ctx;
    pkv_prefill_rec c = *p;
    c.replica = s->row.replica;
    s->row.prefills++, s->row.busy_s += p->t_advance;
    return sink_prefill(s->k, &c, e);
}

static int replica_request(void *ctx, const pkv_request_rec *q, pkv_err *e) {
    replica_sink *s = ctx;
    s->row.finished += !isnan(q->t_finish);
    pkv_request_rec c = *q;
    c.replica = s->row.replica;
    if (isnan(c.t_transfer_end)) c.prefill_replica = c.replica; /* prefilled here */
    return sink_request(s->k, &c, e);
}

/* A replica's requests are numbered from 0 on each: its gaps keep its number. */
static int replica_itl(void *ctx, int64_t id, double gap, pkv_err *e) {
    const replica_sink *s = ctx;
    return pkv_summary_add_itl(&s->k->sum, s->row.replica, id, gap) ? pkv_fail(e, "out of memory")
                                                                    : 0;
}

/* An engine's options: its serving settings from c (the experiment, or a fleet pool's
 * configuration), the run's own from run (its checks, the oracle's runs, the prefill's
 * measurement), under the run's clock; the run's record decides what its steps plan. */
static pkv_engine_opts engine_opts(const pkv_config *c, const pkv_config *run,
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
static int load_calib(const pkv_config *cfg, pkv_calib *cal, pkv_err *e) {
    if (pkv_calib_load(cal, cfg->calibration, pkv_model_calib_section(&cfg->model), e)) return -1;
    if (cfg->calib_overrides && pkv_calib_apply(cal, cfg->calib_overrides, "route.overrides", e)) {
        pkv_err sub = *e;
        pkv_calib_free(cal);
        return pkv_fail(e, "%s: %s", cfg->file, sub.msg);
    }
    return 0;
}

/* Two settings whose engines hold the same weights (the model's shape on the GPU and its
 * layers there, the seed they are drawn from). */
static bool same_weights(const pkv_config *a, const pkv_config *b) {
    const pkvk_model_shape x = pkv_model_gpu_shape(&a->model), y = pkv_model_gpu_shape(&b->model);
    return pkv_model_dense(&a->model) && !memcmp(&x, &y, sizeof x) && a->seed == b->seed &&
           a->layers_measured == b->layers_measured;
}

/* What a fleet over MPI ranks can do: its replicas' only exchange is the view's refresh
 * (sim/fleet.h), so the view must be refreshed periodically, and nothing else may cross
 * from one replica to another (no KV handoff, no router queue or cache probe, no
 * autoscaler over a pool's loads); the summary is merged, the per-step and per-request
 * rows are not. */
static int ranks_ok(const pkv_config *cfg, const pkv_ranks *r, pkv_err *e) {
    const pkv_fleet_spec *f = &cfg->fleet;
    const char *why =
        !(f->view_refresh_s > 0) ? "fleet.view_refresh_ms above 0 (the ranks exchange "
                                   "the view at each refresh: its age is their "
                                   "lookahead)"
        : f->router == PKV_ROUTER_CENTRAL_QUEUE || f->router == PKV_ROUTER_PREFIX_AFFINITY
            ? "a fleet.router other than central_queue and prefix_affinity (they "
              "read every replica at each decision)"
        : f->autoscale.on ? "no fleet.autoscale"
        : cfg->record != PKV_RECORD_SUMMARY
            ? "run.record \"summary\" (the ranks merge the summary and /replicas)"
            : NULL;
    for (int p = 0; p < f->n_pools && !why; p++)
        if (f->pools[p].role != PKV_ROLE_MIXED)
            why = "mixed pools only (a KV handoff would cross the ranks)";
    if (why) return pkv_fail(e, "%s: a fleet over %d MPI ranks needs %s", cfg->file, r->size, why);
    if (pkv_fleet_slots(f) < r->size)
        return pkv_fail(e, "%s: %d MPI ranks for %d replicas: at most one rank a replica",
                        cfg->file, r->size, pkv_fleet_slots(f));
    return 0;
}

/* a += b */
static void counts_add(pkv_sim_counts *a, const pkv_sim_counts *b) {
    a->prefix_blocks += b->prefix_blocks, a->prefix_tokens += b->prefix_tokens;
    a->prefix_hit_tokens += b->prefix_hit_tokens, a->prefix_hits += b->prefix_hits;
    a->prefix_evictions += b->prefix_evictions;
    a->prefix_unbounded_hit_tokens += b->prefix_unbounded_hit_tokens;
    a->swap_outs += b->swap_outs, a->swap_ins += b->swap_ins, a->swap_pages += b->swap_pages;
    a->swap_time_s += b->swap_time_s, a->swap_predicted_s += b->swap_predicted_s;
    a->ttft_n += b->ttft_n, a->ttft_queue_s += b->ttft_queue_s, a->ttft_wait_s += b->ttft_wait_s;
    a->ttft_prefill_s += b->ttft_prefill_s, a->ttft_client_s += b->ttft_client_s;
    a->bounded += b->bounded;
}

/* Over ranks: the counts, the end time and interruption of every process, summed, on
 * every rank; the summaries merged into rank 0's. */
static int ranks_merge(const pkv_ranks *r, pkv_sim_counts *c, double *t_end, bool *interrupted,
                       pkv_summary *s, pkv_err *e) {
    typedef struct part {
        pkv_sim_counts c;
        double t_end;
        int64_t interrupted;
    } part;
    part mine = {*c, *t_end, *interrupted}, *all = calloc((size_t)r->size, sizeof *all);
    void *packed = NULL, *got = NULL;
    size_t len = 0, *lens = calloc((size_t)r->size, sizeof *lens);
    /* out of memory here: this rank fails, and the program aborts the job */
    int rc = all && lens && !pkv_summary_pack(s, &packed, &len) ? 0 : -1;
    if (!rc && r->allgather(r->ctx, &mine, sizeof mine, all)) rc = -1;
    if (!rc && r->gather(r->ctx, packed, len, &got, lens)) rc = -1;
    for (int k = 0; k < r->size && !rc; k++) {
        if (k == r->rank) continue;
        counts_add(c, &all[k].c);
        *t_end = fmax(*t_end, all[k].t_end), *interrupted |= all[k].interrupted != 0;
    }
    for (int k = 0, at = 0; k < r->size && !rc && got; at += (int)lens[k], k++)
        if (k != r->rank && pkv_summary_merge(s, (char *)got + at, lens[k])) rc = -1;
    free(all), free(lens), free(packed), free(got);
    return rc ? pkv_fail(e, "fleet: the ranks' summaries could not be merged") : 0;
}

/* The bookkeeping of this process's replicas [lo, hi) (an autoscaled pool's up to its
 * maximum: every slot), summed before any is set up and held against what the process may
 * use; -1 naming the fleet's setting, the bytes and the limit. Each replica's own check
 * (pkv_sim_init) would see only what the ones before it left, and blame its pool. */
static int fleet_memory(const pkv_config *cfg, int n, int lo, int hi, pkv_err *e) {
    const int np = cfg->fleet.n_pools;
    double total = 0, most = 0;
    for (int i = 0, p = 0, in_pool = 0; i < n; i++, in_pool++) {
        while (np && in_pool == pkv_pool_slots(&cfg->fleet, p)) p++, in_pool = 0;
        if (i < lo || i >= hi) continue;
        const double b = pkv_sim_memory_need(np ? cfg->fleet.pools[p].cfg : cfg) +
                         sizeof(pkv_engine) + sizeof(pkv_sim) + sizeof(pkv_sim *) +
                         sizeof(replica_sink) + sizeof(bool);
        total += b, most = fmax(most, b);
    }
    const char *limit;
    const double allowed = pkv_mem_allowed(&limit);
    if (total <= allowed) return 0;
    const char *key = cfg->fleet.autoscale.on ? "fleet.autoscale.max"
                      : np                    ? "fleet.pools' replicas"
                                              : "fleet.replicas";
    return pkv_fail(e,
                    "%s: %s: %d replicas need %.2f GiB of host memory for their bookkeeping "
                    "(%.2f MiB the largest's: its KV pool's pages, block tables and state), more "
                    "than the %.2f GiB this process may use (%s); lower %s, or a replica's "
                    "serving.kv_pages, serving.max_active or workload.max_context",
                    cfg->file, key, hi - lo, total / 1073741824.0, most / 1048576.0,
                    allowed / 1073741824.0, limit, key);
}

/* Replica 0 of a fleet without pools is the run's engine; every other replica gets an
 * engine of its pool's settings and calibration on the run's backend and clock (on the
 * cuda backend each its own KV pool on the one GPU, reading the weights of the first
 * engine of its model (the run's own where it is that model), its steps run and timed
 * one at a time, as the fleet's loop takes them), and a simulation;
 * one arrival stream feeds them through the router; the sink ends once, at the last
 * replica's end, with the replicas' counts summed. Over MPI ranks (o->ranks) each
 * process sets up and runs its block of the replicas; rank 0 ends the sink with every
 * process's summary merged and writes every replica's /replicas row. */
static int run_fleet(const pkv_config *cfg, pkv_calib *cal, const pkv_backend_spec *bs,
                     pkv_engine *eng0, run_sink *k, const pkv_run_opts *o, pkv_err *e) {
    const int n = pkv_fleet_slots(&cfg->fleet), np = cfg->fleet.n_pools;
    pkv_engine *eng = calloc((size_t)n, sizeof *eng);
    bool *made = calloc((size_t)n, sizeof *made);
    pkv_sim *sim = calloc((size_t)n, sizeof *sim);
    pkv_sim **sims = calloc((size_t)n, sizeof *sims);
    replica_sink *rs = calloc((size_t)n, sizeof *rs);
    pkv_calib *pcal = calloc((size_t)(np ? np : 1), sizeof *pcal);
    gsl_rng *g = pkv_stream_create(cfg->seed, "router");
    pkv_workload wl;
    int rc = eng && made && sim && sims && rs && pcal && g
                 ? 0
                 : pkv_fail(e, "out of memory for %d replicas", n);
    int cals = 0, wl_ok = 0, lo = 0, hi = n;
    const pkv_ranks *ranks = o->ranks && o->ranks->size > 1 ? o->ranks : NULL;
    if (!rc && ranks) {
        rc = ranks_ok(cfg, ranks, e);
        pkv_ranks_block(n, ranks->rank, ranks->size, &lo, &hi);
    }
    if (!rc) rc = fleet_memory(cfg, n, lo, hi, e);
    char gpu[128];
    pkv_backend_device_name(bs->kind, gpu, sizeof gpu);
    for (; cals < np && !rc; cals++) {
        const pkv_config *pc = cfg->fleet.pools[cals].cfg;
        if (load_calib(pc, &pcal[cals], e)) {
            char msg[sizeof e->msg];
            memcpy(msg, e->msg, sizeof msg);
            rc = pkv_fail(e, "fleet.pools[%d]: %.*s", cals, (int)sizeof msg - 32, msg);
            break;
        }
        if (bs->kind == PKV_BACKEND_CUDA && strcmp(pcal[cals].gpu_name, gpu) != 0 &&
            !pc->allow_other_gpu)
            rc = pkv_fail(e,
                          "%s: fleet.pools[%d]: the calibration %s was made on \"%s\", but this "
                          "GPU is \"%s\" (every replica runs on it); name this GPU's calibration "
                          "in the pool's route.calibration, or set route.allow_other_gpu",
                          cfg->file, cals, pc->calibration, pcal[cals].gpu_name, gpu);
    }
    for (int i = 0, p = 0, in_pool = 0; i < n && !rc; i++, in_pool++) {
        while (np && in_pool == pkv_pool_slots(&cfg->fleet, p)) p++, in_pool = 0;
        const pkv_config *ci = np ? cfg->fleet.pools[p].cfg : cfg;
        rs[i] = (replica_sink){.k = k,
                               .row = {.replica = (uint32_t)i,
                                       .pool = (uint32_t)p,
                                       .role = (uint8_t)(np ? cfg->fleet.pools[p].role : 0),
                                       .kv_pages = (uint32_t)ci->kv_pages}};
        if (i < lo || i >= hi) continue; /* another rank's */
        pkv_engine *en = i || np ? &eng[i] : eng0;
        if (en == &eng[i]) {
            pkv_backend_spec bi = *bs;
            bi.kv_pages = ci->kv_pages, bi.bt_stride = pkv_sim_bt_stride(ci);
            bi.seed = ci->seed, bi.cuda_graph = pkv_config_graphs(ci);
            bi.metadata_copy = ci->metadata_upload == PKV_METADATA_COPY;
            bi.layers_measured = ci->layers_measured;
            bi.swap_slots = ci->preemption == PKV_PREEMPT_SWAP ? ci->swap_pages : 0;
            bi.weights_from = same_weights(ci, cfg) ? eng0->backend : NULL;
            for (int j = 0, q = 0, in_q = 0; j < i && !bi.weights_from; j++, in_q++) {
                while (np && in_q == pkv_pool_slots(&cfg->fleet, q)) q++, in_q = 0;
                if (made[j] && same_weights(ci, np ? cfg->fleet.pools[q].cfg : cfg))
                    bi.weights_from = eng[j].backend;
            }
            const pkv_engine_opts eo =
                engine_opts(ci, cfg, eng0->opts.clock, eng0->opts.plan_needed);
            if (pkv_engine_init(en, &ci->model, np ? &pcal[p] : cal, &eo, &bi, e)) {
                char msg[sizeof e->msg];
                memcpy(msg, e->msg, sizeof msg);
                rc = pkv_fail(e, "%s: replica %d of %d (the fleet's engines): %.*s", cfg->file, i,
                              n, (int)sizeof msg - 96, msg);
                break;
            }
            made[i] = true;
            if (en->moe.experts) pkv_moe_seed(&en->moe, ci->seed, (uint32_t)i); /* its own draws */
        }
        const pkv_sim_sink ss = {.ctx = &rs[i],
                                 .step = replica_step,
                                 .prefill = replica_prefill,
                                 .request = replica_request,
                                 .itl = replica_itl};
        if (pkv_sim_init(&sim[i], ci, en, &ss, o->stop, e)) {
            rc = -1;
            break;
        }
        sims[i] = &sim[i];
    }
    if (!rc && !(wl_ok = pkv_workload_init(&wl, &cfg->workload, cfg->seed) == 0))
        rc = pkv_fail(e, "cannot set up the fleet's workload");
    pkv_fleet f = {
        .n = n, .replicas = sims, .ranks = ranks, .wl = &wl, .spec = cfg->fleet, .r_route = g};
    if (!rc && pkv_fleet_run(&f, e)) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        rc = pkv_fail(e, "%s: %.*s", cfg->file, (int)sizeof msg - 64, msg);
    }
    double t_end = 0;
    if (!rc) {
        pkv_sim_counts c = {0};
        bool interrupted = false;
        for (int i = lo; i < hi; i++) {
            counts_add(&c, &sim[i].counts);
            t_end = fmax(t_end, sim[i].t_now);
            interrupted |= sim[i].interrupted;
        }
        if (ranks) rc = ranks_merge(ranks, &c, &t_end, &interrupted, &k->sum, e);
        c.clamped = wl.clamped; /* the arrivals every rank drew alike */
        if (!rc && (!ranks || ranks->rank == 0)) rc = sink_end(k, t_end, interrupted, &c, e);
    }
    for (int i = lo; i < hi && !rc; i++) { /* /replicas */
        pkv_replica_rec *row = &rs[i].row;
        row->routed = f.per_replica[i], row->handed_off = sim[i].handed_off;
        row->mean_pages_used = row->steps ? rs[i].pages_used / (double)row->steps : 0;
        row->prefix_tokens = sim[i].counts.prefix_tokens;
        row->prefix_hit_tokens = sim[i].counts.prefix_hit_tokens;
        row->link_transfers = f.links[i].transfers, row->link_most = (uint32_t)f.links[i].most_on;
        row->up_s = pkv_fleet_up_s(&f, i, t_end);
        if (sim[i].busy) row->busy_s -= fmax(0, sim[i].busy_until - t_end); /* cut in it */
        row->scale_ups = f.ups ? f.ups[i] : 0, row->scale_downs = f.downs ? f.downs[i] : 0;
    }
    pkv_replica_rec *rows = NULL;
    if (!rc && ranks) { /* every rank's block of rows, in order, to rank 0 */
        size_t *lens = calloc((size_t)ranks->size, sizeof *lens);
        pkv_replica_rec *mine = malloc(sizeof *mine * (size_t)(hi - lo));
        for (int i = lo; mine && i < hi; i++) mine[i - lo] = rs[i].row;
        void *all = NULL;
        /* out of memory here: this rank fails, and the program aborts the job; the blocks
         * are every rank's [lo, hi) of the same n, so rank 0 gets the n rows in order */
        if (!lens || !mine ||
            ranks->gather(ranks->ctx, mine, sizeof *mine * (size_t)(hi - lo), &all, lens))
            rc = pkv_fail(e, "fleet: the ranks' /replicas rows could not be gathered");
        else
            rows = all; /* rank 0's; NULL elsewhere */
        if (rc) free(all);
        free(mine), free(lens);
    } else if (!rc && k->rec && (rows = malloc(sizeof *rows * (size_t)n))) {
        for (int i = 0; i < n; i++) rows[i] = rs[i].row;
    }
    if (!rc && k->rec) {
        rc = rows ? pkv_h5rec_rows(k->rec, "replicas", pkv_replica_columns,
                                   pkv_replica_column_count, rows, sizeof *rows, (size_t)n, e)
                  : pkv_fail(e, "out of memory");
        if (!rc && cfg->fleet.autoscale.on)
            rc = pkv_h5rec_rows(k->rec, "scale", pkv_scale_columns, pkv_scale_column_count, f.scale,
                                sizeof *f.scale, f.n_scale, e);
    }
    free(rows);
    pkv_fleet_free(&f);
    if (wl_ok) pkv_workload_free(&wl);
    for (int i = 0; i < n && sims; i++)
        if (sims[i]) pkv_sim_free(sims[i]);
    for (int i = 0; i < n && made; i++)
        if (made[i]) pkv_engine_free(&eng[i]);
    for (int p = 0; p < cals; p++) pkv_calib_free(&pcal[p]);
    if (g) gsl_rng_free(g);
    free(eng), free(made), free(sim), free(sims), free(rs), free(pcal);
    return rc;
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
 * engine profile's host work, speculative decoding, a mixture of experts. */
static bool profiled(const pkv_config *c) {
    return *c->engine_file;
}
static bool speculating(const pkv_config *c) {
    return c->spec.method != PKV_SPEC_NONE;
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
    if (load_calib(cfg, &cal, e)) return -1;
    if (pkv_config_check_memory(cfg, cal.memory_gib, cal.gpu_name, e)) { /* the one it runs on */
        pkv_err sub = *e;
        pkv_calib_free(&cal);
        return pkv_fail(e, "%s: %s", cfg->file, sub.msg);
    }
    pkv_backend_kind bk = pkv_backend_resolve((pkv_backend_kind)cfg->backend);
    int clock = cfg->clock != PKV_CONFIG_CLOCK_AUTO ? cfg->clock
                : bk == PKV_BACKEND_CUDA            ? PKV_CLOCK_WALL
                                                    : PKV_CLOCK_PREDICTED;
    if (bk != PKV_BACKEND_MODEL && any_pool(cfg, speculating)) {
        pkv_calib_free(&cal);
        return pkv_fail(e,
                        "%s: serving.speculative runs on the model backend (--backend model); "
                        "the %s backend's draft and verify steps are not built yet",
                        cfg->file, pkv_backend_names[bk]);
    }
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
                        cfg->file, pkv_backend_names[bk], pkv_clock_names[clock]);
    }
    pkv_engine eng;
    run_sink sink = {0};
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
    const pkv_engine_opts eo = engine_opts(cfg, cfg, (pkv_clock_source)clock,
                                           !o->record || cfg->record >= PKV_RECORD_REQUESTS);
    if (pkv_engine_init(&eng, &cfg->model, &cal, &eo, &bs, e)) {
        pkv_calib_free(&cal);
        return -1;
    }
    pkv_backend *be = eng.backend;
    char gpu[128];
    pkv_backend_device_name(bk, gpu, sizeof gpu);
    if (bk == PKV_BACKEND_CUDA && strcmp(cal.gpu_name, gpu) != 0 && !cfg->allow_other_gpu) {
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
            pkv_model_dense(&cfg->model) ? pkv_prefill_attentions[eng.model.prefill_attn] : "none",
            /* the layers the cuda backend ran; the others are scaled from them */
            pkv_model_dense(&cfg->model) && bk == PKV_BACKEND_CUDA
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
                             .speculative = any_pool(cfg, speculating)};
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
                             .step = sink_step,
                             .prefill = sink_prefill,
                             .request = sink_request,
                             .itl = sink_itl,
                             .progress = o->quiet ? NULL : sink_progress,
                             .end = sink_end};
    if (!o->quiet && (double)cfg->kv_pages + (double)cfg->swap_pages >= 1e8)
        fprintf(stderr, "pkvsim: setting up %d KV pages%s (a few seconds a hundred million)\n",
                cfg->kv_pages, cfg->preemption == PKV_PREEMPT_SWAP ? " and the swap pool" : "");
    if (pkv_fleet_slots(&cfg->fleet) > 1) {
        if (run_fleet(cfg, &cal, &bs, &eng, &sink, o, e)) goto done;
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
    pkv_engine_free(&eng);
    pkv_calib_free(&cal);
    return rc;
}
