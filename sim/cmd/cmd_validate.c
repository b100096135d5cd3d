/* pkvsim validate: experiment files that replay one published measurement of a real
 * serving engine each (experiments/validation/). A file is an experiment with a
 * `validation` section: its source (where the figures were published, the engine and
 * its settings, what was assumed), its role (fitted by an engine profile, or held out
 * of every fit) and the published figures it expects, each within a band. The command
 * runs each file on the model backend twice, with its engine's profile
 * (serving.engine) and with pkvsim's own loop (no profile), and prints per figure the
 * published value, both predictions and their errors; a figure outside its band fails
 * the command.
 *
 * pkvsim fit --engine PROFILE.json VALIDATION... fits a profile's host work to the
 * files of its engine marked "fit" (GSL's Nelder-Mead simplex over the constants, on
 * the squared log errors) and reports the held-out files' errors beside the fitted. */
#include "cli.h"
#include "config_workload.h"
#include "jsonv.h"
#include "pkv_files.h"
#include "runner.h"
#include "summary.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>

enum { MAX_VFILES = 256, MAX_ROWS = 16 };

typedef struct vrow {
    char figure[48], unit[16], label[64];
    const pkv_summary_figure *f;
    double value, scale, band; /* published; the figure's value times scale is in unit */
    double pred, base;         /* with the profile; with pkvsim's loop (NaN: not run) */
} vrow;

typedef struct vfile {
    const char *path;
    pkv_config cfg;
    char engine[32], gpu[32], version[64];
    bool held_out;
    int n;
    vrow rows[MAX_ROWS];
} vfile;

/* The units a published figure may be given in, per the summary figure's unit. */
static int unit_scale(const pkv_summary_figure *f, const char *unit, double *scale) {
    static const struct {
        const char *figure_unit, *unit;
        double scale;
    } ok[] = {{"s", "ms", 1e3},           {"s", "s", 1},
              {"requests/s", "req/s", 1}, {"output tokens/s", "tok/s", 1},
              {"tokens/s", "tok/s", 1},   {"fraction", "%", 100}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!strcmp(f->unit, ok[i].figure_unit) && !strcmp(unit, ok[i].unit)) {
            *scale = ok[i].scale;
            return 0;
        }
    return -1;
}

