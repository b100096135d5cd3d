/* End to end on the model backend: determinism, conservation, preemption, the
 * HDF5 file read back field by field, interruption, common random numbers. */
#include "check.h"
#include "pkv_tol.h"
#include "testrun.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *EXP =
    "{\"name\": \"t\", \"model\": {\"hq\": 32, \"hkv\": 8, \"head_dim\": 128, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 400},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 30000},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 300},"
    "   \"num_requests\": 300, \"max_context\": 40000},"
    " \"serving\": {\"max_active\": 12, \"kv_pages\": %d, \"admission\": \"%s\"},"
    " \"route\": {\"policy\": \"%s\", \"calibration\": \"%s\"},"
    " \"run\": {\"seed\": %d, \"output\": \"%s\"}}";

typedef struct run_result {
    pkv_summary sum;
    pkv_request_rec *req;
    size_t n_req;
} run_result;

static const char *admission = "fcfs";

static int by_id(const void *a, const void *b) {
    int64_t x = ((const pkv_request_rec *)a)->id, y = ((const pkv_request_rec *)b)->id;
    return (x > y) - (x < y);
}

static int run(int pages, const char *policy, int seed, const char *out, run_result *res,
               volatile sig_atomic_t *stop) {
    char *text = malloc(4096);
    snprintf(text, 4096, EXP, pages, admission, policy,
             PKV_SOURCE_DIR "/experiments/calibration/default.json", seed, out);
    pkv_config cfg;
    pkv_err e;
    if (pkv_config_parse(&cfg, text, "test.json", &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    pkv_run_opts o = {.quiet = 1, .record = 1, .stop = stop};
    int rc = pkv_run_experiment(&cfg, &o, &res->sum, &e);
    if (rc) fprintf(stderr, "%s\n", e.msg);
    pkv_config_free(&cfg);
    /* The run's requests as the file holds them, in id (arrival) order. */
    if (!rc && (rc = pkv_h5_read_requests(out, &res->req, &res->n_req, &e)))
        fprintf(stderr, "%s\n", e.msg);
    if (!rc) qsort(res->req, res->n_req, sizeof *res->req, by_id);
    return rc;
}

/* This process's output file `tag` (cases may run side by side). */
static void tmp_path(char path[64], const char *tag) {
    snprintf(path, 64, "/tmp/pkv-test-%s-%d.h5", tag, (int)getpid());
}

/* The base run: adaptive on a small pool (6000 pages of 16 tokens) that preempts, seed 5,
 * into a. */
static void base_run(const char *a, run_result *r) {
    CHECK(run(6000, "adaptive", 5, a, r, NULL) == 0, "the base run");
}

/* Two runs saw the same requests: arrival times and lengths. */
static bool same_requests(const run_result *x, const run_result *y) {
    bool same = x->n_req == y->n_req;
    for (size_t i = 0; same && i < x->n_req; i++)
        same = x->req[i].t_arrival == y->req[i].t_arrival &&
               x->req[i].prompt_len == y->req[i].prompt_len &&
               x->req[i].decode_len == y->req[i].decode_len;
    return same;
}

static double attr_f64(hid_t f, const char *obj, const char *name) {
    double v = NAN;
    hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Aread(a, H5T_NATIVE_DOUBLE, &v);
        H5Aclose(a);
    }
    return v;
}

static int file_tables(const char *path, pkv_step_rec **steps, hsize_t *ns, pkv_request_rec **req,
                       hsize_t *nr) {
    pkv_err e;
    size_t a, b;
    if (pkv_h5_read_steps(path, steps, &a, &e) || pkv_h5_read_requests(path, req, &b, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    *ns = a, *nr = b;
    return 0;
}

/* Every dataset's on-disk type, member by member: a compound whose members do not
 * tile its size has hidden bytes. */
static herr_t no_gaps(hid_t o, const char *name, const H5L_info_t *info, void *gaps) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t d = H5Dopen2(o, name, H5P_DEFAULT); /* fails on groups */
    if (d < 0) return 0;
    hid_t t = H5Dget_type(d);
    if (H5Tget_class(t) == H5T_COMPOUND) {
        size_t sum = 0;
        for (int i = 0; i < H5Tget_nmembers(t); i++) {
            hid_t m = H5Tget_member_type(t, (unsigned)i);
            sum += H5Tget_size(m);
            H5Tclose(m);
        }
        if (sum != H5Tget_size(t)) {
            fprintf(stderr, "%s: %zu of %zu bytes are members\n", name, sum, H5Tget_size(t));
            ++*(int *)gaps;
        }
    }
    H5Tclose(t);
    H5Dclose(d);
    return 0;
}

/* A small pool (6000 pages of 16 tokens) forces preemptions; all 300 requests arrive and
 * finish, their times in order, and the tokens are the sum of the decode lengths. */
static void conserves_requests_and_tokens(void) {
    char a[64];
    tmp_path(a, "a");
    run_result r1 = {0};
    base_run(a, &r1);
    CHECK(r1.sum.preemptions > 0, "no preemption happened: the test pool is too large");
    uint64_t tokens = 0;
    size_t finished = 0;
    for (size_t i = 0; i < r1.n_req; i++) {
        if (r1.req[i].state == PKV_REQ_FINISHED) {
            finished++;
            tokens += (uint64_t)r1.req[i].decode_len;
            CHECK(r1.req[i].generated == r1.req[i].decode_len, "request %zu", i);
            CHECK(r1.req[i].t_arrival <= r1.req[i].t_admitted &&
                      r1.req[i].t_admitted < r1.req[i].t_first_token &&
                      r1.req[i].t_first_token <= r1.req[i].t_finish,
                  "request %zu times out of order", i);
        }
    }
    CHECK(r1.n_req == 300 && finished == 300, "%zu arrived, %zu finished", r1.n_req, finished);
    CHECK(tokens == r1.sum.decode_tokens, "tokens %llu != decode tokens %llu",
          (unsigned long long)tokens, (unsigned long long)r1.sum.decode_tokens);

    unlink(a);
    free(r1.req);
}

/* Determinism: same seed -> byte-identical tables; different seed -> different. */
static void same_seed_same_tables(void) {
    char a[64], b[64], c[64];
    tmp_path(a, "a"), tmp_path(b, "b"), tmp_path(c, "c");
    run_result r1 = {0}, r2 = {0}, r3 = {0};
    CHECK(run(6000, "adaptive", 5, a, &r1, NULL) == 0, "run 1");
    CHECK(run(6000, "adaptive", 5, b, &r2, NULL) == 0, "run 2 (same seed)");
    pkv_step_rec *s1, *s2, *s3;
    pkv_request_rec *q1, *q2, *q3;
    hsize_t ns1, ns2, ns3, nq1, nq2, nq3;
    CHECK(file_tables(a, &s1, &ns1, &q1, &nq1) == 0, "read %s", a);
    CHECK(file_tables(b, &s2, &ns2, &q2, &nq2) == 0, "read %s", b);
    CHECK(ns1 == ns2 && memcmp(s1, s2, ns1 * sizeof *s1) == 0, "/steps differ for one seed");
    CHECK(nq1 == nq2 && memcmp(q1, q2, nq1 * sizeof *q1) == 0, "/requests differ for one seed");
    CHECK(run(6000, "adaptive", 6, c, &r3, NULL) == 0, "run 3 (other seed)");
    CHECK(file_tables(c, &s3, &ns3, &q3, &nq3) == 0, "read %s", c);
    CHECK(nq3 != nq1 || memcmp(q1, q3, nq1 * sizeof *q1) != 0,
          "another seed gave the same requests");
    unlink(a), unlink(b), unlink(c);
    free(s1), free(s2), free(s3), free(q1), free(q2), free(q3);
    free(r1.req), free(r2.req), free(r3.req);
}

/* The file read back field by field against what the run returned: rows in the order
 * requests left, each once; steps in order with their fields; the summary's figures; no
 * hidden bytes; the model backend's measured columns left out and listed. */
static void file_reads_back_the_run(void) {
    char a[64];
    tmp_path(a, "a");
    run_result r1 = {0};
    base_run(a, &r1);
    pkv_step_rec *s1;
    pkv_request_rec *q1;
    hsize_t ns1, nq1;
    CHECK(file_tables(a, &s1, &ns1, &q1, &nq1) == 0, "read %s", a);
    CHECK(ns1 == r1.sum.steps, "%llu step rows, summary says %llu", (unsigned long long)ns1,
          (unsigned long long)r1.sum.steps);
    CHECK(nq1 == r1.n_req, "request rows");
    /* Rows come in the order requests left the run; each request once. */
    for (size_t i = 0; i < r1.n_req; i++) CHECK(r1.req[i].id == (int64_t)i, "request ids");
    uint64_t file_tokens = 0;
    for (hsize_t i = 0; i < ns1; i++) {
        const pkv_step_rec *x = &s1[i];
        file_tokens += x->rows;
        CHECK(x->index == i, "step index %llu at row %llu", (unsigned long long)x->index,
              (unsigned long long)i);
        CHECK(i == 0 || x->t_sim >= s1[i - 1].t_sim, "time goes backwards at step %llu",
              (unsigned long long)i);
        CHECK(x->kv_bytes == x->context_tokens * 8 * 128 * 4, "kv bytes at step %llu",
              (unsigned long long)i);
        CHECK(x->route < PKV_ROUTE_COUNT && x->launches >= 1 && x->rows >= 1 && x->rows <= 12,
              "step %llu fields", (unsigned long long)i);
        CHECK(x->t_predicted > 0, "predicted time at step %llu", (unsigned long long)i);
        CHECK(isnan(x->t_device) && isnan(x->t_wall), "model backend recorded a measurement");
    }
    CHECK(file_tokens == r1.sum.decode_tokens, "file tokens %llu", (unsigned long long)file_tokens);
    const hid_t f = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0, "open");
    CHECK(attr_f64(f, "summary", "decode_tok_s") == r1.sum.decode_tok_s, "summary tok/s");
    CHECK(attr_f64(f, "summary", "ttft_p99") == r1.sum.ttft_p99, "summary ttft");
    CHECK(H5Lexists(f, "config/experiment", H5P_DEFAULT) > 0 &&
              H5Lexists(f, "config/resolved", H5P_DEFAULT) > 0 &&
              H5Lexists(f, "routes", H5P_DEFAULT) > 0,
          "groups missing");
    int gaps = 0;
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, no_gaps, &gaps);
    CHECK(gaps == 0, "%d datasets with hidden bytes", gaps);
    /* The model backend measures nothing: those columns are left out and listed. */
    CHECK(H5Lexists(f, "steps/t_predicted", H5P_DEFAULT) > 0 &&
              H5Lexists(f, "steps/t_device", H5P_DEFAULT) == 0 &&
              H5Aexists_by_name(f, "steps", "columns_left_out", H5P_DEFAULT) > 0,
          "measured columns on the model backend");
    H5Fclose(f);

    unlink(a);
    free(s1), free(q1), free(r1.req);
}

