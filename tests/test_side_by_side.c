/* Two simulations side by side in one process (what a fleet of replicas runs): each
 * with its own engine and sink, advanced in the order of their next events, ends
 * exactly as it does alone: the same steps, prefills and requests, bit for bit. */
#include "check.h"
#include "testreplica.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The study layer, Poisson arrivals, prefill_first; a small full model, chunked
 * prefill, prefix caching and swap under page pressure. */
static const char *EXP[2] = {
    "{\"name\": \"a\", \"model\": {\"hq\": 32, \"hkv\": 8, \"head_dim\": 128, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 300},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 20000},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 200},"
    "   \"num_requests\": 150, \"max_context\": 24000},"
    " \"serving\": {\"max_active\": 12, \"kv_pages\": 6000},"
    " \"route\": {\"policy\": \"adaptive\", \"calibration\": \"" PKV_SOURCE_DIR
    "/experiments/calibration/default.json\"}, \"run\": {\"seed\": 4}}",
    "{\"name\": \"b\", \"model\": {\"layers\": 4, \"hidden\": 1024, \"hq\": 8, \"hkv\": 2,"
    "   \"head_dim\": 128, \"intermediate\": 2048, \"vocab\": 4096, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 400},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 16, \"max\": 3000},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 2, \"max\": 300},"
    "   \"num_requests\": 200, \"max_context\": 4096},"
    " \"serving\": {\"max_active\": 16, \"kv_pages\": 900, \"scheduler\": \"chunked\","
    "   \"token_budget\": 512, \"prefix_caching\": true, \"preemption\": \"swap\","
    "   \"swap_pages\": 400},"
    " \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"" PKV_SOURCE_DIR
    "/experiments/calibration/default.json\"}, \"run\": {\"seed\": 9}}"};

int main(void) {
    pkv_err e = {0};
    seen alone[2];
    for (int k = 0; k < 2; k++) {
        replica r;
        int rc = replica_init(&r, EXP[k], &e) || pkv_sim_run(&r.sim, &e);
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
    int rc = replica_init(&r[0], EXP[0], &e) || replica_init(&r[1], EXP[1], &e) ||
             pkv_sim_start(&r[0].sim, &e) || pkv_sim_start(&r[1].sim, &e);
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
    CHECK_DONE();
}
