#include "sim.h"
#include "pkv_assert.h"
#include "pkv_clock.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int32_t pages_for(const pkv_sim *s, int64_t tokens) {
    return (int32_t)((tokens + s->cfg->model.page_size - 1) / s->cfg->model.page_size);
}

static int64_t stored_tokens(const pkv_sim_request *r) {
    return (int64_t)r->rec.prompt_len + r->rec.generated;
}

/* Tokens a request may ever hold, rounded up to the bucket length when one is set. */
static int64_t reserved_tokens(const pkv_sim *s, const pkv_sim_request *r) {
    int64_t len = (int64_t)r->rec.prompt_len + r->rec.decode_len, b = s->cfg->bucket_len;
    return b > 0 ? (len + b - 1) / b * b : len;
}

int pkv_sim_init(pkv_sim *s, const pkv_config *cfg, pkv_engine *eng, pkv_h5rec *out, pkv_err *e) {
    *s = (pkv_sim){.cfg = cfg, .eng = eng, .out = out, .bt_stride = pkv_sim_bt_stride(cfg)};
    /* The KV pool's bookkeeping (the allocator's stack and owners: 12 bytes a page), the
     * host pool's (12 bytes a slot), the block tables and the prefill page list (8 bytes
     * an entry), against the machine's memory before anything is allocated. */
    const double bytes =
        12.0 * cfg->kv_pages + 12.0 * cfg->swap_pages + 8.0 * cfg->max_active * s->bt_stride;
    const long phys_pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double phys = phys_pages > 0 && page > 0 ? (double)phys_pages * page : 0;
    if (phys > 0 && bytes > phys)
        return pkv_fail(e,
                        "%s: serving.kv_pages: %d KV pages take %.1f GiB of host memory for their "
                        "bookkeeping (12 bytes a page, and the block tables), more than this "
                        "machine's %.1f GiB; lower serving.kv_pages",
                        cfg->file, cfg->kv_pages, bytes / 1073741824.0, phys / 1073741824.0);
    if (pkv_summary_init(&s->summary)) return pkv_fail(e, "out of memory");
    s->summary.slo = cfg->slo;
    s->summary.n_classes = cfg->workload.n_classes;
    for (int k = 0; k < cfg->workload.n_classes; k++) { /* a class's SLOs, else the run's */
        const pkv_slo_class *c = &cfg->workload.classes[k];
        snprintf(s->summary.class_names[k], sizeof s->summary.class_names[k], "%s", c->name);
        s->summary.class_slo[k] = (pkv_slo){c->ttft_s > 0 ? c->ttft_s : cfg->slo.ttft,
                                            c->tpot_s > 0 ? c->tpot_s : cfg->slo.tpot,
                                            c->e2el_s > 0 ? c->e2el_s : cfg->slo.e2el};
    }
    s->summary.n_pcts = cfg->n_percentiles;
    memcpy(s->summary.pcts, cfg->percentiles, sizeof s->summary.pcts);
    pkv_heap_init(&s->heap);
    int32_t ma = cfg->max_active;
    s->wait_cap = 1024;
    s->wait = malloc(sizeof(int64_t) * s->wait_cap);
    s->prefill = malloc(sizeof(int64_t) * (size_t)ma);
    s->run = malloc(sizeof(int64_t) * (size_t)ma);
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
    if (!s->wait || !s->prefill || !s->run || !s->seq_lens || !s->block_table || !s->dirty_rows ||
        !s->dirty_from || !s->prefill_pages || !s->prefill_lens || !s->chunk_slot ||
        !s->chunk_start || !s->chunk_len || !s->chunk_last || !s->r_pages ||
        pkv_kvalloc_init(&s->alloc, cfg->kv_pages, cfg->hole_fraction, s->r_pages) ||
        (cfg->preemption == PKV_PREEMPT_SWAP &&
         (pkv_kvalloc_init(&s->host, cfg->swap_pages, 0, NULL) ||
          !(s->swap_slots = malloc(sizeof(int32_t) * (size_t)s->bt_stride))))) {
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
    return 0;
}

int32_t pkv_sim_bt_stride(const pkv_config *cfg) {
    return (int32_t)((cfg->workload.max_context + cfg->model.page_size - 1) / cfg->model.page_size);
}

void pkv_sim_free(pkv_sim *s) {
    for (size_t i = 0; i < s->n_slots; i++) free(s->req[i].pages), free(s->req[i].blocks);
    free(s->req);
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
    pkv_workload_free(&s->wl);
    pkv_heap_free(&s->heap);
    pkv_summary_free(&s->summary);
    s->req = NULL;
    s->free_slots = NULL;
    s->n_slots = s->n_free_slots = 0;
}

/* ---- waiting queue -------------------------------------------------------------- */
static int wait_grow(pkv_sim *s) {
    if (s->wait_n < s->wait_cap) return 0;
    int64_t *w = malloc(sizeof(int64_t) * s->wait_cap * 2);
    if (!w) return -1;
    for (size_t i = 0; i < s->wait_n; i++) w[i] = s->wait[(s->wait_head + i) % s->wait_cap];
    free(s->wait);
    s->wait = w;
    s->wait_head = 0;
    s->wait_cap *= 2;
    return 0;
}

static int wait_push_back(pkv_sim *s, int64_t r) {
    if (wait_grow(s)) return -1;
    s->wait[(s->wait_head + s->wait_n++) % s->wait_cap] = r;
    return 0;
}

static int wait_push_front(pkv_sim *s, int64_t r) {
    if (wait_grow(s)) return -1;
    s->wait_head = (s->wait_head + s->wait_cap - 1) % s->wait_cap;
    s->wait[s->wait_head] = r;
    s->wait_n++;
    return 0;
}

/* ---- requests --------------------------------------------------------------------- */
/* A request lives in a slot from its arrival to its finish; a finished request's row
 * goes to the recorder and the summary, and its slot is taken by a later arrival, so
 * memory follows the requests in the system, not the run's length. Slot indices are
 * what the queues and events hold; rec.id numbers requests in arrival order. */
static int64_t new_request(pkv_sim *s, const pkv_request_draw *d, double t) {
    int64_t slot;
    if (s->n_free_slots > 0) {
        slot = s->free_slots[--s->n_free_slots];
    } else {
        if (s->n_slots == s->cap_slots) {
            size_t cap = s->cap_slots ? s->cap_slots * 2 : 1024;
            pkv_sim_request *r = realloc(s->req, cap * sizeof *r);
            if (!r) return -1;
            s->req = r;
            int64_t *f = realloc(s->free_slots, cap * sizeof *f);
            if (!f) return -1;
            s->free_slots = f;
            s->cap_slots = cap;
        }
        slot = (int64_t)s->n_slots++;
    }
    s->req[slot] = (pkv_sim_request){.rec = {.id = (int64_t)s->n_arrived++,
                                             .t_arrival = t,
                                             .t_admitted = NAN,
                                             .t_first_token = NAN,
                                             .t_finish = NAN,
                                             .prompt_len = d->prompt_len,
                                             .slo_class = (uint8_t)d->slo_class,
                                             .session = d->session,
                                             .turn = d->turn,
                                             .decode_len = d->decode_len,
                                             .state = PKV_REQ_WAITING},
                                     .prefix_group = d->prefix_group,
                                     .hashes = d->hashes,
                                     .n_hashes = d->n_hashes,
                                     .live = true};
    return slot;
}

/* A request leaves the simulation (finished, or still in it at the end): its row is
 * recorded and counted, its slot freed. */
static int retire_request(pkv_sim *s, int64_t slot, pkv_err *e) {
    pkv_sim_request *r = &s->req[slot];
    if (pkv_summary_add_request(&s->summary, &r->rec)) return pkv_fail(e, "out of memory");
    if (s->out && pkv_h5rec_request(s->out, &r->rec, e)) return -1;
    r->live = false;
    s->free_slots[s->n_free_slots++] = slot;
    return 0;
}

/* Block-table entries of row i from `from` on changed (a device copy re-uploads them). */
static void mark_dirty(pkv_sim *s, int32_t i, int32_t from) {
    if (s->dirty_from[i] == INT32_MAX) s->dirty_rows[s->n_dirty++] = i;
    if (from < s->dirty_from[i]) s->dirty_from[i] = from;
}

/* Remove batch row i: the last row moves into its place. */
static void run_remove(pkv_sim *s, int32_t i) {
    int32_t last = --s->n_run;
    if (i != last) {
        s->run[i] = s->run[last];
        s->seq_lens[i] = s->seq_lens[last];
        const pkv_sim_request *m = &s->req[s->run[i]];
        memcpy(s->block_table + (size_t)i * s->bt_stride,
               s->block_table + (size_t)last * s->bt_stride, sizeof(int32_t) * (size_t)m->n_pages);
        mark_dirty(s, i, 0);
    }
}

/* r's leading pages that are the cache's (its mapped blocks'); the rest are its own. */
static int32_t mapped_pages(const pkv_sim *s, const pkv_sim_request *r) {
    return r->cached_blocks * s->cache.pages_per_block;
}

/* The request leaves the pool: its references to cached blocks go, its own pages
 * return to the allocator. */
static void release_pages(pkv_sim *s, pkv_sim_request *r) {
    const int32_t shared = mapped_pages(s, r);
    for (int32_t b = 0; b < r->cached_blocks; b++) pkv_prefix_release(&s->cache, r->blocks[b]);
    pkv_kvalloc_give(&s->alloc, r->pages + shared, r->n_pages - shared, r->rec.id);
    free(r->pages), free(r->blocks);
    r->pages = NULL, r->blocks = NULL;
    r->n_pages = r->cap_pages = r->cached_blocks = 0;
}

/* ---- the prefix cache ------------------------------------------------------------ */
/* The name of block b of r's prompt from the name of block b - 1 (0 for b = 0): a chain
 * over the blocks' identities: the trace's block ids, the shared prompt's blocks
 * (group, b), a session's history (session, b), else the request's own. */
static uint64_t block_name(const pkv_sim *s, const pkv_sim_request *r, uint64_t prev, int32_t b) {
    const int64_t B = s->cfg->prefix_block_tokens;
    uint64_t id;
    if (r->hashes && b < r->n_hashes)
        id = (uint64_t)r->hashes[b];
    else if (r->prefix_group >= 0 && (b + 1) * B <= s->cfg->workload.prefix_tokens)
        id = 1ull << 62 | (uint64_t)r->prefix_group << 24 | (uint64_t)b;
    else if (r->rec.session >= 0) /* a session's history is the same in each of its turns */
        id = 3ull << 62 | (uint64_t)r->rec.session << 24 | (uint64_t)b;
    else
        id = 2ull << 62 | (uint64_t)r->rec.id << 24 | (uint64_t)b;
    return pkv_prefix_chain(prev, id);
}

/* Take n pages for r, evicting unreferenced cached blocks while the free pages fall
 * short; the caller checked that free and evictable pages cover n. */
static void take_pages(pkv_sim *s, int32_t n, int64_t owner, int32_t *out) {
    while (s->alloc.n_free < n && s->cfg->prefix_caching &&
           pkv_prefix_evict(&s->cache, s->evicted) == 0)
        pkv_kvalloc_give(&s->alloc, s->evicted, s->cache.pages_per_block, PKV_PREFIX_OWNER);
    int took = pkv_kvalloc_take(&s->alloc, n, owner, out);
    PKV_ASSERT(took == 0);
}

/* Pages the pool can hand out now: free, and held only by the cache. */
static int32_t pages_available(const pkv_sim *s) {
    return s->alloc.n_free + s->cache.n_free_pages;
}

/* r's leading blocks found in the cache map their pages (a reference each); at
 * least the prompt's last token is left to prefill (its logits sample). Returns the
 * tokens found. */
static int32_t map_cached(pkv_sim *s, pkv_sim_request *r) {
    const int32_t B = s->cfg->prefix_block_tokens, ppb = s->cache.pages_per_block;
    int32_t most = (int32_t)((stored_tokens(r) - 1) / B), b = 0;
    if (most > r->rec.prompt_len / B) most = r->rec.prompt_len / B; /* the prompt's blocks */
    for (uint64_t h = 0; b < most; b++) {
        const int32_t k = pkv_prefix_acquire(&s->cache, h = block_name(s, r, h, b));
        if (k < 0) break;
        r->blocks[b] = k;
        memcpy(r->pages + (size_t)b * ppb, pkv_prefix_pages(&s->cache, k), sizeof(int32_t) * ppb);
    }
    r->cached_blocks = b;
    s->summary.prefix_blocks += (uint64_t)most;
    s->summary.prefix_tokens += (uint64_t)stored_tokens(r);
    return b * B;
}

/* r's prompt is in its pages: its own full prompt blocks after the mapped ones join
 * the cache (referenced by r) while no block of that name is there already. */
static void cache_prompt(pkv_sim *s, pkv_sim_request *r) {
    const int32_t B = s->cfg->prefix_block_tokens, ppb = s->cache.pages_per_block;
    uint64_t h = 0;
    for (int32_t b = 0; b < r->rec.prompt_len / B; b++) {
        h = block_name(s, r, h, b);
        if (b < r->cached_blocks) continue; /* mapped at admission */
        if (pkv_prefix_contains(&s->cache, h)) break;
        const int32_t *pages = r->pages + (size_t)b * ppb;
        const int32_t k = pkv_prefix_insert(&s->cache, h, pages);
        if (k < 0) break;
        pkv_kvalloc_transfer(&s->alloc, pages, ppb, r->rec.id, PKV_PREFIX_OWNER);
        r->blocks[b] = k;
        r->cached_blocks = b + 1;
    }
}

/* ---- preemption by swap ----------------------------------------------------------- */
/* A copy of n pages (every layer's K and V) between the GPU's pages and the host
 * pool's slots, made by the engine (real on the cuda backend, modelled elsewhere);
 * the next iteration waits for its time. */
static int copy_swap(pkv_sim *s, int to_host, const int32_t *pages, const int32_t *slots, int32_t n,
                     pkv_err *e) {
    double t, tp;
    if (pkv_engine_swap(s->eng, to_host, pages, slots, n, &t, &tp, e)) return -1;
    s->swap_pending_s += t;
    s->summary.swap_time_s += t, s->summary.swap_predicted_s += tp;
    s->summary.swap_pages += (uint64_t)n;
    return 0;
}

/* The seconds of swap copies an iteration starting now waits for. */
static double take_swap_time(pkv_sim *s) {
    const double t = s->swap_pending_s;
    s->swap_pending_s = 0;
    return t;
}

/* r's own pages go to host slots, copied before the GPU's pages come free; its pages
 * array then names the slots there. The cached blocks it maps stay on the GPU,
 * referenced by r, so the cache cannot evict them meanwhile. */
static int swap_out(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    int32_t *own = r->pages + mapped_pages(s, r);
    const int32_t n = r->n_pages - mapped_pages(s, r);
    PKV_ASSERT(pkv_kvalloc_take(&s->host, n, r->rec.id, s->swap_slots) == 0);
    if (copy_swap(s, 1, own, s->swap_slots, n, e)) return -1;
    pkv_kvalloc_give(&s->alloc, own, n, r->rec.id);
    memcpy(own, s->swap_slots, sizeof(int32_t) * (size_t)n);
    r->swapped = true;
    s->summary.swap_outs++;
    return 0;
}

/* r comes back from its host slots onto new pages; it runs on without a prefill. */
static int swap_in(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    int32_t *own = r->pages + mapped_pages(s, r);
    const int32_t n = r->n_pages - mapped_pages(s, r);
    memcpy(s->swap_slots, own, sizeof(int32_t) * (size_t)n);
    take_pages(s, n, r->rec.id, own);
    if (copy_swap(s, 0, own, s->swap_slots, n, e)) return -1;
    pkv_kvalloc_give(&s->host, s->swap_slots, n, r->rec.id);
    r->swapped = false;
    s->summary.swap_ins++;
    return 0;
}

/* Evict the most recently admitted running request: to the host pool where the
 * experiment swaps and the pool has room for it, else it recomputes later. */
static int preempt_latest(pkv_sim *s, pkv_err *e) {
    int32_t v = 0;
    for (int32_t i = 1; i < s->n_run; i++)
        if (s->req[s->run[i]].admit_seq > s->req[s->run[v]].admit_seq) v = i;
    int64_t slot = s->run[v];
    pkv_sim_request *r = &s->req[slot];
    run_remove(s, v);
    if (s->cfg->preemption == PKV_PREEMPT_SWAP &&
        r->n_pages - mapped_pages(s, r) <= s->host.n_free) {
        if (swap_out(s, r, e)) return -1;
    } else
        release_pages(s, r);
    r->rec.state = PKV_REQ_WAITING;
    r->rec.preemptions++;
    return wait_push_front(s, slot) ? pkv_fail(e, "out of memory") : 0;
}

/* ---- scheduling ----------------------------------------------------------------- */
static int32_t waiting_pages(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + i) % s->wait_cap]];
    if (r->swapped) return r->n_pages - mapped_pages(s, r);
    return pages_for(s, s->cfg->page_tables == PKV_PAGE_TABLES_GENERATOR ? reserved_tokens(s, r)
                                                                         : stored_tokens(r));
}

