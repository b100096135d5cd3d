/* Run summary: throughput from the steps, latency percentiles from the requests. */
#ifndef PKV_SUMMARY_H
#define PKV_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pkv_record.h"

/* Latency statistics as `vllm bench serve` reports them: mean, median, standard
 * deviation (population) and the chosen percentiles (linear interpolation), seconds. */
enum { PKV_MAX_PERCENTILES = 8 };
typedef struct pkv_latency {
    double mean, median, std, pct[PKV_MAX_PERCENTILES];
    uint64_t n;
} pkv_latency;

/* SLOs for goodput (seconds; 0: not set): a finished request is good when it meets
 * every one set. */
typedef struct pkv_slo {
    double ttft, tpot, e2el;
} pkv_slo;

/* A latency distribution in bounded memory: its count and running moments (mean,
 * std), and for the percentiles its values exactly (floats, 7 significant digits)
 * while there are at most `keep`, then a histogram of 1024 bins for each power of two
 * from 2^-24 s (60 ns) to 2^14 s, binned by the double's exponent and top mantissa
 * bits (a percentile is its bin's centre: within 0.05%). Per-request latencies keep
 * 2^20 (4 MiB each); inter-token latencies go to the histogram from the first
 * (304 KiB, made at init). */
enum { PKV_HIST_EXP_LO = -24, PKV_HIST_OCTAVES = 38, PKV_HIST_SUB_BITS = 10 };
enum { PKV_LATENCY_KEEP = 1 << 20 };
typedef struct pkv_dist {
    uint64_t n;
    double mean, m2; /* Welford's running mean and sum of squared deviations */
    size_t keep;     /* the most values kept exactly */
    float *v;        /* the values, while n <= keep */
    size_t cap;      /* of v */
    uint64_t *hist;  /* [PKV_HIST_OCTAVES << PKV_HIST_SUB_BITS], once n > keep */
    /* binned: the last values when equal (a decode step's rows share their gap), in n
     * but not yet in the bins and moments: they join them at once when another value
     * comes or the distribution is read */
    double run_x;
    uint64_t run_n;
} pkv_dist;
/* -1: out of memory (the value is not counted). */
int pkv_dist_add(pkv_dist *d, double x);
/* Mean, median, population std and the percentiles pcts[0, n_pcts) (linear
 * interpolation between ranks where exact; the bin's centre where binned); sorts v. */
void pkv_dist_stats(pkv_dist *d, const double *pcts, int n_pcts, pkv_latency *out);
/* The q-quantile (0 <= q <= 1) after pkv_dist_stats; NaN when empty. */
double pkv_dist_quantile(const pkv_dist *d, double q);
void pkv_dist_free(pkv_dist *d);

