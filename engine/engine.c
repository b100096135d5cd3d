#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

int pkv_engine_init(pkv_engine *eng, const pkvk_shape *s, const pkv_calib *cal, const char *policy,
                    pkv_bucket_mode mode, int32_t cap_rows, pkv_backend *backend,
                    pkv_clock_source clock, pkv_err *e) {
    *eng = (pkv_engine){.shape = *s,
                        .cal = cal,
                        .backend = backend,
                        .clock = clock,
                        .check_every = 0,
                        .tol_max = 2e-3,
                        .tol_mean = 3e-4};
    if (pkv_policy_init(&eng->policy, policy)) {
        if (backend) backend->destroy(backend);
        eng->backend = NULL;
        return pkv_fail(e, "unknown route policy \"%s\"", policy);
    }
    if (pkv_planner_init(&eng->planner, s, cal, cap_rows, mode)) {
        if (backend) backend->destroy(backend);
        eng->backend = NULL;
        return pkv_fail(e, "out of memory for the planner (%d rows)", cap_rows);
    }
    return 0;
}

void pkv_engine_free(pkv_engine *eng) {
    pkv_planner_free(&eng->planner);
    if (eng->backend) eng->backend->destroy(eng->backend);
    eng->backend = NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int pkv_engine_step(pkv_engine *eng, const pkv_batch_view *v, pkv_step_rec *rec, double *advance,
                    pkv_err *e) {
    double t0 = eng->backend->measures ? now_s() : 0;
    pkv_step_view sv = {.rows = v->n_rows, .gqa_group = eng->shape.hq / eng->shape.hkv};
    for (int32_t i = 0; i < v->n_rows; i++) sv.context_tokens += v->seq_lens[i];
    /* The oracle on a measuring backend runs every candidate and keeps the fastest. */
    const int measured_oracle = eng->policy.measured_oracle && eng->backend->measures;
    /* A backend that launches nothing, or a policy that launches one of several
     * candidates, plans them by their counts only (no task lists); the chosen one is
     * then laid out in full. */
    const int lazy = eng->backend->measures && !measured_oracle &&
                     (eng->policy.candidates & (eng->policy.candidates - 1)) != 0;
    for (int r = 0; r < PKVK_ROUTE_COUNT; r++) {
        rec->t_route[r] = NAN;
        if (!(eng->policy.candidates >> r & 1)) continue;
        eng->planner.plans[r].counts_only = lazy || !eng->backend->measures;
        int rc = pkv_planner_build(&eng->planner, (pkvk_route)r, v->seq_lens, v->n_rows);
        if (rc)
            return pkv_fail(e, "step %llu: planning %s failed (status %d)",
                            (unsigned long long)rec->index, pkvk_route_name((pkvk_route)r), rc);
        pkv_cost_counters(eng->cal, &eng->shape, &eng->planner.plans[r], v->seq_lens, &sv.cand[r]);
        sv.valid |= 1u << r;
        rec->t_route[r] = sv.cand[r].t_predicted;
    }
    for (int k = 0; k < PKVK_ROUTE_COUNT; k++) rec->t_route_measured[k] = NAN;
    /* Only a backend that computes outputs (cpu, cuda) can be checked. */
    int check =
        eng->backend->measures && eng->check_every > 0 &&
        ((int64_t)rec->index < eng->check_first || (int64_t)rec->index % eng->check_every == 0);
    rec->t_meta = NAN;
    if (eng->backend->prepare(eng->backend, v, e)) return -1;
    rec->t_device = rec->max_err = rec->mean_err = rec->out_mean_abs = NAN;
    pkvk_route r;
    if (measured_oracle) {
        r = PKVK_ROUTE_REF_PAGED;
        for (int k = 0; k < PKVK_ROUTE_COUNT; k++) {
            if (!(sv.valid >> k & 1)) continue;
            if (eng->backend->run(eng->backend, v, &eng->planner.plans[k], check, rec, e))
                return -1;
            rec->t_route_measured[k] = rec->t_device;
            if (rec->t_device < rec->t_route_measured[r]) r = (pkvk_route)k;
        }
    } else {
        r = eng->policy.choose(&eng->policy, eng->cal, &sv);
        /* Only the workqueue routes write task lists. */
        if (lazy && (r == PKVK_ROUTE_WORKQUEUE || r == PKVK_ROUTE_FUSED)) {
            eng->planner.plans[r].counts_only = 0;
            int rc = pkv_planner_build(&eng->planner, r, v->seq_lens, v->n_rows);
            if (rc)
                return pkv_fail(e, "step %llu: planning %s failed (status %d)",
                                (unsigned long long)rec->index, pkvk_route_name(r), rc);
        }
    }
    const pkv_counters *c = &sv.cand[r];
    rec->rows = (uint32_t)v->n_rows;
    rec->context_tokens = (uint64_t)sv.context_tokens;
    rec->route = (uint8_t)r;
    rec->splits = (uint32_t)c->max_splits;
    rec->launches = (uint32_t)c->launches;
    rec->merge_launches = (uint32_t)c->merge_launches;
    rec->tasks = (uint32_t)c->tasks;
    rec->ctas = (uint64_t)c->ctas;
    rec->cta_work_per_sm = c->cta_work_per_sm;
    rec->kv_bytes = (uint64_t)c->kv_bytes;
    rec->merge_bytes = (uint64_t)c->merge_bytes;
    rec->t_predicted = c->t_predicted;
    if (measured_oracle) {
        rec->t_device = rec->t_route_measured[r];
    } else {
        if (eng->backend->run(eng->backend, v, &eng->planner.plans[r], check, rec, e)) return -1;
    }
    rec->t_mlp = NAN;
    if (eng->backend->finish && eng->backend->finish(eng->backend, v, rec, e)) return -1;
    /* The MLP tail reads its weights once per step: memory bound at decode sizes. */
    if (eng->mlp_bytes > 0)
        rec->t_predicted += eng->mlp_bytes / eng->cal->beta + 3 * eng->cal->lambda;
    rec->t_wall = eng->backend->measures ? now_s() - t0 : NAN;
    if (measured_oracle)
        /* The oracle's step is the one its best route would have made: leave out the
         * device time of the candidates it ran only to compare. */
        for (int k = 0; k < PKVK_ROUTE_COUNT; k++)
            if (k != (int)r && rec->t_route_measured[k] == rec->t_route_measured[k])
                rec->t_wall -= rec->t_route_measured[k];
    /* Written as "not below" so that a NaN (an output never written) fails too. */
    if (check && !(rec->max_err < eng->tol_max && rec->mean_err < eng->tol_mean))
        return pkv_fail(e,
                        "step %llu: route %s disagrees with the reference: max|e| %.3g (limit "
                        "%.3g), mean|e| %.3g (limit %.3g)",
                        (unsigned long long)rec->index, pkvk_route_name(r), rec->max_err,
                        eng->tol_max, rec->mean_err, eng->tol_mean);
    *advance = eng->clock == PKV_CLOCK_WALL ? rec->t_wall
               : eng->clock == PKV_CLOCK_DEVICE
                   ? rec->t_device + (rec->t_mlp == rec->t_mlp ? rec->t_mlp : 0)
                   : rec->t_predicted;
    if (!(*advance >= 0))
        return pkv_fail(e, "step %llu: the %s backend measured no %s time",
                        (unsigned long long)rec->index, eng->backend->name,
                        eng->clock == PKV_CLOCK_WALL ? "wall" : "device");
    return 0;
}

int pkv_engine_prefill(pkv_engine *eng, const int32_t *pages, int32_t n_pages, double *t_wall,
                       double *t_device, pkv_err *e) {
    *t_wall = *t_device = NAN;
    if (!eng->backend->prefill) return 0;
    double t0 = now_s();
    if (eng->backend->prefill(eng->backend, pages, n_pages, t_device, e)) return -1;
    *t_wall = now_s() - t0;
    return 0;
}

static int model_prepare(pkv_backend *b, const pkv_batch_view *v, pkv_err *e) {
    return 0;
}

static int model_run(pkv_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                     pkv_step_rec *rec, pkv_err *e) {
    return 0; /* the engine already filled the predicted time and counters */
}

static void model_destroy(pkv_backend *b) {
    free(b);
}

pkv_backend *pkv_backend_model_create(void) {
    pkv_backend *b = malloc(sizeof *b);
    if (b)
        *b = (pkv_backend){.name = "model",
                           .measures = 0,
                           .prepare = model_prepare,
                           .run = model_run,
                           .destroy = model_destroy};
    return b;
}
