/* pkvsim validate: run the validation files (vfile.h) on the model backend twice, with
 * their engine's profile (serving.engine) and with pkvsim's own loop (no profile), and
 * print per figure the published value, both predictions and their errors; a figure
 * outside its band fails the command. With --by-source, each source's files are
 * predicted by profiles fitted on every other source (pkv_vfit_run). */
#include "cli.h"
#include "config_files.h"
#include "vfile.h"

#include <getopt.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void validate_usage(void) {
    fputs("usage: pkvsim validate [FILES | DIR]... [--json OUT] [--quiet]\n"
          "\n"
          "Replays published measurements of real serving engines (vLLM, SGLang, ...):\n"
          "each file is an experiment with a `validation` section (its source, the engine's\n"
          "settings, what was assumed, the published figures with their bands). Each runs\n"
          "on the model backend with its engine's profile (serving.engine) and with\n"
          "pkvsim's own loop (no profile); per figure the table shows the published value,\n"
          "both predictions and their errors. Without operands: the shipped\n"
          "experiments/validation/ (found beside the program, or under $PKVSIM_DATA).\n"
          "Each TTFT figure of one replica also gets its floor, the least the GPU could\n"
          "give the requests the file draws: their prompts' dense FLOPs at the\n"
          "calibration's top GEMM rate, served shortest first with no prefix reused; a\n"
          "published figure below it is marked BELOW ITS FLOOR (its lengths or its measure\n"
          "are not what the file assumes).\n"
          "\n"
          "  --json OUT    the table as JSON (rows with the predicted TTFT's parts and the\n"
          "                floor, and the mean absolute error per engine, profile, GPU,\n"
          "                figure and role)\n"
          "  -q, --quiet   only the figures outside their bands and the means\n"
          "  --by-source   held out by source: for each source (validation.source.id) in\n"
          "                turn, each profile its files use is fitted (as fit --engine\n"
          "                fits) on every other source's files, and predicts that source's;\n"
          "                the errors per source, engine version, GPU and figure (mean\n"
          "                and median: one figure at the edge of saturation can carry\n"
          "                the mean); each fold's fitted constants on stderr\n"
          "  --iterations N  --by-source: simplex iterations per fit (default 60)\n"
          "\n"
          "Exit status: 0 when every figure is within its band, 1 when one is not (or a\n"
          "file cannot be run), 2 on bad usage. experiments/validation/README.md says how\n"
          "to write a file.\n",
          stdout);
}

/* A group's absolute errors: their sums (the means) and each error (the median; NULL
 * where memory ran out: no median). */
typedef struct mae {
    char key[160];
    double sum, sum_base;
    int n;
    double *abs;
} mae;

static void mae_free(mae *m, int n) {
    for (int i = 0; i < n; i++) free(m[i].abs);
}

/* The median of group m's absolute errors (NaN: none kept). */
static double mae_median(const mae *m) {
    if (!m->abs || m->n == 0) return NAN;
    gsl_sort(m->abs, 1, (size_t)m->n);
    return gsl_stats_median_from_sorted_data(m->abs, 1, (size_t)m->n);
}

static void mae_add(mae *m, int *n, int cap, const char *key, double err, double err_base) {
    int i = 0;
    while (i < *n && strcmp(m[i].key, key)) i++;
    if (i == *n) {
        if (*n == cap) return;
        m[(*n)++] = (mae){0};
        snprintf(m[i].key, sizeof m[i].key, "%.159s", key);
    }
    double *a = realloc(m[i].abs, sizeof *a * (size_t)(m[i].n + 1));
    if (!a) free(m[i].abs);
    m[i].abs = a;
    if (a) a[m[i].n] = fabs(err);
    m[i].sum += fabs(err), m[i].sum_base += fabs(err_base), m[i].n++;
}

/* The groups a row's errors count in (a 99th percentile only in its kind's: the others
 * stay the means of the figures a profile is fitted to). */
