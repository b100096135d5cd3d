/* The fleet's loop: arrivals through the router to the replicas, every replica's
 * events in time order, the requests on their way and the router's queue
 * (central_queue), until the work or a bound ends it. */
#include "fleet_parts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The router sends d to replica i: it arrives after the decision's latency (over ranks,
 * where i runs; the others only count it). */
static int send(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival, pkv_err *e) {
    if (f->routed) f->routed(f->routed_ctx, i, d, t_arrival, f->t_now);
    pkv_fleet_note_sent(f, i, d->prompt_len, f->spec.latency_s > 0);
    if (!pkv_fleet_local(f, i)) return 0;
    if (f->spec.latency_s <= 0) return pkv_fleet_deliver(f, i, d, t_arrival, NULL, e);
    const int64_t k = pkv_fleet_transit_slot(f);
    if (k < 0) return pkv_fail(e, "out of memory (requests on their way)");
    f->transit[k] = (pkv_fleet_transit){.d = *d, .t_arrival = t_arrival, .to = i, .from = -1};
    return pkv_heap_push(&f->events, f->t_now + f->spec.latency_s, PKV_FLEET_DELIVER, k)
               ? pkv_fail(e, "out of memory")
               : 0;
}

/* One of the fleet's events, now. */
static int fleet_event(pkv_fleet *f, pkv_err *e) {
    pkv_event ev;
    pkv_heap_pop(&f->events, &ev);
    switch (ev.kind) {
    case PKV_FLEET_DELIVER: { /* a request reaches its replica */
        const pkv_fleet_transit tr = f->transit[ev.arg];
        f->free_transit[f->n_free_transit++] = ev.arg;
        pkv_fleet_note_arrived(f, tr.to, tr.d.prompt_len);
        return pkv_fleet_deliver(f, tr.to, &tr.d, tr.t_arrival, NULL, e);
    }
    case PKV_FLEET_FLOW: /* a transfer's fixed cost passed: its bytes share the link */
        return pkv_fleet_link_flow(f, ev.arg, e);
    case PKV_FLEET_LINK:
        return pkv_fleet_link_tick(f, (int)ev.arg, ev.t, e);
    case PKV_FLEET_SCALE:
        f->n_own--;
        return pkv_fleet_decide(f, e);
    case PKV_FLEET_READY: /* a started replica's cold start is over: it takes requests */
        f->n_own--;
        return pkv_fleet_ready(f, (int)ev.arg, e);
    }
    return 0;
}

static int enqueue(pkv_fleet *f, const pkv_request_draw *d, double t, pkv_err *e) {
    if (f->q_n == f->q_cap) {
        const size_t cap = f->q_cap ? 2 * f->q_cap : 256;
        pkv_request_draw *q = malloc(cap * sizeof *q);
        double *at = malloc(cap * sizeof *at);
        if (!q || !at) {
            free(q), free(at);
            return pkv_fail(e, "out of memory (the router's queue)");
        }
        for (size_t k = 0; k < f->q_n; k++) {
            q[k] = f->queue[(f->q_head + k) % f->q_cap];
            at[k] = f->queued_at[(f->q_head + k) % f->q_cap];
        }
        free(f->queue), free(f->queued_at);
        f->queue = q, f->queued_at = at, f->q_cap = cap, f->q_head = 0;
    }
    f->queue[(f->q_head + f->q_n) % f->q_cap] = *d;
    f->queued_at[(f->q_head + f->q_n) % f->q_cap] = t;
    f->q_n++;
    return 0;
}

/* central_queue: hand the waiting requests, oldest first, to replicas with room. */
static int drain(pkv_fleet *f, pkv_err *e) {
    while (f->q_n > 0) {
        const pkv_request_draw d = f->queue[f->q_head];
        const double at = f->queued_at[f->q_head];
        const int i = pkv_fleet_choose(f, &f->entry, &d);
        if (i < 0) return 0;
        f->q_head = (f->q_head + 1) % f->q_cap, f->q_n--;
        if (send(f, i, &d, at, e)) return -1;
    }
    return 0;
}

static int next_arrival(pkv_fleet *f, double after, pkv_request_draw *next, pkv_err *e) {
    const int more = pkv_workload_next(f->wl, after, next);
    if (more == -1) return pkv_fail(e, "out of memory");
    if (more == -2) return pkv_fail(e, "workload.arrival: the process cannot advance");
    return more;
}

