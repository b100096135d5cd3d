#include "workload.h"

#include <math.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>

#include "pkv_mem.h"
#include "rng.h"

int pkv_workload_sessions(const pkv_workload_spec *s) {
    return !(s->turns.kind == PKV_LENGTH_FIXED && s->turns.value <= 1);
}

int pkv_workload_init(pkv_workload *w, const pkv_workload_spec *spec, uint64_t seed) {
    *w = (pkv_workload){
        .spec = *spec, .st = {.t_switch = -1}, .limits = {INFINITY, NULL}, .t_new = NAN};
    pkv_heap_init(&w->pending);
    if (pkv_arrival_prepare(&w->spec.arrival)) return -1;
    w->r_arrival = pkv_stream_create(seed, PKV_STREAM_ARRIVALS);
    w->r_prompt = pkv_stream_create(seed, PKV_STREAM_PROMPT);
    w->r_decode = pkv_stream_create(seed, PKV_STREAM_DECODE);
    w->r_prefix = pkv_stream_create(seed, PKV_STREAM_PREFIX);
    w->r_class = pkv_stream_create(seed, PKV_STREAM_CLASSES);
    w->r_session = pkv_stream_create(seed, PKV_STREAM_SESSIONS);
    if (!w->r_arrival || !w->r_prompt || !w->r_decode || !w->r_prefix || !w->r_class ||
        !w->r_session) {
        pkv_workload_free(w);
        return -1;
    }
    return 0;
}

void pkv_workload_free(pkv_workload *w) {
    gsl_rng *r[] = {w->r_arrival, w->r_prompt, w->r_decode, w->r_prefix, w->r_class, w->r_session};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (r[i]) gsl_rng_free(r[i]);
    w->r_arrival = w->r_prompt = w->r_decode = w->r_prefix = w->r_class = w->r_session = NULL;
    free(w->sess), free(w->free_sess);
    w->sess = NULL, w->free_sess = NULL;
    pkv_heap_free(&w->pending);
}

/* The request's class (by the classes' shares) and its shared prompt, if any. */
static void draw_class_prefix(pkv_workload *w, pkv_request_draw *out) {
    const pkv_workload_spec *s = &w->spec;
    out->slo_class = 0;
    if (s->n_classes > 1) {
        double u = gsl_rng_uniform(w->r_class), c = 0;
        out->slo_class = s->n_classes - 1;
        for (int k = 0; k < s->n_classes - 1; k++)
            if (u < (c += s->classes[k].share)) {
                out->slo_class = k;
                break;
            }
    }
    out->prefix_group = -1;
    if (s->prefix_tokens > 0 && gsl_rng_uniform(w->r_prefix) < s->prefix_share)
        out->prefix_group =
            (int32_t)gsl_rng_uniform_int(w->r_prefix, (unsigned long)s->prefix_groups);
}

double pkv_workload_start_offset(pkv_workload *w) {
    const double j = w->spec.arrival.start_jitter_s;
    return j > 0 ? j * gsl_rng_uniform(w->r_arrival) : 0;
}

const char *const pkv_over_context_names[] = {"refuse", "cut", NULL};

/* Lengths of at least 1; past max_context, refused (as drawn, within int32) or cut:
 * prompt to [1, max_context - 1], then decode to fit what is left (counted in w->clamped
 * when either is cut). */
static void clamp_lengths(pkv_workload *w, int64_t p, int64_t d, pkv_request_draw *out) {
    const pkv_workload_spec *s = &w->spec;
    if (p < 1) p = 1;
    if (d < 1) d = 1;
    out->refused = false;
    if (p + d > s->max_context && s->over_context == PKV_OVER_REFUSE) {
        w->refused++;
        out->refused = true;
        out->prompt_len = (int32_t)(p < INT32_MAX ? p : INT32_MAX);
        out->decode_len = (int32_t)(d < INT32_MAX ? d : INT32_MAX);
        return;
    }
    w->clamped += p > s->max_context - 1 || p + d > s->max_context;
    if (p > s->max_context - 1) p = s->max_context - 1;
    if (p + d > s->max_context) d = s->max_context - p;
    out->prompt_len = (int32_t)p;
    out->decode_len = (int32_t)d;
}

/* A slot for a new session; -1: out of memory. */
static int64_t session_slot(pkv_workload *w) {
    if (w->n_free_sess) return w->free_sess[--w->n_free_sess];
    if (w->n_sess == w->cap_sess) {
        size_t cap = w->cap_sess ? 2 * w->cap_sess : 64;
        if (pkv_resize(&w->sess, cap, sizeof *w->sess) ||
            pkv_resize(&w->free_sess, cap, sizeof *w->free_sess))
            return -1;
        w->cap_sess = cap;
    }
    return (int64_t)w->n_sess++;
}

