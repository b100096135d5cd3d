/* Calibration: the constants of the cost model and the route policy, per GPU. */
#ifndef PKV_CALIB_H
#define PKV_CALIB_H

#include "jsonv.h"
#include "pkv_keys.h"
#include "pkv_attr.h"
#include "pkvk.h"

/* The structured cost model's constants of one route (engine/cost.h), fitted by
 * pkvsim fit; set false: the route uses the study's formula. */
enum {
    PKV_RM_CTA_GBPS = 0,       /* GB/s one CTA streams */
    PKV_RM_CTA_US,             /* us per CTA wave (pipeline fill, early exit) */
    PKV_RM_LAUNCH_US,          /* us per launch */
    PKV_RM_FIXED_US,           /* us per step */
    PKV_RM_MERGE_GBPS,         /* GB/s of the partial states' traffic */
    PKV_RM_PEAK_GBPS,          /* GB/s the route's kernels stream at most (at most beta) */
    PKV_RM_HOST_US,            /* us of host wall a step of the route takes beyond its device time
                                  (not part of the device time; the policy adds it on a wall clock) */
    PKV_RM_HOST_US_PER_KTOKEN, /* us of host wall more per 1000 context tokens of the step
                                  (page indices a route builds and uploads; optional, 0) */
    PKV_ROUTE_MODEL_PARAMS
};
enum { PKV_GEMM_RATES = 16 }; /* gemm_tflops_at, moe_gemm_tflops_at: widths at most */

/* A measured rate by width: TFLOP/s at these token rows (ascending), interpolated in log
 * rows and held beyond the ends (pkv_rates_at). */
typedef struct pkv_rates {
    int n;
    double rows[PKV_GEMM_RATES], tflops[PKV_GEMM_RATES];
} pkv_rates;

/* gemm_tflops_by_model: a model's own GEMM rate table at a tensor parallelism (its
 * GEMMs' shapes, measured by pkvsim bench model), taken in place of gemm_tflops_at by a
 * run of that model (pkv_calib_use_model). */
enum { PKV_MODEL_RATES = 8 };
typedef struct pkv_model_rates {
    char model[64]; /* the preset's name */
    int tp;         /* its tensor parallelism */
    pkv_rates at;
} pkv_model_rates;

typedef struct pkv_route_model {
    bool set;
    double v[PKV_ROUTE_MODEL_PARAMS];
} pkv_route_model;
/* The largest value a route model's constant takes in a file. */
#define PKV_ROUTE_MODEL_MAX 1e6
/* The constants' names in a calibration file's route_model.ROUTE object, in the
 * enum's order, NULL-terminated. */
extern const char *const pkv_route_model_keys[PKV_ROUTE_MODEL_PARAMS + 1];

/* The adaptive policy's gate for one GQA group size G: the PersistentKV routes are
 * candidates of a step only where its G has a gate and its context reaches
 * min_context; one is then chosen over the best baseline only when that baseline's
 * predicted time is at least margin times its own. */
typedef struct pkv_gate {
    bool on;
    int64_t min_context;
    double margin_small; /* steps of at most margin_small_rows rows */
    double margin_large;
} pkv_gate;
enum { PKV_GATE_GROUPS = 11 };   /* G = 1 to 8, 16, 32, 64 (pkv_calib_group_index) */
#define PKV_GATE_FP8 "fp8_e4m3/" /* a gates key's prefix: FP8 KV's gate of the G after it */
/* Query tokens a row the gates distinguish: 1 (decode steps), and speculative decoding's
 * verify steps of 2 to 16 ("qN/" before a gates key: the gate of steps of N a row) */
enum { PKV_GATE_QLENS = 16 };

