#include "fleet.h"

#include "pkv_clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

const char *const pkv_router_names[] = {
#define PKV_ROUTER_NAME(e, name) name,
    PKV_ROUTERS(PKV_ROUTER_NAME)
#undef PKV_ROUTER_NAME
        NULL};

/* The fleet's own events (pkv_event.kind). */
enum { EV_DELIVER = 0, EV_FLOW, EV_LINK, EV_SCALE, EV_READY };

typedef struct pkv_fleet_hand {
    pkv_fleet *f;
    int i;
} pkv_fleet_hand;

/* Replica i runs in this process (over ranks, a block of them; else every one). */
static bool local(const pkv_fleet *f, int i) {
    return i >= f->lo && i < f->hi;
}

/* Replica i now, with the requests on their way to it (the router knows those): from
 * one array, not from each replica's own state (at 1,000 replicas a scan over those
 * waited on their memory). */
static pkv_sim_load live(const pkv_fleet *f, int i) {
    pkv_sim_load l = f->now[i];
    l.requests += f->sent[i].requests, l.tokens += f->sent[i].tokens;
    return l;
}

/* Replica i as the router sees it: live, or as of the view's last refresh with what
 * was sent since. */
static pkv_sim_load seen(const pkv_fleet *f, int i) {
    return f->spec.view_refresh_s > 0 ? f->view[i] : live(f, i);
}

/* ranks: what each process gives at a refresh: its next event time, whether it is over
 * and why (OVER_* bits), and its replicas' loads. */
enum { OVER = 1, OVER_BOUND = 2, OVER_STOP = 4 };
typedef struct sync_head {
    double t_next;
    int64_t over; /* 0, or OVER and why */
} sync_head;

static size_t sync_block(const pkv_fleet *f) {
    return sizeof(sync_head) +
           sizeof(pkv_sim_load) * (size_t)((f->n + f->ranks->size - 1) / f->ranks->size);
}

/* The first multiple of w strictly after t. (floor(t / w) + 1) * w rounds back to t
 * itself for some t (0.58 s with w 20 ms): the refresh would repeat at one instant for
 * ever. A period below the clock's resolution at t refreshes at the next instant. */
static double next_multiple(double t, double w) {
    const double k = floor(t / w) + 1;
    double next = k * w;
    if (!(next > t)) next = (k + 1) * w;
    return next > t ? next : nextafter(t, INFINITY);
}

/* The view's refresh, before anything at or after f->next_refresh happens: every
 * replica as all events before it left them. One process: its own replicas, and t_mine
 * (its next event) is the fleet's. Ranks: each gives its replicas' loads, its next event
 * time and whether it is over; *t_next is then the fleet's next event, *over whether any
 * process is over (a bound or a stop there marks this process's replicas so). The next
 * refresh is the first multiple of view_refresh_s after *t_next (none between holds an
 * event). */
