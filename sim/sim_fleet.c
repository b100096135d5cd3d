/* What a fleet does to one of its replicas (sim/fleet.h): a request it routes there
 * arrives (a prefilled one with its KV), one cut on its way is recorded as waiting, a
 * request handed to a decode replica leaves. */
#include "sim_parts.h"

/* Something from outside changed the simulation at t: an idle engine starts once this
 * instant's events are handled. */
static int outside(pkv_sim *s, pkv_err *e) {
    const pkv_event *next = pkv_heap_top(&s->heap);
    return next && next->t == s->t_now ? 0 : pkv_sim_try_schedule(s, e);
}

int pkv_sim_inject(pkv_sim *s, const pkv_request_draw *d, double t_arrival, double t,
                   const pkv_request_rec *prefilled, pkv_err *e) {
    if (t > s->t_now) s->t_now = t;
    int64_t slot;
    if (pkv_sim_arrive(s, d, t_arrival, !prefilled, &slot, e)) return -1;
    if (prefilled && slot >= 0) {
        pkv_sim_request *r = &s->req[slot];
        const int64_t id = r->rec.id;
        r->rec = *prefilled;
        r->rec.id = id, r->rec.state = PKV_REQ_WAITING;
        r->t_last_token = r->rec.t_first_token - pkv_sim_client_lag(s);
        r->kv_arrived = true;
    }
    return outside(s, e);
}

int pkv_sim_record_waiting(pkv_sim *s, const pkv_request_draw *d, double t_arrival, pkv_err *e) {
    int64_t slot;
    return pkv_sim_arrive(s, d, t_arrival, false, &slot, e);
}

int pkv_sim_release(pkv_sim *s, int64_t slot, double t, pkv_err *e) {
    if (t > s->t_now) s->t_now = t;
    pkv_sim_release_pages(s, &s->req[slot]);
    pkv_sim_free_slot(s, slot);
    return outside(s, e);
}
