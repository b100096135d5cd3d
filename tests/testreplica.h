/* One simulation with its own engine (the model backend) and a sink that counts and
 * hashes what it sees: the replicas of the side-by-side and fleet tests. */
#ifndef PKV_TESTREPLICA_H
#define PKV_TESTREPLICA_H

#include "sim.h"

typedef struct seen {
    uint64_t steps, prefills, requests, itls, finished;
    double advance;  /* seconds: the steps' time, summed */
    double wait_sum; /* seconds: arrival to admission, summed over requests */
    double ttft_sum; /* seconds: arrival to first token, summed over finished requests */
    double step_min, step_max;
    uint64_t hash; /* of every record's fields a model backend decides */
    pkv_sim_counts counts;
    double t_end;
} seen;

typedef struct replica {
    pkv_config cfg;
    pkv_calib cal;
    pkv_engine eng;
    pkv_sim sim;
    seen w;
} replica;

/* The study layer, Poisson arrivals, prefill_first; a small full model, chunked
 * prefill, prefix caching and swap under page pressure. */
extern const char *const replica_experiments[2];

/* Parse the experiment text (its route.overrides applied) and set up the replica. */
int replica_init(replica *r, const char *text, pkv_err *e);
void replica_free(replica *r);
/* The same counts, hash and end in two replicas' sinks. */
int seen_same(const seen *a, const seen *b);

#endif