static int32_t waiting_priority(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + i) % s->wait_cap]];
    return s->cfg->workload.n_classes ? s->cfg->workload.classes[r->rec.slo_class].priority : 0;
}

/* The request becomes a row of the running batch, its block table its pages. */
static void join_run(pkv_sim *s, int64_t slot) {
    pkv_sim_request *r = &s->req[slot];
    int32_t i = s->n_run++;
    s->run[i] = slot;
    memcpy(s->block_table + (size_t)i * s->bt_stride, r->pages,
           sizeof(int32_t) * (size_t)r->n_pages);
    mark_dirty(s, i, 0);
    r->rec.state = PKV_REQ_RUNNING;
}

/* Remove the i-th waiting request (0 = head), keeping the others in order. */
static int64_t wait_take(pkv_sim *s, size_t i) {
    int64_t id = s->wait[(s->wait_head + i) % s->wait_cap];
    for (size_t k = i; k > 0; k--)
        s->wait[(s->wait_head + k) % s->wait_cap] = s->wait[(s->wait_head + k - 1) % s->wait_cap];
    s->wait_head = (s->wait_head + 1) % s->wait_cap;
    s->wait_n--;
    return id;
}

static int admit(pkv_sim *s, pkv_err *e) {
    while (s->wait_n > 0 && s->n_run + s->n_prefill < s->cfg->max_active) {
        pkv_admission_view v = {s->wait_n, pages_available(s), waiting_pages, waiting_priority, s};
        int64_t pick = s->cfg->admit->pick(&v);
        if (pick < 0) break;
        int64_t slot = wait_take(s, (size_t)pick);
        pkv_sim_request *r = &s->req[slot];
        if (r->swapped) {
            if (swap_in(s, r, e)) return -1;
            r->admit_seq = s->admit_counter++;
            join_run(s, slot);
            continue;
        }
        r->cap_pages = pages_for(s, reserved_tokens(s, r));
        /* The study's generator reserves the whole (rounded) length at admission; the
         * live allocator takes the prompt's pages and grows page by page. */
        int32_t need = s->cfg->page_tables == PKV_PAGE_TABLES_GENERATOR
                           ? r->cap_pages
                           : pages_for(s, stored_tokens(r));
        r->pages = malloc(sizeof(int32_t) * (size_t)r->cap_pages);
        if (!r->pages) return pkv_fail(e, "out of memory");
        int32_t cached = 0;
        if (s->cfg->prefix_caching) {
            r->blocks =
                malloc(sizeof(int32_t) * ((size_t)r->cap_pages / s->cache.pages_per_block + 1));
            if (!r->blocks) return pkv_fail(e, "out of memory");
            cached = map_cached(s, r);
            s->summary.prefix_hit_tokens += (uint64_t)cached;
        }
        /* the admission policy checked that free and evictable pages cover need */
        const int32_t shared = mapped_pages(s, r);
        take_pages(s, need - shared, r->rec.id, r->pages + shared);
        r->n_pages = need;
        if (isnan(r->rec.t_admitted)) r->rec.t_admitted = s->t_now;
        r->admit_seq = s->admit_counter++;
        r->prefilled = cached;
        r->rec.state = PKV_REQ_PREFILL;
        s->prefill[s->n_prefill++] = slot;
    }
    return 0;
}

