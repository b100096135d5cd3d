/* A simulation's construction and teardown: its queues, block tables and chunk
 * lists sized by serving.max_active, the KV pools (and the host pool of preemption by
 * swap), the prefix cache, the workload's streams; and the requests' slots, taken at
 * an arrival and freed when a request leaves. The loop is sim.c's. */
#include "sim_parts.h"
#include "sched.h"
#include "pkv_mem.h"
#include "rng.h"

#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int pkv_sim_init(pkv_sim *s, const pkv_config *cfg, pkv_engine *eng, const pkv_sim_sink *sink,
                 volatile sig_atomic_t *stop, pkv_err *e) {
    *s = (pkv_sim){.cfg = cfg,
                   .eng = eng,
                   .stop = stop,
                   .sched = pkv_scheduler_get(cfg->scheduler),
                   .sink = sink ? *sink : (pkv_sim_sink){0},
                   .bt_stride = pkv_sim_bt_stride(cfg),
                   .new_token_ratio = PKV_ADMIT_RATIO_INIT,
                   .fe_head = -1,
                   .fe_tail = -1,
                   .late_head = -1,
                   .late_tail = -1};
    if (!s->sched) return pkv_fail(e, "%s: serving.scheduler: unknown scheduler", cfg->file);
    if (pkv_sim_check_memory(cfg, s->bt_stride, e)) return -1;
    pkv_heap_init(&s->heap);
    int32_t ma = cfg->max_active;
    s->wait_cap = 1024;
    s->wait = malloc(sizeof(int64_t) * s->wait_cap);
    s->prefill = malloc(sizeof(int64_t) * (size_t)ma);
    s->run = malloc(sizeof(int64_t) * (size_t)ma);
    s->held_done = malloc(sizeof(int64_t) * (size_t)ma);
    s->short_rows = malloc(sizeof(int32_t) * (size_t)ma);
    s->seq_lens = malloc(sizeof(int32_t) * (size_t)ma);
    s->block_table = malloc(sizeof(int32_t) * (size_t)ma * (size_t)s->bt_stride);
    s->dirty_rows = malloc(sizeof(int32_t) * (size_t)ma);
    s->dirty_from = malloc(sizeof(int32_t) * (size_t)ma);
    /* a batch lists every prompt's pages, shared cached ones once for each prompt */
    s->prefill_pages = malloc(sizeof(int32_t) * (size_t)ma * (size_t)s->bt_stride);
    s->prefill_lens = malloc(sizeof(int32_t) * (size_t)ma);
    s->chunk_slot = malloc(sizeof(int64_t) * (size_t)ma);
    s->chunk_start = malloc(sizeof(int32_t) * (size_t)ma);
    s->chunk_len = malloc(sizeof(int32_t) * (size_t)ma);
    s->chunk_last = malloc((size_t)ma);
    if (s->dirty_from)
        for (int32_t i = 0; i < ma; i++) s->dirty_from[i] = INT32_MAX;
    s->r_pages = pkv_stream_create(cfg->seed, PKV_STREAM_PAGES);
    if (cfg->spec.method != PKV_SPEC_NONE)
        s->r_spec = pkv_stream_create(cfg->seed, PKV_STREAM_SPECULATIVE);
    int pool = -1; /* 0 set up; -1 out of memory */
    if (s->wait && s->prefill && s->run && s->held_done && s->short_rows && s->seq_lens &&
        s->block_table && s->dirty_rows && s->dirty_from && s->prefill_pages && s->prefill_lens &&
        s->chunk_slot && s->chunk_start && s->chunk_len && s->chunk_last && s->r_pages &&
        (cfg->spec.method == PKV_SPEC_NONE || s->r_spec))
        pool = pkv_kvalloc_init(&s->alloc, cfg->kv_pages, cfg->hole_fraction, s->r_pages);
    if (!pool && cfg->preemption == PKV_PREEMPT_SWAP &&
        (pkv_kvalloc_init(&s->host, cfg->swap_pages, 0, NULL) ||
         !(s->swap_slots = malloc(sizeof(int32_t) * (size_t)s->bt_stride))))
        pool = -1;
    if (pool) {
        pkv_sim_free(s);
        return pkv_fail(e, "out of memory setting up the simulation (%d KV pages)", cfg->kv_pages);
    }
    if (cfg->prefix_caching) {
        const int32_t ppb = cfg->prefix_block_tokens / cfg->model.page_size;
        if (pkv_prefix_init(&s->cache, cfg->kv_pages, ppb) ||
            !(s->evicted = malloc(sizeof(int32_t) * (size_t)ppb))) {
            pkv_sim_free(s);
            return pkv_fail(e, "out of memory setting up the prefix cache");
        }
    }
    if (pkv_workload_init(&s->wl, &cfg->workload, cfg->seed)) {
        pkv_sim_free(s);
        return pkv_fail(e, "cannot set up the workload's random streams");
    }
    s->wl.limits = (pkv_arrival_limits){cfg->max_time > 0 ? cfg->max_time : INFINITY, stop};
    return 0;
}

