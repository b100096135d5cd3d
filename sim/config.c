#include "config.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pkv_backend_names[] = {"auto", "model", "cpu", "cuda", NULL};
static const char *const clock_names[] = {"predicted", "wall", "device", "auto", NULL};
static const char *const bucket_names[] = {"exact", "pow2", NULL};

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

static int parse_model(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"hq", "hkv", "head_dim", "page_size", "dtype", NULL};
    int64_t hq, hkv, d, ps;
    const char *dtype;
    if (o) TRY(pkv_json_object(o, "model", keys, e));
    TRY(pkv_json_int(o, "model", "hq", 32, 1, 256, &hq, e));
    TRY(pkv_json_int(o, "model", "hkv", 8, 1, 256, &hkv, e));
    TRY(pkv_json_int(o, "model", "head_dim", 128, 8, 512, &d, e));
    TRY(pkv_json_int(o, "model", "page_size", 16, 1, 1024, &ps, e));
    static const char *const dtypes[] = {"fp16", NULL};
    TRY(pkv_json_str(o, "model", "dtype", "fp16", dtypes, &dtype, NULL, e));
    if (hq % hkv)
        return pkv_fail(e, "model.hq: %lld is not a multiple of model.hkv (%lld)", (long long)hq,
                        (long long)hkv);
    if (d % 8)
        return pkv_fail(e, "model.head_dim: must be a multiple of 8 (got %lld)", (long long)d);
    c->shape = (pkvk_shape){(int)hq, (int)hkv, (int)d, (int)ps};
    return 0;
}

static int parse_arrival(pkv_arrival_spec *a, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"process", "rate", "cv", "concurrency", NULL};
    const char *P = "workload.arrival";
    const char *name;
    int kind;
    if (!o) return pkv_fail(e, "%s: is required", P);
    TRY(pkv_json_object(o, P, keys, e));
    TRY(pkv_json_str(o, P, "process", NULL, pkv_arrival_names, &name, &kind, e));
    *a = (pkv_arrival_spec){.kind = (pkv_arrival_kind)kind};
    if (a->kind == PKV_ARRIVAL_CLOSED) {
        if (!cJSON_GetObjectItemCaseSensitive(o, "concurrency"))
            return pkv_fail(e, "%s.concurrency: is required for the closed loop", P);
        TRY(pkv_json_int(o, P, "concurrency", 1, 1, 1 << 20, &a->concurrency, e));
        return 0;
    }
    if (!cJSON_GetObjectItemCaseSensitive(o, "rate"))
        return pkv_fail(e, "%s.rate: is required for process \"%s\"", P, name);
    TRY(pkv_json_num(o, P, "rate", 1, 0, true, 1e9, &a->rate, e));
    if (a->kind == PKV_ARRIVAL_GAMMA || a->kind == PKV_ARRIVAL_WEIBULL) {
        TRY(pkv_json_num(o, P, "cv", 1, 0, true, 20, &a->cv, e));
        if (pkv_arrival_prepare(a)) return pkv_fail(e, "%s.cv: %g cannot be reached", P, a->cv);
    }
    return 0;
}

