/* prefill_first: a prefill batch of the admitted prompts whole (from its first token
 * the prefix cache did not hold), in admission order up to serving.prefill_batch_tokens
 * (0: every one; a longer prompt runs alone), else a decode step over every running
 * request. */
#include "sched.h"
#include "sim_parts.h"

#include <string.h>

static int next(pkv_sim *s, pkv_iter_kind *kind, pkv_prefill_view *pv, pkv_err *e) {
    *pv = (pkv_prefill_view){0};
    *kind = PKV_ITER_NONE;
    if (s->n_prefill > 0) {
        const int64_t cap = s->cfg->prefill_batch_tokens;
        int32_t n = 0, k = 0;
        for (int64_t tokens = 0; k < s->n_prefill; k++) {
            pkv_sim_request *r = &s->req[s->prefill[k]];
            const int32_t len = (int32_t)pkv_sim_stored_tokens(r) - r->prefilled;
            if (cap > 0 && k > 0 && tokens + len > cap) break;
            tokens += len;
            pkv_sim_prefill_runs(s, r);
            s->chunk_start[k] = r->prefilled;
            s->prefill_lens[k] = len;
            n = pkv_sim_list_pages(s, r, pkv_sim_stored_tokens(r), n);
        }
        s->prefill_batch = k;
        *pv = (pkv_prefill_view){.n_req = k,
                                 .lens = s->prefill_lens,
                                 .pages = s->prefill_pages,
                                 .n_pages = n,
                                 .starts = s->chunk_start};
        *kind = PKV_ITER_PREFILL;
        return 0;
    }
    if (s->n_run == 0 || !pkv_sim_more_steps(s)) return 0;
    if (pkv_sim_grow_pages(s, e)) return -1;
    *kind = s->n_run > 0 ? PKV_ITER_STEP : PKV_ITER_RETRY;
    return 0;
}

static int done(pkv_sim *s, pkv_iter_kind kind, pkv_err *e) {
    if (kind != PKV_ITER_PREFILL) return 0;
    const int32_t k = s->prefill_batch;
    for (int32_t i = 0; i < k; i++)
        if (pkv_sim_prompt_done(s, s->prefill[i], e)) return -1;
    memmove(s->prefill, s->prefill + k, sizeof *s->prefill * (size_t)(s->n_prefill - k));
    s->n_prefill -= k;
    return 0;
}

const pkv_scheduler pkv_sched_prefill_first = {"prefill_first", next, done};
