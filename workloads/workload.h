/* A request stream: an arrival process and independent prompt and decode length
 * distributions, each on its own random stream. */
#ifndef PKV_WORKLOAD_H
#define PKV_WORKLOAD_H

#include "arrival.h"
#include "lengths.h"
#include "trace.h"

/* A class of requests with its own SLOs and admission priority (workload.classes). */
enum { PKV_MAX_CLASSES = 8 };
typedef struct pkv_slo_class {
    char name[32];
    double share;                  /* of the requests, drawn independently for each */
    int32_t priority;              /* serving.admission "priority": higher is admitted first */
    double ttft_s, tpot_s, e2el_s; /* its SLOs; 0: the experiment's slo section's */
} pkv_slo_class;

typedef struct pkv_workload_spec {
    pkv_arrival_spec arrival;
    pkv_length_spec prompt, decode;
    int64_t num_requests; /* requests to generate; 0 = unbounded (run limits stop it) */
    int64_t max_context;  /* tokens: prompt + decode of any request is clamped to this */
    /* Replay: requests come from the trace in order (borrowed; NULL = synthetic).
     * trace_times: 1 keeps the trace's (scaled) timestamps, 0 takes arrival times
     * from the arrival process instead. */
    const pkv_trace *trace;
    int trace_times;
    /* A shared system prompt: with probability prefix_share a request's first
     * prefix_tokens tokens are one of prefix_groups prompts (uniform), the same for
     * every request of that group (0 tokens: none). */
    int64_t prefix_tokens, prefix_groups;
    double prefix_share;
    int n_classes; /* 0: one class of every request */
    pkv_slo_class classes[PKV_MAX_CLASSES];
} pkv_workload_spec;

typedef struct pkv_request_draw {
    double t_arrival; /* seconds */
    int32_t prompt_len, decode_len;
    int32_t prefix_group;  /* the shared prompt it starts with; -1: none */
    int32_t slo_class;     /* its class (workload.classes); 0 without classes */
    const int64_t *hashes; /* the trace's block ids of its prompt (borrowed); NULL: none */
    int32_t n_hashes;
} pkv_request_draw;

typedef struct pkv_workload {
    pkv_workload_spec spec;
    gsl_rng *r_arrival, *r_prompt, *r_decode, *r_prefix, *r_class;
    pkv_arrival_state st;
    double t_last; /* seconds: last open-loop arrival */
    int64_t drawn;
} pkv_workload;

int pkv_workload_init(pkv_workload *w, const pkv_workload_spec *spec, uint64_t seed);
void pkv_workload_free(pkv_workload *w);
/* Next request: for open-loop kinds its arrival follows the previous one; for the
 * closed loop t_arrival is t_now. Returns 1 when num_requests are exhausted. */
int pkv_workload_next(pkv_workload *w, double t_now, pkv_request_draw *out);

#endif
