/* A fleet of replicas behind a router (sim/fleet.h), on the model backend:
 * - one replica behind the router is the run without a fleet, bit for bit (the study
 *   layer; a full model with chunked prefill, caching and swap under page pressure);
 * - queueing theory holds (`test_fleet erlang`, labelled ci: a million requests a case):
 *   central_queue over c replicas of one active request each, Poisson arrivals, a
 *   constant step cost and geometric decode lengths of mean 100 steps with no prefill
 *   time (exponential service, as near as whole steps allow): the mean wait at the
 *   router within 3% of Erlang C (at the arrival and service rates the run realised)
 *   at loads 0.7 and 0.85 for c = 1, 4, 16;
 * - least_requests waits less than round_robin at high load (join the shortest queue);
 * - conservation: every router routes each request once and every replica finishes
 *   what it was given;
 * - a routing decision's latency L adds L to every request's TTFT (round_robin: each
 *   replica's timeline moves by L); a view never refreshed sends least_kv's every
 *   request to one replica, a live one spreads them;
 * - prefix_affinity on prompts that share prefixes (16 shared prompts, pools too small
 *   to cache them all) hits the cache more than round_robin; session_affinity keeps every
 *   turn of a session on one replica and hits more than round_robin. */
#include "check.h"
#include "testrun.h"
#include "fleet.h"
#include "testreplica.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sf_gamma.h>

static const char *CAL = PKV_SOURCE_DIR "/experiments/calibration/default.json";

/* The router's wait of each request (central_queue); each session's replica. */
typedef struct routed_log {
    double wait_sum, t_last; /* the waits summed; the latest arrival */
    uint64_t n;
    int session_at[4096]; /* replica + 1 of each session's first turn */
    int sessions, sessions_moved;
} routed_log;
static void on_routed(void *ctx, int to, const pkv_request_draw *d, double t_arrival,
                      double t_routed) {
    routed_log *l = ctx;
    l->wait_sum += t_routed - t_arrival, l->n++;
    if (t_arrival > l->t_last) l->t_last = t_arrival;
    if (d->session >= 0 && d->session < 4096) {
        int *at = &l->session_at[d->session];
        if (!*at) *at = to + 1, l->sessions++;
        l->sessions_moved += *at != to + 1;
    }
}

/* A fleet of n replicas of `text` routed by `router`, its arrivals those of the first
 * replica's workload (decode lengths `decode` when not NULL). */
typedef struct fleet_run {
    replica *r;
    pkv_fleet f;
    routed_log log;
    int rc;
} fleet_run;

static void fleet_run_go(fleet_run *fr, int n, const char *text, pkv_fleet_spec how,
                         const pkv_length_spec *decode, pkv_err *e) {
    memset(fr, 0, sizeof *fr);
    fr->r = calloc((size_t)n, sizeof *fr->r);
    pkv_sim **sims = calloc((size_t)n, sizeof *sims);
    for (int i = 0; i < n && !fr->rc; i++) {
        fr->rc = replica_init(&fr->r[i], text, e);
        sims[i] = &fr->r[i].sim;
    }
    pkv_workload wl;
    pkv_workload_spec spec = fr->r[0].cfg.workload;
    if (decode) spec.decode = *decode;
    gsl_rng *g = test_rng(7);
    if (!fr->rc) fr->rc = pkv_workload_init(&wl, &spec, fr->r[0].cfg.seed);
    fr->f = (pkv_fleet){.n = n,
                        .replicas = sims,
                        .wl = &wl,
                        .spec = how,
                        .r_route = g,
                        .routed = on_routed,
                        .routed_ctx = &fr->log};
    if (!fr->rc) fr->rc = pkv_fleet_run(&fr->f, e);
    pkv_workload_free(&wl);
    gsl_rng_free(g);
    free(sims);
    fr->f.replicas = NULL;
}

static void fleet_run_free(fleet_run *fr, int n) {
    pkv_fleet_free(&fr->f);
    for (int i = 0; i < n; i++) replica_free(&fr->r[i]);
    free(fr->r);
}

static pkv_fleet_spec by(pkv_router router) {
    return (pkv_fleet_spec){.router = router, .affinity_cap = 64};
}

