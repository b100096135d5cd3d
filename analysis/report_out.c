/* The report's figures written out: a configuration value as the table shows it, and
 * each group's CSV row and JSON object. */
#include "report.h"
#include "report_run.h"
#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const report_role_names[3] = {"mixed", "prefill", "decode"}; /* /replicas role */

/* The pools' figures as the JSON names them. */
static const char *const pool_names[N_POOL_V] = {
    "routed", "finished", "busy_share", "replica_s", "prefix_hit_rate", "ttft_p50", "tpot_p50"};

/* The text of the value at a dotted path of o (NULL when absent; caller frees). */
char *report_value_at(const cJSON *o, const char *path) {
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

char *pkv_report_pools_text(const cJSON *o) {
    if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) == 0 || !cJSON_IsObject(o->child) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o->child, "name")))
        return NULL;
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
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s %d %s%s%.*s", *buf ? " + " : "",
                 cJSON_IsString(name) ? name->valuestring : "?",
                 cJSON_IsNumber(rep) ? rep->valueint : 1,
                 cJSON_IsString(role) ? role->valuestring : "mixed", *c ? " " : "",
                 dot ? (int)(dot - c) : (int)strlen(c), c);
    }
    return strdup(buf);
}

/* A configuration value as the table and the CSV show it (owned; NULL: none): a list of
 * pools as pkv_report_pools_text gives it; a path as its file's name. Groups are still
 * told apart by the whole value (report_value_at). */
