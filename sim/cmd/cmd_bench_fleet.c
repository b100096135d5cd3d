/* pkvsim bench fleet: the fleet's speed and memory (issue 30's benchmark). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pkv_gitrev.h"
#include "cli.h"
#include "fleet.h"
#include "pkv_clock.h"
#include "rng.h"

/* Llama-3.1-8B on the model backend (the H200's fitted calibration), prompts of 512
 * and answers of 32..96 tokens, 50,000 KV pages a replica. */
static const char *EXP = "{\"name\": \"bench-fleet\", \"model\": \"llama-3.1-8b\","
                         " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": %.9g},"
                         "   \"prompt\": {\"dist\": \"fixed\", \"value\": 512},"
                         "   \"decode\": {\"dist\": \"uniform\", \"min\": 32, \"max\": 96},"
                         "   \"num_requests\": %llu, \"max_context\": 1024},"
                         " \"serving\": {\"max_active\": %d, \"kv_pages\": 50000},"
                         " \"route\": {\"policy\": \"adaptive\"},"
                         " \"run\": {\"backend\": \"model\"}}";

typedef struct fleet_case {
    int replicas, rows;
    double rate_per_replica; /* arrivals a simulated second, each replica's share */
    uint64_t requests;
} fleet_case;

typedef struct fleet_result {
    int ok;
    uint64_t iterations, finished;
    double setup_s, host_s, t_sim, route_s, rss_mb;
    char err[1100];
} fleet_result;

typedef struct counts {
    uint64_t iterations, finished;
} counts;
static int on_step(void *ctx, const pkv_step_rec *r, double adv, pkv_err *e) {
    ((counts *)ctx)->iterations++;
    return 0;
}
static int on_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e) {
    ((counts *)ctx)->iterations++;
    return 0;
}
static int on_request(void *ctx, const pkv_request_rec *q, pkv_err *e) {
    ((counts *)ctx)->finished++;
    return 0;
}

/* The case in this (child) process: one configuration and calibration shared by every
 * replica; an engine, a simulation and a counting sink each. */
static void run_case(const void *arg, void *result) {
    const fleet_case *c = arg;
    fleet_result *r = result;
    char text[2048];
    snprintf(text, sizeof text, EXP, c->rate_per_replica * c->replicas,
             (unsigned long long)c->requests, c->rows);
    pkv_config cfg;
    pkv_calib cal;
    pkv_err e;
    /* the calibration route.gpu's default (the H200) gives a served model */
    if (pkv_config_parse(&cfg, strdup(text), "bench-fleet.json", &e) ||
        pkv_calib_load(&cal, cfg.calibration, pkv_calib_section(true), &e)) {
        snprintf(r->err, sizeof r->err, "%s", e.msg);
        return;
    }
    const int n = c->replicas;
    const double t_setup = pkv_clock_now();
    pkv_engine *eng = calloc((size_t)n, sizeof *eng);
    pkv_sim *sim = calloc((size_t)n, sizeof *sim);
    pkv_sim **sims = calloc((size_t)n, sizeof *sims);
    counts cnt = {0};
    const pkv_sim_sink sink = {
        .ctx = &cnt, .step = on_step, .prefill = on_prefill, .request = on_request};
    const pkv_backend_spec bs = {.kind = PKV_BACKEND_MODEL,
                                 .kv_pages = cfg.kv_pages,
                                 .bt_stride = pkv_sim_bt_stride(&cfg),
                                 .seed = cfg.seed};
    int rc = !eng || !sim || !sims, made = 0;
    for (; made < n && !rc; made++) {
        const pkv_engine_opts eo = {.policy = cfg.policy,
                                    .bucket_mode = (pkv_bucket_mode)cfg.bucket_mode,
                                    .cap_rows = cfg.max_active,
                                    .clock = PKV_CLOCK_PREDICTED,
                                    .prefill_base_s = cfg.prefill_base_s,
                                    .prefill_per_token_s = cfg.prefill_per_token_s};
        rc = pkv_engine_init(&eng[made], &cfg.model, &cal, &eo, &bs, &e);
        if (rc) break;
        rc = pkv_sim_init(&sim[made], &cfg, &eng[made], &sink, NULL, &e);
        sims[made] = &sim[made];
        if (rc) pkv_engine_free(&eng[made]);
    }
    pkv_workload wl;
    gsl_rng *g = pkv_stream_create(cfg.seed, "router");
    const int wl_ok = !rc && pkv_workload_init(&wl, &cfg.workload, cfg.seed) == 0;
    if (!rc && !wl_ok) rc = pkv_fail(&e, "out of memory");
    pkv_fleet f = {.n = n,
                   .replicas = sims,
                   .wl = &wl,
                   .spec = {.router = PKV_ROUTER_LEAST_REQUESTS},
                   .r_route = g};
    const double t0 = pkv_clock_now();
    if (!rc) rc = pkv_fleet_run(&f, &e);
    const double host = pkv_clock_now() - t0;
    if (rc) {
        snprintf(r->err, sizeof r->err, "%s", e.msg);
    } else {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double t_end = 0;
        for (int i = 0; i < n; i++)
            if (sim[i].t_now > t_end) t_end = sim[i].t_now;
        *r = (fleet_result){.ok = 1,
                            .iterations = cnt.iterations,
                            .finished = cnt.finished,
                            .setup_s = t0 - t_setup,
                            .host_s = host,
                            .t_sim = t_end,
                            .route_s = f.route_s,
                            .rss_mb = ru.ru_maxrss / 1024.0};
    }
    pkv_fleet_free(&f);
    if (wl_ok) pkv_workload_free(&wl);
    if (g) gsl_rng_free(g);
    for (int i = 0; i < made; i++) pkv_sim_free(&sim[i]), pkv_engine_free(&eng[i]);
    free(eng), free(sim), free(sims);
    pkv_calib_free(&cal);
    pkv_config_free(&cfg);
}