/* The fleet's prefix cache hit rate: prompt tokens found cached over those admitted. */
static double hit_rate(const fleet_run *fr, int n) {
    double hit = 0, all = 0;
    for (int i = 0; i < n; i++) {
        hit += (double)fr->r[i].w.counts.prefix_hit_tokens;
        all += (double)fr->r[i].w.counts.prefix_tokens;
    }
    return all > 0 ? hit / all : 0;
}

static double ttft_sum(const fleet_run *fr, int n, uint64_t *finished) {
    double sum = 0;
    *finished = 0;
    for (int i = 0; i < n; i++) sum += fr->r[i].w.ttft_sum, *finished += fr->r[i].w.finished;
    return sum;
}

/* A small full model, chunked prefill, prefix caching on pools that hold a few of the
 * workload's shared prompts (16 of 1024 tokens, 64 pages each, shared by 90% of the
 * requests), or sessions of 4 turns. */
static const char *SHARED =
    "{\"name\": \"p\", \"model\": {\"layers\": 4, \"hidden\": 1024, \"hq\": 8, \"hkv\": 2,"
    "   \"head_dim\": 128, \"intermediate\": 2048, \"vocab\": 4096, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 400},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 1500},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 2, \"max\": 60},"
    "   \"num_requests\": 600, \"max_context\": 8192, %s},"
    " \"serving\": {\"max_active\": 16, \"kv_pages\": 700, \"scheduler\": \"chunked\","
    "   \"token_budget\": 1024, \"prefix_caching\": true, \"prefix_block_tokens\": 256},"
    " \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"%s\"},"
    " \"run\": {\"seed\": 21}}";
static const char *GROUPS =
    "\"shared_prefix_tokens\": 1024, \"shared_prefix_groups\": 16, \"shared_prefix_share\": 0.9";
static const char *SESSIONS =
    "\"turns\": {\"dist\": \"fixed\", \"value\": 4}, \"session_think_s\": 0.05";

/* Erlang C: the mean wait of M/M/c with offered load a = lambda / mu. */
static double erlang_c_wait(int c, double lambda, double mu) {
    const double a = lambda / mu, rho = a / c;
    double sum = 0;
    for (int k = 0; k < c; k++) sum += exp(k * log(a) - gsl_sf_lnfact((unsigned)k));
    const double top = exp(c * log(a) - gsl_sf_lnfact((unsigned)c)) / (1 - rho);
    return top / (sum + top) / (c * mu - lambda);
}

/* One active request a replica, a step of 1 ms whatever the context (the study layer
 * at an unbounded bandwidth with a 1 ms launch), no prefill time. */
static const char *QUEUE =
    "{\"name\": \"q\", \"model\": {\"hq\": 32, \"hkv\": 8, \"head_dim\": 128, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": %g},"
    "   \"prompt\": {\"dist\": \"fixed\", \"value\": 16},"
    "   \"decode\": {\"dist\": \"fixed\", \"value\": 1},"
    "   \"num_requests\": %d, \"max_context\": 2048},"
    " \"serving\": {\"max_active\": 1, \"kv_pages\": 4096,"
    "   \"prefill\": {\"base_us\": 0, \"per_token_us\": 0}},"
    " \"route\": {\"policy\": \"ref_paged\", \"calibration\": \"%s\","
    "   \"overrides\": {\"beta_gbps\": 1000000, \"launch_us\": 1000}}, \"run\": {\"seed\": %d}}";

/* One replica behind the router is the run alone. */
static void one_replica_is_the_engine_alone(void) {
    pkv_err e = {0};
    for (int k = 0; k < 2; k++) {
        replica r;
        int rc = replica_init(&r, replica_experiments[k], &e) || pkv_sim_run(&r.sim, &e);
        CHECK(rc == 0, "experiment %d alone: %s", k, e.msg);
        const seen alone = r.w;
        replica_free(&r);
        fleet_run fr;
        fleet_run_go(&fr, 1, replica_experiments[k], by(PKV_ROUTER_ROUND_ROBIN), NULL, &e);
        CHECK(fr.rc == 0, "experiment %d, one replica: %s", k, e.msg);
        const seen *w = &fr.r[0].w;
        CHECK(seen_same(w, &alone),
              "experiment %d: one replica %llu steps, %llu requests, end %.9g s; alone %llu, "
              "%llu, %.9g s",
              k, (unsigned long long)w->steps, (unsigned long long)w->requests, w->t_end,
              (unsigned long long)alone.steps, (unsigned long long)alone.requests, alone.t_end);
        fleet_run_free(&fr, 1);
    }
}