/* The validation section of the experiment text (parsed as the run parses it). */
static int parse_validation(vfile *v, const cJSON *root, pkv_err *e) {
    const pkv_keys k = pkv_config_keys();
    const cJSON *val, *src;
    const char *role, *s;
    double band;
    TRY(pkv_json_sub(root, "", "validation", &val, e));
    if (!val)
        return pkv_fail(e,
                        "validation: missing (a validation file replays a published measurement)");
    TRY(pkv_json_sub(val, "validation", "source", &src, e));
    if (!src) return pkv_fail(e, "validation.source: missing (where the figures come from)");
    TRY(pkv_keys_check(k, PKV_OBJ_SOURCE, src, "validation.source", e));
    static const char *const need[] = {"url", "engine", "gpu", "model", "command"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        TRY(pkv_json_str(src, "validation.source", need[i], "", NULL, &s, NULL, e));
        if (!*s) return pkv_fail(e, "validation.source.%s: required", need[i]);
    }
    TRY(pkv_json_str(src, "validation.source", "engine", "", NULL, &s, NULL, e));
    snprintf(v->engine, sizeof v->engine, "%s", s);
    TRY(pkv_json_str(src, "validation.source", "gpu", "", NULL, &s, NULL, e));
    snprintf(v->gpu, sizeof v->gpu, "%s", s);
    TRY(pkv_json_str(src, "validation.source", "version", "not stated", NULL, &s, NULL, e));
    snprintf(v->version, sizeof v->version, "%s", s);
    static const char *const roles[] = {"fit", "held_out", NULL};
    int ri;
    TRY(pkv_json_str(val, "validation", "role", NULL, roles, &role, &ri, e));
    v->held_out = ri == 1;
    TRY(pkv_json_num(val, "validation", "band_pct", NAN, 0, true, 1000, &band, e));
    TRY(pkv_json_str(val, "validation", "band_note", "", NULL, &s, NULL, e));
    if (!isnan(band) && !*s)
        return pkv_fail(e, "validation.band_note: say why the band is what it is (the source's "
                           "own spread, what it leaves unknown)");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(val, "expect");
    const int n = cJSON_IsArray(ex) ? cJSON_GetArraySize(ex) : 0;
    if (n < 1 || n > MAX_ROWS)
        return pkv_fail(e, "validation.expect: a list of 1 to %d published figures", MAX_ROWS);
    v->n = n;
    for (int i = 0; i < n; i++) {
        char P[48];
        snprintf(P, sizeof P, "validation.expect[%d]", i);
        const cJSON *o = cJSON_GetArrayItem(ex, i);
        vrow *r = &v->rows[i];
        if (!cJSON_IsObject(o)) return pkv_fail(e, "%s: must be an object", P);
        TRY(pkv_keys_check(k, PKV_OBJ_EXPECT, o, P, e));
        TRY(pkv_json_str(o, P, "figure", "", NULL, &s, NULL, e));
        r->f = pkv_summary_figure_find(s);
        if (!r->f || strlen(s) >= sizeof r->figure)
            return pkv_fail(e,
                            "%s.figure: \"%s\" is no figure of /summary (pkvsim report --help "
                            "lists them)",
                            P, s);
        snprintf(r->figure, sizeof r->figure, "%s", s);
        if (!cJSON_GetObjectItemCaseSensitive(o, "value"))
            return pkv_fail(e, "%s.value: required (the published figure)", P);
        TRY(pkv_json_num(o, P, "value", 0, 0, true, 1e15, &r->value, e));
        TRY(pkv_json_str(o, P, "unit", "", NULL, &s, NULL, e));
        if (strlen(s) >= sizeof r->unit || unit_scale(r->f, s, &r->scale))
            return pkv_fail(e, "%s.unit: \"%s\" is not a unit of %s (%s)", P, s, r->figure,
                            r->f->unit);
        snprintf(r->unit, sizeof r->unit, "%s", s);
        TRY(pkv_json_num(o, P, "band_pct", band, 0, true, 1000, &r->band, e));
        if (isnan(r->band))
            return pkv_fail(e, "%s.band_pct: required here or as validation.band_pct", P);
        TRY(pkv_json_str(o, P, "label", r->figure, NULL, &s, NULL, e));
        snprintf(r->label, sizeof r->label, "%.63s", s);
        r->pred = r->base = NAN;
    }
    return 0;
}

/* Load one validation file: its experiment (on the model backend, nothing recorded)
 * and its section. */
static int load(vfile *v, const char *path, pkv_err *e) {
    *v = (vfile){.path = path};
    char *text = pkv_read_file(path, NULL, e);
    if (!text) return -1;
    pkv_err sub;
    cJSON *root = pkv_json_parse(text, path, &sub);
    int rc = root ? parse_validation(v, root, &sub) : -1;
    cJSON_Delete(root);
    if (rc) {
        free(text);
        return pkv_fail(e, "%s: %s", path, sub.msg);
    }
    if (pkv_config_parse(&v->cfg, text, path, e)) return -1; /* takes the text */
    v->cfg.backend = PKV_BACKEND_MODEL;
    if (strcmp(v->cfg.engine.name, "pkvsim") && strcmp(v->cfg.engine.name, v->engine) &&
        !strstr(v->cfg.engine.name, "/") && !strstr(v->cfg.engine.name, ".json"))
        return pkv_fail(e, "%s: serving.engine \"%s\" is not the source's engine \"%s\"", path,
                        v->cfg.engine.name, v->engine);
    return 0;
}

/* Run the file's experiment with its profile's constants as they are now; each row's
 * prediction into pred (or, with base, base). */