static void mae_row(mae *m, int *nm, int cap, const pkv_vfile *v, const pkv_vrow *r,
                    const char *role, double err, double eb) {
    char key[160], gpu[96];
    /* the GPU as the run takes it: its calibration file, and the GPUs a tensor-parallel
     * model spans */
    const char *cal = pkv_vfile_stem(v->cfg.calibration), *dot = strrchr(cal, '.');
    snprintf(gpu, sizeof gpu, "%.*s", dot ? (int)(dot - cal) : 64, cal);
    if (v->cfg.model.tp > 1)
        snprintf(gpu + strlen(gpu), sizeof gpu - strlen(gpu), " x%d", v->cfg.model.tp);
    const char *keys[][2] = {{"engine", v->engine},
                             {"profile", v->cfg.engine.name},
                             {"gpu", gpu},
                             {"figure", pkv_vfile_kind_names[pkv_vfile_figure_kind(r->figure)]},
                             {"all", NULL}};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        if (r->tail && k != 3) continue; /* a tail counts under its kind alone */
        if (keys[k][1])
            snprintf(key, sizeof key, "%.16s %.80s, %.24s", keys[k][0], keys[k][1], role);
        else
            snprintf(key, sizeof key, "all, %.24s", role);
        mae_add(m, nm, cap, key, err, eb);
    }
}

/* An error as a signed percentage into buf[16], "-" where there is none. */
static const char *pct(char *buf, double err) {
    if (isnan(err)) return "-";
    snprintf(buf, 16, "%+6.1f%%", 100 * err);
    return buf;
}

/* Where the published figure lies below its floor (floor.h: the least the GPU could give
 * the requests the file draws), a note into buf[96] saying so; else "". */
static const char *below_floor(const pkv_vrow *r, char *buf) {
    if (!(r->value < r->floor)) return "";
    snprintf(buf, 96, "  BELOW ITS FLOOR %.4g: lengths or measure not as assumed", r->floor);
    return buf;
}

/* A row of the JSON tables: the file, its source and engine, the figure published, its
 * floor, and the predicted TTFT's parts (ms); each table adds its predictions. */
static cJSON *row_json(const pkv_vfile *v, const pkv_vrow *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", v->path);
    cJSON_AddStringToObject(o, "engine", v->engine);
    cJSON_AddStringToObject(o, "engine_version", v->version);
    cJSON_AddStringToObject(o, "gpu", v->gpu);
    cJSON_AddStringToObject(o, "profile", v->cfg.engine.name);
    cJSON_AddStringToObject(o, "calibration", v->cfg.calibration);
    cJSON_AddStringToObject(o, "role", v->held_out ? "held_out" : "fit");
    if (!v->fits_engine) cJSON_AddFalseToObject(o, "fits_engine");
    cJSON_AddStringToObject(o, "source", v->source);
    cJSON_AddStringToObject(o, "client", v->client);
    cJSON *parts = cJSON_AddObjectToObject(o, "ttft_parts_ms");
    for (int k = 0; k < PKV_TTFT_PARTS; k++)
        cJSON_AddNumberToObject(parts, pkv_ttft_part_names[k], v->ttft_parts[k] * 1e3);
    cJSON_AddStringToObject(o, "figure", r->figure);
    cJSON_AddStringToObject(o, "label", r->label);
    cJSON_AddStringToObject(o, "unit", r->unit);
    cJSON_AddNumberToObject(o, "published", r->value);
    cJSON_AddNumberToObject(o, "floor", r->floor); /* NaN: null */
    return o;
}

/* The means as root's "mean_abs_error": per group, with the profile and with pkvsim's
 * own loop (both), or the one error (held out by source). */
static void add_means(cJSON *root, const mae *m, int nm, bool both) {
    cJSON *means = cJSON_AddArrayToObject(root, "mean_abs_error");
    for (int i = 0; i < nm; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "group", m[i].key);
        cJSON_AddNumberToObject(o, "figures", m[i].n);
        cJSON_AddNumberToObject(o, both ? "profile" : "error", m[i].sum / m[i].n);
        if (both) cJSON_AddNumberToObject(o, "pkvsim", m[i].sum_base / m[i].n);
        if (!both) cJSON_AddNumberToObject(o, "median", mae_median(&m[i])); /* NaN: null */
        cJSON_AddItemToArray(means, o);
    }
}