typedef struct pkv_summary {
    uint64_t steps;                             /* all decode steps */
    uint64_t steps_measured;                    /* after warm-up */
    uint64_t decode_tokens;                     /* after warm-up (speculating: accepted too) */
    uint64_t row_steps;                         /* rows of the steps after warm-up */
    uint64_t spec_proposed, spec_accepted;      /* speculative decoding, after warm-up */
    double t_measure_begin;                     /* seconds: start of the first measured step */
    double t_end;                               /* seconds: simulated time at the end of the run */
    double step_time_sum, wall_sum, device_sum; /* seconds over measured steps */
    uint64_t wall_n, device_n;                  /* steps that measured them */
    double meta_sum;                            /* seconds: device metadata work before attention */
    uint64_t meta_n;
    double plan_sum, choose_sum; /* seconds: host planning, and staging with the choice */
    uint64_t plan_n;
    double decode_tok_s;        /* decode tokens / simulated seconds after warm-up */
    double decode_tok_s_wall;   /* decode tokens / sum of measured wall times */
    double decode_tok_s_device; /* decode tokens / sum of measured device times (attention, the
                                   MLP tail, a full model's dense part) */
    double mean_rows;
    double host_overhead_s;                      /* mean wall minus device time per measured step */
    double host_plan_s, host_choose_s;           /* of it, mean: /steps t_plan and t_choose */
    double ttft_p50, ttft_p90, ttft_p99;         /* seconds, over the finished requests */
    double tpot_p50, tpot_p90, tpot_p99;         /* seconds per output token after the first */
    double itl_p50, itl_p99, e2el_p50, e2el_p99; /* seconds (the sweep index's) */
    double prefix_hit_rate; /* prefix_hit_tokens / prefix_tokens (NaN: no prefix cache) */
    uint64_t prefix_unbounded_hit_tokens; /* the hits of a cache that never evicted */
    uint64_t clamped;                 /* requests whose lengths were cut to workload.max_context */
    double prefix_unbounded_hit_rate; /* over prefix_tokens */
    uint64_t arrived, finished, preemptions;
    uint64_t refused; /* requests past the model's context, refused (workload.over_context) */
    uint64_t prefills, prefill_tokens;          /* prefill batches and their prompt tokens */
    uint64_t mixed_steps, mixed_prefill_tokens; /* steps holding prompt chunks, their tokens */
    /* The prefix cache, set by the simulation: the admissions' full prompt blocks and
     * tokens to prefill, the blocks and tokens found cached, the blocks evicted */
    uint64_t prefix_blocks, prefix_tokens, prefix_hits, prefix_hit_tokens, prefix_evictions;
    /* Preemption by swap, set by the simulation: requests swapped out and in, pages
     * copied (both ways), seconds the copies took under the run's clock (measured on
     * the cuda backend, else modelled) and as the cost model predicts them */
    uint64_t swap_outs, swap_ins, swap_pages;
    double swap_time_s, swap_predicted_s;
    /* TTFT taken apart, set by the simulation (not a figure of /summary): seconds summed
     * over ttft_parts_n requests (those whose first token came in their first admission)
     * of waiting for admission, for the prompt's first piece to run, from then to the
     * first token, and the client's lag */
    uint64_t ttft_parts_n;
    double ttft_parts_s[4];
    /* workload.classes (set before the run): names and SLOs; finished and good by class */
    int n_classes;
    char class_names[8][32];
    pkv_slo class_slo[8];
    uint64_t class_finished[8], class_good[8];
    double prefill_time_s; /* simulated seconds the prefills took */
    /* The served model, per GPU (0 for the study layer): set by the program. */
    double model_weight_bytes, model_dense_flops_per_token, model_kv_bytes_per_token;
    uint64_t route_steps[PKV_ROUTE_COUNT]; /* measured steps per route */
    int interrupted;
    int bounded;      /* 1: run.max_steps or run.max_time_s ended the run */
    uint64_t offered; /* requests the workload holds (num_requests, a trace's rows; 0: no
                         bound), set by the program */
    /* Serving metrics over the finished requests, vLLM's definitions: set pcts, n_pcts
     * and slo before the run (pkv_summary_init sets 50, 90, 99 and no SLO). */
    double pcts[PKV_MAX_PERCENTILES];
    int n_pcts;
    pkv_slo slo;
    pkv_latency ttft, tpot, itl, e2el;
    uint64_t good, input_tokens, output_tokens;      /* vLLM's "completed" is `finished` */
    double t_first_arrival, t_last_finish, duration; /* seconds; duration: first to last */
    double request_throughput, request_goodput, output_throughput, total_token_throughput;
    double slo_attainment; /* good / finished */
    /* The distributions behind ttft, tpot, e2el and itl, until finish. */
    pkv_dist ttft_d, tpot_d, e2el_d, itl_d;
    struct pkv_request_log *log; /* the caller's, or NULL: no per-request record kept */
} pkv_summary;

/* /summary's figures, one row each, in the order they are written: what the HDF5
 * writer writes, what the report and the sweep index name, and the units the plots
 * give. A family row stands for several attributes: a latency's percentiles
 * (pNN_NAME, run.percentiles), a class's finished_CLASS, good_CLASS and
 * slo_attainment_CLASS, a route's steps_ROUTE. To add a figure: its field in
 * pkv_summary (filled by pkv_summary_add_* or _finish) and its row. */
