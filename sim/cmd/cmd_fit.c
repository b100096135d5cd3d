/* pkvsim fit: the structured cost model fitted to the steps of measuring runs
 * (engine/fit.h), with its error on held-out runs, written as a calibration file. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fit_runs.h"
#include "fit.h"
#include "h5rec.h"
#include "jsonv.h"
#include "pkv_files.h"
#include "pkv_gitrev.h"
#include "policy.h"

enum { MAX_FILES = 256 };

static void usage(void) {
    puts("usage: pkvsim fit FILE.h5... [--test FILE.h5]... [--base CALIBRATION.json]\n"
         "                 [--section study_layer|served_model] [-o OUT.json]\n"
         "                 [--out TABLE.md] [--keep-gates] [--verify-only]\n"
         "Fits the structured cost model (experiments/README.md, \"route_model\") of every\n"
         "route to the steps of runs on a measuring backend (cuda): each step's counters\n"
         "in /steps against its measured t_device (per layer for a full model), warm-up\n"
         "steps left out, with GSL's nonlinear least squares on the relative error.\n"
         "Files given with --test are held out: the table gives, per route, the mean\n"
         "absolute relative error of each step's prediction (MAPE) and the error of the\n"
         "summed prediction on the fitted and on the held-out steps, for the fitted model\n"
         "and for the base calibration, and each route's host time beyond its device time\n"
         "(the steps' wall less device, medians of 16 bins by context, a non-negative line:\n"
         "host_us + host_us_per_ktoken per 1000 context tokens). The written calibration is\n"
         "the base (default: the one the first file was run with) with the fitted\n"
         "route_model (a fitted route's per-group models of route_model_by_group dropped;\n"
         "decode steps fit route_model; a speculative run's verify steps of N query tokens\n"
         "a row fit route_model_by_q's \"N\": the route's route_model with a CTA's\n"
         "constants, cta_gbps and cta_us, fitted to them, its other constants kept)\n"
         "and, unless --keep-gates, gates for each GQA group size of the files: no minimum context "
         "and\n"
         "a margin of 1 + the largest relative bias between a baseline's model and a\n"
         "PersistentKV route's (the baseline's summed error on the held-out steps less the\n"
         "split route's, where positive), so that a promotion is made only where the\n"
         "models' biases cannot explain the predicted gain; a step's own error averages\n"
         "out over the steps, its bias does not. Over decode steps; the verify steps of a\n"
         "speculative run (k + 1 query tokens a row) get their own gates, \"qN/G\", from\n"
         "theirs (held in [1, 2]). The base's gates stay where the runs measure none\n"
         "(FP8 KV's own, query lengths the runs lack, decode's where they hold verify\n"
         "steps alone).\n"
         "--verify-only fits the verify steps alone (no decode steps, forwards or FP8 runs)\n"
         "and writes the base back with its route_model_by_q and its \"qN/...\" gates\n"
         "replaced and the fit's record as fit_by_q: its other constants, note and fit\n"
         "record stay as they are (how a shipped calibration takes a GPU's verify steps).\n"
         "Where the runs hold forwards over prompt tokens (a full model's /prefills rows,\n"
         "serving.scheduler chunked steps), the measured time they take beyond the\n"
         "rooflines is fitted too, linear in their prompt tokens and attention scores (GSL\n"
         "weighted least squares on the relative error, no term negative):\n"
         "prefill_fixed_us, prefill_token_us and prefill_score_ps. A sweep file's points\n"
         "are runs.\n"
         "Runs over FP8 KV (model.kv_dtype fp8_e4m3) fit no route model: their steps fit\n"
         "kv_fp8_cta_gbps, the most one PersistentKV CTA streams over FP8 KV, under the\n"
         "fitted models (GSL's Brent minimizer on the squared log ratios).\n"
         "A base with a section per kind of run (experiments/calibration/h200.json) is\n"
         "written whole with the runs' section refitted: --section, else the section the\n"
         "first run applied (its recorded calibration says; runs recorded before sections\n"
         "need --section).");
}

/* The table: to stdout and, where given, to a file. */
static FILE *g_out;
static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...) {
    va_list a;
    va_start(a, fmt);
    vprintf(fmt, a);
    va_end(a);
    if (g_out) {
        va_start(a, fmt);
        vfprintf(g_out, fmt, a);
        va_end(a);
    }
}

/* x as a percentage (signed: with its sign) into b; "-" where there is none (NaN: no
 * held-out steps). */