static int parse_length(pkv_length_spec *l, const cJSON *o, const char *P, int64_t def,
                        pkv_err *e) {
    static const char *const keys[] = {"dist", "value",  "min",    "max",   "values", "short",
                                       "long", "p_long", "median", "sigma", NULL};
    const char *name;
    int kind;
    *l = (pkv_length_spec){.kind = PKV_LENGTH_FIXED, .value = def};
    if (!o) return 0;
    TRY(pkv_json_object(o, P, keys, e));
    TRY(pkv_json_str(o, P, "dist", "fixed", pkv_length_names, &name, &kind, e));
    l->kind = (pkv_length_kind)kind;
    const int64_t MAXL = 1 << 24;
    switch (l->kind) {
    case PKV_LENGTH_FIXED:
        return pkv_json_int(o, P, "value", def, 1, MAXL, &l->value, e);
    case PKV_LENGTH_UNIFORM:
        TRY(pkv_json_int(o, P, "min", 1, 1, MAXL, &l->min, e));
        TRY(pkv_json_int(o, P, "max", l->min, 1, MAXL, &l->max, e));
        if (l->max < l->min) return pkv_fail(e, "%s.max: must be >= %s.min", P, P);
        return 0;
    case PKV_LENGTH_CYCLE: {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "values");
        int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
        if (n < 1 || n > PKV_LENGTH_MAX_VALUES)
            return pkv_fail(e, "%s.values: must be an array of 1 to %d lengths", P,
                            PKV_LENGTH_MAX_VALUES);
        for (int i = 0; i < n; i++) {
            const cJSON *x = cJSON_GetArrayItem(v, i);
            if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > MAXL ||
                x->valuedouble != (double)(int64_t)x->valuedouble)
                return pkv_fail(e, "%s.values[%d]: must be an integer in [1, %lld]", P, i,
                                (long long)MAXL);
            l->values[i] = (int64_t)x->valuedouble;
        }
        l->n_values = n;
        return 0;
    }
    case PKV_LENGTH_BIMODAL:
        TRY(pkv_json_int(o, P, "short", 8192, 1, MAXL, &l->short_len, e));
        TRY(pkv_json_int(o, P, "long", 65536, 1, MAXL, &l->long_len, e));
        return pkv_json_num(o, P, "p_long", 0.25, 0, false, 1, &l->p_long, e);
    case PKV_LENGTH_LOGNORMAL:
        TRY(pkv_json_num(o, P, "median", 1024, 0, true, (double)MAXL, &l->median, e));
        return pkv_json_num(o, P, "sigma", 1, 0, true, 10, &l->sigma, e);
    }
    return 0;
}

static int parse_workload(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"arrival",      "prompt",      "decode",
                                       "num_requests", "max_context", NULL};
    const cJSON *a, *p, *d;
    if (!o) return pkv_fail(e, "workload: is required");
    TRY(pkv_json_object(o, "workload", keys, e));
    TRY(pkv_json_sub(o, "workload", "arrival", &a, e));
    TRY(pkv_json_sub(o, "workload", "prompt", &p, e));
    TRY(pkv_json_sub(o, "workload", "decode", &d, e));
    pkv_workload_spec *w = &c->workload;
    TRY(parse_arrival(&w->arrival, a, e));
    TRY(parse_length(&w->prompt, p, "workload.prompt", 1024, e));
    TRY(parse_length(&w->decode, d, "workload.decode", 128, e));
    TRY(pkv_json_int(o, "workload", "num_requests", 0, 0, INT64_MAX / 2, &w->num_requests, e));
    TRY(pkv_json_int(o, "workload", "max_context", 131072, 2, 1 << 24, &w->max_context, e));
    return 0;
}

static int parse_serving(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"max_active", "kv_pages", "admission", "prefill", NULL};
    static const char *const pkeys[] = {"base_us", "per_token_us", NULL};
    static const char *const admissions[] = {"fcfs", NULL};
    const char *adm;
    int64_t ma, kp;
    const cJSON *pf;
    if (o) TRY(pkv_json_object(o, "serving", keys, e));
    TRY(pkv_json_int(o, "serving", "max_active", 64, 1, 4096, &ma, e));
    TRY(pkv_json_int(o, "serving", "kv_pages", 65536, 1, INT32_MAX, &kp, e));
    TRY(pkv_json_str(o, "serving", "admission", "fcfs", admissions, &adm, NULL, e));
    TRY(pkv_json_sub(o, "serving", "prefill", &pf, e));
    if (pf) TRY(pkv_json_object(pf, "serving.prefill", pkeys, e));
    double base_us, tok_us;
    /* Affine prefill model: base + per_token * prompt tokens of the batch. The
     * defaults are of the order of a 7B model's prefill on one H200 (placeholders). */
    TRY(pkv_json_num(pf, "serving.prefill", "base_us", 2000, 0, false, 1e9, &base_us, e));
    TRY(pkv_json_num(pf, "serving.prefill", "per_token_us", 0.1, 0, false, 1e6, &tok_us, e));
    c->max_active = (int32_t)ma;
    c->kv_pages = (int32_t)kp;
    c->prefill_base_s = base_us * 1e-6;
    c->prefill_per_token_s = tok_us * 1e-6;
    return 0;
}