typedef struct pkv_calib {
    char gpu_name[128]; /* GPU model the constants were measured on */
    char driver[64];
    char date[32];
    bool placeholder;         /* true: not measured, values are guesses */
    double beta;              /* bytes/second: streaming read bandwidth */
    double lambda;            /* seconds per kernel launch */
    double c_min;             /* decode CTAs per SM needed to saturate bandwidth */
    int sm_count;             /* multiprocessors */
    int gqa_group;            /* G the PersistentKV routes are calibrated for */
    int64_t min_context;      /* tokens: PersistentKV gate on a step's context */
    int margin_small_rows;    /* steps with at most this many rows use margin_small */
    double margin_small;      /* promotion margin for B4-like steps */
    double margin_large;      /* promotion margin for B8-like (larger) steps */
    int min_split_tiles;      /* smallest split the planners make, in 32-token tiles */
    int resident_ctas_per_sm; /* decode CTAs resident on one SM: a wave is this x sm_count */
    int flashinfer_decode_ctas_per_sm; /* FlashInfer's decode occupancy (its planner's grid) */
    double wave_balance_min; /* a one-wave plan less balanced than this goes over two waves */
    double kv_fp8_cta_gbps;  /* FP8 KV: the most one PersistentKV CTA streams (the codes'
                                widening costs instructions), bytes/s */
    double route_scale[PKV_ROUTE_COUNT];          /* fitted factor on each route's modelled time */
    pkv_route_model route_model[PKV_ROUTE_COUNT]; /* the structured model, where fitted */
    /* route_model_by_group: per GQA group size (log2 G), route models fitted to that
     * group's steps alone (pkvsim calibrate --groups); pkv_calib_use_group puts a run's
     * group's into route_model */
    pkv_route_model group_model[PKV_GATE_GROUPS][PKV_ROUTE_COUNT];
    /* route_model_by_q: per query tokens a row q (2 to PKV_GATE_QLENS, at [q - 1]), route
     * models of verify steps of q (pkvsim fit: a route's decode model with its CTA's
     * constants refitted to them; a verify's query rows share a CTA's KV); a step takes
     * its q's, else the nearest shorter q's, else route_model (pkv_calib_route_model) */
    pkv_route_model q_model[PKV_GATE_QLENS][PKV_ROUTE_COUNT];
    /* flashinfer_decode_ctas_by_group: FlashInfer's decode occupancy per G (0: not
     * measured; pkv_calib_use_group takes the run's group's) */
    int fi_ctas_group[PKV_GATE_GROUPS];
    /* The file's `gates` object, one per G (gates_set); without one, a single gate for
     * gqa_group from min_context_tokens and the margins. */
    bool gates_set;
    /* [0][0][k]: group k's; [1][0][k]: FP8 KV's own, where the file names them
     * ("fp8_e4m3/G"); [.][q - 1][k]: those of verify steps of q query tokens a row ("qN/G",
     * "qN/fp8_e4m3/G"): pkv_calib_gate says which a step takes */
    pkv_gate gates[2][PKV_GATE_QLENS][PKV_GATE_GROUPS];
    /* The served model's dense part (engine/model.h). */
    double gemm_tflops; /* FP16 GEMM throughput at large widths, TFLOP/s */
    /* gemm_tflops_at: the model's GEMMs' measured rate at these token widths (pkvsim
     * calibrate); none: the rate is gemm_tflops at every width */
    pkv_rates gemm_at;
    pkv_model_rates by_model[PKV_MODEL_RATES]; /* gemm_tflops_by_model's tables */
    int n_by_model;
    double gemm_gbps;       /* bytes a GEMM streams per second at decode widths, GB/s */
    double gemm_us;         /* fixed cost of one GEMM, us */
    double small_kernel_us; /* fixed cost of one norm, RoPE, SiLU or sampling kernel, us */
    /* A mixture's grouped expert GEMMs as the cuda backend launches them (cuBLAS's grouped
     * call, eagerly): the fixed cost of each of a MoE layer's two, us, and their FLOP rate
     * at an expert's rows: moe_gemm_tflops_at's, measured by rows per expert (pkvsim
     * calibrate), else a share of the dense GEMMs' (0: the dense GEMMs' gemm_us and rate) */
    double moe_gemm_us, moe_gemm_share;
    pkv_rates moe_at;
    /* A forward over prompt tokens (a prefill batch, a step's chunks): its measured time
     * beyond the rooflines above, per forward, per prompt token and per attention score
     * (of every layer; pkvsim fit) */
    double prefill_fixed_us, prefill_token_us, prefill_score_ps;
    double prefill_row_us; /* per decode row of an iteration that carries prompt chunks */
    /* FlashInfer's fused prefill attention: TFLOP/s over the causal FLOPs of QK^T and
     * PV (pkvsim calibrate; 0: not measured, the model takes cuBLAS's kernel) */
    double prefill_attn_tflops;
    double allreduce_gbps; /* tensor parallelism: all-reduce bus bandwidth (modelled) */
    double allreduce_us;   /* tensor parallelism: all-reduce latency (modelled) */
    double swap_gbps;      /* preemption by swap: the host link's copy bandwidth (modelled) */
    double swap_us;        /* preemption by swap: fixed cost of one request's copy (modelled) */
    /* A fleet's prefill/decode disaggregation: the link a prefill replica sends KV over
     * (modelled): bytes/second it carries, shared by the transfers on it; seconds a
     * transfer takes besides its bytes; transfers it carries at once (more wait) */
    double kv_link_bps, kv_link_s;
    int kv_link_streams;
    double memory_gib; /* the GPU's memory (0: not given: pools are not checked) */
    char *json;        /* the calibration as applied (pkv_calib_load; owned) */
} pkv_calib;

/* t's rate at `width` rows (none: otherwise). */
double pkv_rates_at(const pkv_rates *t, double width, double otherwise);
/* The FP16 GEMM rate (TFLOP/s) at `width` token rows: gemm_tflops_at's, else gemm_tflops. */
double pkv_calib_gemm_tflops(const pkv_calib *c, double width);
/* A run of `model` (a preset's name) at tensor parallelism `tp`: gemm_tflops_by_model's
 * table for it, where the file has one, becomes gemm_tflops_at. */
