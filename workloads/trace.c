#include "trace.h"
#include "jsonv.h"
#include "pkv_mem.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const pkv_trace_format_names[] = {"auto", "csv", "jsonl", "json", NULL};
const char *const pkv_time_unit_names[] = {"s", "ms", "datetime", "steps", NULL};

int pkv_trace_columns_builtin(const char *name, pkv_trace_columns *out) {
    static const struct {
        const char *name;
        pkv_trace_columns cols;
    } builtin[] = {
        {"azure", {"TIMESTAMP", "ContextTokens", "GeneratedTokens", PKV_TIME_DATETIME, ""}},
        {"vidur", {"arrived_at", "num_prefill_tokens", "num_decode_tokens", PKV_TIME_SECONDS, ""}},
        {"study", {"arrival_step", "prompt_len", "decode_len", PKV_TIME_STEPS, ""}},
        {"mooncake", {"timestamp", "input_length", "output_length", PKV_TIME_MS, "hash_ids"}},
    };
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (strcmp(name, builtin[i].name) == 0) {
            *out = builtin[i].cols;
            return 0;
        }
    return -1;
}

void pkv_trace_spec_default(pkv_trace_spec *s) {
    *s = (pkv_trace_spec){.time_scale = 1.0, .rate_scale = 1.0, .step_s = 0.0};
    pkv_trace_columns_builtin("azure", &s->cols);
}

/* ---- row accumulation ---------------------------------------------------------- */
typedef struct rows {
    double *t;
    int32_t *p, *d;
    size_t n, cap;
    int64_t *h;    /* every row's block ids, concatenated */
    size_t *h_off; /* [cap + 1] */
    size_t nh, caph;
} rows;

/* The row's block ids (hashes: a JSON list, or NULL for none) after the others'. */
static int rows_push_hashes(rows *r, const cJSON *hashes) {
    if (!r->h_off && !(r->h_off = calloc(r->cap + 1, sizeof *r->h_off))) return -1;
    for (const cJSON *v = hashes ? hashes->child : NULL; v; v = v->next) {
        if (r->nh == r->caph) {
            size_t cap = r->caph ? r->caph * 2 : 65536;
            if (pkv_resize(&r->h, cap, sizeof *r->h)) return -1;
            r->caph = cap;
        }
        r->h[r->nh++] = (int64_t)v->valuedouble;
    }
    r->h_off[r->n] = r->nh; /* after rows_push: row n - 1 ends here */
    return 0;
}

static int rows_push(rows *r, double t, int32_t p, int32_t d) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4096;
        if (pkv_resize(&r->t, cap, sizeof *r->t) || pkv_resize(&r->p, cap, sizeof *r->p) ||
            pkv_resize(&r->d, cap, sizeof *r->d) ||
            (r->h_off && pkv_resize(&r->h_off, cap + 1, sizeof *r->h_off)))
            return -1;
        r->cap = cap;
    }
    r->t[r->n] = t, r->p[r->n] = p, r->d[r->n] = d;
    r->n++;
    return 0;
}

static void rows_free(rows *r) {
    free(r->t), free(r->p), free(r->d), free(r->h), free(r->h_off);
}

/* ---- field parsing ---------------------------------------------------------------- */
/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char **s, const char *end, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++, (*s)++) {
        if (*s >= end || !isdigit((unsigned char)**s)) return -1;
        v = v * 10 + (**s - '0');
    }
    *out = v;
    return 0;
}

