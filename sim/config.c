#include "config.h"

#include <libgen.h>
#include <math.h>
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
    static const char *const keys[] = {
        "hq", "hkv", "head_dim", "page_size", "dtype", "mlp_intermediate", NULL};
    int64_t hq, hkv, d, ps;
    const char *dtype;
    if (o) TRY(pkv_json_object(o, "model", keys, e));
    TRY(pkv_json_int(o, "model", "hq", 32, 1, 256, &hq, e));
    TRY(pkv_json_int(o, "model", "hkv", 8, 1, 256, &hkv, e));
    TRY(pkv_json_int(o, "model", "head_dim", 128, 8, 512, &d, e));
    TRY(pkv_json_int(o, "model", "page_size", 16, 1, 1024, &ps, e));
    static const char *const dtypes[] = {"fp16", NULL};
    TRY(pkv_json_str(o, "model", "dtype", "fp16", dtypes, &dtype, NULL, e));
    TRY(pkv_json_int(o, "model", "mlp_intermediate", 0, 0, 1 << 20, &c->mlp_inter, e));
    if (hq % hkv)
        return pkv_fail(e, "model.hq: %lld is not a multiple of model.hkv (%lld)", (long long)hq,
                        (long long)hkv);
    if (d % 8)
        return pkv_fail(e, "model.head_dim: must be a multiple of 8 (got %lld)", (long long)d);
    c->shape = (pkvk_shape){(int)hq, (int)hkv, (int)d, (int)ps};
    return 0;
}