/* Before a step every row appends one token; rows at a page boundary need a page.
 * When the pool cannot cover them, preempt the latest admitted until it can. */
static int grow_pages(pkv_sim *s, pkv_err *e) {
    for (;;) {
        int32_t demand = 0;
        for (int32_t i = 0; i < s->n_run; i++) {
            const pkv_sim_request *r = &s->req[s->run[i]];
            demand += pages_for(s, stored_tokens(r) + 1) > r->n_pages;
        }
        if (demand <= pages_available(s)) break;
        if (preempt_latest(s, e)) return -1;
    }
    for (int32_t i = 0; i < s->n_run; i++) {
        pkv_sim_request *r = &s->req[s->run[i]];
        if (pages_for(s, stored_tokens(r) + 1) > r->n_pages) {
            PKV_ASSERT(r->n_pages < r->cap_pages);
            int32_t *slot = &r->pages[r->n_pages];
            take_pages(s, 1, r->rec.id, slot); /* demand was covered above */
            s->block_table[(size_t)i * s->bt_stride + r->n_pages] = *slot;
            mark_dirty(s, i, r->n_pages);
            r->n_pages++;
        }
        /* The step appends its input token: a full model's last sampled one (the
         * prefill sampled the first), the study layer's next one. */
        s->seq_lens[i] = (int32_t)(stored_tokens(r) + !pkv_model_dense(&s->cfg->model));
    }
    return 0;
}

