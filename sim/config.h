/* Experiment files: parsed with cJSON, validated with errors that name the JSON
 * path, resolved to defaults. experiments/README.md documents every key. */
#ifndef PKV_CONFIG_H
#define PKV_CONFIG_H

#include "admission.h"
#include "config_keys.h"
#include "engine.h"
#include "model.h"
#include "h5rec.h"
#include "workload.h"

/* run.cuda_graph (pkv_cuda_graph_modes' order); pkv_config_graphs resolves auto. */
enum { PKV_GRAPH_AUTO = 0, PKV_GRAPH_OFF = 1, PKV_GRAPH_ON = 2 };

/* A fleet pool's role (fleet.pools[].role): its replicas serve whole requests, or
 * prefill them and send their KV to a decode replica, or decode what came so. */
enum { PKV_ROLE_MIXED = 0, PKV_ROLE_PREFILL, PKV_ROLE_DECODE };
extern const char *const pkv_role_names[];

struct pkv_config;
typedef struct pkv_pool {
    char name[64];
    int replicas, role;
    struct pkv_config *cfg; /* its settings: the experiment's with the pool's model, serving
                               and route on top (owned) */
    bool own_calibration;   /* its route names a calibration or GPU (the command line's
                               --calibration leaves it) */
    bool own_policy;        /* its route names a policy (--route leaves it) */
} pkv_pool;

/* fleet.autoscale: one pool's replicas between min and max, by a metric against its
 * target, decided every interval_s; a started replica serves after cold_start_s. The
 * metric: per active replica, requests waiting (queue_depth), in it (requests), the KV
 * pool's used share (kv_use); or the pool's TTFT percentile over a window in ms (ttft). */
enum { PKV_SCALE_QUEUE = 0, PKV_SCALE_REQUESTS, PKV_SCALE_KV, PKV_SCALE_TTFT };
extern const char *const pkv_scale_metrics[];
typedef struct pkv_autoscale {
    bool on;
    char pool[64]; /* its pool's name ("": the first pool, or the fleet without pools) */
    int pool_index, min, max, initial;
    int metric;
    double target, interval_s, cold_start_s, down_delay_s;
    double percentile, window_s; /* ttft: the percentile of the last window_s's TTFTs */
} pkv_autoscale;

/* The fleet section: replicas of the experiment behind a router (sim/fleet.h). */
typedef struct pkv_fleet_spec {
    int replicas;      /* in all (1: none) */
    int router;        /* pkv_router: where an arrival goes (mixed and prefill pools) */
    int decode_router; /* pkv_router: the decode replica a prefilled request goes to */
    int n_pools;       /* fleet.pools (0: fleet.replicas of the experiment's settings) */
    pkv_pool *pools;   /* [n_pools] (owned) */
    pkv_autoscale autoscale;
    double latency_s;      /* a routing decision's seconds: a request reaches its replica
                              this long after the router takes it */
    double view_refresh_s; /* the router's view of replica state is this old at most
                              (refreshed every so often; 0: live) */
    int affinity_cap;      /* prefix_affinity: replicas holding more requests than the
                              least loaded one plus this are passed over */
} pkv_fleet_spec;

/* Replicas set up for pool p (the scaled pool: its maximum), and in all. */
static inline int pkv_pool_slots(const pkv_fleet_spec *f, int p) {
    return f->autoscale.on && f->autoscale.pool_index == p ? f->autoscale.max
                                                           : f->pools[p].replicas;
}
static inline int pkv_fleet_slots(const pkv_fleet_spec *f) {
    if (!f->n_pools) return f->autoscale.on ? f->autoscale.max : f->replicas;
    int n = 0;
    for (int p = 0; p < f->n_pools; p++) n += pkv_pool_slots(f, p);
    return n;
}

