/* What the fleet's files share (fleet.c: the state, what was sent and what arrived, the
 * requests on their way; fleet_run.c: the loop and the router's queue; fleet_router.c:
 * the routers; fleet_link.c: the KV links between prefill and decode replicas;
 * fleet_scale.c: the autoscaler; fleet_sync.c: the router's view and the ranks'
 * exchange). Not for use outside sim/. */
#ifndef PKV_FLEET_PARTS_H
#define PKV_FLEET_PARTS_H

#include "fleet.h"

/* The fleet's own events (pkv_event.kind). */
enum { PKV_FLEET_DELIVER = 0, PKV_FLEET_FLOW, PKV_FLEET_LINK, PKV_FLEET_SCALE, PKV_FLEET_READY };

/* A replica's context in its callbacks (handoff, first token). */
typedef struct pkv_fleet_hand {
    pkv_fleet *f;
    int i;
} pkv_fleet_hand;

/* Replica i runs in this process (over ranks, a block of them; else every one). */
static inline bool pkv_fleet_local(const pkv_fleet *f, int i) {
    return i >= f->lo && i < f->hi;
}

/* Replica i now, with the requests on their way to it (the router knows those): from
 * one array, not from each replica's own state (at 1,000 replicas a scan over those
 * waited on their memory). */
static inline pkv_sim_load pkv_fleet_live(const pkv_fleet *f, int i) {
    pkv_sim_load l = f->now[i];
    l.requests += f->sent[i].requests, l.tokens += f->sent[i].tokens;
    return l;
}

/* Replica i as the router sees it: live, or as of the view's last refresh with what
 * was sent since. */
static inline pkv_sim_load pkv_fleet_seen(const pkv_fleet *f, int i) {
    return f->spec.view_refresh_s > 0 ? f->view[i] : pkv_fleet_live(f, i);
}

/* fleet.c. The router sent replica i a request of `prompt` tokens (on_way: it arrives
 * later), and one on its way arrived; file replica i's next event and refresh the
 * router's picture of it; a replica's error named; a slot for something on its way (-1:
 * out of memory); request d reaches replica i now (prefilled: with its KV). */
void pkv_fleet_note_sent(pkv_fleet *f, int i, int32_t prompt, bool on_way);
void pkv_fleet_note_arrived(pkv_fleet *f, int i, int32_t prompt);
int pkv_fleet_file_next(pkv_fleet *f, int i);
int pkv_fleet_replica_failed(pkv_err *e, int i);
int64_t pkv_fleet_transit_slot(pkv_fleet *f);
int pkv_fleet_deliver(pkv_fleet *f, int i, const pkv_request_draw *d, double t_arrival,
                      const pkv_request_rec *prefilled, pkv_err *e);

/* fleet_router.c: the replica of group g for request d by its router (-1: central_queue
 * has none with room now; -2: out of memory), timed into route_s; the least loaded by
 * the group router's weighing. */
int pkv_fleet_choose(pkv_fleet *f, pkv_fleet_group *g, const pkv_request_draw *d);
int pkv_fleet_least_loaded(const pkv_fleet *f, pkv_fleet_group *g);

/* fleet_link.c: each prefill replica's link from its calibration, and its handoff; a
 * transfer's fixed cost passed (PKV_FLEET_FLOW of transit k); a link's tick
 * (PKV_FLEET_LINK of link i at t). */
int pkv_fleet_links_init(pkv_fleet *f, pkv_err *e);
int pkv_fleet_link_flow(pkv_fleet *f, int64_t k, pkv_err *e);
int pkv_fleet_link_tick(pkv_fleet *f, int i, double t, pkv_err *e);

/* fleet_scale.c: the routers' groups from the replicas' states; a /scale row; a
 * draining replica with nothing left leaves; work other than the autoscaler's own; a
 * first token of the scaled pool (metric ttft); a decision (PKV_FLEET_SCALE); a started
 * replica ready (PKV_FLEET_READY). */
void pkv_fleet_regroup(pkv_fleet *f);
int pkv_fleet_scale_log(pkv_fleet *f, int event, int replica, double metric, int desired);
int pkv_fleet_maybe_off(pkv_fleet *f, int i);
bool pkv_fleet_work_left(const pkv_fleet *f);
int pkv_fleet_note_ttft(void *ctx, double t, double ttft);
int pkv_fleet_decide(pkv_fleet *f, pkv_err *e);
int pkv_fleet_ready(pkv_fleet *f, int i, pkv_err *e);

/* fleet_sync.c: the bytes one process gives at a refresh; the refresh. */
size_t pkv_fleet_sync_block(const pkv_fleet *f);
int pkv_fleet_sync_view(pkv_fleet *f, double t_mine, bool over_mine, double *t_next, bool *over,
                        pkv_err *e);

#endif