/* The clock must move by a step's time: a time that is not finite, a decode step that
 * takes none, or one too small to change the clock at its magnitude (double
 * precision) would leave it standing (zero latencies; a run bounded by max_time_s
 * would repeat such steps for ever). */
static int clock_moves(const pkv_sim *s, double dt, int decode, pkv_err *e) {
    const char *what = decode ? "decode step" : "prefill batch";
    if (!(dt >= 0) || !isfinite(dt))
        return pkv_fail(e, "%s %llu: its time (%g s) is not a finite non-negative number", what,
                        (unsigned long long)s->steps, dt);
    if ((decode && dt == 0) || (dt > 0 && s->t_now + dt == s->t_now))
        return pkv_fail(e,
                        "%s %llu: the simulated clock at %.17g s cannot advance by its %g s "
                        "(the clock would stand still: its times would be wrong, and a run "
                        "bounded by run.max_time_s would not end); check the calibration's "
                        "costs (they round to zero) and the trace's timestamps",
                        what, (unsigned long long)s->steps, s->t_now, dt);
    return 0;
}

/* The GPU is busy with the iteration that starts now (a decode step or a prefill
 * batch) for dt seconds. */
static int occupy(pkv_sim *s, double dt, int decode_step, pkv_err *e) {
    if (s->observe) s->observe(s, decode_step, s->observe_ctx);
    s->busy = 1;
    return pkv_heap_push(&s->heap, s->t_now + dt,
                         decode_step ? PKV_EVENT_STEP_DONE : PKV_EVENT_PREFILL_DONE, 0)
               ? pkv_fail(e, "out of memory")
               : 0;
}