static int run_one(vfile *v, bool base, pkv_err *e) {
    pkv_run_opts ro = {.quiet = 1};
    pkv_summary sum;
    if (pkv_run_experiment(&v->cfg, &ro, &sum, e)) return -1;
    for (int i = 0; i < v->n; i++) {
        vrow *r = &v->rows[i];
        const double x = pkv_summary_figure_value(&sum, r->f) * r->scale;
        *(base ? &r->base : &r->pred) = x;
    }
    return 0;
}

/* With the profile, then with pkvsim's own loop (the profile's serving defaults kept). */
static int run_both(vfile *v, pkv_err *e) {
    if (run_one(v, false, e)) return -1;
    const pkv_engine_profile keep = v->cfg.engine;
    v->cfg.engine.host = (pkv_engine_host){0};
    v->cfg.engine.client_s = 0;
    const int rc = run_one(v, true, e);
    v->cfg.engine = keep;
    return rc;
}

static double rel_err(double pred, double pub) {
    return (pred - pub) / pub;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* FILES|DIR...: a folder stands for its *.json in name order. Returns the count, or -1
 * (printed, nothing left allocated). Names are malloc'ed into names[]. */
static int list_files(int argc, char **argv, const char *cmd, char **names, int cap) {
    int n = 0;
    const char *why = NULL, *what = NULL;
    for (int i = 0; i < argc && !why; i++) {
        struct stat st;
        DIR *d = NULL;
        if (stat(argv[i], &st) || (S_ISDIR(st.st_mode) && !(d = opendir(argv[i])))) {
            why = strerror(errno), what = argv[i];
            break;
        }
        if (!d) {
            if (n == cap)
                why = "too many files";
            else
                names[n++] = strdup(argv[i]);
            continue;
        }
        const int first = n;
        for (struct dirent *de; !why && (de = readdir(d));) {
            const size_t l = strlen(de->d_name);
            if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
            char *p = n < cap ? malloc(strlen(argv[i]) + l + 2) : NULL;
            if (p) sprintf(p, "%s/%s", argv[i], de->d_name);
            if (n < cap)
                names[n++] = p;
            else
                why = "too many files";
        }
        closedir(d);
        qsort(names + first, (size_t)(n - first), sizeof *names, by_name);
        if (!why && n == first) why = "no *.json in it", what = argv[i];
    }
    for (int i = 0; i < n && !why; i++)
        if (!names[i]) why = "out of memory";
    if (!why) return n;
    if (what)
        fprintf(stderr, "pkvsim %s: %s: %s\n", cmd, what, why);
    else
        fprintf(stderr, "pkvsim %s: %s (at most %d)\n", cmd, why, cap);
    for (int i = 0; i < n; i++) free(names[i]);
    return -1;
}

/* The first nv files' experiments, the array, and the n names. */
static void free_files(vfile *v, int nv, char **names, int n) {
    for (int i = 0; i < nv; i++) pkv_config_free(&v[i].cfg);
    free(v);
    for (int i = 0; i < n; i++) free(names[i]);
}

/* `out` is none of the n files. Returns 0, or 2 with the message printed. */
static int output_ok(const char *cmd, const char *out, const char *opt, char **names, int n) {
    const char *what[MAX_VFILES];
    for (int i = 0; i < n; i++) what[i] = "a validation file";
    pkv_err e;
    if (!pkv_output_ok(out, (const char *const *)names, what, n, opt, &e)) return 0;
    fprintf(stderr, "pkvsim %s: %s\n", cmd, e.msg);
    return 2;
}

/* Load every file; -1 (printed) when one cannot be. */
static vfile *load_all(char **names, int n, const char *cmd) {
    vfile *v = calloc((size_t)n, sizeof *v);
    if (!v) {
        fputs("out of memory\n", stderr);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        pkv_err e;
        if (load(&v[i], names[i], &e)) {
            fprintf(stderr, "pkvsim %s: %s\n", cmd, e.msg);
            for (int j = 0; j < i; j++) pkv_config_free(&v[j].cfg);
            free(v);
            return NULL;
        }
    }
    return v;
}

static const char *stem(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- validate ---------------------------------------------------------------------- */
static void validate_usage(void) {
    fputs("usage: pkvsim validate [FILES | DIR]... [--json OUT] [--quiet]\n"
          "\n"
          "Replays published measurements of real serving engines (vLLM, SGLang, ...):\n"
          "each file is an experiment with a `validation` section (its source, the engine's\n"
          "settings, what was assumed, the published figures with their bands). Each runs\n"
          "on the model backend with its engine's profile (serving.engine) and with\n"
          "pkvsim's own loop (no profile); per figure the table shows the published value,\n"
          "both predictions and their errors. Without operands: experiments/validation/.\n"
          "\n"
          "  --json OUT    the table as JSON (rows, and the mean absolute error per engine,\n"
          "                per GPU and per role)\n"
          "  -q, --quiet   only the figures outside their bands and the means\n"
          "\n"
          "Exit status: 0 when every figure is within its band, 1 when one is not (or a\n"
          "file cannot be run), 2 on bad usage. experiments/validation/README.md says how\n"
          "to write a file.\n",
          stdout);
}

typedef struct mae {
    char key[96];
    double sum, sum_base;
    int n;
} mae;

static void mae_add(mae *m, int *n, int cap, const char *key, double err, double err_base) {
    int i = 0;
    while (i < *n && strcmp(m[i].key, key)) i++;
    if (i == *n) {
        if (*n == cap) return;
        m[(*n)++] = (mae){0};
        snprintf(m[i].key, sizeof m[i].key, "%s", key);
    }
    m[i].sum += fabs(err), m[i].sum_base += fabs(err_base), m[i].n++;
}

/* Write a JSON document to out (whole, or nothing: pkv_write_atomic) and free it; -1
 * with the message printed (cmd and opt name the command and its option). */
static int write_doc(cJSON *root, const char *out, const char *cmd, const char *opt) {
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    const int rc = text ? pkv_write_atomic(out, text) : (errno = ENOMEM, -1);
    free(text);
    if (rc) {
        fprintf(stderr, "pkvsim %s: %s %s: cannot write it: %s\n", cmd, opt, out, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_table_json(const char *out, const vfile *v, int n, const mae *m, int nm) {
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < v[i].n; j++) {
            const vrow *r = &v[i].rows[j];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", v[i].path);
            cJSON_AddStringToObject(o, "engine", v[i].engine);
            cJSON_AddStringToObject(o, "engine_version", v[i].version);
            cJSON_AddStringToObject(o, "gpu", v[i].gpu);
            cJSON_AddStringToObject(o, "profile", v[i].cfg.engine.name);
            cJSON_AddStringToObject(o, "calibration", v[i].cfg.calibration);
            cJSON_AddStringToObject(o, "role", v[i].held_out ? "held_out" : "fit");
            cJSON_AddStringToObject(o, "figure", r->figure);
            cJSON_AddStringToObject(o, "label", r->label);
            cJSON_AddStringToObject(o, "unit", r->unit);
            cJSON_AddNumberToObject(o, "published", r->value);
            cJSON_AddNumberToObject(o, "predicted", r->pred);
            cJSON_AddNumberToObject(o, "error", rel_err(r->pred, r->value));
            cJSON_AddNumberToObject(o, "predicted_pkvsim", r->base);
            cJSON_AddNumberToObject(o, "error_pkvsim", rel_err(r->base, r->value));
            cJSON_AddNumberToObject(o, "band", r->band / 100);
            cJSON_AddBoolToObject(o, "within", fabs(rel_err(r->pred, r->value)) * 100 <= r->band);
            cJSON_AddItemToArray(rows, o);
        }
    cJSON *means = cJSON_AddArrayToObject(root, "mean_abs_error");
    for (int i = 0; i < nm; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "group", m[i].key);
        cJSON_AddNumberToObject(o, "figures", m[i].n);
        cJSON_AddNumberToObject(o, "profile", m[i].sum / m[i].n);
        cJSON_AddNumberToObject(o, "pkvsim", m[i].sum_base / m[i].n);
        cJSON_AddItemToArray(means, o);
    }
    return write_doc(root, out, "validate", "--json");
}

int pkv_cmd_validate(int argc, char **argv) {
    const char *json = NULL;
    int quiet = 0;
    const pkv_cli_opt opts[] = {{"json", 0, PKV_CLI_STRING, &json, 0},
                                {"quiet", 'q', PKV_CLI_FLAG, &quiet, 0}};
    const int orc = pkv_cli_options("validate", argc, argv, opts, 2, validate_usage);
    if (orc >= 0) return orc;
    char *dflt[] = {(char *)"experiments/validation"};
    char **ops = optind < argc ? argv + optind : dflt;
    const int n_ops = optind < argc ? argc - optind : 1;
    char *names[MAX_VFILES];
    const int n = list_files(n_ops, ops, "validate", names, MAX_VFILES);
    if (n < 0) return 1;
    if (json && output_ok("validate", json, "--json", names, n)) {
        free_files(NULL, 0, names, n);
        return 2;
    }
    vfile *v = load_all(names, n, "validate");
    if (!v) {
        free_files(NULL, 0, names, n);
        return 1;
    }
    int failed = 0, out_of_band = 0, rows = 0;
    mae m[64];
    int nm = 0;
    if (!quiet)
        printf("%-34s %-6s %-5s %-8s %-18s %10s %-6s %10s %7s %10s %7s %5s\n", "file", "engine",
               "gpu", "role", "figure", "published", "unit", "profile", "error", "pkvsim", "error",
               "band");
    for (int i = 0; i < n; i++) {
        pkv_err e;
        if (!quiet) fprintf(stderr, "pkvsim validate: %s (%d of %d)\n", v[i].path, i + 1, n);
        if (run_both(&v[i], &e)) {
            fprintf(stderr, "pkvsim validate: %s\n", e.msg);
            failed = 1;
            continue;
        }
        for (int j = 0; j < v[i].n; j++) {
            const vrow *r = &v[i].rows[j];
            const double err = rel_err(r->pred, r->value), eb = rel_err(r->base, r->value);
            const bool ok = fabs(err) * 100 <= r->band;
            out_of_band += !ok, rows++;
            if (!quiet || !ok)
                printf("%-34.34s %-6.6s %-5.5s %-8s %-18.18s %10.4g %-6s %10.4g %+6.1f%% %10.4g "
                       "%+6.1f%% %4.0f%%%s\n",
                       stem(v[i].path), v[i].engine, v[i].gpu, v[i].held_out ? "held_out" : "fit",
                       r->label, r->value, r->unit, r->pred, 100 * err, r->base, 100 * eb, r->band,
                       ok ? "" : "  OUT OF BAND");
            char key[96];
            const char *role = v[i].held_out ? "held_out" : "fit";
            snprintf(key, sizeof key, "engine %s, %s", v[i].engine, role);
            mae_add(m, &nm, 64, key, err, eb);
            snprintf(key, sizeof key, "gpu %s, %s", v[i].gpu, role);
            mae_add(m, &nm, 64, key, err, eb);
            snprintf(key, sizeof key, "all, %s", role);
            mae_add(m, &nm, 64, key, err, eb);
        }
    }
    printf("\nmean absolute error (figures): with the engine's profile | pkvsim's own loop\n");
    for (int i = 0; i < nm; i++)
        printf("  %-30s %3d  %5.1f%% | %5.1f%%\n", m[i].key, m[i].n, 100 * m[i].sum / m[i].n,
               100 * m[i].sum_base / m[i].n);
    printf("%d of %d figures within their bands\n", rows - out_of_band, rows);
    if (json && write_table_json(json, v, n, m, nm)) failed = 1;
    free_files(v, n, names, n);
    return failed || out_of_band ? 1 : 0;
}

/* ---- fit an engine profile --------------------------------------------------------- */
/* The constants fitted, in microseconds: a point x of the simplex maps to x^2 (so each
 * stays non-negative). */
enum { N_PARAMS = 4 };
static const char *const param_names[N_PARAMS] = {"iteration_us", "per_request_us",
                                                  "per_prompt_token_us", "client_us"};

typedef struct fit_ctx {
    vfile *v;
    int n;
    bool overlap;
    bool fit_client;  /* a fitted file was measured through a server */
    double client_us; /* else client_us stays this (the profile's) */
    int evals, failed;
    pkv_err e;
} fit_ctx;

static void set_params(vfile *v, int n, const double *us, bool overlap) {
    for (int i = 0; i < n; i++) {
        pkv_engine_profile *p = &v[i].cfg.engine;
        p->host = (pkv_engine_host){.iteration_s = us[0] * 1e-6,
                                    .per_request_s = us[1] * 1e-6,
                                    .per_prompt_token_s = us[2] * 1e-6,
                                    .overlap = overlap};
        p->client_s = v[i].cfg.client == PKV_CLIENT_OFFLINE ? 0 : us[3] * 1e-6;
    }
}

/* Mean squared log error of the fitted files' figures (held out: skipped). */
static double objective(const gsl_vector *x, void *arg) {
    fit_ctx *c = arg;
    double us[N_PARAMS], sum = 0;
    for (int k = 0; k < N_PARAMS; k++) us[k] = gsl_vector_get(x, k) * gsl_vector_get(x, k);
    if (!c->fit_client) us[3] = c->client_us;
    set_params(c->v, c->n, us, c->overlap);
    int rows = 0;
    c->evals++;
    for (int i = 0; i < c->n; i++) {
        if (c->v[i].held_out) continue;
        if (run_one(&c->v[i], false, &c->e)) {
            c->failed = 1;
            return GSL_POSINF;
        }
        for (int j = 0; j < c->v[i].n; j++, rows++) {
            const double l = log(c->v[i].rows[j].pred / c->v[i].rows[j].value);
            sum += isfinite(l) ? l * l : 1e6;
        }
    }
    return rows ? sum / rows : 0;
}

/* Minimise from start (microseconds); best receives the constants, the return the
 * objective there (NAN: a run failed). */
static double minimise(fit_ctx *c, const double *start, int max_iter, double *best) {
    const gsl_multimin_fminimizer_type *T = gsl_multimin_fminimizer_nmsimplex2;
    gsl_multimin_fminimizer *s = gsl_multimin_fminimizer_alloc(T, N_PARAMS);
    gsl_vector *x = gsl_vector_alloc(N_PARAMS), *step = gsl_vector_alloc(N_PARAMS);
    double f = NAN;
    if (s && x && step) {
        for (int k = 0; k < N_PARAMS; k++) {
            gsl_vector_set(x, k, sqrt(start[k]));
            gsl_vector_set(step, k, 0.3 * sqrt(start[k]) + 0.5);
        }
        gsl_multimin_function fn = {objective, N_PARAMS, c};
        gsl_multimin_fminimizer_set(s, &fn, x, step);
        for (int it = 0; it < max_iter && !c->failed; it++) {
            if (gsl_multimin_fminimizer_iterate(s)) break;
            if (gsl_multimin_test_size(gsl_multimin_fminimizer_size(s), 1e-3) == GSL_SUCCESS) break;
        }
        f = c->failed ? NAN : s->fval;
        for (int k = 0; k < N_PARAMS; k++)
            best[k] = gsl_vector_get(s->x, k) * gsl_vector_get(s->x, k);
    } else {
        c->failed = 1;
        pkv_fail(&c->e, "out of memory");
    }
    gsl_multimin_fminimizer_free(s);
    gsl_vector_free(x);
    gsl_vector_free(step);
    return f;
}

static void fit_usage(void) {
    fputs("usage: pkvsim fit --engine PROFILE.json [-o OUT.json] VALIDATION... [--iterations N]\n"
          "\n"
          "Fits an engine profile's host work (iteration_us, per_request_us,\n"
          "per_prompt_token_us; client_us for the files measured through a server) to the\n"
          "validation files of its engine whose role is \"fit\": GSL's Nelder-Mead simplex\n"
          "on the mean squared log error of their figures, once with the host work\n"
          "overlapped with the GPU and once added to it (the better kept). The files held\n"
          "out (role \"held_out\") are run with the fitted profile and reported, never\n"
          "fitted. OUT (default: the table only) is PROFILE.json with the fitted constants\n"
          "and a `fit` section naming the fitted and held-out files and their errors.\n"
          "\n"
          "  --iterations N   simplex iterations per start (default 200)\n",
          stdout);
}

static int write_profile(const char *out, const char *profile, const double *us, bool overlap,
                         bool fit_client, const vfile *v, int n, double fit_f) {
    pkv_err e;
    cJSON *root = pkv_json_read(profile, &e);
    if (!root) {
        fprintf(stderr, "pkvsim fit: %s\n", e.msg);
        return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "host");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "request");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "fit");
    cJSON *h = cJSON_AddObjectToObject(root, "host");
    for (int k = 0; k < 3; k++)
        cJSON_AddNumberToObject(h, param_names[k], round(us[k] * 100) / 100);
    cJSON_AddBoolToObject(h, "overlap", overlap);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(root, "request"), "client_us",
                            round(us[3] * 100) / 100);
    cJSON *fit = cJSON_AddObjectToObject(root, "fit");
    cJSON_AddStringToObject(fit, "method",
                            "pkvsim fit --engine: Nelder-Mead on the mean squared log error of "
                            "the fitted files' figures, model backend");
    cJSON_AddNumberToObject(fit, "rms_log_error", round(1e4 * sqrt(fit_f)) / 1e4);
    cJSON_AddBoolToObject(fit, "client_us_fitted", fit_client);
    char date[16];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    cJSON_AddStringToObject(fit, "date", date);
    cJSON *fitted = cJSON_AddArrayToObject(fit, "fitted"),
          *held = cJSON_AddArrayToObject(fit, "held_out");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < v[i].n; j++) {
            const vrow *r = &v[i].rows[j];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", stem(v[i].path));
            cJSON_AddStringToObject(o, "figure", r->label);
            cJSON_AddNumberToObject(o, "error", round(1e4 * rel_err(r->pred, r->value)) / 1e4);
            cJSON_AddItemToArray(v[i].held_out ? held : fitted, o);
        }
    return write_doc(root, out, "fit", "-o");
}