/* The replicas' roles, the routers' groups, the prefill replicas' links. */
static int setup(pkv_fleet *f, pkv_err *e) {
    const int n = f->n;
    f->role = calloc((size_t)n, sizeof *f->role);
    f->entry.idx = malloc(sizeof(int) * (size_t)n);
    f->decode.idx = malloc(sizeof(int) * (size_t)n);
    f->per_replica = calloc((size_t)n, sizeof *f->per_replica);
    f->next_t = malloc(sizeof *f->next_t * (size_t)n);
    f->now = calloc((size_t)n, sizeof *f->now);
    f->view = calloc((size_t)n, sizeof *f->view);
    f->sent = calloc((size_t)n, sizeof *f->sent);
    f->links = calloc((size_t)n, sizeof *f->links);
    f->hands = calloc((size_t)n, sizeof *f->hands);
    pkv_heap_init(&f->when);
    pkv_heap_init(&f->events);
    if (!f->role || !f->entry.idx || !f->decode.idx || !f->per_replica || !f->next_t || !f->now ||
        !f->view || !f->sent || !f->links || !f->hands)
        return pkv_fail(e, "out of memory");
    const pkv_autoscale *a = &f->spec.autoscale;
    f->scale_first = 0;
    for (int p = 0, i = 0; p < f->spec.n_pools; p++) {
        if (a->on && p == a->pool_index) f->scale_first = i;
        for (int k = 0; k < pkv_pool_slots(&f->spec, p) && i < n; k++)
            f->role[i++] = f->spec.pools[p].role;
    }
    f->entry.router = f->spec.router, f->decode.router = f->spec.decode_router;
    f->count_tokens =
        f->entry.router == PKV_ROUTER_LEAST_TOKENS || f->decode.router == PKV_ROUTER_LEAST_TOKENS;
    if (!(f->state = calloc((size_t)n, sizeof *f->state))) return pkv_fail(e, "out of memory");
    if (a->on) {
        f->up_since = calloc((size_t)n, sizeof *f->up_since);
        f->up_s = calloc((size_t)n, sizeof *f->up_s);
        f->ups = calloc((size_t)n, sizeof *f->ups);
        f->downs = calloc((size_t)n, sizeof *f->downs);
        if (!f->up_since || !f->up_s || !f->ups || !f->downs ||
            pkv_heap_push(&f->events, a->interval_s, PKV_FLEET_SCALE, 0))
            return pkv_fail(e, "out of memory");
        f->n_own++;
        for (int k = a->initial; k < a->max; k++) f->state[f->scale_first + k] = PKV_REP_OFF;
    }
    pkv_fleet_regroup(f);
    if (pkv_fleet_links_init(f, e)) return -1;
    for (int i = f->lo; i < f->hi; i++) {
        f->hands[i] = (pkv_fleet_hand){f, i};
        f->replicas[i]->fleet_ctx = &f->hands[i];
        if (a->on && a->metric == PKV_SCALE_TTFT && i >= f->scale_first &&
            i < f->scale_first + a->max)
            f->replicas[i]->first_token = pkv_fleet_note_ttft;
    }
    if (f->entry.n == 0) return pkv_fail(e, "fleet: no replica takes arrivals");
    if (f->ranks && f->ranks->size > 1 &&
        !(f->sync_buf = malloc(pkv_fleet_sync_block(f) * (size_t)f->ranks->size)))
        return pkv_fail(e, "out of memory");
    return 0;
}

/* A cut leaves requests on their way to a replica (router latency) and waiting at the
 * router (central_queue): each is recorded as arrived and unfinished, as the client that
 * sent it counts it, on the replica it was sent to (a waiting one: on the one the router
 * weighs least loaded). The requests on a KV link stay their prefill replica's. */
static int record_router(pkv_fleet *f, pkv_err *e) {
    pkv_event ev;
    while (pkv_heap_pop(&f->events, &ev) == 0)
        if (ev.kind == PKV_FLEET_DELIVER) {
            const pkv_fleet_transit tr = f->transit[ev.arg];
            pkv_fleet_note_arrived(f, tr.to, tr.d.prompt_len);
            if (pkv_sim_record_waiting(f->replicas[tr.to], &tr.d, tr.t_arrival, e)) return -1;
        }
    for (; f->q_n > 0; f->q_head = (f->q_head + 1) % f->q_cap, f->q_n--) {
        const pkv_request_draw *d = &f->queue[f->q_head];
        const double at = f->queued_at[f->q_head];
        const int i = pkv_fleet_least_loaded(f, &f->entry);
        if (f->routed) f->routed(f->routed_ctx, i, d, at, f->t_now);
        pkv_fleet_note_sent(f, i, d->prompt_len, false);
        if (!pkv_fleet_local(f, i)) continue;
        if (pkv_sim_record_waiting(f->replicas[i], d, at, e)) return -1;
        if (pkv_fleet_file_next(f, i)) return pkv_fail(e, "out of memory");
    }
    return 0;
}