/* r's pages holding its first `tokens` tokens, listed in prefill_pages from n on (a
 * page a cached block shares is listed for each prompt); returns the new count. */
static int32_t list_pages(pkv_sim *s, const pkv_sim_request *r, int64_t tokens, int32_t n) {
    const int32_t used = pages_for(s, tokens);
    memcpy(s->prefill_pages + n, r->pages, sizeof(int32_t) * (size_t)used);
    return n + used;
}

/* chunked: the next chunk of each admitted prompt, in admission order, in the token
 * budget the decode rows leave (token_budget >= max_active, so every prompt admitted
 * gets at least one token); their pages (each chunk's prompt's first pages up to the
 * chunk's end) into prefill_pages. */
static void take_chunks(pkv_sim *s, pkv_prefill_view *cv) {
    int32_t budget = s->cfg->token_budget - s->n_run, n_pages = 0;
    const int32_t cap = s->cfg->max_prefill_chunk > 0 ? s->cfg->max_prefill_chunk : INT32_MAX;
    s->n_chunks = 0;
    for (int32_t i = 0; i < s->n_prefill && budget > 0; i++) {
        const pkv_sim_request *r = &s->req[s->prefill[i]];
        const int32_t k = s->n_chunks++, left = (int32_t)(stored_tokens(r) - r->prefilled);
        int32_t len = left < cap ? left : cap;
        if (len > budget) len = budget;
        s->chunk_slot[k] = s->prefill[i];
        s->chunk_start[k] = r->prefilled;
        s->chunk_len[k] = len;
        s->chunk_last[k] = len == left;
        n_pages = list_pages(s, r, r->prefilled + len, n_pages);
        budget -= len;
    }
    *cv = (pkv_prefill_view){.n_req = s->n_chunks,
                             .lens = s->chunk_len,
                             .pages = s->prefill_pages,
                             .n_pages = n_pages,
                             .starts = s->chunk_start,
                             .last = s->chunk_last};
}