/* A relative path in an experiment file is taken from the file's own folder. */
static void resolve_path(char *dst, size_t n, const char *exp_file, const char *p) {
    if (p[0] == '/') {
        snprintf(dst, n, "%s", p);
        return;
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", exp_file);
    snprintf(dst, n, "%s/%s", dirname(tmp), p);
}

static int parse_route(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"policy", "buckets", "calibration", "overrides", NULL};
    const char *pol, *bm;
    int bmi;
    const cJSON *ov;
    if (o) TRY(pkv_json_object(o, "route", keys, e));
    TRY(pkv_json_str(o, "route", "policy", "adaptive", pkv_policy_names, &pol, NULL, e));
    TRY(pkv_json_str(o, "route", "buckets", "exact", bucket_names, &bm, &bmi, e));
    const cJSON *cv = o ? cJSON_GetObjectItemCaseSensitive(o, "calibration") : NULL;
    if (cv && !cJSON_IsString(cv)) return pkv_fail(e, "route.calibration: must be a string");
    if (cv)
        resolve_path(c->calibration, sizeof c->calibration, c->file, cv->valuestring);
    else
        snprintf(c->calibration, sizeof c->calibration, "%s",
                 PKV_SOURCE_DIR "/experiments/calibration/default.json");
    TRY(pkv_json_sub(o, "route", "overrides", &ov, e));
    snprintf(c->policy, sizeof c->policy, "%s", pol);
    c->bucket_mode = (pkv_bucket_mode)bmi;
    c->calib_overrides = ov ? cJSON_Duplicate(ov, 1) : NULL;
    return 0;
}

static int parse_run(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"max_steps",   "max_time_s", "warmup_steps", "seed",
                                       "output",      "backend",    "clock",        "check_every",
                                       "check_first", NULL};
    const char *out, *be, *ck;
    int bei, cki;
    int64_t seed;
    if (o) TRY(pkv_json_object(o, "run", keys, e));
    TRY(pkv_json_int(o, "run", "max_steps", 0, 0, INT64_MAX / 2, &c->max_steps, e));
    TRY(pkv_json_num(o, "run", "max_time_s", 0, 0, false, 1e12, &c->max_time, e));
    TRY(pkv_json_int(o, "run", "warmup_steps", 0, 0, INT64_MAX / 2, &c->warmup_steps, e));
    TRY(pkv_json_int(o, "run", "seed", 1, 0, INT64_MAX / 2, &seed, e));
    TRY(pkv_json_str(o, "run", "output", "", NULL, &out, NULL, e));
    TRY(pkv_json_str(o, "run", "backend", "auto", pkv_backend_names, &be, &bei, e));
    TRY(pkv_json_str(o, "run", "clock", "auto", clock_names, &ck, &cki, e));
    TRY(pkv_json_int(o, "run", "check_every", 0, 0, INT64_MAX / 2, &c->check_every, e));
    TRY(pkv_json_int(o, "run", "check_first", 0, 0, INT64_MAX / 2, &c->check_first, e));
    c->seed = (uint64_t)seed;
    c->backend = (pkv_backend_kind)bei;
    c->clock = cki == 3 ? -1 : cki;
    if (*out) /* an artifact: relative to the working folder, like -o */
        snprintf(c->output, sizeof c->output, "%s", out);
    else
        snprintf(c->output, sizeof c->output, "%s.h5", c->name);
    return 0;
}

/* Every request must fit an empty pool, or FCFS admission would wait forever; and
 * something must end the run. */
