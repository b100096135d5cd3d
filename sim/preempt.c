/* Preemption when the page pool cannot grow the running batch: the most recently
 * admitted request leaves it, by swap (its own pages copied to a host pool, back on
 * readmission) where the experiment swaps and the host pool has room, else by
 * recompute (its pages freed, its prompt and tokens prefilled again). */
#include "sim_parts.h"
#include "pkv_assert.h"

#include <string.h>

/* A copy of n pages (every layer's K and V) between the GPU's pages and the host
 * pool's slots, made by the engine (real on the cuda backend, modelled elsewhere);
 * the next iteration waits for its time. */
static int copy_swap(pkv_sim *s, int to_host, const int32_t *pages, const int32_t *slots, int32_t n,
                     pkv_err *e) {
    double t, tp;
    if (pkv_engine_swap(s->eng, to_host, pages, slots, n, &t, &tp, e)) return -1;
    s->swap_pending_s += t;
    s->counts.swap_time_s += t, s->counts.swap_predicted_s += tp;
    s->counts.swap_pages += (uint64_t)n;
    return 0;
}

double pkv_sim_take_swap_time(pkv_sim *s) {
    const double t = s->swap_pending_s;
    s->swap_pending_s = 0;
    return t;
}

/* r's own pages go to host slots, copied before the GPU's pages come free; its pages
 * array then names the slots there. The cached blocks it maps stay on the GPU,
 * referenced by r, so the cache cannot evict them meanwhile. */
static int swap_out(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    int32_t *own = r->pages + pkv_sim_mapped_pages(s, r);
    const int32_t n = r->n_pages - pkv_sim_mapped_pages(s, r);
    const int took = pkv_kvalloc_take(&s->host, n, r->rec.id, s->swap_slots);
    PKV_ASSERT(took == 0); /* the caller checked the host pool's room */
    if (copy_swap(s, 1, own, s->swap_slots, n, e)) return -1;
    pkv_kvalloc_give(&s->alloc, own, n, r->rec.id);
    memcpy(own, s->swap_slots, sizeof(int32_t) * (size_t)n);
    r->swapped = true;
    s->counts.swap_outs++;
    return 0;
}

int pkv_sim_swap_in(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    int32_t *own = r->pages + pkv_sim_mapped_pages(s, r);
    const int32_t n = r->n_pages - pkv_sim_mapped_pages(s, r);
    memcpy(s->swap_slots, own, sizeof(int32_t) * (size_t)n);
    pkv_sim_take_pages(s, n, r->rec.id, own);
    if (copy_swap(s, 0, own, s->swap_slots, n, e)) return -1;
    pkv_kvalloc_give(&s->host, s->swap_slots, n, r->rec.id);
    r->swapped = false;
    s->counts.swap_ins++;
    return 0;
}

/* Preemptions in a row without a decode step between them past which the run is a
 * cycle (requests preempted, readmitted and preempted again, none producing a token):
 * a real run's preemptions before a step are at most a batch's. */
enum { PREEMPT_CYCLE = 100000 };

/* Evict the most recently admitted running request to the front of the queue. */
static int preempt_latest(pkv_sim *s, pkv_err *e) {
    int32_t v = 0;
    for (int32_t i = 1; i < s->n_run; i++)
        if (s->req[s->run[i]].admit_seq > s->req[s->run[v]].admit_seq) v = i;
    int64_t slot = s->run[v];
    pkv_sim_request *r = &s->req[slot];
    if (++s->preempt_run > PREEMPT_CYCLE)
        return pkv_fail(e,
                        "%s: the run cannot make progress: %d preemptions in a row at %.6g s "
                        "without a decode step between them (request %lld, %d pages, preempted "
                        "%u times, the latest); the pool has %d pages free or evictable of "
                        "serving.kv_pages %d, the rest held by the running requests and the "
                        "cached blocks of swapped-out ones. Raise serving.kv_pages or "
                        "serving.swap_pages, lower serving.max_active, or turn "
                        "serving.prefix_caching off",
                        s->cfg->file, (int)PREEMPT_CYCLE, s->t_now, (long long)r->rec.id,
                        (int)r->n_pages, (unsigned)r->rec.preemptions,
                        (int)pkv_sim_pages_available(s), s->cfg->kv_pages);
    pkv_sim_run_remove(s, v);
    if (s->cfg->preemption == PKV_PREEMPT_SWAP &&
        r->n_pages - pkv_sim_mapped_pages(s, r) <= s->host.n_free) {
        if (swap_out(s, r, e)) return -1;
    } else
        pkv_sim_release_pages(s, r);
    r->rec.state = PKV_REQ_WAITING;
    r->rec.preemptions++;
    return pkv_sim_wait_push_front(s, slot) ? pkv_fail(e, "out of memory") : 0;
}

