/* Two simulations side by side in one process (what a fleet of replicas runs): each
 * with its own engine and sink, advanced in the order of their next events, ends
 * exactly as it does alone: the same steps, prefills and requests, bit for bit. */
#include "check.h"
#include "testreplica.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void interleaved_runs_end_as_alone(void) {
    pkv_err e = {0};
    seen alone[2];
    for (int k = 0; k < 2; k++) {
        replica r;
        int rc = replica_init(&r, replica_experiments[k], &e) || pkv_sim_run(&r.sim, &e);
        CHECK(rc == 0, "experiment %d alone: %s", k, e.msg);
        alone[k] = r.w;
        replica_free(&r);
        CHECK(alone[k].requests > 100 && alone[k].steps > 100, "experiment %d: %llu requests", k,
              (unsigned long long)alone[k].requests);
    }
    CHECK(alone[1].counts.swap_outs > 0 && alone[1].counts.prefix_blocks > 0,
          "experiment b swaps (%llu) and caches (%llu blocks)",
          (unsigned long long)alone[1].counts.swap_outs,
          (unsigned long long)alone[1].counts.prefix_blocks);

    /* Side by side: the replica whose next event comes first moves (ties: the first). */
    replica *r = calloc(2, sizeof *r);
    int rc = replica_init(&r[0], replica_experiments[0], &e) ||
             replica_init(&r[1], replica_experiments[1], &e) || pkv_sim_start(&r[0].sim, &e) ||
             pkv_sim_start(&r[1].sim, &e);
    uint64_t turns[2] = {0, 0}, switches = 0;
    for (int last = -1; rc == 0;) {
        const double t0 = pkv_sim_next_t(&r[0].sim), t1 = pkv_sim_next_t(&r[1].sim);
        if (isinf(t0) && isinf(t1)) break;
        const int k = t1 < t0;
        switches += last >= 0 && k != last;
        last = k;
        turns[k]++;
        rc = pkv_sim_advance(&r[k].sim, &e);
    }
    rc = rc || pkv_sim_end(&r[0].sim, &e) || pkv_sim_end(&r[1].sim, &e);
    CHECK(rc == 0, "side by side: %s", e.msg);
    CHECK(switches > 100, "the two simulations interleaved (%llu switches, %llu + %llu events)",
          (unsigned long long)switches, (unsigned long long)turns[0], (unsigned long long)turns[1]);
    for (int k = 0; k < 2; k++)
        CHECK(seen_same(&alone[k], &r[k].w),
              "experiment %d side by side: %llu steps, %llu requests, end %.9g s; alone %llu, "
              "%llu, %.9g s",
              k, (unsigned long long)r[k].w.steps, (unsigned long long)r[k].w.requests,
              r[k].w.t_end, (unsigned long long)alone[k].steps,
              (unsigned long long)alone[k].requests, alone[k].t_end);
    replica_free(&r[0]);
    replica_free(&r[1]);
    free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(interleaved_runs_end_as_alone),
};
PKV_TEST_MAIN(cases)