char *report_value_shown(const cJSON *conf, const char *path) {
    char *v = report_value_at(conf, path);
    if (!v) return NULL;
    cJSON *o = cJSON_Parse(v);
    char *pools = pkv_report_pools_text(o);
    if (pools) {
        free(v);
        v = pools;
    } else if (!o && strchr(v, '/')) { /* a string: a path shown as its file's name */
        char *base = strdup(strrchr(v, '/') + 1);
        free(v);
        v = base;
    }
    cJSON_Delete(o);
    return v;
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

bool report_value_low(int k) {
    const pkv_summary_figure *f = pkv_summary_figure_find(report_value_names[k]);
    return f && !strcmp(f->unit, "s");
}

void report_csv_head(FILE *out, char (*cols)[256], int n_cols) {
    fputs("experiment", out);
    for (int c = 0; c < n_cols; c++) csv_field(out, ",", cols[c]);
    fputs(",policy,backend,runs,interrupted", out);
    for (int k = 0; k < N_VALUES; k++) { /* times in seconds, and named so */
        const char *u = report_value_low(k) && !strstr(report_value_names[k], "_s") ? "_s" : "";
        fprintf(out, ",%s%s_mean,%s%s_sd", report_value_names[k], u, report_value_names[k], u);
    }
    fputs(",ratio_vs_baseline,paired_ratio,paired_ci_lo,paired_ci_hi,pairs,tpot_p50_ratio,"
          "ttft_p99_ratio,model_error,inside_model_error,gpus,meets_slo\n",
          out);
}

void report_csv_row(FILE *out, const run *r, const report_fig *f, char (*cols)[256], int n_cols) {
    csv_field(out, "", r->name);
    for (int c = 0; c < n_cols; c++) {
        char *v = report_value_shown(r->conf, cols[c]);
        csv_field(out, ",", v);
        free(v);
    }
    csv_field(out, ",", r->policy);
    csv_field(out, ",", r->backend);
    fprintf(out, ",%d,%d", f->count, f->interrupted);
    for (int k = 0; k < N_VALUES; k++) fprintf(out, ",%.9g,%.9g", f->mean[k], f->sd[k]);
    fprintf(out, ",%.9g,%.9g,%.9g,%.9g,%d,%.9g,%.9g,%.9g,%d,%d,%s\n", f->ratio, f->pm,
            f->pm - f->half, f->pm + f->half, f->np, f->lat_ratio[0], f->lat_ratio[1], f->me,
            f->inside, r->gpus,
            f->meets == -1  ? ""
            : f->meets == 1 ? "1"
                            : "0");
}

void report_group_json(cJSON *groups, const run *runs, int n, const run *r, const run *base,
                       const report_fig *f, char (*cols)[256], int n_cols) {
    cJSON *g = cJSON_CreateObject(), *cf = cJSON_CreateObject();
    cJSON_AddItemToArray(groups, g);
    cJSON_AddStringToObject(g, "experiment", r->name);
    for (int c = 0; c < n_cols; c++) {
        char *v = report_value_at(r->conf, cols[c]);
        if (v) cJSON_AddStringToObject(cf, cols[c], v);
        free(v);
    }
    cJSON_AddItemToObject(g, "config", cf);
    cJSON_AddStringToObject(g, "policy", r->policy);
    cJSON_AddStringToObject(g, "backend", r->backend);
    cJSON_AddNumberToObject(g, "runs", f->count);
    cJSON_AddBoolToObject(g, "interrupted", f->interrupted);
    cJSON *vals = cJSON_AddObjectToObject(g, "values");
    for (int k = 0; k < N_VALUES; k++) add_stat(vals, report_value_names[k], f->mean[k], f->sd[k]);
    add_num(g, "ratio_vs_baseline", f->ratio);
    cJSON *pj = cJSON_AddObjectToObject(g, "paired_by_seed");
    add_num(pj, "ratio", f->pm);
    add_num(pj, "ci95_lo", f->pm - f->half);
    add_num(pj, "ci95_hi", f->pm + f->half);
    cJSON_AddNumberToObject(pj, "pairs", f->np);
    add_num(g, "tpot_p50_ratio", f->lat_ratio[0]);
    add_num(g, "ttft_p99_ratio", f->lat_ratio[1]);
    add_num(g, "model_error", f->me);
    cJSON_AddBoolToObject(g, "inside_model_error", f->inside);
    cJSON_AddNumberToObject(g, "gpus", r->gpus);
    if (f->meets == -1)
        cJSON_AddNullToObject(g, "meets_slo");
    else
        cJSON_AddBoolToObject(g, "meets_slo", f->meets == 1);
    static const char *const paired_names[2] = {"paired_by_seed_wall", "paired_by_seed_device"};
    for (int q = 0; q < 2; q++) { /* decode_tok_s_wall, decode_tok_s_device */
        double wm, wh;
        int wn;
        report_paired_ratio(runs, n, r, base, 1 + q, &wm, &wh, &wn);
        cJSON *w = cJSON_AddObjectToObject(g, paired_names[q]);
        add_num(w, "ratio", wm);
        add_num(w, "ci95_lo", wm - wh);
        add_num(w, "ci95_hi", wm + wh);
        cJSON_AddNumberToObject(w, "pairs", wn);
    }
    double err_max, err_mean, share[PKV_ROUTE_COUNT];
    report_group_checks(runs, n, r, &err_max, &err_mean, share);
    add_num(g, "max_abs_err", err_max);
    add_num(g, "mean_abs_err", err_mean);
    cJSON *sh = cJSON_AddObjectToObject(g, "steps_by_route");
    for (int q = 0; q < PKV_ROUTE_COUNT; q++) add_num(sh, pkv_route_names[q], share[q]);
    if (r->pools) {
        cJSON *pa = cJSON_AddArrayToObject(g, "pools");
        for (int p = 0; p < r->n_pools; p++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(pa, o);
            cJSON_AddStringToObject(o, "pool", r->pools[p].name);
            cJSON_AddStringToObject(o, "role", report_role_names[r->pools[p].role % 3]);
            cJSON_AddNumberToObject(o, "replicas", r->pools[p].replicas);
            for (int k = 0; k < N_POOL_V; k++)
                add_num(o, pool_names[k], report_pool_mean(runs, n, r, p, k));
        }
    }
    cJSON *cj = cJSON_AddObjectToObject(g, "counters");
    for (int k = 0; k < N_COUNTERS; k++) {
        double m, sdv;
        int c;
        report_group_stats(runs, n, r, N_VALUES + k, &m, &sdv, &c);
        add_stat(cj, report_counter_names[k], m, sdv);
    }
}
