/* The measured steps and forwards of runs, read for pkvsim fit: each route's steps'
 * counters and times (FP16 and FP8 KV apart), and the forwards over prompt tokens. */
#include "fit_runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5rec.h"
#include "jsonv.h"

void pkv_fit_set_free(pkv_fit_set *s) {
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        free(s->k[r]), free(s->t[r]), free(s->host[r]), free(s->ktok[r]);
    free(s->p_tok), free(s->p_sc), free(s->p_rows), free(s->p_meas), free(s->p_base),
        free(s->p_pred);
}

static int add_forward(pkv_fit_set *s, double tokens, double scores, double rows, double meas,
                       double base, double pred) {
    if (s->p_n == s->p_cap) {
        size_t cap = s->p_cap ? 2 * s->p_cap : 256;
        double **arr[6] = {&s->p_tok, &s->p_sc, &s->p_rows, &s->p_meas, &s->p_base, &s->p_pred};
        for (int k = 0; k < 6; k++) {
            double *a = realloc(*arr[k], cap * sizeof *a);
            if (!a) return -1;
            *arr[k] = a;
        }
        s->p_cap = cap;
    }
    s->p_tok[s->p_n] = tokens, s->p_sc[s->p_n] = scores, s->p_rows[s->p_n] = rows;
    s->p_meas[s->p_n] = meas, s->p_base[s->p_n] = base;
    s->p_pred[s->p_n++] = pred;
    return 0;
}

/* A file's forwards over prompt tokens into s (and per_file): its /prefills rows and
 * its chunked steps' dense parts, measured on the device; a file without them (the
 * study layer, a model-backend run) adds none. */
static int load_forwards(const char *path, const char *grp, const pkv_step_rec *st, size_t n,
                         pkv_fit_set *s, pkv_fit_set *per_file, pkv_err *e) {
    char *text = NULL, name[96];
    pkv_calib c;
    pkv_calib_defaults(&c);
    snprintf(name, sizeof name, "%s%scalibration/file", grp, *grp ? "/" : "");
    if (pkv_h5_read_text(path, name, &text, e)) return -1;
    cJSON *o = cJSON_Parse(text);
    int bad = !o || pkv_calib_apply(&c, o, "calibration/file", e);
    cJSON_Delete(o);
    free(text);
    if (bad) return pkv_fail(e, "%s: the run's calibration: %s", path, e->msg);
    pkv_prefill_rec *pf = NULL;
    size_t np = 0;
    pkv_err ignored;
    if (pkv_h5_read_prefills_at(path, grp, &pf, &np, &ignored)) np = 0;
    int rc = 0;
    for (size_t i = 0; i < n + np && !rc; i++) {
        double tok, sc, meas, pred, rows = 0;
        if (i < n) {
            if (st[i].warmup || !st[i].prefill_chunks) continue;
            tok = st[i].prefill_tokens, sc = st[i].prefill_scores, rows = st[i].rows;
            meas = st[i].t_dense, pred = st[i].t_dense_predicted;
        } else {
            const pkv_prefill_rec *p = &pf[i - n];
            tok = (double)p->tokens, sc = p->scores, meas = p->t_device, pred = p->t_predicted;
        }
        if (!(meas > 0) || !(pred > 0)) continue;
        if (!(sc >= 0)) sc = 0; /* a file from before the column */
        const double base =
            pred -
            (c.prefill_fixed_us + c.prefill_token_us * tok + c.prefill_row_us * rows) * 1e-6 -
            c.prefill_score_ps * 1e-12 * sc;
        for (pkv_fit_set *d = s; d && !rc; d = d == s ? per_file : NULL)
            rc = add_forward(d, tok, sc, rows, meas, base, pred);
    }
    free(pf);
    return rc ? pkv_fail(e, "out of memory reading %s", path) : 0;
}

/* MAPE and relative error of the sum of the forwards' predictions: base plus the
 * prefill terms (seconds) fixed + per token x tokens + per score x scores + per decode
 * row x rows, or (term NULL) the runs' own. */
void pkv_fit_forward_error(const pkv_fit_set *s, const double *term, double *mape,
                           double *sum_err) {
    double ae = 0, sp = 0, sm = 0;
    for (size_t i = 0; i < s->p_n; i++) {
        const double p = !term ? s->p_pred[i]
                               : s->p_base[i] + term[0] + term[1] * s->p_tok[i] +
                                     term[2] * s->p_sc[i] + term[3] * s->p_rows[i];
        ae += fabs(p - s->p_meas[i]) / s->p_meas[i], sp += p, sm += s->p_meas[i];
    }
    *mape = s->p_n ? ae / (double)s->p_n : NAN;
    *sum_err = sm > 0 ? sp / sm - 1 : NAN;
}

static pkv_counters counters_of(const pkv_step_rec *s) {
    return (pkv_counters){.launches = (int32_t)s->launches,
                          .merge_launches = (int32_t)s->merge_launches,
                          .ctas = (int64_t)s->ctas,
                          .cta_work_per_sm = s->cta_work_per_sm,
                          .kv_bytes = (int64_t)s->kv_bytes,
                          .merge_bytes = (int64_t)s->merge_bytes,
                          .tasks = (int32_t)s->tasks,
                          .max_splits = (int32_t)s->splits,
                          .max_cta_bytes = (int64_t)s->max_cta_bytes};
}

