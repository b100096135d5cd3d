#include "report.h"
#include "h5rec.h"
#include "h5types.h"
#include "jsonv.h"
#include "pkv_route.h"
#include "summary.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

enum { MAX_RUNS = 4096, N_VALUES = 10, MAX_COLS = 6 };

/* The /summary figures reported (summary.h's rows), in column order, and their heads;
 * seconds are shown in ms or us as the head says. */
static const char *const value_names[N_VALUES] = {
    "decode_tok_s",  "decode_tok_s_wall", "decode_tok_s_device",
    "ttft_p50",      "ttft_p99",          "tpot_p50",
    "tpot_p99",      "host_overhead_s",   "request_goodput",
    "slo_attainment"};
static const char *const value_heads[N_VALUES] = {
    "tok/s (sim)", "tok/s (wall)", "tok/s (device)", "TTFT p50 ms",   "TTFT p99 ms",
    "TPOT p50 us", "TPOT p99 us",  "host us/step",   "goodput req/s", "SLO met %"};

/* Value k is a time (its summary row's unit is seconds): best low, shown scaled. */
static bool value_low(int k) {
    const pkv_summary_figure *f = pkv_summary_figure_find(value_names[k]);
    return f && !strcmp(f->unit, "s");
}

/* From the figure's unit to its head's. */
static double value_scale(int k) {
    if (strchr(value_heads[k], '%')) return 100; /* a fraction */
    return !value_low(k) ? 1 : strstr(value_heads[k], "ms") ? 1e3 : 1e6;
}
enum { V_TTFT_P99 = 4, V_TPOT_P50 = 5 }; /* the latencies given as ratios too */
enum { V_ATTAIN = 9 };                   /* slo_attainment: a group meets its SLOs by it */
/* The structural counters (the study's Table 4): means over a run's steps after warm-up,
 * kept after the summary values in run.v. */
enum { N_COUNTERS = 5 };
static const char *const counter_names[N_COUNTERS] = {"launches", "merge_launches",
                                                      "cta_work_per_sm", "kv_bytes", "merge_bytes"};
static const char *const counter_heads[N_COUNTERS] = {
    "launches/step", "merge launches/step", "CTA work/SM", "useful KV MB/step", "merge MB/step"};
static const double counter_scale[N_COUNTERS] = {1, 1, 1, 1e-6, 1e-6};

/* A fleet's pool in one run: its replicas' /replicas rows summed, and the latencies of the
 * requests it served (TTFT where prefilled, TPOT where decoded: one pool unless
 * disaggregated). */
enum { POOL_ROUTED, POOL_FINISHED, POOL_BUSY, POOL_UP_S, POOL_HIT, POOL_TTFT, POOL_TPOT, N_POOL_V };
static const char *const pool_names[N_POOL_V] = {
    "routed", "finished", "busy_share", "replica_s", "prefix_hit_rate", "ttft_p50", "tpot_p50"};
static const char *const pool_heads[N_POOL_V] = {
    "routed", "finished", "busy %", "replica-s", "prefix hit %", "TTFT p50 ms", "TPOT p50 ms"};
static const double pool_scale[N_POOL_V] = {1, 1, 100, 1, 100, 1e3, 1e3};
typedef struct pool_fig {
    char name[64];
    int role, replicas;
    double v[N_POOL_V];
} pool_fig;

typedef struct run {
    char name[128], policy[32], backend[16];
    pool_fig *pools; /* a fleet's pools (owned; NULL: not a fleet) */
    int n_pools;
    char *key;     /* the resolved configuration less what the report shows apart (owned) */
    uint64_t seed; /* run.seed: a group's runs pair with the baseline's by it */
    bool has_seed;
    cJSON *conf; /* the same, parsed (owned) */
    double v[N_VALUES + N_COUNTERS];
    double err_max, err_mean;            /* over the run's checked steps (NaN: none) */
    double route_steps[PKV_ROUTE_COUNT]; /* steps each route ran (/summary steps_ROUTE) */
    double model_err; /* model backend: its calibration's per-step error over the routes the
                         run took (held-out MAPE of pkvsim fit, else calibrate's rms); NaN:
                         measured figures, or none recorded */
    int interrupted;
    bool served; /* every request it offered finished (or was refused: past the context) */
    int gpus;    /* replicas x tensor parallel, over the fleet's pools */
} run;

/* What the grouping leaves out of the configuration: the label, the seed (runs over
 * seeds are one group), the output name, and the policy and backend (columns). */
static void strip(cJSON *root) {
    static const char *const drop[][2] = {{"run", "seed"},      {"run", "output"},
                                          {"run", "backend"},   {"route", "policy"},
                                          {"model", "figures"}, {"run", "clock"}};
    cJSON_DeleteItemFromObjectCaseSensitive(root, "name");
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, drop[i][0]),
                                                drop[i][1]);
}

/* The text of the value at a dotted path of o (NULL when absent; caller frees). */
static char *value_at(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf, *dot; o; p = dot + 1) {
        dot = strchr(p, '.');
        if (dot) *dot = 0;
        char *br = strchr(p, '['); /* NAME[N]: item N of the list NAME (a pool's key) */
        if (br) *br = 0;
        o = cJSON_GetObjectItemCaseSensitive(o, p);
        if (br) o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(br + 1)) : NULL;
        if (!dot) break;
    }
    if (!o) return NULL;
    return cJSON_IsString(o) ? strdup(o->valuestring) : cJSON_PrintUnformatted(o);
}

/* A configuration value as the table and the CSV show it (owned; NULL: none): a list of
 * pools as its pools' names, replicas, roles and calibrations ("p 1 prefill h200 + d 2
 * decode h200"); a path as its file's name. Groups are still told apart by the whole value
 * (value_at). */
static char *value_shown(const cJSON *conf, const char *path) {
    char *v = value_at(conf, path);
    if (!v) return NULL;
    cJSON *o = cJSON_Parse(v);
    if (cJSON_IsArray(o) && cJSON_GetArraySize(o) > 0 && cJSON_IsObject(o->child) &&
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o->child, "name"))) {
        char buf[512] = "";
        const cJSON *p;
        cJSON_ArrayForEach(p, o) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name"),
                        *rep = cJSON_GetObjectItemCaseSensitive(p, "replicas"),
                        *role = cJSON_GetObjectItemCaseSensitive(p, "role"),
                        *route = cJSON_GetObjectItemCaseSensitive(p, "route"),
                        *cal = cJSON_GetObjectItemCaseSensitive(route, "calibration");
            /* the GPU as the pool's calibration file names it */
            const char *c = cJSON_IsString(cal) ? cal->valuestring : "", *slash = strrchr(c, '/');
            if (slash) c = slash + 1;
            const char *dot = strrchr(c, '.');
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s %d %s%s%.*s",
                     *buf ? " + " : "", cJSON_IsString(name) ? name->valuestring : "?",
                     cJSON_IsNumber(rep) ? rep->valueint : 1,
                     cJSON_IsString(role) ? role->valuestring : "mixed", *c ? " " : "",
                     dot ? (int)(dot - c) : (int)strlen(c), c);
        }
        free(v);
        v = strdup(buf);
    } else if (!o && strchr(v, '/')) { /* a string: a path shown as its file's name */
        char *base = strdup(strrchr(v, '/') + 1);
        free(v);
        v = base;
    }
    cJSON_Delete(o);
    return v;
}

