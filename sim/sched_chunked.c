/* chunked: every iteration runs each running request's decode token and, in the rest
 * of serving.token_budget, the next chunk of each admitted prompt in admission order
 * (at most max_prefill_chunk tokens of one prompt); an iteration with decode rows is a
 * step (its chunks counted in it), one without them a prefill batch of chunks. */
#include "sched.h"
#include "sim_parts.h"

#include <stdint.h>

/* The chunks in the token budget the decode rows leave (token_budget >= max_active,
 * so every prompt admitted gets at least one token); their pages (each chunk's
 * prompt's first pages up to the chunk's end) into prefill_pages. */
static void take_chunks(pkv_sim *s, pkv_prefill_view *cv) {
    int32_t budget = s->cfg->token_budget - s->n_run, n_pages = 0;
    const int32_t cap = s->cfg->max_prefill_chunk > 0 ? s->cfg->max_prefill_chunk : INT32_MAX;
    s->n_chunks = 0;
    for (int32_t i = 0; i < s->n_prefill && budget > 0; i++) {
        pkv_sim_request *r = &s->req[s->prefill[i]];
        pkv_sim_prefill_runs(s, r);
        const int32_t k = s->n_chunks++, left = (int32_t)(pkv_sim_stored_tokens(r) - r->prefilled);
        int32_t len = left < cap ? left : cap;
        if (len > budget) len = budget;
        s->chunk_slot[k] = s->prefill[i];
        s->chunk_start[k] = r->prefilled;
        s->chunk_len[k] = len;
        s->chunk_last[k] = len == left;
        n_pages = pkv_sim_list_pages(s, r, r->prefilled + len, n_pages);
        budget -= len;
    }
    *cv = (pkv_prefill_view){.n_req = s->n_chunks,
                             .lens = s->chunk_len,
                             .pages = s->prefill_pages,
                             .n_pages = n_pages,
                             .starts = s->chunk_start,
                             .last = s->chunk_last};
}

static int next(pkv_sim *s, pkv_iter_kind *kind, pkv_prefill_view *pv, pkv_err *e) {
    *pv = (pkv_prefill_view){0};
    *kind = PKV_ITER_NONE;
    if (s->n_run + s->n_prefill == 0 || !pkv_sim_more_steps(s)) return 0;
    if (pkv_sim_grow_pages(s, e)) return -1;
    take_chunks(s, pv);
    /* everything was preempted: the chunks alone, or admission retries */
    *kind = s->n_run > 0 ? PKV_ITER_STEP : s->n_chunks > 0 ? PKV_ITER_PREFILL : PKV_ITER_RETRY;
    return 0;
}

/* The iteration's chunks are in the pages; the prompts they end leave the prefill
 * list (the others keep their order). */
static int done(pkv_sim *s, pkv_iter_kind kind, pkv_err *e) {
    int32_t kept = 0;
    for (int32_t i = 0, k = 0; i < s->n_prefill; i++) {
        const int64_t slot = s->prefill[i];
        if (k < s->n_chunks && s->chunk_slot[k] == slot) {
            s->req[slot].prefilled += s->chunk_len[k];
            if (s->chunk_last[k++]) {
                if (pkv_sim_prompt_done(s, slot, e)) return -1;
                continue;
            }
        }
        s->prefill[kept++] = slot;
    }
    s->n_prefill = kept;
    s->n_chunks = 0;
    return 0;
}

const pkv_scheduler pkv_sched_chunked = {"chunked", next, done};
