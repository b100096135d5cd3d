/* Prefill/decode disaggregation's KV transfers: a prefill replica hands a prefilled
 * request to the decode router, and its KV goes over the prefill replica's link
 * (streams at once, a fixed cost each, then the bytes sharing the link's bandwidth). */
#include "fleet_parts.h"

#include <math.h>
#include <stdlib.h>

/* The bytes of link L's flowing transfers as of now. */
static void link_catch_up(pkv_fleet *f, pkv_fleet_link *L) {
    if (L->n_flow > 0) {
        const double sent = (f->t_now - L->t_last) * L->bps / L->n_flow;
        for (int k = 0; k < L->n_flow; k++) f->transit[L->flow[k]].bytes -= sent;
    }
    L->t_last = f->t_now;
}

/* File link i's next transfer end (the one with the fewest bytes left). */
static int link_file(pkv_fleet *f, int i) {
    pkv_fleet_link *L = &f->links[i];
    if (L->n_flow == 0) return L->t_tick = INFINITY, 0;
    double least = INFINITY;
    for (int k = 0; k < L->n_flow; k++) least = fmin(least, f->transit[L->flow[k]].bytes);
    L->t_tick = f->t_now + fmax(least, 0) * L->n_flow / L->bps;
    return pkv_heap_push(&f->events, L->t_tick, PKV_FLEET_LINK, i);
}

/* Transfer k takes a stream of its link now: its fixed cost, then its bytes. */
static int transfer_start(pkv_fleet *f, int64_t k) {
    pkv_fleet_transit *x = &f->transit[k];
    pkv_fleet_link *L = &f->links[x->from];
    x->t_start = f->t_now;
    L->on++, L->transfers++;
    if (L->on > L->most_on) L->most_on = L->on;
    return pkv_heap_push(&f->events, f->t_now + L->fixed_s, PKV_FLEET_FLOW, k);
}

/* A prefill replica's request is prefilled (its first token sampled): the decode
 * router picks its decode replica, and its KV goes over the prefill replica's link. */
static int handoff(void *ctx, pkv_sim *s, int64_t slot, pkv_err *e) {
    pkv_fleet *f = ((pkv_fleet_hand *)ctx)->f;
    const int from = ((pkv_fleet_hand *)ctx)->i;
    const pkv_sim_request *r = &s->req[slot];
    const pkv_request_draw d = pkv_sim_draw_of(r);
    const int to = pkv_fleet_choose(f, &f->decode, &d);
    const int64_t k = pkv_fleet_transit_slot(f);
    if (to < 0 || k < 0) return pkv_fail(e, "out of memory (KV transfers)");
    pkv_fleet_note_sent(f, to, d.prompt_len, true);
    f->transit[k] = (pkv_fleet_transit){.d = d,
                                        .t_arrival = r->rec.t_arrival,
                                        .to = to,
                                        .from = from,
                                        .slot = slot,
                                        .bytes = r->n_pages * pkv_model_page_bytes(&s->cfg->model),
                                        .t_start = NAN,
                                        .next = -1};
    pkv_fleet_link *L = &f->links[from];
    if (L->on < L->streams) return transfer_start(f, k) ? pkv_fail(e, "out of memory") : 0;
    if (L->wait_tail >= 0)
        f->transit[L->wait_tail].next = k;
    else
        L->wait_head = k;
    L->wait_tail = k;
    return 0;
}

/* Transfer k's bytes are through: the prefill replica frees its pages, the request
 * (its row as prefilled, with the transfer) joins its decode replica. */
static int transfer_end(pkv_fleet *f, int64_t k, pkv_err *e) {
    const pkv_fleet_transit x = f->transit[k];
    f->free_transit[f->n_free_transit++] = k;
    pkv_sim *p = f->replicas[x.from];
    pkv_request_rec rec = p->req[x.slot].rec;
    rec.prefill_replica = (uint32_t)x.from;
    rec.t_transfer_start = x.t_start, rec.t_transfer_end = f->t_now;
    pkv_fleet_note_arrived(f, x.to, x.d.prompt_len);
    if (pkv_sim_release(p, x.slot, f->t_now, e)) return pkv_fleet_replica_failed(e, x.from);
    if (pkv_fleet_file_next(f, x.from)) return pkv_fail(e, "out of memory");
    pkv_fleet_link *L = &f->links[x.from];
    L->on--;
    if (L->wait_head >= 0) { /* the next waiting takes the stream */
        const int64_t w = L->wait_head;
        if ((L->wait_head = f->transit[w].next) < 0) L->wait_tail = -1;
        if (transfer_start(f, w)) return pkv_fail(e, "out of memory");
    }
    if (pkv_fleet_maybe_off(f, x.from)) return pkv_fail(e, "out of memory");
    return pkv_fleet_deliver(f, x.to, &x.d, x.t_arrival, &rec, e);
}

int pkv_fleet_link_flow(pkv_fleet *f, int64_t k, pkv_err *e) {
    const int i = f->transit[k].from;
    pkv_fleet_link *L = &f->links[i];
    link_catch_up(f, L);
    L->flow[L->n_flow++] = k;
    return link_file(f, i) ? pkv_fail(e, "out of memory") : 0;
}

/* The link's transfers with no bytes left end. */
int pkv_fleet_link_tick(pkv_fleet *f, int i, double t, pkv_err *e) {
    pkv_fleet_link *L = &f->links[i];
    if (t != L->t_tick) return 0; /* filed again since */
    link_catch_up(f, L);
    const double done = L->bps * 1e-12; /* a picosecond's bytes: rounding */
    for (int k = 0; k < L->n_flow;) {
        const int64_t x = L->flow[k];
        if (f->transit[x].bytes > done) {
            k++;
            continue;
        }
        L->flow[k] = L->flow[--L->n_flow];
        if (transfer_end(f, x, e)) return -1;
    }
    return link_file(f, i) ? pkv_fail(e, "out of memory") : 0;
}

int pkv_fleet_links_init(pkv_fleet *f, pkv_err *e) {
    for (int i = f->lo; i < f->hi; i++) {
        if (f->role[i] != PKV_ROLE_PREFILL) continue;
        const pkv_calib *c = f->replicas[i]->eng->cal;
        pkv_fleet_link *L = &f->links[i];
        *L = (pkv_fleet_link){.bps = c->kv_link_bps,
                              .fixed_s = c->kv_link_s,
                              .streams = c->kv_link_streams,
                              .t_tick = INFINITY,
                              .wait_head = -1,
                              .wait_tail = -1};
        if (!(L->flow = malloc(sizeof *L->flow * (size_t)L->streams)))
            return pkv_fail(e, "out of memory");
        f->replicas[i]->handoff = handoff;
    }
    return 0;
}