static int start_prefill(pkv_sim *s, const pkv_prefill_view *pv, pkv_err *e);

static int start_step(pkv_sim *s, pkv_err *e) {
    if (grow_pages(s, e)) return -1;
    pkv_prefill_view cv = {0};
    const int chunked = s->cfg->scheduler == PKV_SCHED_CHUNKED;
    if (chunked) take_chunks(s, &cv);
    if (s->n_run == 0) /* everything was preempted: the chunks alone, or admission retries */
        return s->n_chunks > 0 ? start_prefill(s, &cv, e) : 0;
    pkv_step_rec rec = {.index = s->steps,
                        .t_sim = s->t_now,
                        .warmup = (int64_t)s->steps < s->cfg->warmup_steps,
                        .queue_depth = (uint32_t)s->wait_n,
                        .pages_free = (uint32_t)s->alloc.n_free,
                        .pages_cached = (uint32_t)s->cache.n_free_pages};
    pkv_batch_view v = {s->n_run,      s->seq_lens, s->block_table, s->bt_stride,
                        s->dirty_rows, s->n_dirty,  s->dirty_from,  s->n_chunks ? &cv : NULL};
    double adv;
    if (pkv_engine_step(s->eng, &v, &rec, &adv, e)) return -1;
    rec.t_swap = take_swap_time(s);
    adv += rec.t_swap;
    if (clock_moves(s, adv, 1, e)) return -1;
    for (int32_t k = 0; k < s->n_dirty; k++) s->dirty_from[s->dirty_rows[k]] = INT32_MAX;
    s->n_dirty = 0;
    s->steps++;
    pkv_summary_add_step(&s->summary, &rec, adv);
    if (s->out && pkv_h5rec_step(s->out, &rec, e)) return -1;
    return occupy(s, adv, 1, e);
}

/* A prefill batch (whole prompts, or an iteration's chunks): the backend writes its
 * K/V pages (a full model runs its forward); the batch takes the engine's time for a
 * full model, else the prefill model's, or the write's measured time when the
 * experiment asks. */
static int start_prefill(pkv_sim *s, const pkv_prefill_view *pv, pkv_err *e) {
    pkv_prefill_rec pr = {.t_sim = s->t_now};
    double t_measured;
    if (pkv_engine_prefill(s->eng, pv, &pr, &t_measured, e)) return -1;
    double t = pkv_model_dense(&s->cfg->model) || s->cfg->prefill_measure
                   ? t_measured
                   : s->cfg->prefill_base_s + s->cfg->prefill_per_token_s * (double)pr.tokens;
    pr.t_swap = take_swap_time(s);
    pr.t_advance = t += pr.t_swap;
    if (clock_moves(s, t, 0, e)) return -1;
    pkv_summary_add_prefill(&s->summary, &pr);
    if (s->out && pkv_h5rec_prefill(s->out, &pr, e)) return -1;
    return occupy(s, t, 0, e);
}