/* "YYYY-MM-DD HH:MM:SS[.fraction]" (or 'T' between date and time) to seconds. */
static int parse_datetime(const char *s, const char *end, double *out) {
    int Y, M, D, h, m, sec;
    if (digits(&s, end, 4, &Y) || s >= end || *s++ != '-' || digits(&s, end, 2, &M) || s >= end ||
        *s++ != '-' || digits(&s, end, 2, &D) || s >= end || (*s != ' ' && *s != 'T') ||
        (s++, digits(&s, end, 2, &h)) || s >= end || *s++ != ':' || digits(&s, end, 2, &m) ||
        s >= end || *s++ != ':' || digits(&s, end, 2, &sec))
        return -1;
    static const int month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (M < 1 || M > 12 || D < 1 || h > 23 || m > 59 || sec > 60) return -1;
    if (D > month_days[M - 1] || (M == 2 && D == 29 && (Y % 4 || (Y % 100 == 0 && Y % 400))))
        return -2; /* a date no calendar has: Feb 31, Feb 29 of a common year */
    double frac = 0, scale = 0.1;
    if (s < end && *s == '.') {
        s++;
        if (s >= end || !isdigit((unsigned char)*s)) return -1;
        for (; s < end && isdigit((unsigned char)*s); s++, scale *= 0.1) frac += (*s - '0') * scale;
    }
    if (s != end) return -1;
    *out =
        (double)(days_from_civil(Y, (unsigned)M, (unsigned)D) * 86400 + h * 3600 + m * 60 + sec) +
        frac;
    return 0;
}

/* A decimal number: digits, a sign, a point and an exponent only (no hexadecimal, no
 * inf or nan, no NUL byte or thousands separator inside). */
