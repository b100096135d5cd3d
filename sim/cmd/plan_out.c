/* pkvsim plan -o: each run kept as it finishes, named by its sweep point key; a rerun
 * reads the finished ones back; every run searched assembled into one sweep-like file
 * (plan_run.h). */
#include "plan_run.h"
#include "h5sweep.h"
#include "jsonv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the plan reads of a run beyond its SLO figures: whether it served its workload. */
const char *const pkv_plan_served_names[PKV_PLAN_N_SERVED] = {"bounded", "offered", "arrived",
                                                              "finished", "refused"};

void pkv_plan_judge(const pkv_plan_spec *p, eval_t *ev, const double *sv) {
    const double offered = sv[1], arrived = sv[2], done = sv[3] + (isnan(sv[4]) ? 0 : sv[4]);
    ev->ran = true;
    if (sv[0] == 1 || (offered > 0 && arrived < offered) || !(done >= arrived)) {
        const double all = offered > 0 ? offered : arrived;
        snprintf(ev->why, sizeof ev->why, "%.0f of %.0f requests unfinished%s", all - done, all,
                 sv[0] == 1 ? " (a bound ended the run)" : "");
        return;
    }
    for (int s = 0; s < p->n_slo; s++) {
        const pkv_plan_slo *o = &p->slo[s];
        const double v = ev->fig[s];
        if (isnan(v) || (o->is_max ? v > o->limit : v < o->limit)) {
            snprintf(ev->why, sizeof ev->why, "%s: %.4g%s", o->label, o->is_max ? v * 1e3 : v,
                     o->is_max ? " ms" : "");
            return;
        }
    }
    ev->pass = true;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

void pkv_plan_point_file(const planner *pl, const eval_t *ev, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s.h5", pl->dir, ev->key + 3); /* the key less its "v1:" */
}

bool pkv_plan_reuse(planner *pl, eval_t *ev, const char *file) {
    const char *names[PKV_PLAN_N_SERVED + PKV_PLAN_MAX_SLO];
    double v[PKV_PLAN_N_SERVED + PKV_PLAN_MAX_SLO];
    const pkv_plan_spec *p = &pl->p;
    for (int i = 0; i < PKV_PLAN_N_SERVED; i++) names[i] = pkv_plan_served_names[i];
    for (int s = 0; s < p->n_slo; s++) names[PKV_PLAN_N_SERVED + s] = p->slo[s].f->name;
    char *k = NULL, group[32] = "/";
    const char *src = NULL;
    if (file_exists(file) && pkv_h5sweep_point_key(file, &k) == 1 && !strcmp(k, ev->key))
        src = file, ev->kept = true;
    for (size_t i = 0; !src && i < pl->old_n; i++)
        if (pl->old_keys[i] && !strcmp(pl->old_keys[i], ev->key) &&
            !strcmp(pl->old_status[i], "done")) {
            src = pl->out, ev->old = (long)i;
            snprintf(group, sizeof group, "/points/%05zu", i);
        }
    free(k);
    if (!src || pkv_h5sweep_figures(src, group, PKV_PLAN_N_SERVED + p->n_slo, names, v)) {
        ev->kept = false, ev->old = -1;
        return false;
    }
    for (int s = 0; s < p->n_slo; s++) ev->fig[s] = v[PKV_PLAN_N_SERVED + s];
    pkv_plan_judge(p, ev, v);
    pl->reused++;
    return true;
}

int pkv_plan_assemble(planner *pl, pkv_err *e) {
    const pkv_plan_spec *p = &pl->p;
    const size_t n = (size_t)pl->n_evals;
    const int n_axes = 2 + p->n_cand;
    const char *paths[2 + PKV_PLAN_MAX_AXES];
    paths[0] = p->load.path;
    for (int a = 0; a < p->n_cand; a++) paths[1 + a] = p->cand[a].path;
    paths[1 + p->n_cand] = p->rep_path;
    pkv_h5sweep_point *pts = calloc(n + 1, sizeof *pts);
    char **vals = calloc(n * (size_t)n_axes + 1, sizeof *vals);
    char(*files)[1200] = calloc(n + 1, sizeof *files);
    char(*grp)[32] = calloc(n + 1, sizeof *grp);
    char *text = pkv_read_file(pl->path, NULL, e);
    int rc = !pts || !vals || !files || !grp ? pkv_fail(e, "out of memory") : text ? 0 : -1;
    for (size_t i = 0; i < n && !rc; i++) {
        const eval_t *ev = &pl->evals[i];
        char **v = vals + i * (size_t)n_axes;
        v[0] = pkv_json_value_text(cJSON_GetArrayItem(p->load.values, ev->load));
        for (int a = 0; a < p->n_cand; a++)
            v[1 + a] = pkv_json_value_text(pkv_plan_cand_value(p, (size_t)ev->cand, a));
        char r[16];
        snprintf(r, sizeof r, "%d", ev->replicas);
        v[1 + p->n_cand] = strdup(r);
        for (int a = 0; a < n_axes; a++)
            if (!v[a]) rc = pkv_fail(e, "out of memory");
        pts[i] =
            (pkv_h5sweep_point){NULL, "/", ev->ran ? "done" : "failed", ev->ran ? "" : ev->why};
        if (ev->kept) {
            pkv_plan_point_file(pl, ev, files[i], sizeof files[i]);
            pts[i].src_file = files[i];
        } else if (ev->old >= 0) {
            snprintf(grp[i], sizeof grp[i], "/points/%05ld", ev->old);
            pts[i].src_file = pl->out, pts[i].src_group = grp[i];
        }
    }
    if (!rc && n)
        rc = pkv_h5sweep_write(pl->out, text, "plan", n_axes, paths, n, pts,
                               (const char *const *)vals, e);
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            if (pl->evals[i].kept) unlink(files[i]);
        char lock[1200];
        snprintf(lock, sizeof lock, "%s/.lock", pl->dir);
        unlink(lock);
        rmdir(pl->dir); /* left where files other than the plan's are in it */
    }
    for (size_t i = 0; vals && i < n * (size_t)n_axes; i++) free(vals[i]);
    free(pts), free(vals), free(files), free(grp), free(text);
    return rc;
}

int pkv_plan_open_output(planner *pl, pkv_err *e) {
    snprintf(pl->dir, sizeof pl->dir, "%s.points", pl->out);
    if (file_exists(pl->out) &&
        pkv_h5sweep_read(pl->out, &pl->old_exp, &pl->old_n, &pl->old_status, &pl->old_keys, e))
        return pkv_fail(e,
                        "%s: not the file of a plan or a sweep (%s); it is left as it is: remove "
                        "it or choose another --output",
                        pl->out, e->msg);
    if (mkdir(pl->dir, 0777) != 0 && errno != EEXIST)
        return pkv_fail(e, "%s: cannot create the folder of point files: %s", pl->dir,
                        strerror(errno));
    return pkv_sweep_lock(pl->dir, pl->out, &pl->lock, e);
}

void pkv_plan_close_output(planner *pl) {
    if (pl->lock >= 0) close(pl->lock);
    pl->lock = -1;
    pkv_h5sweep_free_read(pl->old_exp, pl->old_n, pl->old_status, pl->old_keys);
    pl->old_exp = NULL, pl->old_status = pl->old_keys = NULL, pl->old_n = 0;
}
