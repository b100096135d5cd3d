#include "report.h"
#include "report_run.h"
#include "pkv_route.h"
#include "summary.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

/* Their heads; seconds are shown in ms or us as the head says. */
static const char *const value_heads[N_VALUES] = {
    "tok/s (sim)", "tok/s (wall)", "tok/s (device)", "TTFT p50 ms",   "TTFT p99 ms",
    "TPOT p50 us", "TPOT p99 us",  "host us/step",   "goodput req/s", "SLO met %"};

/* From the figure's unit to its head's. */
static double value_scale(int k) {
    if (strchr(value_heads[k], '%')) return 100; /* a fraction */
    return !report_value_low(k) ? 1 : strstr(value_heads[k], "ms") ? 1e3 : 1e6;
}
static const char *const counter_heads[N_COUNTERS] = {
    "launches/step", "merge launches/step", "CTA work/SM", "useful KV MB/step", "merge MB/step"};
static const double counter_scale[N_COUNTERS] = {1, 1, 1, 1e-6, 1e-6};
static const char *const pool_heads[N_POOL_V] = {
    "routed", "finished", "busy %", "replica-s", "prefix hit %", "TTFT p50 ms", "TPOT p50 ms"};
static const double pool_scale[N_POOL_V] = {1, 1, 100, 1, 100, 1e3, 1e3};

/* Every leaf path of o under prefix, appended to paths (up to cap). */
static void leaves(const cJSON *o, const char *prefix, char (*paths)[256], int *n, int cap) {
    for (const cJSON *c = o->child; c && *n < cap; c = c->next) {
        char p[256];
        snprintf(p, sizeof p, "%s%s%s", prefix, *prefix ? "." : "", c->string);
        if (cJSON_IsObject(c))
            leaves(c, p, paths, n, cap);
        else
            snprintf(paths[(*n)++], sizeof paths[0], "%s", p);
    }
}

/* The sweeps' axes of the files read (their columns come first). */
static report_axes axes;

/* The configuration paths whose values differ between runs: the table's columns. */
static char cols[MAX_COLS][256];
static int n_cols;