static int check_consistency(const pkv_config *c, pkv_err *e) {
    const pkv_workload_spec *w = &c->workload;
    if (w->num_requests == 0 && c->max_steps == 0 && c->max_time == 0)
        return pkv_fail(e, "run: nothing ends this run: set workload.num_requests, "
                           "run.max_steps or run.max_time_s");
    int64_t pm = pkv_length_max(&w->prompt), dm = pkv_length_max(&w->decode);
    int64_t longest = pm < 0 || dm < 0 || pm + dm > w->max_context ? w->max_context : pm + dm;
    int64_t pages = (longest + c->shape.page_size - 1) / c->shape.page_size;
    if (pages > c->kv_pages)
        return pkv_fail(e,
                        "serving.kv_pages: %d pages of %d tokens cannot hold one request of "
                        "%lld tokens (the workload's longest); raise kv_pages to at least %lld",
                        c->kv_pages, c->shape.page_size, (long long)longest, (long long)pages);
    return 0;
}

int pkv_config_resolve(pkv_config *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON *m = cJSON_AddObjectToObject(r, "model");
    cJSON_AddNumberToObject(m, "hq", c->shape.hq);
    cJSON_AddNumberToObject(m, "hkv", c->shape.hkv);
    cJSON_AddNumberToObject(m, "head_dim", c->shape.d);
    cJSON_AddNumberToObject(m, "page_size", c->shape.page_size);
    cJSON_AddStringToObject(m, "dtype", "fp16");
    const pkv_workload_spec *w = &c->workload;
    cJSON *wl = cJSON_AddObjectToObject(r, "workload");
    cJSON *a = cJSON_AddObjectToObject(wl, "arrival");
    cJSON_AddStringToObject(a, "process", pkv_arrival_names[w->arrival.kind]);
    if (w->arrival.kind == PKV_ARRIVAL_CLOSED)
        cJSON_AddNumberToObject(a, "concurrency", (double)w->arrival.concurrency);
    else
        cJSON_AddNumberToObject(a, "rate", w->arrival.rate);
    if (w->arrival.kind == PKV_ARRIVAL_GAMMA || w->arrival.kind == PKV_ARRIVAL_WEIBULL)
        cJSON_AddNumberToObject(a, "cv", w->arrival.cv);
    const pkv_length_spec *ls[2] = {&w->prompt, &w->decode};
    const char *ln[2] = {"prompt", "decode"};
    for (int i = 0; i < 2; i++) {
        cJSON *l = cJSON_AddObjectToObject(wl, ln[i]);
        const pkv_length_spec *s = ls[i];
        cJSON_AddStringToObject(l, "dist", pkv_length_names[s->kind]);
        switch (s->kind) {
        case PKV_LENGTH_FIXED:
            cJSON_AddNumberToObject(l, "value", (double)s->value);
            break;
        case PKV_LENGTH_UNIFORM:
            cJSON_AddNumberToObject(l, "min", (double)s->min);
            cJSON_AddNumberToObject(l, "max", (double)s->max);
            break;
        case PKV_LENGTH_CYCLE: {
            cJSON *v = cJSON_AddArrayToObject(l, "values");
            for (int j = 0; j < s->n_values; j++)
                cJSON_AddItemToArray(v, cJSON_CreateNumber((double)s->values[j]));
            break;
        }
        case PKV_LENGTH_BIMODAL:
            cJSON_AddNumberToObject(l, "short", (double)s->short_len);
            cJSON_AddNumberToObject(l, "long", (double)s->long_len);
            cJSON_AddNumberToObject(l, "p_long", s->p_long);
            break;
        case PKV_LENGTH_LOGNORMAL:
            cJSON_AddNumberToObject(l, "median", s->median);
            cJSON_AddNumberToObject(l, "sigma", s->sigma);
            break;
        }
    }
    cJSON_AddNumberToObject(wl, "num_requests", (double)w->num_requests);
    cJSON_AddNumberToObject(wl, "max_context", (double)w->max_context);
    cJSON *sv = cJSON_AddObjectToObject(r, "serving");
    cJSON_AddNumberToObject(sv, "max_active", c->max_active);
    cJSON_AddNumberToObject(sv, "kv_pages", c->kv_pages);
    cJSON_AddStringToObject(sv, "admission", "fcfs");
    cJSON *pf = cJSON_AddObjectToObject(sv, "prefill");
    cJSON_AddNumberToObject(pf, "base_us", c->prefill_base_s * 1e6);
    cJSON_AddNumberToObject(pf, "per_token_us", c->prefill_per_token_s * 1e6);
    cJSON *rt = cJSON_AddObjectToObject(r, "route");
    cJSON_AddStringToObject(rt, "policy", c->policy);
    cJSON_AddStringToObject(rt, "buckets", bucket_names[c->bucket_mode]);
    cJSON_AddStringToObject(rt, "calibration", c->calibration);
    if (c->calib_overrides)
        cJSON_AddItemToObject(rt, "overrides", cJSON_Duplicate(c->calib_overrides, 1));
    cJSON *rn = cJSON_AddObjectToObject(r, "run");
    cJSON_AddNumberToObject(rn, "max_steps", (double)c->max_steps);
    cJSON_AddNumberToObject(rn, "max_time_s", c->max_time);
    cJSON_AddNumberToObject(rn, "warmup_steps", (double)c->warmup_steps);
    cJSON_AddNumberToObject(rn, "seed", (double)c->seed);
    cJSON_AddStringToObject(rn, "output", c->output);
    cJSON_AddStringToObject(rn, "backend", pkv_backend_names[c->backend]);
    cJSON_AddStringToObject(rn, "clock", c->clock < 0 ? "auto" : clock_names[c->clock]);
    cJSON_AddNumberToObject(rn, "check_every", (double)c->check_every);
    cJSON_AddNumberToObject(rn, "check_first", (double)c->check_first);
    free(c->resolved);
    c->resolved = cJSON_Print(r);
    cJSON_Delete(r);
    return c->resolved ? 0 : -1;
}