/* serving.engine: a serving engine's profile by version (experiments/engines/
 * NAME@VERSION.json): its serving defaults (scheduler, token budget, batch limits,
 * prefix caching, by usage: a server's or in-process), the host work it adds to each
 * iteration and what of it overlaps the GPU, the batch sizes it captured as CUDA
 * graphs, its attention backends, and the seconds a client sees beyond the engine on
 * each request (tokenization and the HTTP request on the way in, detokenization and the
 * response on the way out; their split changes no figure), which its TTFT and
 * end-to-end latency include. "pkvsim" (the default): none of it, pkvsim's own loop. */
typedef struct pkv_engine_profile {
    char name[64];      /* the profile taken: NAME@VERSION, a path, or "pkvsim" */
    char requested[64]; /* serving.engine as the experiment gives it */
    pkv_engine_host host;
    double client_s;
    double multi_gpu_s; /* at tensor parallel > 1, each request's seconds beyond client_s */
    /* the server's front-end: each request's seconds of its serial work on the way in
     * (one request at a time); holds: the engine takes none of a burst until the
     * front-end has handled all of it */
    double frontend_s;
    bool frontend_holds;
    /* an iteration's outputs reach the client as the next iteration ends (vLLM V0's async
     * output processing: processed during the next forward), at once where none follows */
    bool async_output;
    /* max_running: serving.max_active from the KV pool where the experiment does not set
     * it: per_context requests per model context's worth of pool tokens, within [min,
     * max], and at most pool_share of the pool's tokens (SGLang's); per_context 0: none */
    struct {
        double per_context, pool_share;
        int min, max;
    } max_running;
} pkv_engine_profile;

typedef struct pkv_config {
    char *text;     /* the experiment file verbatim (owned) */
    char *resolved; /* resolved values as JSON (owned) */
    char file[1024];
    char name[128];
    pkv_model model;       /* the served model (engine/model.h) */
    char model_file[1024]; /* the preset file it came from, or "" */
    pkv_engine_profile engine;
    char engine_file[1024];     /* its profile's file, or "" (pkvsim) */
    int client;                 /* serving.client: PKV_CLIENT_* */
    char attention_backend[32]; /* serving.attention_backend: the engine's backend ("": none) */
    pkv_workload_spec workload;
    pkv_trace_spec trace_spec; /* workload.trace, when given */
    pkv_trace trace;           /* its rows (owned); workload.trace points here */
    int32_t max_active;
    int32_t kv_pages;
    double gpu_memory_utilization; /* of the calibration's memory_gib: weights and KV pool */
    int admission;                 /* index in pkv_admission_names */
    const pkv_admission_policy *admit;
    int scheduler;                /* pkv_scheduler_names: PKV_SCHED_* */
    pkv_fleet_spec fleet;         /* the fleet section (sim/fleet.h) */
    int32_t token_budget;         /* chunked: tokens an iteration holds (decode rows + chunks) */
    int32_t max_prefill_chunk;    /* chunked: tokens of one prompt in one iteration (0: budget) */
    int32_t prefill_batch_tokens; /* prefill_first: prompt tokens of a prefill batch (0: all) */
    int32_t scheduler_steps;      /* prefill_first: decode steps per scheduling (vLLM's
                                     --num-scheduler-steps) */
    pkv_speculative spec;         /* serving.speculative */
    int preemption;               /* pkv_preemption_names: PKV_PREEMPT_* */
    int32_t swap_pages;           /* swap: the host pool's pages (KV pages of every layer) */
    bool prefix_caching;          /* share the KV blocks of common prompt prefixes (sim/prefix.h) */
    int32_t prefix_block_tokens;  /* tokens of a cached block (a multiple of the page size) */
    double hole_fraction;         /* fraction of the pool's page ids never handed out */
    int page_tables;              /* pkv_page_table_modes: 1, generator, reserves whole lengths */
    int64_t bucket_len;         /* tokens: reservations rounded up to this (generator), 0: pages */
    double prefill_base_s;      /* seconds per prefill batch */
    double prefill_per_token_s; /* seconds per prompt token */
    bool prefill_measure;       /* prefill time = the measured K/V write (cuda backend) */
    char policy[32];
    int bucket_mode; /* pkv_bucket_mode */
    char calibration[1024];
    char gpu[32];           /* route.gpu: whose calibration a run without route.calibration takes */
    cJSON *calib_overrides; /* owned; may be NULL */
    bool allow_other_gpu;   /* accept a calibration made on another GPU model */
    int64_t max_steps;      /* 0: no limit */
    double max_time;        /* seconds of simulated time; 0: no limit */
    int64_t warmup_steps;
    uint64_t seed;
    char output[1024];
    int backend; /* pkv_backend_kind */
    int clock;   /* pkv_clock_names: a pkv_clock_source (PKV_CLOCK_AUTO: the backend's) */
    int64_t check_every, check_first;
    int oracle_repeats;    /* route.oracle_repeats: the measuring oracle's runs of a candidate */
    int cuda_graph;        /* PKV_GRAPH_*: replay decode steps as CUDA graphs, as given */
    int metadata_upload;   /* cuda backend: 1, step metadata by a copy (ablation), not launch
                              params */
    int record;            /* pkv_record_level, run.record: what the output file holds */
    int prefill_attention; /* run.prefill_attention: PKVK_PREFILL_* (the model's kernel) */
    int layers_measured;   /* run.layers_measured: a full model's layers run on the cuda
                              backend, their time scaled to every layer's (0: all) */
    pkv_slo slo;           /* slo: seconds, 0 where not set */
    double percentiles[PKV_MAX_PERCENTILES]; /* run.percentiles */
    int n_percentiles;
} pkv_config;

