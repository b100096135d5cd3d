/* What the simulation's files share (sim.c: the loop and the request lifecycle;
 * sim_setup.c: its construction and the requests' slots; sim_fleet.c: what a fleet does
 * to it; pages.c: the waiting queue, the running batch and a request's pages; admit.c;
 * preempt.c; the schedulers). Not for use outside sim/. */
#ifndef PKV_SIM_PARTS_H
#define PKV_SIM_PARTS_H

#include "sim.h"

#include <math.h>
#include <stdint.h>

static inline int64_t pkv_sim_stored_tokens(const pkv_sim_request *r) {
    return (int64_t)r->rec.prompt_len + r->rec.generated;
}
/* Speculative decoding: the tokens r's next step proposes beyond its own, as many as it
 * may still keep (0: plain decoding). */
static inline int32_t pkv_sim_spec_tokens(const pkv_sim *s, const pkv_sim_request *r) {
    const int64_t left = (int64_t)r->rec.decode_len - r->rec.generated - 1;
    const int32_t k = s->cfg->spec.tokens;
    return left < k ? (int32_t)(left > 0 ? left : 0) : k;
}
static inline int32_t pkv_sim_pages_for(const pkv_sim *s, int64_t tokens) {
    return (int32_t)((tokens + s->cfg->model.page_size - 1) / s->cfg->model.page_size);
}
/* Tokens a request may ever hold, rounded up to the bucket length when one is set. */
static inline int64_t pkv_sim_reserved_tokens(const pkv_sim *s, const pkv_sim_request *r) {
    int64_t len = (int64_t)r->rec.prompt_len + r->rec.decode_len, b = s->cfg->bucket_len;
    return b > 0 ? (len + b - 1) / b * b : len;
}
/* A piece of r's prompt runs in the iteration starting now: the first of this admission
 * stamps where its TTFT's prefill part begins. */
static inline void pkv_sim_prefill_runs(const pkv_sim *s, pkv_sim_request *r) {
    if (isnan(r->t_prefill_start)) r->t_prefill_start = s->t_now;
}
/* The scheduler may start another decode step (run.max_steps). */
static inline bool pkv_sim_more_steps(const pkv_sim *s) {
    return s->cfg->max_steps == 0 || (int64_t)s->steps < s->cfg->max_steps;
}

/* sim_setup.c: a slot for a request arriving at t with draw d (-1: out of memory), and
 * a slot freed (its request left: its row recorded, or handed to another replica). */
int64_t pkv_sim_new_request(pkv_sim *s, const pkv_request_draw *d, double t);
void pkv_sim_free_slot(pkv_sim *s, int64_t slot);

/* pages.c */
/* The simulation's bookkeeping (the KV pool, the prefix cache's table, the swap pool,
 * the block tables) against what this process may still allocate, before anything is;
 * -1 naming the setting, the bytes and the limit. */
int pkv_sim_check_memory(const pkv_config *cfg, int32_t bt_stride, pkv_err *e);
int pkv_sim_wait_push_back(pkv_sim *s, int64_t slot);
int pkv_sim_wait_push_front(pkv_sim *s, int64_t slot);
/* The request becomes a row of the running batch, its block table its pages. */
void pkv_sim_join_run(pkv_sim *s, int64_t slot);
/* Remove batch row i: the last row moves into its place. */
void pkv_sim_run_remove(pkv_sim *s, int32_t i);
/* Block-table entries of row i from `from` on changed (a device copy re-uploads them). */
static inline void pkv_sim_mark_dirty(pkv_sim *s, int32_t i, int32_t from) {
    if (s->dirty_from[i] == INT32_MAX) s->dirty_rows[s->n_dirty++] = i;
    if (from < s->dirty_from[i]) s->dirty_from[i] = from;
}
/* Pages the pool can hand out now: free, and held only by the cache. */
int32_t pkv_sim_pages_available(const pkv_sim *s);
/* r's leading pages that are the cache's (its mapped blocks'); the rest are its own. */
int32_t pkv_sim_mapped_pages(const pkv_sim *s, const pkv_sim_request *r);
/* Take n pages for r, evicting unreferenced cached blocks while the free pages fall
 * short; the caller checked that free and evictable pages cover n. */
void pkv_sim_take_pages(pkv_sim *s, int32_t n, int64_t owner, int32_t *out);
/* The request leaves the pool: its cache references go, its own pages return. */
void pkv_sim_release_pages(pkv_sim *s, pkv_sim_request *r);
/* r's leading blocks found in the cache map their pages (a reference each); at least
 * the prompt's last token is left to prefill (its logits sample). Returns the tokens
 * found. */
int32_t pkv_sim_map_cached(pkv_sim *s, pkv_sim_request *r);
/* r's prompt is in its pages: its full blocks join the prefix cache (and the set of
 * every block ever cached). -1: out of memory. */
int pkv_sim_cache_prompt(pkv_sim *s, pkv_sim_request *r);
/* r's pages holding its first `tokens` tokens, listed in prefill_pages from n on (a
 * page a cached block shares is listed for each prompt); returns the new count. */
int32_t pkv_sim_list_pages(pkv_sim *s, const pkv_sim_request *r, int64_t tokens, int32_t n);

/* admit.c: waiting requests in (the admission policy picks) while the budgets allow. */
int pkv_sim_admit(pkv_sim *s, pkv_err *e);
/* The pages a waiting request needs to be admitted (a swapped one: its own pages back). */
int32_t pkv_sim_pages_to_admit(const pkv_sim *s, const pkv_sim_request *r);
/* Called when nothing is left to happen: 0 when no request is still in the system,
 * else -1 with an error naming the waiting ones (none can run again: no iteration
 * runs, so no page comes free) and what to change. */
int pkv_sim_stranded(const pkv_sim *s, pkv_err *e);

/* preempt.c */
/* Before a step every row appends one token; rows at a page boundary get a page.
 * When the pool cannot cover them, preempt the latest admitted until it can. */
int pkv_sim_grow_pages(pkv_sim *s, pkv_err *e);
/* r comes back from its host slots onto new pages (it runs on without a prefill). */
int pkv_sim_swap_in(pkv_sim *s, pkv_sim_request *r, pkv_err *e);
/* The seconds of swap copies an iteration starting now waits for. */
double pkv_sim_take_swap_time(pkv_sim *s);

/* sim.c: a request's prompt is all in its pages (a full model sampled its first
 * token, which may be its last); else it joins the running batch. */
int pkv_sim_prompt_done(pkv_sim *s, int64_t slot, pkv_err *e);
/* The seconds a client sees beyond the engine's times (the engine profile's request
 * work); request d arrives at t (*slot its slot, -1 if refused), through the server's
 * front-end where `frontend`; admit, and start the scheduler's next iteration. */
double pkv_sim_client_lag(const pkv_sim *s);
int pkv_sim_arrive(pkv_sim *s, const pkv_request_draw *d, double t, bool frontend, int64_t *slot,
                   pkv_err *e);
int pkv_sim_try_schedule(pkv_sim *s, pkv_err *e);

#endif
