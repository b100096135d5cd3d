/* The workload section of experiment files: arrival processes, length
 * distributions, traces and the study's presets; parsed, validated with errors that
 * name the JSON path, and written back resolved. */
#include "config_workload.h"
#include "config_keys.h"
#include "jsonv.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A relative path in an experiment file is taken from the file's own folder. */
int pkv_config_path(char *dst, size_t n, const char *exp_file, const char *p, const char *key,
                    pkv_err *e) {
    int len;
    if (p[0] == '/') {
        len = snprintf(dst, n, "%s", p);
    } else {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", exp_file);
        len = snprintf(dst, n, "%s/%s", dirname(tmp), p);
    }
    if (len < 0 || (size_t)len >= n)
        return pkv_fail(e,
                        "%s: the path \"%s\" is longer than %zu characters from the "
                        "experiment's folder",
                        key, p, n - 1);
    return 0;
}

static int parse_arrival(pkv_arrival_spec *a, const cJSON *o, pkv_err *e) {
    const char *P = "workload.arrival";
    if (!o) return pkv_fail(e, "%s: is required", P);
    *a = (pkv_arrival_spec){0};
    TRY(pkv_keys_parse(pkv_config_keys(), P, o, P, a, false, e));
    if (a->kind == PKV_ARRIVAL_MMPP && pkv_arrival_prepare(a))
        return pkv_fail(e, "%s: rate_on or rate_off must be > 0", P);
    if (a->kind == PKV_ARRIVAL_PIECEWISE) {
        const cJSON *pts;
        int n;
        TRY(pkv_json_array(o, P, "points", PKV_ARRIVAL_MAX_POINTS, "[time_s, rate] pairs", &pts, &n,
                           e));
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
        if (a->period_s > 0 && a->period_s < a->t_s[n - 1])
            return pkv_fail(e, "%s.period_s: must be 0 or at least the last point's time", P);
        if (pkv_arrival_prepare(a)) return pkv_fail(e, "%s.points: some rate must be > 0", P);
    }
    if ((a->kind == PKV_ARRIVAL_GAMMA || a->kind == PKV_ARRIVAL_WEIBULL) && pkv_arrival_prepare(a))
        return pkv_fail(e, "%s.cv: %g cannot be reached", P, a->cv);
    return 0;
}

static int parse_trace(pkv_trace_spec *t, const cJSON *o, const char *P, const char *exp_file,
                       pkv_err *e);

static int parse_length(pkv_length_spec *l, const cJSON *o, const char *P, int64_t def,
                        const char *exp_file, pkv_err *e) {
    *l = (pkv_length_spec){.kind = PKV_LENGTH_FIXED, .value = def};
    if (!o) return 0;
    TRY(pkv_keys_parse(pkv_config_keys(), PKV_OBJ_LENGTH, o, P, l, false, e));
    if ((l->kind == PKV_LENGTH_UNIFORM || l->kind == PKV_LENGTH_ZIPF) && l->max < l->min)
        return pkv_fail(e, "%s.max: must be >= %s.min", P, P);
    switch (l->kind) {
    case PKV_LENGTH_CYCLE: {
        const int64_t MAXL = 1 << 24;
        const cJSON *v;
        int n;
        TRY(pkv_json_array(o, P, "values", PKV_LENGTH_MAX_VALUES, "lengths", &v, &n, e));
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
    case PKV_LENGTH_ZIPF:
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
        snprintf(l->trace_path, sizeof l->trace_path, "%s", ts.path);
        l->values_emp = fi == 0 ? tr.prompt : tr.decode; /* taken over from the trace */
        l->n_emp = tr.n;
        if (fi == 0)
            tr.prompt = NULL;
        else
            tr.decode = NULL;
        pkv_trace_free(&tr);
        return 0;
    }
    default:
        return 0;
    }
}