static int by_string(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* How many distinct tuples the runs' values of cols[0..n_cols) and path make. */
static int distinct_with(const run *runs, int n, const char *path) {
    char **t = calloc((size_t)n, sizeof *t);
    int k = 0;
    for (int i = 0; t && i < n; i++) {
        size_t len = 1, used = 0;
        char *v[MAX_COLS + 1];
        for (int c = 0; c <= n_cols; c++) {
            v[c] = report_value_at(runs[i].conf, c < n_cols ? cols[c] : path);
            len += (v[c] ? strlen(v[c]) : 0) + 1;
        }
        t[i] = malloc(len);
        for (int c = 0; c <= n_cols; c++) {
            if (t[i]) used += (size_t)snprintf(t[i] + used, len - used, "%s\x1f", v[c] ? v[c] : "");
            free(v[c]);
        }
        if (!t[i]) break;
    }
    if (t && (n == 0 || t[n - 1])) {
        qsort(t, (size_t)n, sizeof *t, by_string);
        for (int i = 0; i < n; i++) k += i == 0 || strcmp(t[i], t[i - 1]);
    }
    for (int i = 0; t && i < n; i++) free(t[i]);
    free(t);
    return k;
}

/* Of the paths whose values differ between runs, a sweep's axes first, then the first
 * (in the configuration's order) that tell more runs apart than those taken before
 * them: a path that follows from others (an engine's scheduler, batch and cache defaults when
 * serving.engine is swept) takes no column from one that is swept beside them (fleet.replicas). */
static void find_columns(const run *runs, int n) {
    static char paths[512][256];
    n_cols = 0;
    int have = 1; /* distinct tuples of the columns taken */
    for (int a = 0; a < axes.n && n_cols < MAX_COLS; a++) { /* a sweep's axes first */
        const int d = distinct_with(runs, n, axes.path[a]);
        if (d > have) {
            snprintf(cols[n_cols++], sizeof cols[0], "%.255s", axes.path[a]);
            have = d;
        }
    }
    for (int i = 0; i < n && n_cols < MAX_COLS; i++) {
        int np = 0;
        leaves(runs[i].conf, "", paths, &np, 512);
        for (int p = 0; p < np && n_cols < MAX_COLS; p++) {
            int known = 0;
            for (int c = 0; c < n_cols && !known; c++) known = !strcmp(cols[c], paths[p]);
            if (known) continue;
            const int d = distinct_with(runs, n, paths[p]);
            if (d > have) {
                snprintf(cols[n_cols++], sizeof cols[0], "%.255s", paths[p]);
                have = d;
            }
        }
    }
}

/* Groups in order of their columns' values (numbers as numbers), then policy. */
static const run *sort_runs;
static int cmp_runs(const void *pa, const void *pb) {
    const run *a = &sort_runs[*(const int *)pa], *b = &sort_runs[*(const int *)pb];
    int c = strcmp(a->name, b->name);
    for (int k = 0; !c && k < n_cols; k++) {
        char *x = report_value_at(a->conf, cols[k]), *y = report_value_at(b->conf, cols[k]);
        char *ex, *ey;
        double dx = x ? strtod(x, &ex) : 0, dy = y ? strtod(y, &ey) : 0;
        if (x && y && *x && *y && !*ex && !*ey)
            c = (dx > dy) - (dx < dy);
        else
            c = strcmp(x ? x : "", y ? y : "");
        free(x), free(y);
    }
    return c ? c : strcmp(a->policy, b->policy);
}

static void group_head(FILE *table, const run *r, int interrupted, int count) {
    fprintf(table, "| %s%s |", r->name, interrupted ? " (interrupted)" : "");
    for (int c = 0; c < n_cols; c++) {
        char *v = report_value_shown(r->conf, cols[c]);
        fprintf(table, " %s |", v ? v : "—");
        free(v);
    }
    fprintf(table, " %s | %s | %d |", r->policy, r->backend, count);
}

/* The summary value a name selects (-1: none); latencies and host time are best low. */
static int value_index(const char *name) {
    for (int k = 0; k < N_VALUES; k++)
        if (!strcmp(report_value_names[k], name)) return k;
    return -1;
}

enum { BEST_CHEAPEST = -2 }; /* --best cheapest */

/* Whether column c sizes the fleet (its GPUs): --best cheapest searches over it. */
static bool size_column(int c) {
    return strstr(cols[c], "replicas") || strstr(cols[c], "pools") ||
           strstr(cols[c], "tensor_parallel");
}

/* A run's setting for --best: its policy and backend and, cheap, every column but the
 * fleet's size (one answer per load and setting), as one text (owned; NULL: out of
 * memory). */
static char *setting_of(const run *r, bool cheap) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString(r->policy));
    cJSON_AddItemToArray(a, cJSON_CreateString(r->backend));
    for (int c = 0; cheap && c < n_cols; c++) {
        if (size_column(c)) continue;
        char *v = report_value_at(r->conf, cols[c]);
        cJSON_AddItemToArray(a, v ? cJSON_CreateString(v) : cJSON_CreateNull());
        free(v);
    }
    char *text = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return text;
}

/* The best group of each policy and backend by value k (a sweep's best point): the
 * largest throughput, the smallest latency; by BEST_CHEAPEST, of the groups that meet
 * their SLOs, the one of fewest GPUs (then the highest attainment). */
