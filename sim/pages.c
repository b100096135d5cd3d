/* The waiting queue, the running batch and each request's KV pages: admission's
 * allocation, the prefix cache's mapping and insertion, growth by a page, release. */
#include "sim_parts.h"
#include "pkv_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int32_t pkv_sim_bt_stride(const pkv_config *cfg) {
    return (int32_t)((cfg->workload.max_context + cfg->model.page_size - 1) / cfg->model.page_size);
}

/* Tokens a request may ever hold, rounded up to the bucket length when one is set. */
static int64_t reserved_tokens(const pkv_sim *s, const pkv_sim_request *r) {
    int64_t len = (int64_t)r->rec.prompt_len + r->rec.decode_len, b = s->cfg->bucket_len;
    return b > 0 ? (len + b - 1) / b * b : len;
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

/* Remove the i-th waiting request (0 = head), keeping the others in order. */
static int64_t wait_take(pkv_sim *s, size_t i) {
    int64_t id = s->wait[(s->wait_head + i) % s->wait_cap];
    for (size_t k = i; k > 0; k--)
        s->wait[(s->wait_head + k) % s->wait_cap] = s->wait[(s->wait_head + k - 1) % s->wait_cap];
    s->wait_head = (s->wait_head + 1) % s->wait_cap;
    s->wait_n--;
    return id;
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

/* r's leading blocks found in the cache map their pages (a reference each); at
 * least the prompt's last token is left to prefill (its logits sample). Returns the
 * tokens found. */
static int32_t map_cached(pkv_sim *s, pkv_sim_request *r) {
    const int32_t B = s->cfg->prefix_block_tokens, ppb = s->cache.pages_per_block;
    int32_t most = (int32_t)((pkv_sim_stored_tokens(r) - 1) / B), b = 0;
    if (most > r->rec.prompt_len / B) most = r->rec.prompt_len / B; /* the prompt's blocks */
    for (uint64_t h = 0; b < most; b++) {
        const int32_t k = pkv_prefix_acquire(&s->cache, h = block_name(s, r, h, b));
        if (k < 0) break;
        r->blocks[b] = k;
        memcpy(r->pages + (size_t)b * ppb, pkv_prefix_pages(&s->cache, k), sizeof(int32_t) * ppb);
    }
    r->cached_blocks = b;
    s->counts.prefix_blocks += (uint64_t)most;
    s->counts.prefix_tokens += (uint64_t)pkv_sim_stored_tokens(r);
    return b * B;
}

/* Its own full prompt blocks after the mapped ones join the cache (referenced by r)
 * while no block of that name is there already. */
void pkv_sim_cache_prompt(pkv_sim *s, pkv_sim_request *r) {
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

/* ---- admission ------------------------------------------------------------------- */
static int32_t waiting_pages(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + i) % s->wait_cap]];
    if (r->swapped) return r->n_pages - pkv_sim_mapped_pages(s, r);
    return pkv_sim_pages_for(s, s->cfg->page_tables == PKV_PAGE_TABLES_GENERATOR
                                    ? reserved_tokens(s, r)
                                    : pkv_sim_stored_tokens(r));
}

static int32_t waiting_priority(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + i) % s->wait_cap]];
    return s->cfg->workload.n_classes ? s->cfg->workload.classes[r->rec.slo_class].priority : 0;
}

int pkv_sim_admit(pkv_sim *s, pkv_err *e) {
    while (s->wait_n > 0 && s->n_run + s->n_prefill < s->cfg->max_active) {
        pkv_admission_view v = {s->wait_n, pkv_sim_pages_available(s), waiting_pages,
                                waiting_priority, s};
        int64_t pick = s->cfg->admit->pick(&v);
        if (pick < 0) break;
        int64_t slot = wait_take(s, (size_t)pick);
        pkv_sim_request *r = &s->req[slot];
        if (r->swapped) {
            if (pkv_sim_swap_in(s, r, e)) return -1;
            r->admit_seq = s->admit_counter++;
            pkv_sim_join_run(s, slot);
            continue;
        }
        r->cap_pages = pkv_sim_pages_for(s, reserved_tokens(s, r));
        /* The study's generator reserves the whole (rounded) length at admission; the
         * live allocator takes the prompt's pages and grows page by page. */
        int32_t need = s->cfg->page_tables == PKV_PAGE_TABLES_GENERATOR
                           ? r->cap_pages
                           : pkv_sim_pages_for(s, pkv_sim_stored_tokens(r));
        r->pages = malloc(sizeof(int32_t) * (size_t)r->cap_pages);
        if (!r->pages) return pkv_fail(e, "out of memory");
        int32_t cached = 0;
        if (s->cfg->prefix_caching) {
            r->blocks =
                malloc(sizeof(int32_t) * ((size_t)r->cap_pages / s->cache.pages_per_block + 1));
            if (!r->blocks) return pkv_fail(e, "out of memory");
            cached = map_cached(s, r);
            s->counts.prefix_hit_tokens += (uint64_t)cached;
        }
        /* the admission policy checked that free and evictable pages cover need */
        const int32_t shared = pkv_sim_mapped_pages(s, r);
        pkv_sim_take_pages(s, need - shared, r->rec.id, r->pages + shared);
        r->n_pages = need;
        if (isnan(r->rec.t_admitted)) r->rec.t_admitted = s->t_now;
        r->admit_seq = s->admit_counter++;
        r->prefilled = cached;
        r->rec.state = PKV_REQ_PREFILL;
        s->prefill[s->n_prefill++] = slot;
    }
    return 0;
}