/* Every leaf path of o under prefix, appended to paths (up to cap). */
static void leaves(const cJSON *o, const char *prefix, char (*paths)[256], int *n, int cap) {
    for (const cJSON *c = o->child; c && *n < cap; c = c->next) {
        char p[256];
        snprintf(p, sizeof p, "%s%s%s", prefix, *prefix ? "." : "", c->string);
        if (cJSON_IsObject(c))
            leaves(c, p, paths, n, cap);
        else
            snprintf(paths[(*n)++], sizeof paths[0], "%s", p);
    }
}

static double attr_f64(hid_t f, const char *obj, const char *name) {
    double x = NAN;
    if (H5Aexists_by_name(f, obj, name, H5P_DEFAULT) <= 0) return x;
    hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &x) < 0) x = NAN;
        H5Aclose(a);
    }
    return x;
}

/* Whether a resolved configuration sets an SLO: its slo section's, or its classes'. */
static bool has_slo(const cJSON *conf) {
    static const char *const keys[] = {"ttft_ms", "tpot_ms", "e2el_ms"};
    const cJSON *slo = cJSON_GetObjectItemCaseSensitive(conf, "slo");
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(slo, keys[k]);
        if (cJSON_IsNumber(v) && v->valuedouble > 0) return true;
    }
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
               cJSON_GetObjectItemCaseSensitive(conf, "workload"), "classes")) > 0;
}

/* The GPUs a resolved configuration runs: each pool's (else the fleet's, else one) replicas
 * times its model's tensor parallelism. */
static int run_gpus(const cJSON *conf) {
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(conf, "fleet"),
                *pools = cJSON_GetObjectItemCaseSensitive(fl, "pools"),
                *rep = cJSON_GetObjectItemCaseSensitive(fl, "replicas");
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(conf, "model"), "tensor_parallel");
    const int tp0 = cJSON_IsNumber(tp) && tp->valueint > 0 ? tp->valueint : 1;
    if (!cJSON_GetArraySize(pools))
        return (cJSON_IsNumber(rep) && rep->valueint > 0 ? rep->valueint : 1) * tp0;
    int gpus = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(p, "replicas"),
                    *t = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(p, "model"), "tensor_parallel");
        gpus += (cJSON_IsNumber(n) ? n->valueint : 1) *
                (cJSON_IsNumber(t) && t->valueint > 0 ? t->valueint : tp0);
    }
    return gpus;
}

/* The mean and the largest value of /steps column col over the steps after warm-up,
 * NaN values (unchecked steps) left out; both NaN where no step has a value. */
static void steps_stats(hid_t f, const char *group, const char *col, double *mean, double *max) {
    char cp[96], wp[96];
    snprintf(cp, sizeof cp, "%s%ssteps/%s", group, *group ? "/" : "", col);
    snprintf(wp, sizeof wp, "%s%ssteps/warmup", group, *group ? "/" : "");
    *mean = *max = NAN;
    if (H5Lexists(f, cp, H5P_DEFAULT) <= 0 || H5Lexists(f, wp, H5P_DEFAULT) <= 0) return;
    hid_t d = H5Dopen2(f, cp, H5P_DEFAULT), w = H5Dopen2(f, wp, H5P_DEFAULT);
    hid_t s = d >= 0 ? H5Dget_space(d) : -1, sw = w >= 0 ? H5Dget_space(w) : -1;
    hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    if (sw < 0 || H5Sget_simple_extent_npoints(sw) != n) n = -1; /* columns of one table */
    if (sw >= 0) H5Sclose(sw);
    double *x = n > 0 ? malloc(sizeof *x * (size_t)n) : NULL;
    uint8_t *wu = n > 0 ? malloc((size_t)n) : NULL;
    if (x && wu && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0 &&
        H5Dread(w, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, wu) >= 0) {
        double sum = 0;
        hssize_t m = 0;
        for (hssize_t i = 0; i < n; i++)
            if (!wu[i] && x[i] == x[i]) {
                sum += x[i], m++;
                if (!(x[i] <= *max)) *max = x[i];
            }
        if (m) *mean = sum / (double)m;
    }
    free(x), free(wu);
    if (s >= 0) H5Sclose(s);
    if (d >= 0) H5Dclose(d);
    if (w >= 0) H5Dclose(w);
}

/* The median of the n values of x (sorted in place); NaN for none. */
static double median(double *x, size_t n) {
    if (!n) return NAN;
    gsl_sort(x, 1, n);
    return gsl_stats_median_from_sorted_data(x, 1, n);
}

/* A fleet run's pools from its /replicas and /requests (r->pools stays NULL for a run
 * without /replicas; a run recorded without /requests has no latencies); root is its
 * resolved configuration, for the pools' names. */
static int load_pools(const char *path, const char *group, const cJSON *root, run *r, pkv_err *e) {
    pkv_replica_rec *rep = NULL;
    pkv_request_rec *req = NULL;
    size_t nrep = 0, nreq = 0;
    pkv_err quiet; /* an absent table is no error here */
    if (pkv_h5_read_replicas_at(path, group, &rep, &nrep, &quiet)) return 0;
    if (pkv_h5_read_requests_at(path, group, &req, &nreq, &quiet)) req = NULL, nreq = 0;
    int rc = 0, np = 0;
    for (size_t i = 0; i < nrep; i++)
        if (rep[i].pool >= 64 || rep[i].replica != i) {
            rc = pkv_fail(e, "%s%s%s: /replicas row %zu is not a pkvsim replica", path,
                          *group ? ":" : "", group, i);
            goto out;
        } else if ((int)rep[i].pool >= np) {
            np = (int)rep[i].pool + 1;
        }
    double *lat = malloc(sizeof *lat * (nreq ? nreq : 1));
    r->pools = calloc(np ? (size_t)np : 1, sizeof *r->pools);
    if (!lat || !r->pools) {
        free(lat);
        rc = pkv_fail(e, "out of memory");
        goto out;
    }
    r->n_pools = np;
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(root, "fleet");
    const cJSON *pl = fl ? cJSON_GetObjectItemCaseSensitive(fl, "pools") : NULL;
    for (int p = 0; p < np; p++) {
        pool_fig *q = &r->pools[p];
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pl, p), "name");
        snprintf(q->name, sizeof q->name, "%s", cJSON_IsString(nm) ? nm->valuestring : "all");
        double busy = 0, tokens = 0;
        for (size_t i = 0; i < nrep; i++) {
            if ((int)rep[i].pool != p) continue;
            q->role = rep[i].role, q->replicas++;
            q->v[POOL_ROUTED] += (double)rep[i].routed;
            q->v[POOL_FINISHED] += (double)rep[i].finished;
            busy += rep[i].busy_s, q->v[POOL_UP_S] += rep[i].up_s;
            q->v[POOL_HIT] += (double)rep[i].prefix_hit_tokens;
            tokens += (double)rep[i].prefix_tokens;
        }
        q->v[POOL_BUSY] = q->v[POOL_UP_S] > 0 ? busy / q->v[POOL_UP_S] : NAN;
        q->v[POOL_HIT] = tokens > 0 ? q->v[POOL_HIT] / tokens : NAN;
        for (int k = POOL_TTFT; k <= POOL_TPOT; k++) {
            size_t m = 0;
            for (size_t i = 0; i < nreq; i++) {
                const pkv_request_rec *x = &req[i];
                const uint32_t at = k == POOL_TTFT ? x->prefill_replica : x->replica;
                if (at >= nrep || (int)rep[at].pool != p) continue;
                const double v = k == POOL_TTFT ? x->t_first_token - x->t_arrival
                                 : x->decode_len > 1
                                     ? (x->t_finish - x->t_first_token) / (x->decode_len - 1)
                                     : NAN;
                if (v == v) lat[m++] = v;
            }
            q->v[k] = median(lat, m);
        }
    }
    free(lat);