static void best_table(FILE *table, const run *runs, const int *order, int n, int k,
                       double attain) {
    const int cheap = k == BEST_CHEAPEST, low = cheap || report_value_low(k);
    if (cheap)
        fprintf(table,
                "\nCheapest group meeting its SLOs (every request served, %.4g%% or more within "
                "them), for each setting but the fleet's size: the fewest GPUs\n\n| experiment |",
                100 * attain);
    else
        fprintf(table, "\nBest group of each policy and backend by %s (%s):\n\n| experiment |",
                report_value_names[k], low ? "lowest" : "highest");
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table, " policy | backend | runs |%s %s |\n|---|", cheap ? " GPUs |" : "",
            value_heads[cheap ? V_ATTAIN : k]);
    for (int c = 0; c < n_cols + 4 + cheap; c++) fprintf(table, "---|");
    fputc('\n', table);
    char **set = calloc((size_t)n + 1, sizeof *set); /* each run's setting, once */
    for (int i = 0; set && i < n; i++)
        if (!(set[i] = setting_of(&runs[i], cheap))) {
            for (int j = 0; j < i; j++) free(set[j]);
            free(set), set = NULL;
        }
    if (!set) {
        fputs("(out of memory)\n", table);
        return;
    }
    for (int oi = 0; oi < n; oi++) { /* each setting once, in table order */
        const run *a = &runs[order[oi]];
        int seen = 0;
        for (int oj = 0; oj < oi && !seen; oj++) seen = !strcmp(set[order[oj]], set[order[oi]]);
        if (seen) continue;
        int best = -1, best_count = 0;
        double best_m = NAN;
        for (int j = 0; j < n; j++) {
            const run *b = &runs[j];
            if (strcmp(set[j], set[order[oi]])) continue;
            if (cheap && report_group_meets(runs, n, b, attain) != 1) continue;
            double m, sd;
            int c;
            report_group_stats(runs, n, b, cheap ? V_ATTAIN : k, &m, &sd, &c);
            const bool better = cheap ? best < 0 || b->gpus < runs[best].gpus ||
                                            (b->gpus == runs[best].gpus && m > best_m)
                                      : !isnan(m) && (best < 0 || (low ? m < best_m : m > best_m));
            if (better) best = j, best_m = m, best_count = c;
        }
        if (best < 0 && !cheap) continue;
        if (best < 0) { /* the setting, its size columns blank: no answer */
            fprintf(table, "| %s |", a->name);
            for (int c = 0; c < n_cols; c++) {
                char *v = size_column(c) ? NULL : report_value_shown(a->conf, cols[c]);
                fprintf(table, " %s |", v ? v : "—");
                free(v);
            }
            fprintf(table, " %s | %s | — | none meets the SLOs | — |\n", a->policy, a->backend);
            continue;
        }
        group_head(table, &runs[best], 0, best_count);
        if (cheap) fprintf(table, " %d |", runs[best].gpus);
        fprintf(table, " %.4g |\n", best_m * value_scale(cheap ? V_ATTAIN : k));
    }
    for (int i = 0; i < n; i++) free(set[i]);
    free(set);
}

static void print_paired(FILE *table, double pm, double half, int np) {
    if (!isnan(half))
        fprintf(table, " %.3fx [%.3f, %.3f] (%d) |", pm, pm - half, pm + half, np);
    else if (!isnan(pm))
        fprintf(table, " %.3fx (%d) |", pm, np);
    else
        fprintf(table, " — |");
}

/* Whether the run at order[oi] is the first of its group in the table's order. */
static bool group_first(const run *runs, const int *order, int oi) {
    for (int oj = 0; oj < oi; oj++)
        if (report_same_group(&runs[order[oj]], &runs[order[oi]])) return false;
    return true;
}

/* The runs of r's group. */
static int group_size(const run *runs, int n, const run *r) {
    int count = 0;
    for (int j = 0; j < n; j++) count += report_same_group(&runs[j], r);
    return count;
}

/* A table's first columns: the experiment, the keys its runs vary, the policy, the
 * backend and the runs of the group. */
static void table_head(FILE *table) {
    fprintf(table, "| experiment |");
    for (int c = 0; c < n_cols; c++) fprintf(table, " %s |", cols[c]);
    fprintf(table, " policy | backend | runs |");
}

/* Wall and device throughput against the baseline (paired by seed), the largest and
 * the mean error of the checked steps, and the routes the steps ran: the study's
 * Table 2. */