/* The router's latency moves every request's first token by as much. */
static void router_latency_moves_every_first_token(void) {
    pkv_err e = {0};
    const int n = 3;
    double sum[2];
    uint64_t fin[2];
    for (int k = 0; k < 2; k++) {
        pkv_fleet_spec spec = by(PKV_ROUTER_ROUND_ROBIN);
        spec.latency_s = k ? 0.005 : 0;
        fleet_run fr;
        fleet_run_go(&fr, n, replica_experiments[0], spec, NULL, &e);
        CHECK(fr.rc == 0, "latency %g: %s", spec.latency_s, e.msg);
        sum[k] = ttft_sum(&fr, n, &fin[k]);
        fleet_run_free(&fr, n);
    }
    CHECK(fin[0] == fin[1] && fin[0] > 0, "%llu and %llu finished", (unsigned long long)fin[0],
          (unsigned long long)fin[1]);
    CHECK(fabs(sum[1] - sum[0] - 0.005 * (double)fin[0]) <= 1e-9 * (double)fin[0],
          "a 5 ms router adds %.9g ms to the mean TTFT", 1e3 * (sum[1] - sum[0]) / fin[0]);
}

/* A view never refreshed ties least_kv's replicas for good (the router's own sends
 * change no free pages it sees): the ties rotate, so each replica takes a quarter (a
 * tie went to the lowest replica, which took everything); a live view spreads them
 * by load. */
static void least_kv_ties_rotate_under_a_stale_view(void) {
    pkv_err e = {0};
    for (int k = 0; k < 2; k++) {
        const int n = 4;
        pkv_fleet_spec spec = by(PKV_ROUTER_LEAST_KV);
        spec.view_refresh_s = k ? 1e9 : 0;
        fleet_run fr;
        fleet_run_go(&fr, n, replica_experiments[0], spec, NULL, &e);
        CHECK(fr.rc == 0, "view refresh %g: %s", spec.view_refresh_s, e.msg);
        const uint64_t first = fr.f.per_replica[0], all = fr.log.n;
        int even = 1;
        for (int i = 0; i < n; i++)
            even &= fr.f.per_replica[i] * n + n >= all && fr.f.per_replica[i] * n <= all + n;
        CHECK(k ? even : first < all,
              "least_kv, view refreshed every %g s: %llu of %llu requests to replica 0",
              spec.view_refresh_s, (unsigned long long)first, (unsigned long long)all);
        fleet_run_free(&fr, n);
    }
}

/* Routing by prefix or by session against round robin, 4 replicas; one replica under
 * either is exactly the engine alone. */
static void affinity_routers_hit_more_than_round_robin(void) {
    pkv_err e = {0};
    char text[4096];
    for (int k = 0; k < 2; k++) {
        const int n = 4;
        const pkv_router aff = k ? PKV_ROUTER_SESSION_AFFINITY : PKV_ROUTER_PREFIX_AFFINITY;
        snprintf(text, sizeof text, SHARED, k ? SESSIONS : GROUPS, CAL);
        double rate[2];
        for (int j = 0; j < 2; j++) {
            fleet_run fr;
            fleet_run_go(&fr, n, text, by(j ? aff : PKV_ROUTER_ROUND_ROBIN), NULL, &e);
            CHECK(fr.rc == 0, "%s: %s", pkv_router_names[j ? aff : 0], e.msg);
            rate[j] = hit_rate(&fr, n);
            if (j && k)
                CHECK(fr.log.sessions > 50 && fr.log.sessions_moved == 0,
                      "session_affinity: %d of %d sessions moved", fr.log.sessions_moved,
                      fr.log.sessions);
            fleet_run_free(&fr, n);
        }
        replica r;
        CHECK(replica_init(&r, text, &e) == 0 && pkv_sim_run(&r.sim, &e) == 0, "alone: %s", e.msg);
        fleet_run one;
        fleet_run_go(&one, 1, text, by(aff), NULL, &e);
        CHECK(one.rc == 0 && seen_same(&one.r[0].w, &r.w),
              "%s, one replica: not the engine alone (hits %llu and %llu tokens)",
              pkv_router_names[aff], (unsigned long long)one.r[0].w.counts.prefix_hit_tokens,
              (unsigned long long)r.w.counts.prefix_hit_tokens);
        fleet_run_free(&one, 1);
        replica_free(&r);
        printf("%s: hit rate %.3f, round_robin %.3f\n", pkv_router_names[aff], rate[1], rate[0]);
        CHECK(rate[1] > rate[0] && rate[1] > 0.1,
              "%s hits %.3f of the prompt tokens, round_robin %.3f", pkv_router_names[aff], rate[1],
              rate[0]);
    }
}

