/* The event loop and the request lifecycle: arrival, admission (admit.c), the
 * scheduler's iterations (sched.h), tokens, finish. */
#include "sim_parts.h"
#include "sched.h"
#include "rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The simulator's events (pkv_event.kind). */
enum { EVENT_ARRIVAL = 0, EVENT_PREFILL_DONE, EVENT_STEP_DONE, EVENT_FINISH, EVENT_ENTER };

/* ---- requests (their slots: sim_setup.c) ------------------------------------------ */
/* A request leaves the simulation (finished, or still in it at the end): its row goes
 * to the sink, its slot is freed. */
static int retire_request(pkv_sim *s, int64_t slot, pkv_err *e) {
    pkv_sim_request *r = &s->req[slot];
    if (s->sink.request && s->sink.request(s->sink.ctx, &r->rec, e)) return -1;
    pkv_sim_free_slot(s, slot);
    return 0;
}

/* The seconds a client sees beyond the engine's times: the engine profile's work on a
 * request's way in and out, over several GPUs with request.multi_gpu_us. A constant delay
 * of every arrival shifts an open loop's whole run in time, so it is added to what the
 * client sees (TTFT, the finish), not to the engine's clock; a closed loop's next request
 * is sent at the engine's finish. */
double pkv_sim_client_lag(const pkv_sim *s) {
    return s->cfg->engine.client_s + (s->cfg->model.tp > 1 ? s->cfg->engine.multi_gpu_s : 0);
}

/* r's first token, made at t_made, reaches the client now: TTFT, taken apart (what
 * request.async_output holds it past its making counts as the client's). */
static int first_token_out(pkv_sim *s, pkv_sim_request *r, double t_made, pkv_err *e) {
    r->rec.t_first_token = s->t_now + pkv_sim_client_lag(s);
    r->t_last_token = s->t_now;
    if (r->rec.preemptions == 0 && !isnan(r->t_prefill_start)) {
        pkv_sim_counts *c = &s->counts;
        c->ttft_n++;
        c->ttft_queue_s += r->rec.t_admitted - r->t_entered;
        c->ttft_wait_s += r->t_prefill_start - r->rec.t_admitted;
        c->ttft_prefill_s += t_made - r->t_prefill_start;
        c->ttft_client_s +=
            pkv_sim_client_lag(s) + (r->t_entered - r->rec.t_arrival) + (s->t_now - t_made);
    }
    if (s->first_token &&
        s->first_token(s->fleet_ctx, s->t_now, r->rec.t_first_token - r->rec.t_arrival))
        return pkv_fail(e, "out of memory");
    return 0;
}

/* r's tokens made since its last reached the client now: one inter-token gap. */
static int gap_out(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    if (s->sink.itl && s->sink.itl(s->sink.ctx, r->rec.id, s->t_now - r->t_last_token, e))
        return -1;
    r->t_last_token = s->t_now;
    return 0;
}

/* request.async_output: what an iteration makes reaches the client as the next one ends
 * (not on a fleet's prefill replica, which hands its requests on at once). */
static bool outputs_late(const pkv_sim *s) {
    return s->cfg->engine.async_output && !s->handoff;
}

/* r's `what` reaches the client as the next iteration ends. */
static void late_add(pkv_sim *s, pkv_sim_request *r, uint8_t what) {
    if (!r->late) {
        const int64_t slot = r - s->req;
        r->late_next = -1;
        if (s->late_tail >= 0)
            s->req[s->late_tail].late_next = slot;
        else
            s->late_head = slot;
        s->late_tail = slot;
    }
    r->late |= what;
}

/* A token of r came now: its first stamps TTFT, the others are inter-token latencies
 * (a window's at its end; request.async_output's as the next iteration ends). */
static int token_done(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    const bool late = outputs_late(s);
    r->rec.generated++;
    if (isnan(r->rec.t_first_token) && !(r->late & PKV_LATE_FIRST)) {
        if (!late) return first_token_out(s, r, s->t_now, e);
        r->t_made = s->t_now;
        late_add(s, r, PKV_LATE_FIRST);
    } else if (s->cfg->scheduler_steps > 1) { /* streamed at the window's end */
        r->held++;
    } else if (late) {
        late_add(s, r, PKV_LATE_GAP);
    } else {
        return gap_out(s, r, e);
    }
    return 0;
}