/* Add the measured steps of a file's run (its root, grp "", or a sweep's point) to *s
 * (and, where per_file is given, to it alone too); *group receives the run's G, *used
 * gains its measured steps. */
static int load_run(const char *path, const char *grp, pkv_fit_set *s, pkv_fit_set *per_file,
                    pkv_fit_set *s8, int *group, size_t *used, pkv_err *e) {
    char *resolved, name[96];
    snprintf(name, sizeof name, "%s%sconfig/resolved", grp, *grp ? "/" : "");
    if (pkv_h5_read_text(path, name, &resolved, e)) return -1;
    cJSON *root = cJSON_Parse(resolved);
    free(resolved);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *L = cJSON_GetObjectItemCaseSensitive(m, "layers"),
                *hq = cJSON_GetObjectItemCaseSensitive(m, "hq"),
                *hkv = cJSON_GetObjectItemCaseSensitive(m, "hkv"),
                *kvt = cJSON_GetObjectItemCaseSensitive(m, "kv_dtype");
    int layers = cJSON_IsNumber(L) ? L->valueint : 1;
    /* speculative decoding: every decode step a verify of k + 1 query tokens a row */
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(root, "serving"), "speculative"),
                *sm = cJSON_GetObjectItemCaseSensitive(sp, "method"),
                *sk = cJSON_GetObjectItemCaseSensitive(sp, "tokens");
    const int q_len = cJSON_IsString(sm) && strcmp(sm->valuestring, "none") && cJSON_IsNumber(sk)
                          ? 1 + sk->valueint
                          : 1;
    /* FP8 KV's steps fit its CTA cap (into s8), never the route models */
    const int fp8 = cJSON_IsString(kvt) && !strcmp(kvt->valuestring, "fp8_e4m3");
    if (fp8) s = s8, per_file = NULL;
    *group = cJSON_IsNumber(hq) && cJSON_IsNumber(hkv) && hkv->valueint > 0
                 ? hq->valueint / hkv->valueint
                 : 0;
    cJSON_Delete(root);
    if (layers < 1 || *group < 1)
        return pkv_fail(e, "%s: /config/resolved has no model shape", path);
    pkv_step_rec *st;
    size_t n;
    if (!s) return 0; /* an FP8 run held out: not read */
    if (pkv_h5_read_steps_at(path, grp, &st, &n, e)) return -1;
    for (size_t i = 0; i < n; i++) {
        int r = st[i].route;
        double t = st[i].t_device / layers;
        if (st[i].warmup || !(t > 0) || r >= PKV_ROUTE_COUNT) continue;
        for (pkv_fit_set *d = s; d; d = d == s ? per_file : NULL) {
            if (d->n[r] == d->cap[r]) {
                size_t cap = d->cap[r] ? 2 * d->cap[r] : 1024;
                pkv_counters *k = realloc(d->k[r], cap * sizeof *k);
                if (k) d->k[r] = k;
                double *tt = realloc(d->t[r], cap * sizeof *tt);
                if (tt) d->t[r] = tt;
                double *hh = realloc(d->host[r], cap * sizeof *hh);
                if (hh) d->host[r] = hh;
                double *kt = realloc(d->ktok[r], cap * sizeof *kt);
                if (kt) d->ktok[r] = kt;
                if (!k || !tt || !hh || !kt) {
                    free(st);
                    return pkv_fail(e, "out of memory reading %s", path);
                }
                d->cap[r] = cap;
            }
            d->k[r][d->n[r]] = counters_of(&st[i]);
            d->k[r][d->n[r]].q_len = q_len;
            /* the step's other device work: its dense part, the MLP tail, a proposer's passes */
            double other = (isfinite(st[i].t_dense) ? st[i].t_dense : 0) +
                           (isfinite(st[i].t_mlp) ? st[i].t_mlp : 0) +
                           (isfinite(st[i].t_draft) ? st[i].t_draft : 0);
            d->host[r][d->n[r]] = st[i].t_wall - st[i].t_device - other;
            d->ktok[r][d->n[r]] = 1e-3 * (double)st[i].context_tokens;
            d->t[r][d->n[r]++] = t;
        }
        (*used)++;
    }
    int rc = fp8 ? 0 : load_forwards(path, grp, st, n, s, per_file, e);
    free(st);
    return rc;
}

/* Every run of a file (a sweep's points are runs); *groups receives the G values seen
 * (bit G). */
int pkv_fit_load(const char *path, pkv_fit_set *s, pkv_fit_set *per_file, pkv_fit_set *s8,
                 unsigned *groups, pkv_err *e) {
    char(*grp)[32];
    int n_runs, rc;
    size_t used = 0;
    if (pkv_h5_runs(path, &grp, &n_runs, e)) return -1;
    for (int i = rc = 0; i < n_runs && !rc; i++) {
        int G;
        rc = load_run(path, grp[i], s, per_file, s8, &G, &used, e);
        if (!rc && G < 32) *groups |= 1u << G;
    }
    free(grp);
    if (!rc && used == 0)
        return pkv_fail(e,
                        "%s: no measured steps (a run on the cuda backend, record \"full\" or "
                        "\"steps\", is needed)",
                        path);
    return rc;
}
