/* Validation files (experiments/validation/): an experiment with a `validation` section
 * that replays one published measurement of a real serving engine; vfile.h. */
#include "vfile.h"
#include "config_workload.h"
#include "jsonv.h"
#include "pkv_files.h"
#include "floor.h"
#include "runner.h"
#include "runner_parts.h"

#include <dirent.h>
#include <gsl/gsl_statistics_double.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The benchmark tools a published figure may come from, and where each runs: through
 * the engine's HTTP server with streaming (TTFT at the first streamed token, TPOT as
 * (E2E - TTFT) / (output tokens - 1), request throughput as finished requests over the
 * first send to the last finish: what pkvsim's summary measures), or in the engine's
 * process (no server, no client work; vLLM's LLM class and its offline defaults). */
static const struct {
    const char *name;
    int client; /* PKV_CLIENT_* */
} clients[] = {
    {"vllm bench serve", PKV_CLIENT_SERVER},
    {"benchmark_serving", PKV_CLIENT_SERVER},
    {"sglang.bench_serving", PKV_CLIENT_SERVER},
    {"genai-perf", PKV_CLIENT_SERVER},
    {"evalscope", PKV_CLIENT_SERVER},
    {"vllm bench throughput", PKV_CLIENT_OFFLINE},
    {"benchmark_throughput", PKV_CLIENT_OFFLINE},
    {"vllm bench latency", PKV_CLIENT_OFFLINE},
    {"benchmark_latency", PKV_CLIENT_OFFLINE},
    {"sglang.bench_offline_throughput", PKV_CLIENT_OFFLINE},
    {"sglang.bench_one_batch", PKV_CLIENT_OFFLINE},
};

/* clients[]'s entry for name (-1: none). */
static int client_kind(const char *name) {
    for (size_t i = 0; i < sizeof clients / sizeof *clients; i++)
        if (!strcmp(clients[i].name, name)) return (int)i;
    return -1;
}

const char *const pkv_ttft_part_names[PKV_TTFT_PARTS] = {"queue", "wait_for_budget", "prefill",
                                                         "client"};

/* The units a published figure may be given in, per the summary figure's unit. */
static int unit_scale(const pkv_summary_figure *f, const char *unit, double *scale) {
    static const struct {
        const char *figure_unit, *unit;
        double scale;
    } ok[] = {{"s", "ms", 1e3},           {"s", "s", 1},
              {"requests/s", "req/s", 1}, {"output tokens/s", "tok/s", 1},
              {"tokens/s", "tok/s", 1},   {"fraction", "%", 100}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!strcmp(f->unit, ok[i].figure_unit) && !strcmp(unit, ok[i].unit)) {
            *scale = ok[i].scale;
            return 0;
        }
    return -1;
}

/* The validation section of the experiment text (parsed as the run parses it). */
static int parse_validation(pkv_vfile *v, const cJSON *root, pkv_err *e) {
    const pkv_keys k = pkv_config_keys();
    const cJSON *val, *src;
    const char *role, *s;
    double band;
    TRY(pkv_json_sub(root, "", "validation", &val, e));
    if (!val)
        return pkv_fail(e,
                        "validation: missing (a validation file replays a published measurement)");
    TRY(pkv_keys_check(k, "validation", val, "validation", e));
    if (cJSON_GetObjectItemCaseSensitive(root, "sweep"))
        return pkv_fail(e, "sweep: a validation file replays one measurement; a sweep's points "
                           "would not be run (make one file a point)");
    TRY(pkv_json_sub(val, "validation", "source", &src, e));
    if (!src) return pkv_fail(e, "validation.source: missing (where the figures come from)");
    TRY(pkv_keys_check(k, PKV_OBJ_SOURCE, src, "validation.source", e));
    static const char *const need[] = {"url", "engine", "gpu", "model", "command"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        TRY(pkv_json_str(src, "validation.source", need[i], "", NULL, &s, NULL, e));
        if (!*s) return pkv_fail(e, "validation.source.%s: required", need[i]);
    }
    TRY(pkv_json_str(src, "validation.source", "engine", "", NULL, &s, NULL, e));
    snprintf(v->engine, sizeof v->engine, "%s", s);
    TRY(pkv_json_str(src, "validation.source", "gpu", "", NULL, &s, NULL, e));
    snprintf(v->gpu, sizeof v->gpu, "%s", s);
    TRY(pkv_json_str(src, "validation.source", "version", "not stated", NULL, &s, NULL, e));
    snprintf(v->version, sizeof v->version, "%s", s);
    const char *url;
    TRY(pkv_json_str(src, "validation.source", "url", "", NULL, &url, NULL, e));
    TRY(pkv_json_str(src, "validation.source", "id", url, NULL, &s, NULL, e));
    snprintf(v->source, sizeof v->source, "%.95s", s);
    TRY(pkv_json_str(src, "validation.source", "client", "", NULL, &s, NULL, e));
    if (client_kind(s) < 0) {
        char names[512] = "";
        for (size_t i = 0; i < sizeof clients / sizeof *clients; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"", i ? ", " : "",
                     clients[i].name);
        return pkv_fail(e,
                        "validation.source.client: %s\"%s\" (the benchmark tool that "
                        "measured the figures: %s)",
                        *s ? "unknown: " : "required, got ", s, names);
    }
    snprintf(v->client, sizeof v->client, "%s", s);
    static const char *const roles[] = {"fit", "held_out", NULL};
    int ri;
    TRY(pkv_json_str(val, "validation", "role", NULL, roles, &role, &ri, e));
    v->held_out = ri == 1;
    TRY(pkv_json_bool(val, "validation", "fits_engine", true, &v->fits_engine, e));
    if (!v->fits_engine && !v->held_out)
        return pkv_fail(e, "validation.fits_engine: false (never fitted) with role \"fit\": "
                           "make its role \"held_out\"");
    TRY(pkv_json_num(val, "validation", "band_pct", NAN, 0, true, 1000, &band, e));
    TRY(pkv_json_str(val, "validation", "band_note", "", NULL, &s, NULL, e));
    if (!isnan(band) && !*s)
        return pkv_fail(e, "validation.band_note: say why the band is what it is (the source's "
                           "own spread, what it leaves unknown)");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(val, "expect");
    const int n = cJSON_IsArray(ex) ? cJSON_GetArraySize(ex) : 0;
    if (n < 1 || n > PKV_VFILE_ROWS)
        return pkv_fail(e, "validation.expect: a list of 1 to %d published figures",
                        PKV_VFILE_ROWS);
    v->n = n;
    for (int i = 0; i < n; i++) {
        char P[48];
        snprintf(P, sizeof P, "validation.expect[%d]", i);
        const cJSON *o = cJSON_GetArrayItem(ex, i);
        pkv_vrow *r = &v->rows[i];
        if (!cJSON_IsObject(o)) return pkv_fail(e, "%s: must be an object", P);
        TRY(pkv_keys_check(k, PKV_OBJ_EXPECT, o, P, e));
        TRY(pkv_json_str(o, P, "figure", "", NULL, &s, NULL, e));
        r->f = pkv_summary_figure_find(s);
        if (!r->f || strlen(s) >= sizeof r->figure)
            return pkv_fail(e,
                            "%s.figure: \"%s\" is no figure of /summary (pkvsim report --help "
                            "lists them)",
                            P, s);
        snprintf(r->figure, sizeof r->figure, "%s", s);
        r->tail = pkv_vfile_figure_kind(s) >= PKV_FIG_TTFT_P99;
        if (!cJSON_GetObjectItemCaseSensitive(o, "value"))
            return pkv_fail(e, "%s.value: required (the published figure)", P);
        TRY(pkv_json_num(o, P, "value", 0, 0, true, 1e15, &r->value, e));
        TRY(pkv_json_str(o, P, "unit", "", NULL, &s, NULL, e));
        if (strlen(s) >= sizeof r->unit || unit_scale(r->f, s, &r->scale))
            return pkv_fail(e, "%s.unit: \"%s\" is not a unit of %s (%s)", P, s, r->figure,
                            r->f->unit);
        snprintf(r->unit, sizeof r->unit, "%s", s);
        TRY(pkv_json_num(o, P, "band_pct", band, 0, true, 1000, &r->band, e));
        if (isnan(r->band))
            return pkv_fail(e, "%s.band_pct: required here or as validation.band_pct", P);
        TRY(pkv_json_str(o, P, "label", r->figure, NULL, &s, NULL, e));
        snprintf(r->label, sizeof r->label, "%.63s", s);
        r->pred = r->base = r->floor = NAN;
    }
    return 0;
}

const char *const pkv_vfile_kind_names[PKV_FIG_KINDS] = {
    "TTFT", "TPOT", "E2E", "throughput", "TTFT p99", "TPOT p99", "E2E p99"};

int pkv_vfile_figure_kind(const char *figure) {
    const int k = strstr(figure, "ttft")                            ? PKV_FIG_TTFT
                  : strstr(figure, "tpot") || strstr(figure, "itl") ? PKV_FIG_TPOT
                  : strstr(figure, "throughput")                    ? PKV_FIG_THROUGHPUT
                                                                    : PKV_FIG_E2E;
    return k != PKV_FIG_THROUGHPUT && strstr(figure, "p99") ? k + PKV_FIG_TTFT_P99 : k;
}

/* v's experiment runs what its source measured: the client's kind, the source's engine. */
static int check_engine(const pkv_vfile *v, const char *path, pkv_err *e) {
    const int ck = clients[client_kind(v->client)].client;
    if (v->cfg.client != ck)
        return pkv_fail(e,
                        "%s: serving.client is \"%s\", but validation.source.client \"%s\" "
                        "runs %s: set serving.client to \"%s\"",
                        path, pkv_client_names[v->cfg.client], v->client,
                        ck == PKV_CLIENT_OFFLINE ? "in the engine's process"
                                                 : "through the engine's server",
                        pkv_client_names[ck]);
    const char *pe = v->cfg.engine.name, *at = strchr(pe, '@');
    const size_t ln = at ? (size_t)(at - pe) : strlen(pe);
    const size_t le = strlen(v->engine); /* the engine, or a variant of it (vllm-v0) */
    if (strcmp(pe, "pkvsim") &&
        (ln < le || strncmp(pe, v->engine, le) || (ln > le && pe[le] != '-')) && !strstr(pe, "/") &&
        !strstr(pe, ".json"))
        return pkv_fail(e, "%s: serving.engine \"%s\" is not the source's engine \"%s\"", path, pe,
                        v->engine);
    return 0;
}

int pkv_vfile_load(pkv_vfile *v, const char *path, pkv_err *e) {
    *v = (pkv_vfile){.path = path};
    char *text = pkv_read_file(path, NULL, e);
    if (!text) return -1;
    pkv_err sub;
    cJSON *root = pkv_json_parse(text, path, &sub);
    int rc = root ? parse_validation(v, root, &sub) : -1;
    cJSON_Delete(root);
    if (rc) {
        free(text);
        return pkv_fail(e, "%s: %s", path, sub.msg);
    }
    if (pkv_config_parse(&v->cfg, text, path, e)) return -1; /* takes the text */
    v->cfg.backend = PKV_BACKEND_MODEL;
    if (check_engine(v, path, e)) {
        pkv_config_free(&v->cfg);
        return -1;
    }
    return 0;
}

/* The figure's statistic: the mean (-1), else its quantile (median 0.5, pNN NN/100). */
static double figure_quantile(const char *figure) {
    if (strstr(figure, "mean")) return -1;
    const char *p = strstr(figure, "_p");
    return p && p[2] >= '0' && p[2] <= '9' ? atof(p + 2) / 100 : 0.5;
}

/* Each TTFT row's floor (floor.h) over the requests the run finished (log), on one
 * replica; the rest NaN. */
static int ttft_floors(pkv_vfile *v, const pkv_request_log *log, pkv_err *e) {
    for (int i = 0; i < v->n; i++) v->rows[i].floor = NAN;
    if (v->cfg.fleet.replicas > 1) return 0;
    pkv_calib cal;
    if (pkv_run_load_calib(&v->cfg, &cal, e)) return -1;
    double top = cal.gemm_tflops; /* the GPU's top GEMM rate, FLOP/s */
    for (int k = 0; k < cal.gemm_at.n; k++) top = fmax(top, cal.gemm_at.tflops[k]);
    pkv_dense_cost dc; /* a prompt token's FLOPs per GPU: its layers, no logits (the last
                          token's alone take the LM head) */
    pkv_model_dense_cost(&v->cfg.model, &cal, 1, 0, NULL, &dc);
    pkv_calib_free(&cal);
    const double per_token = dc.flops / (top * 1e12);
    const size_t m = log->n + 1;
    double *a = malloc(3 * m * sizeof *a);
    if (!a) return pkv_fail(e, "out of memory");
    double *w = a + m, *sorted = w + m;
    size_t n = 0;
    for (size_t j = 0; j < log->n; j++)
        if (log->req[j].state == PKV_REQ_FINISHED && isfinite(log->req[j].t_first_token))
            a[n] = log->req[j].t_arrival,
            w[n++] = (log->req[j].prompt_len -
                      pkv_config_warm_tokens(&v->cfg, log->req[j].id, log->req[j].prompt_len)) *
                     per_token;
    double mean;
    const int rc = pkv_floor_flows(a, w, n, &mean, sorted);
    for (int i = 0; i < v->n && !rc && n; i++) {
        pkv_vrow *r = &v->rows[i];
        const int kind = pkv_vfile_figure_kind(r->figure);
        if (kind != PKV_FIG_TTFT && kind != PKV_FIG_TTFT_P99) continue;
        const double q = figure_quantile(r->figure);
        r->floor = (q < 0 ? mean : gsl_stats_quantile_from_sorted_data(sorted, 1, n, q)) * r->scale;
    }
    free(a);
    return rc ? pkv_fail(e, "out of memory") : 0;
}

int pkv_vfile_run(pkv_vfile *v, bool base, pkv_err *e) {
    pkv_request_log log = {0};
    const bool floored = v->floors && !base;
    pkv_run_opts ro = {.quiet = 1, .request_log = floored ? &log : NULL};
    pkv_summary sum;
    if (pkv_run_experiment(&v->cfg, &ro, &sum, e)) {
        pkv_request_log_free(&log);
        return -1;
    }
    for (int i = 0; i < v->n; i++) {
        pkv_vrow *r = &v->rows[i];
        const double x = pkv_summary_figure_value(&sum, r->f) * r->scale;
        *(base ? &r->base : &r->pred) = x;
    }
    for (int k = 0; k < PKV_TTFT_PARTS && !base; k++)
        v->ttft_parts[k] = sum.ttft_parts_n ? sum.ttft_parts_s[k] / (double)sum.ttft_parts_n : NAN;
    const int rc = floored ? ttft_floors(v, &log, e) : 0;
    pkv_request_log_free(&log);
    return rc;
}

int pkv_vfile_run_both(pkv_vfile *v, pkv_err *e) {
    if (pkv_vfile_run(v, false, e)) return -1;
    const pkv_engine_profile keep = v->cfg.engine;
    v->cfg.engine.host = (pkv_engine_host){0};
    v->cfg.engine.client_s = v->cfg.engine.multi_gpu_s = v->cfg.engine.frontend_s = 0;
    v->cfg.engine.async_output = false;
    const int rc = pkv_vfile_run(v, true, e);
    v->cfg.engine = keep;
    return rc;
}

double pkv_vfile_err(double pred, double pub) {
    return (pred - pub) / pub;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* FILES|DIR... into names (at most cap): the count, or -1 (printed, nothing left
 * allocated). */
static int list_files(int argc, char **argv, const char *cmd, char **names, int cap) {
    int n = 0;
    const char *why = NULL, *what = NULL;
    for (int i = 0; i < argc && !why; i++) {
        struct stat st;
        DIR *d = NULL;
        if (stat(argv[i], &st) || (S_ISDIR(st.st_mode) && !(d = opendir(argv[i])))) {
            why = strerror(errno), what = argv[i];
            break;
        }
        if (!d) {
            if (n == cap)
                why = "too many files";
            else
                names[n++] = strdup(argv[i]);
            continue;
        }
        const int first = n;
        for (struct dirent *de; !why && (de = readdir(d));) {
            const size_t l = strlen(de->d_name);
            if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
            char *p = n < cap ? malloc(strlen(argv[i]) + l + 2) : NULL;
            if (p) sprintf(p, "%s/%s", argv[i], de->d_name);
            if (n < cap)
                names[n++] = p;
            else
                why = "too many files";
        }
        closedir(d);
        qsort(names + first, (size_t)(n - first), sizeof *names, by_name);
        if (!why && n == first) why = "no *.json in it", what = argv[i];
    }
    for (int i = 0; i < n && !why; i++)
        if (!names[i]) why = "out of memory";
    if (!why) { /* a file named twice (or by two paths) counts once */
        int m = 0;
        for (int i = 0; i < n; i++) {
            int j = 0;
            while (j < m && !pkv_same_file(names[j], names[i])) j++;
            if (j == m) {
                names[m++] = names[i];
                continue;
            }
            fprintf(stderr, "pkvsim %s: %s is %s again: counted once\n", cmd, names[i], names[j]);
            free(names[i]);
        }
        return m;
    }
    if (what)
        fprintf(stderr, "pkvsim %s: %s: %s\n", cmd, what, why);
    else
        fprintf(stderr, "pkvsim %s: %s (at most %d)\n", cmd, why, cap);
    for (int i = 0; i < n; i++) free(names[i]);
    return -1;
}

void pkv_vfile_free(pkv_vfile *v, int nv, char **names, int n) {
    for (int i = 0; i < nv; i++) pkv_config_free(&v[i].cfg);
    free(v);
    for (int i = 0; i < n; i++) free(names[i]);
}

/* `out` is none of the n files: 0, or 2 with the message printed. */
static int output_ok(const char *cmd, const char *out, const char *opt, char **names, int n) {
    const char *what[PKV_VFILES_MAX];
    for (int i = 0; i < n; i++) what[i] = "a validation file";
    pkv_err e;
    if (!pkv_output_ok(out, (const char *const *)names, what, n, opt, &e)) return 0;
    fprintf(stderr, "pkvsim %s: %s\n", cmd, e.msg);
    return 2;
}

/* Every file loaded (NULL, printed, when one cannot be). */
static pkv_vfile *load_all(char **names, int n, const char *cmd) {
    pkv_vfile *v = calloc((size_t)n, sizeof *v);
    if (!v) {
        fputs("out of memory\n", stderr);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        pkv_err e;
        if (pkv_vfile_load(&v[i], names[i], &e)) {
            fprintf(stderr, "pkvsim %s: %s\n", cmd, e.msg);
            for (int j = 0; j < i; j++) pkv_config_free(&v[j].cfg);
            free(v);
            return NULL;
        }
    }
    return v;
}

pkv_vfile *pkv_vfile_open(const char *cmd, int argc, char **argv, const char *out, const char *opt,
                          char **names, int *n, int *status) {
    *status = 1;
    if ((*n = list_files(argc, argv, cmd, names, PKV_VFILES_MAX)) < 0) return NULL;
    if (out && (*status = output_ok(cmd, out, opt, names, *n))) {
        pkv_vfile_free(NULL, 0, names, *n);
        return NULL;
    }
    pkv_vfile *v = load_all(names, *n, cmd);
    if (!v) {
        *status = 1;
        pkv_vfile_free(NULL, 0, names, *n);
    }
    return v;
}

const char *pkv_vfile_stem(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int pkv_vfile_write_doc(cJSON *root, const char *out, const char *cmd, const char *opt) {
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    const int rc = text ? pkv_write_atomic(out, text) : (errno = ENOMEM, -1);
    free(text);
    if (rc) {
        fprintf(stderr, "pkvsim %s: %s %s: cannot write it: %s\n", cmd, opt, out, strerror(errno));
        return -1;
    }
    return 0;
}