/* Recording levels: each leaves out what it says, and the summary stays the same. */
static void recording_levels_leave_out_what_they_say(void) {
    char c[64];
    tmp_path(c, "c");
    static const char *const levels[] = {"steps", "requests", "summary"};
    for (int k = 0; k < 3; k++) {
        pkv_err e;
        pkv_summary sum;
        CHECK(
            test_run_json(&sum, NULL, &e,
                          "{\"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 400},"
                          " \"num_requests\": 50}, \"route\": {\"calibration\": \"%s\"},"
                          " \"run\": {\"record\": \"%s\", \"output\": \"%s\"}}",
                          TEST_CALIBRATION, levels[k], c) == 0,
            "record %s: %s", levels[k], e.msg);
        hid_t g = H5Fopen(c, H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(g >= 0 && (H5Lexists(g, "steps", H5P_DEFAULT) > 0) == (k == 0) &&
                  H5Lexists(g, "routes", H5P_DEFAULT) == 0 &&
                  (H5Lexists(g, "requests", H5P_DEFAULT) > 0) == (k < 2) &&
                  H5Lexists(g, "summary", H5P_DEFAULT) > 0 && sum.finished == 50,
              "record %s: wrong datasets", levels[k]);
        if (g >= 0) H5Fclose(g);
    }
    unlink(c);
}

/* Common random numbers: another route policy sees the same requests. */
static void a_route_policy_sees_the_same_requests(void) {
    char a[64], c[64];
    tmp_path(a, "a"), tmp_path(c, "c");
    run_result r1 = {0};
    base_run(a, &r1);
    run_result r5 = {0};
    CHECK(run(6000, "ref_paged", 5, c, &r5, NULL) == 0, "run 5");
    CHECK(same_requests(&r5, &r1), "a route change changed the request stream");

    unlink(a), unlink(c);
    free(r1.req), free(r5.req);
}

/* FCFS admits in arrival order (first admissions never overtake); first_fit lets
 * requests that fit overtake a head that does not, and still finishes everyone. */
static void fcfs_in_order_first_fit_overtakes(void) {
    char a[64], c[64];
    tmp_path(a, "a"), tmp_path(c, "c");
    run_result r1 = {0};
    base_run(a, &r1);
    int in_order = 1;
    for (size_t i = 1; i < r1.n_req; i++)
        if (r1.req[i].t_admitted < r1.req[i - 1].t_admitted) in_order = 0;
    CHECK(in_order, "fcfs admitted out of arrival order");
    admission = "first_fit";
    run_result r6 = {0};
    CHECK(run(6000, "adaptive", 5, c, &r6, NULL) == 0, "first_fit run");
    int overtook = 0;
    size_t done6 = 0;
    for (size_t i = 0; i < r6.n_req; i++) {
        done6 += r6.req[i].state == PKV_REQ_FINISHED;
        if (i > 0 && r6.req[i].t_admitted < r6.req[i - 1].t_admitted) overtook = 1;
    }
    CHECK(overtook, "first_fit never let a request overtake (test too weak)");
    /* Common random numbers across admission policies: the same requests arrive. */
    CHECK(same_requests(&r6, &r1), "an admission change changed the request stream");
    CHECK(done6 == 300, "first_fit finished %zu of 300", done6);
    free(r6.req);
    admission = "fcfs";

    unlink(a), unlink(c);
    free(r1.req);
}

/* run.check_every on the model backend, which computes no outputs, checks nothing
 * and must not fail the run. */
static void model_backend_check_every_checks_nothing(void) {
    char c[64];
    tmp_path(c, "c");
    pkv_err e;
    CHECK(
        test_run_json(NULL, NULL, &e,
                      "{\"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 2},"
                      " \"num_requests\": 4}, \"route\": {\"calibration\": \"%s\"},"
                      " \"run\": {\"backend\": \"model\", \"check_every\": 1, \"output\": \"%s\"}}",
                      TEST_CALIBRATION, c) == 0,
        "model with check_every: %s", e.msg);
    unlink(c);
}

/* Measured prefill needs a backend that measures it: elsewhere a clear error
 * naming the key, and no output file. */
static void measured_prefill_refused_off_the_gpu(void) {
    char c[64];
    tmp_path(c, "c");
    pkv_err e;
    unlink(c);
    CHECK(
        test_run_json(NULL, NULL, &e,
                      "{\"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 2},"
                      " \"num_requests\": 4}, \"serving\": {\"prefill\":"
                      " {\"measure\": true}}, \"route\": {\"calibration\": \"%s\"},"
                      " \"run\": {\"backend\": \"model\", \"output\": \"%s\"}}",
                      TEST_CALIBRATION, c) == -1 &&
            strstr(e.msg, "serving.prefill.measure") && access(c, F_OK) != 0,
        "measured prefill on the model backend: %s", e.msg);
}

/* The study's page-table generator instead of the live allocator: whole lengths
 * reserved at admission (rounded to 4096 tokens) in a pool with 50% holes, so
 * nothing ever needs preempting, and every request still finishes. */
static void page_table_generator_never_preempts(void) {
    char c[64];
    tmp_path(c, "c");
    pkv_err e;
    pkv_summary sum;
    char *resolved = NULL;
    CHECK(test_run_json(&sum, &resolved, &e,
                        "{\"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 400},"
                        " \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 30000},"
                        " \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 300},"
                        " \"num_requests\": 300, \"max_context\": 40000},"
                        " \"serving\": {\"max_active\": 12, \"kv_pages\": 12000, \"page_tables\":"
                        " {\"mode\": \"generator\", \"hole_fraction\": 0.5, \"bucket_len\": 4096}},"
                        " \"route\": {\"calibration\": \"%s\"}, \"run\": {\"output\": \"%s\"}}",
                        TEST_CALIBRATION, c) == 0,
          "generator run: %s", e.msg);
    CHECK(sum.preemptions == 0 && sum.finished == 300,
          "generator mode: %llu preemptions, %llu finished", (unsigned long long)sum.preemptions,
          (unsigned long long)sum.finished);
    CHECK(resolved && strstr(resolved, "\"generator\"") != NULL, "resolved config lacks the mode");
    free(resolved);
    unlink(c);
}

/* Interrupted: a valid file marked so. */
static void interrupted_run_leaves_a_marked_file(void) {
    char c[64];
    tmp_path(c, "c");
    run_result r4 = {0};
    volatile sig_atomic_t stop = 1;
    CHECK(run(6000, "adaptive", 5, c, &r4, &stop) == 0, "interrupted run");
    CHECK(r4.sum.interrupted == 1, "not marked interrupted");
    const hid_t f = H5Fopen(c, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0, "interrupted run left no valid file");
    if (f >= 0) {
        hid_t at = H5Aopen_by_name(f, "provenance", "interrupted", H5P_DEFAULT, H5P_DEFAULT);
        uint64_t v = 0;
        H5Aread(at, H5T_NATIVE_UINT64, &v);
        H5Aclose(at);
        CHECK(v == 1, "provenance.interrupted = %llu", (unsigned long long)v);
        H5Fclose(f);
    }
    unlink(c);
    free(r4.req);
}

/* The cpu backend: every step of a small experiment runs the CPU mirror of its
 * route and is checked against the FP32 reference (the run stops on a miss). */
static void cpu_backend_checks_every_step(void) {
    char c[64];
    tmp_path(c, "c");
    const char *policies[3] = {"adaptive", "pkv_workqueue", "pkv_bucket"};
    for (int k = 0; k < 3; k++) {
        pkv_err e;
        CHECK(test_run_json(
                  NULL, NULL, &e,
                  "{\"model\": {\"hq\": 8, \"hkv\": 2, \"head_dim\": 64, \"page_size\": 8},"
                  " \"workload\": {\"arrival\": {\"process\": \"closed\", \"concurrency\": 3},"
                  " \"prompt\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 2000},"
                  " \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 9},"
                  " \"num_requests\": 8, \"max_context\": 2100},"
                  " \"serving\": {\"max_active\": 3, \"kv_pages\": 2000},"
                  " \"route\": {\"policy\": \"%s\", \"calibration\": \"%s\","
                  " \"overrides\": {\"gqa_group\": 4, \"min_context_tokens\": 0}},"
                  " \"run\": {\"backend\": \"cpu\", \"check_every\": 1, \"output\": \"%s\"}}",
                  policies[k], TEST_CALIBRATION, c) == 0,
              "cpu backend %s: %s", policies[k], e.msg);
        pkv_step_rec *cs;
        pkv_request_rec *cq;
        hsize_t ncs, ncq;
        CHECK(file_tables(c, &cs, &ncs, &cq, &ncq) == 0, "read cpu run");
        int ok = ncs > 10;
        for (hsize_t i = 0; i < ncs; i++)
            ok &= pkv_tol_ok(cs[i].max_err, cs[i].mean_err) && cs[i].out_mean_abs > 0 &&
                  cs[i].t_device > 0 && cs[i].t_wall >= cs[i].t_device;
        CHECK(ok, "cpu backend %s: %llu steps, a step unchecked or out of tolerance", policies[k],
              (unsigned long long)ncs);
        free(cs), free(cq);
    }

    unlink(c);
}

/* run.cuda_graph: auto resolves to graphs for a dense full model under the policies
 * graphs hold, to none elsewhere (the oracle's and a mixture of experts' included); JSON
 * booleans and the strings both parse. */
static void cuda_graph_auto_resolves(void) {
    const char *cases[][3] = {
        {"llama-3.1-8b", "adaptive", "auto"},    {"llama-3.1-8b", "pkv_bucket", "auto"},
        {"study-layer", "adaptive", "\"auto\""}, {"study-layer", "adaptive", "true"},
        {"llama-3.1-8b", "adaptive", "false"},   {"llama-3.1-8b", "oracle", "auto"},
        {"qwen3-30b-a3b", "adaptive", "auto"}};
    const int want[] = {PKV_GRAPH_ON,  PKV_GRAPH_OFF, PKV_GRAPH_OFF, PKV_GRAPH_ON,
                        PKV_GRAPH_OFF, PKV_GRAPH_OFF, PKV_GRAPH_OFF};
    for (int k = 0; k < 7; k++) {
        char *text = malloc(1024);
        const int aut = strcmp(cases[k][2], "auto") == 0;
        snprintf(text, 1024,
                 "{\"model\": \"%s\", \"workload\": {\"arrival\": {\"process\": "
                 "\"closed\", \"concurrency\": 1}, \"prompt\": {\"dist\": \"fixed\", "
                 "\"value\": 10}, \"decode\": {\"dist\": \"fixed\", \"value\": 2}, "
                 "\"num_requests\": 1}, \"route\": {\"policy\": \"%s\"}%s%s%s}",
                 cases[k][0], cases[k][1],
                 aut ? "" : ", \"run\": {\"cuda_graph\": ", aut ? "" : cases[k][2], aut ? "" : "}");
        pkv_config cfg;
        pkv_err e;
        int rc = pkv_config_parse(&cfg, text, "graph.json", &e); /* takes the text */
        const int got = rc ? -1 : pkv_config_graphs(&cfg) ? PKV_GRAPH_ON : PKV_GRAPH_OFF;
        CHECK(got == want[k], "run.cuda_graph %s, %s, %s: %d (%s)", cases[k][0], cases[k][1],
              cases[k][2], got, rc ? e.msg : "");
        if (!rc) pkv_config_free(&cfg);
    }
}

static const pkv_test_case cases[] = {
    PKV_CASE(conserves_requests_and_tokens),
    PKV_CASE(same_seed_same_tables),
    PKV_CASE(file_reads_back_the_run),
    PKV_CASE(recording_levels_leave_out_what_they_say),
    PKV_CASE(a_route_policy_sees_the_same_requests),
    PKV_CASE(fcfs_in_order_first_fit_overtakes),
    PKV_CASE(model_backend_check_every_checks_nothing),
    PKV_CASE(measured_prefill_refused_off_the_gpu),
    PKV_CASE(page_table_generator_never_preempts),
    PKV_CASE(interrupted_run_leaves_a_marked_file),
    PKV_CASE(cpu_backend_checks_every_step),
    PKV_CASE(cuda_graph_auto_resolves),
};
PKV_TEST_MAIN(cases)