/* A document whose "rows" are every file's rows (row_json), each with what `add` puts
 * beside it (i: the row's file). */
typedef void row_add_fn(cJSON *o, const pkv_vrow *r, int i, const void *ctx);
static cJSON *rows_doc(const pkv_vfile *v, int n, row_add_fn *add, const void *ctx) {
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < v[i].n; j++) {
            cJSON *o = row_json(&v[i], &v[i].rows[j]);
            add(o, &v[i].rows[j], i, ctx);
            cJSON_AddItemToArray(rows, o);
        }
    return root;
}

/* The table's row: both predictions, their errors, the band and whether it holds. */
static void add_both(cJSON *o, const pkv_vrow *r, int i, const void *ctx) {
    (void)i, (void)ctx;
    cJSON_AddNumberToObject(o, "predicted", r->pred);
    cJSON_AddNumberToObject(o, "error", pkv_vfile_err(r->pred, r->value));
    cJSON_AddNumberToObject(o, "predicted_pkvsim", r->base);
    cJSON_AddNumberToObject(o, "error_pkvsim", pkv_vfile_err(r->base, r->value));
    cJSON_AddNumberToObject(o, "band", r->band / 100);
    cJSON_AddBoolToObject(o, "within", fabs(pkv_vfile_err(r->pred, r->value)) * 100 <= r->band);
}

static int write_table_json(const char *out, const pkv_vfile *v, int n, const mae *m, int nm) {
    cJSON *root = rows_doc(v, n, add_both, NULL);
    add_means(root, m, nm, true);
    return pkv_vfile_write_doc(root, out, "validate", "--json");
}

/* ---- held out by source ------------------------------------------------------------ */
static int by_profile(const void *a, const void *b) {
    const pkv_vfile *x = a, *y = b;
    const int c = strcmp(x->cfg.engine_file, y->cfg.engine_file);
    return c ? c : strcmp(x->path, y->path);
}

/* Each source in turn: the profiles its files use, fitted on the other sources' files
 * of that profile (those that may fit an engine: validation.fits_engine), predict them
 * (r->pred); a file whose profile no other source's files fit keeps the shipped constants
 * and is marked (alone[i]). The n files are sorted by
 * profile here. Returns 0, or -1 with e. */
static int held_out_by_source(pkv_vfile *v, int n, int iters, bool *alone, pkv_err *e) {
    qsort(v, (size_t)n, sizeof *v, by_profile);
    for (int i = 0; i < n; i++) pkv_config_relocated(&v[i].cfg); /* a trace's rows moved */
    pkv_engine_profile *keep = malloc(sizeof *keep * (size_t)n);
    double(*pred)[PKV_VFILE_ROWS] = malloc(sizeof *pred * (size_t)n);
    double(*parts)[PKV_TTFT_PARTS] = malloc(sizeof *parts * (size_t)n);
    bool *use = calloc((size_t)n, sizeof *use), *done = calloc((size_t)n, sizeof *done);
    int rc = keep && pred && parts && use && done ? 0 : pkv_fail(e, "out of memory");
    for (int i = 0; i < n && !rc; i++) keep[i] = v[i].cfg.engine;
    for (int a = 0; a < n && !rc;) { /* the files of one profile: [a, b) */
        int b = a + 1;
        while (b < n && !strcmp(v[b].cfg.engine_file, v[a].cfg.engine_file)) b++;
        for (int i = a; i < b && !rc; i++) {
            if (done[i]) continue;
            const char *src = v[i].source;
            int others = 0;
            for (int j = a; j < b; j++)
                others += use[j] = v[j].fits_engine && strcmp(v[j].source, src) != 0;
            alone[i] = !*v[i].cfg.engine_file || !others;
            if (!alone[i]) {
                pkv_vfit f = {
                    .max_iter = iters, .restarts = 2, .overlap = v[i].cfg.engine.host.overlap};
                fprintf(stderr, "pkvsim validate: %s held out: fitting %s on %d files\n", src,
                        v[i].cfg.engine.name, others);
                for (int j = a; j < b; j++) v[j].floors = false; /* not in the fit's runs */
                rc = pkv_vfit_run(v + a, b - a, use + a, &f, e);
                if (!rc) { /* what the held-out source is predicted with */
                    fprintf(stderr, "pkvsim validate: %s held out:", src);
                    for (int k = 0; k < PKV_VFIT_PARAMS; k++)
                        fprintf(stderr, " %s %.4g", pkv_vfit_names[k], f.us[k]);
                    fprintf(stderr, " (rms log error %.3f)\n", f.rms);
                }
            }
            for (int j = a; j < b && !rc; j++) { /* the source's files of this profile */
                if (strcmp(v[j].source, src)) continue;
                alone[j] = alone[i];
                v[j].floors = true;
                rc = pkv_vfile_run(&v[j], false, e);
                for (int k = 0; k < v[j].n; k++) pred[j][k] = v[j].rows[k].pred;
                memcpy(parts[j], v[j].ttft_parts, sizeof parts[j]);
                done[j] = true;
            }
            for (int j = a; j < b; j++) v[j].cfg.engine = keep[j];
        }
        a = b;
    }
    for (int i = 0; i < n && !rc; i++) {
        for (int k = 0; k < v[i].n; k++) v[i].rows[k].pred = pred[i][k];
        memcpy(v[i].ttft_parts, parts[i], sizeof parts[i]);
    }
    free(keep), free(pred), free(parts), free(use), free(done);
    return rc;
}