int pkv_cmd_fit_engine(int argc, char **argv) {
    const char *profile = NULL, *out = NULL, *iters = NULL;
    const pkv_cli_opt opts[] = {{"engine", 'e', PKV_CLI_STRING, &profile, 0},
                                {"output", 'o', PKV_CLI_STRING, &out, 0},
                                {"iterations", 0, PKV_CLI_STRING, &iters, 0}};
    const int orc = pkv_cli_options("fit", argc, argv, opts, 3, fit_usage);
    if (orc >= 0) return orc;
    int max_iter = 200;
    if (!profile || optind >= argc ||
        (iters && pkv_cli_parse_count("fit", "--iterations", iters, 100000, &max_iter))) {
        if (!profile || optind >= argc)
            fputs("pkvsim fit: --engine PROFILE.json and validation files (see --help)\n", stderr);
        return 2;
    }
    char *names[MAX_VFILES];
    const int n = list_files(argc - optind, argv + optind, "fit", names, MAX_VFILES);
    if (n < 0) return 1;
    /* -o may be the profile itself (fitted in place), never a validation file */
    if (out && output_ok("fit", out, "-o", names, n)) {
        free_files(NULL, 0, names, n);
        return 2;
    }
    vfile *v = load_all(names, n, "fit");
    if (!v) {
        free_files(NULL, 0, names, n);
        return 1;
    }
    /* the files of the profile's engine, run with it (its serving defaults) */
    int m = 0, n_fit = 0;
    bool fit_client = false;
    const char *engine = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i].cfg.engine_file, "") == 0 ||
            !pkv_same_file(v[i].cfg.engine_file, profile)) {
            fprintf(stderr, "pkvsim fit: %s: its serving.engine is not %s; left out\n", v[i].path,
                    profile);
            pkv_config_free(&v[i].cfg);
            continue;
        }
        engine = v[i].engine;
        n_fit += !v[i].held_out;
        fit_client |= !v[i].held_out && v[i].cfg.client == PKV_CLIENT_SERVER;
        v[m++] = v[i];
    }
    int rc = 1;
    if (!n_fit) {
        fprintf(stderr, "pkvsim fit: no file of role \"fit\" uses %s\n", profile);
        goto done;
    }
    fit_ctx c = {
        .v = v, .n = m, .fit_client = fit_client, .client_us = v[0].cfg.engine.client_s * 1e6};
    double best[N_PARAMS], f_best = INFINITY;
    bool overlap_best = false;
    /* from the profile's constants (floored, so that each can move), the simplex
     * restarted where it ended until that no longer improves (at most 4 times) */
    const pkv_engine_profile *p0 = &v[0].cfg.engine;
    const double start0[N_PARAMS] = {
        fmax(p0->host.iteration_s * 1e6, 100), fmax(p0->host.per_request_s * 1e6, 1),
        fmax(p0->host.per_prompt_token_s * 1e6, 0.1), fmax(p0->client_s * 1e6, 100)};
    for (int o = 0; o < 2; o++) {
        double x[N_PARAMS], start[N_PARAMS], f = INFINITY;
        memcpy(start, start0, sizeof start);
        c.overlap = o;
        for (int round = 0; round < 4; round++) {
            const double f_prev = f;
            f = minimise(&c, start, max_iter, x);
            if (c.failed) break;
            memcpy(start, x, sizeof start);
            if (!(f < f_prev * 0.999)) break;
        }
        if (c.failed) {
            fprintf(stderr, "pkvsim fit: %s\n", c.e.msg);
            goto done;
        }
        fprintf(stderr, "pkvsim fit: overlap %s: rms log error %.4f after %d runs\n",
                o ? "true" : "false", sqrt(f), c.evals);
        if (f < f_best) {
            f_best = f, overlap_best = o;
            memcpy(best, x, sizeof best);
        }
    }
    if (!fit_client) {
        best[3] = c.client_us;
        fprintf(stderr,
                "pkvsim fit: client_us not fitted (no fitted file was measured through a "
                "server): %.2f, the profile's, kept\n",
                c.client_us);
    }
    set_params(v, m, best, overlap_best);
    for (int i = 0; i < m; i++) {
        pkv_err e;
        if (run_one(&v[i], false, &e)) {
            fprintf(stderr, "pkvsim fit: %s\n", e.msg);
            goto done;
        }
    }
    printf("engine %s (%s): overlap %s", engine, profile, overlap_best ? "true" : "false");
    for (int k = 0; k < N_PARAMS; k++) printf(", %s %.2f", param_names[k], best[k]);
    printf("\n%-34s %-8s %-18s %10s %10s %7s\n", "file", "role", "figure", "published", "fitted",
           "error");
    for (int i = 0; i < m; i++)
        for (int j = 0; j < v[i].n; j++) {
            const vrow *r = &v[i].rows[j];
            printf("%-34.34s %-8s %-18.18s %10.4g %10.4g %+6.1f%%\n", stem(v[i].path),
                   v[i].held_out ? "held_out" : "fit", r->label, r->value, r->pred,
                   100 * rel_err(r->pred, r->value));
        }
    rc = out && write_profile(out, profile, best, overlap_best, fit_client, v, m, f_best) ? 1 : 0;
done:
    free_files(v, m, names, n);
    return rc;
}