/* The next turn of a session: from the queue of pending turns, or a new session
 * when its start comes first. 1: no more; -1: out of memory; -2: the arrival process
 * cannot advance. */
static int next_turn(pkv_workload *w, pkv_request_draw *out) {
    const pkv_workload_spec *s = &w->spec;
    for (;;) {
        if (isnan(w->t_new)) { /* the next new session's start, drawn once */
            w->t_last = pkv_arrival_next(&s->arrival, &w->st, w->t_last, w->r_arrival, &w->limits);
            if (isnan(w->t_last)) return -2;
            w->t_new = isfinite(w->t_last) ? w->t_last : INFINITY;
        }
        const pkv_event *top = pkv_heap_top(&w->pending);
        int64_t k;
        if (top && top->t <= w->t_new) {
            pkv_event ev;
            pkv_heap_pop(&w->pending, &ev);
            k = ev.arg;
            out->t_arrival = ev.t;
        } else if (isfinite(w->t_new)) {
            if ((k = session_slot(w)) < 0) return -1;
            pkv_session *ss = &w->sess[k];
            draw_class_prefix(w, out);
            int64_t turns = pkv_length_draw(&s->turns, w->r_session, w->sessions);
            *ss = (pkv_session){.id = w->sessions++,
                                .turns_left = turns < 1 ? 1 : (int32_t)turns,
                                .prefix_group = out->prefix_group,
                                .slo_class = out->slo_class};
            out->t_arrival = w->t_new;
            w->t_new = NAN;
        } else {
            return 1;
        }
        pkv_session *ss = &w->sess[k];
        const int64_t msg = pkv_length_draw(&s->prompt, w->r_prompt, w->drawn);
        const int64_t d = pkv_length_draw(&s->decode, w->r_decode, w->drawn);
        const int64_t p = ss->history + (msg < 1 ? 1 : msg);
        if (ss->turn > 0 && p > s->max_context - 1) { /* the session has run out of context */
            w->free_sess[w->n_free_sess++] = k;
            continue;
        }
        clamp_lengths(w, p, d, out);
        out->session = ss->id, out->turn = ss->turn++;
        out->prefix_group = ss->prefix_group, out->slo_class = ss->slo_class;
        ss->history = (int64_t)out->prompt_len + out->decode_len;
        if (--ss->turns_left > 0) {
            const double t = out->t_arrival + gsl_ran_exponential(w->r_session, s->think_s);
            if (pkv_heap_push(&w->pending, t, 0, k)) return -1;
        } else {
            w->free_sess[w->n_free_sess++] = k;
        }
        return 0;
    }
}

int pkv_workload_next(pkv_workload *w, double t_now, pkv_request_draw *out) {
    const pkv_workload_spec *s = &w->spec;
    if (s->num_requests > 0 && w->drawn >= s->num_requests) return 1;
    if (s->trace && (size_t)w->drawn >= s->trace->n) return 1;
    out->hashes = NULL, out->n_hashes = 0;
    out->session = -1, out->turn = 0;
    if (pkv_workload_sessions(s)) { /* open loop, synthetic lengths (checked by the config) */
        int rc = next_turn(w, out);
        if (rc == 0) w->drawn++;
        return rc;
    }
    if (s->arrival.kind == PKV_ARRIVAL_CLOSED) {
        out->t_arrival = t_now;
    } else if (s->trace && s->trace_times) {
        out->t_arrival = s->trace->t[w->drawn];
    } else {
        /* The first request arrives after one gap, like every later one. */
        w->t_last = pkv_arrival_next(&s->arrival, &w->st, w->t_last, w->r_arrival, &w->limits);
        if (isnan(w->t_last)) return -2;
        if (!isfinite(w->t_last)) return 1; /* the process has no further arrival */
        out->t_arrival = w->t_last;
    }
    int64_t p, d;
    if (s->trace) {
        p = s->trace->prompt[w->drawn];
        d = s->trace->decode[w->drawn];
    } else {
        p = pkv_length_draw(&s->prompt, w->r_prompt, w->drawn);
        d = pkv_length_draw(&s->decode, w->r_decode, w->drawn);
    }
    clamp_lengths(w, p, d, out);
    draw_class_prefix(w, out);
    if (s->trace && s->trace->hashes) {
        const size_t *o = s->trace->hash_off;
        out->hashes = s->trace->hashes + o[w->drawn];
        out->n_hashes = (int32_t)(o[w->drawn + 1] - o[w->drawn]);
    }
    w->drawn++;
    return 0;
}