out:
    free(rep), free(req);
    return rc;
}

/* One run: a file's root, or a sweep's point (group "points/NNNNN"). */
/* A calibration's per-step error of its route models (its fit section: pkvsim fit's
 * held-out MAPE, else calibrate's rms relative error), weighted by the steps each route
 * ran; NaN where it records none for a route the run took. */
static double model_error(const cJSON *cal, const double *route_steps) {
    const cJSON *fit = cal ? cJSON_GetObjectItemCaseSensitive(cal, "fit") : NULL;
    const cJSON *routes = fit ? cJSON_GetObjectItemCaseSensitive(fit, "routes") : NULL;
    double sum = 0, steps = 0;
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        if (!(route_steps[k] > 0)) continue;
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(routes, pkv_route_names[k]);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "held_out_mape");
        if (!cJSON_IsNumber(x)) x = cJSON_GetObjectItemCaseSensitive(o, "rms_rel_error");
        if (!cJSON_IsNumber(x)) return NAN;
        sum += route_steps[k] * x->valuedouble, steps += route_steps[k];
    }
    return steps > 0 ? sum / steps : NAN;
}

static int load_run(hid_t f, const char *path, const char *group, run *r, pkv_err *e) {
    char *resolved = NULL, *backend = NULL;
    char cp[64], pp[64], sp[64];
    snprintf(cp, sizeof cp, "%s%sconfig/resolved", group, *group ? "/" : "");
    snprintf(pp, sizeof pp, "%s%sprovenance", group, *group ? "/" : "");
    snprintf(sp, sizeof sp, "%s%ssummary", group, *group ? "/" : "");
    int rc = -1;
    if (pkv_h5_text(f, cp, 0, NULL, &resolved) || pkv_h5_text(f, pp, 1, "backend", &backend) ||
        H5Lexists(f, sp, H5P_DEFAULT) <= 0) {
        pkv_fail(e,
                 "%s%s%s: not a complete pkvsim output (no /config/resolved, /provenance or "
                 "/summary)",
                 path, *group ? ":" : "", group);
        goto out;
    }
    cJSON *root = cJSON_Parse(resolved);
    if (!root) {
        pkv_fail(e, "%s: /config/resolved is not JSON", path);
        goto out;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *route = cJSON_GetObjectItemCaseSensitive(root, "route");
    const cJSON *pol = route ? cJSON_GetObjectItemCaseSensitive(route, "policy") : NULL;
    snprintf(r->name, sizeof r->name, "%s", cJSON_IsString(name) ? name->valuestring : "?");
    snprintf(r->policy, sizeof r->policy, "%s", cJSON_IsString(pol) ? pol->valuestring : "?");
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    const cJSON *rn = cJSON_GetObjectItemCaseSensitive(root, "run");
    const cJSON *sd = rn ? cJSON_GetObjectItemCaseSensitive(rn, "seed") : NULL;
    /* a number, or (beyond what a double prints exactly) its digits */
    r->has_seed = cJSON_IsNumber(sd) || cJSON_IsString(sd);
    r->seed = cJSON_IsNumber(sd)   ? (uint64_t)sd->valuedouble
              : cJSON_IsString(sd) ? strtoull(sd->valuestring, NULL, 10)
                                   : 0;
    strip(root);
    /* Files by what they are, not where they were: the calibration by its base name and
     * a hash of its text (the run's copy), the trace by its base name. */
    cJSON *rt = cJSON_GetObjectItemCaseSensitive(root, "route");
    const cJSON *cal = rt ? cJSON_GetObjectItemCaseSensitive(rt, "calibration") : NULL;
    char calp[64], *cal_text = NULL, label[320];
    snprintf(calp, sizeof calp, "%s%scalibration/file", group, *group ? "/" : "");
    if (cJSON_IsString(cal) && pkv_h5_text(f, calp, 0, NULL, &cal_text) == 0) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (const char *c = cal_text; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        const char *base = strrchr(cal->valuestring, '/');
        snprintf(label, sizeof label, "%s #%08llx", base ? base + 1 : cal->valuestring,
                 (unsigned long long)(h >> 32));
        cJSON_ReplaceItemInObjectCaseSensitive(rt, "calibration", cJSON_CreateString(label));
    }
    cJSON *cal_json = cal_text ? cJSON_Parse(cal_text) : NULL;
    free(cal_text);
    cJSON *wl = cJSON_GetObjectItemCaseSensitive(root, "workload");
    cJSON *tr = wl ? cJSON_GetObjectItemCaseSensitive(wl, "trace") : NULL;
    const cJSON *tp = tr ? cJSON_GetObjectItemCaseSensitive(tr, "path") : NULL;
    if (cJSON_IsString(tp) && strrchr(tp->valuestring, '/')) {
        snprintf(label, sizeof label, "%s", strrchr(tp->valuestring, '/') + 1);
        cJSON_ReplaceItemInObjectCaseSensitive(tr, "path", cJSON_CreateString(label));
    }
    r->conf = root;
    r->key = cJSON_PrintUnformatted(root);
    if (load_pools(path, group, root, r, e)) goto out;
    for (int k = 0; k < N_VALUES; k++) r->v[k] = attr_f64(f, sp, value_names[k]);
    double unused, unused_max;
    for (int k = 0; k < N_COUNTERS; k++)
        steps_stats(f, group, counter_names[k], &r->v[N_VALUES + k], &unused);
    steps_stats(f, group, "max_err", &unused, &r->err_max);
    steps_stats(f, group, "mean_err", &r->err_mean, &unused_max);
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        char attr[48];
        snprintf(attr, sizeof attr, "steps_%s", pkv_route_names[k]);
        r->route_steps[k] = attr_f64(f, sp, attr);
    }
    r->interrupted = attr_f64(f, sp, "interrupted") == 1;
    const double offered = attr_f64(f, sp, "offered"), arrived = attr_f64(f, sp, "arrived"),
                 refused = attr_f64(f, sp, "refused"); /* NaN: a file from before refusals */
    r->served = attr_f64(f, sp, "bounded") != 1 && !r->interrupted &&
                !(offered > 0 && arrived < offered) &&
                attr_f64(f, sp, "finished") + (isnan(refused) ? 0 : refused) >= arrived;
    r->gpus = run_gpus(root);
    if (!has_slo(root)) r->v[V_ATTAIN] = NAN; /* every request "meets" no SLO: no figure */
    r->model_err = strcmp(r->backend, "model") ? NAN : model_error(cal_json, r->route_steps);
    cJSON_Delete(cal_json);
    rc = r->key ? 0 : pkv_fail(e, "out of memory");
out:
    free(resolved);
    free(backend);
    return rc;
}

