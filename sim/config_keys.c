#include "config_keys.h"
#include "config.h"
#include "fleet.h"

#include <stddef.h>
#include <stdint.h>

const char *const pkv_clock_names[] = {"predicted", "wall", "device", "auto", NULL};
const char *const pkv_page_table_modes[] = {"allocator", "generator", NULL};
const char *const pkv_scheduler_names[] = {"prefill_first", "chunked", NULL};
const char *const pkv_preemption_names[] = {"recompute", "swap", NULL};
const char *const pkv_client_names[] = {"server", "offline", NULL};
const char *const pkv_role_names[] = {"mixed", "prefill", "decode", NULL};
const char *const pkv_scale_metrics[] = {"queue_depth", "requests", "kv_use", "ttft", NULL};
const char *const pkv_workload_presets[] = {"bucketed", "homogeneous", "bimodal",
                                            "uniform",  "zipf",        NULL};
static const char *const bucket_names[] = {"exact", "pow2", NULL};
const char *const pkv_metadata_uploads[] = {"params", "copy", NULL};
const char *const pkv_cuda_graph_modes[] = {"auto", "false", "true", NULL};
const char *const pkv_prefill_attentions[] = {"auto", "flashinfer", "cublas", NULL};
/* model.dtype's pkvk_dtype values, model.kv_dtype's and "auto" (model.dtype's) */
static const char *const dtypes[] = {"fp16", "bf16", NULL};
const char *const pkv_kv_dtypes[] = {"fp16", "bf16", "fp8_e4m3", "auto", NULL};
static const char *const bad_row[] = {"stop", "skip", NULL};

#define BIG ((double)(INT64_MAX / 2))
/* Rows by kind: object, key, struct, field, then what the kind needs. */
#define I64(o, k, T, f, d, l, h, ...)                                                              \
    {                                                                                              \
        .obj = o, .name = k, .kind = PKV_KEY_I64, .off = offsetof(T, f), .def = d, .lo = l,        \
        .hi = h, __VA_ARGS__                                                                       \
    }
#define INT(o, k, T, f, d, l, h, ...)                                                              \
    {                                                                                              \
        .obj = o, .name = k, .kind = PKV_KEY_INT, .off = offsetof(T, f), .def = d, .lo = l,        \
        .hi = h, __VA_ARGS__                                                                       \
    }
#define NUM(o, k, T, f, d, l, h, ...)                                                              \
    {                                                                                              \
        .obj = o, .name = k, .kind = PKV_KEY_NUM, .off = offsetof(T, f), .def = d, .lo = l,        \
        .hi = h, __VA_ARGS__                                                                       \
    }
#define BOOL(o, k, T, f, d)                                                                        \
    { .obj = o, .name = k, .kind = PKV_KEY_BOOL, .off = offsetof(T, f), .def = d }
#define ENUM(o, k, T, f, d, c, ...)                                                                \
    {                                                                                              \
        .obj = o, .name = k, .kind = PKV_KEY_ENUM, .off = offsetof(T, f), .def_s = d,              \
        .choices = c, __VA_ARGS__                                                                  \
    }
#define STR(o, k, T, f, d, c, ...)                                                                 \
    {                                                                                              \
        .obj = o, .name = k, .kind = PKV_KEY_STR, .off = offsetof(T, f),                           \
        .size = sizeof(((T *)0)->f), .def_s = d, .choices = c, __VA_ARGS__                         \
    }
#define OBJ(o, k)                                                                                  \
    { .obj = o, .name = k, .kind = PKV_KEY_OBJ }
#define CUSTOM(o, k, ...)                                                                          \
    { .obj = o, .name = k, .kind = PKV_KEY_CUSTOM, __VA_ARGS__ }

