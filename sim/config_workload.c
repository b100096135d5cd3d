/* The workload section of experiment files: arrival processes, length
 * distributions, traces and the study's presets; parsed, validated with errors that
 * name the JSON path, and written back resolved. */
#include "config_workload.h"
#include "jsonv.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A relative path in an experiment file is taken from the file's own folder. */
void pkv_config_path(char *dst, size_t n, const char *exp_file, const char *p) {
    if (p[0] == '/') {
        snprintf(dst, n, "%s", p);
        return;
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", exp_file);
    snprintf(dst, n, "%s/%s", dirname(tmp), p);
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
    pkv_config_path(t->path, sizeof t->path, exp_file, path);
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

int pkv_config_parse_workload(pkv_workload_spec *w, pkv_trace_spec *ts, pkv_trace *trace,
                              const char *exp_file, const cJSON *o, pkv_err *e) {
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
    if (cJSON_GetObjectItemCaseSensitive(o, "preset")) {
        TRY(pkv_json_str(o, "workload", "preset", NULL, preset_names, &preset, &pi, e));
        if (t) return pkv_fail(e, "workload.trace: cannot be combined with workload.preset");
        if (apply_preset(w, pi)) return pkv_fail(e, "workload.preset: out of memory");
    }
    if (t) {
        if (p || d)
            return pkv_fail(e, "workload.%s: lengths come from workload.trace",
                            p ? "prompt" : "decode");
        TRY(parse_trace(ts, t, "workload.trace", exp_file, e));
        if (pkv_trace_load(trace, ts, e)) return -1;
        pkv_trace *tr = trace;
        if (ts->target_rate > 0 && tr->n > 1 && tr->t[tr->n - 1] > 0) {
            double k = ts->target_rate * tr->t[tr->n - 1] / (double)(tr->n - 1);
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
        TRY(parse_length(&w->prompt, p, "workload.prompt", 1024, exp_file, e));
    }
    if (!t && (pi < 0 || d)) TRY(parse_length(&w->decode, d, "workload.decode", 128, exp_file, e));
    TRY(pkv_json_int(o, "workload", "num_requests", pi < 0 ? 0 : 64, 0, INT64_MAX / 2,
                     &w->num_requests, e));
    TRY(pkv_json_int(o, "workload", "max_context", 131072, 2, 1 << 24, &w->max_context, e));
    return 0;
}

void pkv_config_resolve_workload(const pkv_workload_spec *w, const pkv_trace_spec *ts, cJSON *r) {
    cJSON *wl = cJSON_AddObjectToObject(r, "workload");
    cJSON *a = cJSON_AddObjectToObject(wl, "arrival");
    const pkv_arrival_spec *ar = &w->arrival;
    if (w->trace) {
        cJSON *t = cJSON_AddObjectToObject(wl, "trace");
        cJSON_AddStringToObject(t, "path", ts->path);
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
}
