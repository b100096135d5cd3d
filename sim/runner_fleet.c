/* A fleet's run: its replicas' engines and simulations set up (over MPI ranks, this
 * process's block of them), fed by one arrival stream through the router (sim/fleet.h),
 * their records into the run's one sink and their /replicas rows. */
#include "runner_parts.h"
#include "fleet.h"
#include "pkv_mem.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- a fleet (more than one replica set up): replicas behind the router, one sink --- */
/* Each replica's records go to the run's sink with the replica's number. */
typedef struct replica_sink {
    pkv_run_sink *k;
    pkv_replica_rec row; /* its /replicas row as it grows */
    double pages_used;   /* summed over its steps */
} replica_sink;

static int replica_step(void *ctx, const pkv_step_rec *r, double advance, pkv_err *e) {
    replica_sink *s = ctx;
    pkv_step_rec c = *r;
    c.replica = s->row.replica;
    s->row.steps++, s->row.decode_tokens += r->rows, s->row.busy_s += advance;
    s->pages_used += (double)s->row.kv_pages - r->pages_free - r->pages_cached;
    return pkv_run_sink_step(s->k, &c, advance, e);
}

static int replica_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e) {
    replica_sink *s = ctx;
    pkv_prefill_rec c = *p;
    c.replica = s->row.replica;
    s->row.prefills++, s->row.busy_s += p->t_advance;
    return pkv_run_sink_prefill(s->k, &c, e);
}

static int replica_request(void *ctx, const pkv_request_rec *q, pkv_err *e) {
    replica_sink *s = ctx;
    s->row.finished += !isnan(q->t_finish);
    pkv_request_rec c = *q;
    c.replica = s->row.replica;
    if (isnan(c.t_transfer_end)) c.prefill_replica = c.replica; /* prefilled here */
    return pkv_run_sink_request(s->k, &c, e);
}

/* A replica's requests are numbered from 0 on each: its gaps keep its number. */
static int replica_itl(void *ctx, int64_t id, double gap, pkv_err *e) {
    const replica_sink *s = ctx;
    return pkv_summary_add_itl(&s->k->sum, s->row.replica, id, gap) ? pkv_fail(e, "out of memory")
                                                                    : 0;
}

/* Two settings whose engines hold the same weights (the model's shape on the GPU and its
 * layers there, the seed they are drawn from). */
static bool same_weights(const pkv_config *a, const pkv_config *b) {
    const pkvk_model_shape x = pkv_model_gpu_shape(&a->model), y = pkv_model_gpu_shape(&b->model);
    return pkv_model_kind_of(&a->model)->weights && !memcmp(&x, &y, sizeof x) &&
           a->seed == b->seed && a->layers_measured == b->layers_measured;
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

/* Ranks, after each set up its replicas: whether all did, so that none waits in the first
 * view exchange for one that ended in its set-up (a signal there, its memory). Every rank
 * then fails alike; one stopped by a signal stops the others as if they had heard it
 * (*stop set: their exit status is the signal's). */
static int ranks_set_up(const pkv_ranks *r, int rc, volatile sig_atomic_t *stop, const char *file,
                        pkv_err *e) {
    const int mine = rc == 0 ? 0 : stop && *stop ? (int)*stop : -1;
    int *all = calloc((size_t)r->size, sizeof *all), failed = -1;
    if (!all || r->allgather(r->ctx, &mine, sizeof mine, all)) {
        free(all);
        return rc ? rc : pkv_fail(e, "fleet: the ranks' exchange after the set-up failed");
    }
    for (int i = 0; i < r->size && failed < 0; i++)
        if (all[i]) failed = i;
    const int why = failed < 0 ? 0 : all[failed];
    free(all);
    if (rc || failed < 0) return rc;
    if (why > 0 && stop) *stop = why;
    return pkv_fail(e, "%s: rank %d of %d %s", file, failed, r->size,
                    why > 0 ? "was stopped by a signal while setting up its replicas"
                            : "could not set up its replicas");
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
 * replica's end, with the replicas' counts summed. Over MPI ranks (ranks_in) each
 * process sets up and runs its block of the replicas; rank 0 ends the sink with every
 * process's summary merged and writes every replica's /replicas row. */
int pkv_run_fleet(const pkv_config *cfg, pkv_calib *cal, const pkv_backend_spec *bs,
                  pkv_engine *eng0, pkv_run_sink *k, const pkv_ranks *ranks_in,
                  volatile sig_atomic_t *stop, pkv_err *e) {
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
    const pkv_ranks *ranks = ranks_in && ranks_in->size > 1 ? ranks_in : NULL;
    if (!rc && ranks) {
        rc = ranks_ok(cfg, ranks, e);
        pkv_ranks_block(n, ranks->rank, ranks->size, &lo, &hi);
    }
    if (!rc) rc = fleet_memory(cfg, n, lo, hi, e);
    char gpu[128];
    pkv_backend_device_name(bs->kind, gpu, sizeof gpu);
    for (; cals < np && !rc; cals++) {
        const pkv_config *pc = cfg->fleet.pools[cals].cfg;
        if (pkv_run_load_calib(pc, &pcal[cals], e)) {
            char msg[sizeof e->msg];
            memcpy(msg, e->msg, sizeof msg);
            rc = pkv_fail(e, "fleet.pools[%d]: %.*s", cals, (int)sizeof msg - 32, msg);
            break;
        }
        if (pkv_backend_caps_of(bs->kind)->gpu && strcmp(pcal[cals].gpu_name, gpu) != 0 &&
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
                pkv_run_engine_opts(ci, cfg, eng0->opts.clock, eng0->opts.plan_needed);
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
        if (pkv_sim_init(&sim[i], ci, en, &ss, stop, e)) {
            rc = -1;
            break;
        }
        sims[i] = &sim[i];
    }
    if (!rc && !(wl_ok = pkv_workload_init(&wl, &cfg->workload, cfg->seed) == 0))
        rc = pkv_fail(e, "cannot set up the fleet's workload");
    if (ranks) rc = ranks_set_up(ranks, rc, stop, cfg->file, e);
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
        if (!rc && (!ranks || ranks->rank == 0))
            rc = pkv_run_sink_end(k, t_end, interrupted, &c, e);
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
        if (made[i]) {
            pkv_run_backend_note(&eng[i], bs->log, bs->log_ctx);
            pkv_engine_free(&eng[i]);
        }
    for (int p = 0; p < cals; p++) pkv_calib_free(&pcal[p]);
    if (g) gsl_rng_free(g);
    free(eng), free(made), free(sim), free(sims), free(rs), free(pcal);
    return rc;
}
