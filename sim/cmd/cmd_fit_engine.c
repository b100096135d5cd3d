/* pkvsim fit --engine PROFILE.json VALIDATION...: fit a profile's host work to the
 * validation files that use it and are marked "fit" (GSL's Nelder-Mead simplex over the
 * constants, on the squared log errors), and report the held-out files' errors beside
 * the fitted; pkv_vfit_run is the fit, which `validate --by-source` uses too. */
#include "cli.h"
#include "jsonv.h"
#include "pkv_files.h"
#include "vfile.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>

/* The constants fitted, in microseconds: a point x of the simplex maps to x^2 (so each
 * stays non-negative). */
enum { N_PARAMS = PKV_VFIT_PARAMS };
const char *const pkv_vfit_names[N_PARAMS] = {
    "iteration_us",        "per_request_us",     "prefill_token_us", "client_us",
    "per_output_token_us", "eager_allreduce_us", "multi_gpu_us",     "exposed_us"};

typedef struct fit_ctx {
    pkv_vfile *v;
    int n;
    const bool *use;
    bool overlap;
    bool fit_client;   /* a used file was measured through a server on one GPU */
    double client_us;  /* else client_us stays this (the profile's) */
    bool fit_multi;    /* a used file was measured through a server over several GPUs */
    double multi_us;   /* else multi_gpu_us stays this (the profile's) */
    bool fit_output;   /* the profile processes outputs in series (per_output_token_us > 0) */
    bool fit_prefill;  /* the engine's prefill costs more a prompt token than the GPU's
                          calibration prices it (the profile's gpu.prefill_token_us > 0) */
    bool fit_tp;       /* a used file's model runs over several GPUs */
    double tp_us;      /* else eager_allreduce_us stays this (the profile's) */
    bool fit_exposed;  /* a used file schedules windows of several decode steps (else the
                          simplex leaves out exposed_us, its last coordinate) */
    double exposed_us; /* else exposed_us stays this (the profile's) */
    int evals, failed;
    pkv_err e;
} fit_ctx;

void pkv_vfit_set(pkv_vfile *v, int n, const double *us, bool overlap) {
    for (int i = 0; i < n; i++) {
        pkv_engine_profile *p = &v[i].cfg.engine;
        p->host.iteration_s = us[0] * 1e-6;
        p->host.per_request_s = us[1] * 1e-6;
        p->host.prefill_token_s = us[2] * 1e-6;
        p->host.overlap = overlap;
        p->client_s = v[i].cfg.client == PKV_CLIENT_OFFLINE ? 0 : us[3] * 1e-6;
        p->host.per_output_token_s = us[4] * 1e-6;
        p->host.eager_allreduce_s = us[5] * 1e-6;
        p->multi_gpu_s = v[i].cfg.client == PKV_CLIENT_OFFLINE ? 0 : us[6] * 1e-6;
        p->host.exposed_s = us[7] * 1e-6;
    }
}

/* A point of the simplex as the profile's constants: those the used files do not fit keep
 * the profile's (client_us, eager_allreduce_us, multi_gpu_us, exposed_us) or none
 * (per_output_token_us, gpu.prefill_token_us).
 * The seventh coordinate is a request's lag over several GPUs, client_us + multi_gpu_us: the
 * runs over several GPUs see only that sum, so client_us is the runs' on one GPU alone. */
static void to_profile(const fit_ctx *c, double *us) {
    if (!c->fit_prefill) us[2] = 0;
    if (!c->fit_client) us[3] = c->client_us;
    if (!c->fit_output) us[4] = 0;
    if (!c->fit_tp) us[5] = c->tp_us;
    us[6] = c->fit_multi ? fmax(0, us[6] - us[3]) : c->multi_us;
    if (!c->fit_exposed) us[7] = c->exposed_us;
}

/* The simplex's coordinates: every constant, exposed_us (the last) only where it is fitted. */
static size_t dims(const fit_ctx *c) {
    return c->fit_exposed ? N_PARAMS : N_PARAMS - 1;
}