/* A sweep's axes (the /sweep/index columns that are JSON paths): their columns come
 * first. */
static char axes[MAX_COLS * 2][256];
static int n_axes;

static herr_t note_axis(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    (void)g, (void)info, (void)op;
    int known = 0;
    for (int a = 0; a < n_axes && !known; a++) known = !strcmp(axes[a], name);
    if (strchr(name, '.') && !known && n_axes < MAX_COLS * 2)
        snprintf(axes[n_axes++], sizeof axes[0], "%.255s", name);
    return 0;
}

/* The runs of one file: itself, or each point of a sweep (whose axes are noted). */
static int load_file(const char *path, run *runs, int *n, pkv_err *e) {
    char(*grp)[32];
    int n_runs;
    if (pkv_h5_runs(path, &grp, &n_runs, e)) return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int rc = f < 0 ? pkv_fail(e, "%s: not a readable HDF5 file", path) : 0;
    for (int i = 0; !rc && i < n_runs; i++)
        rc = *n == MAX_RUNS ? pkv_fail(e, "at most %d runs", MAX_RUNS)
                            : load_run(f, path, grp[i], &runs[(*n)++], e);
    if (!rc && H5Lexists(f, "/sweep", H5P_DEFAULT) > 0 &&
        H5Lexists(f, "/sweep/index", H5P_DEFAULT) > 0) {
        hid_t g = H5Gopen2(f, "/sweep/index", H5P_DEFAULT);
        if (g >= 0) {
            H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, note_axis, NULL);
            H5Gclose(g);
        }
    }
    if (f >= 0) H5Fclose(f);
    free(grp);
    return rc;
}

static int same_group(const run *a, const run *b) {
    return !strcmp(a->key, b->key) && !strcmp(a->policy, b->policy) &&
           !strcmp(a->backend, b->backend);
}

/* The configuration paths whose values differ between runs: the table's columns. */
static char cols[MAX_COLS][256];
static int n_cols;