/* The row held out by source: its prediction, error, and whether it was held out. */
static void add_held_out(cJSON *o, const pkv_vrow *r, int i, const void *alone) {
    cJSON_AddNumberToObject(o, "predicted_held_out", r->pred);
    cJSON_AddNumberToObject(o, "error", pkv_vfile_err(r->pred, r->value));
    cJSON_AddBoolToObject(o, "held_out", !((const bool *)alone)[i]);
}

/* The table and the means held out by source (and json's document); 1 where a figure got
 * no prediction (named), else 0, or -1 where the document could not be written. */
static int print_by_source(const pkv_vfile *v, int n, const bool *alone, const char *json) {
    mae m[128];
    int nm = 0, n_alone = 0, none = 0;
    printf("%-30s %-34s %-14s %-9s %-18s %10s %10s %7s\n", "source", "file", "profile", "gpu",
           "figure", "published", "held out", "error");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < v[i].n; j++) {
            const pkv_vrow *r = &v[i].rows[j];
            const double err = pkv_vfile_err(r->pred, r->value);
            char fl[96];
            printf("%-30.30s %-34.34s %-14.14s %-9.9s %-18.18s %10.4g %10.4g %+6.1f%%%s%s%s%s\n",
                   v[i].source, pkv_vfile_stem(v[i].path), v[i].cfg.engine.name, v[i].gpu, r->label,
                   r->value, r->pred, 100 * err,
                   alone[i] ? "  (not held out: no other source fits its profile)" : "",
                   v[i].fits_engine ? "" : "  (fits no engine: validation.fits_engine)",
                   isnan(err) ? "  NO PREDICTION: the run gave no value" : "", below_floor(r, fl));
            n_alone += alone[i];
            none += isnan(err);
            if (alone[i] || isnan(err)) continue; /* the means are over the figures predicted */
            mae_row(m, &nm, 128, &v[i], r, "held out by source", err, err);
            if (r->tail) continue;
            char key[160];
            snprintf(key, sizeof key, "source %.95s", v[i].source);
            mae_add(m, &nm, 128, key, err, err);
        }
    printf("\nabsolute error held out by source (figures, mean, median)\n");
    for (int i = 0; i < nm; i++)
        printf("  %-60.60s %3d  %5.1f%%  %5.1f%%\n", m[i].key, m[i].n, 100 * m[i].sum / m[i].n,
               100 * mae_median(&m[i]));
    if (n_alone)
        printf("%d figures not held out (their profile has one source): left out of the means\n",
               n_alone);
    if (none)
        fprintf(stderr, "pkvsim validate: %d figures got no prediction held out (named above)\n",
                none);
    int rc = none ? 1 : 0;
    if (json) {
        cJSON *root = rows_doc(v, n, add_held_out, alone);
        add_means(root, m, nm, false);
        if (pkv_vfile_write_doc(root, json, "validate", "--json")) rc = -1;
    }
    mae_free(m, nm);
    return rc;
}