static int parse_arrival(pkv_arrival_spec *a, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"process", "rate",     "cv",        "concurrency",
                                       "rate_on", "rate_off", "mean_on_s", "mean_off_s",
                                       "points",  "period_s", NULL};
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
    if (a->kind == PKV_ARRIVAL_MMPP) {
        TRY(pkv_json_num(o, P, "rate_on", 10, 0, false, 1e9, &a->rate_on, e));
        TRY(pkv_json_num(o, P, "rate_off", 0, 0, false, 1e9, &a->rate_off, e));
        TRY(pkv_json_num(o, P, "mean_on_s", 1, 0, true, 1e9, &a->mean_on_s, e));
        TRY(pkv_json_num(o, P, "mean_off_s", 1, 0, true, 1e9, &a->mean_off_s, e));
        if (pkv_arrival_prepare(a)) return pkv_fail(e, "%s: rate_on or rate_off must be > 0", P);
        return 0;
    }
    if (a->kind == PKV_ARRIVAL_PIECEWISE) {
        const cJSON *pts = cJSON_GetObjectItemCaseSensitive(o, "points");
        int n = cJSON_IsArray(pts) ? cJSON_GetArraySize(pts) : 0;
        if (n < 1 || n > PKV_ARRIVAL_MAX_POINTS)
            return pkv_fail(e, "%s.points: must be an array of 1 to %d [time_s, rate] pairs", P,
                            PKV_ARRIVAL_MAX_POINTS);
        for (int i = 0; i < n; i++) {
            const cJSON *pt = cJSON_GetArrayItem(pts, i);
            const cJSON *t = cJSON_GetArrayItem(pt, 0), *r = cJSON_GetArrayItem(pt, 1);
            if (!cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 || !cJSON_IsNumber(t) ||
                !cJSON_IsNumber(r) || t->valuedouble < 0 || r->valuedouble < 0 ||
                (i > 0 && t->valuedouble <= a->t_s[i - 1]))
                return pkv_fail(e,
                                "%s.points[%d]: must be [time_s, rate] with time increasing "
                                "and both >= 0",
                                P, i);
            a->t_s[i] = t->valuedouble;
            a->rates[i] = r->valuedouble;
        }
        a->n_points = n;
        TRY(pkv_json_num(o, P, "period_s", 0, 0, false, 1e12, &a->period_s, e));
        if (a->period_s > 0 && a->period_s < a->t_s[n - 1])
            return pkv_fail(e, "%s.period_s: must be 0 or at least the last point's time", P);
        if (pkv_arrival_prepare(a)) return pkv_fail(e, "%s.points: some rate must be > 0", P);
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

static int parse_trace(pkv_trace_spec *t, const cJSON *o, const char *P, const char *exp_file,
                       pkv_err *e);

static int parse_length(pkv_length_spec *l, const cJSON *o, const char *P, int64_t def,
                        const char *exp_file, pkv_err *e) {
    static const char *const keys[] = {"dist",  "value", "min",    "max",    "values",
                                       "short", "long",  "p_long", "median", "sigma",
                                       "s",     "trace", "field",  NULL};
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
    case PKV_LENGTH_ZIPF:
        TRY(pkv_json_int(o, P, "min", 1, 1, MAXL, &l->min, e));
        TRY(pkv_json_int(o, P, "max", 65536, 1, MAXL, &l->max, e));
        TRY(pkv_json_num(o, P, "s", 1.1, 0, true, 10, &l->s, e));
        if (l->max < l->min) return pkv_fail(e, "%s.max: must be >= %s.min", P, P);
        if (l->max - l->min > (1 << 22))
            return pkv_fail(e, "%s: the range may span at most %d values", P, 1 << 22);
        return pkv_length_prepare(l) ? pkv_fail(e, "%s: out of memory", P) : 0;
    case PKV_LENGTH_EMPIRICAL: {
        static const char *const fields[] = {"prompt", "decode", NULL};
        const cJSON *t;
        const char *field;
        int fi;
        char tp[128];
        snprintf(tp, sizeof tp, "%s.trace", P);
        TRY(pkv_json_sub(o, P, "trace", &t, e));
        if (!t) return pkv_fail(e, "%s: is required for dist \"empirical\"", tp);
        TRY(pkv_json_str(o, P, "field", NULL, fields, &field, &fi, e));
        pkv_trace_spec ts;
        pkv_trace tr;
        TRY(parse_trace(&ts, t, tp, exp_file, e));
        if (pkv_trace_load(&tr, &ts, e)) return -1;
        l->values_emp = fi == 0 ? tr.prompt : tr.decode; /* taken over from the trace */
        l->n_emp = tr.n;
        if (fi == 0)
            tr.prompt = NULL;
        else
            tr.decode = NULL;
        pkv_trace_free(&tr);
        return 0;
    }
    }
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

static int parse_trace(pkv_trace_spec *t, const cJSON *o, const char *P, const char *exp_file,
                       pkv_err *e) {
    static const char *const keys[] = {"path",       "format",        "columns", "time_scale",
                                       "rate_scale", "target_rate",   "first_n", "window_s",
                                       "on_bad_row", "spread_tick_s", "step_s",  NULL};
    static const char *const bad[] = {"stop", "skip", NULL};
    static const char *const ckeys[] = {"time", "prompt", "decode", "unit", NULL};
    const char *path, *fmt, *onbad;
    int fi, bi;
    pkv_trace_spec_default(t);
    TRY(pkv_json_object(o, P, keys, e));
    TRY(pkv_json_str(o, P, "path", NULL, NULL, &path, NULL, e));
    resolve_path(t->path, sizeof t->path, exp_file, path);
    TRY(pkv_json_str(o, P, "format", "auto", pkv_trace_format_names, &fmt, &fi, e));
    t->format = (pkv_trace_format)fi;
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(o, "columns");
    char cp[160];
    snprintf(cp, sizeof cp, "%s.columns", P);
    int jsonish = t->format == PKV_TRACE_JSONL || t->format == PKV_TRACE_JSON ||
                  (t->format == PKV_TRACE_AUTO && strstr(path, ".json"));
    if (!cols || cJSON_IsString(cols)) {
        const char *name = cols ? cols->valuestring : jsonish ? "mooncake" : "azure";
        if (pkv_trace_columns_builtin(name, &t->cols))
            return pkv_fail(e,
                            "%s: \"%s\" is not one of azure, vidur, study, mooncake (or give "
                            "an object {time, prompt, decode, unit})",
                            cp, name);
        t->time_optional = strcmp(name, "study") == 0;
    } else {
        const char *tc, *pc, *dc, *unit;
        int ui;
        TRY(pkv_json_object(cols, cp, ckeys, e));
        TRY(pkv_json_str(cols, cp, "time", "", NULL, &tc, NULL, e));
        TRY(pkv_json_str(cols, cp, "prompt", NULL, NULL, &pc, NULL, e));
        TRY(pkv_json_str(cols, cp, "decode", NULL, NULL, &dc, NULL, e));
        TRY(pkv_json_str(cols, cp, "unit", "s", pkv_time_unit_names, &unit, &ui, e));
        snprintf(t->cols.time, sizeof t->cols.time, "%s", tc);
        snprintf(t->cols.prompt, sizeof t->cols.prompt, "%s", pc);
        snprintf(t->cols.decode, sizeof t->cols.decode, "%s", dc);
        t->cols.unit = (pkv_time_unit)ui;
    }
    TRY(pkv_json_num(o, P, "step_s", 0.02, 0, false, 1e6, &t->step_s, e));
    TRY(pkv_json_num(o, P, "time_scale", 1, 0, true, 1e9, &t->time_scale, e));
    TRY(pkv_json_num(o, P, "rate_scale", 1, 0, true, 1e9, &t->rate_scale, e));
    TRY(pkv_json_num(o, P, "target_rate", 0, 0, false, 1e9, &t->target_rate, e));
    TRY(pkv_json_int(o, P, "first_n", 0, 0, INT64_MAX / 2, &t->first_n, e));
    TRY(pkv_json_num(o, P, "spread_tick_s", 0, 0, false, 1e9, &t->spread_tick_s, e));
    TRY(pkv_json_str(o, P, "on_bad_row", "stop", bad, &onbad, &bi, e));
    t->skip_bad = bi == 1;
    const cJSON *win = cJSON_GetObjectItemCaseSensitive(o, "window_s");
    if (win) {
        const cJSON *a = cJSON_GetArrayItem(win, 0), *b = cJSON_GetArrayItem(win, 1);
        if (!cJSON_IsArray(win) || cJSON_GetArraySize(win) != 2 || !cJSON_IsNumber(a) ||
            !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble <= a->valuedouble)
            return pkv_fail(e, "%s.window_s: must be [begin, end] seconds with end > begin >= 0",
                            P);
        t->window_begin = a->valuedouble;
        t->window_end = b->valuedouble;
    }
    return 0;
}

/* The study's trace families: defaults for the arrival process and the lengths,
 * which explicit keys of the experiment override. */
static const char *const preset_names[] = {"bucketed", "homogeneous", "bimodal",
                                           "uniform",  "zipf",        NULL};

static int apply_preset(pkv_workload_spec *w, int preset) {
    w->arrival = (pkv_arrival_spec){.kind = PKV_ARRIVAL_CLOSED, .concurrency = preset == 0 ? 1 : 8};
    w->decode = (pkv_length_spec){.kind = PKV_LENGTH_FIXED, .value = 256};
    w->num_requests = 64;
    pkv_length_spec *p = &w->prompt;
    switch (preset) {
    case 0: /* bucketed: the 8K/16K/32K/64K cycle, one request at a time */
        *p = (pkv_length_spec){
            .kind = PKV_LENGTH_CYCLE, .values = {8192, 16384, 32768, 65536}, .n_values = 4};
        return 0;
    case 1: /* homogeneous: 32K prompts, independent decode lengths */
        *p = (pkv_length_spec){.kind = PKV_LENGTH_FIXED, .value = 32768};
        w->decode = (pkv_length_spec){.kind = PKV_LENGTH_UNIFORM, .min = 64, .max = 512};
        return 0;
    case 2: /* bimodal: one long (64K) for three short (8K) */
        *p = (pkv_length_spec){
            .kind = PKV_LENGTH_BIMODAL, .short_len = 8192, .long_len = 65536, .p_long = 0.25};
        return 0;
    case 3: /* uniform 8K..64K */
        *p = (pkv_length_spec){.kind = PKV_LENGTH_UNIFORM, .min = 8192, .max = 65536};
        return 0;
    default: /* zipf: s = 1.2 over 1K..64K */
        *p = (pkv_length_spec){.kind = PKV_LENGTH_ZIPF, .min = 1024, .max = 65536, .s = 1.2};
        return pkv_length_prepare(p);
    }
}

static int parse_workload(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"preset",       "arrival",     "prompt", "decode",
                                       "num_requests", "max_context", "trace",  NULL};
    const cJSON *a, *p, *d, *t;
    const char *preset;
    int pi = -1;
    if (!o) return pkv_fail(e, "workload: is required");
    TRY(pkv_json_object(o, "workload", keys, e));
    TRY(pkv_json_sub(o, "workload", "arrival", &a, e));
    TRY(pkv_json_sub(o, "workload", "prompt", &p, e));
    TRY(pkv_json_sub(o, "workload", "decode", &d, e));
    TRY(pkv_json_sub(o, "workload", "trace", &t, e));
    pkv_workload_spec *w = &c->workload;
    if (cJSON_GetObjectItemCaseSensitive(o, "preset")) {
        TRY(pkv_json_str(o, "workload", "preset", NULL, preset_names, &preset, &pi, e));
        if (t) return pkv_fail(e, "workload.trace: cannot be combined with workload.preset");
        if (apply_preset(w, pi)) return pkv_fail(e, "workload.preset: out of memory");
    }
    if (t) {
        if (p || d)
            return pkv_fail(e, "workload.%s: lengths come from workload.trace",
                            p ? "prompt" : "decode");
        TRY(parse_trace(&c->trace_spec, t, "workload.trace", c->file, e));
        if (pkv_trace_load(&c->trace, &c->trace_spec, e)) return -1;
        pkv_trace *tr = &c->trace;
        if (c->trace_spec.target_rate > 0 && tr->n > 1 && tr->t[tr->n - 1] > 0) {
            double k = c->trace_spec.target_rate * tr->t[tr->n - 1] / (double)(tr->n - 1);
            for (size_t i = 0; i < tr->n; i++) tr->t[i] /= k;
        }
        w->trace = tr;
        w->trace_times = a == NULL; /* an explicit arrival process replaces the timestamps */
    }
    if (a)
        TRY(parse_arrival(&w->arrival, a, e));
    else if (pi < 0 && !t)
        return pkv_fail(e, "workload.arrival: is required");
    if (!t && (pi < 0 || p)) {
        pkv_length_free(&w->prompt);
        TRY(parse_length(&w->prompt, p, "workload.prompt", 1024, c->file, e));
    }
    if (!t && (pi < 0 || d)) TRY(parse_length(&w->decode, d, "workload.decode", 128, c->file, e));
    TRY(pkv_json_int(o, "workload", "num_requests", pi < 0 ? 0 : 64, 0, INT64_MAX / 2,
                     &w->num_requests, e));
    TRY(pkv_json_int(o, "workload", "max_context", 131072, 2, 1 << 24, &w->max_context, e));
    return 0;
}