/* Mean squared log error of the used files' figures. */
static double objective(const gsl_vector *x, void *arg) {
    fit_ctx *c = arg;
    double us[N_PARAMS] = {0}, sum = 0;
    for (size_t k = 0; k < dims(c); k++) us[k] = gsl_vector_get(x, k) * gsl_vector_get(x, k);
    to_profile(c, us);
    pkv_vfit_set(c->v, c->n, us, c->overlap);
    int rows = 0;
    c->evals++;
    for (int i = 0; i < c->n; i++) {
        if (!c->use[i]) continue;
        if (pkv_vfile_run(&c->v[i], false, &c->e)) {
            c->failed = 1;
            return GSL_POSINF;
        }
        for (int j = 0; j < c->v[i].n; j++) {
            const pkv_vrow *r = &c->v[i].rows[j];
            if (r->tail) continue; /* a profile's constants are not fitted to a tail */
            const double l = log(r->pred / r->value);
            sum += isfinite(l) ? l * l : 1e6;
            rows++;
        }
    }
    return rows ? sum / rows : 0;
}

/* Minimise from start (microseconds); best receives the constants, the return the
 * objective there (NAN: a run failed). */
static double minimise(fit_ctx *c, const double *start, int max_iter, double *best) {
    const gsl_multimin_fminimizer_type *T = gsl_multimin_fminimizer_nmsimplex2;
    const size_t n = dims(c);
    gsl_multimin_fminimizer *s = gsl_multimin_fminimizer_alloc(T, n);
    gsl_vector *x = gsl_vector_alloc(n), *step = gsl_vector_alloc(n);
    double f = NAN;
    if (s && x && step) {
        for (size_t k = 0; k < n; k++) {
            gsl_vector_set(x, k, sqrt(start[k]));
            gsl_vector_set(step, k, 0.3 * sqrt(start[k]) + 0.5);
        }
        gsl_multimin_function fn = {objective, n, c};
        gsl_multimin_fminimizer_set(s, &fn, x, step);
        for (int it = 0; it < max_iter && !c->failed; it++) {
            if (gsl_multimin_fminimizer_iterate(s)) break;
            if (gsl_multimin_test_size(gsl_multimin_fminimizer_size(s), 1e-3) == GSL_SUCCESS) break;
        }
        f = c->failed ? NAN : s->fval;
        for (int k = 0; k < N_PARAMS; k++)
            best[k] = (size_t)k < n ? gsl_vector_get(s->x, k) * gsl_vector_get(s->x, k) : 0;
    } else {
        c->failed = 1;
        pkv_fail(&c->e, "out of memory");
    }
    gsl_multimin_fminimizer_free(s);
    gsl_vector_free(x);
    gsl_vector_free(step);
    return f;
}

int pkv_vfit_run(pkv_vfile *v, int n, const bool *use, pkv_vfit *f, pkv_err *e) {
    fit_ctx c = {.v = v, .n = n, .use = use, .overlap = f->overlap};
    const pkv_engine_profile *p0 = NULL;
    for (int i = 0; i < n; i++) {
        if (!use[i]) continue;
        p0 = p0 ? p0 : &v[i].cfg.engine;
        /* client_us from runs on one GPU alone: over several GPUs a TTFT holds
         * multi_gpu_us too, which would otherwise take either's share */
        c.fit_client |= v[i].cfg.client == PKV_CLIENT_SERVER && v[i].cfg.model.tp == 1;
        c.fit_multi |= v[i].cfg.client == PKV_CLIENT_SERVER && v[i].cfg.model.tp > 1;
        c.fit_tp |= v[i].cfg.model.tp > 1;
        c.fit_exposed |= v[i].cfg.scheduler_steps > 1;
    }
    if (!p0) return pkv_fail(e, "no file to fit");
    /* the profile's client_us and multi_gpu_us as a server-measured file holds them (an
     * offline file's parse zeroes them), whatever the files' order */
    for (int i = 0; i < n; i++)
        if (v[i].cfg.client == PKV_CLIENT_SERVER) {
            c.client_us = v[i].cfg.engine.client_s * 1e6;
            c.multi_us = v[i].cfg.engine.multi_gpu_s * 1e6;
            break;
        }
    c.fit_output = p0->host.per_output_token_s > 0;
    c.fit_prefill = p0->host.prefill_token_s > 0;
    c.tp_us = p0->host.eager_allreduce_s * 1e6;
    c.exposed_us = p0->host.exposed_s * 1e6;
    /* from the profile's constants (floored, so that each can move), the simplex
     * restarted where it ended until that no longer improves */
    double start[N_PARAMS] = {
        fmax(p0->host.iteration_s * 1e6, 100),          fmax(p0->host.per_request_s * 1e6, 1),
        fmax(p0->host.prefill_token_s * 1e6, 5),        fmax(c.client_us, 100),
        fmax(p0->host.per_output_token_s * 1e6, 1),     fmax(c.tp_us, 20),
        fmax(c.client_us, 100) + fmax(c.multi_us, 100), fmax(c.exposed_us, 100)};
    double x[N_PARAMS], fv = INFINITY;
    for (int round = 0; round < f->restarts; round++) {
        const double f_prev = fv;
        fv = minimise(&c, start, f->max_iter, x);
        if (c.failed) break;
        memcpy(start, x, sizeof start);
        if (!(fv < f_prev * 0.999)) break;
    }
    if (c.failed) {
        *e = c.e;
        return -1;
    }
    to_profile(&c, x);
    memcpy(f->us, x, sizeof f->us);
    f->rms = sqrt(fv);
    f->prefill = c.fit_prefill;
    f->client = c.fit_client;
    f->tp = c.fit_tp;
    f->multi = c.fit_multi;
    f->exposed = c.fit_exposed;
    f->evals = c.evals;
    pkv_vfit_set(v, n, x, f->overlap);
    return 0;
}

