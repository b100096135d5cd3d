/* Experiment files: parsed with cJSON, validated with errors that name the JSON
 * path, resolved to defaults. experiments/README.md documents every key. */
#ifndef PKV_CONFIG_H
#define PKV_CONFIG_H

#include "admission.h"
#include "engine.h"
#include "h5rec.h"
#include "workload.h"

typedef struct pkv_config {
    char *text;     /* the experiment file verbatim (owned) */
    char *resolved; /* resolved values as JSON (owned) */
    char file[1024];
    char name[128];
    pkvk_shape shape;
    int64_t mlp_inter; /* gated MLP tail width after attention (0: none) */
    pkv_workload_spec workload;
    pkv_trace_spec trace_spec; /* workload.trace, when given */
    pkv_trace trace;           /* its rows (owned); workload.trace points here */
    int32_t max_active;
    int32_t kv_pages;
    const pkv_admission_policy *admission;
    double hole_fraction;  /* fraction of the pool's page ids never handed out */
    bool reserve_full;     /* page_tables mode "generator": reserve whole lengths at admission */
    int64_t bucket_len;    /* tokens: reservations rounded up to this (generator), 0: pages */
    double prefill_base_s; /* seconds per prefill batch */
    double prefill_per_token_s; /* seconds per prompt token */
    bool prefill_measure;       /* prefill time = the measured K/V write (cuda backend) */
    char policy[32];
    pkv_bucket_mode bucket_mode;
    char calibration[1024];
    cJSON *calib_overrides; /* owned; may be NULL */
    bool allow_other_gpu;   /* accept a calibration made on another GPU model */
    int64_t max_steps;      /* 0: no limit */
    double max_time;        /* seconds of simulated time; 0: no limit */
    int64_t warmup_steps;
    uint64_t seed;
    char output[1024];
    pkv_backend_kind backend;
    int clock; /* -1 auto, else pkv_clock_source */
    int64_t check_every, check_first;
    bool cuda_graph;    /* cuda backend: replay each step as a CUDA graph (ablation) */
    bool metadata_copy; /* cuda backend: step metadata by a copy (ablation), not launch params */
    pkv_record_level record; /* run.record: what the output file holds */
} pkv_config;

int pkv_config_load(pkv_config *c, const char *path, pkv_err *e);
/* Parse experiment text (takes ownership of the malloc'ed text); `path` names it in
 * errors and anchors its relative paths. */
int pkv_config_parse(pkv_config *c, char *text, const char *path, pkv_err *e);
void pkv_config_free(pkv_config *c);
/* Rebuild c->resolved after command-line overrides. */
int pkv_config_resolve(pkv_config *c);

#endif
