/* A report's groups (the runs of one configuration, policy and backend): their
 * statistics, paired ratios, checks and pools' figures. */
#include "report_run.h"

#include <math.h>
#include <string.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

int report_same_group(const run *a, const run *b) {
    return !strcmp(a->key, b->key) && !strcmp(a->policy, b->policy) &&
           !strcmp(a->backend, b->backend);
}

/* mean and sample sd of value k over the runs of a's group; NaN values are skipped. */
void report_group_stats(const run *runs, int n, const run *a, int k, double *mean, double *sd,
                        int *count) {
    static double x[MAX_RUNS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (report_same_group(&runs[i], a) && runs[i].v[k] == runs[i].v[k]) x[m++] = runs[i].v[k];
    *count = m;
    *mean = m ? gsl_stats_mean(x, 1, (size_t)m) : NAN;
    *sd = m > 1 ? gsl_stats_sd_m(x, 1, (size_t)m, *mean) : NAN;
}

/* A group's first row, its configuration columns, policy, backend and run count. */
/* The mean model error of a group's runs (NaN: measured, or unknown). */
double report_group_model_error(const run *runs, int n, const run *g) {
    double sum = 0;
    int c = 0;
    for (int j = 0; j < n; j++)
        if (report_same_group(&runs[j], g)) sum += runs[j].model_err, c++;
    return c ? sum / c : NAN;
}

/* Whether g's group meets its SLOs: 1 when every run served every request it offered and
 * the group's mean SLO attainment is at least attain; 0 when the attainment is short, -2
 * when a run left requests unserved; -1 when no SLO is set. */
int report_group_meets(const run *runs, int n, const run *g, double attain) {
    double m, sd;
    int c;
    report_group_stats(runs, n, g, V_ATTAIN, &m, &sd, &c);
    if (isnan(m)) return -1;
    for (int j = 0; j < n; j++)
        if (report_same_group(&runs[j], g) && !runs[j].served) return -2;
    return m >= attain;
}

/* Paired by seed: value k of each run of g's group over the baseline group's run of
 * its seed; *pm the mean of those ratios, *half the half-width of its 95% Student t
 * interval (NaN under two pairs), *np the pairs. */
void report_paired_ratio(const run *runs, int n, const run *g, const run *base, int k, double *pm,
                         double *half, int *np) {
    static double pr[MAX_RUNS];
    *np = 0;
    for (int j = 0; j < n; j++) {
        if (!report_same_group(&runs[j], g)) continue;
        for (int b = 0; b < n; b++)
            if (report_same_group(&runs[b], base) && runs[b].has_seed && runs[j].has_seed &&
                runs[b].seed == runs[j].seed && runs[b].v[k] > 0 && runs[j].v[k] == runs[j].v[k]) {
                pr[(*np)++] = runs[j].v[k] / runs[b].v[k];
                break;
            }
    }
    *pm = *np ? gsl_stats_mean(pr, 1, (size_t)*np) : NAN;
    *half = *np > 1 ? gsl_cdf_tdist_Pinv(0.975, *np - 1) * gsl_stats_sd_m(pr, 1, (size_t)*np, *pm) /
                          sqrt((double)*np)
                    : NAN;
}

/* The runs of g's group: their largest error, the mean of their mean errors (NaN
 * where no step was checked), each route's share of their steps; returns the runs. */
int report_group_checks(const run *runs, int n, const run *g, double *err_max, double *err_mean,
                        double share[PKV_ROUTE_COUNT]) {
    double err_sum = 0, all = 0;
    int err_n = 0, count = 0;
    *err_max = NAN;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) share[r] = 0;
    for (int j = 0; j < n; j++) {
        if (!report_same_group(&runs[j], g)) continue;
        count++;
        if (!(runs[j].err_max <= *err_max)) *err_max = runs[j].err_max;
        if (runs[j].err_mean == runs[j].err_mean) err_sum += runs[j].err_mean, err_n++;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (runs[j].route_steps[r] > 0) share[r] += runs[j].route_steps[r];
    }
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) all += share[r];
    for (int r = 0; r < PKV_ROUTE_COUNT && all > 0; r++) share[r] /= all;
    *err_mean = err_n ? err_sum / err_n : NAN;
    return count;
}

/* Pool p's figure k, mean over the runs of g's group that have it (NaN: none). */
double report_pool_mean(const run *runs, int n, const run *g, int p, int k) {
    double sum = 0;
    int m = 0;
    for (int j = 0; j < n; j++)
        if (report_same_group(&runs[j], g) && p < runs[j].n_pools &&
            runs[j].pools[p].v[k] == runs[j].pools[p].v[k])
            sum += runs[j].pools[p].v[k], m++;
    return m ? sum / m : NAN;
}