static const char *pct(char b[16], double x, bool sign) {
    if (isnan(x)) return "-";
    snprintf(b, 16, sign ? "%+.2f%%" : "%.2f%%", 100 * x);
    return b;
}

/* Route r's steps of s with q query tokens a row (pkv_fit_step_of_q), copied into sub's
 * arrays of r. */
static int steps_of_q(const pkv_fit_set *s, int r, int q, pkv_fit_set *sub) {
    size_t n = 0;
    for (size_t i = 0; i < s->n[r]; i++) n += pkv_fit_step_of_q(&s->k[r][i], q);
    if (!n) return 0;
    sub->k[r] = malloc(n * sizeof *sub->k[r]);
    sub->t[r] = malloc(n * sizeof *sub->t[r]);
    sub->host[r] = malloc(n * sizeof *sub->host[r]);
    sub->ktok[r] = malloc(n * sizeof *sub->ktok[r]);
    if (!sub->k[r] || !sub->t[r] || !sub->host[r] || !sub->ktok[r]) return -1;
    for (size_t i = 0; i < s->n[r]; i++) {
        if (!pkv_fit_step_of_q(&s->k[r][i], q)) continue;
        const size_t j = sub->n[r]++;
        sub->k[r][j] = s->k[r][i], sub->t[r][j] = s->t[r][i];
        sub->host[r][j] = s->host[r][i], sub->ktok[r][j] = s->ktok[r][i];
    }
    return 0;
}

/* Route r's model for steps of q query tokens a row fitted to f's steps of r (held out:
 * h's) into fitted (route_model at q 1, route_model_by_q's beyond), its row of the table
 * emitted and its record added to routes. 1: fitted; 0: not (the row says why); -1: out
 * of memory. */
static int fit_route(const pkv_calib *cal, pkv_calib *fitted, pkv_route r, int q,
                     const pkv_fit_set *f, const pkv_fit_set *h, cJSON *routes) {
    char key[48], name[96]; /* the record's key; the table's name: the key, the rate fitted */
    snprintf(key, sizeof key, q > 1 ? "%s/q%d" : "%s", pkv_route_name(r), q);
    pkv_route_model m;
    pkv_err fe;
    /* a verify's model: decode's (these runs' where they hold decode steps of r: fitted
     * first) with its CTA's constants fitted, where decode's is there */
    const pkv_route_model *dec = &fitted->route_model[r];
    const int rate = q > 1 && dec->set;
    if (rate ? pkv_fit_route_rate(cal, r, dec, f->k[r], f->t[r], f->n[r], &m, &fe)
             : pkv_fit_route(cal, r, f->k[r], f->t[r], f->n[r], &m, &fe)) {
        emit("| %s | %zu | not fitted: %s | | | | | | | | |\n", key, f->n[r], fe.msg);
        return 0;
    }
    if (pkv_fit_host(f->host[r], f->ktok[r], f->n[r], &m)) return -1;
    snprintf(name, sizeof name,
             rate ? "%s (cta_gbps %.1f, cta_us %.2f; decode's %.1f, %.2f)" : "%s", key,
             m.v[PKV_RM_CTA_GBPS], m.v[PKV_RM_CTA_US], dec->v[PKV_RM_CTA_GBPS],
             dec->v[PKV_RM_CTA_US]);
    if (q > 1) {
        fitted->q_model[q - 1][r] = m;
    } else {
        fitted->route_model[r] = m;
        /* the runs' fit replaces the base's models of r per group (calibrate's) too */
        for (int g = 0; g < PKV_GATE_GROUPS; g++) fitted->group_model[g][r].set = false;
    }
    double f_mape, f_sum, t_mape = NAN, t_sum = NAN, b_mape = NAN, b_sum = NAN;
    pkv_fit_error(cal, r, &m, f->k[r], f->t[r], f->n[r], &f_mape, &f_sum);
    if (h->n[r]) {
        pkv_fit_error(cal, r, &m, h->k[r], h->t[r], h->n[r], &t_mape, &t_sum);
        pkv_fit_error(cal, r, NULL, h->k[r], h->t[r], h->n[r], &b_mape, &b_sum);
    }
    char b[4][16];
    emit("| %s | %zu | %.2f%% | %+.2f%% | %zu | %s | %s | %s | %s | %.1f | %.2f |\n", name, f->n[r],
         100 * f_mape, 100 * f_sum, h->n[r], pct(b[0], t_mape, false), pct(b[1], t_sum, true),
         pct(b[2], b_mape, false), pct(b[3], b_sum, true), m.v[PKV_RM_HOST_US],
         m.v[PKV_RM_HOST_US_PER_KTOKEN]);
    cJSON *o = cJSON_AddObjectToObject(routes, key);
    cJSON_AddNumberToObject(o, "steps", (double)f->n[r]);
    cJSON_AddNumberToObject(o, "mape", f_mape);
    if (h->n[r]) {
        cJSON_AddNumberToObject(o, "held_out_steps", (double)h->n[r]);
        cJSON_AddNumberToObject(o, "held_out_mape", t_mape);
        cJSON_AddNumberToObject(o, "held_out_sum_err", t_sum);
    }
    return 1;
}