#define C     pkv_config
#define EP    pkv_engine_profile
#define G     pkv_engine_graphs
#define A     pkv_arrival_spec
#define L     pkv_length_spec
#define T     pkv_trace_spec
#define W     pkv_workload_spec
#define OPEN  (PKV_WHEN(PKV_ARRIVAL_POISSON) | GW | PKV_WHEN(PKV_ARRIVAL_DETERMINISTIC))
#define GW    (PKV_WHEN(PKV_ARRIVAL_GAMMA) | PKV_WHEN(PKV_ARRIVAL_WEIBULL))
#define MMPP  PKV_WHEN(PKV_ARRIVAL_MMPP)
#define PIECE PKV_WHEN(PKV_ARRIVAL_PIECEWISE)
#define UNI   PKV_WHEN(PKV_LENGTH_UNIFORM)
#define ZIPF  PKV_WHEN(PKV_LENGTH_ZIPF)
#define BIMOD PKV_WHEN(PKV_LENGTH_BIMODAL)
#define LOGN  PKV_WHEN(PKV_LENGTH_LOGNORMAL)
#define MAXL  (1 << 24)
#define SPEC  (PKV_WHEN(PKV_SPEC_DRAFT) | PKV_WHEN(PKV_SPEC_EAGLE) | PKV_WHEN(PKV_SPEC_NGRAM))
/* Keys of one kind of model (engine/model.h): one check, one message (config.c). */
#define STUDY_ONLY  .kinds = 1u << PKV_KIND_STUDY_LAYER
#define SERVED_ONLY .kinds = 1u << PKV_KIND_SERVED_MODEL

