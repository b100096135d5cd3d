/* prefill_first: a prefill batch of every admitted prompt whole (from its first token
 * the prefix cache did not hold), else a decode step over every running request. */
#include "sched.h"
#include "sim_parts.h"

static int next(pkv_sim *s, pkv_iter_kind *kind, pkv_prefill_view *pv, pkv_err *e) {
    *pv = (pkv_prefill_view){0};
    *kind = PKV_ITER_NONE;
    if (s->n_prefill > 0) {
        int32_t n = 0;
        for (int32_t i = 0; i < s->n_prefill; i++) {
            const pkv_sim_request *r = &s->req[s->prefill[i]];
            s->chunk_start[i] = r->prefilled;
            s->prefill_lens[i] = (int32_t)pkv_sim_stored_tokens(r) - r->prefilled;
            n = pkv_sim_list_pages(s, r, pkv_sim_stored_tokens(r), n);
        }
        *pv = (pkv_prefill_view){.n_req = s->n_prefill,
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
    for (int32_t k = 0; k < s->n_prefill; k++)
        if (pkv_sim_prompt_done(s, s->prefill[k], e)) return -1;
    s->n_prefill = 0;
    return 0;
}

const pkv_scheduler pkv_sched_prefill_first = {"prefill_first", next, done};
