#include "fleet.h"

#include "pkv_clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const pkv_router_names[] = {
#define PKV_ROUTER_NAME(e, name) name,
    PKV_ROUTERS(PKV_ROUTER_NAME)
#undef PKV_ROUTER_NAME
        NULL};

/* A replica's load as the router weighs it: lower is better. */
static double load(const pkv_fleet *f, int i) {
    const pkv_sim_load l = pkv_sim_load_of(f->replicas[i], f->router == PKV_ROUTER_LEAST_TOKENS);
    switch (f->router) {
    case PKV_ROUTER_LEAST_TOKENS:
        return (double)l.tokens;
    case PKV_ROUTER_LEAST_KV:
        return -(double)l.free_pages;
    default:
        return (double)l.requests;
    }
}

/* The replica for the next request; -1 (central_queue) when none has room now. */
static int choose_now(pkv_fleet *f) {
    switch (f->router) {
    case PKV_ROUTER_ROUND_ROBIN: {
        const int i = f->next_rr;
        f->next_rr = (f->next_rr + 1) % f->n;
        return i;
    }
    case PKV_ROUTER_RANDOM:
        return (int)gsl_rng_uniform_int(f->r_route, (unsigned long)f->n);
    case PKV_ROUTER_POWER_OF_TWO: {
        const int a = (int)gsl_rng_uniform_int(f->r_route, (unsigned long)f->n);
        const int b = (int)gsl_rng_uniform_int(f->r_route, (unsigned long)f->n);
        return load(f, b) < load(f, a) ? b : a;
    }
    case PKV_ROUTER_CENTRAL_QUEUE:
        for (int k = 0; k < f->n; k++) { /* from the replica after the last one served */
            const int i = (f->next_rr + k) % f->n;
            if (pkv_sim_load_of(f->replicas[i], false).has_slot) {
                f->next_rr = (i + 1) % f->n;
                return i;
            }
        }
        return -1;
    default: { /* the least loaded; the lowest index at a tie */
        int best = 0;
        double lb = load(f, 0);
        for (int i = 1; i < f->n; i++) {
            const double li = load(f, i);
            if (li < lb) best = i, lb = li;
        }
        return best;
    }
    }
}

static int choose(pkv_fleet *f) {
    const double t0 = pkv_clock_now();
    const int i = choose_now(f);
    f->route_s += pkv_clock_now() - t0;
    return i;
}

/* File replica i's next event in the heap (where it moved). */
static int file_next(pkv_fleet *f, int i) {
    const double t = pkv_sim_next_t(f->replicas[i]);
    if (t == f->next_t[i]) return 0;
    f->next_t[i] = t;
    return isfinite(t) ? pkv_heap_push(&f->when, t, 0, i) : 0;
}

static int send(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival, pkv_err *e) {
    f->per_replica[i]++;
    if (f->routed) f->routed(f->routed_ctx, i, d, t_arrival, f->t_now);
    if (pkv_sim_inject(f->replicas[i], d, t_arrival, f->t_now, e) == 0)
        return file_next(f, i) ? pkv_fail(e, "out of memory") : 0;
    char msg[sizeof e->msg];
    memcpy(msg, e->msg, sizeof msg);
    return pkv_fail(e, "replica %d: %.*s", i, (int)sizeof msg - 16, msg);
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
        const int i = choose(f);
        if (i < 0) return 0;
        const pkv_request_draw d = f->queue[f->q_head];
        const double at = f->queued_at[f->q_head];
        f->q_head = (f->q_head + 1) % f->q_cap, f->q_n--;
        if (send(f, i, &d, at, e)) return -1;
    }
    return 0;
}

int pkv_fleet_run(pkv_fleet *f, pkv_err *e) {
    if (f->n < 1) return pkv_fail(e, "fleet: no replica");
    if (f->wl->spec.arrival.kind == PKV_ARRIVAL_CLOSED)
        return pkv_fail(e, "fleet: a closed loop has no arrivals to route (open-loop only)");
    f->per_replica = calloc((size_t)f->n, sizeof *f->per_replica);
    f->next_t = malloc(sizeof *f->next_t * (size_t)f->n);
    pkv_heap_init(&f->when);
    if (!f->per_replica || !f->next_t) return pkv_fail(e, "out of memory");
    f->t_now = 0;
    for (int i = 0; i < f->n; i++) {
        f->replicas[i]->external = true;
        f->next_t[i] = INFINITY;
        if (pkv_sim_start(f->replicas[i], e)) return -1;
        if (file_next(f, i)) return pkv_fail(e, "out of memory");
    }
    pkv_request_draw next;
    int more = pkv_workload_next(f->wl, 0.0, &next);
    if (more == -1) return pkv_fail(e, "out of memory");
    if (more == -2) return pkv_fail(e, "workload.arrival: the process cannot advance");
    for (;;) {
        const pkv_event *top;
        while ((top = pkv_heap_top(&f->when)) && top->t != f->next_t[top->arg]) {
            pkv_event stale;
            pkv_heap_pop(&f->when, &stale);
        }
        int who = -1;
        double t = more == 0 ? next.t_arrival : INFINITY;
        if (top && top->t < t) t = top->t, who = (int)top->arg;
        if (!isfinite(t)) break;
        if (t > f->t_now) f->t_now = t;
        if (who < 0) { /* an arrival (first at a tie) */
            const int i = choose(f);
            if (i >= 0 ? send(f, i, &next, next.t_arrival, e)
                       : enqueue(f, &next, next.t_arrival, e))
                return -1;
            more = pkv_workload_next(f->wl, next.t_arrival, &next);
            if (more == -1) return pkv_fail(e, "out of memory");
            if (more == -2) return pkv_fail(e, "workload.arrival: the process cannot advance");
        } else {
            pkv_sim *s = f->replicas[who];
            pkv_event mine;
            pkv_heap_pop(&f->when, &mine);
            f->next_t[who] = INFINITY; /* filed again below */
            if (pkv_sim_advance(s, e)) return -1;
            if (file_next(f, who)) return pkv_fail(e, "out of memory");
            if (s->over) { /* a bound (max_steps, max_time_s) or a stop ends the fleet */
                for (int i = 0; i < f->n; i++) {
                    f->replicas[i]->over = true;
                    f->replicas[i]->bounded |= s->bounded;
                    f->replicas[i]->interrupted |= s->interrupted;
                }
                break;
            }
        }
        if (f->router == PKV_ROUTER_CENTRAL_QUEUE && drain(f, e)) return -1;
    }
    for (int i = 0; i < f->n; i++)
        if (pkv_sim_end(f->replicas[i], e)) {
            char msg[sizeof e->msg];
            memcpy(msg, e->msg, sizeof msg);
            return pkv_fail(e, "replica %d: %.*s", i, (int)sizeof msg - 16, msg);
        }
    if (f->q_n > 0)
        return pkv_fail(e, "fleet: %zu requests still wait at the router at the end", f->q_n);
    return 0;
}

void pkv_fleet_free(pkv_fleet *f) {
    free(f->queue), free(f->queued_at), free(f->per_replica), free(f->next_t);
    pkv_heap_free(&f->when);
    f->queue = NULL, f->queued_at = NULL, f->per_replica = NULL, f->next_t = NULL;
    f->q_n = f->q_cap = f->q_head = 0;
}
