/* `pkvsim run --json`: the summary as vLLM's benchmark result file (its keys, and with
 * --detailed its per-request arrays). */
#include "summary.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

/* A string member, escaped as JSON wants (a label may hold quotes). */
static void jstr(FILE *f, const char *key, const char *v, int first) {
    cJSON *s = cJSON_CreateString(v);
    char *t = s ? cJSON_PrintUnformatted(s) : NULL;
    fprintf(f, first ? "\n  \"%s\": %s" : ",\n  \"%s\": %s", key, t ? t : "null");
    free(t);
    cJSON_Delete(s);
}

/* A JSON number, or null for what a run has none of (NaN is not JSON). */
static void jnum(FILE *f, const char *key, double v, int first) {
    fprintf(f, first ? "\n  \"%s\": " : ",\n  \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

static void json_latency(FILE *f, const pkv_summary *s, const char *name, const pkv_latency *l) {
    char k[64];
    const char *what[3] = {"mean", "median", "std"};
    const double v[3] = {l->mean, l->median, l->std};
    for (int i = 0; i < 3; i++) {
        snprintf(k, sizeof k, "%s_%s_ms", what[i], name);
        jnum(f, k, v[i] * 1e3, 0);
    }
    for (int i = 0; i < s->n_pcts; i++) {
        snprintf(k, sizeof k, "p%g_%s_ms", s->pcts[i], name);
        jnum(f, k, l->pct[i] * 1e3, 0);
    }
    fprintf(f, ",\n  \"percentiles_%s_ms\": [", name);
    for (int i = 0; i < s->n_pcts; i++) {
        fprintf(f, "%s[%g, ", i ? ", " : "", s->pcts[i]);
        if (isfinite(l->pct[i]))
            fprintf(f, "%.17g]", l->pct[i] * 1e3);
        else
            fputs("null]", f);
    }
    fputc(']', f);
}

#define CMP(a, b) (((a) > (b)) - ((a) < (b)))

/* Requests in arrival order (ties: by replica, then by their number, which is each
 * replica's arrival order). */
static int by_arrival(const void *a, const void *b) {
    const pkv_request_rec *x = a, *y = b;
    return x->t_arrival != y->t_arrival ? CMP(x->t_arrival, y->t_arrival)
           : x->replica != y->replica   ? CMP(x->replica, y->replica)
                                        : CMP(x->id, y->id);
}

/* The log's ITL rows by request (replica, then number), each request's in the order they
 * came (their positions). */
static int by_itl_key(const void *a, const void *b) {
    const pkv_itl_row *x = *(pkv_itl_row *const *)a, *y = *(pkv_itl_row *const *)b;
    return x->replica != y->replica ? CMP(x->replica, y->replica)
           : x->id != y->id         ? CMP(x->id, y->id)
                                    : CMP(x, y);
}

/* The first of the n sorted rows of request r's (replica, number); n when none. */
static size_t first_itl(pkv_itl_row *const *rows, size_t n, const pkv_request_rec *r) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const pkv_itl_row *x = rows[mid];
        if (x->replica < r->replica || (x->replica == r->replica && x->id < r->id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether row x is request r's. */
static bool itl_of(const pkv_itl_row *x, const pkv_request_rec *r) {
    return x->replica == r->replica && x->id == r->id;
}

static void jlist(FILE *f, const char *key, const pkv_request_rec *r, size_t n, int what) {
    fprintf(f, ",\n  \"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        const bool done = r[i].state == PKV_REQ_FINISHED;
        if (i) fputs(", ", f);
        switch (what) {
        case 0:
            fprintf(f, "%d", r[i].prompt_len);
            break;
        case 1:
            fprintf(f, "%d", done ? r[i].generated : 0);
            break;
        case 2: /* vLLM's ttft: seconds, 0 for a failed request */
            fprintf(f, "%.17g", done ? r[i].t_first_token - r[i].t_arrival : 0.0);
            break;
        case 3:
            fprintf(f, "%.17g", r[i].t_arrival);
            break;
        default:
            if (r[i].state == PKV_REQ_REFUSED)
                fprintf(f,
                        "\"refused: %d prompt and %d output tokens are past the model's context "
                        "(workload.max_context)\"",
                        r[i].prompt_len, r[i].decode_len);
            else
                fputs(done ? "\"\"" : "\"not finished when the run ended\"", f);
        }
    }
    fputc(']', f);
}

/* vLLM's peak: output tokens per one-second window of the run (from the first
 * arrival), the most of them, and the requests in flight (arrived, not finished) during
 * that window. */
static int peak_second(const pkv_summary *s, const pkv_request_log *l, pkv_itl_row **rows,
                       double *max_tok, uint64_t *max_conc) {
    const double t0 = s->t_first_arrival;
    const size_t bins = isfinite(s->t_last_finish) && s->t_last_finish >= t0
                            ? (size_t)(s->t_last_finish - t0) + 1
                            : 1;
    uint64_t *tok = calloc(bins, sizeof *tok);
    if (!tok) return -1;
    for (size_t i = 0; i < l->n; i++) { /* each request's token times, from its ITL rows */
        const pkv_request_rec *r = &l->req[i];
        if (r->state != PKV_REQ_FINISHED) continue;
        size_t k = first_itl(rows, l->n_itl, r);
        double t = r->t_first_token;
        for (int32_t j = 0;; j++) {
            const size_t b = (size_t)fmax(0, t - t0);
            tok[b < bins ? b : bins - 1]++;
            if (j + 1 >= r->generated || k >= l->n_itl || !itl_of(rows[k], r)) break;
            t += rows[k++]->gap;
        }
    }
    size_t best = 0;
    for (size_t b = 1; b < bins; b++)
        if (tok[b] > tok[best]) best = b;
    *max_tok = (double)tok[best];
    *max_conc = 0;
    for (size_t i = 0; i < l->n; i++) {
        const pkv_request_rec *r = &l->req[i];
        const double end = r->state == PKV_REQ_FINISHED ? r->t_finish : INFINITY;
        *max_conc += r->t_arrival < t0 + (double)best + 1 && end >= t0 + (double)best;
    }
    free(tok);
    return 0;
}

int pkv_summary_json(const pkv_summary *s, const pkv_vllm_meta *m, pkv_request_log *l, FILE *f) {
    fputc('{', f);
    pkv_itl_row **rows = NULL;
    if (m && l) {
        char date[32];
        const time_t now = time(NULL);
        strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
        jstr(f, "date", date, 1);
        jstr(f, "endpoint_type", m->backend, 0);
        jstr(f, "backend", m->backend, 0);
        jstr(f, "label", m->label, 0);
        jstr(f, "model_id", m->model_id, 0);
        jstr(f, "tokenizer_id", m->model_id, 0);
        fprintf(f, ",\n  \"num_prompts\": %zu", l->n);
        if (isinf(m->request_rate))
            fputs(",\n  \"request_rate\": \"inf\"", f);
        else
            jnum(f, "request_rate", m->request_rate, 0);
        jnum(f, "burstiness", m->burstiness, 0);
        jnum(f, "max_concurrency", m->max_concurrency >= 0 ? (double)m->max_concurrency : NAN, 0);
        jnum(f, "duration", s->duration, 0);
        jnum(f, "failed", (double)(l->n - s->finished), 0);
    } else {
        jnum(f, "duration", s->duration, 1);
    }
    jnum(f, "completed", (double)s->finished, 0);
    jstr(f, "ended_by",
         s->interrupted ? "signal"
         : s->bounded   ? "bound (run.max_steps or run.max_time_s)"
                        : "end of the workload",
         0);
    jnum(f, "not_arrived", s->offered ? (double)(s->offered - s->arrived) : NAN, 0);
    jnum(f, "refused", (double)s->refused, 0);
    jnum(f, "clamped", (double)s->clamped, 0);
    jnum(f, "total_input_tokens", (double)s->input_tokens, 0);
    jnum(f, "total_output_tokens", (double)s->output_tokens, 0);
    jnum(f, "request_throughput", s->request_throughput, 0);
    jnum(f, "request_goodput", s->request_goodput, 0);
    jnum(f, "output_throughput", s->output_throughput, 0);
    jnum(f, "total_token_throughput", s->total_token_throughput, 0);
    jnum(f, "slo_attainment", s->slo_attainment, 0);
    jnum(f, "slo_ttft_ms", s->slo.ttft > 0 ? s->slo.ttft * 1e3 : NAN, 0);
    jnum(f, "slo_tpot_ms", s->slo.tpot > 0 ? s->slo.tpot * 1e3 : NAN, 0);
    jnum(f, "slo_e2el_ms", s->slo.e2el > 0 ? s->slo.e2el * 1e3 : NAN, 0);
    json_latency(f, s, "ttft", &s->ttft);
    json_latency(f, s, "tpot", &s->tpot);
    json_latency(f, s, "itl", &s->itl);
    json_latency(f, s, "e2el", &s->e2el);
    int rc = 0;
    if (m && l) {
        qsort(l->req, l->n, sizeof *l->req, by_arrival);
        rows = malloc((l->n_itl ? l->n_itl : 1) * sizeof *rows);
        if (!rows) {
            errno = ENOMEM;
            return -1;
        }
        for (size_t i = 0; i < l->n_itl; i++) rows[i] = &l->itl[i];
        qsort(rows, l->n_itl, sizeof *rows, by_itl_key);
        double max_tok = NAN;
        uint64_t max_conc = 0;
        rc = peak_second(s, l, rows, &max_tok, &max_conc);
        jnum(f, "max_output_tokens_per_s", max_tok, 0);
        jnum(f, "max_concurrent_requests", (double)max_conc, 0);
    }
    if (m && l && m->detailed) {
        jlist(f, "input_lens", l->req, l->n, 0);
        jlist(f, "output_lens", l->req, l->n, 1);
        jlist(f, "ttfts", l->req, l->n, 2);
        fputs(",\n  \"itls\": [", f);
        for (size_t i = 0; i < l->n; i++) {
            fputs(i ? ", [" : "[", f);
            size_t k = first_itl(rows, l->n_itl, &l->req[i]);
            for (int first = 1; k < l->n_itl && itl_of(rows[k], &l->req[i]); k++, first = 0)
                fprintf(f, first ? "%.17g" : ", %.17g", rows[k]->gap);
            fputc(']', f);
        }
        fputc(']', f);
        jlist(f, "start_times", l->req, l->n, 3);
        fprintf(f, ",\n  \"generated_texts\": [");
        for (size_t i = 0; i < l->n; i++) fputs(i ? ", \"\"" : "\"\"", f);
        fputc(']', f);
        jlist(f, "errors", l->req, l->n, 4);
    }
    free(rows);
    fputs("\n}\n", f);
    return rc || ferror(f) ? -1 : 0;
}