int pkv_cmd_validate(int argc, char **argv) {
    const char *json = NULL;
    int quiet = 0, by_source = 0, max_iter = 60;
    const pkv_cli_opt opts[] = {{"json", 0, PKV_CLI_STRING, &json, 0},
                                {"quiet", 'q', PKV_CLI_FLAG, &quiet, 0},
                                {"by-source", 0, PKV_CLI_FLAG, &by_source, 0},
                                {"iterations", 0, PKV_CLI_COUNT, &max_iter, 100000}};
    const int orc = pkv_cli_options("validate", argc, argv, opts, 4, validate_usage);
    if (orc >= 0) return orc;
    char folder[1024]; /* the shipped files, found as presets are (beside the program) */
    pkv_config_data_path(folder, sizeof folder, "experiments/validation");
    char *dflt[] = {folder};
    char **ops = optind < argc ? argv + optind : dflt;
    const int n_ops = optind < argc ? argc - optind : 1;
    char *names[PKV_VFILES_MAX];
    int n, status;
    pkv_vfile *v = pkv_vfile_open("validate", n_ops, ops, json, "--json", names, &n, &status);
    if (!v) return status;
    for (int i = 0; i < n; i++) v[i].floors = true;
    if (by_source) {
        bool *alone = calloc(n > 0 ? (size_t)n : 1, sizeof *alone);
        pkv_err e;
        int rc =
            alone ? held_out_by_source(v, n, max_iter, alone, &e) : pkv_fail(&e, "out of memory");
        if (rc) fprintf(stderr, "pkvsim validate: %s\n", e.msg);
        rc = rc || print_by_source(v, n, alone, json) ? 1 : 0;
        free(alone);
        pkv_vfile_free(v, n, names, n);
        return rc;
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
        if (pkv_vfile_run_both(&v[i], &e)) {
            fprintf(stderr, "pkvsim validate: %s\n", e.msg);
            failed = 1;
            continue;
        }
        for (int j = 0; j < v[i].n; j++) {
            const pkv_vrow *r = &v[i].rows[j];
            const double err = pkv_vfile_err(r->pred, r->value),
                         eb = pkv_vfile_err(r->base, r->value);
            const bool ok = fabs(err) * 100 <= r->band;
            out_of_band += !ok, rows++;
            char e1[16], e2[16], fl[96];
            if (!quiet || !ok)
                printf("%-34.34s %-6.6s %-5.5s %-8s %-18.18s %10.4g %-6s %10.4g %7s %10.4g %7s "
                       "%4.0f%%%s%s\n",
                       pkv_vfile_stem(v[i].path), v[i].engine, v[i].gpu,
                       v[i].held_out ? "held_out" : "fit", r->label, r->value, r->unit, r->pred,
                       pct(e1, err), r->base, pct(e2, eb), r->band,
                       ok           ? ""
                       : isnan(err) ? "  NO PREDICTION: the run gave no value (no request of it "
                                      "finished, or none that the figure counts)"
                                    : "  OUT OF BAND",
                       below_floor(r, fl));
            if (!isnan(err) && !isnan(eb)) /* the means are over the figures predicted */
                mae_row(m, &nm, 64, &v[i], r, v[i].held_out ? "held_out" : "fit", err, eb);
        }
    }
    printf("\nmean absolute error (figures): with the engine's profile | pkvsim's own loop\n");
    for (int i = 0; i < nm; i++)
        printf("  %-30s %3d  %5.1f%% | %5.1f%%\n", m[i].key, m[i].n, 100 * m[i].sum / m[i].n,
               100 * m[i].sum_base / m[i].n);
    printf("%d of %d figures within their bands\n", rows - out_of_band, rows);
    if (json && write_table_json(json, v, n, m, nm)) failed = 1;
    mae_free(m, nm);
    pkv_vfile_free(v, n, names, n);
    return failed || out_of_band ? 1 : 0;
}
