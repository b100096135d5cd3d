/* A request stream: an arrival process and independent prompt and decode length
 * distributions, each on its own random stream; optionally multi-turn sessions,
 * each turn's prompt extending the last. */
#ifndef PKV_WORKLOAD_H
#define PKV_WORKLOAD_H

#include "arrival.h"
#include "lengths.h"
#include "pkv_heap.h"
#include "trace.h"

#include <stdbool.h>
#include <stdint.h>

/* A class of requests with its own SLOs and admission priority (workload.classes). */
enum { PKV_MAX_CLASSES = 8 };
typedef struct pkv_slo_class {
    char name[32];
    double share;                  /* of the requests, drawn independently for each */
    int32_t priority;              /* serving.admission "priority": higher is admitted first */
    double ttft_s, tpot_s, e2el_s; /* its SLOs; 0: the experiment's slo section's */
} pkv_slo_class;

/* workload.over_context (pkv_over_context_names' order): a request whose prompt and decode
 * pass max_context is refused, as an engine's server refuses it (vLLM: prompt + max_tokens
 * past max_model_len), or cut to fit and run. */
enum { PKV_OVER_REFUSE = 0, PKV_OVER_CUT };
extern const char *const pkv_over_context_names[];

typedef struct pkv_workload_spec {
    pkv_arrival_spec arrival;
    pkv_length_spec prompt, decode;
    int64_t num_requests; /* requests to generate; 0 = unbounded (run limits stop it) */
    int64_t max_context;  /* tokens: a request's prompt + decode may not pass it */
    int over_context;     /* PKV_OVER_*: what a request past max_context gets */
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
    /* The first warm_requests requests' prompts are in the engine's prefix cache when the
     * run starts (an earlier run sent them: a benchmark's sweep that sends the dataset's
     * first prompts again in each run). */
    int64_t warm_requests;
    /* Multi-turn sessions (turns not fixed at 1): the arrival process starts sessions;
     * a session of `turns` turns (drawn) sends its next turn think_s seconds
     * (exponential mean) after the last one arrived, its prompt the session's history
     * (every earlier prompt and answer) followed by a new message of the prompt
     * distribution; a turn that would pass max_context ends the session. */
    pkv_length_spec turns;
    double think_s;
    int n_classes; /* 0: one class of every request */
    pkv_slo_class classes[PKV_MAX_CLASSES];
} pkv_workload_spec;

typedef struct pkv_request_draw {
    double t_arrival; /* seconds */
    int32_t prompt_len, decode_len;
    bool refused;          /* past max_context under PKV_OVER_REFUSE: lengths as drawn */
    int32_t prefix_group;  /* the shared prompt it starts with; -1: none */
    int64_t session;       /* its multi-turn session; -1: none */
    int32_t turn;          /* its turn in the session, from 0 */
    int32_t slo_class;     /* its class (workload.classes); 0 without classes */
    const int64_t *hashes; /* the trace's block ids of its prompt (borrowed); NULL: none */
    int32_t n_hashes;
} pkv_request_draw;

/* A session between its turns. */
typedef struct pkv_session {
    int64_t id;
    int64_t history;    /* tokens of its turns so far: prompts and answers */
    int32_t turns_left; /* turns still to come */
    int32_t turn;       /* the next one's number */
    int32_t prefix_group, slo_class;
} pkv_session;

typedef struct pkv_workload {
    pkv_workload_spec spec;
    gsl_rng *r_arrival, *r_prompt, *r_decode, *r_prefix, *r_class, *r_session;
    pkv_arrival_state st;
    pkv_arrival_limits limits; /* {INFINITY, NULL} from init; the caller may set them */
    double t_last;             /* seconds: last open-loop arrival */
    int64_t drawn;
    uint64_t clamped; /* draws whose prompt or decode length was cut to max_context */
    uint64_t refused; /* draws past max_context, refused (PKV_OVER_REFUSE) */
    /* multi-turn sessions: the open ones (slots reused through a free list) and
     * their next turns by time; the next new session's start (NaN: not drawn yet,
     * inf: no more) */
    pkv_session *sess;
    int64_t *free_sess;
    size_t n_sess, cap_sess, n_free_sess;
    pkv_heap pending;
    double t_new;
    int64_t sessions;
} pkv_workload;

/* Whether the spec makes multi-turn sessions. */
int pkv_workload_sessions(const pkv_workload_spec *s);

int pkv_workload_init(pkv_workload *w, const pkv_workload_spec *spec, uint64_t seed);
void pkv_workload_free(pkv_workload *w);
/* A closed loop's first requests: each's offset from t = 0, uniform over
 * arrival.start_jitter_s (0 without it). */
double pkv_workload_start_offset(pkv_workload *w);

/* Next request: for open-loop kinds its arrival follows the previous one (or is a
 * session's next turn); for the closed loop t_arrival is t_now. Returns 1 when
 * num_requests are exhausted (or the arrival process has no more, or was stopped), -1
 * when memory runs out, -2 when the arrival process cannot advance (at st.t_stuck:
 * pkv_arrival_next's NAN). */
int pkv_workload_next(pkv_workload *w, double t_now, pkv_request_draw *out);

#endif