static int try_schedule(pkv_sim *s, pkv_err *e) {
    if (s->busy) return 0;
    if (admit(s, e)) return -1;
    const int more_steps = s->cfg->max_steps == 0 || (int64_t)s->steps < s->cfg->max_steps;
    if (s->cfg->scheduler == PKV_SCHED_CHUNKED) {
        if (s->n_run + s->n_prefill == 0 || !more_steps) return 0;
        if (start_step(s, e)) return -1;
        /* An iteration whose rows were all preempted, with no chunk, did not start. */
        return !s->busy && s->wait_n > 0 ? try_schedule(s, e) : 0;
    }
    if (s->n_prefill > 0) {
        /* Each prompt from its first token the cache did not hold. */
        int32_t n = 0;
        for (int32_t i = 0; i < s->n_prefill; i++) {
            const pkv_sim_request *r = &s->req[s->prefill[i]];
            s->chunk_start[i] = r->prefilled;
            s->prefill_lens[i] = (int32_t)stored_tokens(r) - r->prefilled;
            n = list_pages(s, r, stored_tokens(r), n);
        }
        pkv_prefill_view pv = {.n_req = s->n_prefill,
                               .lens = s->prefill_lens,
                               .pages = s->prefill_pages,
                               .n_pages = n,
                               .starts = s->chunk_start};
        return start_prefill(s, &pv, e);
    }
    if (s->n_run > 0 && more_steps) {
        if (start_step(s, e)) return -1;
        /* A step whose rows were all preempted did not start: admit again. */
        if (!s->busy && s->wait_n > 0) return try_schedule(s, e);
    }
    return 0;
}

/* ---- events ------------------------------------------------------------------------ */
static int schedule_arrival(pkv_sim *s, double t_now) {
    const int rc = pkv_workload_next(&s->wl, t_now, &s->next_draw);
    if (rc) return rc < 0 ? -1 : 0; /* out of memory, or exhausted */
    return pkv_heap_push(&s->heap, s->next_draw.t_arrival, PKV_EVENT_ARRIVAL, 0);
}

/* A token of r came now: its first stamps TTFT, the others are inter-token latencies. */
static void token_done(pkv_sim *s, pkv_sim_request *r) {
    r->rec.generated++;
    if (isnan(r->rec.t_first_token))
        r->rec.t_first_token = s->t_now;
    else
        pkv_summary_add_itl(&s->summary, s->t_now - r->t_last_token);
    r->t_last_token = s->t_now;
}

static int on_step_done(pkv_sim *s) {
    s->busy = 0;
    for (int32_t i = 0; i < s->n_run;) {
        pkv_sim_request *r = &s->req[s->run[i]];
        token_done(s, r);
        if (r->rec.generated >= r->rec.decode_len) {
            int64_t slot = s->run[i];
            r->rec.state = PKV_REQ_FINISHED;
            run_remove(s, i); /* row i now holds another request: do not advance */
            if (pkv_heap_push(&s->heap, s->t_now, PKV_EVENT_FINISH, slot)) return -1;
        } else {
            i++;
        }
    }
    return 0;
}

/* A request's prompt is all in its pages: a full model's forward sampled its first
 * token (it may be its last); else it joins the running batch. */
static int prompt_done(pkv_sim *s, int64_t slot) {
    pkv_sim_request *r = &s->req[slot];
    if (s->cfg->prefix_caching) cache_prompt(s, r);
    if (pkv_model_dense(&s->cfg->model)) {
        token_done(s, r);
        if (r->rec.generated >= r->rec.decode_len) {
            r->rec.state = PKV_REQ_FINISHED;
            return pkv_heap_push(&s->heap, s->t_now, PKV_EVENT_FINISH, slot);
        }
    }
    join_run(s, slot);
    return 0;
}

/* chunked: the iteration's chunks are in the pages; the prompts they end leave the
 * prefill list (the others keep their order). */
static int chunks_done(pkv_sim *s) {
    int32_t kept = 0;
    for (int32_t i = 0, k = 0; i < s->n_prefill; i++) {
        const int64_t slot = s->prefill[i];
        if (k < s->n_chunks && s->chunk_slot[k] == slot) {
            s->req[slot].prefilled += s->chunk_len[k];
            if (s->chunk_last[k++]) {
                if (prompt_done(s, slot)) return -1;
                continue;
            }
        }
        s->prefill[kept++] = slot;
    }
    s->n_prefill = kept;
    s->n_chunks = 0;
    return 0;
}