static const pkv_key rows[] = {
    CUSTOM("", "name"),
    CUSTOM("", "description"),
    OBJ("", "model"),
    OBJ("", "workload"),
    OBJ("", "serving"),
    OBJ("", "route"),
    OBJ("", "run"),
    OBJ("", "sweep"),
    OBJ("", "slo"),
    OBJ("", "fleet"),
    OBJ("", "validation"),
    OBJ("", "plan"),

    /* A preset file of experiments/models/ holds these rows too; the defaults are the
     * study's single attention layer (hidden 0: no dense part). */
    CUSTOM("model", "preset"),
    STR("model", "name", C, model.name, "study-layer", NULL),
    STR("model", "source", C, model.source, "", NULL),
    INT("model", "layers", C, model.layers, 1, 1, 1024),
    INT("model", "hidden", C, model.hidden, 0, 0, 1 << 17),
    INT("model", "hq", C, model.hq, 32, 1, 256),
    INT("model", "hkv", C, model.hkv, 8, 1, 256),
    INT("model", "head_dim", C, model.head_dim, 128, 8, 512),
    INT("model", "intermediate", C, model.inter, 0, 0, 1 << 20),
    INT("model", "vocab", C, model.vocab, 0, 0, 1 << 22),
    INT("model", "tensor_parallel", C, model.tp, 1, 1, 64),
    INT("model", "page_size", C, model.page_size, 16, 1, 1024),
    ENUM("model", "dtype", C, model.dtype, "fp16", dtypes),
    ENUM("model", "kv_dtype", C, model.kv_dtype, "auto", pkv_kv_dtypes),
    NUM("model", "rope_theta", C, model.rope_theta, 10000, 0, 1e12, .lo_open = true),
    NUM("model", "norm_eps", C, model.norm_eps, 1e-5, 0, 1, .lo_open = true),
    I64("model", "mlp_intermediate", C, model.mlp_tail, 0, 0, 1 << 20, STUDY_ONLY),
    I64("model", "max_model_len", C, model.max_model_len, 0, 0, MAXL),
    INT("model", "experts", C, model.experts, 0, 0, 4096, SERVED_ONLY),
    INT("model", "experts_per_token", C, model.experts_per_token, 0, 0, 4096),
    INT("model", "expert_intermediate", C, model.expert_inter, 0, 0, 1 << 20),
    INT("model", "shared_experts", C, model.shared_experts, 0, 0, 64),
    INT("model", "dense_layers", C, model.dense_layers, 0, 0, 1024),
    BOOL("model", "expert_parallel", C, model.expert_parallel, false),
    OBJ("model", "expert_routing"),
    ENUM("model.expert_routing", "law", C, model.expert_law, "uniform", pkv_expert_law_names,
         .selects = true),
    NUM("model.expert_routing", "exponent", C, model.expert_exponent, 1, 0, 8,
        .when = PKV_WHEN(PKV_EXPERTS_ZIPF)),

    /* The preset and the trace change the other rows' meaning: config_workload.c. */
    CUSTOM("workload", "preset"),
    CUSTOM("workload", "classes"),
    OBJ("workload", "arrival"),
    OBJ("workload", "prompt"),
    OBJ("workload", "decode"),
    OBJ("workload", "trace"),
    OBJ("workload", "turns"),
    I64("workload", "num_requests", W, num_requests, 0, 0, BIG, .keep = true),
    I64("workload", "max_context", W, max_context, 131072, 2, MAXL),
    ENUM("workload", "over_context", W, over_context, "refuse", pkv_over_context_names),
    I64("workload", "shared_prefix_tokens", W, prefix_tokens, 0, 0, MAXL),
    NUM("workload", "shared_prefix_share", W, prefix_share, 1, 0, 1),
    I64("workload", "shared_prefix_groups", W, prefix_groups, 1, 1, 1 << 20),
    I64("workload", "warm_requests", W, warm_requests, 0, 0, BIG),
    NUM("workload", "session_think_s", W, think_s, 30, 1e-3, 1e7),

    ENUM("workload.arrival", "process", A, kind, NULL, pkv_arrival_names, .selects = true,
         .required = true),
    NUM("workload.arrival", "rate", A, rate, 1, 1e-6, 1e9, .required = true, .when = OPEN),
    NUM("workload.arrival", "cv", A, cv, 1, 1e-3, 20, .when = GW),
    I64("workload.arrival", "concurrency", A, concurrency, 1, 1, 1 << 20, .required = true,
        .when = PKV_WHEN(PKV_ARRIVAL_CLOSED)),
    NUM("workload.arrival", "start_jitter_s", A, start_jitter_s, 0, 0, 1e6,
        .when = PKV_WHEN(PKV_ARRIVAL_CLOSED)),
    NUM("workload.arrival", "rate_on", A, rate_on, 10, 0, 1e9, .when = MMPP),
    NUM("workload.arrival", "rate_off", A, rate_off, 0, 0, 1e9, .when = MMPP),
    NUM("workload.arrival", "mean_on_s", A, mean_on_s, 1, 1e-9, 1e9, .when = MMPP),
    NUM("workload.arrival", "mean_off_s", A, mean_off_s, 1, 1e-9, 1e9, .when = MMPP),
    CUSTOM("workload.arrival", "points", .when = PIECE),
    NUM("workload.arrival", "period_s", A, period_s, 0, 0, 1e12, .when = PIECE),

    /* A length object's default value is its caller's (1024 prompt, 128 decode). */
    ENUM(PKV_OBJ_LENGTH, "dist", L, kind, "fixed", pkv_length_names, .selects = true),
    I64(PKV_OBJ_LENGTH, "value", L, value, 0, 1, MAXL, .keep = true,
        .when = PKV_WHEN(PKV_LENGTH_FIXED)),
    I64(PKV_OBJ_LENGTH, "min", L, min, 1, 1, MAXL, .when = UNI | ZIPF),
    I64(PKV_OBJ_LENGTH, "max", L, max, 0, 1, MAXL, .def_key = "min", .when = UNI),
    I64(PKV_OBJ_LENGTH, "max", L, max, 65536, 1, MAXL, .when = ZIPF),
    CUSTOM(PKV_OBJ_LENGTH, "values", .when = PKV_WHEN(PKV_LENGTH_CYCLE)),
    I64(PKV_OBJ_LENGTH, "short", L, short_len, 8192, 1, MAXL, .when = BIMOD),
    I64(PKV_OBJ_LENGTH, "long", L, long_len, 65536, 1, MAXL, .when = BIMOD),
    NUM(PKV_OBJ_LENGTH, "p_long", L, p_long, 0.25, 0, 1, .when = BIMOD),
    NUM(PKV_OBJ_LENGTH, "median", L, median, 1024, 0, MAXL, .lo_open = true, .when = LOGN),
    NUM(PKV_OBJ_LENGTH, "sigma", L, sigma, 1, 0, 10, .lo_open = true, .when = LOGN),
    NUM(PKV_OBJ_LENGTH, "s", L, s, 1.1, 0, 10, .lo_open = true, .when = ZIPF),
    CUSTOM(PKV_OBJ_LENGTH, "trace", .when = PKV_WHEN(PKV_LENGTH_EMPIRICAL)),
    CUSTOM(PKV_OBJ_LENGTH, "field", .when = PKV_WHEN(PKV_LENGTH_EMPIRICAL)),

    STR(PKV_OBJ_TRACE, "path", T, path, NULL, NULL, .required = true),
    ENUM(PKV_OBJ_TRACE, "format", T, format, "auto", pkv_trace_format_names),
    CUSTOM(PKV_OBJ_TRACE, "columns"),
    NUM(PKV_OBJ_TRACE, "step_s", T, step_s, 0.02, 0, 1e6),
    NUM(PKV_OBJ_TRACE, "time_scale", T, time_scale, 1, 1e-9, 1e9),
    NUM(PKV_OBJ_TRACE, "rate_scale", T, rate_scale, 1, 1e-9, 1e9),
    NUM(PKV_OBJ_TRACE, "target_rate", T, target_rate, 0, 0, 1e9),
    I64(PKV_OBJ_TRACE, "first_n", T, first_n, 0, 0, BIG),
    CUSTOM(PKV_OBJ_TRACE, "window_s"),
    ENUM(PKV_OBJ_TRACE, "on_bad_row", T, skip_bad, "stop", bad_row),
    NUM(PKV_OBJ_TRACE, "spread_tick_s", T, spread_tick_s, 0, 0, 1e9),

    STR(PKV_OBJ_COLUMNS, "time", pkv_trace_columns, time, "", NULL),
    STR(PKV_OBJ_COLUMNS, "prompt", pkv_trace_columns, prompt, NULL, NULL, .required = true),
    STR(PKV_OBJ_COLUMNS, "decode", pkv_trace_columns, decode, NULL, NULL, .required = true),
    ENUM(PKV_OBJ_COLUMNS, "unit", pkv_trace_columns, unit, "s", pkv_time_unit_names),

    INT("serving", "max_active", C, max_active, 64, 1, 4096),
    INT("serving", "kv_pages", C, kv_pages, 65536, 1, INT32_MAX),
    NUM("serving", "gpu_memory_utilization", C, gpu_memory_utilization, 0.9, 0, 1, .lo_open = true),
    ENUM("serving", "admission", C, admission, "fcfs", pkv_admission_names),
    ENUM("serving", "scheduler", C, scheduler, "prefill_first", pkv_scheduler_names),
    INT("serving", "token_budget", C, token_budget, 8192, 1, 1 << 20),
    INT("serving", "max_prefill_chunk", C, max_prefill_chunk, 0, 0, 1 << 20),
    INT("serving", "prefill_batch_tokens", C, prefill_batch_tokens, 0, 0, 1 << 24),
    INT("serving", "scheduler_steps", C, scheduler_steps, 1, 1, 1024),
    ENUM("serving", "preemption", C, preemption, "recompute", pkv_preemption_names),
    INT("serving", "swap_pages", C, swap_pages, 0, 0, INT32_MAX),
    BOOL("serving", "prefix_caching", C, prefix_caching, false),
    CUSTOM("serving", "engine"),
    ENUM("serving", "client", C, client, "server", pkv_client_names),
    STR("serving", "attention_backend", C, attention_backend, "", NULL),
    INT("serving", "prefix_block_tokens", C, prefix_block_tokens, 512, 1, 1 << 16),
    OBJ("serving", "prefill"),
    OBJ("serving", "page_tables"),
    OBJ("serving", "speculative"),
    ENUM("serving.speculative", "method", C, spec.method, "none", pkv_spec_method_names,
         .selects = true, SERVED_ONLY),
    INT("serving.speculative", "tokens", C, spec.tokens, 3, 1, 16, .when = SPEC),
    NUM("serving.speculative", "acceptance", C, spec.acceptance, 0.7, 0, 1, .when = SPEC),
    NUM("serving.speculative", "acceptance_sd", C, spec.acceptance_sd, 0, 0, 0.5, .when = SPEC),
    STR("serving.speculative", "draft_model", C, spec.draft_model, "llama-3.2-1b", NULL,
        .when = PKV_WHEN(PKV_SPEC_DRAFT)),
    /* Affine prefill model: base + per_token * prompt tokens of the batch. The
     * defaults are of the order of a 7B model's prefill on one H200 (placeholders). */
    NUM("serving.prefill", "base_us", C, prefill_base_s, 2000, 0, 1e9, .scale = 1e-6),
    NUM("serving.prefill", "per_token_us", C, prefill_per_token_s, 0.1, 0, 1e6, .scale = 1e-6),
    BOOL("serving.prefill", "measure", C, prefill_measure, false),
    ENUM("serving.page_tables", "mode", C, page_tables, "allocator", pkv_page_table_modes),
    NUM("serving.page_tables", "hole_fraction", C, hole_fraction, 0, 0, 0.95),
    I64("serving.page_tables", "bucket_len", C, bucket_len, 0, 0, MAXL),

    STR("route", "policy", C, policy, "adaptive", pkv_policy_names),
    ENUM("route", "buckets", C, bucket_mode, "exact", bucket_names),
    STR("route", "calibration", C, calibration, "", NULL),
    STR("route", "gpu", C, gpu, "h200", NULL),
    CUSTOM("route", "overrides"),
    BOOL("route", "allow_other_gpu", C, allow_other_gpu, false),
    INT("route", "oracle_repeats", C, oracle_repeats, 5, 1, PKV_ORACLE_MAX_REPS),

    /* A fleet of replicas of this experiment behind a router (sim/fleet.h). */
    INT("fleet", "replicas", C, fleet.replicas, 1, 1, 100000),
    ENUM("fleet", "router", C, fleet.router, "round_robin", pkv_router_names),
    NUM("fleet", "router_latency_ms", C, fleet.latency_s, 0, 0, 1e6, .scale = 1e-3),
    NUM("fleet", "view_refresh_ms", C, fleet.view_refresh_s, 0, 0, 1e9, .scale = 1e-3),
    INT("fleet", "affinity_cap", C, fleet.affinity_cap, 64, 0, 1 << 30),
    ENUM("fleet", "decode_router", C, fleet.decode_router, "least_requests", pkv_router_names),
    CUSTOM("fleet", "pools"),
    OBJ("fleet", "autoscale"),
    STR("fleet.autoscale", "pool", C, fleet.autoscale.pool, "", NULL),
    INT("fleet.autoscale", "min", C, fleet.autoscale.min, 1, 1, 100000),
    INT("fleet.autoscale", "max", C, fleet.autoscale.max, 0, 0, 100000),
    ENUM("fleet.autoscale", "metric", C, fleet.autoscale.metric, "queue_depth", pkv_scale_metrics),
    NUM("fleet.autoscale", "target", C, fleet.autoscale.target, 0, 0, 1e9),
    NUM("fleet.autoscale", "interval_s", C, fleet.autoscale.interval_s, 10, 1e-3, 1e9),
    NUM("fleet.autoscale", "cold_start_s", C, fleet.autoscale.cold_start_s, 60, 0, 1e9),
    NUM("fleet.autoscale", "down_delay_s", C, fleet.autoscale.down_delay_s, 60, 0, 1e9),
    NUM("fleet.autoscale", "percentile", C, fleet.autoscale.percentile, 90, 1, 100),
    NUM("fleet.autoscale", "window_s", C, fleet.autoscale.window_s, 60, 1e-3, 1e9),
    CUSTOM(PKV_OBJ_POOL, "name"),
    CUSTOM(PKV_OBJ_POOL, "replicas"),
    CUSTOM(PKV_OBJ_POOL, "role"),
    CUSTOM(PKV_OBJ_POOL, "model"),
    CUSTOM(PKV_OBJ_POOL, "serving"),
    CUSTOM(PKV_OBJ_POOL, "route"),

    /* An engine profile's file (experiments/engines/): its host work per iteration, the
     * work on a request's way in and out, and (its "serving") the engine's defaults. */
    CUSTOM(PKV_OBJ_ENGINE, "name"),
    CUSTOM(PKV_OBJ_ENGINE, "description"),
    CUSTOM(PKV_OBJ_ENGINE, "sources"),
    CUSTOM(PKV_OBJ_ENGINE, "fit"),
    OBJ(PKV_OBJ_ENGINE, "host"),
    OBJ(PKV_OBJ_ENGINE, "request"),
    CUSTOM(PKV_OBJ_ENGINE, "version"),
    CUSTOM(PKV_OBJ_ENGINE, "serving"),
    CUSTOM(PKV_OBJ_ENGINE, "serving_offline"),
    CUSTOM(PKV_OBJ_ENGINE, "attention_backend"),
    CUSTOM(PKV_OBJ_ENGINE, "attention_backends"),
    OBJ(PKV_OBJ_ENGINE, "graphs"),
    OBJ(PKV_OBJ_ENGINE, "gpu"),
    OBJ(PKV_OBJ_ENGINE, "max_running"),
    NUM(PKV_OBJ_ENGINE ".max_running", "per_context", EP, max_running.per_context, 0, 0, 1e6),
    INT(PKV_OBJ_ENGINE ".max_running", "min", EP, max_running.min, 1, 1, 4096),
    INT(PKV_OBJ_ENGINE ".max_running", "max", EP, max_running.max, 4096, 1, 4096),
    NUM(PKV_OBJ_ENGINE ".max_running", "pool_share", EP, max_running.pool_share, 1, 0, 1,
        .lo_open = true),
    CUSTOM(PKV_OBJ_ENGINE ".graphs", "sizes"),
    INT(PKV_OBJ_ENGINE ".graphs", "step", G, step, 0, 0, 1 << 20),
    INT(PKV_OBJ_ENGINE ".graphs", "max", G, max, 0, 0, 1 << 24),
    BOOL(PKV_OBJ_ENGINE ".graphs", "mixed", G, mixed, false),
    NUM(PKV_OBJ_ENGINE ".host", "iteration_us", EP, host.iteration_s, 0, 0, 1e7, .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".host", "per_request_us", EP, host.per_request_s, 0, 0, 1e6, .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".host", "per_prompt_token_us", EP, host.per_prompt_token_s, 0, 0, 1e6,
        .scale = 1e-6),
    BOOL(PKV_OBJ_ENGINE ".host", "overlap", EP, host.overlap, false),
    NUM(PKV_OBJ_ENGINE ".host", "exposed_us", EP, host.exposed_s, 0, 0, 1e7, .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".gpu", "prefill_token_us", EP, host.prefill_token_s, 0, 0, 1e6,
        .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".host", "per_output_token_us", EP, host.per_output_token_s, 0, 0, 1e6,
        .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".host", "per_proposal_us", EP, host.per_proposal_s, 0, 0, 1e6,
        .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".host", "eager_layer_us", EP, host.eager_layer_s, 0, 0, 1e5, .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".host", "eager_allreduce_us", EP, host.eager_allreduce_s, 0, 0, 1e5,
        .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".request", "client_us", EP, client_s, 0, 0, 1e8, .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".request", "multi_gpu_us", EP, multi_gpu_s, 0, 0, 1e8, .scale = 1e-6),
    NUM(PKV_OBJ_ENGINE ".request", "frontend_us", EP, frontend_s, 0, 0, 1e7, .scale = 1e-6),
    BOOL(PKV_OBJ_ENGINE ".request", "frontend_holds", EP, frontend_holds, false),
    BOOL(PKV_OBJ_ENGINE ".request", "async_output", EP, async_output, false),

    I64("run", "max_steps", C, max_steps, 0, 0, BIG),
    NUM("run", "max_time_s", C, max_time, 0, 0, 1e12),
    I64("run", "warmup_steps", C, warmup_steps, 0, 0, BIG),
    CUSTOM("run", "seed"),
    STR("run", "output", C, output, "", NULL),
    ENUM("run", "backend", C, backend, "auto", pkv_backend_names),
    ENUM("run", "clock", C, clock, "auto", pkv_clock_names),
    I64("run", "check_every", C, check_every, 0, 0, BIG),
    I64("run", "check_first", C, check_first, 0, 0, BIG),
    ENUM("run", "cuda_graph", C, cuda_graph, "auto", pkv_cuda_graph_modes),
    ENUM("run", "metadata_upload", C, metadata_upload, "params", pkv_metadata_uploads),
    ENUM("run", "prefill_attention", C, prefill_attention, "auto", pkv_prefill_attentions),
    INT("run", "layers_measured", C, layers_measured, 0, 0, 1024, SERVED_ONLY),
    ENUM("run", "record", C, record, "full", pkv_record_level_names),
    CUSTOM("run", "percentiles"),

    /* Goodput counts the finished requests that meet every SLO set (0: not set). */
    NUM("slo", "ttft_ms", C, slo.ttft, 0, 0, 1e9, .scale = 1e-3),
    NUM("slo", "tpot_ms", C, slo.tpot, 0, 0, 1e9, .scale = 1e-3),
    NUM("slo", "e2el_ms", C, slo.e2el, 0, 0, 1e12, .scale = 1e-3),

    /* The validation section (experiments/validation/): sim/cmd/cmd_validate.c reads it. */
    CUSTOM("validation", "source"),
    CUSTOM("validation", "role"),
    CUSTOM("validation", "band_pct"),
    CUSTOM("validation", "band_note"),
    CUSTOM("validation", "fits_engine"),
    CUSTOM("validation", "note"),
    CUSTOM("validation", "expect"),
    CUSTOM(PKV_OBJ_SOURCE, "id"),
    CUSTOM(PKV_OBJ_SOURCE, "client"),
    CUSTOM(PKV_OBJ_SOURCE, "url"),
    CUSTOM(PKV_OBJ_SOURCE, "title"),
    CUSTOM(PKV_OBJ_SOURCE, "date"),
    CUSTOM(PKV_OBJ_SOURCE, "engine"),
    CUSTOM(PKV_OBJ_SOURCE, "version"),
    CUSTOM(PKV_OBJ_SOURCE, "gpu"),
    CUSTOM(PKV_OBJ_SOURCE, "model"),
    CUSTOM(PKV_OBJ_SOURCE, "precision"),
    CUSTOM(PKV_OBJ_SOURCE, "settings"),
    CUSTOM(PKV_OBJ_SOURCE, "command"),
    CUSTOM(PKV_OBJ_SOURCE, "assumed"),
    CUSTOM(PKV_OBJ_EXPECT, "figure"),
    CUSTOM(PKV_OBJ_EXPECT, "value"),
    CUSTOM(PKV_OBJ_EXPECT, "unit"),
    CUSTOM(PKV_OBJ_EXPECT, "band_pct"),
    CUSTOM(PKV_OBJ_EXPECT, "label"),

    /* The plan section: sim/cmd/cmd_plan.c reads it (pkvsim plan). */
    CUSTOM("plan", "slo"),
    CUSTOM("plan", "loads"),
    CUSTOM("plan", "candidates"),
    CUSTOM("plan", "replicas"),
    CUSTOM("plan", "prices"),
    CUSTOM("plan", "held_out"),
    CUSTOM(PKV_OBJ_PLAN_SLO, "figure"),
    CUSTOM(PKV_OBJ_PLAN_SLO, "max_ms"),
    CUSTOM(PKV_OBJ_PLAN_SLO, "min"),
    CUSTOM(PKV_OBJ_PLAN_REPLICAS, "path"),
    CUSTOM(PKV_OBJ_PLAN_REPLICAS, "min"),
    CUSTOM(PKV_OBJ_PLAN_REPLICAS, "max"),

    /* The sweep section: sim/cmd/sweep.c reads it (these rows check and document it). */
    CUSTOM("sweep", "mode"),
    CUSTOM("sweep", "axes"),
    CUSTOM(PKV_OBJ_AXIS, "path"),
    CUSTOM(PKV_OBJ_AXIS, "values"),
    CUSTOM(PKV_OBJ_AXIS, "range"),
    CUSTOM(PKV_OBJ_RANGE, "from"),
    CUSTOM(PKV_OBJ_RANGE, "to"),
    CUSTOM(PKV_OBJ_RANGE, "step"),
};

pkv_keys pkv_config_keys(void) {
    return PKV_KEYS(rows);
}