int pkv_fleet_run(pkv_fleet *f, pkv_err *e) {
    if (f->n < 1) return pkv_fail(e, "fleet: no replica");
    if (f->wl->spec.arrival.kind == PKV_ARRIVAL_CLOSED)
        return pkv_fail(e, "fleet: a closed loop has no arrivals to route (open-loop only)");
    f->lo = 0, f->hi = f->n;
    if (f->ranks) pkv_ranks_block(f->n, f->ranks->rank, f->ranks->size, &f->lo, &f->hi);
    if (setup(f, e)) return -1;
    f->t_now = 0, f->next_refresh = 0;
    for (int i = 0; i < f->n; i++) f->next_t[i] = INFINITY;
    for (int i = f->lo; i < f->hi; i++) {
        f->replicas[i]->external = true;
        if (pkv_sim_start(f->replicas[i], e)) return -1;
        if (pkv_fleet_file_next(f, i)) return pkv_fail(e, "out of memory");
    }
    pkv_request_draw next;
    int more = next_arrival(f, 0.0, &next, e);
    if (more < 0) return -1;
    f->arrivals_left = more == 0;
    bool cut = false;  /* a bound or a stop ended the fleet */
    bool over = false; /* ranks: one of this process's replicas ended it; at the refresh */
    const volatile sig_atomic_t *stop = f->replicas[f->lo]->stop; /* every replica's */
    for (;;) {
        if (stop && *stop && !over) { /* a signal: every replica ends as it stands */
            for (int i = f->lo; i < f->hi; i++)
                f->replicas[i]->over = f->replicas[i]->interrupted = true;
            if (!f->ranks || f->ranks->size == 1) {
                cut = true;
                break;
            }
            over = true; /* the others hear of it at the next refresh */
        }
        /* what is left is the autoscaler's own (a decision, cold starts): the run is over,
         * its replica-seconds end with the work */
        if (!over && f->n_own > 0 && !pkv_fleet_work_left(f)) break;
        const pkv_event *top, *way = pkv_heap_top(&f->events);
        while ((top = pkv_heap_top(&f->when)) && top->t != f->next_t[top->arg]) {
            pkv_event stale;
            pkv_heap_pop(&f->when, &stale);
        }
        const double t_arr = more == 0 ? next.t_arrival : INFINITY, t_way = way ? way->t : INFINITY,
                     t_rep = top ? top->t : INFINITY;
        const double t = over ? INFINITY : fmin(t_arr, fmin(t_way, t_rep));
        if (f->spec.view_refresh_s > 0 && t >= f->next_refresh) { /* the view first */
            const double t_refresh = f->next_refresh;
            double t_fleet;
            if (pkv_fleet_sync_view(f, t, over, &t_fleet, &cut, e)) return -1;
            if (cut) break;
            if (!isfinite(t_fleet)) { /* nothing else will happen: the router's queue may go
                                       * to the replicas it now sees idle, at the refresh */
                const size_t waiting = f->q_n;
                if (isfinite(t_refresh) && t_refresh > f->t_now) f->t_now = t_refresh;
                if (f->entry.router == PKV_ROUTER_CENTRAL_QUEUE && drain(f, e)) return -1;
                if (f->q_n == waiting) break;
            }
            continue;
        }
        if (!isfinite(t)) break;
        if (t > f->t_now) f->t_now = t;
        if (t_arr == t) { /* an arrival (first at a tie) */
            const int i = pkv_fleet_choose(f, &f->entry, &next);
            if (i == -2) return pkv_fail(e, "out of memory");
            if (i >= 0 ? send(f, i, &next, next.t_arrival, e)
                       : enqueue(f, &next, next.t_arrival, e))
                return -1;
            if ((more = next_arrival(f, next.t_arrival, &next, e)) < 0) return -1;
            f->arrivals_left = more == 0;
        } else if (t_way == t) { /* something on its way arrives */
            if (fleet_event(f, e)) return -1;
        } else {
            const int who = (int)top->arg;
            pkv_sim *s = f->replicas[who];
            pkv_event mine;
            pkv_heap_pop(&f->when, &mine);
            f->next_t[who] = INFINITY; /* filed again below */
            if (pkv_sim_advance(s, e)) return pkv_fleet_replica_failed(e, who);
            if (pkv_fleet_file_next(f, who) || pkv_fleet_maybe_off(f, who))
                return pkv_fail(e, "out of memory");
            if (s->over) { /* a bound (max_steps, max_time_s) or a stop ends it */
                for (int i = f->lo; i < f->hi; i++) {
                    f->replicas[i]->over = true;
                    f->replicas[i]->bounded |= s->bounded;
                    f->replicas[i]->interrupted |= s->interrupted;
                }
                if (!f->ranks || f->ranks->size == 1) {
                    cut = true;
                    break;
                }
                over = true; /* the others hear of it at the next refresh */
            }
        }
        if (f->entry.router == PKV_ROUTER_CENTRAL_QUEUE && drain(f, e)) return -1;
    }
    for (int i = f->lo; i < f->hi && cut; i++) /* another process's bound or stop */
        f->replicas[i]->over = true;
    if (cut && record_router(f, e)) return -1;
    for (int i = f->lo; i < f->hi; i++)
        if (pkv_sim_end(f->replicas[i], e)) return pkv_fleet_replica_failed(e, i);
    if (f->q_n > 0 && !cut)
        return pkv_fail(e, "fleet: %zu requests still wait at the router at the end", f->q_n);
    return 0;
}
