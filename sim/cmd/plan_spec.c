/* The plan section of a plan file: sim/cmd/plan_spec.h. */
#include "plan_spec.h"
#include "config_files.h"
#include "config_keys.h"
#include "jsonv.h"
#include "report.h"
#include "vfile.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

double pkv_plan_held_out(const pkv_plan_spec *p, int k, int *used) {
    *used = k >= PKV_FIG_TTFT_P99 && isnan(p->held_out[k]) ? k - PKV_FIG_TTFT_P99 : k;
    return p->held_out[*used];
}

void pkv_plan_free(pkv_plan_spec *p) {
    pkv_axis_free(&p->load);
    for (int a = 0; a < p->n_cand; a++) pkv_axis_free(&p->cand[a]);
    free(p->prices);
    *p = (pkv_plan_spec){0};
}

static int parse_slo(pkv_plan_spec *p, const cJSON *list, pkv_err *e) {
    const int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (n < 1 || n > PKV_PLAN_MAX_SLO)
        return pkv_fail(e,
                        "plan.slo: must be a list of 1 to %d objects ({\"figure\": "
                        "\"ttft_p99\", \"max_ms\": 1000})",
                        PKV_PLAN_MAX_SLO);
    for (int i = 0; i < n; i++) {
        const cJSON *o = cJSON_GetArrayItem(list, i);
        char P[32];
        snprintf(P, sizeof P, "plan.slo[%d]", i);
        TRY(pkv_keys_check(pkv_config_keys(), PKV_OBJ_PLAN_SLO, o, P, e));
        const char *name;
        TRY(pkv_json_str(o, P, "figure", NULL, NULL, &name, NULL, e));
        pkv_plan_slo *s = &p->slo[i];
        s->f = pkv_summary_figure_find(name);
        if (!s->f || s->f->type == PKV_FIGURE_BY_CLASS)
            return pkv_fail(e,
                            "%s.figure: \"%s\" is not a figure of /summary (experiments/README.md, "
                            "Serving metrics)",
                            P, name);
        const bool has_max = cJSON_GetObjectItemCaseSensitive(o, "max_ms") != NULL,
                   has_min = cJSON_GetObjectItemCaseSensitive(o, "min") != NULL;
        if (has_max == has_min) return pkv_fail(e, "%s: give either max_ms or min", P);
        if (has_max) {
            if (strcmp(s->f->unit, "s"))
                return pkv_fail(e, "%s.max_ms: %s is in %s, not seconds; give min", P, name,
                                *s->f->unit ? s->f->unit : "a count");
            TRY(pkv_json_num(o, P, "max_ms", 0, 0, true, 1e12, &s->limit, e));
            s->limit *= 1e-3, s->is_max = true;
            snprintf(s->label, sizeof s->label, "%s <= %g ms", name, s->limit * 1e3);
        } else {
            TRY(pkv_json_num(o, P, "min", 0, -1e300, false, 1e300, &s->limit, e));
            snprintf(s->label, sizeof s->label, "%s >= %g", name, s->limit);
        }
        p->n_slo = i + 1;
    }
    return 0;
}

static int parse_replicas(pkv_plan_spec *p, const cJSON *o, pkv_err *e) {
    const char *path;
    int64_t lo, hi;
    if (o) TRY(pkv_keys_check(pkv_config_keys(), PKV_OBJ_PLAN_REPLICAS, o, "plan.replicas", e));
    TRY(pkv_json_str(o, "plan.replicas", "path", "fleet.replicas", NULL, &path, NULL, e));
    TRY(pkv_json_int(o, "plan.replicas", "min", 1, 1, 100000, &lo, e));
    TRY(pkv_json_int(o, "plan.replicas", "max", 64, 1, 100000, &hi, e));
    if (hi < lo) return pkv_fail(e, "plan.replicas.max: must be >= min (%lld)", (long long)lo);
    if (strlen(path) >= sizeof p->rep_path) return pkv_fail(e, "plan.replicas.path: too long");
    snprintf(p->rep_path, sizeof p->rep_path, "%s", path);
    p->rep_min = (int)lo, p->rep_max = (int)hi;
    return 0;
}

