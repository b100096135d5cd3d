/* The waiting queue, the running batch and each request's KV pages: admission's
 * allocation, the prefix cache's mapping and insertion, growth by a page, release. */
#include "sim_parts.h"
#include "pkv_mem.h"
#include "pkv_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int32_t pkv_sim_bt_stride(const pkv_config *cfg) {
    return (int32_t)((cfg->workload.max_context + cfg->model.page_size - 1) / cfg->model.page_size);
}

/* ---- waiting queue: a ring of slots (preempted requests go to the front) ------------ */
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

int pkv_sim_wait_push_back(pkv_sim *s, int64_t r) {
    if (wait_grow(s)) return -1;
    s->wait[(s->wait_head + s->wait_n++) % s->wait_cap] = r;
    return 0;
}

int pkv_sim_wait_push_front(pkv_sim *s, int64_t r) {
    if (wait_grow(s)) return -1;
    s->wait_head = (s->wait_head + s->wait_cap - 1) % s->wait_cap;
    s->wait[s->wait_head] = r;
    s->wait_n++;
    return 0;
}

/* ---- the running batch ------------------------------------------------------------ */
void pkv_sim_run_remove(pkv_sim *s, int32_t i) {
    int32_t last = --s->n_run;
    if (i != last) {
        s->run[i] = s->run[last];
        s->seq_lens[i] = s->seq_lens[last];
        const pkv_sim_request *m = &s->req[s->run[i]];
        memcpy(s->block_table + (size_t)i * s->bt_stride,
               s->block_table + (size_t)last * s->bt_stride, sizeof(int32_t) * (size_t)m->n_pages);
        pkv_sim_mark_dirty(s, i, 0);
    }
}

void pkv_sim_join_run(pkv_sim *s, int64_t slot) {
    pkv_sim_request *r = &s->req[slot];
    int32_t i = s->n_run++;
    s->run[i] = slot;
    memcpy(s->block_table + (size_t)i * s->bt_stride, r->pages,
           sizeof(int32_t) * (size_t)r->n_pages);
    pkv_sim_mark_dirty(s, i, 0);
    r->rec.state = PKV_REQ_RUNNING;
}

/* ---- a request's pages ------------------------------------------------------------ */
int32_t pkv_sim_mapped_pages(const pkv_sim *s, const pkv_sim_request *r) {
    return r->cached_blocks * s->cache.pages_per_block;
}

void pkv_sim_release_pages(pkv_sim *s, pkv_sim_request *r) {
    const int32_t shared = pkv_sim_mapped_pages(s, r);
    for (int32_t b = 0; b < r->cached_blocks; b++) pkv_prefix_release(&s->cache, r->blocks[b]);
    pkv_kvalloc_give(&s->alloc, r->pages + shared, r->n_pages - shared, r->rec.id);
    free(r->pages), free(r->blocks);
    r->pages = NULL, r->blocks = NULL;
    r->n_pages = r->cap_pages = r->cached_blocks = 0;
}

void pkv_sim_take_pages(pkv_sim *s, int32_t n, int64_t owner, int32_t *out) {
    while (s->alloc.n_free < n && s->cfg->prefix_caching &&
           pkv_prefix_evict(&s->cache, s->evicted) == 0)
        pkv_kvalloc_give(&s->alloc, s->evicted, s->cache.pages_per_block, PKV_PREFIX_OWNER);
    int took = pkv_kvalloc_take(&s->alloc, n, owner, out);
    PKV_ASSERT(took == 0);
}

int32_t pkv_sim_pages_available(const pkv_sim *s) {
    return s->alloc.n_free + s->cache.n_free_pages;
}

int32_t pkv_sim_list_pages(pkv_sim *s, const pkv_sim_request *r, int64_t tokens, int32_t n) {
    const int32_t used = pkv_sim_pages_for(s, tokens);
    memcpy(s->prefill_pages + n, r->pages, sizeof(int32_t) * (size_t)used);
    return n + used;
}

/* ---- the prefix cache ------------------------------------------------------------ */
/* What names a prompt's blocks: the trace's block ids, the shared prompt it starts
 * with, its session, its own id (-1: a request not in the simulation yet). */