static int parse_serving(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"max_active", "kv_pages",    "admission",
                                       "prefill",    "page_tables", NULL};
    static const char *const tkeys[] = {"mode", "hole_fraction", "bucket_len", NULL};
    static const char *const modes[] = {"allocator", "generator", NULL};
    static const char *const pkeys[] = {"base_us", "per_token_us", NULL};

    const char *adm;
    int64_t ma, kp;
    const cJSON *pf;
    if (o) TRY(pkv_json_object(o, "serving", keys, e));
    TRY(pkv_json_int(o, "serving", "max_active", 64, 1, 4096, &ma, e));
    TRY(pkv_json_int(o, "serving", "kv_pages", 65536, 1, INT32_MAX, &kp, e));
    int ai;
    TRY(pkv_json_str(o, "serving", "admission", "fcfs", pkv_admission_names, &adm, &ai, e));
    c->admission = pkv_admission_get(ai);
    TRY(pkv_json_sub(o, "serving", "prefill", &pf, e));
    if (pf) TRY(pkv_json_object(pf, "serving.prefill", pkeys, e));
    double base_us, tok_us;
    /* Affine prefill model: base + per_token * prompt tokens of the batch. The
     * defaults are of the order of a 7B model's prefill on one H200 (placeholders). */
    TRY(pkv_json_num(pf, "serving.prefill", "base_us", 2000, 0, false, 1e9, &base_us, e));
    TRY(pkv_json_num(pf, "serving.prefill", "per_token_us", 0.1, 0, false, 1e6, &tok_us, e));
    const cJSON *pt;
    const char *mode;
    int mi;
    int64_t bl;
    TRY(pkv_json_sub(o, "serving", "page_tables", &pt, e));
    if (pt) TRY(pkv_json_object(pt, "serving.page_tables", tkeys, e));
    TRY(pkv_json_str(pt, "serving.page_tables", "mode", "allocator", modes, &mode, &mi, e));
    TRY(pkv_json_num(pt, "serving.page_tables", "hole_fraction", 0, 0, false, 0.95,
                     &c->hole_fraction, e));
    TRY(pkv_json_int(pt, "serving.page_tables", "bucket_len", 0, 0, 1 << 24, &bl, e));
    if (bl > 0 && mi == 0)
        return pkv_fail(e, "serving.page_tables.bucket_len: only with mode \"generator\"");
    c->reserve_full = mi == 1;
    c->bucket_len = bl;
    c->max_active = (int32_t)ma;
    c->kv_pages = (int32_t)kp;
    c->prefill_base_s = base_us * 1e-6;
    c->prefill_per_token_s = tok_us * 1e-6;
    return 0;
}

