/* Run summary: throughput from the steps, latency percentiles from the requests. */
#ifndef PKV_SUMMARY_H
#define PKV_SUMMARY_H

#include <stdio.h>

#include "engine.h"

/* One row of /requests. Times in seconds of simulated time; NaN when not reached. */
typedef struct pkv_request_rec {
    int64_t id;
    double t_arrival, t_admitted, t_first_token, t_finish;
    int32_t prompt_len, decode_len;
    int32_t generated;   /* decode tokens produced so far */
    int32_t preemptions; /* times evicted and recomputed */
    uint8_t state;       /* pkv_request_state */
} pkv_request_rec;

typedef enum pkv_request_state {
    PKV_REQ_WAITING = 0,
    PKV_REQ_PREFILL,
    PKV_REQ_RUNNING,
    PKV_REQ_FINISHED,
} pkv_request_state;

typedef struct pkv_summary {
    uint64_t steps;                             /* all decode steps */
    uint64_t steps_measured;                    /* after warm-up */
    uint64_t decode_tokens;                     /* after warm-up */
    double t_measure_begin;                     /* seconds: start of the first measured step */
    double t_end;                               /* seconds: simulated time at the end of the run */
    double step_time_sum, wall_sum, device_sum; /* seconds over measured steps */
    uint64_t wall_n, device_n;                  /* steps that measured them */
    double meta_sum;                            /* seconds: device metadata work before attention */
    uint64_t meta_n;
    double decode_tok_s;        /* decode tokens / simulated seconds after warm-up */
    double decode_tok_s_wall;   /* decode tokens / sum of measured wall times */
    double decode_tok_s_device; /* decode tokens / sum of measured device times (attention + MLP) */
    double mean_rows;
    double host_overhead_s;              /* mean wall minus device time per measured step */
    double ttft_p50, ttft_p90, ttft_p99; /* seconds */
    double tpot_p50, tpot_p90, tpot_p99; /* seconds per output token after the first */
    uint64_t arrived, finished, preemptions;
    uint64_t route_steps[PKVK_ROUTE_COUNT]; /* measured steps per route */
    int interrupted;
} pkv_summary;

void pkv_summary_init(pkv_summary *s);
void pkv_summary_add_step(pkv_summary *s, const pkv_step_rec *r, double advance);
/* Fill the latency percentiles and throughput; returns -1 on allocation failure. */
int pkv_summary_finish(pkv_summary *s, const pkv_request_rec *req, size_t n, double t_end);
void pkv_summary_print(const pkv_summary *s, FILE *f);

#endif