/* The end of a window of serving.scheduler_steps: r's tokens made in it reach the client
 * together (one inter-token gap, as vLLM's multi-step streams them; under
 * request.async_output as the next iteration ends). */
static int send_held(pkv_sim *s, pkv_sim_request *r, pkv_err *e) {
    if (!r->held) return 0;
    r->held = 0;
    if (!outputs_late(s)) return gap_out(s, r, e);
    late_add(s, r, PKV_LATE_GAP);
    return 0;
}

/* Request `slot` finished at t: stamped (as the client sees it), its pages freed, recorded. */
static int finish_request(pkv_sim *s, int64_t slot, double t, pkv_err *e) {
    pkv_sim_request *r = &s->req[slot];
    r->rec.t_finish = t + pkv_sim_client_lag(s);
    s->n_finished++;
    pkv_sim_release_pages(s, r);
    return retire_request(s, slot, e);
}

/* The server's front-end takes request `slot`, which reached it now, after those it
 * holds: request.frontend_us each, one at a time (the HTTP request, tokenization, the
 * hand-off to the engine). */
static int frontend_take(pkv_sim *s, int64_t slot, pkv_err *e) {
    s->fe_free = fmax(s->t_now, s->fe_free) + s->cfg->engine.frontend_s;
    if (s->fe_tail >= 0)
        s->req[s->fe_tail].fe_next = slot;
    else
        s->fe_head = slot;
    s->fe_tail = slot;
    return pkv_heap_push(&s->heap, s->fe_free, EVENT_ENTER, slot) ? pkv_fail(e, "out of memory")
                                                                  : 0;
}

/* The front-end is done with its first request now: it enters the engine's waiting
 * queue. Under request.frontend_holds the engine sees none until the front-end has none
 * left, then all of them in their order (a burst taken whole, as vLLM 0.6's published
 * per-request times show it). */
static int frontend_done(pkv_sim *s, pkv_err *e) {
    const bool holds = s->cfg->engine.frontend_holds;
    if (holds && s->fe_free > s->t_now) return 0;
    do {
        const int64_t k = s->fe_head;
        pkv_sim_request *r = &s->req[k];
        if ((s->fe_head = r->fe_next) < 0) s->fe_tail = -1;
        r->t_entered = s->t_now;
        if (pkv_sim_wait_push_back(s, k)) return pkv_fail(e, "out of memory");
    } while (holds && s->fe_head >= 0);
    return 0;
}

/* Request d arrives at t: it waits for admission (through the server's front-end
 * first where `frontend` and the profile has one) or, past the model's context
 * (workload.over_context "refuse"), is refused at once as the engine's server refuses it,
 * recorded as failed when the answer reaches the client. *slot: its slot, -1 if refused. */
int pkv_sim_arrive(pkv_sim *s, const pkv_request_draw *d, double t, bool frontend, int64_t *slot,
                   pkv_err *e) {
    *slot = pkv_sim_new_request(s, d, t);
    if (*slot < 0) return pkv_fail(e, "out of memory");
    if (!d->refused) {
        if (frontend && s->cfg->engine.frontend_s > 0) return frontend_take(s, *slot, e);
        return pkv_sim_wait_push_back(s, *slot) ? pkv_fail(e, "out of memory") : 0;
    }
    pkv_sim_request *r = &s->req[*slot];
    r->rec.state = PKV_REQ_REFUSED;
    r->rec.t_finish = t + pkv_sim_client_lag(s);
    s->n_refused++;
    const int64_t k = *slot;
    *slot = -1;
    return retire_request(s, k, e);
}

/* A closed loop's client sends a request at t; one refused is followed by the next at
 * once. A loop of refusals only (every length past the context) cannot go on. */
static int closed_send(pkv_sim *s, double t, const pkv_request_draw *first, pkv_err *e) {
    enum { REFUSALS = 100000 };
    pkv_request_draw d;
    for (int n = 0;; n++) {
        if (first && n == 0)
            d = *first;
        else if (pkv_workload_next(&s->wl, t, &d))
            return 0; /* the workload is over */
        if (d.refused && n == REFUSALS)
            return pkv_fail(e,
                            "%s: workload: %d requests in a row are past workload.max_context "
                            "(%lld tokens) and refused: the closed loop cannot go on; shorten "
                            "the lengths, or set workload.over_context \"cut\"",
                            s->cfg->file, REFUSALS, (long long)s->cfg->workload.max_context);
        int64_t slot;
        if (pkv_sim_arrive(s, &d, t, true, &slot, e)) return -1;
        if (slot >= 0) return 0;
    }
}