static void routes_table(FILE *table, const run *runs, const int *order, int n,
                         const char *baseline) {
    fprintf(table,
            "\nWall and device decode throughput against %s (paired by seed, 95%% CI), the "
            "error of the checked steps, and the routes the steps ran:\n\n",
            baseline);
    table_head(table);
    fprintf(table,
            " tok/s (wall) | wall vs %s | tok/s (device) | "
            "device vs %s | max abs err | mean abs err | steps by route |\n|---|",
            baseline, baseline);
    for (int c = 0; c < n_cols + 10; c++) fprintf(table, "---|");
    fputc('\n', table);
    static const int ks[2] = {1, 2}; /* decode_tok_s_wall, decode_tok_s_device */
    for (int oi = 0; oi < n; oi++) {
        const int i = order[oi];
        if (!group_first(runs, order, oi)) continue;
        double err_max, err_mean, share[PKV_ROUTE_COUNT];
        const int count = report_group_checks(runs, n, &runs[i], &err_max, &err_mean, share);
        group_head(table, &runs[i], 0, count);
        run base = runs[i];
        snprintf(base.policy, sizeof base.policy, "%s", baseline);
        for (int q = 0; q < 2; q++) {
            double m, sd, pm, half;
            int c, np;
            report_group_stats(runs, n, &runs[i], ks[q], &m, &sd, &c);
            fprintf(table, isnan(m) ? " — |" : !isnan(sd) ? " %.0f ± %.0f |" : " %.0f |", m, sd);
            report_paired_ratio(runs, n, &runs[i], &base, ks[q], &pm, &half, &np);
            print_paired(table, pm, half, np);
        }
        fprintf(table, !isnan(err_max) ? " %.2e |" : " — |", err_max);
        fprintf(table, !isnan(err_mean) ? " %.2e |" : " — |", err_mean);
        int any = 0;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (share[r] > 0)
                fprintf(table, "%s%s %.1f%%", any++ ? ", " : " ", pkv_route_names[r],
                        100 * share[r]);
        fputs(any ? " |\n" : " — |\n", table);
    }
}

/* The structural counters per group: the study's Table 4. */
static void counters_table(FILE *table, const run *runs, const int *order, int n) {
    fprintf(table, "\nStructural counters per step, after warm-up (mean +/- sd over runs):\n\n");
    table_head(table);
    for (int k = 0; k < N_COUNTERS; k++) fprintf(table, " %s |", counter_heads[k]);
    fputs("\n|---|", table);
    for (int c = 0; c < n_cols + 3 + N_COUNTERS; c++) fprintf(table, "---|");
    fputc('\n', table);
    for (int oi = 0; oi < n; oi++) {
        const int i = order[oi];
        if (!group_first(runs, order, oi)) continue;
        group_head(table, &runs[i], 0, group_size(runs, n, &runs[i]));
        for (int k = 0; k < N_COUNTERS; k++) {
            double m, sd;
            int c;
            report_group_stats(runs, n, &runs[i], N_VALUES + k, &m, &sd, &c);
            if (isnan(m))
                fprintf(table, " — |");
            else
                fprintf(table, !isnan(sd) ? " %.4g ± %.2g |" : " %.4g |", m * counter_scale[k],
                        sd * counter_scale[k]);
        }
        fputc('\n', table);
    }
}

/* A fleet's figures per pool (mean over the group's runs), when any run is a fleet. */
static void pools_table(FILE *table, const run *runs, const int *order, int n) {
    int any = 0;
    for (int i = 0; i < n && !any; i++) any = runs[i].pools != NULL;
    if (!any) return;
    fprintf(table, "\nPer pool of each fleet (mean over runs; TTFT where prefilled, TPOT where "
                   "decoded):\n\n");
    table_head(table);
    fprintf(table, " pool | role | replicas |");
    for (int k = 0; k < N_POOL_V; k++) fprintf(table, " %s |", pool_heads[k]);
    fputs("\n|---|", table);
    for (int c = 0; c < n_cols + 6 + N_POOL_V; c++) fprintf(table, "---|");
    fputc('\n', table);
    for (int oi = 0; oi < n; oi++) {
        const run *g = &runs[order[oi]];
        if (!g->pools || !group_first(runs, order, oi)) continue;
        const int count = group_size(runs, n, g);
        for (int p = 0; p < g->n_pools; p++) {
            const pool_fig *q = &g->pools[p];
            group_head(table, g, 0, count);
            fprintf(table, " %s | %s | %d |", q->name, report_role_names[q->role % 3], q->replicas);
            for (int k = 0; k < N_POOL_V; k++) {
                const double v = report_pool_mean(runs, n, g, p, k) * pool_scale[k];
                fprintf(table, v != v ? " — |" : fabs(v) >= 100 ? " %.0f |" : " %.3g |", v);
            }
            fputc('\n', table);
        }
    }
}