static int parse_number(const char *s, const char *end, double *out) {
    char buf[64];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof buf) return -1;
    for (const char *c = s; c < end; c++)
        if (!isdigit((unsigned char)*c) && (!*c || !strchr("+-.eE", *c))) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *e;
    double v = strtod(buf, &e);
    if (*e || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* A length: a non-negative integer of at most 1e9 tokens (a decimal point with zeros
 * after it is accepted), checked before any cast. */
static const char *length_value(double v, int32_t *out) {
    if (!isfinite(v)) return "not a finite number";
    if (v < 0) return "negative length";
    if (v != floor(v)) return "not an integer";
    if (v > 1e9) return "length too large (more than 1e9 tokens)";
    *out = (int32_t)v;
    return NULL;
}

static const char *parse_length(const char *s, const char *end, int32_t *out) {
    double v;
    if (parse_number(s, end, &v)) return "not a number";
    return length_value(v, out);
}

/* Seconds from a timestamp in its unit: finite, and within 1e12 s (31,700 years) of
 * zero, so that no infinity or lost precision reaches the clock. */
static const char *time_value(double v, pkv_time_unit u, double step_s, double *out) {
    if (!isfinite(v)) return "not a finite number";
    double t = u == PKV_TIME_MS ? v * 1e-3 : u == PKV_TIME_STEPS ? v * step_s : v;
    if (!(fabs(t) <= 1e12)) return "timestamp too large (more than 1e12 s)";
    *out = t;
    return NULL;
}

static const char *parse_time(const char *s, const char *end, pkv_time_unit u, double step_s,
                              double *out) {
    if (u == PKV_TIME_DATETIME) {
        int rc = parse_datetime(s, end, out);
        return rc == -2 ? "impossible date (no such day in that month)"
               : rc     ? "not a datetime"
                        : NULL;
    }
    double v;
    if (parse_number(s, end, &v)) return "not a number";
    return time_value(v, u, step_s, out);
}

/* One parsed row, or the reason it is bad (field names which). */
typedef struct row_result {
    double t;
    int32_t p, d;
    const cJSON *hashes; /* the row's block ids (JSON), NULL: none */
    const char *field;
    const char *why;
} row_result;

/* ---- CSV ---------------------------------------------------------------------- */
enum { MAX_FIELDS = 64 };

static int split_csv(const char *s, const char *end, const char **fb, const char **fe) {
    int n = 0;
    for (;;) {
        const char *c = memchr(s, ',', (size_t)(end - s));
        const char *fend = c ? c : end;
        if (n == MAX_FIELDS) return -1;
        fb[n] = s, fe[n] = fend;
        while (fb[n] < fe[n] && (*fb[n] == ' ' || *fb[n] == '"')) fb[n]++;
        while (fe[n] > fb[n] && (fe[n][-1] == ' ' || fe[n][-1] == '"')) fe[n]--;
        n++;
        if (!c) return n;
        s = c + 1;
    }
}

typedef int (*row_sink)(void *ctx, size_t line, const row_result *r, pkv_err *e);

static int read_csv(const char *text, size_t len, const pkv_trace_spec *sp, row_sink sink,
                    void *ctx, pkv_err *e) {
    const char *p = text, *end = text + len;
    const char *fb[MAX_FIELDS], *fe[MAX_FIELDS];
    /* header */
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *hend = nl ? nl : end;
    if (hend > p && hend[-1] == '\r') hend--;
    if (hend == p) return pkv_fail(e, "%s: empty file (expected a header line)", sp->path);
    int nf = split_csv(p, hend, fb, fe);
    if (nf < 0) return pkv_fail(e, "%s:1: more than %d columns", sp->path, MAX_FIELDS);
    int ci[3] = {-1, -1, -1};
    const char *want[3] = {sp->cols.time, sp->cols.prompt, sp->cols.decode};
    for (int k = 0; k < 3; k++)
        for (int f = 0; f < nf && *want[k]; f++)
            if ((size_t)(fe[f] - fb[f]) == strlen(want[k]) &&
                !memcmp(fb[f], want[k], strlen(want[k]))) {
                if (ci[k] >= 0)
                    return pkv_fail(e,
                                    "%s:1: column \"%s\" given twice in the header (columns %d "
                                    "and %d)",
                                    sp->path, want[k], ci[k] + 1, f + 1);
                ci[k] = f;
            }
    for (int k = 0; k < 3; k++) {
        if (ci[k] >= 0 || (k == 0 && (!*want[0] || sp->time_optional))) continue;
        char head[256];
        snprintf(head, sizeof head, "%.*s", (int)(hend - p) > 200 ? 200 : (int)(hend - p), p);
        return pkv_fail(e,
                        "%s:1: missing column \"%s\" in the header (it has: %s); name the "
                        "trace's columns in workload.trace.columns: {\"time\", \"prompt\", "
                        "\"decode\"} or a layout: azure, vidur, study, mooncake",
                        sp->path, want[k], head);
    }
    int need = ci[0] > ci[1] ? ci[0] : ci[1];
    if (ci[2] > need) need = ci[2];
    size_t line = 1;
    p = nl ? nl + 1 : end;
    while (p < end) {
        line++;
        nl = memchr(p, '\n', (size_t)(end - p));
        const char *lend = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (lend > p && lend[-1] == '\r') lend--;
        if (lend == p) { /* blank line */
            p = next;
            continue;
        }
        row_result r = {0};
        int n = split_csv(p, lend, fb, fe);
        if (n <= need || n != nf) {
            static char msg[96];
            snprintf(msg, sizeof msg, "%s: %d fields, the header has %d",
                     n <= need ? "truncated line" : "a row of another width", n < 0 ? 0 : n, nf);
            r.why = msg;
        } else {
            if (ci[0] >= 0) {
                r.why = parse_time(fb[ci[0]], fe[ci[0]], sp->cols.unit, sp->step_s, &r.t);
                if (r.why) r.field = sp->cols.time;
            }
            if (!r.why && (r.why = parse_length(fb[ci[1]], fe[ci[1]], &r.p)))
                r.field = sp->cols.prompt;
            if (!r.why && (r.why = parse_length(fb[ci[2]], fe[ci[2]], &r.d)))
                r.field = sp->cols.decode;
        }
        if (sink(ctx, line, &r, e)) return -1;
        p = next;
    }
    return 0;
}

/* ---- JSON --------------------------------------------------------------------------- */
static void json_row(const cJSON *o, const pkv_trace_spec *sp, row_result *r) {
    const char *want[3] = {sp->cols.time, sp->cols.prompt, sp->cols.decode};
    if ((r->field = pkv_json_key_twice(o))) {
        r->why = "a key given twice";
        return;
    }
    for (int k = 0; k < 3 && !r->why; k++) {
        if (k == 0 && !*want[0]) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, want[k]);
        r->field = want[k];
        if (!v) {
            if (k == 0 && sp->time_optional) continue;
            r->why = "missing";
        } else if (k == 0 && sp->cols.unit == PKV_TIME_DATETIME) {
            r->why = cJSON_IsString(v)
                         ? parse_time(v->valuestring, v->valuestring + strlen(v->valuestring),
                                      sp->cols.unit, sp->step_s, &r->t)
                         : "not a datetime string";
        } else if (!cJSON_IsNumber(v)) {
            r->why = "not a number";
        } else if (k == 0) {
            r->why = time_value(v->valuedouble, sp->cols.unit, sp->step_s, &r->t);
        } else {
            r->why = length_value(v->valuedouble, k == 1 ? &r->p : &r->d);
        }
    }
    const cJSON *h =
        *sp->cols.hashes && !r->why ? cJSON_GetObjectItemCaseSensitive(o, sp->cols.hashes) : NULL;
    if (h) { /* optional; where given, a list of non-negative whole numbers */
        r->field = sp->cols.hashes;
        if (!cJSON_IsArray(h)) r->why = "not a list of block ids";
        for (const cJSON *v = h->child; v && !r->why; v = v->next)
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9.0e15 ||
                v->valuedouble != floor(v->valuedouble))
                r->why = "a block id that is not a whole number in [0, 9e15]";
        r->hashes = h;
    }
    if (!r->why) r->field = NULL;
}

