/* The autoscaler: a decision every interval_s over the scaled pool's metric, replicas
 * started (after their cold start) and drained, and the routers' groups of the active
 * replicas. */
#include "fleet_parts.h"
#include "pkv_mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

/* The routers' groups: the active replicas by role. */
void pkv_fleet_regroup(pkv_fleet *f) {
    f->entry.n = f->decode.n = 0;
    for (int i = 0; i < f->n; i++)
        if (f->state[i] == PKV_REP_ACTIVE) {
            pkv_fleet_group *g = f->role[i] == PKV_ROLE_DECODE ? &f->decode : &f->entry;
            g->idx[g->n++] = i;
        }
    if (f->entry.n) f->entry.next_rr %= f->entry.n;
    if (f->decode.n) f->decode.next_rr %= f->decode.n;
}

int pkv_fleet_scale_log(pkv_fleet *f, int event, int replica, double metric, int desired) {
    if (f->n_scale == f->cap_scale) {
        const size_t cap = f->cap_scale ? 2 * f->cap_scale : 256;
        if (pkv_resize(&f->scale, cap, sizeof *f->scale)) return -1;
        f->cap_scale = cap;
    }
    const pkv_autoscale *a = &f->spec.autoscale;
    uint32_t active = 0, starting = 0;
    for (int i = f->scale_first; i < f->scale_first + a->max; i++)
        active += f->state[i] == PKV_REP_ACTIVE, starting += f->state[i] == PKV_REP_STARTING;
    f->scale[f->n_scale++] = (pkv_scale_rec){f->t_now, (uint8_t)event, replica,          active,
                                             starting, metric,         (uint32_t)desired};
    return 0;
}

/* A draining replica with nothing left in it (no request, none on its way, no KV
 * transfer) leaves. */
int pkv_fleet_maybe_off(pkv_fleet *f, int i) {
    if (f->state[i] != PKV_REP_DRAINING) return 0;
    const pkv_sim *s = f->replicas[i];
    const pkv_fleet_link *L = &f->links[i];
    if (pkv_sim_load_of(s, false).requests || f->sent[i].requests || s->busy ||
        (f->role[i] == PKV_ROLE_PREFILL && (L->on || L->wait_head >= 0)))
        return 0;
    f->state[i] = PKV_REP_OFF;
    f->up_s[i] += f->t_now - f->up_since[i];
    return pkv_fleet_scale_log(f, PKV_SCALE_OFF, i, NAN, 0);
}

/* Something still to happen besides the autoscaler's decisions. */
bool pkv_fleet_work_left(const pkv_fleet *f) {
    if (f->arrivals_left || f->events.n > f->n_own || f->q_n > 0) return true;
    for (int i = 0; i < f->n; i++)
        if (isfinite(f->next_t[i])) return true;
    return false;
}

/* A first token on a replica of the scaled pool (metric ttft). */
int pkv_fleet_note_ttft(void *ctx, double t, double ttft) {
    pkv_fleet *f = ((pkv_fleet_hand *)ctx)->f;
    if (f->n_ttft == f->cap_ttft) {
        if (f->ttft_first > f->n_ttft / 2) { /* the window's values to the front */
            f->n_ttft -= f->ttft_first;
            memmove(f->ttft, f->ttft + f->ttft_first, f->n_ttft * sizeof *f->ttft);
            f->ttft_first = 0;
        } else {
            const size_t cap = f->cap_ttft ? 2 * f->cap_ttft : 1024;
            if (pkv_resize(&f->ttft, cap, sizeof *f->ttft)) return -1;
            f->cap_ttft = cap;
        }
    }
    f->ttft[f->n_ttft++] = (struct pkv_fleet_ttft){t, ttft};
    return 0;
}

/* The metric ttft: the pool's TTFT percentile over the last window_s, in ms (older
 * values dropped; the window's sorted in a copy); NaN when no first token came in the
 * window, -1 out of memory. */
static double ttft_metric(pkv_fleet *f) {
    const pkv_autoscale *a = &f->spec.autoscale;
    while (f->ttft_first < f->n_ttft && f->ttft[f->ttft_first].t < f->t_now - a->window_s)
        f->ttft_first++;
    const size_t m = f->n_ttft - f->ttft_first;
    if (!m) return NAN;
    double *x = malloc(m * sizeof *x);
    if (!x) return -1;
    for (size_t k = 0; k < m; k++) x[k] = f->ttft[f->ttft_first + k].ttft;
    gsl_sort(x, 1, m);
    const double q = gsl_stats_quantile_from_sorted_data(x, 1, m, a->percentile / 100);
    free(x);
    return 1e3 * q;
}

/* A decision: the metric over the pool's active replicas against the target gives the
 * replicas wanted (as Kubernetes' horizontal autoscaler: active x metric / target,
 * rounded up, within min and max); more start (draining ones first, back at once; the
 * others after their cold start), fewer drain (the highest first, once none starts). */