/* Request `slot` made its last token: it finishes (as the client sees it: under
 * request.async_output as the next iteration ends; its pages are freed then too, as
 * the engine learns of it only then). */
static int finish_later(pkv_sim *s, int64_t slot, pkv_err *e) {
    s->req[slot].rec.state = PKV_REQ_FINISHED;
    if (outputs_late(s)) {
        late_add(s, &s->req[slot], PKV_LATE_FINISH);
        return 0;
    }
    return pkv_heap_push(&s->heap, s->t_now, EVENT_FINISH, slot) ? pkv_fail(e, "out of memory") : 0;
}

/* request.async_output: what the iteration before made reaches the client now, as the
 * one after it ended (vLLM V0 processes a step's outputs during the next forward) or
 * none follows. */
static int late_out(pkv_sim *s, pkv_err *e) {
    while (s->late_head >= 0) {
        const int64_t k = s->late_head;
        pkv_sim_request *r = &s->req[k];
        const uint8_t what = r->late;
        s->late_head = r->late_next;
        r->late = 0;
        if ((what & PKV_LATE_FIRST) && first_token_out(s, r, r->t_made, e)) return -1;
        if ((what & PKV_LATE_GAP) && gap_out(s, r, e)) return -1;
        if ((what & PKV_LATE_FINISH) && pkv_heap_push(&s->heap, s->t_now, EVENT_FINISH, k))
            return pkv_fail(e, "out of memory");
    }
    s->late_tail = -1;
    return 0;
}

int pkv_sim_prompt_done(pkv_sim *s, int64_t slot, pkv_err *e) {
    pkv_sim_request *r = &s->req[slot];
    if (s->cfg->prefix_caching && pkv_sim_cache_prompt(s, r)) return pkv_fail(e, "out of memory");
    if (s->eng->kind->prefill_samples) { /* else its first decode step appends the token
                                            after the prompt (the study layer) */
        if (token_done(s, r, e)) return -1;
        if (r->rec.generated >= r->rec.decode_len) return finish_later(s, slot, e);
    }
    if (s->handoff) { /* its KV leaves for a decode replica; its pages stay until then */
        r->rec.state = PKV_REQ_RUNNING;
        s->handed_off++;
        return s->handoff(s->fleet_ctx, s, slot, e);
    }
    pkv_sim_join_run(s, slot);
    return 0;
}

/* The decode step's rows each have their token (speculating, and the proposed ones
 * accepted before it, arriving with it: one inter-token gap); the finished ones leave
 * the batch. */
static int step_tokens(pkv_sim *s, pkv_err *e) {
    for (int32_t i = 0; i < s->n_run;) {
        pkv_sim_request *r = &s->req[s->run[i]];
        if (token_done(s, r, e)) return -1;
        r->rec.generated += r->spec_accepted;
        r->spec_accepted = 0;
        if (r->rec.generated >= r->rec.decode_len) {
            int64_t slot = s->run[i];
            pkv_sim_run_remove(s, i); /* row i now holds another request: do not advance */
            if (r->held)              /* its last tokens wait for the window's end */
                s->held_done[s->n_held_done++] = slot;
            else if (finish_later(s, slot, e))
                return -1;
        } else {
            i++;
        }
    }
    if (s->cfg->scheduler_steps == 1 || (s->window > 0 && s->n_run > 0)) return 0;
    /* the window ends: its tokens reach the client, its finished requests finish */
    for (int32_t i = 0; i < s->n_run; i++)
        if (send_held(s, &s->req[s->run[i]], e)) return -1;
    for (int32_t k = 0; k < s->n_held_done; k++)
        if (send_held(s, &s->req[s->held_done[k]], e) || finish_later(s, s->held_done[k], e))
            return -1;
    s->n_held_done = 0;
    return 0;
}

/* ---- iterations ------------------------------------------------------------------ */
/* The clock must move by an iteration's time: a time that is not finite, one below the
 * 1 ns floor (no GPU iteration is that short: a launch alone takes microseconds; a
 * prefill batch may take none, a modelling choice), or one too small to change the
 * clock at its magnitude (double precision) would leave it standing or creeping by
 * denormals (zero latencies; a run bounded by max_time_s would repeat such steps for
 * ever). */