static int by_string(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* How many distinct tuples the runs' values of cols[0..n_cols) and path make. */
static int distinct_with(const run *runs, int n, const char *path) {
    char **t = calloc((size_t)n, sizeof *t);
    int k = 0;
    for (int i = 0; t && i < n; i++) {
        size_t len = 1, used = 0;
        char *v[MAX_COLS + 1];
        for (int c = 0; c <= n_cols; c++) {
            v[c] = value_at(runs[i].conf, c < n_cols ? cols[c] : path);
            len += (v[c] ? strlen(v[c]) : 0) + 1;
        }
        t[i] = malloc(len);
        for (int c = 0; c <= n_cols; c++) {
            if (t[i]) used += (size_t)snprintf(t[i] + used, len - used, "%s\x1f", v[c] ? v[c] : "");
            free(v[c]);
        }
        if (!t[i]) break;
    }
    if (t && (n == 0 || t[n - 1])) {
        qsort(t, (size_t)n, sizeof *t, by_string);
        for (int i = 0; i < n; i++) k += i == 0 || strcmp(t[i], t[i - 1]);
    }
    for (int i = 0; t && i < n; i++) free(t[i]);
    free(t);
    return k;
}

/* Of the paths whose values differ between runs, a sweep's axes first, then the first
 * (in the configuration's order) that tell more runs apart than those taken before
 * them: a path that follows from others (an engine's scheduler, batch and cache defaults when
 * serving.engine is swept) takes no column from one that is swept beside them (fleet.replicas). */
static void find_columns(const run *runs, int n) {
    static char paths[512][256];
    n_cols = 0;
    int have = 1; /* distinct tuples of the columns taken */
    for (int a = 0; a < n_axes && n_cols < MAX_COLS; a++) { /* a sweep's axes first */
        const int d = distinct_with(runs, n, axes[a]);
        if (d > have) {
            snprintf(cols[n_cols++], sizeof cols[0], "%.255s", axes[a]);
            have = d;
        }
    }
    for (int i = 0; i < n && n_cols < MAX_COLS; i++) {
        int np = 0;
        leaves(runs[i].conf, "", paths, &np, 512);
        for (int p = 0; p < np && n_cols < MAX_COLS; p++) {
            int known = 0;
            for (int c = 0; c < n_cols && !known; c++) known = !strcmp(cols[c], paths[p]);
            if (known) continue;
            const int d = distinct_with(runs, n, paths[p]);
            if (d > have) {
                snprintf(cols[n_cols++], sizeof cols[0], "%.255s", paths[p]);
                have = d;
            }
        }
    }
}

/* Groups in order of their columns' values (numbers as numbers), then policy. */
static const run *sort_runs;
static int cmp_runs(const void *pa, const void *pb) {
    const run *a = &sort_runs[*(const int *)pa], *b = &sort_runs[*(const int *)pb];
    int c = strcmp(a->name, b->name);
    for (int k = 0; !c && k < n_cols; k++) {
        char *x = value_at(a->conf, cols[k]), *y = value_at(b->conf, cols[k]);
        char *ex, *ey;
        double dx = x ? strtod(x, &ex) : 0, dy = y ? strtod(y, &ey) : 0;
        if (x && y && *x && *y && !*ex && !*ey)
            c = (dx > dy) - (dx < dy);
        else
            c = strcmp(x ? x : "", y ? y : "");
        free(x), free(y);
    }
    return c ? c : strcmp(a->policy, b->policy);
}

/* mean and sample sd of value k over the runs of a's group; NaN values are skipped. */
static void group_stats(const run *runs, int n, const run *a, int k, double *mean, double *sd,
                        int *count) {
    static double x[MAX_RUNS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (same_group(&runs[i], a) && runs[i].v[k] == runs[i].v[k]) x[m++] = runs[i].v[k];
    *count = m;
    *mean = m ? gsl_stats_mean(x, 1, (size_t)m) : NAN;
    *sd = m > 1 ? gsl_stats_sd_m(x, 1, (size_t)m, *mean) : NAN;
}

/* A group's first row, its configuration columns, policy, backend and run count. */
/* The mean model error of a group's runs (NaN: measured, or unknown). */
static double group_model_error(const run *runs, int n, const run *g) {
    double sum = 0;
    int c = 0;
    for (int j = 0; j < n; j++)
        if (same_group(&runs[j], g)) sum += runs[j].model_err, c++;
    return c ? sum / c : NAN;
}

static void group_head(FILE *table, const run *r, int interrupted, int count) {
    fprintf(table, "| %s%s |", r->name, interrupted ? " (interrupted)" : "");
    for (int c = 0; c < n_cols; c++) {
        char *v = value_shown(r->conf, cols[c]);
        fprintf(table, " %s |", v ? v : "—");
        free(v);
    }
    fprintf(table, " %s | %s | %d |", r->policy, r->backend, count);
}

/* The summary value a name selects (-1: none); latencies and host time are best low. */
static int value_index(const char *name) {
    for (int k = 0; k < N_VALUES; k++)
        if (!strcmp(value_names[k], name)) return k;
    return -1;
}

/* Whether g's group meets its SLOs: 1 when every run served every request it offered and
 * the group's mean SLO attainment is at least attain; 0 when the attainment is short, -2
 * when a run left requests unserved; -1 when no SLO is set. */
static int group_meets(const run *runs, int n, const run *g, double attain) {
    double m, sd;
    int c;
    group_stats(runs, n, g, V_ATTAIN, &m, &sd, &c);
    if (isnan(m)) return -1;
    for (int j = 0; j < n; j++)
        if (same_group(&runs[j], g) && !runs[j].served) return -2;
    return m >= attain;
}

enum { BEST_CHEAPEST = -2 }; /* --best cheapest */

/* Whether column c sizes the fleet (its GPUs): --best cheapest searches over it. */
static bool size_column(int c) {
    return strstr(cols[c], "replicas") || strstr(cols[c], "pools") ||
           strstr(cols[c], "tensor_parallel");
}

/* Whether runs a and b are alike but for what --best searches: policy and backend (and,
 * cheap, every column but the fleet's size: one answer per load and setting). */
static bool same_setting(const run *a, const run *b, bool cheap) {
    if (strcmp(a->policy, b->policy) || strcmp(a->backend, b->backend)) return false;
    for (int c = 0; cheap && c < n_cols; c++) {
        if (size_column(c)) continue;
        char *x = value_at(a->conf, cols[c]), *y = value_at(b->conf, cols[c]);
        const bool same = (!x && !y) || (x && y && !strcmp(x, y));
        free(x), free(y);
        if (!same) return false;
    }
    return true;
}

/* The best group of each policy and backend by value k (a sweep's best point): the
 * largest throughput, the smallest latency; by BEST_CHEAPEST, of the groups that meet
 * their SLOs, the one of fewest GPUs (then the highest attainment). */
static void best_table(FILE *table, const run *runs, const int *order, int n, int k,
                       double attain) {
    const int cheap = k == BEST_CHEAPEST, low = cheap || value_low(k);
    if (cheap)
        fprintf(table,
                "\nCheapest group meeting its SLOs (every request served, %.4g%% or more within "
                "them), for each setting but the fleet's size: the fewest GPUs\n\n| experiment |",
                100 * attain);
    else
        fprintf(table, "\nBest group of each policy and backend by %s (%s):\n\n| experiment |",
                value_names[k], low ? "lowest" : "highest");
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table, " policy | backend | runs |%s %s |\n|---|", cheap ? " GPUs |" : "",
            value_heads[cheap ? V_ATTAIN : k]);
    for (int c = 0; c < n_cols + 4 + cheap; c++) fprintf(table, "---|");
    fputc('\n', table);
    for (int oi = 0; oi < n; oi++) { /* each setting once, in table order */
        const run *a = &runs[order[oi]];
        int seen = 0;
        for (int oj = 0; oj < oi && !seen; oj++) seen = same_setting(&runs[order[oj]], a, cheap);
        if (seen) continue;
        int best = -1, best_count = 0;
        double best_m = NAN;
        for (int j = 0; j < n; j++) {
            const run *b = &runs[j];
            if (!same_setting(a, b, cheap)) continue;
            if (cheap && group_meets(runs, n, b, attain) != 1) continue;
            double m, sd;
            int c;
            group_stats(runs, n, b, cheap ? V_ATTAIN : k, &m, &sd, &c);
            const bool better = cheap ? best < 0 || b->gpus < runs[best].gpus ||
                                            (b->gpus == runs[best].gpus && m > best_m)
                                      : !isnan(m) && (best < 0 || (low ? m < best_m : m > best_m));
            if (better) best = j, best_m = m, best_count = c;
        }
        if (best < 0 && !cheap) continue;
        if (best < 0) { /* the setting, its size columns blank: no answer */
            fprintf(table, "| %s |", a->name);
            for (int c = 0; c < n_cols; c++) {
                char *v = size_column(c) ? NULL : value_shown(a->conf, cols[c]);
                fprintf(table, " %s |", v ? v : "—");
                free(v);
            }
            fprintf(table, " %s | %s | — | none meets the SLOs | — |\n", a->policy, a->backend);
            continue;
        }
        group_head(table, &runs[best], 0, best_count);
        if (cheap) fprintf(table, " %d |", runs[best].gpus);
        fprintf(table, " %.4g |\n", best_m * value_scale(cheap ? V_ATTAIN : k));
    }
}

/* Paired by seed: value k of each run of g's group over the baseline group's run of
 * its seed; *pm the mean of those ratios, *half the half-width of its 95% Student t
 * interval (NaN under two pairs), *np the pairs. */
static void paired_ratio(const run *runs, int n, const run *g, const run *base, int k, double *pm,
                         double *half, int *np) {
    static double pr[MAX_RUNS];
    *np = 0;
    for (int j = 0; j < n; j++) {
        if (!same_group(&runs[j], g)) continue;
        for (int b = 0; b < n; b++)
            if (same_group(&runs[b], base) && runs[b].has_seed && runs[j].has_seed &&
                runs[b].seed == runs[j].seed && runs[b].v[k] > 0 && runs[j].v[k] == runs[j].v[k]) {
                pr[(*np)++] = runs[j].v[k] / runs[b].v[k];
                break;
            }
    }
    *pm = *np ? gsl_stats_mean(pr, 1, (size_t)*np) : NAN;
    *half = *np > 1 ? gsl_cdf_tdist_Pinv(0.975, *np - 1) * gsl_stats_sd_m(pr, 1, (size_t)*np, *pm) /
                          sqrt((double)*np)
                    : NAN;
}

static void print_paired(FILE *table, double pm, double half, int np) {
    if (!isnan(half))
        fprintf(table, " %.3fx [%.3f, %.3f] (%d) |", pm, pm - half, pm + half, np);
    else if (!isnan(pm))
        fprintf(table, " %.3fx (%d) |", pm, np);
    else
        fprintf(table, " — |");
}

/* The runs of g's group: their largest error, the mean of their mean errors (NaN
 * where no step was checked), each route's share of their steps; returns the runs. */
static int group_checks(const run *runs, int n, const run *g, double *err_max, double *err_mean,
                        double share[PKV_ROUTE_COUNT]) {
    double err_sum = 0, all = 0;
    int err_n = 0, count = 0;
    *err_max = NAN;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) share[r] = 0;
    for (int j = 0; j < n; j++) {
        if (!same_group(&runs[j], g)) continue;
        count++;
        if (!(runs[j].err_max <= *err_max)) *err_max = runs[j].err_max;
        if (runs[j].err_mean == runs[j].err_mean) err_sum += runs[j].err_mean, err_n++;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (runs[j].route_steps[r] > 0) share[r] += runs[j].route_steps[r];
    }
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) all += share[r];
    for (int r = 0; r < PKV_ROUTE_COUNT && all > 0; r++) share[r] /= all;
    *err_mean = err_n ? err_sum / err_n : NAN;
    return count;
}