static int parse_trace(pkv_trace_spec *t, const cJSON *o, const char *P, const char *exp_file,
                       pkv_err *e) {
    pkv_trace_spec_default(t);
    TRY(pkv_keys_parse(pkv_config_keys(), PKV_OBJ_TRACE, o, P, t, false, e));
    char given[sizeof t->path];
    snprintf(given, sizeof given, "%s", t->path);
    TRY(pkv_config_path(t->path, sizeof t->path, exp_file, given, P, e));
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(o, "columns");
    char cp[160];
    snprintf(cp, sizeof cp, "%s.columns", P);
    int jsonish = t->format == PKV_TRACE_JSONL || t->format == PKV_TRACE_JSON ||
                  (t->format == PKV_TRACE_AUTO && strstr(given, ".json"));
    if (!cols || cJSON_IsString(cols)) {
        const char *name = cols ? cols->valuestring : jsonish ? "mooncake" : "azure";
        if (pkv_trace_columns_builtin(name, &t->cols))
            return pkv_fail(e,
                            "%s: \"%s\" is not one of azure, vidur, study, mooncake (or give "
                            "an object {time, prompt, decode, unit})",
                            cp, name);
        t->time_optional = strcmp(name, "study") == 0;
    } else {
        TRY(pkv_keys_parse(pkv_config_keys(), PKV_OBJ_COLUMNS, cols, cp, &t->cols, false, e));
        /* a unit guessed wrong runs a trace 1000 times slow or fast: said, never assumed */
        const cJSON *time = cJSON_GetObjectItemCaseSensitive(cols, "time");
        if (cJSON_IsString(time) && *time->valuestring &&
            !cJSON_GetObjectItemCaseSensitive(cols, "unit"))
            return pkv_fail(e,
                            "%s.unit: required where a time column is named: s, ms, datetime "
                            "or steps (times in ms read as seconds would arrive 1000 times "
                            "slower)",
                            cp);
    }
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
static int apply_preset(pkv_workload_spec *w, int preset) {
    w->arrival = (pkv_arrival_spec){.kind = PKV_ARRIVAL_CLOSED, .concurrency = preset == 0 ? 1 : 8};
    w->decode = (pkv_length_spec){.kind = PKV_LENGTH_FIXED, .value = 256};
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

/* workload.classes: 1 to 8 objects {name, share, priority, ttft_ms, tpot_ms, e2el_ms},
 * distinct names, shares summing to 1. */
static int parse_classes(pkv_workload_spec *w, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"name",    "share",   "priority", "ttft_ms",
                                       "tpot_ms", "e2el_ms", NULL};
    const int n = cJSON_IsArray(o) ? cJSON_GetArraySize(o) : 0;
    if (n < 1 || n > PKV_MAX_CLASSES)
        return pkv_fail(e, "workload.classes: must be a list of 1 to %d class objects",
                        PKV_MAX_CLASSES);
    double total = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(o, i);
        char P[64];
        snprintf(P, sizeof P, "workload.classes[%d]", i);
        pkv_slo_class *k = &w->classes[i];
        const char *name;
        int64_t prio;
        TRY(pkv_json_object(c, P, keys, e));
        TRY(pkv_json_str(c, P, "name", NULL, NULL, &name, NULL, e));
        if (!name || !*name || strlen(name) >= sizeof k->name ||
            strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                strlen(name))
            return pkv_fail(e, "%s.name: is required: 1 to 31 letters, digits or _", P);
        for (int j = 0; j < i; j++)
            if (!strcmp(w->classes[j].name, name))
                return pkv_fail(e, "%s.name: \"%s\" names workload.classes[%d] too", P, name, j);
        snprintf(k->name, sizeof k->name, "%s", name);
        if (!cJSON_GetObjectItemCaseSensitive(c, "share"))
            return pkv_fail(e, "%s.share: is required", P);
        TRY(pkv_json_num(c, P, "share", 0, 0, true, 1, &k->share, e));
        TRY(pkv_json_int(c, P, "priority", 0, 0, 1000, &prio, e));
        k->priority = (int32_t)prio;
        TRY(pkv_json_num(c, P, "ttft_ms", 0, 0, false, 1e9, &k->ttft_s, e));
        TRY(pkv_json_num(c, P, "tpot_ms", 0, 0, false, 1e9, &k->tpot_s, e));
        TRY(pkv_json_num(c, P, "e2el_ms", 0, 0, false, 1e12, &k->e2el_s, e));
        k->ttft_s *= 1e-3, k->tpot_s *= 1e-3, k->e2el_s *= 1e-3;
        total += k->share;
    }
    if (fabs(total - 1) > 1e-6)
        return pkv_fail(e, "workload.classes: the shares must sum to 1 (got %.9g)", total);
    w->n_classes = n;
    return 0;
}

int pkv_config_parse_workload(pkv_workload_spec *w, pkv_trace_spec *ts, pkv_trace *trace,
                              const char *exp_file, const cJSON *o, pkv_err *e) {
    const cJSON *a, *p, *d, *t, *tu;
    const char *preset;
    int pi = -1;
    if (!o) return pkv_fail(e, "workload: is required");
    TRY(pkv_keys_check(pkv_config_keys(), "workload", o, "workload", e));
    TRY(pkv_json_sub(o, "workload", "arrival", &a, e));
    TRY(pkv_json_sub(o, "workload", "prompt", &p, e));
    TRY(pkv_json_sub(o, "workload", "decode", &d, e));
    TRY(pkv_json_sub(o, "workload", "trace", &t, e));
    TRY(pkv_json_sub(o, "workload", "turns", &tu, e));
    if (cJSON_GetObjectItemCaseSensitive(o, "preset")) {
        TRY(pkv_json_str(o, "workload", "preset", NULL, pkv_workload_presets, &preset, &pi, e));
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
    TRY(parse_length(&w->turns, tu, "workload.turns", 1, exp_file, e));
    if (pkv_workload_sessions(w) && t)
        return pkv_fail(e, "workload.turns: multi-turn sessions are synthetic; a trace brings its "
                           "own requests (and the Mooncake trace its block hashes)");
    if (pkv_workload_sessions(w) && w->arrival.kind == PKV_ARRIVAL_CLOSED)
        return pkv_fail(e, "workload.turns: multi-turn sessions need an open-loop arrival process "
                           "(it starts the sessions; their turns follow by think time)");
    w->num_requests = pi < 0 ? 0 : 64; /* the default; a preset's is its own */
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "classes");
    if (cl) TRY(parse_classes(w, cl, e));
    return pkv_keys_parse(pkv_config_keys(), "workload", o, "workload", w, false, e);
}

