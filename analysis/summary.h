/* Run summary: throughput from the steps, latency percentiles from the requests. */
#ifndef PKV_SUMMARY_H
#define PKV_SUMMARY_H

#include <stdio.h>

#include "pkv_record.h"

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
    double decode_tok_s_device; /* decode tokens / sum of measured device times (attention, the
                                   MLP tail, a full model's dense part) */
    double mean_rows;
    double host_overhead_s;              /* mean wall minus device time per measured step */
    double ttft_p50, ttft_p90, ttft_p99; /* seconds */
    double tpot_p50, tpot_p90, tpot_p99; /* seconds per output token after the first */
    uint64_t arrived, finished, preemptions;
    uint64_t prefills, prefill_tokens; /* prefill batches and their prompt tokens */
    double prefill_time_s;             /* simulated seconds the prefills took */
    /* The served model, per GPU (0 for the study layer): set by the program. */
    double model_weight_bytes, model_dense_flops_per_token, model_kv_bytes_per_token;
    uint64_t route_steps[PKV_ROUTE_COUNT]; /* measured steps per route */
    int interrupted;
    /* Per-request latencies for the percentiles, kept until finish: floats (4 bytes a
     * value, 7 significant digits), so that 10M requests take 80 MB. */
    float *ttft, *tpot;
    size_t n_ttft, n_tpot, cap_ttft, cap_tpot;
} pkv_summary;

void pkv_summary_init(pkv_summary *s);
void pkv_summary_add_step(pkv_summary *s, const pkv_step_rec *r, double advance);
/* A request that left the run (finished, or still in it at the end). -1: out of memory. */
int pkv_summary_add_request(pkv_summary *s, const pkv_request_rec *r);
void pkv_summary_add_prefill(pkv_summary *s, const pkv_prefill_rec *p);
/* Fill the latency percentiles and throughput and free the latency arrays. */
int pkv_summary_finish(pkv_summary *s, double t_end);
void pkv_summary_free(pkv_summary *s);
void pkv_summary_print(const pkv_summary *s, FILE *f);

#endif