/* Wall and device throughput against the baseline (paired by seed), the largest and
 * the mean error of the checked steps, and the routes the steps ran: the study's
 * Table 2. */
static void routes_table(FILE *table, const run *runs, const int *order, int n,
                         const char *baseline) {
    fprintf(table,
            "\nWall and device decode throughput against %s (paired by seed, 95%% CI), the "
            "error of the checked steps, and the routes the steps ran:\n\n| experiment |",
            baseline);
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table,
            " policy | backend | runs | tok/s (wall) | wall vs %s | tok/s (device) | "
            "device vs %s | max abs err | mean abs err | steps by route |\n|---|",
            baseline, baseline);
    for (int c = 0; c < n_cols + 10; c++) fprintf(table, "---|");
    fputc('\n', table);
    static const int ks[2] = {1, 2}; /* decode_tok_s_wall, decode_tok_s_device */
    for (int oi = 0; oi < n; oi++) {
        const int i = order[oi];
        int first = 1, count = 0;
        for (int oj = 0; oj < oi && first; oj++) first = !same_group(&runs[order[oj]], &runs[i]);
        if (!first) continue;
        double err_max, err_mean, share[PKV_ROUTE_COUNT];
        count = group_checks(runs, n, &runs[i], &err_max, &err_mean, share);
        group_head(table, &runs[i], 0, count);
        run base = runs[i];
        snprintf(base.policy, sizeof base.policy, "%s", baseline);
        for (int q = 0; q < 2; q++) {
            double m, sd, pm, half;
            int c, np;
            group_stats(runs, n, &runs[i], ks[q], &m, &sd, &c);
            fprintf(table, isnan(m) ? " — |" : !isnan(sd) ? " %.0f ± %.0f |" : " %.0f |", m, sd);
            paired_ratio(runs, n, &runs[i], &base, ks[q], &pm, &half, &np);
            print_paired(table, pm, half, np);
        }
        fprintf(table, !isnan(err_max) ? " %.2e |" : " — |", err_max);
        fprintf(table, !isnan(err_mean) ? " %.2e |" : " — |", err_mean);
        int any = 0;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (share[r] > 0)
                fprintf(table, "%s%s %.1f%%", any++ ? ", " : " ", pkv_route_names[r],
                        100 * share[r]);
        fputs(any ? " |\n" : " — |\n", table);
    }
}

/* The structural counters per group: the study's Table 4. */
static void counters_table(FILE *table, const run *runs, const int *order, int n) {
    fprintf(table, "\nStructural counters per step, after warm-up (mean +/- sd over runs):\n\n"
                   "| experiment |");
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table, " policy | backend | runs |");
    for (int k = 0; k < N_COUNTERS; k++) fprintf(table, " %s |", counter_heads[k]);
    fputs("\n|---|", table);
    for (int c = 0; c < n_cols + 3 + N_COUNTERS; c++) fprintf(table, "---|");
    fputc('\n', table);
    for (int oi = 0; oi < n; oi++) {
        const int i = order[oi];
        int first = 1, count = 0;
        for (int oj = 0; oj < oi && first; oj++) first = !same_group(&runs[order[oj]], &runs[i]);
        if (!first) continue;
        for (int j = 0; j < n; j++) count += same_group(&runs[j], &runs[i]);
        group_head(table, &runs[i], 0, count);
        for (int k = 0; k < N_COUNTERS; k++) {
            double m, sd;
            int c;
            group_stats(runs, n, &runs[i], N_VALUES + k, &m, &sd, &c);
            if (isnan(m))
                fprintf(table, " — |");
            else
                fprintf(table, !isnan(sd) ? " %.4g ± %.2g |" : " %.4g |", m * counter_scale[k],
                        sd * counter_scale[k]);
        }
        fputc('\n', table);
    }
}

/* Pool p's figure k, mean over the runs of g's group that have it (NaN: none). */
static double pool_mean(const run *runs, int n, const run *g, int p, int k) {
    double sum = 0;
    int m = 0;
    for (int j = 0; j < n; j++)
        if (same_group(&runs[j], g) && p < runs[j].n_pools &&
            runs[j].pools[p].v[k] == runs[j].pools[p].v[k])
            sum += runs[j].pools[p].v[k], m++;
    return m ? sum / m : NAN;
}

static const char *const role_names[3] = {"mixed", "prefill", "decode"}; /* /replicas role */

/* A fleet's figures per pool (mean over the group's runs), when any run is a fleet. */
static void pools_table(FILE *table, const run *runs, const int *order, int n) {
    int any = 0;
    for (int i = 0; i < n && !any; i++) any = runs[i].pools != NULL;
    if (!any) return;
    fprintf(table, "\nPer pool of each fleet (mean over runs; TTFT where prefilled, TPOT where "
                   "decoded):\n\n| experiment |");
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table, " policy | backend | runs | pool | role | replicas |");
    for (int k = 0; k < N_POOL_V; k++) fprintf(table, " %s |", pool_heads[k]);
    fputs("\n|---|", table);
    for (int c = 0; c < n_cols + 6 + N_POOL_V; c++) fprintf(table, "---|");
    fputc('\n', table);
    for (int oi = 0; oi < n; oi++) {
        const run *g = &runs[order[oi]];
        int first = 1, count = 0;
        for (int oj = 0; oj < oi && first; oj++) first = !same_group(&runs[order[oj]], g);
        if (!first || !g->pools) continue;
        for (int j = 0; j < n; j++) count += same_group(&runs[j], g);
        for (int p = 0; p < g->n_pools; p++) {
            const pool_fig *q = &g->pools[p];
            group_head(table, g, 0, count);
            fprintf(table, " %s | %s | %d |", q->name, role_names[q->role % 3], q->replicas);
            for (int k = 0; k < N_POOL_V; k++) {
                const double v = pool_mean(runs, n, g, p, k) * pool_scale[k];
                fprintf(table, v != v ? " — |" : fabs(v) >= 100 ? " %.0f |" : " %.3g |", v);
            }
            fputc('\n', table);
        }
    }
}