void pkv_config_resolve_workload(const pkv_workload_spec *w, const pkv_trace_spec *ts, cJSON *r) {
    pkv_keys k = pkv_config_keys();
    cJSON *wl = cJSON_AddObjectToObject(r, "workload");
    cJSON *a = cJSON_AddObjectToObject(wl, "arrival");
    const pkv_arrival_spec *ar = &w->arrival;
    if (w->trace) {
        cJSON *t = cJSON_AddObjectToObject(wl, "trace");
        pkv_keys_write(k, PKV_OBJ_TRACE, ts, t); /* every setting: path, scales, ... */
        if (ts->window_begin > 0 || ts->window_end > 0) {
            const double win[2] = {ts->window_begin, ts->window_end};
            cJSON_AddItemToObject(t, "window_s", cJSON_CreateDoubleArray(win, 2));
        }
        pkv_keys_write(k, PKV_OBJ_COLUMNS, &ts->cols, cJSON_AddObjectToObject(t, "columns"));
        cJSON_AddNumberToObject(t, "rows", (double)w->trace->n);
        cJSON_AddNumberToObject(t, "skipped", (double)w->trace->skipped);
        cJSON_AddStringToObject(t, "timestamps", w->trace_times ? "kept" : "replaced");
    }
    if (w->trace && w->trace_times) { /* the trace's own timestamps */
        cJSON_AddStringToObject(a, "process", "trace");
    } else {
        pkv_keys_write(k, "workload.arrival", ar, a);
        if (ar->kind == PKV_ARRIVAL_PIECEWISE) {
            cJSON *pts = cJSON_AddArrayToObject(a, "points");
            for (int i = 0; i < ar->n_points; i++) {
                double pt[2] = {ar->t_s[i], ar->rates[i]};
                cJSON_AddItemToArray(pts, cJSON_CreateDoubleArray(pt, 2));
            }
        }
    }
    const pkv_length_spec *ls[3] = {&w->prompt, &w->decode, &w->turns};
    const char *ln[3] = {"prompt", "decode", "turns"};
    for (int i = 0; i < 3 && !w->trace; i++) {
        cJSON *l = cJSON_AddObjectToObject(wl, ln[i]);
        const pkv_length_spec *s = ls[i];
        pkv_keys_write(k, PKV_OBJ_LENGTH, s, l);
        if (s->kind == PKV_LENGTH_CYCLE) {
            cJSON *v = cJSON_AddArrayToObject(l, "values");
            for (int j = 0; j < s->n_values; j++)
                cJSON_AddItemToArray(v, cJSON_CreateNumber((double)s->values[j]));
        } else if (s->kind == PKV_LENGTH_EMPIRICAL) { /* its trace and what it drew from it */
            double sum = 0;
            for (size_t j = 0; j < s->n_emp; j++) sum += (double)s->values_emp[j];
            cJSON_AddStringToObject(l, "trace", s->trace_path);
            cJSON_AddNumberToObject(l, "values", (double)s->n_emp);
            cJSON_AddNumberToObject(l, "mean", s->n_emp ? sum / (double)s->n_emp : 0);
        }
    }
    pkv_keys_write(k, "workload", w, wl);
    if (w->n_classes) {
        cJSON *cs = cJSON_AddArrayToObject(wl, "classes");
        for (int i = 0; i < w->n_classes; i++) {
            const pkv_slo_class *c = &w->classes[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", c->name);
            cJSON_AddNumberToObject(o, "share", c->share);
            cJSON_AddNumberToObject(o, "priority", c->priority);
            cJSON_AddNumberToObject(o, "ttft_ms", c->ttft_s * 1e3);
            cJSON_AddNumberToObject(o, "tpot_ms", c->tpot_s * 1e3);
            cJSON_AddNumberToObject(o, "e2el_ms", c->e2el_s * 1e3);
            cJSON_AddItemToArray(cs, o);
        }
    }
}
