/* The oracle (route.policy "oracle"): every candidate route of a step run on the
 * backend and timed, the fastest under the run's clock taken. */
#include "engine_parts.h"

#include "pkv_clock.h"

#include <math.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

/* The oracle on a measuring backend: every candidate's whole step (the backend's
 * staging, the upload, the launches and the kernels) run in isolation oracle_reps
 * times; /routes_measured gets each one's median device time, and the candidate
 * fastest under the run's clock (its median wall time on the wall clock, else its
 * median device time) is the step's route. *spent receives the wall time of all the
 * runs, *best_wall the chosen one's median wall time. */
int pkv_engine_run_oracle(pkv_engine *eng, const pkv_batch_view *v, const pkv_step_view *sv,
                          int check, pkv_step_rec *rec, pkv_route *best, double *spent,
                          double *best_wall, pkv_err *e) {
    enum { MAX_REPS = PKV_ORACLE_MAX_REPS };
    double dev[MAX_REPS], wall[MAX_REPS], meta[MAX_REPS], wall_med[PKV_ROUTE_COUNT];
    double noise[PKV_ROUTE_COUNT], meta_med[PKV_ROUTE_COUNT];
    double score[PKV_ROUTE_COUNT]; /* the median under the run's clock */
    const int reps = eng->opts.oracle_reps < 1 ? 1 : eng->opts.oracle_reps;
    double max_err = NAN, mean_err = NAN;
    int b = -1;
    *spent = 0;
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        if (!(sv->valid >> k & 1)) continue;
        for (int i = 0; i < reps; i++) {
            double t0 = pkv_clock_now();
            rec->t_meta = NAN;
            if (eng->backend->prepare(eng->backend, v, e) ||
                eng->backend->run(eng->backend, v, &eng->planner.plans[k], check && i == 0, rec, e))
                return -1;
            wall[i] = pkv_clock_now() - t0;
            dev[i] = rec->t_device;
            meta[i] = rec->t_meta; /* sampled on this step's every run, or on none */
            *spent += wall[i];
            if (check && i == 0 && !(rec->max_err <= max_err)) /* the worst candidate's */
                max_err = rec->max_err, mean_err = rec->mean_err;
        }
        gsl_sort(dev, 1, (size_t)reps);
        gsl_sort(wall, 1, (size_t)reps);
        gsl_sort(meta, 1, (size_t)reps);
        meta_med[k] = gsl_stats_median_from_sorted_data(meta, 1, (size_t)reps);
        double med = gsl_stats_median_from_sorted_data(dev, 1, (size_t)reps);
        rec->t_route_measured[k] = med;
        wall_med[k] = gsl_stats_median_from_sorted_data(wall, 1, (size_t)reps);
        noise[k] = (gsl_stats_quantile_from_sorted_data(dev, 1, (size_t)reps, 0.75) -
                    gsl_stats_quantile_from_sorted_data(dev, 1, (size_t)reps, 0.25)) /
                   (2 * med);
        score[k] = eng->opts.clock == PKV_CLOCK_WALL ? wall_med[k] : med;
        if (b < 0 || score[k] < score[b]) b = k;
    }
    if (b < 0)
        return pkv_fail(e, "step %llu: the oracle has no candidate",
                        (unsigned long long)rec->index);
    *best = (pkv_route)b;
    *best_wall = wall_med[b];
    rec->t_device = rec->t_route_measured[b];
    rec->t_meta = meta_med[b]; /* the chosen route's, not the last run's */
    rec->t_noise = noise[b];
    rec->max_err = max_err, rec->mean_err = mean_err;
    return 0;
}