/* The queueing cases' service: geometric decode lengths of mean 100 steps (service
 * time's squared coefficient of variation 0.99; a shorter mean makes whole steps show:
 * 0.95 at 20 steps, 2.5% less wait at one server), a table of the distribution's
 * quantiles drawn uniformly (the empirical kind); and the step's cost, from a first run
 * (the service rate is 1 / (mean length x step)). */
typedef struct queue_service {
    pkv_length_spec geo;
    double mean_len, step;
} queue_service;
enum { QUANTILES = 100000 };

static int queue_service_make(queue_service *q) {
    pkv_err e = {0};
    char text[4096];
    const double p = 1.0 / 100;
    q->geo = (pkv_length_spec){.kind = PKV_LENGTH_EMPIRICAL, .n_emp = QUANTILES};
    q->geo.values_emp = malloc(sizeof *q->geo.values_emp * QUANTILES);
    CHECK(q->geo.values_emp != NULL, "out of memory");
    if (!q->geo.values_emp) return -1;
    q->mean_len = 0;
    for (int i = 0; i < QUANTILES; i++) {
        q->geo.values_emp[i] = (int32_t)ceil(log(1 - (i + 0.5) / QUANTILES) / log(1 - p));
        q->mean_len += q->geo.values_emp[i] / (double)QUANTILES;
    }
    snprintf(text, sizeof text, QUEUE, 10.0, 200, CAL, 3);
    fleet_run pilot;
    fleet_run_go(&pilot, 1, text, by(PKV_ROUTER_ROUND_ROBIN), &q->geo, &e);
    CHECK(pilot.rc == 0, "pilot: %s", e.msg);
    const seen *pw = &pilot.r[0].w;
    q->step = pw->advance / (double)pw->steps;
    CHECK(pw->step_max - pw->step_min <= 1e-3 * q->step, "the step's cost varies: %.6g to %.6g s",
          pw->step_min, pw->step_max);
    fleet_run_free(&pilot, 1);
    return pilot.rc;
}

/* Erlang C: the router's mean wait under central_queue, a million requests per server
 * count and load (`test_fleet erlang [SEED]`, ctest's fleet_erlang, labelled long). */
static void erlang_c_wait_under_central_queue(int seed0) {
    pkv_err e = {0};
    char text[4096];
    queue_service q;
    if (queue_service_make(&q)) return;
    static const int cs[3] = {1, 4, 16};
    static const double loads[2] = {0.7, 0.85};
    for (int ci = 0; ci < 3; ci++)
        for (int li = 0; li < 2; li++) {
            const int c = cs[ci], n_req = 1000000;
            const double mu = 1 / (q.mean_len * q.step);
            const double lambda = loads[li] * c * mu;
            snprintf(text, sizeof text, QUEUE, lambda, n_req, CAL, seed0 + ci * 2 + li);
            fleet_run fr;
            fleet_run_go(&fr, c, text, by(PKV_ROUTER_CENTRAL_QUEUE), &q.geo, &e);
            CHECK(fr.rc == 0, "erlang c=%d: %s", c, e.msg);
            uint64_t steps = 0, finished = 0;
            double busy = 0;
            for (int i = 0; i < c; i++) {
                steps += fr.r[i].w.steps, busy += fr.r[i].w.advance;
                finished += fr.r[i].w.finished;
            }
            /* the service rate as the replicas served: requests over their busy time
             * (one request a step: a replica holds one at a time) */
            const double mu_seen = (double)finished / busy;
            const double lambda_seen = (double)fr.log.n / fr.log.t_last;
            const double want = erlang_c_wait(c, lambda_seen, mu_seen);
            const double got = fr.log.wait_sum / fr.log.n;
            CHECK(finished == (uint64_t)n_req && fr.log.n == (uint64_t)n_req,
                  "erlang c=%d: %llu finished, %llu routed of %d", c, (unsigned long long)finished,
                  (unsigned long long)fr.log.n, n_req);
            CHECK(fabs(busy / (double)steps - q.step) <= 1e-3 * q.step,
                  "c=%d: steps of %.6g s, not %.6g", c, busy / (double)steps, q.step);
            CHECK(fabs(got - want) <= 0.03 * want,
                  "c=%d, load %.1f: mean wait %.6g s, Erlang C %.6g s (%+.1f%%)", c, loads[li], got,
                  want, 100 * (got / want - 1));
            printf("erlang c=%d load %.2f: wait %.6g s, Erlang C %.6g s (%+.2f%%)\n", c, loads[li],
                   got, want, 100 * (got / want - 1));
            fleet_run_free(&fr, c);
        }
    free(q.geo.values_emp);
}

