/* The run's sink (pkv_sim_sink's operations over a pkv_run_sink): each record to the
 * HDF5 recorder and the summary, the progress line on stderr, the summary finished at
 * the end. */
#include "runner_parts.h"

#include "pkv_clock.h"

#include <math.h>
#include <stdio.h>

int pkv_run_sink_step(void *ctx, const pkv_step_rec *r, double advance, pkv_err *e) {
    pkv_run_sink *k = ctx;
    pkv_summary_add_step(&k->sum, r, advance);
    return k->rec ? pkv_h5rec_step(k->rec, r, e) : 0;
}

int pkv_run_sink_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e) {
    pkv_run_sink *k = ctx;
    pkv_summary_add_prefill(&k->sum, p);
    return k->rec ? pkv_h5rec_prefill(k->rec, p, e) : 0;
}

int pkv_run_sink_request(void *ctx, const pkv_request_rec *q, pkv_err *e) {
    pkv_run_sink *k = ctx;
    if (pkv_summary_add_request(&k->sum, q)) return pkv_fail(e, "out of memory");
    return k->rec ? pkv_h5rec_request(k->rec, q, e) : 0;
}

int pkv_run_sink_itl(void *ctx, int64_t id, double gap, pkv_err *e) {
    return pkv_summary_add_itl(&((pkv_run_sink *)ctx)->sum, 0, id, gap)
               ? pkv_fail(e, "out of memory")
               : 0;
}

/* On stderr, at most every half second (and at the end). */
void pkv_run_sink_progress(void *ctx, const pkv_sim_progress *p, bool final) {
    pkv_run_sink *k = ctx;
    if (!final && pkv_clock_now() - k->t_progress <= 0.5) return;
    k->t_progress = pkv_clock_now();
    char pct[16] = "";
    if (p->done >= 0) snprintf(pct, sizeof pct, "%5.1f%%  ", 100 * fmin(p->done, 1));
    fprintf(stderr, "\r  %sstep %llu  t=%.4g s  running %d  waiting %zu  finished %zu/%zu%s", pct,
            (unsigned long long)p->steps, p->t_now, p->running, p->waiting, p->finished, p->arrived,
            final ? "\n" : "   ");
}

int pkv_run_sink_end(void *ctx, double t_end, bool interrupted, const pkv_sim_counts *c,
                     pkv_err *e) {
    pkv_summary *s = &((pkv_run_sink *)ctx)->sum;
    s->interrupted = interrupted;
    s->prefix_blocks = c->prefix_blocks, s->prefix_tokens = c->prefix_tokens;
    s->prefix_hits = c->prefix_hits, s->prefix_hit_tokens = c->prefix_hit_tokens;
    s->prefix_evictions = c->prefix_evictions;
    s->prefix_unbounded_hit_tokens = c->prefix_unbounded_hit_tokens;
    s->clamped = c->clamped;
    s->swap_outs = c->swap_outs, s->swap_ins = c->swap_ins, s->swap_pages = c->swap_pages;
    s->swap_time_s = c->swap_time_s, s->swap_predicted_s = c->swap_predicted_s;
    s->bounded = c->bounded > 0 && !interrupted;
    s->ttft_parts_n = c->ttft_n;
    s->ttft_parts_s[0] = c->ttft_queue_s, s->ttft_parts_s[1] = c->ttft_wait_s;
    s->ttft_parts_s[2] = c->ttft_prefill_s, s->ttft_parts_s[3] = c->ttft_client_s;
    return pkv_summary_finish(s, t_end) ? pkv_fail(e, "out of memory") : 0;
}