/* The prices file: {"date", "source", "gpus": {NAME: {"usd_per_hour": X, ...}}}. */
static int load_prices(pkv_plan_spec *p, const char *exp, const cJSON *plan, pkv_err *e) {
    const char *name;
    TRY(pkv_json_str(plan, "plan", "prices", "prices", NULL, &name, NULL, e));
    cJSON *root =
        pkv_config_named_file(exp, name, "plan.prices", "experiments/planning", "price files", "",
                              p->prices_file, sizeof p->prices_file, e);
    if (!root) return -1;
    int rc = -1;
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
    const cJSON *date = cJSON_GetObjectItemCaseSensitive(root, "date");
    const int n = cJSON_IsObject(gpus) ? cJSON_GetArraySize(gpus) : 0;
    if (n < 1) {
        pkv_fail(e, "%s: needs \"gpus\": {NAME: {\"usd_per_hour\": X}, ...}", p->prices_file);
        goto out;
    }
    p->prices = calloc((size_t)n, sizeof *p->prices);
    if (!p->prices) {
        pkv_fail(e, "out of memory");
        goto out;
    }
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus) {
        char P[96];
        snprintf(P, sizeof P, "%s: gpus.%.40s", pkv_vfile_stem(p->prices_file), g->string);
        pkv_gpu_price *pr = &p->prices[p->n_prices];
        if (!cJSON_IsObject(g) || strlen(g->string) >= sizeof pr->gpu) {
            pkv_fail(e, "%s: must be an object with usd_per_hour", P);
            goto out;
        }
        if (pkv_json_num(g, P, "usd_per_hour", NAN, 0, true, 1e6, &pr->usd_per_hour, e)) goto out;
        if (isnan(pr->usd_per_hour)) {
            pkv_fail(e, "%s.usd_per_hour: required", P);
            goto out;
        }
        snprintf(pr->gpu, sizeof pr->gpu, "%s", g->string);
        p->n_prices++;
    }
    snprintf(p->prices_note, sizeof p->prices_note, "%s%s%s", pkv_vfile_stem(p->prices_file),
             cJSON_IsString(date) ? ", " : "", cJSON_IsString(date) ? date->valuestring : "");
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

/* The held-out errors: the rows of `validate --by-source --json` (figure, error,
 * held_out), by the kind of figure: the absolute error that PKV_PLAN_HELD_OUT_QUANTILE of
 * them are within (GSL's quantile of the sorted errors). */
static int load_held_out(pkv_plan_spec *p, const char *exp, const cJSON *plan, pkv_err *e) {
    const char *name;
    TRY(pkv_json_str(plan, "plan", "held_out", "held_out", NULL, &name, NULL, e));
    cJSON *root = pkv_config_named_file(exp, name, "plan.held_out", "experiments/planning",
                                        "held-out error files", "", p->held_out_file,
                                        sizeof p->held_out_file, e);
    if (!root) return -1;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "rows"), *r;
    const size_t cap = (size_t)cJSON_GetArraySize(rows) + 1;
    double *errs = malloc(sizeof *errs * cap * PKV_FIG_KINDS);
    if (!errs) {
        cJSON_Delete(root);
        return pkv_fail(e, "out of memory");
    }
    cJSON_ArrayForEach(r, rows) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(r, "figure"),
                    *err = cJSON_GetObjectItemCaseSensitive(r, "error"),
                    *ho = cJSON_GetObjectItemCaseSensitive(r, "held_out");
        if (!cJSON_IsString(f) || !cJSON_IsNumber(err) || !cJSON_IsTrue(ho)) continue;
        const int k = pkv_vfile_figure_kind(f->valuestring);
        errs[(size_t)k * cap + (size_t)p->held_out_n[k]++] = fabs(err->valuedouble);
    }
    cJSON_Delete(root);
    for (int k = 0; k < PKV_FIG_KINDS; k++) {
        double *a = errs + (size_t)k * cap;
        const size_t n = (size_t)p->held_out_n[k];
        gsl_sort(a, 1, n);
        p->held_out[k] =
            n ? gsl_stats_quantile_from_sorted_data(a, 1, n, PKV_PLAN_HELD_OUT_QUANTILE) : NAN;
    }
    free(errs);
    return 0;
}

