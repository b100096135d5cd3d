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

/* Replica i as the router sees it: live (with the requests on their way to it), or as
 * of the view's last refresh with what was sent since. */
static pkv_sim_load seen(const pkv_fleet *f, int i) {
    if (f->spec.view_refresh_s > 0) return f->view[i];
    pkv_sim_load l = pkv_sim_load_of(f->replicas[i], f->spec.router == PKV_ROUTER_LEAST_TOKENS);
    l.requests += f->sent[i].requests, l.tokens += f->sent[i].tokens;
    return l;
}

static void refresh_view(pkv_fleet *f) {
    if (f->spec.view_refresh_s <= 0 || f->t_now < f->view_t + f->spec.view_refresh_s) return;
    for (int i = 0; i < f->n; i++) {
        f->view[i] = pkv_sim_load_of(f->replicas[i], f->spec.router == PKV_ROUTER_LEAST_TOKENS);
        f->view[i].requests += f->sent[i].requests, f->view[i].tokens += f->sent[i].tokens;
    }
    f->view_t = f->t_now;
}

/* A replica's load as the router weighs it: lower is better. */
static double load(const pkv_fleet *f, int i) {
    const pkv_sim_load l = seen(f, i);
    switch (f->spec.router) {
    case PKV_ROUTER_LEAST_TOKENS:
        return (double)l.tokens;
    case PKV_ROUTER_LEAST_KV:
        return -(double)l.free_pages;
    default:
        return (double)l.requests;
    }
}

static int least_loaded(const pkv_fleet *f) { /* the lowest index at a tie */
    int best = 0;
    double lb = load(f, 0);
    for (int i = 1; i < f->n; i++) {
        const double li = load(f, i);
        if (li < lb) best = i, lb = li;
    }
    return best;
}

/* prefix_affinity: of the replicas within affinity_cap requests of the least loaded,
 * the one holding the longest cached prefix of d's prompt; the fewer requests, then
 * the lower index, at a tie. */
static int affinity(const pkv_fleet *f, const pkv_request_draw *d) {
    const int64_t cap = f->spec.affinity_cap + seen(f, least_loaded(f)).requests;
    int best = -1;
    int64_t best_req = 0;
    int32_t best_hit = -1;
    for (int i = 0; i < f->n; i++) {
        const int64_t req = seen(f, i).requests;
        if (req > cap) continue;
        const int32_t hit = pkv_sim_cached_tokens(f->replicas[i], d);
        if (hit > best_hit || (hit == best_hit && req < best_req))
            best = i, best_hit = hit, best_req = req;
    }
    return best;
}

/* session_affinity: a session's turns go where its first went (the least loaded then);
 * a request of no session to the least loaded. Returns -1 when out of memory. */
static int session_replica(pkv_fleet *f, const pkv_request_draw *d) {
    if (d->session < 0) return least_loaded(f);
    const size_t k = (size_t)d->session;
    if (k >= f->n_session_at) {
        size_t cap = f->n_session_at ? 2 * f->n_session_at : 1024;
        while (cap <= k) cap *= 2;
        int32_t *a = realloc(f->session_at, cap * sizeof *a);
        if (!a) return -1;
        memset(a + f->n_session_at, 0, (cap - f->n_session_at) * sizeof *a);
        f->session_at = a, f->n_session_at = cap;
    }
    if (!f->session_at[k]) f->session_at[k] = least_loaded(f) + 1;
    return f->session_at[k] - 1;
}

/* The replica for request d; -1 (central_queue) when none has room now, -2 when out of
 * memory. */
static int choose_now(pkv_fleet *f, const pkv_request_draw *d) {
    refresh_view(f);
    switch (f->spec.router) {
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
            if (seen(f, i).requests < f->replicas[i]->cfg->max_active) {
                f->next_rr = (i + 1) % f->n;
                return i;
            }
        }
        return -1;
    case PKV_ROUTER_PREFIX_AFFINITY:
        return affinity(f, d);
    case PKV_ROUTER_SESSION_AFFINITY: {
        const int i = session_replica(f, d);
        return i < 0 ? -2 : i;
    }
    default:
        return least_loaded(f);
    }
}