static void fit_usage(void) {
    fputs("usage: pkvsim fit --engine PROFILE.json [-o OUT.json] VALIDATION... [--iterations N]\n"
          "\n"
          "Fits an engine profile's constants (iteration_us, per_request_us;\n"
          "gpu.prefill_token_us where the profile gives the engine's prefill a cost a prompt\n"
          "token beyond the GPU's calibration, its value above 0; per_output_token_us where\n"
          "the profile processes outputs in series, its value above 0; client_us for the\n"
          "files measured through a server on one GPU, multi_gpu_us for those over several;\n"
          "eager_allreduce_us for the files whose model runs over several GPUs;\n"
          "host.exposed_us, each step's own host work, for the files that schedule windows\n"
          "of several decode steps)\n"
          "to the validation files that use the profile and whose role is \"fit\": GSL's\n"
          "Nelder-Mead simplex on the mean squared log error of their figures, with the\n"
          "host work overlapped with the GPU as the profile's host.overlap says. The files\n"
          "held out (role \"held_out\") are run with the fitted profile and reported, never\n"
          "fitted. OUT (default: the table only) is PROFILE.json with the fitted constants\n"
          "and a `fit` section naming the fitted and held-out files and their errors.\n"
          "`pkvsim validate --by-source` fits the same way with each source held out.\n"
          "\n"
          "  --iterations N   simplex iterations per start (default 200)\n",
          stdout);
}

static int write_profile(const char *out, const char *profile, const pkv_vfit *f,
                         const pkv_vfile *v, int n) {
    pkv_err e;
    cJSON *root = pkv_json_read(profile, &e);
    if (!root) {
        fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        return -1;
    }
    /* the fit's own record is new; what a person wrote of it (fit.note) stays */
    cJSON *note = cJSON_DetachItemFromObjectCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "fit"), "note");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "fit");
    /* each constant under its object: host, gpu (prefill_token_us), request (client_us,
     * multi_gpu_us) */
    static const char *const under[N_PARAMS] = {"host", "host", "gpu",     "request",
                                                "host", "host", "request", "host"};
    for (int k = 0; k < N_PARAMS; k++) { /* the profile's own stays where not fitted */
        if ((k == 2 && !f->prefill) || (k == 3 && !f->client) || (k == 5 && !f->tp) ||
            (k == 6 && !f->multi) || (k == 7 && !f->exposed))
            continue;
        cJSON *o = cJSON_GetObjectItemCaseSensitive(root, under[k]);
        if (!cJSON_IsObject(o)) o = cJSON_AddObjectToObject(root, under[k]);
        cJSON_DeleteItemFromObjectCaseSensitive(o, pkv_vfit_names[k]);
        cJSON_AddNumberToObject(o, pkv_vfit_names[k], round(f->us[k] * 100) / 100);
    }
    cJSON *fit = cJSON_AddObjectToObject(root, "fit");
    cJSON_AddStringToObject(fit, "method",
                            "pkvsim fit --engine: Nelder-Mead on the mean squared log error of "
                            "the fitted files' figures, model backend");
    cJSON_AddNumberToObject(fit, "rms_log_error", round(1e4 * f->rms) / 1e4);
    cJSON_AddBoolToObject(fit, "prefill_token_us_fitted", f->prefill);
    cJSON_AddBoolToObject(fit, "client_us_fitted", f->client);
    cJSON_AddBoolToObject(fit, "multi_gpu_us_fitted", f->multi);
    cJSON_AddBoolToObject(fit, "exposed_us_fitted", f->exposed);
    char date[32];
    pkv_cli_utc(date, "%Y-%m-%d");
    cJSON_AddStringToObject(fit, "date", date);
    cJSON *fitted = cJSON_AddArrayToObject(fit, "fitted"),
          *held = cJSON_AddArrayToObject(fit, "held_out");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < v[i].n; j++) {
            const pkv_vrow *r = &v[i].rows[j];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", pkv_vfile_stem(v[i].path));
            cJSON_AddStringToObject(o, "figure", r->label);
            cJSON_AddNumberToObject(o, "error",
                                    round(1e4 * pkv_vfile_err(r->pred, r->value)) / 1e4);
            cJSON_AddItemToArray(v[i].held_out ? held : fitted, o);
        }
    if (note) cJSON_AddItemToObject(fit, "note", note);
    return pkv_vfile_write_doc(root, out, "fit", "-o");
}

