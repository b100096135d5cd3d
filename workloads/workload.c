#include "workload.h"

#include <math.h>
#include "rng.h"

int pkv_workload_init(pkv_workload *w, const pkv_workload_spec *spec, uint64_t seed) {
    *w = (pkv_workload){.spec = *spec, .st = {.t_switch = -1}};
    if (pkv_arrival_prepare(&w->spec.arrival)) return -1;
    w->r_arrival = pkv_stream_create(seed, PKV_STREAM_ARRIVALS);
    w->r_prompt = pkv_stream_create(seed, PKV_STREAM_PROMPT);
    w->r_decode = pkv_stream_create(seed, PKV_STREAM_DECODE);
    w->r_prefix = pkv_stream_create(seed, PKV_STREAM_PREFIX);
    w->r_class = pkv_stream_create(seed, PKV_STREAM_CLASSES);
    if (!w->r_arrival || !w->r_prompt || !w->r_decode || !w->r_prefix || !w->r_class) {
        pkv_workload_free(w);
        return -1;
    }
    return 0;
}

void pkv_workload_free(pkv_workload *w) {
    if (w->r_arrival) gsl_rng_free(w->r_arrival);
    if (w->r_prompt) gsl_rng_free(w->r_prompt);
    if (w->r_decode) gsl_rng_free(w->r_decode);
    if (w->r_prefix) gsl_rng_free(w->r_prefix);
    if (w->r_class) gsl_rng_free(w->r_class);
    w->r_arrival = w->r_prompt = w->r_decode = w->r_prefix = w->r_class = NULL;
}

int pkv_workload_next(pkv_workload *w, double t_now, pkv_request_draw *out) {
    const pkv_workload_spec *s = &w->spec;
    if (s->num_requests > 0 && w->drawn >= s->num_requests) return 1;
    if (s->trace && (size_t)w->drawn >= s->trace->n) return 1;
    if (s->arrival.kind == PKV_ARRIVAL_CLOSED) {
        out->t_arrival = t_now;
    } else if (s->trace && s->trace_times) {
        out->t_arrival = s->trace->t[w->drawn];
    } else {
        /* The first request arrives after one gap, like every later one. */
        w->t_last = pkv_arrival_next(&s->arrival, &w->st, w->t_last, w->r_arrival);
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
    /* Clamp: prompt to [1, max_context - 1], then decode to fit what is left. */
    if (p < 1) p = 1;
    if (p > s->max_context - 1) p = s->max_context - 1;
    if (d < 1) d = 1;
    if (p + d > s->max_context) d = s->max_context - p;
    out->prompt_len = (int32_t)p;
    out->decode_len = (int32_t)d;
    out->prefix_group = -1;
    out->hashes = NULL, out->n_hashes = 0;
    out->slo_class = 0;
    if (s->n_classes > 1) { /* by the classes' shares */
        double u = gsl_rng_uniform(w->r_class), c = 0;
        out->slo_class = s->n_classes - 1;
        for (int k = 0; k < s->n_classes - 1; k++)
            if (u < (c += s->classes[k].share)) {
                out->slo_class = k;
                break;
            }
    }
    if (s->prefix_tokens > 0 && gsl_rng_uniform(w->r_prefix) < s->prefix_share)
        out->prefix_group =
            (int32_t)gsl_rng_uniform_int(w->r_prefix, (unsigned long)s->prefix_groups);
    if (s->trace && s->trace->hashes) {
        const size_t *o = s->trace->hash_off;
        out->hashes = s->trace->hashes + o[w->drawn];
        out->n_hashes = (int32_t)(o[w->drawn + 1] - o[w->drawn]);
    }
    w->drawn++;
    return 0;
}