static int clock_moves(const pkv_sim *s, double dt, int decode, pkv_err *e) {
    const char *what = decode ? "decode step" : "prefill batch";
    if (!(dt >= 0) || !isfinite(dt))
        return pkv_fail(e, "%s %llu: its time (%g s) is not a finite non-negative number", what,
                        (unsigned long long)s->steps, dt);
    if ((decode || dt > 0) && dt < 1e-9)
        return pkv_fail(e,
                        "%s: %s %llu takes %g s, below the 1 ns floor of any GPU iteration: "
                        "the costs of route.calibration (%s) with route.overrides%s make it so; "
                        "raise them",
                        s->cfg->file, what, (unsigned long long)s->steps, dt, s->cfg->calibration,
                        decode ? "" : ", or serving.prefill's");
    if (dt > 0 && s->t_now + dt == s->t_now)
        return pkv_fail(e,
                        "%s %llu: the simulated clock at %.17g s cannot advance by its %g s "
                        "(the clock would stand still: its times would be wrong, and a run "
                        "bounded by run.max_time_s would not end); check the calibration's "
                        "costs (they round to zero) and the trace's timestamps",
                        what, (unsigned long long)s->steps, s->t_now, dt);
    return 0;
}

/* The GPU is busy with the iteration that starts now for dt seconds. */
static int occupy(pkv_sim *s, double dt, int decode_step, pkv_err *e) {
    if (s->observe) s->observe(s, decode_step, s->observe_ctx);
    s->busy = 1, s->busy_until = s->t_now + dt;
    return pkv_heap_push(&s->heap, s->t_now + dt,
                         decode_step ? EVENT_STEP_DONE : EVENT_PREFILL_DONE, 0)
               ? pkv_fail(e, "out of memory")
               : 0;
}

/* Speculative decoding: each row's proposed tokens and the prefix of them its verify
 * keeps, each accepted with its request's chance where the ones before it were. */
static void propose(pkv_sim *s, pkv_step_rec *rec) {
    for (int32_t i = 0; i < s->n_run; i++) {
        pkv_sim_request *r = &s->req[s->run[i]];
        const int32_t k = pkv_sim_spec_tokens(s, r);
        int32_t a = 0;
        while (a < k && gsl_rng_uniform(s->r_spec) < r->spec_p) a++;
        r->spec_accepted = a;
        rec->spec_proposed += (uint32_t)k;
        rec->spec_accepted += (uint32_t)a;
    }
}

static int start_step(pkv_sim *s, const pkv_prefill_view *chunks, pkv_err *e) {
    pkv_step_rec rec = {.index = s->steps,
                        .t_sim = s->t_now,
                        .warmup = (int64_t)s->steps < s->cfg->warmup_steps,
                        .queue_depth = (uint32_t)s->wait_n,
                        .pages_free = (uint32_t)s->alloc.n_free,
                        .pages_cached = (uint32_t)s->cache.n_free_pages};
    s->preempt_run = 0;
    /* serving.admission new_token_ratio: each decode step lowers the ratio */
    s->new_token_ratio = fmax(PKV_ADMIT_RATIO_MIN, s->new_token_ratio - PKV_ADMIT_RATIO_DECAY);
    s->window = (s->window > 0 ? s->window : s->cfg->scheduler_steps) - 1;
    pkv_batch_view v = {s->n_run,      s->seq_lens,   s->block_table,
                        s->bt_stride,  s->dirty_rows, s->n_dirty,
                        s->dirty_from, chunks,        s->cfg->spec.tokens};
    if (s->r_spec) propose(s, &rec);
    double adv;
    if (pkv_engine_step(s->eng, &v, &rec, &adv, e)) return -1;
    rec.t_swap = pkv_sim_take_swap_time(s);
    adv += rec.t_swap;
    if (clock_moves(s, adv, 1, e)) return -1;
    for (int32_t k = 0; k < s->n_dirty; k++) s->dirty_from[s->dirty_rows[k]] = INT32_MAX;
    s->n_dirty = 0;
    s->steps++;
    if (s->sink.step && s->sink.step(s->sink.ctx, &rec, adv, e)) return -1;
    return occupy(s, adv, 1, e);
}

static int start_prefill(pkv_sim *s, const pkv_prefill_view *pv, pkv_err *e) {
    pkv_prefill_rec pr = {.t_sim = s->t_now};
    double t;
    if (pkv_engine_prefill(s->eng, pv, &pr, &t, e)) return -1;
    pr.t_swap = pkv_sim_take_swap_time(s);
    pr.t_advance = t += pr.t_swap;
    if (clock_moves(s, t, 0, e)) return -1;
    if (s->sink.prefill && s->sink.prefill(s->sink.ctx, &pr, e)) return -1;
    return occupy(s, t, 0, e);
}