typedef struct block_ids {
    const int64_t *hashes;
    int32_t n_hashes, prefix_group;
    int64_t session, id;
} block_ids;

static block_ids ids_of(const pkv_sim_request *r) {
    return (block_ids){r->hashes, r->n_hashes, r->prefix_group, r->rec.session, r->rec.id};
}

/* The name of block b of a prompt from the name of block b - 1 (0 for b = 0): a chain
 * over the blocks' identities: the trace's block ids, the shared prompt's blocks
 * (group, b), a session's history (session, b), else the request's own; 0 for a block
 * of its own when its id is not known yet (no cache holds it). */
static uint64_t block_name(const pkv_sim *s, const block_ids *r, uint64_t prev, int32_t b) {
    const int64_t B = s->cfg->prefix_block_tokens;
    uint64_t id;
    if (r->hashes && b < r->n_hashes)
        id = (uint64_t)r->hashes[b];
    else if (r->prefix_group >= 0 && (b + 1) * B <= s->cfg->workload.prefix_tokens)
        id = 1ull << 62 | (uint64_t)r->prefix_group << 24 | (uint64_t)b;
    else if (r->session >= 0) /* a session's history is the same in each of its turns */
        id = 3ull << 62 | (uint64_t)r->session << 24 | (uint64_t)b;
    else if (r->id >= 0)
        id = 2ull << 62 | (uint64_t)r->id << 24 | (uint64_t)b;
    else
        return 0;
    return pkv_prefix_chain(prev, id);
}

/* Full blocks of a prompt of `len` tokens that admission may map: all but its last token
 * (which is computed, to sample from). */
static int32_t mappable_blocks(const pkv_sim *s, int64_t stored, int32_t prompt_len) {
    const int32_t B = s->cfg->prefix_block_tokens;
    const int32_t most = (int32_t)((stored - 1) / B);
    return most > prompt_len / B ? prompt_len / B : most;
}

int32_t pkv_sim_cached_tokens(const pkv_sim *s, const pkv_request_draw *d) {
    if (!s->cfg->prefix_caching) return 0;
    const block_ids ids = {d->hashes, d->n_hashes, d->prefix_group, d->session, -1};
    const int32_t most = mappable_blocks(s, d->prompt_len, d->prompt_len);
    int32_t b = 0;
    for (uint64_t h = 0; b < most; b++)
        if (!(h = block_name(s, &ids, h, b)) || !pkv_prefix_contains(&s->cache, h)) break;
    return b * s->cfg->prefix_block_tokens;
}

int32_t pkv_sim_map_cached(pkv_sim *s, pkv_sim_request *r) {
    const int32_t B = s->cfg->prefix_block_tokens, ppb = s->cache.pages_per_block;
    const int32_t most = mappable_blocks(s, pkv_sim_stored_tokens(r), r->rec.prompt_len);
    const block_ids ids = ids_of(r);
    int32_t b = 0;
    for (uint64_t h = 0; b < most; b++) {
        const int32_t k = pkv_prefix_acquire(&s->cache, h = block_name(s, &ids, h, b));
        if (k < 0) break;
        r->blocks[b] = k;
        memcpy(r->pages + (size_t)b * ppb, pkv_prefix_pages(&s->cache, k), sizeof(int32_t) * ppb);
    }
    r->cached_blocks = b;
    int32_t ever = 0; /* what a cache that never evicts would have mapped */
    for (uint64_t h = 0;
         ever < most && pkv_prefix_seen(&s->cache, h = block_name(s, &ids, h, ever));)
        ever++;
    /* workload.warm_requests: what an earlier run left is found, in pages of its own */
    const int32_t warm = pkv_config_warm_tokens(s->cfg, r->rec.id, r->rec.prompt_len);
    s->counts.prefix_unbounded_hit_tokens += (uint64_t)(ever * B > warm ? ever * B : warm);
    s->counts.prefix_blocks += (uint64_t)most;
    s->counts.prefix_tokens += (uint64_t)pkv_sim_stored_tokens(r);
    return b * B > warm ? b * B : warm;
}