static int choose(pkv_fleet *f, const pkv_request_draw *d) {
    const double t0 = pkv_clock_now();
    const int i = choose_now(f, d);
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

static int replica_failed(pkv_err *e, int i) {
    char msg[sizeof e->msg];
    memcpy(msg, e->msg, sizeof msg);
    return pkv_fail(e, "replica %d: %.*s", i, (int)sizeof msg - 16, msg);
}

/* Request d reaches replica i now. */
static int deliver(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival, pkv_err *e) {
    if (pkv_sim_inject(f->replicas[i], d, t_arrival, f->t_now, e)) return replica_failed(e, i);
    return file_next(f, i) ? pkv_fail(e, "out of memory") : 0;
}

/* The router sends d to replica i: it arrives after the decision's latency. */
static int send(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival, pkv_err *e) {
    f->per_replica[i]++;
    if (f->routed) f->routed(f->routed_ctx, i, d, t_arrival, f->t_now);
    if (f->spec.view_refresh_s > 0) f->view[i].requests++, f->view[i].tokens += d->prompt_len;
    if (f->spec.latency_s <= 0) return deliver(f, i, d, t_arrival, e);
    int64_t k;
    if (f->n_free_transit) {
        k = f->free_transit[--f->n_free_transit];
    } else {
        if (f->n_transit == f->cap_transit) {
            const size_t cap = f->cap_transit ? 2 * f->cap_transit : 256;
            pkv_fleet_transit *a = realloc(f->transit, cap * sizeof *a);
            int64_t *fr = a ? realloc(f->free_transit, cap * sizeof *fr) : NULL;
            if (a) f->transit = a;
            if (!fr) return pkv_fail(e, "out of memory (requests on their way)");
            f->free_transit = fr, f->cap_transit = cap;
        }
        k = (int64_t)f->n_transit++;
    }
    f->transit[k] = (pkv_fleet_transit){*d, t_arrival, i};
    f->sent[i].requests++, f->sent[i].tokens += d->prompt_len;
    return pkv_heap_push(&f->arriving, f->t_now + f->spec.latency_s, 0, k)
               ? pkv_fail(e, "out of memory")
               : 0;
}

/* The earliest request on its way reaches its replica. */
static int arrive(pkv_fleet *f, pkv_err *e) {
    pkv_event ev;
    pkv_heap_pop(&f->arriving, &ev);
    const pkv_fleet_transit tr = f->transit[ev.arg];
    f->free_transit[f->n_free_transit++] = ev.arg;
    f->sent[tr.to].requests--, f->sent[tr.to].tokens -= tr.d.prompt_len;
    return deliver(f, tr.to, &tr.d, tr.t_arrival, e);
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
        const int i = choose(f, &d);
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

int pkv_fleet_run(pkv_fleet *f, pkv_err *e) {
    if (f->n < 1) return pkv_fail(e, "fleet: no replica");
    if (f->wl->spec.arrival.kind == PKV_ARRIVAL_CLOSED)
        return pkv_fail(e, "fleet: a closed loop has no arrivals to route (open-loop only)");
    f->per_replica = calloc((size_t)f->n, sizeof *f->per_replica);
    f->next_t = malloc(sizeof *f->next_t * (size_t)f->n);
    f->view = calloc((size_t)f->n, sizeof *f->view);
    f->sent = calloc((size_t)f->n, sizeof *f->sent);
    pkv_heap_init(&f->when);
    pkv_heap_init(&f->arriving);
    if (!f->per_replica || !f->next_t || !f->view || !f->sent) return pkv_fail(e, "out of memory");
    f->t_now = 0, f->view_t = -INFINITY;
    for (int i = 0; i < f->n; i++) {
        f->replicas[i]->external = true;
        f->next_t[i] = INFINITY;
        if (pkv_sim_start(f->replicas[i], e)) return -1;
        if (file_next(f, i)) return pkv_fail(e, "out of memory");
    }
    pkv_request_draw next;
    int more = next_arrival(f, 0.0, &next, e);
    if (more < 0) return -1;
    bool cut = false; /* a bound or a stop ended the fleet */
    for (;;) {
        const pkv_event *top, *way = pkv_heap_top(&f->arriving);
        while ((top = pkv_heap_top(&f->when)) && top->t != f->next_t[top->arg]) {
            pkv_event stale;
            pkv_heap_pop(&f->when, &stale);
        }
        const double t_arr = more == 0 ? next.t_arrival : INFINITY, t_way = way ? way->t : INFINITY,
                     t_rep = top ? top->t : INFINITY;
        const double t = fmin(t_arr, fmin(t_way, t_rep));
        if (!isfinite(t)) break;
        if (t > f->t_now) f->t_now = t;
        if (t_arr == t) { /* an arrival (first at a tie) */
            const int i = choose(f, &next);
            if (i == -2) return pkv_fail(e, "out of memory");
            if (i >= 0 ? send(f, i, &next, next.t_arrival, e)
                       : enqueue(f, &next, next.t_arrival, e))
                return -1;
            if ((more = next_arrival(f, next.t_arrival, &next, e)) < 0) return -1;
        } else if (t_way == t) { /* a request reaches its replica */
            if (arrive(f, e)) return -1;
        } else {
            const int who = (int)top->arg;
            pkv_sim *s = f->replicas[who];
            pkv_event mine;
            pkv_heap_pop(&f->when, &mine);
            f->next_t[who] = INFINITY; /* filed again below */
            if (pkv_sim_advance(s, e)) return -1;
            if (file_next(f, who)) return pkv_fail(e, "out of memory");
            if ((cut = s->over)) { /* a bound (max_steps, max_time_s) or a stop ends it */
                for (int i = 0; i < f->n; i++) {
                    f->replicas[i]->over = true;
                    f->replicas[i]->bounded |= s->bounded;
                    f->replicas[i]->interrupted |= s->interrupted;
                }
                break;
            }
        }
        if (f->spec.router == PKV_ROUTER_CENTRAL_QUEUE && drain(f, e)) return -1;
    }
    for (int i = 0; i < f->n; i++)
        if (pkv_sim_end(f->replicas[i], e)) return replica_failed(e, i);
    if (f->q_n > 0 && !cut)
        return pkv_fail(e, "fleet: %zu requests still wait at the router at the end", f->q_n);
    return 0;
}

void pkv_fleet_free(pkv_fleet *f) {
    free(f->queue), free(f->queued_at), free(f->per_replica), free(f->next_t);
    free(f->view), free(f->sent), free(f->transit), free(f->free_transit), free(f->session_at);
    pkv_heap_free(&f->when);
    pkv_heap_free(&f->arriving);
    f->queue = NULL, f->queued_at = NULL, f->per_replica = NULL, f->next_t = NULL;
    f->view = f->sent = NULL, f->transit = NULL, f->free_transit = NULL, f->session_at = NULL;
    f->q_n = f->q_cap = f->q_head = 0;
    f->n_transit = f->cap_transit = f->n_free_transit = f->n_session_at = 0;
}
