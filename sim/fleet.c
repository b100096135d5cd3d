/* The fleet's state: what the router sent and what arrived, each replica's next event
 * filed, the requests on their way (slots), a request delivered to its replica, and
 * the state's end. The loop is fleet_run.c; the routers, the KV links, the autoscaler
 * and the view's refresh are the other fleet_*.c files (fleet_parts.h). */
#include "fleet_parts.h"
#include "pkv_mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The router sent replica i a request of `prompt` tokens: a stale view counts it at
 * once; one on its way (on_way) counts until it arrives. */
void pkv_fleet_note_sent(pkv_fleet *f, int i, int32_t prompt, bool on_way) {
    f->per_replica[i]++;
    if (f->spec.view_refresh_s > 0) f->view[i].requests++, f->view[i].tokens += prompt;
    if (on_way && pkv_fleet_local(f, i)) f->sent[i].requests++, f->sent[i].tokens += prompt;
}

void pkv_fleet_note_arrived(pkv_fleet *f, int i, int32_t prompt) {
    f->sent[i].requests--, f->sent[i].tokens -= prompt;
}

/* File replica i's next event in the heap (where it moved), and the router's picture of
 * it: every change to a replica (its events, an arrival, a release) ends here. */
int pkv_fleet_file_next(pkv_fleet *f, int i) {
    f->now[i] = pkv_sim_load_of(f->replicas[i], f->count_tokens);
    const double t = pkv_sim_next_t(f->replicas[i]);
    if (t == f->next_t[i]) return 0;
    f->next_t[i] = t;
    return isfinite(t) ? pkv_heap_push(&f->when, t, 0, i) : 0;
}

int pkv_fleet_replica_failed(pkv_err *e, int i) {
    char msg[sizeof e->msg];
    memcpy(msg, e->msg, sizeof msg);
    return pkv_fail(e, "replica %d: %.*s", i, (int)sizeof msg - 16, msg);
}

/* A slot for something on its way; -1 when out of memory. */
int64_t pkv_fleet_transit_slot(pkv_fleet *f) {
    if (f->n_free_transit) return f->free_transit[--f->n_free_transit];
    if (f->n_transit == f->cap_transit) {
        const size_t cap = f->cap_transit ? 2 * f->cap_transit : 256;
        if (pkv_resize(&f->transit, cap, sizeof *f->transit) ||
            pkv_resize(&f->free_transit, cap, sizeof *f->free_transit))
            return -1;
        f->cap_transit = cap;
    }
    return (int64_t)f->n_transit++;
}

/* Request d reaches replica i now (prefilled: with its KV, as its prefill replica left
 * it). */
int pkv_fleet_deliver(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival,
                      const pkv_request_rec *prefilled, pkv_err *e) {
    if (pkv_sim_inject(f->replicas[i], d, t_arrival, f->t_now, prefilled, e))
        return pkv_fleet_replica_failed(e, i);
    return pkv_fleet_file_next(f, i) ? pkv_fail(e, "out of memory") : 0;
}

void pkv_fleet_free(pkv_fleet *f) {
    for (int i = 0; f->links && i < f->n; i++) free(f->links[i].flow);
    free(f->queue), free(f->queued_at), free(f->per_replica), free(f->next_t), free(f->role);
    free(f->now);
    free(f->view), free(f->sent), free(f->transit), free(f->free_transit);
    free(f->entry.session_at), free(f->decode.session_at);
    free(f->entry.idx), free(f->decode.idx), free(f->links), free(f->hands);
    free(f->state), free(f->up_since), free(f->up_s), free(f->ups), free(f->downs), free(f->scale);
    f->state = NULL, f->up_since = f->up_s = NULL, f->ups = f->downs = NULL, f->scale = NULL;
    f->n_scale = f->cap_scale = 0;
    free(f->ttft), free(f->sync_buf);
    f->sync_buf = NULL;
    f->ttft = NULL, f->ttft_first = f->n_ttft = f->cap_ttft = 0;
    pkv_heap_free(&f->when);
    pkv_heap_free(&f->events);
    f->queue = NULL, f->queued_at = NULL, f->per_replica = NULL, f->next_t = NULL, f->role = NULL;
    f->view = f->sent = NULL, f->transit = NULL, f->free_transit = NULL;
    f->entry.session_at = f->decode.session_at = NULL;
    f->entry.n_session_at = f->decode.n_session_at = 0;
    f->entry.idx = f->decode.idx = NULL, f->links = NULL, f->hands = NULL;
    f->q_n = f->q_cap = f->q_head = 0;
    f->n_transit = f->cap_transit = f->n_free_transit = 0;
}