static int parse_route(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"policy",    "buckets",         "calibration",
                                       "overrides", "allow_other_gpu", NULL};
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
    TRY(pkv_json_bool(o, "route", "allow_other_gpu", false, &c->allow_other_gpu, e));
    snprintf(c->policy, sizeof c->policy, "%s", pol);
    c->bucket_mode = (pkv_bucket_mode)bmi;
    c->calib_overrides = ov ? cJSON_Duplicate(ov, 1) : NULL;
    return 0;
}

static int parse_run(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {
        "max_steps", "max_time_s",  "warmup_steps", "seed",       "output", "backend",
        "clock",     "check_every", "check_first",  "cuda_graph", NULL};
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
    TRY(pkv_json_bool(o, "run", "cuda_graph", false, &c->cuda_graph, e));
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
    if (c->cuda_graph && strcmp(c->policy, "oracle") == 0)
        return pkv_fail(e, "run.cuda_graph: the oracle times every route separately; use a fixed "
                           "route or adaptive with graph replay");
    if (!w->trace && w->num_requests == 0 && c->max_steps == 0 && c->max_time == 0)
        return pkv_fail(e, "run: nothing ends this run: set workload.num_requests, "
                           "run.max_steps or run.max_time_s");
    int64_t pm = w->trace ? -1 : pkv_length_max(&w->prompt);
    int64_t dm = w->trace ? -1 : pkv_length_max(&w->decode);
    int64_t longest = pm < 0 || dm < 0 || pm + dm > w->max_context ? w->max_context : pm + dm;
    if (c->bucket_len > 0) longest = (longest + c->bucket_len - 1) / c->bucket_len * c->bucket_len;
    int64_t pages = (longest + c->shape.page_size - 1) / c->shape.page_size;
    int64_t usable = c->kv_pages - (int64_t)(c->hole_fraction * c->kv_pages);
    if (pages > usable)
        return pkv_fail(e,
                        "serving.kv_pages: %lld usable pages of %d tokens (%d, less %.0f%% holes) "
                        "cannot hold one request of %lld tokens (the workload's longest); raise "
                        "kv_pages to at least %lld",
                        (long long)usable, c->shape.page_size, c->kv_pages, 100 * c->hole_fraction,
                        (long long)longest, (long long)ceil(pages / (1 - c->hole_fraction)));
    return 0;
}