static int read_jsonl(const char *text, size_t len, const pkv_trace_spec *sp, row_sink sink,
                      void *ctx, pkv_err *e) {
    const char *p = text, *end = text + len;
    size_t line = 0, data = 0;
    char *buf = NULL;
    size_t cap = 0;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *lend = nl ? nl : end;
        size_t n = (size_t)(lend - p);
        while (n && (p[n - 1] == '\r' || p[n - 1] == ' ')) n--;
        if (n) {
            if (n + 1 > cap) {
                cap = 2 * (n + 1);
                char *b = realloc(buf, cap);
                if (!b) {
                    free(buf);
                    return pkv_fail(e, "%s: out of memory", sp->path);
                }
                buf = b;
            }
            memcpy(buf, p, n);
            buf[n] = 0;
            data++;
            row_result r = {0};
            cJSON *o = cJSON_Parse(buf);
            if (!cJSON_IsObject(o))
                r.why = nl ? "invalid JSON object" : "invalid JSON object (truncated line?)";
            else
                json_row(o, sp, &r);
            int rc = sink(ctx, line, &r, e); /* r.hashes points into o */
            cJSON_Delete(o);
            if (rc) {
                free(buf);
                return -1;
            }
        }
        p = nl ? nl + 1 : end;
    }
    free(buf);
    if (data == 0) return pkv_fail(e, "%s: empty file (no JSON lines)", sp->path);
    return 0;
}

static int read_json_array(const char *text, const pkv_trace_spec *sp, row_sink sink, void *ctx,
                           pkv_err *e) {
    cJSON *root = pkv_json_parse(text, sp->path, e);
    if (!root) return -1;
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return pkv_fail(e, "%s: expected a JSON array of objects", sp->path);
    }
    size_t i = 0;
    int rc = 0;
    for (const cJSON *o = root->child; o && !rc; o = o->next, i++) {
        row_result r = {0};
        if (!cJSON_IsObject(o))
            r.why = "not an object";
        else
            json_row(o, sp, &r);
        rc = sink(ctx, i + 1, &r, e); /* "line" is the element number here */
    }
    cJSON_Delete(root);
    if (!rc && i == 0) return pkv_fail(e, "%s: empty array", sp->path);
    return rc;
}

/* ---- the sink: policy, order, window --------------------------------------------- */
typedef struct sink_ctx {
    const pkv_trace_spec *sp;
    rows r;
    size_t skipped, lines;
    double t_first, t_prev;
    int have_first;
    int elements; /* JSON array: say "element" instead of "line" */
} sink_ctx;