void pkv_calib_use_model(pkv_calib *c, const char *model, int tp);
/* Add gemm_tflops_at and moe_gemm_tflops_at to a calibration object being written (those
 * it has). */
void pkv_calib_gemm_rates_json(const pkv_calib *c, cJSON *root);

/* The rows of a calibration file's keys (base/pkv_keys.h). */
pkv_keys pkv_calib_keys(void);
/* Built-in defaults (placeholders), as used for keys a file omits. */
void pkv_calib_defaults(pkv_calib *c);
/* Load and validate; errors name the file and JSON path. A file holds one GPU's
 * constants at its top level and, for a GPU fitted for both kinds of run, a section
 * per kind (pkv_calib_section: "study_layer", the study's single attention layer;
 * "served_model", a full model's steps) whose keys replace the top level's for runs of
 * that kind. `section` names the kind's (NULL: the top level alone); a file with
 * sections but not that one is an error. c->json receives the calibration as applied:
 * a file without sections verbatim, else its top level with the section's keys in it
 * and "section" naming the section. */
int pkv_calib_load(pkv_calib *c, const char *path, const char *section, pkv_err *e);
/* The same from a file's text (taken over: freed on failure, else kept or replaced in
 * c->json); path names it in errors. */
int pkv_calib_load_text(pkv_calib *c, char *text, const char *path, const char *section,
                        pkv_err *e);
/* The sections of a calibration file (a model kind's name, engine/model.h). */
#define PKV_CALIB_STUDY_LAYER  "study_layer"
#define PKV_CALIB_SERVED_MODEL "served_model"
/* The section of a calibration file a run reads: a served (full) model's, or the
 * study layer's. */
const char *pkv_calib_section(bool served_model);
/* Whether a calibration file's object has sections; whether it serves a run of
 * `section`'s kind (it has no sections, or that one). */
bool pkv_calib_sectioned(const cJSON *root);
bool pkv_calib_serves(const cJSON *root, const char *section);
/* Apply the keys of `o` (a calibration object, or an experiment's overrides) on top
 * of the current values; unknown keys and bad values are errors naming `path`. */
int pkv_calib_apply(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e);
void pkv_calib_free(pkv_calib *c);
/* Into gates object g: the calibration's gates of q_min query tokens a row and more
 * (1: all; 2: the verify steps' "qN/..." ones), replacing members of the same names. */
void pkv_calib_gates_json(const pkv_calib *c, cJSON *g, int q_min);
/* Add route_model_by_q (the verify steps' route models, where any) to root. */
void pkv_calib_verify_models_json(const pkv_calib *c, cJSON *root);
/* Add the fitted route models (and the gates, where the calibration has its own) to
 * a calibration object being written. */
void pkv_calib_route_model_json(const pkv_calib *c, cJSON *root);
/* The index of GQA group size G (1 to 8, 16, 32, 64) in the per-group arrays (gates,
 * group_model, fi_ctas_group); -1 for any other G. pkv_calib_group_of: its inverse. */
int pkv_calib_group_index(int G);
int pkv_calib_group_of(int k);
/* The gate of a step of group size G over KV of kv_dtype with q_len query tokens a row (a
 * verify step's k + 1; 1: decode) (its `on` false: none): the step's own query length's,
 * else the nearest shorter one's that the file names, down to the decode gate; over FP8
 * KV, FP8's own of those first, then the 16-bit ones (the crossover context moves with
 * both). */
pkv_gate pkv_calib_gate(const pkv_calib *c, int G, int kv_dtype, int q_len);
/* The route model that prices route r's steps of q_len query tokens a row (1: decode):
 * route_model_by_q's of q_len, else of the nearest shorter q it names, else route_model's
 * (not set where none is fitted). */
const pkv_route_model *pkv_calib_route_model(const pkv_calib *c, pkv_route r, int q_len);
/* A run at GQA group size G: its group's route models (route_model_by_group), where
 * the file has them, replace route_model's for those routes, and its FlashInfer
 * decode occupancy (flashinfer_decode_ctas_by_group) flashinfer_decode_ctas_per_sm. */
void pkv_calib_use_group(pkv_calib *c, int G);

/* Where the FlashInfer routes are built and a GPU is present, take their planner's
 * decode occupancy from the GPU (their plans must match FlashInfer's own). */
void pkv_calib_flashinfer_occupancy(pkv_calib *c, const pkvk_shape *s);

/* The constants as named attributes for the recorder's /calibration, in the file's
 * units and names (route_scale_ROUTE for the scales): fills up to cap entries (at
 * least PKV_CALIB_ATTRS) and returns how many, -1 when cap is short. */
enum { PKV_CALIB_ATTRS = 40 + 2 * PKV_GEMM_RATES + PKV_ROUTE_COUNT * (1 + PKV_ROUTE_MODEL_PARAMS) };
int pkv_calib_attrs(const pkv_calib *c, pkv_attr *a, int cap);

#endif