int pkv_fleet_decide(pkv_fleet *f, pkv_err *e) {
    const pkv_autoscale *a = &f->spec.autoscale;
    const int lo = f->scale_first, hi = lo + a->max;
    int active = 0, starting = 0;
    double sum = 0;
    for (int i = lo; i < hi; i++) {
        starting += f->state[i] == PKV_REP_STARTING;
        if (f->state[i] != PKV_REP_ACTIVE) continue;
        active++;
        const pkv_sim *s = f->replicas[i];
        const pkv_sim_load l = pkv_sim_load_of(s, false);
        sum += a->metric == PKV_SCALE_QUEUE ? (double)s->wait_n
               : a->metric == PKV_SCALE_KV  ? 1 - (double)l.free_pages / s->cfg->kv_pages
                                            : (double)l.requests; /* requests, and ttft's */
    }
    if (a->metric != PKV_SCALE_KV && f->role[lo] != PKV_ROLE_DECODE) sum += (double)f->q_n;
    double metric = active ? sum / active : 0;
    if (a->metric == PKV_SCALE_TTFT && (metric = ttft_metric(f)) < 0)
        return pkv_fail(e, "out of memory");
    /* no first token in the window: an idle pool shrinks, a busy one holds */
    /* clamped as a double, converted after: a target near 0 (or a huge metric) wants the
     * maximum, never an overflowed int (0 / 0, no load against a zero target: hold) */
    double w = !isnan(metric) ? ceil(active * metric / a->target - 1e-9) : sum > 0 ? active : 0;
    if (isnan(w)) w = active;
    const int want = w < a->min ? a->min : w > a->max ? a->max : (int)w;
    /* Scale down no lower than the decisions of the last down_delay_s wanted (as
     * Kubernetes' scale-down stabilization window), so a dip does not drain replicas
     * the next decision wants back. */
    int keep = want;
    for (size_t k = f->n_scale; k-- > 0 && f->scale[k].t > f->t_now - a->down_delay_s;)
        if (f->scale[k].event == PKV_SCALE_DECIDE && (int)f->scale[k].desired > keep)
            keep = (int)f->scale[k].desired;
    bool moved = false;
    for (int i = lo; i < hi && want > active + starting; i++)
        if (f->state[i] == PKV_REP_DRAINING) {
            f->state[i] = PKV_REP_ACTIVE, active++, moved = true;
            if (pkv_fleet_scale_log(f, PKV_SCALE_BACK, i, NAN, 0))
                return pkv_fail(e, "out of memory");
        }
    for (int i = lo; i < hi && want > active + starting; i++)
        if (f->state[i] == PKV_REP_OFF) {
            f->state[i] = PKV_REP_STARTING, starting++, f->ups[i]++, f->up_since[i] = f->t_now;
            if (pkv_fleet_scale_log(f, PKV_SCALE_START, i, NAN, 0) ||
                pkv_heap_push(&f->events, f->t_now + a->cold_start_s, PKV_FLEET_READY, i))
                return pkv_fail(e, "out of memory");
            f->n_own++;
        }
    for (int i = hi - 1; i >= lo && starting == 0 && keep < active; i--)
        if (f->state[i] == PKV_REP_ACTIVE) {
            f->state[i] = PKV_REP_DRAINING, active--, f->downs[i]++, moved = true;
            if (pkv_fleet_scale_log(f, PKV_SCALE_DRAIN, i, NAN, 0) || pkv_fleet_maybe_off(f, i))
                return pkv_fail(e, "out of memory");
        }
    if (moved) pkv_fleet_regroup(f);
    if (pkv_fleet_scale_log(f, PKV_SCALE_DECIDE, -1, metric, want))
        return pkv_fail(e, "out of memory");
    if (!pkv_fleet_work_left(f)) return 0; /* no decision after the work is over */
    if (pkv_heap_push(&f->events, f->t_now + a->interval_s, PKV_FLEET_SCALE, 0))
        return pkv_fail(e, "out of memory");
    f->n_own++;
    return 0;
}

int pkv_fleet_ready(pkv_fleet *f, int i, pkv_err *e) {
    if (f->state[i] != PKV_REP_STARTING) return 0;
    f->state[i] = PKV_REP_ACTIVE;
    pkv_fleet_regroup(f);
    return pkv_fleet_scale_log(f, PKV_SCALE_READY, i, NAN, 0) ? pkv_fail(e, "out of memory") : 0;
}

double pkv_fleet_up_s(const pkv_fleet *f, int i, double t_end) {
    if (!f->up_s) return t_end;
    return f->up_s[i] + (f->state[i] == PKV_REP_OFF ? 0 : t_end - f->up_since[i]);
}