/* The pages r's next step needs beyond its own: its next token (and, speculating, the
 * tokens proposed after it, whose KV the verify writes; the rejected ones' is written over
 * by the next step, as vLLM's lookahead slots are) past its pages. */
static int32_t pages_short(const pkv_sim *s, const pkv_sim_request *r) {
    const int64_t want = pkv_sim_stored_tokens(r) + 1 + pkv_sim_spec_tokens(s, r);
    if (want <= (int64_t)r->n_pages * s->cfg->model.page_size) return 0; /* most steps */
    return pkv_sim_pages_for(s, want) - r->n_pages;
}

/* serving.admission new_token_ratio: preemptions made room for the running batch (SGLang's
 * retraction), which sets the ratio from the requests still running. */
static void retracted(pkv_sim *s) {
    if (s->cfg->admission != PKV_ADMIT_NEW_TOKEN_RATIO) return;
    double made = 0, full = 0;
    for (int32_t i = 0; i < s->n_run; i++) {
        const pkv_sim_request *r = &s->req[s->run[i]];
        made += r->rec.generated + PKV_ADMIT_RETRACT_STEPS, full += r->rec.decode_len;
    }
    s->new_token_ratio = full > 0 && made < full ? made / full : 1;
}

int pkv_sim_grow_pages(pkv_sim *s, pkv_err *e) {
    /* The step appends its input token: the last sampled one where the prefill sampled
     * the first, else (the study layer) the next one; speculating, the proposed ones
     * after it. One pass over the rows: their lengths, and the few that cross a page
     * (short: their rows, their pages each) */
    const int32_t next = !s->eng->kind->prefill_samples;
    int32_t n_short;
    for (bool was_retracted = false;; was_retracted = true) {
        int32_t demand = 0;
        n_short = 0;
        for (int32_t i = 0; i < s->n_run; i++) {
            const pkv_sim_request *r = &s->req[s->run[i]];
            const int32_t n = pages_short(s, r), spec = pkv_sim_spec_tokens(s, r);
            s->seq_lens[i] = (int32_t)(pkv_sim_stored_tokens(r) + next + spec);
            if (n) demand += n, s->short_rows[n_short++] = i;
        }
        if (demand <= pkv_sim_pages_available(s)) {
            if (was_retracted) retracted(s);
            break;
        }
        if (preempt_latest(s, e)) return -1;
    }
    for (int32_t k = 0; k < n_short; k++) {
        const int32_t i = s->short_rows[k];
        pkv_sim_request *r = &s->req[s->run[i]];
        for (int32_t n = pages_short(s, r); n > 0; n--) {
            PKV_ASSERT(r->n_pages < r->cap_pages);
            int32_t *slot = &r->pages[r->n_pages];
            pkv_sim_take_pages(s, 1, r->rec.id, slot); /* demand was covered above */
            s->block_table[(size_t)i * s->bt_stride + r->n_pages] = *slot;
            pkv_sim_mark_dirty(s, i, r->n_pages);
            r->n_pages++;
        }
    }
    return 0;
}
