/* Admission: waiting requests into the batch while the active-request and page
 * budgets allow, in the order the admission policy (admission.c) picks; a new one gets
 * its pages (its cached prefix mapped) and joins the prefill list, a swapped one comes
 * back from the host pool into the running batch. */
#include "sim_parts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Remove the i-th waiting request (0 = head), keeping the others in order. */
static int64_t wait_take(pkv_sim *s, size_t i) {
    int64_t id = s->wait[(s->wait_head + i) % s->wait_cap];
    for (size_t k = i; k > 0; k--)
        s->wait[(s->wait_head + k) % s->wait_cap] = s->wait[(s->wait_head + k - 1) % s->wait_cap];
    s->wait_head = (s->wait_head + 1) % s->wait_cap;
    s->wait_n--;
    return id;
}

int32_t pkv_sim_pages_to_admit(const pkv_sim *s, const pkv_sim_request *r) {
    if (r->swapped) return r->n_pages - pkv_sim_mapped_pages(s, r);
    return pkv_sim_pages_for(s, s->cfg->page_tables == PKV_PAGE_TABLES_GENERATOR
                                    ? pkv_sim_reserved_tokens(s, r)
                                    : pkv_sim_stored_tokens(r));
}

static int32_t waiting_pages(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    return pkv_sim_pages_to_admit(s, &s->req[s->wait[(s->wait_head + i) % s->wait_cap]]);
}

static int32_t waiting_priority(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + i) % s->wait_cap]];
    return s->cfg->workload.n_classes ? s->cfg->workload.classes[r->rec.slo_class].priority : 0;
}

/* Its output still to come, as serving.admission new_token_ratio counts it. */
static int64_t output_left(const pkv_sim_request *r) {
    const int64_t left = (int64_t)r->rec.decode_len - r->rec.generated;
    return left < PKV_ADMIT_CLIP_TOKENS ? left : PKV_ADMIT_CLIP_TOKENS;
}

static int64_t waiting_tokens(const void *ctx, size_t i) {
    const pkv_sim *s = ctx;
    const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + i) % s->wait_cap]];
    return pkv_sim_stored_tokens(r) + output_left(r);
}

/* The KV tokens free and evictable less the active requests' expected output. */
static double token_budget(const pkv_sim *s) {
    double b = (double)pkv_sim_pages_available(s) * s->cfg->model.page_size, out = 0;
    for (int32_t i = 0; i < s->n_run; i++) out += (double)output_left(&s->req[s->run[i]]);
    for (int32_t i = 0; i < s->n_prefill; i++) out += (double)output_left(&s->req[s->prefill[i]]);
    return b - s->new_token_ratio * out;
}

int pkv_sim_admit(pkv_sim *s, pkv_err *e) {
    const bool reserve = s->cfg->admission == PKV_ADMIT_NEW_TOKEN_RATIO;
    double budget = reserve ? token_budget(s) : INFINITY;
    while (s->wait_n > 0 && s->n_run + s->n_prefill < s->cfg->max_active) {
        pkv_admission_view v = {.n_waiting = s->wait_n,
                                .free_pages = pkv_sim_pages_available(s),
                                .pages_needed = waiting_pages,
                                .priority = waiting_priority,
                                .ctx = s,
                                .budget_tokens = budget,
                                .tokens_needed = waiting_tokens};
        int64_t pick = s->cfg->admit->pick(&v);
        if (pick < 0) break;
        if (reserve) budget -= (double)waiting_tokens(s, (size_t)pick);
        int64_t slot = wait_take(s, (size_t)pick);
        pkv_sim_request *r = &s->req[slot];
        if (r->swapped) {
            if (pkv_sim_swap_in(s, r, e)) return -1;
            r->admit_seq = s->admit_counter++;
            pkv_sim_join_run(s, slot);
            continue;
        }
        r->cap_pages = pkv_sim_pages_for(s, pkv_sim_reserved_tokens(s, r));
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
            if (!r->kv_arrived) { /* arrived KV is its own: all of it came */
                cached = pkv_sim_map_cached(s, r);
                s->counts.prefix_hit_tokens += (uint64_t)cached;
            }
        }
        /* the admission policy checked that free and evictable pages cover need */
        const int32_t shared = pkv_sim_mapped_pages(s, r);
        pkv_sim_take_pages(s, need - shared, r->rec.id, r->pages + shared);
        r->n_pages = need;
        if (isnan(r->rec.t_admitted)) r->rec.t_admitted = s->t_now;
        r->admit_seq = s->admit_counter++;
        if (r->kv_arrived) { /* prefilled elsewhere: its KV fills the pages it took */
            r->kv_arrived = false;
            r->prefilled = (int32_t)pkv_sim_stored_tokens(r);
            pkv_sim_join_run(s, slot);
            continue;
        }
        r->prefilled = cached;
        r->t_prefill_start = NAN;
        r->rec.state = PKV_REQ_PREFILL;
        s->prefill[s->n_prefill++] = slot;
    }
    return 0;
}

int pkv_sim_stranded(const pkv_sim *s, pkv_err *e) {
    size_t swapped = 0, len = 0;
    char list[320] = "";
    const pkv_sim_request *huge = NULL;      /* the first that needs more than the whole pool */
    for (size_t k = 0; k < s->wait_n; k++) { /* in the queue's order: admission's */
        const pkv_sim_request *r = &s->req[s->wait[(s->wait_head + k) % s->wait_cap]];
        swapped += r->swapped;
        if (!huge && pkv_sim_pages_to_admit(s, r) > s->alloc.n_usable) huge = r;
        if (k < 3 && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len,
                                    "%s request %lld (%s, needs %d pages)", k ? "," : "",
                                    (long long)r->rec.id, r->swapped ? "swapped out" : "waiting",
                                    (int)pkv_sim_pages_to_admit(s, r));
    }
    const size_t n = s->wait_n + (size_t)s->n_run + (size_t)s->n_prefill;
    if (n == 0) return 0;
    if (huge) {
        const int max_pages = (int)((s->cfg->workload.max_context + s->cfg->model.page_size - 1) /
                                    s->cfg->model.page_size);
        return pkv_fail(e,
                        "%s: the run cannot finish: request %lld needs %d pages, more than the "
                        "pool's %d usable pages%s; raise serving.kv_pages to at least %d, or "
                        "lower workload.max_context",
                        s->cfg->file, (long long)huge->rec.id, (int)pkv_sim_pages_to_admit(s, huge),
                        (int)s->alloc.n_usable,
                        huge->rec.session >= 0 ? " (a multi-turn session's history grows up to "
                                                 "workload.max_context)"
                                               : "",
                        max_pages);
    }
    return pkv_fail(e,
                    "%s: the run cannot finish: %zu requests are still in it, %zu waiting (%zu "
                    "swapped out), and nothing runs to free pages; the queue begins with%s%s, and "
                    "the pool has %d pages free or evictable of serving.kv_pages %d. Raise "
                    "serving.kv_pages or serving.swap_pages, lower serving.max_active, or turn "
                    "serving.prefix_caching off",
                    s->cfg->file, n, s->wait_n, swapped, len ? list : " nothing",
                    s->wait_n > 3 ? ", ..." : "", (int)pkv_sim_pages_available(s),
                    s->cfg->kv_pages);
}