/* Join the shortest queue against round robin, 4 replicas at load 0.9, the wait at the
 * replicas (arrival to admission); every router conserves requests. */
static void shortest_queue_waits_less_and_every_router_conserves(void) {
    pkv_err e = {0};
    char text[4096];
    queue_service q;
    if (queue_service_make(&q)) return;
    double wait[PKV_ROUTER_COUNT] = {0};
    for (int router = 0; router < PKV_ROUTER_COUNT; router++) {
        const int c = 4, n_req = 20000;
        const double mu = 1 / (q.mean_len * q.step), lambda = 0.9 * c * mu;
        snprintf(text, sizeof text, QUEUE, lambda, n_req, CAL, 5);
        fleet_run fr;
        fleet_run_go(&fr, c, text, by((pkv_router)router), &q.geo, &e);
        CHECK(fr.rc == 0, "%s: %s", pkv_router_names[router], e.msg);
        uint64_t finished = 0, routed = 0;
        double sum = 0; /* arrival (at the router) to admission */
        for (int i = 0; i < c; i++) {
            finished += fr.r[i].w.finished, routed += fr.f.per_replica[i];
            sum += fr.r[i].w.wait_sum;
            CHECK(fr.r[i].w.requests == fr.f.per_replica[i],
                  "%s: replica %d finished %llu of the %llu it was given", pkv_router_names[router],
                  i, (unsigned long long)fr.r[i].w.requests,
                  (unsigned long long)fr.f.per_replica[i]);
        }
        CHECK(finished == (uint64_t)n_req && routed == (uint64_t)n_req,
              "%s: %llu routed, %llu finished of %d", pkv_router_names[router],
              (unsigned long long)routed, (unsigned long long)finished, n_req);
        wait[router] = sum / n_req;
        printf("%-15s mean wait %.6g s\n", pkv_router_names[router], wait[router]);
        fleet_run_free(&fr, c);
    }
    CHECK(wait[PKV_ROUTER_LEAST_REQUESTS] < 0.7 * wait[PKV_ROUTER_ROUND_ROBIN],
          "least_requests waits %.6g s, round_robin %.6g s", wait[PKV_ROUTER_LEAST_REQUESTS],
          wait[PKV_ROUTER_ROUND_ROBIN]);
    CHECK(wait[PKV_ROUTER_CENTRAL_QUEUE] <= wait[PKV_ROUTER_LEAST_REQUESTS] * 1.05,
          "central_queue waits %.6g s, least_requests %.6g s", wait[PKV_ROUTER_CENTRAL_QUEUE],
          wait[PKV_ROUTER_LEAST_REQUESTS]);
    free(q.geo.values_emp);
}

static const pkv_test_case cases[] = {
    PKV_CASE(one_replica_is_the_engine_alone),
    PKV_CASE(router_latency_moves_every_first_token),
    PKV_CASE(least_kv_ties_rotate_under_a_stale_view),
    PKV_CASE(affinity_routers_hit_more_than_round_robin),
    PKV_CASE(shortest_queue_waits_less_and_every_router_conserves),
};

/* `erlang [SEED]` runs the long Erlang C check alone; anything else is the cases'. */
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "erlang")) {
        erlang_c_wait_under_central_queue(argc > 2 ? atoi(argv[2]) : 11);
        CHECK_DONE();
    }
    return pkv_test_main(cases, (int)(sizeof cases / sizeof *cases), argc, argv);
}