int pkv_config_load(pkv_config *c, const char *path, pkv_err *e);
/* Parse experiment text (takes ownership of the malloc'ed text); `path` names it in
 * errors and anchors its relative paths. */
int pkv_config_parse(pkv_config *c, char *text, const char *path, pkv_err *e);
void pkv_config_free(pkv_config *c);
/* The files a run of c reads (the experiment, its preset, traces and calibration),
 * each with what it is, for the output check; returns how many (at most PKV_CONFIG_INPUTS). */
enum { PKV_CONFIG_INPUTS = 7 + 3 * 64 }; /* the most pkv_config_inputs lists */
int pkv_config_inputs(const pkv_config *c, const char **paths, const char **what);
/* After c was moved by value (qsort of an array holding configs): its pointers into
 * itself (workload.trace, to its own trace) point into it again. */
void pkv_config_relocated(pkv_config *c);
/* Rebuild c->resolved after command-line overrides. */
int pkv_config_resolve(pkv_config *c);
/* The KV pool against the GPU's memory (memory_gib, the calibration's; 0: unknown, not
 * checked): its pages with the weights a GPU holds and a GiB of activations and
 * workspaces must fit in memory_gib x serving.gpu_memory_utilization, else the error
 * names the bytes and the most pages that fit. */
int pkv_config_check_memory(const pkv_config *c, double memory_gib, const char *gpu, pkv_err *e);
/* Whether decode steps replay CUDA graphs: run.cuda_graph, its auto resolved by the
 * final policy (command-line overrides applied): on for a full model under adaptive or
 * a route its graphs hold (pkv_backend_graph_routes: ref_paged, pkv_workqueue), off for the study
 * layer (whose per-step capture is an ablation), a mixture of experts (each step's routing
 * sizes its GEMMs) and the oracle. */
bool pkv_config_graphs(const pkv_config *c);
/* workload.warm_requests: the tokens of request id's prompt of prompt_len that an earlier
 * run left in the prefix cache (its whole blocks but the last token, which is computed to
 * sample from); 0 for the others. */
static inline int32_t pkv_config_warm_tokens(const pkv_config *c, int64_t id, int32_t prompt_len) {
    if (id >= c->workload.warm_requests || prompt_len < 1) return 0;
    return (prompt_len - 1) / c->prefix_block_tokens * c->prefix_block_tokens;
}

#endif
