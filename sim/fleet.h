/* A fleet: replicas (each a whole simulation: its engine, scheduler, KV pool, prefix
 * cache, admission and preemption) behind a router that reads their state as a real
 * router could (requests in each and the requests it sent them, tokens they hold, free
 * pages, cached prefixes; never the future), fed by one arrival stream. A routing
 * decision takes fleet.router_latency_ms: the request reaches its replica that much
 * later. The router's view of the replicas (requests, tokens, free pages) is refreshed
 * at each multiple of fleet.view_refresh_ms, as a router that scrapes the engines'
 * metrics sees them (the replicas as every event before that instant left them);
 * between refreshes it adds what it sent itself. Cached prefixes are read as of the
 * decision (as KV-cache events report them).
 * Pools (fleet.pools) give replicas roles: a prefill replica samples a request's first
 * token and sends its KV over its link (the calibration's kv_link_*: streams sharing
 * the bandwidth, more waiting) to a decode replica the decode router picks, freeing its
 * pages when the transfer ends. An autoscaler (fleet.autoscale) starts replicas of one
 * pool (serving after a cold start) and drains them (leaving once empty).
 * The loop takes the earliest of the next arrival, the fleet's own next event (a
 * request reaching its replica, a transfer's progress, an autoscaling decision or a
 * cold start's end) and the replicas' next events (a heap of the replicas by next
 * event, so a step costs the same at 1,000 replicas as at one), in that order at a
 * tie.
 * Over the ranks of an MPI job (pkv_ranks) each process runs a block of the replicas;
 * every process routes every arrival (the same stream, the same decisions) and keeps
 * the requests for its own replicas. The view's refresh is the only exchange: at each
 * refresh instant the owners' loads and each process's next event time are gathered, so
 * the view's age is the lookahead of a conservative parallel simulation (Chandy-Misra:
 * no replica's event can change another's before the next refresh), and the ranks give
 * what one process gives. */
#ifndef PKV_FLEET_H
#define PKV_FLEET_H

#include "sim.h"

#define PKV_ROUTERS(X)                                                                             \
    X(ROUND_ROBIN, "round_robin")           /* in turn */                                          \
    X(RANDOM, "random")                     /* uniformly */                                        \
    X(LEAST_REQUESTS, "least_requests")     /* the fewest requests in it */                        \
    X(LEAST_TOKENS, "least_tokens")         /* the fewest prompt and decode tokens to come */      \
    X(LEAST_KV, "least_kv")                 /* the most free pages */                              \
    X(POWER_OF_TWO, "power_of_two")         /* the fewer requests of two drawn at random */        \
    X(CENTRAL_QUEUE, "central_queue")       /* waits at the router until a replica has room */     \
    X(PREFIX_AFFINITY, "prefix_affinity")   /* the longest cached prefix, within a load cap */     \
    X(SESSION_AFFINITY, "session_affinity") /* a session's turns on its first turn's replica */

typedef enum {
#define PKV_ROUTER_ENUM(e, name) PKV_ROUTER_##e,
    PKV_ROUTERS(PKV_ROUTER_ENUM)
#undef PKV_ROUTER_ENUM
        PKV_ROUTER_COUNT
} pkv_router;
extern const char *const pkv_router_names[]; /* NULL-terminated */

/* The processes of an MPI job running one fleet, each its block of the replicas; the
 * program supplies the exchange (sim/ knows no MPI). */
typedef struct pkv_ranks {
    int rank, size;
    void *ctx;
    /* Every rank's `bytes` at mine, in rank order, into all (size x bytes). -1 fails. */
    int (*allgather)(void *ctx, const void *mine, size_t bytes, void *all);
    /* Every rank's buffer (its own length) to rank 0, in rank order: there a new *all
     * (caller frees) and each rank's length in lens[size]; NULL elsewhere. -1 fails (on
     * every rank). */
    int (*gather)(void *ctx, const void *mine, size_t bytes, void **all, size_t *lens);
} pkv_ranks;

/* The replicas [*lo, *hi) of n that rank `rank` of `size` runs. */
static inline void pkv_ranks_block(int n, int rank, int size, int *lo, int *hi) {
    *lo = (int)((int64_t)n * rank / size), *hi = (int)((int64_t)n * (rank + 1) / size);
}

/* Tells the fleet's user where each request went (may be NULL). */
typedef void (*pkv_fleet_routed)(void *ctx, int replica, const pkv_request_draw *d,
                                 double t_arrival, double t_routed);

/* Something on its way: a request from the router to its replica, or a prefilled
 * request's KV from its prefill replica to its decode replica. */
typedef struct pkv_fleet_transit {
    pkv_request_draw d;
    double t_arrival; /* at the router */
    int to;
    /* a KV transfer: */
    int from;
    int64_t slot;   /* the request's slot in its prefill replica */
    double bytes;   /* left to send */
    double t_start; /* it took one of its link's streams */
    int64_t next;   /* the next waiting for the link (-1: none) */
} pkv_fleet_transit;

