/* The router's view of the replicas, refreshed every view_refresh_s; over ranks, the
 * refresh is the processes' one exchange (sim/fleet.h). */
#include "fleet_parts.h"

#include <math.h>
#include <string.h>

/* ranks: what each process gives at a refresh: its next event time, whether it is over
 * and why (OVER_* bits), and its replicas' loads. */
enum { OVER = 1, OVER_BOUND = 2, OVER_STOP = 4 };
typedef struct sync_head {
    double t_next;
    int64_t over; /* 0, or OVER and why */
} sync_head;

size_t pkv_fleet_sync_block(const pkv_fleet *f) {
    return sizeof(sync_head) +
           sizeof(pkv_sim_load) * (size_t)((f->n + f->ranks->size - 1) / f->ranks->size);
}

/* The first multiple of w strictly after t. (floor(t / w) + 1) * w rounds back to t
 * itself for some t (0.58 s with w 20 ms): the refresh would repeat at one instant for
 * ever. A period below the clock's resolution at t refreshes at the next instant. */
static double next_multiple(double t, double w) {
    const double k = floor(t / w) + 1;
    double next = k * w;
    if (!(next > t)) next = (k + 1) * w;
    return next > t ? next : nextafter(t, INFINITY);
}

/* The view's refresh, before anything at or after f->next_refresh happens: every
 * replica as all events before it left them. One process: its own replicas, and t_mine
 * (its next event) is the fleet's. Ranks: each gives its replicas' loads, its next event
 * time and whether it is over; *t_next is then the fleet's next event, *over whether any
 * process is over (a bound or a stop there marks this process's replicas so). The next
 * refresh is the first multiple of view_refresh_s after *t_next (none between holds an
 * event). */
int pkv_fleet_sync_view(pkv_fleet *f, double t_mine, bool over_mine, double *t_next, bool *over,
                        pkv_err *e) {
    *t_next = t_mine, *over = over_mine;
    if (!f->ranks || f->ranks->size == 1) {
        for (int i = 0; i < f->n; i++) f->view[i] = pkv_fleet_live(f, i);
    } else {
        const size_t b = pkv_fleet_sync_block(f);
        char *all = f->sync_buf, *mine = all + b * (size_t)f->ranks->rank;
        const pkv_sim *s = f->replicas[f->lo]; /* an end marks every replica of the process */
        const sync_head h = {t_mine, over_mine ? OVER | (s->bounded ? OVER_BOUND : 0) |
                                                     (s->interrupted ? OVER_STOP : 0)
                                               : 0};
        memcpy(mine, &h, sizeof h);
        for (int i = f->lo; i < f->hi; i++) {
            const pkv_sim_load l = pkv_fleet_live(f, i);
            memcpy(mine + sizeof h + sizeof l * (size_t)(i - f->lo), &l, sizeof l);
        }
        if (f->ranks->allgather(f->ranks->ctx, mine, b, all))
            return pkv_fail(e, "fleet: the ranks' exchange of the view failed");
        for (int r = 0; r < f->ranks->size; r++) {
            int lo, hi;
            pkv_ranks_block(f->n, r, f->ranks->size, &lo, &hi);
            sync_head o;
            memcpy(&o, all + b * (size_t)r, sizeof o);
            *t_next = fmin(*t_next, o.t_next), *over |= o.over != 0;
            for (int i = f->lo; i < f->hi && o.over; i++) { /* why another process ended */
                f->replicas[i]->bounded |= (o.over & OVER_BOUND) != 0;
                f->replicas[i]->interrupted |= (o.over & OVER_STOP) != 0;
            }
            memcpy(f->view + lo, all + b * (size_t)r + sizeof o,
                   sizeof *f->view * (size_t)(hi - lo));
        }
    }
    f->next_refresh = isfinite(*t_next) ? next_multiple(*t_next, f->spec.view_refresh_s) : INFINITY;
    return 0;
}