int pkv_config_resolve(pkv_config *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "name", c->name);
    cJSON *m = cJSON_AddObjectToObject(r, "model");
    cJSON_AddNumberToObject(m, "hq", c->shape.hq);
    cJSON_AddNumberToObject(m, "hkv", c->shape.hkv);
    cJSON_AddNumberToObject(m, "head_dim", c->shape.d);
    cJSON_AddNumberToObject(m, "page_size", c->shape.page_size);
    cJSON_AddStringToObject(m, "dtype", "fp16");
    cJSON_AddNumberToObject(m, "mlp_intermediate", (double)c->mlp_inter);
    const pkv_workload_spec *w = &c->workload;
    cJSON *wl = cJSON_AddObjectToObject(r, "workload");
    cJSON *a = cJSON_AddObjectToObject(wl, "arrival");
    const pkv_arrival_spec *ar = &w->arrival;
    if (w->trace) {
        cJSON *t = cJSON_AddObjectToObject(wl, "trace");
        cJSON_AddStringToObject(t, "path", c->trace_spec.path);
        cJSON_AddNumberToObject(t, "rows", (double)w->trace->n);
        cJSON_AddNumberToObject(t, "skipped", (double)w->trace->skipped);
        cJSON_AddStringToObject(t, "timestamps", w->trace_times ? "kept" : "replaced");
    }
    cJSON_AddStringToObject(a, "process",
                            w->trace && w->trace_times ? "trace" : pkv_arrival_names[ar->kind]);
    if (ar->kind == PKV_ARRIVAL_CLOSED) {
        cJSON_AddNumberToObject(a, "concurrency", (double)ar->concurrency);
    } else if (ar->kind == PKV_ARRIVAL_MMPP) {
        cJSON_AddNumberToObject(a, "rate_on", ar->rate_on);
        cJSON_AddNumberToObject(a, "rate_off", ar->rate_off);
        cJSON_AddNumberToObject(a, "mean_on_s", ar->mean_on_s);
        cJSON_AddNumberToObject(a, "mean_off_s", ar->mean_off_s);
    } else if (ar->kind == PKV_ARRIVAL_PIECEWISE) {
        cJSON *pts = cJSON_AddArrayToObject(a, "points");
        for (int i = 0; i < ar->n_points; i++) {
            double pt[2] = {ar->t_s[i], ar->rates[i]};
            cJSON_AddItemToArray(pts, cJSON_CreateDoubleArray(pt, 2));
        }
        cJSON_AddNumberToObject(a, "period_s", ar->period_s);
    } else if (!(w->trace && w->trace_times)) {
        cJSON_AddNumberToObject(a, "rate", ar->rate);
    }
    if (ar->kind == PKV_ARRIVAL_GAMMA || ar->kind == PKV_ARRIVAL_WEIBULL)
        cJSON_AddNumberToObject(a, "cv", ar->cv);
    const pkv_length_spec *ls[2] = {&w->prompt, &w->decode};
    const char *ln[2] = {"prompt", "decode"};
    for (int i = 0; i < 2 && !w->trace; i++) {
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
        case PKV_LENGTH_ZIPF:
            cJSON_AddNumberToObject(l, "min", (double)s->min);
            cJSON_AddNumberToObject(l, "max", (double)s->max);
            cJSON_AddNumberToObject(l, "s", s->s);
            break;
        case PKV_LENGTH_EMPIRICAL:
            cJSON_AddNumberToObject(l, "values", (double)s->n_emp);
            break;
        }
    }
    cJSON_AddNumberToObject(wl, "num_requests", (double)w->num_requests);
    cJSON_AddNumberToObject(wl, "max_context", (double)w->max_context);
    cJSON *sv = cJSON_AddObjectToObject(r, "serving");
    cJSON_AddNumberToObject(sv, "max_active", c->max_active);
    cJSON_AddNumberToObject(sv, "kv_pages", c->kv_pages);
    cJSON_AddStringToObject(sv, "admission", c->admission->name);
    cJSON *ptab = cJSON_AddObjectToObject(sv, "page_tables");
    cJSON_AddStringToObject(ptab, "mode", c->reserve_full ? "generator" : "allocator");
    cJSON_AddNumberToObject(ptab, "hole_fraction", c->hole_fraction);
    cJSON_AddNumberToObject(ptab, "bucket_len", (double)c->bucket_len);
    cJSON *pf = cJSON_AddObjectToObject(sv, "prefill");
    cJSON_AddNumberToObject(pf, "base_us", c->prefill_base_s * 1e6);
    cJSON_AddNumberToObject(pf, "per_token_us", c->prefill_per_token_s * 1e6);
    cJSON *rt = cJSON_AddObjectToObject(r, "route");
    cJSON_AddStringToObject(rt, "policy", c->policy);
    cJSON_AddStringToObject(rt, "buckets", bucket_names[c->bucket_mode]);
    cJSON_AddStringToObject(rt, "calibration", c->calibration);
    cJSON_AddBoolToObject(rt, "allow_other_gpu", c->allow_other_gpu);
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
    cJSON_AddBoolToObject(rn, "cuda_graph", c->cuda_graph);
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
    pkv_trace_free(&c->trace);
    pkv_length_free(&c->workload.prompt);
    pkv_length_free(&c->workload.decode);
    free(c->text);
    free(c->resolved);
    cJSON_Delete(c->calib_overrides);
    *c = (pkv_config){0};
}