/* In a child process, so that peak RSS is the case's own. */
static fleet_result bench_case(const fleet_case *c) {
    fleet_result r = {0};
    if (pkv_bench_in_child(run_case, c, &r, sizeof r))
        snprintf(r.err, sizeof r.err, "the benchmark's child process failed");
    return r;
}

static void help(void) {
    puts("usage: pkvsim bench fleet [--out FILE] [--requests N]\n"
         "Runs fleets of 1, 10, 100 and 1,000 replicas of llama-3.1-8b on the model backend\n"
         "(the H200's fitted calibration, 50,000 KV pages a replica) behind the\n"
         "least_requests router, with 8 and 64 active rows a replica, under Poisson load\n"
         "at 0.9x the saturated throughput one replica reaches (measured first), for about\n"
         "N requests a replica (default 200; at least 20,000 in all). Reports the host\n"
         "seconds to set the replicas up, replica-iterations (decode steps and prefill\n"
         "batches) per second of the run's host time on one core, the router's host time\n"
         "per request and the case's peak RSS. The table goes to stdout and to FILE\n"
         "(default bench_fleet.txt).");
}

int pkv_cmd_bench_fleet(int argc, char **argv) {
    const char *out = "bench_fleet.txt", *req_s = NULL;
    const pkv_cli_opt opts[] = {{"out", 'o', PKV_CLI_STRING, &out, 0},
                                {"requests", 'n', PKV_CLI_STRING, &req_s, 0}};
    const int rc0 = pkv_cli_options("bench fleet", argc, argv, opts, 2, help);
    if (rc0 >= 0) return rc0;
    uint64_t per = 200;
    if (req_s && (pkv_cli_parse_u64(req_s, &per) || per == 0)) {
        fprintf(stderr, "pkvsim bench fleet: --requests: \"%s\" is not a positive integer\n",
                req_s);
        return 2;
    }
    pkv_out fo;
    FILE *f = pkv_cli_out_open("bench fleet", &fo, out);
    if (!f) return 1;
    char head[256];
    snprintf(head, sizeof head, "pkvsim %s, revision %s, one core\n\n", PKV_VERSION, PKV_GIT_REV);
    const char *hdr =
        "| replicas | rows | requests | replica-iterations | set-up s | host s | iterations/s | "
        "route us/request | simulated s | peak RSS MB "
        "|\n|---|---|---|---|---|---|---|---|---|---|\n";
    fputs(head, stdout), fputs(head, f), fputs(hdr, stdout), fputs(hdr, f);
    static const int replicas[] = {1, 10, 100, 1000}, rows[] = {8, 64};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        /* One replica saturated (arrivals far above its service): its throughput. */
        const fleet_case sat = {1, rows[k], 1e6, 20000};
        const fleet_result s = bench_case(&sat);
        if (!s.ok) {
            fprintf(stderr, "pkvsim bench fleet: %s\n", s.err);
            rc = 1;
            break;
        }
        const double x = s.finished / s.t_sim;
        for (int m = 0; m < 4 && !rc; m++) {
            uint64_t n = per * (uint64_t)replicas[m];
            if (n < 20000) n = 20000;
            const fleet_case c = {replicas[m], rows[k], 0.9 * x, n};
            const fleet_result r = bench_case(&c);
            if (!r.ok) {
                fprintf(stderr, "pkvsim bench fleet: %s\n", r.err);
                rc = 1;
                break;
            }
            char row[320];
            snprintf(row, sizeof row,
                     "| %d | %d | %llu | %llu | %.3f | %.3f | %.0f | %.3f | %.1f | %.1f |\n",
                     c.replicas, c.rows, (unsigned long long)r.finished,
                     (unsigned long long)r.iterations, r.setup_s, r.host_s, r.iterations / r.host_s,
                     1e6 * r.route_s / (double)r.finished, r.t_sim, r.rss_mb);
            fputs(row, stdout), fputs(row, f);
            fflush(stdout);
        }
    }
    return pkv_cli_out_close("bench fleet", &fo, rc);
}
