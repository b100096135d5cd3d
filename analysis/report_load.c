/* The report's runs read from output files (report_run.h): each run's resolved
 * configuration less what the report shows apart, its /summary figures, its steps'
 * counters and checks, its fleet's pools. */
#include "h5rec.h"
#include "h5types.h"
#include "jsonv.h"
#include "report_run.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

const char *const report_value_names[N_VALUES] = {
    "decode_tok_s",  "decode_tok_s_wall", "decode_tok_s_device",
    "ttft_p50",      "ttft_p99",          "tpot_p50",
    "tpot_p99",      "host_overhead_s",   "request_goodput",
    "slo_attainment"};
const char *const report_counter_names[N_COUNTERS] = {"launches", "merge_launches",
                                                      "cta_work_per_sm", "kv_bytes", "merge_bytes"};

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
    for (int k = 0; k < N_VALUES; k++) r->v[k] = attr_f64(f, sp, report_value_names[k]);
    double unused, unused_max;
    for (int k = 0; k < N_COUNTERS; k++)
        steps_stats(f, group, report_counter_names[k], &r->v[N_VALUES + k], &unused);
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

/* A /sweep/index column that is a JSON path: an axis, noted once. */
static herr_t note_axis(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    (void)g, (void)info;
    report_axes *ax = op;
    int known = 0;
    for (int a = 0; a < ax->n && !known; a++) known = !strcmp(ax->path[a], name);
    if (strchr(name, '.') && !known && ax->n < MAX_COLS * 2)
        snprintf(ax->path[ax->n++], sizeof ax->path[0], "%.255s", name);
    return 0;
}

int report_load_file(const char *path, run *runs, int *n, report_axes *ax, pkv_err *e) {
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
            H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, note_axis, ax);
            H5Gclose(g);
        }
    }
    if (f >= 0) H5Fclose(f);
    free(grp);
    return rc;
}