/* {"mean": m, "sd": s} (null for NaN: cJSON writes no NaN). */
static void add_stat(cJSON *o, const char *name, double mean, double sd) {
    cJSON *v = cJSON_AddObjectToObject(o, name);
    if (!isnan(mean))
        cJSON_AddNumberToObject(v, "mean", mean);
    else
        cJSON_AddNullToObject(v, "mean");
    if (!isnan(sd))
        cJSON_AddNumberToObject(v, "sd", sd);
    else
        cJSON_AddNullToObject(v, "sd");
}

static void add_num(cJSON *o, const char *name, double x) {
    if (!isnan(x))
        cJSON_AddNumberToObject(o, name, x);
    else
        cJSON_AddNullToObject(o, name);
}

/* A CSV field, quoted, its quotes doubled (RFC 4180): a resolved value may hold commas,
 * quotes and newlines (a pool list). */
static void csv_field(FILE *out, const char *sep, const char *v) {
    fputs(sep, out);
    fputc('"', out);
    for (; v && *v; v++) {
        if (*v == '"') fputc('"', out);
        fputc(*v, out);
    }
    fputc('"', out);
}

int pkv_report_write(const char *const *paths, int n, const char *baseline, unsigned tables,
                     const char *best, double attain, FILE *table, FILE *csv, FILE *json,
                     pkv_err *e) {
    const int best_k = !best ? -1 : !strcmp(best, "cheapest") ? BEST_CHEAPEST : value_index(best);
    if (best && best_k == -1) {
        char names[512] = "";
        for (int k = 0; k < N_VALUES; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ", value_names[k]);
        return pkv_fail(e, "--best %s: not a reported figure (%scheapest)", best, names);
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    run *runs = calloc(MAX_RUNS, sizeof *runs);
    int *order = calloc(MAX_RUNS, sizeof *order);
    if (!runs || !order) {
        free(runs), free(order);
        return pkv_fail(e, "out of memory");
    }
    int nr = 0, rc = 0;
    n_axes = 0;
    for (int i = 0; i < n && !rc; i++) rc = load_file(paths[i], runs, &nr, e);
    if (rc) goto done;
    n = nr;
    find_columns(runs, n);
    for (int i = 0; i < n; i++) order[i] = i;
    sort_runs = runs;
    qsort(order, (size_t)n, sizeof *order, cmp_runs);
    FILE *out = csv;
    cJSON *doc = json ? cJSON_CreateObject() : NULL, *groups = NULL;
    if (doc) {
        cJSON_AddStringToObject(doc, "baseline", baseline);
        groups = cJSON_AddArrayToObject(doc, "groups");
    }
    /* The table leaves out a figure no run has (measured times on the model backend);
     * the CSV and JSON keep every column. */
    bool shown[N_VALUES];
    int n_shown = 0;
    for (int k = 0; k < N_VALUES; k++) {
        shown[k] = false;
        for (int j = 0; j < n && !shown[k]; j++) shown[k] = !isnan(runs[j].v[k]);
        n_shown += shown[k];
    }
    fprintf(table, "| experiment |");
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table, " policy | backend | runs |");
    for (int k = 0; k < N_VALUES; k++)
        if (shown[k]) fprintf(table, " %s |", value_heads[k]);
    if (shown[V_ATTAIN]) fprintf(table, " meets SLOs (%.4g%%) |", 100 * attain);
    fprintf(table,
            " vs %s | paired by seed, 95%% CI | TPOT p50 vs %s | TTFT p99 vs %s | model's "
            "per-step error |\n|---|---|---|---|",
            baseline, baseline, baseline);
    for (int c = 0; c < n_cols; c++) fprintf(table, "---|");
    for (int k = 0; k <= n_shown + 4 + shown[V_ATTAIN]; k++) fprintf(table, "---|");
    fputc('\n', table);
    if (out) {
        fputs("experiment", out);
        for (int c = 0; c < n_cols; c++) csv_field(out, ",", cols[c]);
        fputs(",policy,backend,runs,interrupted", out);
        for (int k = 0; k < N_VALUES; k++) { /* times in seconds, and named so */
            const char *u = value_low(k) && !strstr(value_names[k], "_s") ? "_s" : "";
            fprintf(out, ",%s%s_mean,%s%s_sd", value_names[k], u, value_names[k], u);
        }
        fputs(",ratio_vs_baseline,paired_ratio,paired_ci_lo,paired_ci_hi,pairs,tpot_p50_ratio,"
              "ttft_p99_ratio,model_error,inside_model_error,gpus,meets_slo\n",
              out);
    }
    for (int oi = 0; oi < n; oi++) {
        const int i = order[oi];
        int first = 1;
        for (int oj = 0; oj < oi && first; oj++) first = !same_group(&runs[order[oj]], &runs[i]);
        if (!first) continue;
        int interrupted = 0, count = 0;
        for (int j = 0; j < n; j++)
            interrupted |= same_group(&runs[j], &runs[i]) && runs[j].interrupted;
        double mean[N_VALUES], sd[N_VALUES];
        for (int k = 0; k < N_VALUES; k++)
            group_stats(runs, n, &runs[i], k, &mean[k], &sd[k], &count);
        count = 0; /* runs in the group (group_stats counted non-missing values) */
        for (int j = 0; j < n; j++) count += same_group(&runs[j], &runs[i]);
        run base = runs[i];
        snprintf(base.policy, sizeof base.policy, "%s", baseline);
        double bm, bsd;
        int bc;
        group_stats(runs, n, &base, 0, &bm, &bsd, &bc);
        double ratio = bc && bm > 0 ? mean[0] / bm : NAN;
        double pm, half;
        int np;
        paired_ratio(runs, n, &runs[i], &base, 0, &pm, &half, &np);
        double lat_ratio[2]; /* TPOT p50 and TTFT p99 over the baseline group's */
        for (int q = 0; q < 2; q++) {
            const int k = q ? V_TTFT_P99 : V_TPOT_P50;
            double tm, tsd;
            int tc;
            group_stats(runs, n, &base, k, &tm, &tsd, &tc);
            lat_ratio[q] = tc && tm > 0 ? mean[k] / tm : NAN;
        }
        group_head(table, &runs[i], interrupted, count);
        for (int k = 0; k < N_VALUES; k++) {
            if (!shown[k])
                continue;
            else if (mean[k] != mean[k])
                fprintf(table, " — |");
            else if (fabs(mean[k] * value_scale(k)) >= 1000) /* throughputs: whole numbers */
                fprintf(table, sd[k] == sd[k] ? " %.0f ± %.0f |" : " %.0f |",
                        mean[k] * value_scale(k), sd[k] * value_scale(k));
            else
                fprintf(table, sd[k] == sd[k] ? " %.4g ± %.2g |" : " %.4g |",
                        mean[k] * value_scale(k), sd[k] * value_scale(k));
        }
        const int meets = group_meets(runs, n, &runs[i], attain);
        if (shown[V_ATTAIN])
            fputs(meets == 1    ? " yes |"
                  : meets == 0  ? " no |"
                  : meets == -2 ? " no: unserved |"
                                : " — |",
                  table);
        if (!isnan(ratio))
            fprintf(table, " %.3fx |", ratio);
        else
            fprintf(table, " — |");
        print_paired(table, pm, half, np);
        for (int q = 0; q < 2; q++)
            fprintf(table, lat_ratio[q] == lat_ratio[q] ? " %.3fx |" : " — |", lat_ratio[q]);
        /* A predicted ratio means nothing inside the two groups' model errors. */
        const double me = group_model_error(runs, n, &runs[i]),
                     be = group_model_error(runs, n, &base), both = me + be;
        const int inside = !isnan(both) && !isnan(ratio) && fabs(ratio - 1) < both &&
                           strcmp(runs[i].policy, baseline) != 0; /* not the baseline itself */
        if (isnan(me))
            fputs(" — |", table);
        else
            fprintf(table, " ±%.1f%%%s |", 100 * me,
                    inside ? " (the ratio is inside the two groups' errors)" : "");
        fputc('\n', table);
        if (out) {
            csv_field(out, "", runs[i].name);
            for (int c = 0; c < n_cols; c++) {
                char *v = value_shown(runs[i].conf, cols[c]);
                csv_field(out, ",", v);
                free(v);
            }
            csv_field(out, ",", runs[i].policy);
            csv_field(out, ",", runs[i].backend);
            fprintf(out, ",%d,%d", count, interrupted);
            for (int k = 0; k < N_VALUES; k++) fprintf(out, ",%.9g,%.9g", mean[k], sd[k]);
            fprintf(out, ",%.9g,%.9g,%.9g,%.9g,%d,%.9g,%.9g,%.9g,%d,%d,%s\n", ratio, pm, pm - half,
                    pm + half, np, lat_ratio[0], lat_ratio[1], me, inside, runs[i].gpus,
                    meets == -1  ? ""
                    : meets == 1 ? "1"
                                 : "0");
        }
        if (groups) {
            cJSON *g = cJSON_CreateObject(), *cf = cJSON_CreateObject();
            cJSON_AddItemToArray(groups, g);
            cJSON_AddStringToObject(g, "experiment", runs[i].name);
            for (int c = 0; c < n_cols; c++) {
                char *v = value_at(runs[i].conf, cols[c]);
                if (v) cJSON_AddStringToObject(cf, cols[c], v);
                free(v);
            }
            cJSON_AddItemToObject(g, "config", cf);
            cJSON_AddStringToObject(g, "policy", runs[i].policy);
            cJSON_AddStringToObject(g, "backend", runs[i].backend);
            cJSON_AddNumberToObject(g, "runs", count);
            cJSON_AddBoolToObject(g, "interrupted", interrupted);
            cJSON *vals = cJSON_AddObjectToObject(g, "values");
            for (int k = 0; k < N_VALUES; k++) add_stat(vals, value_names[k], mean[k], sd[k]);
            add_num(g, "ratio_vs_baseline", ratio);
            cJSON *pj = cJSON_AddObjectToObject(g, "paired_by_seed");
            add_num(pj, "ratio", pm);
            add_num(pj, "ci95_lo", pm - half);
            add_num(pj, "ci95_hi", pm + half);
            cJSON_AddNumberToObject(pj, "pairs", np);
            add_num(g, "tpot_p50_ratio", lat_ratio[0]);
            add_num(g, "ttft_p99_ratio", lat_ratio[1]);
            add_num(g, "model_error", me);
            cJSON_AddBoolToObject(g, "inside_model_error", inside);
            cJSON_AddNumberToObject(g, "gpus", runs[i].gpus);
            if (meets == -1)
                cJSON_AddNullToObject(g, "meets_slo");
            else
                cJSON_AddBoolToObject(g, "meets_slo", meets == 1);
            static const char *const paired_names[2] = {"paired_by_seed_wall",
                                                        "paired_by_seed_device"};
            for (int q = 0; q < 2; q++) { /* decode_tok_s_wall, decode_tok_s_device */
                double wm, wh;
                int wn;
                paired_ratio(runs, n, &runs[i], &base, 1 + q, &wm, &wh, &wn);
                cJSON *w = cJSON_AddObjectToObject(g, paired_names[q]);
                add_num(w, "ratio", wm);
                add_num(w, "ci95_lo", wm - wh);
                add_num(w, "ci95_hi", wm + wh);
                cJSON_AddNumberToObject(w, "pairs", wn);
            }
            double err_max, err_mean, share[PKV_ROUTE_COUNT];
            group_checks(runs, n, &runs[i], &err_max, &err_mean, share);
            add_num(g, "max_abs_err", err_max);
            add_num(g, "mean_abs_err", err_mean);
            cJSON *sh = cJSON_AddObjectToObject(g, "steps_by_route");
            for (int r = 0; r < PKV_ROUTE_COUNT; r++) add_num(sh, pkv_route_names[r], share[r]);
            if (runs[i].pools) {
                cJSON *pa = cJSON_AddArrayToObject(g, "pools");
                for (int p = 0; p < runs[i].n_pools; p++) {
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddItemToArray(pa, o);
                    cJSON_AddStringToObject(o, "pool", runs[i].pools[p].name);
                    cJSON_AddStringToObject(o, "role", role_names[runs[i].pools[p].role % 3]);
                    cJSON_AddNumberToObject(o, "replicas", runs[i].pools[p].replicas);
                    for (int k = 0; k < N_POOL_V; k++)
                        add_num(o, pool_names[k], pool_mean(runs, n, &runs[i], p, k));
                }
            }
            cJSON *cj = cJSON_AddObjectToObject(g, "counters");
            for (int k = 0; k < N_COUNTERS; k++) {
                double m, sdv;
                int c;
                group_stats(runs, n, &runs[i], N_VALUES + k, &m, &sdv, &c);
                add_stat(cj, counter_names[k], m, sdv);
            }
        }
    }
    if (doc) {
        char *text = cJSON_Print(doc);
        if (!text || fputs(text, json) < 0 || fputc('\n', json) < 0)
            rc = pkv_fail(e, "cannot write the JSON report");
        free(text);
        cJSON_Delete(doc);
    }
    pools_table(table, runs, order, n);
    if (tables & PKV_REPORT_ROUTES) routes_table(table, runs, order, n, baseline);
    if (tables & PKV_REPORT_COUNTERS) counters_table(table, runs, order, n);
    if (best_k != -1) best_table(table, runs, order, n, best_k, attain);
done:
    for (int i = 0; i < nr; i++) {
        free(runs[i].key);
        free(runs[i].pools);
        cJSON_Delete(runs[i].conf);
    }
    free(runs), free(order);
    return rc;
}