static const char *const flat_gates[] = {"gates", "min_context_tokens", "margin_small",
                                         "margin_large", "gqa_group"};

static void drop_keys(cJSON *o, const char *const *keys, size_t n) {
    for (size_t i = 0; i < n; i++) cJSON_DeleteItemFromObjectCaseSensitive(o, keys[i]);
}

/* The fit's record under `name` in dst: its files, held-out files, revision and the
 * routes' fits (taken). */
static void fit_record(cJSON *dst, const char *name, const char *const *fits, int n_fit,
                       const char *const *tests, int n_tests, cJSON *routes) {
    char when[32];
    pkv_cli_utc(when, "%Y-%m-%d");
    cJSON *f = cJSON_AddObjectToObject(dst, name);
    cJSON_AddStringToObject(f, "date", when);
    cJSON *files = cJSON_AddArrayToObject(f, "files");
    for (int i = 0; i < n_fit; i++) cJSON_AddItemToArray(files, cJSON_CreateString(fits[i]));
    cJSON *held = cJSON_AddArrayToObject(f, "held_out");
    for (int i = 0; i < n_tests; i++) cJSON_AddItemToArray(held, cJSON_CreateString(tests[i]));
    cJSON_AddStringToObject(f, "pkvsim_revision", PKV_GIT_REV);
    cJSON_AddItemToObject(f, "routes", routes);
}