int pkv_plan_parse(pkv_plan_spec *p, const cJSON *plan, const char *exp,
                   const pkv_cli_overrides *ov, pkv_err *e) {
    if (!cJSON_IsObject(plan)) return pkv_fail(e, "plan: needs a plan section (an object)");
    TRY(pkv_keys_check(pkv_config_keys(), "plan", plan, "plan", e));
    TRY(parse_slo(p, cJSON_GetObjectItemCaseSensitive(plan, "slo"), e));
    const cJSON *load = cJSON_GetObjectItemCaseSensitive(plan, "loads");
    if (!load)
        return pkv_fail(e, "plan.loads: required (an axis: {\"path\": KEY, \"values\": [...]})");
    TRY(pkv_axis_parse(&p->load, load, "plan.loads", ov, e));
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(plan, "candidates");
    const int nc = cJSON_IsArray(cands) ? cJSON_GetArraySize(cands) : 0;
    if (cands && (!cJSON_IsArray(cands) || nc > PKV_PLAN_MAX_AXES))
        return pkv_fail(e, "plan.candidates: must be a list of at most %d axes", PKV_PLAN_MAX_AXES);
    p->n_candidates = 1;
    for (int a = 0; a < nc; a++) {
        char P[40];
        snprintf(P, sizeof P, "plan.candidates[%d]", a);
        TRY(pkv_axis_parse(&p->cand[a], cJSON_GetArrayItem(cands, a), P, ov, e));
        p->n_cand = a + 1;
        p->n_candidates *= (size_t)p->cand[a].n;
        if (p->n_candidates > PKV_PLAN_MAX_CANDIDATES)
            return pkv_fail(e, "plan.candidates: more than %d candidates", PKV_PLAN_MAX_CANDIDATES);
    }
    TRY(parse_replicas(p, cJSON_GetObjectItemCaseSensitive(plan, "replicas"), e));
    const char *axes[PKV_PLAN_MAX_AXES + 2];
    int n_axes = 0;
    axes[n_axes++] = p->load.path, axes[n_axes++] = p->rep_path;
    for (int a = 0; a < p->n_cand; a++) axes[n_axes++] = p->cand[a].path;
    for (int a = 0; a < n_axes; a++)
        for (int b = 0; b < a; b++)
            if (!strcmp(axes[a], axes[b]))
                return pkv_fail(e, "plan: \"%s\" is named twice (loads, replicas, candidates)",
                                axes[a]);
    TRY(load_prices(p, exp, plan, e));
    return load_held_out(p, exp, plan, e);
}

const cJSON *pkv_plan_cand_value(const pkv_plan_spec *p, size_t c, int a) {
    size_t stride = 1;
    for (int b = p->n_cand - 1; b > a; b--) stride *= (size_t)p->cand[b].n;
    return cJSON_GetArrayItem(p->cand[a].values, (int)(c / stride % (size_t)p->cand[a].n));
}

/* A candidate value as text (owned): a list of pools as its layout
 * (pkv_report_pools_text), else the value. */
static char *value_text(const cJSON *v) {
    char *pools = pkv_report_pools_text(v);
    return pools ? pools : pkv_json_value_text(v);
}

void pkv_plan_describe(const pkv_plan_spec *p, size_t c, char *buf, size_t n) {
    buf[0] = 0;
    for (int a = 0; a < p->n_cand; a++) {
        char *t = value_text(pkv_plan_cand_value(p, c, a));
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s=%s", a ? " " : "",
                 strrchr(p->cand[a].path, '.') ? strrchr(p->cand[a].path, '.') + 1
                                               : p->cand[a].path,
                 t ? t : "?");
        free(t);
    }
    if (!p->n_cand) snprintf(buf, n, "(the experiment)");
}

const pkv_gpu_price *pkv_plan_price(const pkv_plan_spec *p, const char *gpu) {
    for (int i = 0; i < p->n_prices; i++)
        if (!strcmp(p->prices[i].gpu, gpu)) return &p->prices[i];
    return NULL;
}