int pkv_report_write(const char *const *paths, int n, const char *baseline, unsigned tables,
                     const char *best, double attain, FILE *table, FILE *csv, FILE *json,
                     pkv_err *e) {
    const int best_k = !best ? -1 : !strcmp(best, "cheapest") ? BEST_CHEAPEST : value_index(best);
    if (best && best_k == -1) {
        char names[512] = "";
        for (int k = 0; k < N_VALUES; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ",
                     report_value_names[k]);
        return pkv_fail(e, "--best %s: not a reported figure (%scheapest)", best, names);
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    run *runs = calloc(MAX_RUNS, sizeof *runs);
    int *order = calloc(MAX_RUNS, sizeof *order);
    if (!runs || !order) {
        free(runs), free(order);
        return pkv_fail(e, "out of memory");
    }
    int nr = 0, rc = 0;
    axes.n = 0;
    for (int i = 0; i < n && !rc; i++) rc = report_load_file(paths[i], runs, &nr, &axes, e);
    if (rc) goto done;
    n = nr;
    find_columns(runs, n);
    for (int i = 0; i < n; i++) order[i] = i;
    sort_runs = runs;
    qsort(order, (size_t)n, sizeof *order, cmp_runs);
    FILE *out = csv;
    cJSON *doc = json ? cJSON_CreateObject() : NULL, *groups = NULL;
    if (doc) {
        cJSON_AddStringToObject(doc, "baseline", baseline);
        groups = cJSON_AddArrayToObject(doc, "groups");
    }
    /* The table leaves out a figure no run has (measured times on the model backend);
     * the CSV and JSON keep every column. */
    bool shown[N_VALUES];
    int n_shown = 0;
    for (int k = 0; k < N_VALUES; k++) {
        shown[k] = false;
        for (int j = 0; j < n && !shown[k]; j++) shown[k] = !isnan(runs[j].v[k]);
        n_shown += shown[k];
    }
    table_head(table);
    for (int k = 0; k < N_VALUES; k++)
        if (shown[k]) fprintf(table, " %s |", value_heads[k]);
    if (shown[V_ATTAIN]) fprintf(table, " meets SLOs (%.4g%%) |", 100 * attain);
    fprintf(table,
            " vs %s | paired by seed, 95%% CI | TPOT p50 vs %s | TTFT p99 vs %s | model's "
            "per-step error |\n|---|---|---|---|",
            baseline, baseline, baseline);
    for (int c = 0; c < n_cols; c++) fprintf(table, "---|");
    for (int k = 0; k <= n_shown + 4 + shown[V_ATTAIN]; k++) fprintf(table, "---|");
    fputc('\n', table);
    if (out) report_csv_head(out, cols, n_cols);
    for (int oi = 0; oi < n; oi++) {
        const int i = order[oi];
        if (!group_first(runs, order, oi)) continue;
        report_fig fig = {0}; /* the group's figures, as the table, CSV and JSON give them */
        for (int j = 0; j < n; j++)
            fig.interrupted |= report_same_group(&runs[j], &runs[i]) && runs[j].interrupted;
        for (int k = 0; k < N_VALUES; k++)
            report_group_stats(runs, n, &runs[i], k, &fig.mean[k], &fig.sd[k], &fig.count);
        /* runs in the group (report_group_stats counted non-missing values) */
        fig.count = group_size(runs, n, &runs[i]);
        run base = runs[i];
        snprintf(base.policy, sizeof base.policy, "%s", baseline);
        double bm, bsd;
        int bc;
        report_group_stats(runs, n, &base, 0, &bm, &bsd, &bc);
        fig.ratio = bc && bm > 0 ? fig.mean[0] / bm : NAN;
        report_paired_ratio(runs, n, &runs[i], &base, 0, &fig.pm, &fig.half, &fig.np);
        for (int q = 0; q < 2; q++) {
            const int k = q ? V_TTFT_P99 : V_TPOT_P50;
            double tm, tsd;
            int tc;
            report_group_stats(runs, n, &base, k, &tm, &tsd, &tc);
            fig.lat_ratio[q] = tc && tm > 0 ? fig.mean[k] / tm : NAN;
        }
        group_head(table, &runs[i], fig.interrupted, fig.count);
        for (int k = 0; k < N_VALUES; k++) {
            if (!shown[k])
                continue;
            else if (fig.mean[k] != fig.mean[k])
                fprintf(table, " — |");
            else if (fabs(fig.mean[k] * value_scale(k)) >= 1000) /* throughputs: whole numbers */
                fprintf(table, fig.sd[k] == fig.sd[k] ? " %.0f ± %.0f |" : " %.0f |",
                        fig.mean[k] * value_scale(k), fig.sd[k] * value_scale(k));
            else
                fprintf(table, fig.sd[k] == fig.sd[k] ? " %.4g ± %.2g |" : " %.4g |",
                        fig.mean[k] * value_scale(k), fig.sd[k] * value_scale(k));
        }
        fig.meets = report_group_meets(runs, n, &runs[i], attain);
        if (shown[V_ATTAIN])
            fputs(fig.meets == 1    ? " yes |"
                  : fig.meets == 0  ? " no |"
                  : fig.meets == -2 ? " no: unserved |"
                                    : " — |",
                  table);
        if (!isnan(fig.ratio))
            fprintf(table, " %.3fx |", fig.ratio);
        else
            fprintf(table, " — |");
        print_paired(table, fig.pm, fig.half, fig.np);
        for (int q = 0; q < 2; q++)
            fprintf(table, fig.lat_ratio[q] == fig.lat_ratio[q] ? " %.3fx |" : " — |",
                    fig.lat_ratio[q]);
        /* A predicted ratio means nothing inside the two groups' model errors. */
        fig.me = report_group_model_error(runs, n, &runs[i]);
        const double both = fig.me + report_group_model_error(runs, n, &base);
        fig.inside = !isnan(both) && !isnan(fig.ratio) && fabs(fig.ratio - 1) < both &&
                     strcmp(runs[i].policy, baseline) != 0; /* not the baseline itself */
        if (isnan(fig.me))
            fputs(" — |", table);
        else
            fprintf(table, " ±%.1f%%%s |", 100 * fig.me,
                    fig.inside ? " (the ratio is inside the two groups' errors)" : "");
        fputc('\n', table);
        if (out) report_csv_row(out, &runs[i], &fig, cols, n_cols);
        if (groups) report_group_json(groups, runs, n, &runs[i], &base, &fig, cols, n_cols);
    }
    if (doc) {
        char *text = cJSON_Print(doc);
        if (!text || fputs(text, json) < 0 || fputc('\n', json) < 0)
            rc = pkv_fail(e, "cannot write the JSON report");
        free(text);
        cJSON_Delete(doc);
    }
    pools_table(table, runs, order, n);
    if (tables & PKV_REPORT_ROUTES) routes_table(table, runs, order, n, baseline);
    if (tables & PKV_REPORT_COUNTERS) counters_table(table, runs, order, n);
    if (best_k != -1) best_table(table, runs, order, n, best_k, attain);
done:
    for (int i = 0; i < nr; i++) {
        free(runs[i].key);
        free(runs[i].pools);
        cJSON_Delete(runs[i].conf);
    }
    free(runs), free(order);
    return rc;
}