void pkv_sim_free(pkv_sim *s) {
    for (size_t i = 0; i < s->n_slots; i++) free(s->req[i].pages), free(s->req[i].blocks);
    free(s->req);
    free(s->first);
    free(s->free_slots);
    free(s->wait);
    free(s->prefill);
    free(s->prefill_pages);
    free(s->prefill_lens);
    free(s->chunk_slot);
    free(s->chunk_start);
    free(s->chunk_len);
    free(s->chunk_last);
    free(s->run);
    free(s->held_done);
    free(s->short_rows);
    free(s->seq_lens);
    free(s->block_table);
    free(s->dirty_rows);
    free(s->dirty_from);
    pkv_kvalloc_free(&s->alloc);
    pkv_kvalloc_free(&s->host);
    free(s->swap_slots);
    pkv_prefix_free(&s->cache);
    free(s->evicted);
    if (s->r_pages) gsl_rng_free(s->r_pages);
    if (s->r_spec) gsl_rng_free(s->r_spec);
    pkv_workload_free(&s->wl);
    pkv_heap_free(&s->heap);
    s->req = NULL;
    s->free_slots = NULL;
    s->n_slots = s->n_free_slots = 0;
}

/* ---- request slots ------------------------------------------------------------------ */
/* A request lives in a slot from its arrival to its finish; a finished request's row
 * goes to the sink, and its slot is taken by a later arrival, so memory follows the
 * requests in the system, not the run's length. Slot indices are what the queues and
 * events hold; rec.id numbers requests in arrival order. */
int64_t pkv_sim_new_request(pkv_sim *s, const pkv_request_draw *d, double t) {
    int64_t slot;
    if (s->n_free_slots > 0) {
        slot = s->free_slots[--s->n_free_slots];
    } else {
        if (s->n_slots == s->cap_slots) {
            size_t cap = s->cap_slots ? s->cap_slots * 2 : 1024;
            if (pkv_resize(&s->req, cap, sizeof *s->req) ||
                pkv_resize(&s->free_slots, cap, sizeof *s->free_slots))
                return -1;
            s->cap_slots = cap;
        }
        slot = (int64_t)s->n_slots++;
    }
    s->req[slot] = (pkv_sim_request){.rec = {.id = (int64_t)s->n_arrived++,
                                             .t_arrival = t,
                                             .t_admitted = NAN,
                                             .t_first_token = NAN,
                                             .t_finish = NAN,
                                             .t_transfer_start = NAN,
                                             .t_transfer_end = NAN,
                                             .prompt_len = d->prompt_len,
                                             .slo_class = (uint8_t)d->slo_class,
                                             .session = d->session,
                                             .turn = d->turn,
                                             .decode_len = d->decode_len,
                                             .state = PKV_REQ_WAITING},
                                     .spec_p = s->cfg->spec.acceptance,
                                     .prefix_group = d->prefix_group,
                                     .hashes = d->hashes,
                                     .n_hashes = d->n_hashes,
                                     .t_entered = t,
                                     .fe_next = -1,
                                     .late_next = -1,
                                     .live = true};
    const pkv_speculative *sp = &s->cfg->spec;
    if (sp->acceptance_sd > 0 && s->r_spec) { /* its own chance: a beta law's draw */
        const double m = sp->acceptance, sd = sp->acceptance_sd, nu = m * (1 - m) / (sd * sd) - 1;
        s->req[slot].spec_p = gsl_ran_beta(s->r_spec, m * nu, (1 - m) * nu);
    }
    return slot;
}

void pkv_sim_free_slot(pkv_sim *s, int64_t slot) {
    s->req[slot].live = false;
    s->free_slots[s->n_free_slots++] = slot;
}

pkv_request_draw pkv_sim_draw_of(const pkv_sim_request *r) {
    return (pkv_request_draw){.t_arrival = r->rec.t_arrival,
                              .prompt_len = r->rec.prompt_len,
                              .decode_len = r->rec.decode_len,
                              .prefix_group = r->prefix_group,
                              .session = r->rec.session,
                              .turn = r->rec.turn,
                              .slo_class = r->rec.slo_class,
                              .hashes = r->hashes,
                              .n_hashes = r->n_hashes};
}