typedef enum pkv_figure_type {
    PKV_FIGURE_U64 = 0,  /* a uint64_t field */
    PKV_FIGURE_F64,      /* a double field */
    PKV_FIGURE_INT,      /* an int field, written as an unsigned integer */
    PKV_FIGURE_PCTS,     /* family: a pkv_latency's percentiles */
    PKV_FIGURE_BY_CLASS, /* family: workload.classes' counts */
    PKV_FIGURE_BY_ROUTE, /* family: route_steps */
} pkv_figure_type;

typedef struct pkv_summary_figure {
    const char *name; /* the attribute's name (a family's suffix or prefix) */
    pkv_figure_type type;
    size_t offset;    /* of its field in pkv_summary */
    const char *unit; /* "" for counts without one */
    bool index;       /* a sweep's /sweep/index carries it for every point */
    const char *description;
} pkv_summary_figure;

extern const pkv_summary_figure pkv_summary_figures[];
extern const int pkv_summary_n_figures;
/* The row of a single figure by its name (NULL: none, or a family's). */
const pkv_summary_figure *pkv_summary_figure_find(const char *name);
/* A single figure's value as a double. */
double pkv_summary_figure_value(const pkv_summary *s, const pkv_summary_figure *f);

/* -1: out of memory. */
int pkv_summary_init(pkv_summary *s);
/* One inter-token latency (seconds): a token of request `id` of `replica` (a fleet's
 * replicas number their requests each from 0; 0 alone) after its first. -1: out of
 * memory (the log's). */
int pkv_summary_add_itl(pkv_summary *s, uint32_t replica, int64_t id, double gap);
/* Every request that left the run and every inter-token gap with its request's id,
 * kept (where the caller gives one: pkv_summary.log) for the per-request arrays of
 * vLLM's result file. */
typedef struct pkv_itl_row {
    int64_t id;
    uint32_t replica;
    double gap;
} pkv_itl_row;
typedef struct pkv_request_log {
    pkv_request_rec *req;
    size_t n, cap;
    pkv_itl_row *itl;
    size_t n_itl, cap_itl;
} pkv_request_log;
void pkv_request_log_free(pkv_request_log *l);

/* The run's setup as `vllm bench serve --save-result` writes it before its metrics. */
typedef struct pkv_vllm_meta {
    const char *backend, *label, *model_id;
    double request_rate;     /* requests/s; INFINITY: "inf" (all at once, a closed loop) */
    double burstiness;       /* the gamma shape of the gaps (1: Poisson); NaN: null */
    int64_t max_concurrency; /* a closed loop's; -1: null */
    bool detailed;           /* the per-request arrays too (vLLM's --save-detailed) */
} pkv_vllm_meta;

/* The serving metrics as vLLM's result file holds them (its key names), JSON; with
 * meta and log, the whole file (its setup, failed, the peak output second, and with
 * meta->detailed the per-request arrays) as `vllm bench serve --save-result` writes it
 * (the log is sorted into arrival order on the way, each request's gaps found by its
 * replica and number). */
int pkv_summary_json(const pkv_summary *s, const pkv_vllm_meta *meta, pkv_request_log *log,
                     FILE *f);
void pkv_summary_add_step(pkv_summary *s, const pkv_step_rec *r, double advance);
/* A request that left the run (finished, or still in it at the end). -1: out of memory. */
int pkv_summary_add_request(pkv_summary *s, const pkv_request_rec *r);
void pkv_summary_add_prefill(pkv_summary *s, const pkv_prefill_rec *p);
/* Fill the latency percentiles and throughput and free the distributions. */
int pkv_summary_finish(pkv_summary *s, double t_end);
/* Another process's summary of the same experiment (the ranks of a fleet, each its
 * replicas), before pkv_summary_finish: pack makes its bytes (a new *buf, caller frees;
 * its distributions' values or bins included), merge adds them to s (counts and sums
 * added, first and last times kept, distributions joined: percentiles as of one
 * process over every value). -1: out of memory, or (merge) bytes that are not a
 * summary's. */
int pkv_summary_pack(const pkv_summary *s, void **buf, size_t *len);
int pkv_summary_merge(pkv_summary *s, const void *buf, size_t len);
void pkv_summary_free(pkv_summary *s);
void pkv_summary_print(const pkv_summary *s, FILE *f);

#endif