int pkv_cmd_fit(int argc, char **argv) {
    const char *test_v[MAX_FILES], *base = NULL, *out = NULL, *table = NULL, *section = NULL;
    pkv_cli_list test_l = {test_v, 0};
    int keep_gates = 0, verify_only = 0;
    const pkv_cli_opt opts[] = {{"test", 't', PKV_CLI_LIST, &test_l, MAX_FILES},
                                {"base", 'b', PKV_CLI_STRING, &base, 0},
                                {"output", 'o', PKV_CLI_STRING, &out, 0},
                                {"out", 'T', PKV_CLI_STRING, &table, 0},
                                {"keep-gates", 'k', PKV_CLI_FLAG, &keep_gates, 0},
                                {"verify-only", 'V', PKV_CLI_FLAG, &verify_only, 0},
                                {"section", 's', PKV_CLI_STRING, &section, 0}};
    const int orc = pkv_cli_options("fit", argc, argv, opts, 7, usage);
    if (orc >= 0) return orc;
    const char *const *tests = test_l.v;
    const int n_tests = test_l.n;
    const int n_fit = argc - optind;
    const char *const *fits = (const char *const *)argv + optind;
    if (n_fit < 1 || n_fit > MAX_FILES) {
        fprintf(stderr, "pkvsim fit: give 1 to %d measured runs to fit (see --help)\n", MAX_FILES);
        return 2;
    }
    pkv_err e;
    /* Neither output may be an input. */
    const char *inputs[2 * MAX_FILES + 1], *what[2 * MAX_FILES + 1];
    int n_in = 0;
    for (int i = 0; i < n_fit; i++) inputs[n_in] = fits[i], what[n_in++] = "an input file";
    for (int i = 0; i < n_tests; i++) inputs[n_in] = tests[i], what[n_in++] = "a --test file";
    if (base) inputs[n_in] = base, what[n_in++] = "the --base calibration";
    if ((out && pkv_output_ok(out, inputs, what, n_in, "-o", &e)) ||
        (table && pkv_output_ok(table, inputs, what, n_in, "--out", &e))) {
        fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        return 1;
    }
    if (section && strcmp(section, pkv_calib_section(false)) &&
        strcmp(section, pkv_calib_section(true))) {
        fprintf(stderr, "pkvsim fit: --section: \"%s\" is not %s or %s\n", section,
                pkv_calib_section(false), pkv_calib_section(true));
        return 2;
    }
    pkv_calib cal;
    char *base_text = NULL, cal_path[96] = "calibration/file", (*first)[32] = NULL, ran[16] = "";
    int n_first = 0;
    if (!pkv_h5_runs(fits[0], &first, &n_first, &e) && n_first > 0 && *first[0])
        snprintf(cal_path, sizeof cal_path, "%s/calibration/file", first[0]);
    free(first);
    /* the first run's calibration: the base without --base, and the section it applied */
    if (pkv_h5_read_text(fits[0], cal_path, &base_text, &e)) {
        fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        return 1;
    }
    if (!section) {
        cJSON *o = cJSON_Parse(base_text);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "section");
        if (cJSON_IsString(s)) snprintf(ran, sizeof ran, "%s", s->valuestring);
        cJSON_Delete(o);
        section = *ran ? ran : NULL;
    }
    /* a base with sections: the whole file, written back with the runs' section refitted */
    cJSON *whole = base ? pkv_json_read(base, &e) : NULL;
    if (base && (!whole || (pkv_calib_sectioned(whole) && !section))) {
        if (whole)
            fprintf(stderr,
                    "pkvsim fit: %s has a section per kind of run, and %s does not say which it "
                    "ran with: give --section\n",
                    base, fits[0]);
        else
            fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        cJSON_Delete(whole);
        free(base_text);
        return 1;
    }
    if (whole && !pkv_calib_sectioned(whole)) cJSON_Delete(whole), whole = NULL;
    if (base) free(base_text), base_text = NULL;
    if (base && pkv_calib_load(&cal, base, section, &e)) {
        fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        cJSON_Delete(whole);
        return 1;
    }
    if (!base) {
        pkv_calib_defaults(&cal);
        cJSON *o = pkv_json_parse(base_text, fits[0], &e);
        int bad = !o || pkv_calib_apply(&cal, o, "calibration/file", &e);
        cJSON_Delete(o);
        if (bad) {
            fprintf(stderr, "pkvsim fit: %s: the run's calibration: %s\n", fits[0], e.msg);
            free(base_text);
            return 1;
        }
        cal.json = base_text;
    }
    pkv_fit_set fit = {0}, test = {0}, fit8 = {0};
    pkv_fit_set *per_test = calloc((size_t)n_tests + 1, sizeof *per_test);
    unsigned groups = 0;
    int rc = per_test ? 0 : 1;
    unsigned test_groups = 0;
    pkv_out table_out = {0}; /* --out TABLE, written whole or not at all */
    for (int i = 0; i < n_fit && !rc; i++)
        rc = pkv_fit_load(fits[i], &fit, NULL, &fit8, &groups, &e);
    for (int i = 0; i < n_tests && !rc; i++)
        rc = pkv_fit_load(tests[i], &test, &per_test[i], NULL, &test_groups, &e);
    if (rc) {
        fprintf(stderr, "pkvsim fit: %s\n", per_test ? e.msg : "out of memory");
        goto done;
    }
    if (table && !(g_out = pkv_cli_out_open("fit", &table_out, table))) {
        rc = 1;
        goto done;
    }
    char when[32];
    pkv_cli_utc(when, "%Y-%m-%d %H:%M UTC");
    emit("# pkvsim fit, %s, pkvsim %s: %d fitted runs, %d held out; calibration of %s\n", when,
         PKV_GIT_REV, n_fit, n_tests, cal.gpu_name);
    emit("| route | fitted steps | MAPE | sum err | held-out steps | MAPE | sum err | base "
         "MAPE held out | base sum err | host us | + host us per 1K tokens |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|\n");
    pkv_calib fitted = cal;
    uint32_t fitted_routes = 0; /* the routes whose steps set the gates' margins */
    cJSON *routes = cJSON_CreateObject();
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        for (int q = verify_only ? 2 : 1; q <= PKV_GATE_QLENS; q++) {
            /* decode steps fit route_model, a verify's of q query tokens route_model_by_q */
            pkv_fit_set f = {0}, h = {0};
            rc = steps_of_q(&fit, r, q, &f) || steps_of_q(&test, r, q, &h) ? -1 : 0;
            if (!rc && f.n[r]) rc = fit_route(&cal, &fitted, (pkv_route)r, q, &f, &h, routes);
            pkv_fit_set_free(&f), pkv_fit_set_free(&h);
            if (rc < 0) {
                fprintf(stderr, "pkvsim fit: out of memory\n");
                cJSON_Delete(routes);
                rc = 1;
                goto done;
            }
            if (rc > 0) fitted_routes |= 1u << r;
            rc = 0;
        }
    if (verify_only && !fitted_routes) {
        fprintf(stderr,
                "pkvsim fit: --verify-only: %s hold%s no verify steps fitted (runs of "
                "serving.speculative, their verify steps of k + 1 query tokens a row)\n",
                n_fit > 1 ? "the runs" : fits[0], n_fit > 1 ? "" : "s");
        cJSON_Delete(routes);
        rc = 1;
        goto done;
    }
    /* FP8 KV's runs: the per-CTA cap under the fitted models (engine/cost.c) */
    int fp8_fitted = 0;
    size_t n8 = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) n8 += fit8.n[r];
    if (n8 && !verify_only) {
        double bps = 0, err[2];
        pkv_err fe;
        if (pkv_fit_fp8_cap(&fitted, fit8.k, (const double *const *)fit8.t, fit8.n, &bps, err,
                            &fe)) {
            emit("\nFP8 KV: %zu steps, kv_fp8_cta_gbps not fitted: %s\n", n8, fe.msg);
        } else {
            emit("\nFP8 KV: %zu steps; kv_fp8_cta_gbps %.2f (was %.2f): summed error %+.2f%% "
                 "(was %+.2f%%)\n",
                 n8, bps / 1e9, fitted.kv_fp8_cta_gbps / 1e9, 100 * err[1], 100 * err[0]);
            fitted.kv_fp8_cta_gbps = bps;
            fp8_fitted = 1;
        }
    }
    if (n_tests) {
        emit("\n| held-out file | route | steps | MAPE | sum err |\n|---|---|---|---|---|\n");
        for (int i = 0; i < n_tests; i++)
            for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
                if (!per_test[i].n[r] || !(fitted_routes >> r & 1)) continue;
                double mape, sum;
                pkv_fit_error(&fitted, (pkv_route)r, NULL, per_test[i].k[r], per_test[i].t[r],
                              per_test[i].n[r], &mape, &sum);
                emit("| %s | %s | %zu | %.2f%% | %+.2f%% |\n", tests[i],
                     pkv_route_name((pkv_route)r), per_test[i].n[r], 100 * mape, 100 * sum);
            }
    }
    /* The prefill terms: the forwards' measured less predicted time (without the terms),
     * linear in their prompt tokens and attention scores (GSL least squares on the
     * relative error), no term negative. */
    int prefill_fitted = 0;
    if (fit.p_n >= 3 && !verify_only) {
        double *res = malloc(fit.p_n * sizeof *res), *w = malloc(fit.p_n * sizeof *w), c[4];
        const double *x[4] = {NULL, fit.p_tok, fit.p_sc, fit.p_rows};
        if (!res || !w) {
            free(res), free(w);
            fprintf(stderr, "pkvsim fit: out of memory\n");
            rc = 1;
            goto done;
        }
        for (size_t i = 0; i < fit.p_n; i++)
            res[i] = fit.p_meas[i] - fit.p_base[i], w[i] = 1 / (fit.p_meas[i] * fit.p_meas[i]);
        const int bad = pkv_fit_nonneg(x, 4, res, w, fit.p_n, c);
        free(res), free(w);
        if (bad) {
            fprintf(stderr, "pkvsim fit: out of memory\n");
            rc = 1;
            goto done;
        }
        fitted.prefill_fixed_us = c[0] * 1e6, fitted.prefill_token_us = c[1] * 1e6;
        fitted.prefill_score_ps = c[2] * 1e12, fitted.prefill_row_us = c[3] * 1e6;
        prefill_fitted = 1;
        double f_mape, f_sum, t_mape = NAN, t_sum = NAN, b_mape = NAN, b_sum = NAN;
        char b[4][16];
        pkv_fit_forward_error(&fit, c, &f_mape, &f_sum);
        if (test.p_n) {
            pkv_fit_forward_error(&test, c, &t_mape, &t_sum);
            pkv_fit_forward_error(&test, NULL, &b_mape, &b_sum);
        }
        emit(
            "\n| forwards over prompt tokens | fitted | MAPE | sum err | held out | MAPE | sum "
            "err | base MAPE held out | base sum err | prefill_fixed_us | prefill_token_us | "
            "prefill_score_ps | prefill_row_us |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
            "---|\n| prefill batches, chunked steps' dense part | %zu | %.2f%% | %+.2f%% | %zu | "
            "%s | %s | %s | %s | %.1f | %.3f | %.4f | %.3f |\n",
            fit.p_n, 100 * f_mape, 100 * f_sum, test.p_n, pct(b[0], t_mape, false),
            pct(b[1], t_sum, true), pct(b[2], b_mape, false), pct(b[3], b_sum, true),
            fitted.prefill_fixed_us, fitted.prefill_token_us, fitted.prefill_score_ps,
            fitted.prefill_row_us);
    }
    if (!keep_gates) {
        /* each route's held-out steps where it has them, else its fitted ones */
        pkv_counters *gk[PKV_ROUTE_COUNT];
        double *gt[PKV_ROUTE_COUNT];
        size_t gn[PKV_ROUTE_COUNT];
        for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
            const pkv_fit_set *d = test.n[r] ? &test : &fit;
            gk[r] = d->k[r], gt[r] = d->t[r], gn[r] = d->n[r];
        }
        double margin[PKV_GATE_QLENS], bb[PKV_GATE_QLENS], sb[PKV_GATE_QLENS];
        pkv_fit_gate_margins(&fitted, fitted_routes, gk, gt, gn, margin, bb, sb);
        int decode_steps = 0; /* --verify-only: decode steps are not fitted */
        for (int r = 0; r < PKV_ROUTE_COUNT && !verify_only; r++)
            for (size_t i = 0; (fitted_routes >> r & 1) && i < gn[r]; i++)
                decode_steps |= pkv_fit_step_of_q(&gk[r][i], 1);
        /* the base's gates stay where the runs measure none (FP8's own, query lengths the
         * runs lack, decode's where they hold verify steps alone); a flat one as its G's */
        if (!fitted.gates_set) {
            memset(fitted.gates, 0, sizeof fitted.gates);
            const int k = pkv_calib_group_index(fitted.gqa_group);
            if (k >= 0)
                fitted.gates[0][0][k] =
                    (pkv_gate){true, fitted.min_context, fitted.margin_small, fitted.margin_large};
            fitted.gates_set = true;
        }
        if (!decode_steps)
            emit("\ngates: the runs hold no decode steps: the base's decode gates kept\n");
        for (int q = 1; q <= PKV_GATE_QLENS; q++) {
            if (q > 1 && isnan(margin[q - 1])) continue; /* no verify steps of q: the base's */
            if (q == 1 && !decode_steps) continue;
            const double m = isnan(margin[q - 1]) ? 1 : margin[q - 1];
            memset(fitted.gates[0][q - 1], 0, sizeof fitted.gates[0][q - 1]);
            for (int k = 0; k < PKV_GATE_GROUPS; k++) {
                const int G = pkv_calib_group_of(k);
                if (G < 32 && groups >> G & 1) /* groups: bit G for G below 32 */
                    fitted.gates[0][q - 1][k] = (pkv_gate){true, 0, m, m};
            }
            if (q > 1)
                emit("gates of verify steps of %d query tokens a row (\"q%d/G\"): margin %.4f "
                     "(%+.2f%% - %+.2f%%)\n",
                     q, q, m, 100 * bb[q - 1], 100 * sb[q - 1]);
            else if (isnan(margin[0]))
                emit("\ngates: no minimum context, margin 1 (the runs do not hold both a "
                     "baseline and a split route, so no relative bias is measured)\n");
            else
                emit("\ngates: no minimum context, margin %.4f (1 + the baselines' largest "
                     "summed error %+.2f%% - the split routes' smallest %+.2f%%, over decode "
                     "steps)\n",
                     m, 100 * bb[0], 100 * sb[0]);
        }
    }
    rc = pkv_cli_out_close("fit", &table_out, rc);
    g_out = NULL;
    if (!rc && out) {
        cJSON *root = whole ? whole : cJSON_Parse(cal.json), *dst = root;
        whole = NULL;
        if (!root) root = dst = cJSON_CreateObject();
        if (cJSON_HasObjectItem(root, section ? section : "")) {
            dst = cJSON_GetObjectItemCaseSensitive(root, section);
        } else if (pkv_calib_sectioned(root)) { /* a section the base lacks */
            dst = cJSON_AddObjectToObject(root, section);
        } else { /* a flat file: no section applied */
            cJSON_DeleteItemFromObjectCaseSensitive(root, "section");
        }
        if (!dst) { /* out of memory: nothing is written (below) */
            cJSON_Delete(root);
            root = NULL;
        }
        if (verify_only) { /* the verify steps' models and gates alone: the rest as it is */
            cJSON_DeleteItemFromObjectCaseSensitive(dst, "route_model_by_q");
            cJSON_DeleteItemFromObjectCaseSensitive(dst, "fit_by_q");
            pkv_calib_verify_models_json(&fitted, dst);
            cJSON *g = cJSON_GetObjectItemCaseSensitive(dst, "gates");
            if (!keep_gates && g) { /* its verify gates the fit's (the base's where it had none) */
                for (cJSON *it = g->child, *next; it; it = next) {
                    next = it->next;
                    if (it->string && it->string[0] == 'q')
                        cJSON_Delete(cJSON_DetachItemViaPointer(g, it));
                }
                pkv_calib_gates_json(&fitted, g, 2);
            } else if (!keep_gates) { /* flat gate keys: all of them as a gates object */
                drop_keys(dst, flat_gates, sizeof flat_gates / sizeof flat_gates[0]);
                pkv_calib_gates_json(&fitted, cJSON_AddObjectToObject(dst, "gates"), 1);
            }
            fit_record(dst, "fit_by_q", fits, n_fit, tests, n_tests, routes);
        } else {
            static const char *const drop[] = {"route_model",
                                               "route_model_by_group",
                                               "route_model_by_q",
                                               "flashinfer_decode_ctas_by_group",
                                               "fit",
                                               "note",
                                               "date"};
            drop_keys(dst, drop, sizeof drop / sizeof drop[0]);
            if (!keep_gates) /* else the base's gates stay as they are in the file */
                drop_keys(dst, flat_gates, sizeof flat_gates / sizeof flat_gates[0]);
            pkv_cli_utc(when, "%Y-%m-%d");
            cJSON_AddStringToObject(dst, "date", when);
            cJSON_AddStringToObject(dst, "note",
                                    "route_model (and the prefill terms where the runs hold "
                                    "prefills) fitted by pkvsim fit to measured steps (see fit); "
                                    "the other constants are the base calibration's.");
            if (keep_gates) fitted.gates_set = false; /* the base's stay as they are in the file */
            pkv_calib_route_model_json(&fitted, dst);
            if (prefill_fitted) {
                const char *pk[4] = {"prefill_fixed_us", "prefill_token_us", "prefill_score_ps",
                                     "prefill_row_us"};
                const double pv[4] = {fitted.prefill_fixed_us, fitted.prefill_token_us,
                                      fitted.prefill_score_ps, fitted.prefill_row_us};
                for (int k = 0; k < 4; k++) {
                    cJSON_DeleteItemFromObjectCaseSensitive(dst, pk[k]);
                    cJSON_AddNumberToObject(dst, pk[k], pv[k]);
                }
            }
            if (fp8_fitted) {
                cJSON_DeleteItemFromObjectCaseSensitive(dst, "kv_fp8_cta_gbps");
                cJSON_AddNumberToObject(dst, "kv_fp8_cta_gbps", fitted.kv_fp8_cta_gbps / 1e9);
            }
            fit_record(dst, "fit", fits, n_fit, tests, n_tests, routes);
        }
        routes = NULL;
        char *text = cJSON_Print(root);
        if (!text || pkv_write_atomic(out, text)) {
            fprintf(stderr, "pkvsim fit: cannot write %s: %s\n", out,
                    text ? strerror(errno) : "out of memory");
            rc = 1;
        } else {
            printf("wrote %s\n", out);
        }
        free(text);
        cJSON_Delete(root);
    }
    cJSON_Delete(routes);
done:
    g_out = NULL;
    pkv_cli_out_close("fit", &table_out, 1); /* a table left unfinished: removed */
    cJSON_Delete(whole);
    for (int i = 0; per_test && i < n_tests; i++) pkv_fit_set_free(&per_test[i]);
    free(per_test);
    pkv_fit_set_free(&fit);
    pkv_fit_set_free(&test);
    pkv_fit_set_free(&fit8);
    pkv_calib_free(&cal);
    return rc ? 1 : 0;
}