/* Admit, and start the scheduler's next iteration; a step whose rows were all
 * preempted did not start: admit again. */
int pkv_sim_try_schedule(pkv_sim *s, pkv_err *e) {
    for (;;) {
        if (s->busy) return 0;
        /* serving.scheduler_steps: inside a window of decode steps nothing is admitted */
        if (s->n_run == 0) s->window = 0;
        if (s->window == 0 && pkv_sim_admit(s, e)) return -1;
        pkv_iter_kind kind;
        pkv_prefill_view pv;
        if (s->sched->next(s, &kind, &pv, e)) return -1;
        switch (kind) {
        case PKV_ITER_STEP:
            return start_step(s, pv.n_req ? &pv : NULL, e);
        case PKV_ITER_PREFILL:
            return start_prefill(s, &pv, e);
        case PKV_ITER_RETRY:
            if (s->wait_n > 0) continue;
            return late_out(s, e); /* no iteration follows */
        case PKV_ITER_NONE:
            return late_out(s, e);
        }
    }
}

/* ---- events ------------------------------------------------------------------------ */
static int schedule_arrival(pkv_sim *s, double t_now, pkv_err *e) {
    int rc = pkv_workload_next(&s->wl, t_now, &s->next_draw);
    if (rc == -2)
        return pkv_fail(e,
                        "%s: workload.arrival: the %s process cannot advance at t = %.17g s: "
                        "its periods or gaps there are below the clock's resolution a thousand "
                        "times in a row (mean_on_s, mean_off_s or the rates' times too short "
                        "against the clock); set run.max_time_s below that time, or lengthen them",
                        s->cfg->file, pkv_arrival_names[s->cfg->workload.arrival.kind],
                        s->wl.st.t_stuck);
    if (rc == 0 && pkv_heap_push(&s->heap, s->next_draw.t_arrival, EVENT_ARRIVAL, 0)) rc = -1;
    return rc < 0 ? pkv_fail(e, "out of memory") : 0; /* else exhausted */
}

static int handle(pkv_sim *s, const pkv_event *ev, pkv_err *e) {
    switch (ev->kind) {
    case EVENT_ARRIVAL: {
        const pkv_request_draw *d = ev->arg > 0 ? &s->first[ev->arg - 1] : &s->next_draw;
        if (s->cfg->workload.arrival.kind == PKV_ARRIVAL_CLOSED) return closed_send(s, ev->t, d, e);
        int64_t slot;
        return pkv_sim_arrive(s, d, ev->t, true, &slot, e) ? -1 : schedule_arrival(s, ev->t, e);
    }
    case EVENT_PREFILL_DONE:
        s->busy = 0;
        return late_out(s, e) || s->sched->done(s, PKV_ITER_PREFILL, e) ? -1 : 0;
    case EVENT_STEP_DONE: /* the decode rows' tokens, then the chunks' prompts */
        s->busy = 0;
        return late_out(s, e) || step_tokens(s, e) || s->sched->done(s, PKV_ITER_STEP, e) ? -1 : 0;
    case EVENT_ENTER:
        return frontend_done(s, e);
    case EVENT_FINISH: {
        if (finish_request(s, ev->arg, ev->t, e)) return -1;
        /* a closed loop's successor arrives now, with its own draw (several finishing at
         * one instant must not share one queued draw) */
        return s->cfg->workload.arrival.kind == PKV_ARRIVAL_CLOSED ? closed_send(s, ev->t, NULL, e)
                                                                   : 0;
    }
    }
    return 0;
}

static void progress(const pkv_sim *s, bool final) {
    const pkv_config *c = s->cfg;
    double f = -1; /* the share done by whichever bound ends the run first */
    if (c->max_steps > 0) f = fmax(f, (double)s->steps / c->max_steps);
    if (c->max_time > 0) f = fmax(f, s->t_now / c->max_time);
    int64_t n = c->workload.trace ? (int64_t)c->workload.trace->n : c->workload.num_requests;
    if (n > 0) f = fmax(f, (double)(s->n_finished + s->n_refused) / n);
    const pkv_sim_progress p = {f,         s->steps,      s->t_now,    s->n_run,
                                s->wait_n, s->n_finished, s->n_arrived};
    s->sink.progress(s->sink.ctx, &p, final);
}