/* Its own full prompt blocks after the mapped ones join the cache (referenced by r)
 * while no block of that name is there already; every one of them joins the cache that
 * never evicts (-1: out of memory). */
int pkv_sim_cache_prompt(pkv_sim *s, pkv_sim_request *r) {
    const int32_t B = s->cfg->prefix_block_tokens, ppb = s->cache.pages_per_block;
    const block_ids ids = ids_of(r);
    uint64_t h = 0;
    bool inserting = true; /* into the cache, until a block is there already or it is full */
    for (int32_t b = 0; b < r->rec.prompt_len / B; b++) {
        h = block_name(s, &ids, h, b);
        if (pkv_prefix_see(&s->cache, h)) return -1;
        if (!inserting || b < r->cached_blocks) continue; /* mapped at admission */
        const int32_t *pages = r->pages + (size_t)b * ppb;
        const int32_t k =
            pkv_prefix_contains(&s->cache, h) ? -1 : pkv_prefix_insert(&s->cache, h, pages);
        if (!(inserting = k >= 0)) continue;
        pkv_kvalloc_transfer(&s->alloc, pages, ppb, r->rec.id, PKV_PREFIX_OWNER);
        r->blocks[b] = k;
        r->cached_blocks = b + 1;
    }
    return 0;
}

/* The KV pool's bookkeeping (the allocator's stack and owners: 12 bytes a page, and the
 * prefix cache's table), the host pool's (12 bytes a slot), the block tables and the
 * prefill page list (8 bytes an entry). */
static double memory_need(const pkv_config *cfg, int32_t bt_stride, double *kv_bytes,
                          double *swap_bytes, double *table_bytes) {
    *kv_bytes =
        12.0 * cfg->kv_pages +
        (cfg->prefix_caching
             ? pkv_prefix_bytes(cfg->kv_pages, cfg->prefix_block_tokens / cfg->model.page_size)
             : 0);
    *swap_bytes = cfg->preemption == PKV_PREEMPT_SWAP ? 12.0 * cfg->swap_pages : 0;
    *table_bytes = 8.0 * cfg->max_active * bt_stride;
    return *kv_bytes + *swap_bytes + *table_bytes;
}

double pkv_sim_memory_need(const pkv_config *cfg) {
    double kv, swap, table;
    return memory_need(cfg, pkv_sim_bt_stride(cfg), &kv, &swap, &table);
}

int pkv_sim_check_memory(const pkv_config *cfg, int32_t bt_stride, pkv_err *e) {
    /* Against what this process may still allocate, before anything is: such a pool would
     * take its setup's tens of seconds to fail, or fail blaming another setting. */
    double kv_bytes, swap_bytes, table_bytes;
    const double need = memory_need(cfg, bt_stride, &kv_bytes, &swap_bytes, &table_bytes);
    const char *limit;
    const double allowed = pkv_mem_allowed(&limit);
    if (need > allowed) {
        const char *key = swap_bytes > kv_bytes && swap_bytes > table_bytes ? "swap_pages"
                          : table_bytes > kv_bytes                          ? "max_active"
                                                                            : "kv_pages";
        return pkv_fail(e,
                        "%s: serving.%s: the simulation's bookkeeping needs %.2f GiB of host "
                        "memory (the KV pool's %d pages %.2f GiB, the swap pool %.2f GiB, the "
                        "block tables %.2f GiB), more than the %.2f GiB this process may use "
                        "(%s); lower serving.%s",
                        cfg->file, key, need / 1073741824.0, cfg->kv_pages, kv_bytes / 1073741824.0,
                        swap_bytes / 1073741824.0, table_bytes / 1073741824.0,
                        allowed / 1073741824.0, limit, key);
    }
    return 0;
}

pkv_sim_load pkv_sim_load_of(const pkv_sim *s, bool tokens) {
    pkv_sim_load l = {.requests = (int64_t)s->wait_n + s->n_run + s->n_prefill,
                      .free_pages = pkv_sim_pages_available(s)};
    for (size_t i = 0; tokens && i < s->n_slots; i++)
        if (s->req[i].live) l.tokens += pkv_sim_stored_tokens(&s->req[i]);
    return l;
}