int pkv_config_load(pkv_config *c, const char *path, pkv_err *e) {
    char *text = pkv_read_file(path, NULL, e);
    return text ? pkv_config_parse(c, text, path, e) : -1;
}

int pkv_config_parse(pkv_config *c, char *text, const char *path, pkv_err *e) {
    *c = (pkv_config){.text = text};
    snprintf(c->file, sizeof c->file, "%s", path);
    cJSON *root = pkv_json_parse(c->text, path, e);
    if (!root) {
        pkv_config_free(c);
        return -1;
    }
    static const char *const keys[] = {"name",    "description", "model", "workload",
                                       "serving", "route",       "run",   NULL};
    const cJSON *m, *w, *s, *r, *u;
    const char *name;
    pkv_err sub;
    char base[1024];
    snprintf(base, sizeof base, "%s", path);
    char *stem = basename(base);
    char *dot = strrchr(stem, '.');
    if (dot) *dot = 0;
    int rc = -1;
    if (pkv_json_object(root, "", keys, &sub) ||
        pkv_json_str(root, "", "name", stem, NULL, &name, NULL, &sub) ||
        pkv_json_sub(root, "", "model", &m, &sub) || pkv_json_sub(root, "", "workload", &w, &sub) ||
        pkv_json_sub(root, "", "serving", &s, &sub) || pkv_json_sub(root, "", "route", &r, &sub) ||
        pkv_json_sub(root, "", "run", &u, &sub))
        goto out;
    snprintf(c->name, sizeof c->name, "%s", name);
    if (parse_model(c, m, &sub) || parse_workload(c, w, &sub) || parse_serving(c, s, &sub) ||
        parse_route(c, r, &sub) || parse_run(c, u, &sub) || check_consistency(c, &sub))
        goto out;
    rc = pkv_config_resolve(c);
    if (rc) pkv_fail(&sub, "out of memory");
out:
    if (rc) pkv_fail(e, "%s: %s", path, sub.msg);
    cJSON_Delete(root);
    if (rc) pkv_config_free(c); /* on failure nothing stays owned */
    return rc;
}

void pkv_config_free(pkv_config *c) {
    free(c->text);
    free(c->resolved);
    cJSON_Delete(c->calib_overrides);
    *c = (pkv_config){0};
}