/* ---- the loop ---------------------------------------------------------------------- */
int pkv_sim_start(pkv_sim *s, pkv_err *e) {
    const pkv_arrival_spec *a = &s->cfg->workload.arrival;
    if (s->external) {
        /* the router brings the arrivals */
    } else if (a->kind == PKV_ARRIVAL_CLOSED) {
        /* Each closed-loop arrival carries its own draw: queue them one at a time (with
         * a start jitter, each at its own instant; the loop's lockstep breaks up). */
        if (a->start_jitter_s > 0 &&
            !(s->first = malloc(sizeof *s->first * (size_t)a->concurrency)))
            return pkv_fail(e, "out of memory");
        for (int64_t i = 0; i < a->concurrency; i++) {
            pkv_request_draw d;
            if (pkv_workload_next(&s->wl, 0.0, &d)) break;
            if (s->first) {
                s->first[i] = d;
                s->first[i].t_arrival = pkv_workload_start_offset(&s->wl);
                if (pkv_heap_push(&s->heap, s->first[i].t_arrival, EVENT_ARRIVAL, i + 1))
                    return pkv_fail(e, "out of memory");
                continue;
            }
            if (closed_send(s, 0.0, &d, e)) return -1;
        }
    } else if (schedule_arrival(s, 0.0, e)) {
        return -1;
    }
    return pkv_sim_try_schedule(s, e);
}

double pkv_sim_next_t(const pkv_sim *s) {
    const pkv_event *next = s->over ? NULL : pkv_heap_top(&s->heap);
    return next ? next->t : INFINITY;
}

int pkv_sim_advance(pkv_sim *s, pkv_err *e) {
    pkv_event ev;
    if (s->over) return 0;
    if (s->stop && *s->stop) {
        s->interrupted = s->over = true;
        return 0;
    }
    if (!pkv_sim_more_steps(s) && !s->busy) {
        s->over = s->bounded = true;
        return 0;
    }
    if (pkv_heap_pop(&s->heap, &ev)) {
        s->over = true; /* nothing is left to happen */
        return 0;
    }
    if (s->cfg->max_time > 0 && ev.t > s->cfg->max_time) {
        s->over = s->bounded = true;
        return 0;
    }
    s->t_now = ev.t;
    if (handle(s, &ev, e)) return -1;
    /* The scheduler runs only once every event of this instant is handled. */
    const pkv_event *next = pkv_heap_top(&s->heap);
    if (!next || next->t != s->t_now) {
        if (pkv_sim_try_schedule(s, e)) return -1;
        if (s->sink.progress && (s->steps & 1023) == 0) progress(s, false);
    }
    /* run.max_steps reached: over now, as the next call would find (a fleet advances a
     * replica only for its events, and a bounded replica has none left) */
    if (!pkv_sim_more_steps(s) && !s->busy) s->over = s->bounded = true;
    return 0;
}

int pkv_sim_end(pkv_sim *s, pkv_err *e) {
    if (s->sink.progress) progress(s, true);
    if (!s->interrupted && !s->bounded && pkv_sim_stranded(s, e)) return -1;
    /* A cut at an instant where requests finished: their finishes (due now) are stamped. */
    if (late_out(s, e)) return -1;
    pkv_event ev;
    while (pkv_heap_pop(&s->heap, &ev) == 0)
        if (ev.kind == EVENT_FINISH && finish_request(s, ev.arg, ev.t, e)) return -1;
    /* Requests still in the system are recorded as they stand. */
    for (size_t i = 0; i < s->n_slots; i++)
        if (s->req[i].live && retire_request(s, (int64_t)i, e)) return -1;
    s->counts.prefix_hits = s->cache.hits;
    s->counts.prefix_evictions = s->cache.evictions;
    s->counts.clamped = s->wl.clamped; /* its own arrivals' (a fleet's router counts its) */
    s->counts.bounded = s->bounded;
    return s->sink.end ? s->sink.end(s->sink.ctx, s->t_now, s->interrupted, &s->counts, e) : 0;
}

int pkv_sim_run(pkv_sim *s, pkv_err *e) {
    if (pkv_sim_start(s, e)) return -1;
    while (!s->over)
        if (pkv_sim_advance(s, e)) return -1;
    return pkv_sim_end(s, e);
}
