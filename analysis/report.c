#include "report.h"
#include "jsonv.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_statistics_double.h>

enum { MAX_RUNS = 4096, N_VALUES = 7 };

/* The /summary attributes reported, in column order. */
static const char *const value_names[N_VALUES] = {
    "decode_tok_s", "decode_tok_s_wall", "decode_tok_s_device", "ttft_p50",
    "ttft_p99",     "tpot_p50",          "host_overhead_s"};
static const char *const value_heads[N_VALUES] = {"tok/s (sim)", "tok/s (wall)", "tok/s (device)",
                                                  "TTFT p50 ms", "TTFT p99 ms",  "TPOT p50 us",
                                                  "host us/step"};
static const double value_scale[N_VALUES] = {1, 1, 1, 1e3, 1e3, 1e6, 1e6};

typedef struct run {
    char name[128], policy[32], backend[16];
    double v[N_VALUES];
    int interrupted;
} run;

static double attr_f64(hid_t f, const char *obj, const char *name) {
    double x = NAN;
    if (H5Aexists_by_name(f, obj, name, H5P_DEFAULT) <= 0) return x;
    hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &x) < 0) x = NAN;
        H5Aclose(a);
    }
    return x;
}

/* A scalar variable-length string dataset or attribute, copied into buf. */
static int read_text(hid_t f, const char *path, int attribute, const char *attr, char **out) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8); /* as written: HDF5 converts no character sets */
    char *s = NULL;
    int rc = -1;
    if (attribute) {
        hid_t a = H5Aopen_by_name(f, path, attr, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            rc = H5Aread(a, t, &s) < 0 ? -1 : 0;
            H5Aclose(a);
        }
    } else {
        hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
        if (d >= 0) {
            rc = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s) < 0 ? -1 : 0;
            H5Dclose(d);
        }
    }
    H5Tclose(t);
    if (rc == 0 && s) {
        *out = strdup(s);
        H5free_memory(s);
    }
    return rc == 0 && *out ? 0 : -1;
}

static int load_run(const char *path, run *r, pkv_err *e) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return pkv_fail(e, "%s: not a readable HDF5 file", path);
    char *resolved = NULL, *backend = NULL;
    int rc = -1;
    if (read_text(f, "config/resolved", 0, NULL, &resolved) ||
        read_text(f, "provenance", 1, "backend", &backend) ||
        H5Lexists(f, "summary", H5P_DEFAULT) <= 0) {
        pkv_fail(e,
                 "%s: not a complete pkvsim output (no /config/resolved, /provenance or "
                 "/summary)",
                 path);
        goto out;
    }
    cJSON *root = cJSON_Parse(resolved);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *route = cJSON_GetObjectItemCaseSensitive(root, "route");
    const cJSON *pol = route ? cJSON_GetObjectItemCaseSensitive(route, "policy") : NULL;
    snprintf(r->name, sizeof r->name, "%s", cJSON_IsString(name) ? name->valuestring : "?");
    snprintf(r->policy, sizeof r->policy, "%s", cJSON_IsString(pol) ? pol->valuestring : "?");
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    cJSON_Delete(root);
    for (int k = 0; k < N_VALUES; k++) r->v[k] = attr_f64(f, "summary", value_names[k]);
    r->interrupted = attr_f64(f, "summary", "interrupted") == 1;
    rc = 0;
out:
    free(resolved);
    free(backend);
    H5Fclose(f);
    return rc;
}

static int same_group(const run *a, const run *b) {
    return !strcmp(a->name, b->name) && !strcmp(a->policy, b->policy) &&
           !strcmp(a->backend, b->backend);
}

/* mean and sample sd of value k over the runs of a's group; NaN values are skipped. */
static void group_stats(const run *runs, int n, const run *a, int k, double *mean, double *sd,
                        int *count) {
    static double x[MAX_RUNS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (same_group(&runs[i], a) && runs[i].v[k] == runs[i].v[k]) x[m++] = runs[i].v[k];
    *count = m;
    *mean = m ? gsl_stats_mean(x, 1, (size_t)m) : NAN;
    *sd = m > 1 ? gsl_stats_sd_m(x, 1, (size_t)m, *mean) : NAN;
}

int pkv_report_write(const char *const *paths, int n, const char *baseline, FILE *table, FILE *csv,
                     pkv_err *e) {
    if (n > MAX_RUNS) return pkv_fail(e, "at most %d files", MAX_RUNS);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    run *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) return pkv_fail(e, "out of memory");
    for (int i = 0; i < n; i++)
        if (load_run(paths[i], &runs[i], e)) {
            free(runs);
            return -1;
        }
    FILE *out = csv;
    fprintf(table, "| experiment | policy | backend | runs |");
    for (int k = 0; k < N_VALUES; k++) fprintf(table, " %s |", value_heads[k]);
    fprintf(table, " vs %s |\n|---|---|---|---|", baseline);
    for (int k = 0; k <= N_VALUES; k++) fprintf(table, "---|");
    fputc('\n', table);
    if (out) {
        fputs("experiment,policy,backend,runs,interrupted", out);
        for (int k = 0; k < N_VALUES; k++)
            fprintf(out, ",%s_mean,%s_sd", value_names[k], value_names[k]);
        fputs(",ratio_vs_baseline\n", out);
    }
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++) first = !same_group(&runs[j], &runs[i]);
        if (!first) continue;
        int interrupted = 0, count = 0;
        for (int j = 0; j < n; j++)
            interrupted |= same_group(&runs[j], &runs[i]) && runs[j].interrupted;
        double mean[N_VALUES], sd[N_VALUES];
        for (int k = 0; k < N_VALUES; k++)
            group_stats(runs, n, &runs[i], k, &mean[k], &sd[k], &count);
        count = 0; /* runs in the group (group_stats counted non-missing values) */
        for (int j = 0; j < n; j++) count += same_group(&runs[j], &runs[i]);
        run base = runs[i];
        snprintf(base.policy, sizeof base.policy, "%s", baseline);
        double bm, bsd;
        int bc;
        group_stats(runs, n, &base, 0, &bm, &bsd, &bc);
        double ratio = bc && bm > 0 ? mean[0] / bm : NAN;
        fprintf(table, "| %s%s | %s | %s | %d |", runs[i].name, interrupted ? " (interrupted)" : "",
                runs[i].policy, runs[i].backend, count);
        for (int k = 0; k < N_VALUES; k++) {
            if (mean[k] != mean[k])
                fprintf(table, " — |");
            else if (fabs(mean[k] * value_scale[k]) >= 1000) /* throughputs: whole numbers */
                fprintf(table, sd[k] == sd[k] ? " %.0f ± %.0f |" : " %.0f |",
                        mean[k] * value_scale[k], sd[k] * value_scale[k]);
            else
                fprintf(table, sd[k] == sd[k] ? " %.4g ± %.2g |" : " %.4g |",
                        mean[k] * value_scale[k], sd[k] * value_scale[k]);
        }
        if (ratio == ratio)
            fprintf(table, " %.3fx |\n", ratio);
        else
            fprintf(table, " — |\n");
        if (out) {
            fprintf(out, "%s,%s,%s,%d,%d", runs[i].name, runs[i].policy, runs[i].backend, count,
                    interrupted);
            for (int k = 0; k < N_VALUES; k++) fprintf(out, ",%.9g,%.9g", mean[k], sd[k]);
            fprintf(out, ",%.9g\n", ratio);
        }
    }
    free(runs);
    return 0;
}