static int sync_view(pkv_fleet *f, double t_mine, bool over_mine, double *t_next, bool *over,
                     pkv_err *e) {
    *t_next = t_mine, *over = over_mine;
    if (!f->ranks || f->ranks->size == 1) {
        for (int i = 0; i < f->n; i++) f->view[i] = live(f, i);
    } else {
        const size_t b = sync_block(f);
        char *all = f->sync_buf, *mine = all + b * (size_t)f->ranks->rank;
        const pkv_sim *s = f->replicas[f->lo]; /* an end marks every replica of the process */
        const sync_head h = {t_mine, over_mine ? OVER | (s->bounded ? OVER_BOUND : 0) |
                                                     (s->interrupted ? OVER_STOP : 0)
                                               : 0};
        memcpy(mine, &h, sizeof h);
        for (int i = f->lo; i < f->hi; i++) {
            const pkv_sim_load l = live(f, i);
            memcpy(mine + sizeof h + sizeof l * (size_t)(i - f->lo), &l, sizeof l);
        }
        if (f->ranks->allgather(f->ranks->ctx, mine, b, all))
            return pkv_fail(e, "fleet: the ranks' exchange of the view failed");
        for (int r = 0; r < f->ranks->size; r++) {
            int lo, hi;
            pkv_ranks_block(f->n, r, f->ranks->size, &lo, &hi);
            sync_head o;
            memcpy(&o, all + b * (size_t)r, sizeof o);
            *t_next = fmin(*t_next, o.t_next), *over |= o.over != 0;
            for (int i = f->lo; i < f->hi && o.over; i++) { /* why another process ended */
                f->replicas[i]->bounded |= (o.over & OVER_BOUND) != 0;
                f->replicas[i]->interrupted |= (o.over & OVER_STOP) != 0;
            }
            memcpy(f->view + lo, all + b * (size_t)r + sizeof o,
                   sizeof *f->view * (size_t)(hi - lo));
        }
    }
    f->next_refresh = isfinite(*t_next) ? next_multiple(*t_next, f->spec.view_refresh_s) : INFINITY;
    return 0;
}

/* The router sent replica i a request of `prompt` tokens: a stale view counts it at
 * once; one on its way (on_way) counts until it arrives. */
static void note_sent(pkv_fleet *f, int i, int32_t prompt, bool on_way) {
    f->per_replica[i]++;
    if (f->spec.view_refresh_s > 0) f->view[i].requests++, f->view[i].tokens += prompt;
    if (on_way && local(f, i)) f->sent[i].requests++, f->sent[i].tokens += prompt;
}

static void note_arrived(pkv_fleet *f, int i, int32_t prompt) {
    f->sent[i].requests--, f->sent[i].tokens -= prompt;
}

/* A replica's load as the router weighs it: lower is better. */
static inline int64_t load(const pkv_fleet *f, const pkv_fleet_group *g, int i) {
    const pkv_sim_load l = seen(f, i);
    switch (g->router) {
    case PKV_ROUTER_LEAST_TOKENS:
        return l.tokens;
    case PKV_ROUTER_LEAST_KV:
        return -(int64_t)l.free_pages;
    default:
        return l.requests;
    }
}

/* The least loaded replica; at a tie the first from where the last such choice left off
 * (ties rotate: a stale view ties many replicas, and the lowest-numbered ones would take
 * them all). */