static int handle(pkv_sim *s, const pkv_event *ev, pkv_err *e) {
    switch (ev->kind) {
    case PKV_EVENT_ARRIVAL: {
        int64_t slot = new_request(s, &s->next_draw, ev->t);
        if (slot < 0 || wait_push_back(s, slot) ||
            (s->cfg->workload.arrival.kind != PKV_ARRIVAL_CLOSED && schedule_arrival(s, ev->t)))
            return pkv_fail(e, "out of memory");
        return 0;
    }
    case PKV_EVENT_PREFILL_DONE:
        s->busy = 0;
        if (s->cfg->scheduler == PKV_SCHED_CHUNKED)
            return chunks_done(s) ? pkv_fail(e, "out of memory") : 0;
        for (int32_t k = 0; k < s->n_prefill; k++)
            if (prompt_done(s, s->prefill[k])) return pkv_fail(e, "out of memory");
        s->n_prefill = 0;
        return 0;
    case PKV_EVENT_STEP_DONE: /* the decode rows' tokens, then the chunks' prompts */
        return on_step_done(s) || chunks_done(s) ? pkv_fail(e, "out of memory") : 0;
    case PKV_EVENT_FINISH: {
        pkv_sim_request *r = &s->req[ev->arg];
        r->rec.t_finish = ev->t;
        s->n_finished++;
        release_pages(s, r);
        if (retire_request(s, ev->arg, e)) return -1;
        if (s->cfg->workload.arrival.kind == PKV_ARRIVAL_CLOSED) {
            pkv_request_draw d;
            if (pkv_workload_next(&s->wl, ev->t, &d) == 0) {
                s->next_draw = d;
                return pkv_heap_push(&s->heap, ev->t, PKV_EVENT_ARRIVAL, 0)
                           ? pkv_fail(e, "out of memory")
                           : 0;
            }
        }
        return 0;
    }
    }
    return 0;
}

/* The share of the run done, by whichever bound ends it first (-1: unbounded). */
static double progress_done(const pkv_sim *s) {
    const pkv_config *c = s->cfg;
    double f = -1;
    if (c->max_steps > 0) f = fmax(f, (double)s->steps / c->max_steps);
    if (c->max_time > 0) f = fmax(f, s->t_now / c->max_time);
    int64_t n = c->workload.trace ? (int64_t)c->workload.trace->n : c->workload.num_requests;
    if (n > 0) f = fmax(f, (double)s->n_finished / n);
    return f;
}

static void progress_line(const pkv_sim *s, int final) {
    double f = progress_done(s);
    char pct[16] = "";
    if (f >= 0) snprintf(pct, sizeof pct, "%5.1f%%  ", 100 * fmin(f, 1));
    fprintf(stderr, "\r  %sstep %llu  t=%.4g s  running %d  waiting %zu  finished %zu/%zu%s", pct,
            (unsigned long long)s->steps, s->t_now, s->n_run, s->wait_n, s->n_finished,
            s->n_arrived, final ? "\n" : "   ");
}

int pkv_sim_run(pkv_sim *s, pkv_err *e) {
    const pkv_arrival_spec *a = &s->cfg->workload.arrival;
    if (a->kind == PKV_ARRIVAL_CLOSED) {
        /* Each closed-loop arrival carries its own draw: queue them one at a time. */
        for (int64_t i = 0; i < a->concurrency; i++) {
            pkv_request_draw d;
            if (pkv_workload_next(&s->wl, 0.0, &d)) break;
            int64_t id = new_request(s, &d, 0.0);
            if (id < 0 || wait_push_back(s, id)) return pkv_fail(e, "out of memory");
        }
    } else if (schedule_arrival(s, 0.0)) {
        return pkv_fail(e, "out of memory");
    }
    double t_progress = pkv_clock_now();
    pkv_event ev;
    if (try_schedule(s, e)) return -1;
    for (;;) {
        if (s->stop && *s->stop) {
            s->summary.interrupted = 1;
            break;
        }
        if (s->cfg->max_steps > 0 && (int64_t)s->steps >= s->cfg->max_steps && !s->busy) break;
        if (pkv_heap_pop(&s->heap, &ev)) break; /* nothing left to happen */
        if (s->cfg->max_time > 0 && ev.t > s->cfg->max_time) break;
        s->t_now = ev.t;
        if (handle(s, &ev, e)) return -1;
        /* The scheduler runs only once every event of this instant is handled. */
        const pkv_event *next = pkv_heap_top(&s->heap);
        if (next && next->t == s->t_now) continue;
        if (try_schedule(s, e)) return -1;
        if (s->progress && (s->steps & 1023) == 0 && pkv_clock_now() - t_progress > 0.5) {
            t_progress = pkv_clock_now();
            progress_line(s, 0);
        }
    }
    if (s->progress) progress_line(s, 1);
    /* Requests still in the system are recorded as they stand. */
    for (size_t i = 0; i < s->n_slots; i++)
        if (s->req[i].live && retire_request(s, (int64_t)i, e)) return -1;
    s->summary.prefix_hits = s->cache.hits;
    s->summary.prefix_evictions = s->cache.evictions;
    return pkv_summary_finish(&s->summary, s->t_now) ? pkv_fail(e, "out of memory") : 0;
}
