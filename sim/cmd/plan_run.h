/* pkvsim plan's state (sim/cmd/cmd_plan.c: the search and its answers) and the file of
 * its runs (sim/cmd/plan_out.c: -o, each run kept by its sweep point key, read back on a
 * rerun, assembled as a sweep's file). Internal to plan. */
#ifndef PKV_PLAN_RUN_H
#define PKV_PLAN_RUN_H

#include <signal.h>
#include <stdbool.h>

#include "cli.h"
#include "plan_spec.h"
#include "sweep.h"

/* One run searched: a load, a candidate, a replica count. */
typedef struct eval_t {
    int load, cand, replicas;
    bool pass, ran;
    char why[160]; /* the first SLO missed, or the error */
    double fig[PKV_PLAN_MAX_SLO];
    double cost; /* USD per hour */
    int gpus;
    char key[PKV_SWEEP_KEY_LEN]; /* --output: its run's key */
    long old;                    /* --output: its point in the earlier file; -1: none */
    bool kept;                   /* --output: its run's file is in the points folder */
} eval_t;

typedef struct planner {
    pkv_plan_spec p;
    cJSON *base; /* the experiment without its plan section */
    const char *path;
    pkv_cli_overrides ov;
    volatile sig_atomic_t *stop;
    eval_t *evals;
    int n_evals;
    int quiet;
    /* --output: the file of the runs searched, its folder of point files, and the points
     * of an earlier one (their keys: those reused) */
    const char *out;
    char dir[1100];
    char *old_exp, **old_status, **old_keys;
    size_t old_n;
    int reused, lock;
    int job, jobs; /* --jobs: this process's share of the candidates, of jobs */
} planner;

/* ev's verdict from its figures and served, the values of pkv_plan_served_names for its
 * run: unfinished (a request past the model's context is refused whatever the fleet: not
 * a miss), an SLO missed, or met. */
enum { PKV_PLAN_N_SERVED = 5 };
extern const char *const pkv_plan_served_names[PKV_PLAN_N_SERVED];
void pkv_plan_judge(const pkv_plan_spec *p, eval_t *ev, const double *served);

/* -o: its points folder and what an earlier file of the plan holds; the lock taken. */
int pkv_plan_open_output(planner *pl, pkv_err *e);
/* -o: ev's point file, named by its key. */
void pkv_plan_point_file(const planner *pl, const eval_t *ev, char *buf, size_t n);
/* -o: ev's figures and verdict from a finished run of its key (its point file, else the
 * earlier file's point); false when there is none. */
bool pkv_plan_reuse(planner *pl, eval_t *ev, const char *file);
/* -o: every run searched into one file, as a sweep's (/points/NNNNN, /sweep/index with the
 * load, the candidate's axes and the replicas as its columns), from the point files and
 * the earlier file's points; then the point files go. */
int pkv_plan_assemble(planner *pl, pkv_err *e);
/* -o: the lock released, the earlier file's points freed (nothing held without -o). */
void pkv_plan_close_output(planner *pl);

#endif