static int sink(void *vctx, size_t line, const row_result *r, pkv_err *e) {
    sink_ctx *c = vctx;
    const pkv_trace_spec *sp = c->sp;
    const char *why = r->why, *field = r->field;
    c->lines++;
    if (!why && c->have_first && r->t < c->t_prev) {
        why = "timestamp goes backwards";
        field = sp->cols.time;
    }
    if (why) {
        if (sp->skip_bad) {
            c->skipped++;
            return 0;
        }
        return pkv_fail(e,
                        "%s:%s%zu: %s%s%s%s (set workload.trace.on_bad_row to \"skip\" to skip "
                        "and count bad rows)",
                        sp->path, c->elements ? " element " : "", line, field ? "field \"" : "",
                        field ? field : "", field ? "\": " : "", why);
    }
    if (!c->have_first) c->t_first = r->t, c->have_first = 1;
    c->t_prev = r->t;
    double rel = r->t - c->t_first;
    if (rel < sp->window_begin || (sp->window_end > 0 && rel >= sp->window_end)) return 0;
    if (sp->first_n > 0 && (int64_t)c->r.n >= sp->first_n) return 0;
    return rows_push(&c->r, r->t, r->p, r->d) ||
                   (*sp->cols.hashes && rows_push_hashes(&c->r, r->hashes))
               ? pkv_fail(e, "%s: out of memory", sp->path)
               : 0;
}

static pkv_trace_format guess(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && !strcmp(dot, ".jsonl")) return PKV_TRACE_JSONL;
    if (dot && !strcmp(dot, ".json")) return PKV_TRACE_JSON;
    return PKV_TRACE_CSV;
}

int pkv_trace_load(pkv_trace *tr, const pkv_trace_spec *sp, pkv_err *e) {
    *tr = (pkv_trace){0};
    size_t len;
    char *text = pkv_read_file(sp->path, &len, e);
    if (!text) return -1;
    pkv_trace_format f = sp->format == PKV_TRACE_AUTO ? guess(sp->path) : sp->format;
    sink_ctx c = {.sp = sp, .elements = f == PKV_TRACE_JSON};
    int rc = f == PKV_TRACE_CSV     ? read_csv(text, len, sp, sink, &c, e)
             : f == PKV_TRACE_JSONL ? read_jsonl(text, len, sp, sink, &c, e)
                                    : read_json_array(text, sp, sink, &c, e);
    free(text);
    if (!rc && c.r.n == 0)
        rc = pkv_fail(e, "%s: no rows left (%zu read, %zu bad, window and first_n applied)",
                      sp->path, c.lines, c.skipped);
    if (rc) {
        rows_free(&c.r);
        return -1;
    }
    /* Rows sharing a timestamp are spread evenly over the tick that follows it, or
     * over the gap to the next timestamp where that is shorter: spreading never
     * reorders arrivals. */
    if (sp->spread_tick_s > 0)
        for (size_t i = 0; i < c.r.n;) {
            size_t j = i;
            while (j < c.r.n && c.r.t[j] == c.r.t[i]) j++;
            double width = sp->spread_tick_s;
            if (j < c.r.n && c.r.t[j] - c.r.t[i] < width) width = c.r.t[j] - c.r.t[i];
            for (size_t k = i; k < j; k++) c.r.t[k] += width * (double)(k - i) / (j - i);
            i = j;
        }
    double t0 = c.r.t[0];
    for (size_t i = 0; i < c.r.n; i++) c.r.t[i] = (c.r.t[i] - t0) * sp->time_scale / sp->rate_scale;
    *tr = (pkv_trace){.n = c.r.n,
                      .t = c.r.t,
                      .prompt = c.r.p,
                      .decode = c.r.d,
                      .skipped = c.skipped,
                      .lines = c.lines};
    if (c.r.nh > 0) { /* rows with block ids: keep them */
        tr->hashes = c.r.h, tr->hash_off = c.r.h_off;
    } else {
        free(c.r.h), free(c.r.h_off);
    }
    return 0;
}

void pkv_trace_free(pkv_trace *tr) {
    free(tr->t), free(tr->prompt), free(tr->decode), free(tr->hashes), free(tr->hash_off);
    *tr = (pkv_trace){0};
}