static int least_loaded(const pkv_fleet *f, pkv_fleet_group *g) {
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

/* prefix_affinity: of the replicas within affinity_cap requests of the least loaded,
 * the one holding the longest cached prefix of d's prompt; the fewer requests, then
 * the lower index, at a tie. */
static int affinity(const pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    const int64_t cap = f->spec.affinity_cap + seen(f, least_loaded(f, g)).requests;
    int best = -1;
    int64_t best_req = 0;
    int32_t best_hit = -1;
    for (int k = 0; k < g->n; k++) {
        const int i = g->idx[k];
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
static int session_replica(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    if (d->session < 0) return least_loaded(f, g);
    const size_t k = (size_t)d->session;
    if (k >= g->n_session_at) {
        size_t cap = g->n_session_at ? 2 * g->n_session_at : 1024;
        while (cap <= k) cap *= 2;
        int32_t *a = realloc(g->session_at, cap * sizeof *a);
        if (!a) return -1;
        memset(a + g->n_session_at, 0, (cap - g->n_session_at) * sizeof *a);
        g->session_at = a, g->n_session_at = cap;
    }
    if (!g->session_at[k] || f->state[g->session_at[k] - 1] != PKV_REP_ACTIVE)
        g->session_at[k] = least_loaded(f, g) + 1; /* new, or its replica left */
    return g->session_at[k] - 1;
}

/* The replica of group g for request d; -1 (central_queue) when none has room now, -2
 * when out of memory. */
static int choose_now(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    switch (g->router) {
    case PKV_ROUTER_ROUND_ROBIN: {
        const int i = g->idx[g->next_rr];
        g->next_rr = (g->next_rr + 1) % g->n;
        return i;
    }
    case PKV_ROUTER_RANDOM:
        return g->idx[gsl_rng_uniform_int(f->r_route, (unsigned long)g->n)];
    case PKV_ROUTER_POWER_OF_TWO: {
        const int a = g->idx[gsl_rng_uniform_int(f->r_route, (unsigned long)g->n)];
        const int b = g->idx[gsl_rng_uniform_int(f->r_route, (unsigned long)g->n)];
        return load(f, g, b) < load(f, g, a) ? b : a;
    }
    case PKV_ROUTER_CENTRAL_QUEUE:
        for (int k = 0; k < g->n; k++) { /* from the replica after the last one served */
            const int j = (g->next_rr + k) % g->n, i = g->idx[j];
            if (seen(f, i).requests < f->replicas[i]->cfg->max_active) {
                g->next_rr = (j + 1) % g->n;
                return i;
            }
        }
        return -1;
    case PKV_ROUTER_PREFIX_AFFINITY:
        return affinity(f, g, d);
    case PKV_ROUTER_SESSION_AFFINITY: {
        const int i = session_replica(f, g, d);
        return i < 0 ? -2 : i;
    }
    default:
        return least_loaded(f, g);
    }
}

static int choose(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d) {
    const double t0 = pkv_clock_now();
    const int i = choose_now(f, g, d);
    f->route_s += pkv_clock_now() - t0;
    return i;
}

/* File replica i's next event in the heap (where it moved), and the router's picture of
 * it: every change to a replica (its events, an arrival, a release) ends here. */
static int file_next(pkv_fleet *f, int i) {
    f->now[i] = pkv_sim_load_of(f->replicas[i], f->count_tokens);
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

/* A slot for something on its way; -1 when out of memory. */
static int64_t transit_slot(pkv_fleet *f) {
    if (f->n_free_transit) return f->free_transit[--f->n_free_transit];
    if (f->n_transit == f->cap_transit) {
        const size_t cap = f->cap_transit ? 2 * f->cap_transit : 256;
        pkv_fleet_transit *a = realloc(f->transit, cap * sizeof *a);
        int64_t *fr = a ? realloc(f->free_transit, cap * sizeof *fr) : NULL;
        if (a) f->transit = a;
        if (!fr) return -1;
        f->free_transit = fr, f->cap_transit = cap;
    }
    return (int64_t)f->n_transit++;
}

/* Request d reaches replica i now (prefilled: with its KV, as its prefill replica left
 * it). */
static int deliver(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival,
                   const pkv_request_rec *prefilled, pkv_err *e) {
    if (pkv_sim_inject(f->replicas[i], d, t_arrival, f->t_now, prefilled, e))
        return replica_failed(e, i);
    return file_next(f, i) ? pkv_fail(e, "out of memory") : 0;
}

/* The router sends d to replica i: it arrives after the decision's latency (over ranks,
 * where i runs; the others only count it). */
static int send(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival, pkv_err *e) {
    if (f->routed) f->routed(f->routed_ctx, i, d, t_arrival, f->t_now);
    note_sent(f, i, d->prompt_len, f->spec.latency_s > 0);
    if (!local(f, i)) return 0;
    if (f->spec.latency_s <= 0) return deliver(f, i, d, t_arrival, NULL, e);
    const int64_t k = transit_slot(f);
    if (k < 0) return pkv_fail(e, "out of memory (requests on their way)");
    f->transit[k] = (pkv_fleet_transit){.d = *d, .t_arrival = t_arrival, .to = i, .from = -1};
    return pkv_heap_push(&f->events, f->t_now + f->spec.latency_s, EV_DELIVER, k)
               ? pkv_fail(e, "out of memory")
               : 0;
}

static int maybe_off(pkv_fleet *f, int i);

/* ---- KV transfers (prefill/decode disaggregation) -------------------------------- */
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
    return pkv_heap_push(&f->events, L->t_tick, EV_LINK, i);
}

/* Transfer k takes a stream of its link now: its fixed cost, then its bytes. */
static int transfer_start(pkv_fleet *f, int64_t k) {
    pkv_fleet_transit *x = &f->transit[k];
    pkv_fleet_link *L = &f->links[x->from];
    x->t_start = f->t_now;
    L->on++, L->transfers++;
    if (L->on > L->most_on) L->most_on = L->on;
    return pkv_heap_push(&f->events, f->t_now + L->fixed_s, EV_FLOW, k);
}

/* A prefill replica's request is prefilled (its first token sampled): the decode
 * router picks its decode replica, and its KV goes over the prefill replica's link. */
static int handoff(void *ctx, pkv_sim *s, int64_t slot, pkv_err *e) {
    pkv_fleet *f = ((pkv_fleet_hand *)ctx)->f;
    const int from = ((pkv_fleet_hand *)ctx)->i;
    const pkv_sim_request *r = &s->req[slot];
    const pkv_request_draw d = pkv_sim_draw_of(r);
    const int to = choose(f, &f->decode, &d);
    const int64_t k = transit_slot(f);
    if (to < 0 || k < 0) return pkv_fail(e, "out of memory (KV transfers)");
    note_sent(f, to, d.prompt_len, true);
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
    note_arrived(f, x.to, x.d.prompt_len);
    if (pkv_sim_release(p, x.slot, f->t_now, e)) return replica_failed(e, x.from);
    if (file_next(f, x.from)) return pkv_fail(e, "out of memory");
    pkv_fleet_link *L = &f->links[x.from];
    L->on--;
    if (L->wait_head >= 0) { /* the next waiting takes the stream */
        const int64_t w = L->wait_head;
        if ((L->wait_head = f->transit[w].next) < 0) L->wait_tail = -1;
        if (transfer_start(f, w)) return pkv_fail(e, "out of memory");
    }
    if (maybe_off(f, x.from)) return pkv_fail(e, "out of memory");
    return deliver(f, x.to, &x.d, x.t_arrival, &rec, e);
}

/* ---- autoscaling ------------------------------------------------------------------ */
/* The routers' groups: the active replicas by role. */
static void regroup(pkv_fleet *f) {
    f->entry.n = f->decode.n = 0;
    for (int i = 0; i < f->n; i++)
        if (f->state[i] == PKV_REP_ACTIVE) {
            pkv_fleet_group *g = f->role[i] == PKV_ROLE_DECODE ? &f->decode : &f->entry;
            g->idx[g->n++] = i;
        }
    if (f->entry.n) f->entry.next_rr %= f->entry.n;
    if (f->decode.n) f->decode.next_rr %= f->decode.n;
}

static int scale_log(pkv_fleet *f, int event, int replica, double metric, int desired) {
    if (f->n_scale == f->cap_scale) {
        const size_t cap = f->cap_scale ? 2 * f->cap_scale : 256;
        pkv_scale_rec *a = realloc(f->scale, cap * sizeof *a);
        if (!a) return -1;
        f->scale = a, f->cap_scale = cap;
    }
    const pkv_autoscale *a = &f->spec.autoscale;
    uint32_t active = 0, starting = 0;
    for (int i = f->scale_first; i < f->scale_first + a->max; i++)
        active += f->state[i] == PKV_REP_ACTIVE, starting += f->state[i] == PKV_REP_STARTING;
    f->scale[f->n_scale++] = (pkv_scale_rec){f->t_now, (uint8_t)event, replica,          active,
                                             starting, metric,         (uint32_t)desired};
    return 0;
}

/* A draining replica with nothing left in it (no request, none on its way, no KV
 * transfer) leaves. */
static int maybe_off(pkv_fleet *f, int i) {
    if (f->state[i] != PKV_REP_DRAINING) return 0;
    const pkv_sim *s = f->replicas[i];
    const pkv_fleet_link *L = &f->links[i];
    if (pkv_sim_load_of(s, false).requests || f->sent[i].requests || s->busy ||
        (f->role[i] == PKV_ROLE_PREFILL && (L->on || L->wait_head >= 0)))
        return 0;
    f->state[i] = PKV_REP_OFF;
    f->up_s[i] += f->t_now - f->up_since[i];
    return scale_log(f, PKV_SCALE_OFF, i, NAN, 0);
}

/* Something still to happen besides the autoscaler's decisions. */
static bool work_left(const pkv_fleet *f) {
    if (f->arrivals_left || f->events.n > f->n_own || f->q_n > 0) return true;
    for (int i = 0; i < f->n; i++)
        if (isfinite(f->next_t[i])) return true;
    return false;
}

/* A first token on a replica of the scaled pool (metric ttft). */
static int note_ttft(void *ctx, double t, double ttft) {
    pkv_fleet *f = ((pkv_fleet_hand *)ctx)->f;
    if (f->n_ttft == f->cap_ttft) {
        if (f->ttft_first > f->n_ttft / 2) { /* the window's values to the front */
            f->n_ttft -= f->ttft_first;
            memmove(f->ttft, f->ttft + f->ttft_first, f->n_ttft * sizeof *f->ttft);
            f->ttft_first = 0;
        } else {
            const size_t cap = f->cap_ttft ? 2 * f->cap_ttft : 1024;
            struct pkv_fleet_ttft *a = realloc(f->ttft, cap * sizeof *a);
            if (!a) return -1;
            f->ttft = a, f->cap_ttft = cap;
        }
    }
    f->ttft[f->n_ttft++] = (struct pkv_fleet_ttft){t, ttft};
    return 0;
}

/* The metric ttft: the pool's TTFT percentile over the last window_s, in ms (older
 * values dropped; the window's sorted in a copy); NaN when no first token came in the
 * window, -1 out of memory. */
static double ttft_metric(pkv_fleet *f) {
    const pkv_autoscale *a = &f->spec.autoscale;
    while (f->ttft_first < f->n_ttft && f->ttft[f->ttft_first].t < f->t_now - a->window_s)
        f->ttft_first++;
    const size_t m = f->n_ttft - f->ttft_first;
    if (!m) return NAN;
    double *x = malloc(m * sizeof *x);
    if (!x) return -1;
    for (size_t k = 0; k < m; k++) x[k] = f->ttft[f->ttft_first + k].ttft;
    gsl_sort(x, 1, m);
    const double q = gsl_stats_quantile_from_sorted_data(x, 1, m, a->percentile / 100);
    free(x);
    return 1e3 * q;
}

/* A decision: the metric over the pool's active replicas against the target gives the
 * replicas wanted (as Kubernetes' horizontal autoscaler: active x metric / target,
 * rounded up, within min and max); more start (draining ones first, back at once; the
 * others after their cold start), fewer drain (the highest first, once none starts). */
static int decide(pkv_fleet *f, pkv_err *e) {
    const pkv_autoscale *a = &f->spec.autoscale;
    const int lo = f->scale_first, hi = lo + a->max;
    int active = 0, starting = 0;
    double sum = 0;
    for (int i = lo; i < hi; i++) {
        starting += f->state[i] == PKV_REP_STARTING;
        if (f->state[i] != PKV_REP_ACTIVE) continue;
        active++;
        const pkv_sim *s = f->replicas[i];
        const pkv_sim_load l = pkv_sim_load_of(s, false);
        sum += a->metric == PKV_SCALE_QUEUE ? (double)s->wait_n
               : a->metric == PKV_SCALE_KV  ? 1 - (double)l.free_pages / s->cfg->kv_pages
                                            : (double)l.requests; /* requests, and ttft's */
    }
    if (a->metric != PKV_SCALE_KV && f->role[lo] != PKV_ROLE_DECODE) sum += (double)f->q_n;
    double metric = active ? sum / active : 0;
    if (a->metric == PKV_SCALE_TTFT && (metric = ttft_metric(f)) < 0)
        return pkv_fail(e, "out of memory");
    /* no first token in the window: an idle pool shrinks, a busy one holds */
    /* clamped as a double, converted after: a target near 0 (or a huge metric) wants the
     * maximum, never an overflowed int (0 / 0, no load against a zero target: hold) */
    double w = !isnan(metric) ? ceil(active * metric / a->target - 1e-9) : sum > 0 ? active : 0;
    if (isnan(w)) w = active;
    const int want = w < a->min ? a->min : w > a->max ? a->max : (int)w;
    /* Scale down no lower than the decisions of the last down_delay_s wanted (as
     * Kubernetes' scale-down stabilization window), so a dip does not drain replicas
     * the next decision wants back. */
    int keep = want;
    for (size_t k = f->n_scale; k-- > 0 && f->scale[k].t > f->t_now - a->down_delay_s;)
        if (f->scale[k].event == PKV_SCALE_DECIDE && (int)f->scale[k].desired > keep)
            keep = (int)f->scale[k].desired;
    bool moved = false;
    for (int i = lo; i < hi && want > active + starting; i++)
        if (f->state[i] == PKV_REP_DRAINING) {
            f->state[i] = PKV_REP_ACTIVE, active++, moved = true;
            if (scale_log(f, PKV_SCALE_BACK, i, NAN, 0)) return pkv_fail(e, "out of memory");
        }
    for (int i = lo; i < hi && want > active + starting; i++)
        if (f->state[i] == PKV_REP_OFF) {
            f->state[i] = PKV_REP_STARTING, starting++, f->ups[i]++, f->up_since[i] = f->t_now;
            if (scale_log(f, PKV_SCALE_START, i, NAN, 0) ||
                pkv_heap_push(&f->events, f->t_now + a->cold_start_s, EV_READY, i))
                return pkv_fail(e, "out of memory");
            f->n_own++;
        }
    for (int i = hi - 1; i >= lo && starting == 0 && keep < active; i--)
        if (f->state[i] == PKV_REP_ACTIVE) {
            f->state[i] = PKV_REP_DRAINING, active--, f->downs[i]++, moved = true;
            if (scale_log(f, PKV_SCALE_DRAIN, i, NAN, 0) || maybe_off(f, i))
                return pkv_fail(e, "out of memory");
        }
    if (moved) regroup(f);
    if (scale_log(f, PKV_SCALE_DECIDE, -1, metric, want)) return pkv_fail(e, "out of memory");
    if (!work_left(f)) return 0; /* no decision after the work is over */
    if (pkv_heap_push(&f->events, f->t_now + a->interval_s, EV_SCALE, 0))
        return pkv_fail(e, "out of memory");
    f->n_own++;
    return 0;
}

double pkv_fleet_up_s(const pkv_fleet *f, int i, double t_end) {
    if (!f->up_s) return t_end;
    return f->up_s[i] + (f->state[i] == PKV_REP_OFF ? 0 : t_end - f->up_since[i]);
}

/* One of the fleet's events, now. */
static int fleet_event(pkv_fleet *f, pkv_err *e) {
    pkv_event ev;
    pkv_heap_pop(&f->events, &ev);
    switch (ev.kind) {
    case EV_DELIVER: { /* a request reaches its replica */
        const pkv_fleet_transit tr = f->transit[ev.arg];
        f->free_transit[f->n_free_transit++] = ev.arg;
        note_arrived(f, tr.to, tr.d.prompt_len);
        return deliver(f, tr.to, &tr.d, tr.t_arrival, NULL, e);
    }
    case EV_FLOW: { /* a transfer's fixed cost passed: its bytes share the link */
        const int i = f->transit[ev.arg].from;
        pkv_fleet_link *L = &f->links[i];
        link_catch_up(f, L);
        L->flow[L->n_flow++] = ev.arg;
        return link_file(f, i) ? pkv_fail(e, "out of memory") : 0;
    }
    case EV_LINK: { /* a link's transfers with no bytes left end */
        pkv_fleet_link *L = &f->links[ev.arg];
        if (ev.t != L->t_tick) return 0; /* filed again since */
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
        return link_file(f, (int)ev.arg) ? pkv_fail(e, "out of memory") : 0;
    }
    case EV_SCALE:
        f->n_own--;
        return decide(f, e);
    case EV_READY: /* a started replica's cold start is over: it takes requests */
        f->n_own--;
        if (f->state[ev.arg] != PKV_REP_STARTING) return 0;
        f->state[ev.arg] = PKV_REP_ACTIVE;
        regroup(f);
        return scale_log(f, PKV_SCALE_READY, (int)ev.arg, NAN, 0) ? pkv_fail(e, "out of memory")
                                                                  : 0;
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
        const int i = choose(f, &f->entry, &d);
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
            pkv_heap_push(&f->events, a->interval_s, EV_SCALE, 0))
            return pkv_fail(e, "out of memory");
        f->n_own++;
        for (int k = a->initial; k < a->max; k++) f->state[f->scale_first + k] = PKV_REP_OFF;
    }
    regroup(f);
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
    for (int i = f->lo; i < f->hi; i++) {
        f->hands[i] = (pkv_fleet_hand){f, i};
        f->replicas[i]->fleet_ctx = &f->hands[i];
        if (a->on && a->metric == PKV_SCALE_TTFT && i >= f->scale_first &&
            i < f->scale_first + a->max)
            f->replicas[i]->first_token = note_ttft;
    }
    if (f->entry.n == 0) return pkv_fail(e, "fleet: no replica takes arrivals");
    if (f->ranks && f->ranks->size > 1 &&
        !(f->sync_buf = malloc(sync_block(f) * (size_t)f->ranks->size)))
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
        if (ev.kind == EV_DELIVER) {
            const pkv_fleet_transit tr = f->transit[ev.arg];
            note_arrived(f, tr.to, tr.d.prompt_len);
            if (pkv_sim_record_waiting(f->replicas[tr.to], &tr.d, tr.t_arrival, e)) return -1;
        }
    for (; f->q_n > 0; f->q_head = (f->q_head + 1) % f->q_cap, f->q_n--) {
        const pkv_request_draw *d = &f->queue[f->q_head];
        const double at = f->queued_at[f->q_head];
        const int i = least_loaded(f, &f->entry);
        if (f->routed) f->routed(f->routed_ctx, i, d, at, f->t_now);
        note_sent(f, i, d->prompt_len, false);
        if (!local(f, i)) continue;
        if (pkv_sim_record_waiting(f->replicas[i], d, at, e)) return -1;
        if (file_next(f, i)) return pkv_fail(e, "out of memory");
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
        if (file_next(f, i)) return pkv_fail(e, "out of memory");
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
        if (!over && f->n_own > 0 && !work_left(f)) break;
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
            if (sync_view(f, t, over, &t_fleet, &cut, e)) return -1;
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
            const int i = choose(f, &f->entry, &next);
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
            if (pkv_sim_advance(s, e)) return replica_failed(e, who);
            if (file_next(f, who) || maybe_off(f, who)) return pkv_fail(e, "out of memory");
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
        if (pkv_sim_end(f->replicas[i], e)) return replica_failed(e, i);
    if (f->q_n > 0 && !cut)
        return pkv_fail(e, "fleet: %zu requests still wait at the router at the end", f->q_n);
    return 0;
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
