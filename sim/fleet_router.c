/* The routers of a fleet: one row each (what it weighs a replica by, how it picks one
 * for a request), in the order of PKV_ROUTERS (sim/fleet.h), which names them. */
#include "fleet_parts.h"

#include "pkv_clock.h"

#include <stdlib.h>
#include <string.h>

const char *const pkv_router_names[] = {
#define PKV_ROUTER_NAME(e, name) name,
    PKV_ROUTERS(PKV_ROUTER_NAME)
#undef PKV_ROUTER_NAME
        NULL};

/* What a router weighs a replica by: its requests, its prompt and decode tokens to come,
 * its free KV pages (the more, the lighter). */
typedef enum { BY_REQUESTS, BY_TOKENS, BY_FREE_PAGES } router_weight;

typedef struct router_row {
    router_weight by;
    /* The replica of group g for request d; -1 when none has room now (central_queue),
     * -2 when out of memory. */
    int (*pick)(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d);
} router_row;

static const router_row routers[PKV_ROUTER_COUNT];

/* A replica's load as the group's router weighs it: lower is better. */
static inline int64_t load(const pkv_fleet *f, const pkv_fleet_group *g, int i) {
    const pkv_sim_load l = pkv_fleet_seen(f, i);
    switch (routers[g->router].by) {
    case BY_TOKENS:
        return l.tokens;
    case BY_FREE_PAGES:
        return -(int64_t)l.free_pages;
    default:
        return l.requests;
    }
}

/* The least loaded replica; at a tie the first from where the last such choice left off
 * (ties rotate: a stale view ties many replicas, and the lowest-numbered ones would take
 * them all). */
int pkv_fleet_least_loaded(const pkv_fleet *f, pkv_fleet_group *g) {
    const int start = g->next_rr < g->n ? g->next_rr : 0;
    int best = start;
    int64_t lb = load(f, g, g->idx[start]);
    for (int k = 1, j = start + 1; k < g->n; k++, j++) {
        if (j == g->n) j = 0; /* from start on, round to it (no division per replica) */
        const int64_t lj = load(f, g, g->idx[j]);
        if (lj < lb) best = j, lb = lj;
    }
    g->next_rr = (best + 1) % g->n;
    return g->idx[best];
}

static int pick_least(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    (void)d;
    return pkv_fleet_least_loaded(f, g);
}

static int pick_round_robin(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    (void)f, (void)d;
    const int i = g->idx[g->next_rr];
    g->next_rr = (g->next_rr + 1) % g->n;
    return i;
}

static int pick_random(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    (void)d;
    return g->idx[gsl_rng_uniform_int(f->r_route, (unsigned long)g->n)];
}

/* The lighter of two drawn at random. */
static int pick_power_of_two(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    (void)d;
    const int a = g->idx[gsl_rng_uniform_int(f->r_route, (unsigned long)g->n)];
    const int b = g->idx[gsl_rng_uniform_int(f->r_route, (unsigned long)g->n)];
    return load(f, g, b) < load(f, g, a) ? b : a;
}

/* central_queue: the first with room, from the replica after the last one served. */
static int pick_central_queue(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    (void)d;
    for (int k = 0; k < g->n; k++) {
        const int j = (g->next_rr + k) % g->n, i = g->idx[j];
        if (pkv_fleet_seen(f, i).requests < f->replicas[i]->cfg->max_active) {
            g->next_rr = (j + 1) % g->n;
            return i;
        }
    }
    return -1;
}

/* prefix_affinity: of the replicas within affinity_cap requests of the least loaded,
 * the one holding the longest cached prefix of d's prompt; the fewer requests, then
 * the lower index, at a tie. */
static int pick_prefix_affinity(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    const int64_t cap =
        f->spec.affinity_cap + pkv_fleet_seen(f, pkv_fleet_least_loaded(f, g)).requests;
    int best = -1;
    int64_t best_req = 0;
    int32_t best_hit = -1;
    for (int k = 0; k < g->n; k++) {
        const int i = g->idx[k];
        const int64_t req = pkv_fleet_seen(f, i).requests;
        if (req > cap) continue;
        const int32_t hit = pkv_sim_cached_tokens(f->replicas[i], d);
        if (hit > best_hit || (hit == best_hit && req < best_req))
            best = i, best_hit = hit, best_req = req;
    }
    return best;
}

/* session_affinity: a session's turns go where its first went (the least loaded then);
 * a request of no session to the least loaded. */
static int pick_session_affinity(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    if (d->session < 0) return pkv_fleet_least_loaded(f, g);
    const size_t k = (size_t)d->session;
    if (k >= g->n_session_at) {
        size_t cap = g->n_session_at ? 2 * g->n_session_at : 1024;
        while (cap <= k) cap *= 2;
        int32_t *a = realloc(g->session_at, cap * sizeof *a);
        if (!a) return -2;
        memset(a + g->n_session_at, 0, (cap - g->n_session_at) * sizeof *a);
        g->session_at = a, g->n_session_at = cap;
    }
    if (!g->session_at[k] || f->state[g->session_at[k] - 1] != PKV_REP_ACTIVE)
        g->session_at[k] = pkv_fleet_least_loaded(f, g) + 1; /* new, or its replica left */
    return g->session_at[k] - 1;
}

static const router_row routers[PKV_ROUTER_COUNT] = {
    [PKV_ROUTER_ROUND_ROBIN] = {BY_REQUESTS, pick_round_robin},
    [PKV_ROUTER_RANDOM] = {BY_REQUESTS, pick_random},
    [PKV_ROUTER_LEAST_REQUESTS] = {BY_REQUESTS, pick_least},
    [PKV_ROUTER_LEAST_TOKENS] = {BY_TOKENS, pick_least},
    [PKV_ROUTER_LEAST_KV] = {BY_FREE_PAGES, pick_least},
    [PKV_ROUTER_POWER_OF_TWO] = {BY_REQUESTS, pick_power_of_two},
    [PKV_ROUTER_CENTRAL_QUEUE] = {BY_REQUESTS, pick_central_queue},
    [PKV_ROUTER_PREFIX_AFFINITY] = {BY_REQUESTS, pick_prefix_affinity},
    [PKV_ROUTER_SESSION_AFFINITY] = {BY_REQUESTS, pick_session_affinity},
};

int pkv_fleet_choose(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    const double t0 = pkv_clock_now();
    const int i = routers[g->router].pick(f, g, d);
    f->route_s += pkv_clock_now() - t0;
    return i;
}