int pkv_cmd_fit_engine(int argc, char **argv) {
    const char *profile = NULL, *out = NULL;
    int max_iter = 200;
    const pkv_cli_opt opts[] = {{"engine", 'e', PKV_CLI_STRING, &profile, 0},
                                {"output", 'o', PKV_CLI_STRING, &out, 0},
                                {"iterations", 0, PKV_CLI_COUNT, &max_iter, 100000}};
    const int orc = pkv_cli_options("fit", argc, argv, opts, 3, fit_usage);
    if (orc >= 0) return orc;
    if (!profile || optind >= argc) {
        fputs("pkvsim fit: --engine PROFILE.json and validation files (see --help)\n", stderr);
        return 2;
    }
    pkv_err pe; /* the profile first: one that cannot be read is named as such */
    cJSON *pj = pkv_json_read(profile, &pe);
    if (!pj) {
        fprintf(stderr, "pkvsim fit: --engine %s: %s\n", profile, pe.msg);
        return 1;
    }
    cJSON_Delete(pj);
    char *names[PKV_VFILES_MAX];
    int n, status;
    /* -o may be the profile itself (fitted in place), never a validation file */
    pkv_vfile *v =
        pkv_vfile_open("fit", argc - optind, argv + optind, out, "-o", names, &n, &status);
    if (!v) return status;
    /* the files run with the profile (its serving defaults) */
    int m = 0, n_fit = 0;
    bool use[PKV_VFILES_MAX];
    const char *engine = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i].cfg.engine_file, "") == 0 ||
            !pkv_same_file(v[i].cfg.engine_file, profile)) {
            fprintf(stderr, "pkvsim fit: %s: its serving.engine is not %s; left out\n", v[i].path,
                    profile);
            pkv_config_free(&v[i].cfg);
            continue;
        }
        engine = v[i].cfg.engine.name;
        n_fit += use[m] = !v[i].held_out;
        v[m++] = v[i];
    }
    int rc = 1;
    if (!n_fit) {
        fprintf(stderr, "pkvsim fit: no file of role \"fit\" uses %s\n", profile);
        goto done;
    }
    pkv_vfit f = {.max_iter = max_iter, .restarts = 4, .overlap = v[0].cfg.engine.host.overlap};
    pkv_err e;
    if (pkv_vfit_run(v, m, use, &f, &e)) {
        fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        goto done;
    }
    fprintf(stderr, "pkvsim fit: rms log error %.4f after %d runs\n", f.rms, f.evals);
    if (!f.client)
        fprintf(stderr, "pkvsim fit: client_us not fitted (no fitted file was measured through a "
                        "server): the profile's kept\n");
    for (int i = 0; i < m; i++)
        if (pkv_vfile_run(&v[i], false, &e)) {
            fprintf(stderr, "pkvsim fit: %s\n", e.msg);
            goto done;
        }
    printf("engine %s (%s): overlap %s", engine, profile, f.overlap ? "true" : "false");
    for (int k = 0; k < N_PARAMS; k++) printf(", %s %.2f", pkv_vfit_names[k], f.us[k]);
    printf("\n%-34s %-8s %-18s %10s %10s %7s\n", "file", "role", "figure", "published", "fitted",
           "error");
    for (int i = 0; i < m; i++)
        for (int j = 0; j < v[i].n; j++) {
            const pkv_vrow *r = &v[i].rows[j];
            printf("%-34.34s %-8s %-18.18s %10.4g %10.4g %+6.1f%%\n", pkv_vfile_stem(v[i].path),
                   v[i].held_out ? "held_out" : "fit", r->label, r->value, r->pred,
                   100 * pkv_vfile_err(r->pred, r->value));
        }
    rc = out && write_profile(out, profile, &f, v, m) ? 1 : 0;
done:
    pkv_vfile_free(v, m, names, n);
    return rc;
}