/* A prefill replica's KV link (its calibration's kv_link_*): the transfers that hold its
 * streams share its bandwidth evenly once their fixed cost has passed; more wait. */
typedef struct pkv_fleet_link {
    double bps, fixed_s;
    int streams, on; /* streams; transfers holding one */
    int64_t *flow;   /* [streams] the transfers whose bytes flow */
    int n_flow;
    double t_last, t_tick; /* bytes left as of t_last; when the next transfer ends */
    int64_t wait_head, wait_tail;
    uint64_t transfers;
    int most_on; /* the most transfers it held at once */
} pkv_fleet_link;

/* A replica's state under autoscaling (always active without it). */
enum { PKV_REP_ACTIVE = 0, PKV_REP_STARTING, PKV_REP_DRAINING, PKV_REP_OFF };

/* The replicas one router chooses among (the active ones). */
typedef struct pkv_fleet_group {
    int *idx, n;
    int router;
    int next_rr;
    int32_t *session_at; /* session_affinity: replica + 1 of each session (0: none yet) */
    size_t n_session_at;
} pkv_fleet_group;

typedef struct pkv_fleet {
    int n;                  /* replicas */
    pkv_sim **replicas;     /* [n], each initialised (pkv_sim_init), external set by the fleet;
                               over ranks only this process's [lo, hi), the others NULL */
    const pkv_ranks *ranks; /* NULL: one process */
    int lo, hi;             /* this process's replicas (set by pkv_fleet_run) */
    pkv_workload *wl;       /* the arrival stream (open loop) */
    pkv_fleet_spec spec;    /* routers, latency, view refresh, affinity cap, pools (their
                               replicas in order; none: n mixed replicas) */
    gsl_rng *r_route;       /* random and power_of_two draw from it */
    pkv_fleet_routed routed;
    void *routed_ctx;
    /* state */
    int *role;               /* [n] PKV_ROLE_* */
    pkv_fleet_group entry;   /* where arrivals go: the mixed and prefill replicas */
    pkv_fleet_group decode;  /* where prefilled requests go */
    pkv_request_draw *queue; /* central_queue: the requests waiting at the router (ring) */
    double *queued_at;
    size_t q_head, q_n, q_cap;
    uint64_t *per_replica;      /* [n] requests routed to each (prefilled ones to decode ones) */
    double *next_t;             /* [n] each replica's next event as last filed in `when` */
    pkv_sim_load *now;          /* [n] each (local) replica as of its last event (refreshed
                                   where it is filed; tokens counted when a router weighs them) */
    bool count_tokens;          /* a router is least_tokens */
    pkv_heap when;              /* the replicas by next event (arg: replica; lazy: an entry
                                   whose time is not next_t[arg] is stale) */
    pkv_sim_load *view;         /* [n] the router's view (view_refresh_s > 0): each replica as
                                   of the last refresh, with the requests sent since */
    pkv_sim_load *sent;         /* [n] requests (and their prompt tokens) on their way (to this
                                   process's replicas) */
    double next_refresh;        /* the view's next refresh instant */
    void *sync_buf;             /* ranks: the refresh's exchange, [size] blocks */
    pkv_fleet_transit *transit; /* things on their way (slots; free ones listed) */
    int64_t *free_transit;
    size_t n_transit, cap_transit, n_free_transit;
    pkv_heap events;              /* requests reaching replicas, transfers' fixed costs passing,
                                     links' next transfer ends */
    pkv_fleet_link *links;        /* [n] (prefill replicas') */
    struct pkv_fleet_hand *hands; /* [n] each prefill replica's handoff context */
    /* autoscaling (spec.autoscale): each replica's state (PKV_REP_*), when it was last
     * started, its replica-seconds so far, its starts and drains; the scaled pool's
     * replicas [scale_first, scale_first + max); the decisions and events (/scale) */
    int8_t *state;
    size_t n_own; /* the autoscaler's own events pending (a decision, cold starts): no work */
    double *up_since, *up_s;
    uint32_t *ups, *downs;
    int scale_first;
    pkv_scale_rec *scale;
    size_t n_scale, cap_scale;
    struct pkv_fleet_ttft {
        double t, ttft;
    } * ttft; /* metric ttft: the scaled pool's first tokens (when, and their TTFT) in time
                 order, those of the window from ttft_first */
    size_t ttft_first, n_ttft, cap_ttft;
    bool arrivals_left;
    double t_now;
    double route_s; /* host seconds spent choosing replicas */
} pkv_fleet;

/* Run every replica's simulation from its start to its end, feeding the arrivals of wl
 * through the router. Returns 0, or -1 with the first error (a replica's, naming it). */
int pkv_fleet_run(pkv_fleet *f, pkv_err *e);
/* Replica i's replica-seconds, a replica still up counted to t_end (the run's end: its
 * replicas' last event; after pkv_fleet_run). */
double pkv_fleet_up_s(const pkv_fleet *f, int i, double t_end);
void pkv_fleet_free(pkv_fleet *f);

#endif
