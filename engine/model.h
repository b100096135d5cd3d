/* The served model: its shape (a preset of experiments/models/ or the experiment's
 * own keys) and the cost model of its dense part (norms, GEMMs, RoPE and K/V append,
 * the LM head and sampling), per decode step and per prefill batch.
 *
 * A model with hidden = 0 is the study's single attention layer: no dense part, the
 * step is that layer's attention alone (and the optional MLP tail, mlp_tail).
 *
 * Per GPU under tensor parallelism tp: query and KV heads, the MLP width and the
 * vocabulary divide by tp; each layer adds two all-reduces of rows x hidden FP16
 * values, modelled (one GPU runs) as
 *   allreduce_us + 2 (tp - 1) / tp * bytes / allreduce_gbps
 * from the calibration.
 *
 * A mixture-of-experts model (experts > 0): after its first dense_layers layers (their
 * MLP `inter` wide), each layer's MLP is a router over `experts` experts, each token
 * sent to experts_per_token of them (engine/moe.h: which ones, by model.expert_routing's
 * law), each expert a gated MLP expert_inter wide, beside shared_experts of that width
 * that every token passes. Under tensor parallelism each expert's width divides by tp;
 * expert parallel (vLLM's --enable-expert-parallel over the same GPUs), each GPU holds
 * experts / tp whole experts instead, and a layer waits for its busiest GPU (the
 * all-reduces as tensor parallelism's: the tokens are on every GPU after attention). */
#ifndef PKV_MODEL_H
#define PKV_MODEL_H

#include "calib.h"
#include "moe.h"
#include "pkv_route.h"
#include "pkvk.h"

typedef struct pkv_model {
    char name[64];    /* the preset's name, or "custom" */
    char source[512]; /* where the shape comes from (the model's published config) */
    int dtype;        /* pkvk_dtype of the weights, activations, Q and O: FP16 or BF16 */
    int kv_dtype;     /* pkvk_dtype of the KV caches (FP8 E4M3: a scale per KV head and page) */
    int layers, hidden, hq, hkv, head_dim, inter, vocab, tp, page_size;
    int experts, experts_per_token, expert_inter, shared_experts, dense_layers;
    bool expert_parallel;   /* the experts spread whole over the tp GPUs (else each sliced) */
    int expert_law;         /* pkv_expert_law */
    double expert_exponent; /* Zipf's exponent */
    uint64_t expert_seed;   /* the experts' draws' seed (run.seed) */
    double rope_theta, norm_eps;
    int64_t mlp_tail;      /* study layer only: the gated MLP tail's width (0: none) */
    int64_t max_model_len; /* the model's own context (its config's max_position_embeddings):
                              workload.max_context's default and bound; 0: unknown */
    /* The prefill attention's kernel (PKVK_PREFILL_*, run.prefill_attention); the
     * engine resolves AUTO: on the cuda backend to the kernel the build runs, on the
     * others to FlashInfer's where the calibration has its throughput. */
    int prefill_attn;
} pkv_model;

/* A full model's forward over prompt tokens holds this many at most (its activation
 * rows, at least the batch's rows): the cpu and cuda backends run a longer prefill
 * batch as forwards of this many, and prefill_first's batches are this large by
 * default (serving.prefill_batch_tokens) so that each prompt's first token is its own
 * forward's. */
enum { PKV_FORWARD_TOKENS = 8192 };

/* What a kind of model can do, decided once from its shape (pkv_model_kind_of): the
 * study's single attention layer (hidden = 0) or a served model. Every difference
 * between the two is a field here, and code asks for the capability it needs, never
 * which kind it holds; a new model feature adds a field, not a branch. */
enum { PKV_KIND_STUDY_LAYER, PKV_KIND_SERVED_MODEL, PKV_KIND_COUNT };
typedef struct pkv_model_kind {
    int id;            /* PKV_KIND_*: keys that apply to one kind carry its bit (pkv_key.kinds) */
    const char *name;  /* "study_layer", "served_model": its section of a calibration file */
    const char *what;  /* in messages: "a served model (model.hidden > 0)" */
    const char *label; /* the run's banner, after the model's name ("": none) */
    bool weights;      /* a dense part: GEMMs, norms, the LM head, weights replicas share */
    bool kv_synthetic; /* the cpu and cuda backends run the layer alone over KV pools of
                          random values; else the model's forward writes its KV */
    bool prefill_samples;   /* a prefill samples the prompt's first token */
    bool prefill_predicted; /* a prefill's time is the cost model's (else serving.prefill's
                               placeholder, unless the cuda backend measures it) */
    bool prefill_attention; /* a prefill runs a causal attention kernel (run.prefill_attention) */
    bool mixed;             /* prompt chunks ride in decode steps (serving.scheduler chunked) */
    int graph_mode;         /* pkv_route_graph: a graph replays a fixed grid, or a captured step */
    bool graphs_default;    /* run.cuda_graph auto replays graphs */
    /* Under graphs, adaptive's context gates still apply (they were fitted against
     * FlashInfer's paths, which a fixed grid's replay leaves out of the candidates). */
    bool graph_context_gate;
    int32_t prefill_batch_tokens; /* prefill_first's batch default (0: the whole batch) */
} pkv_model_kind;

/* The kinds by id, and the one a model is (the only place that asks its shape). */
extern const pkv_model_kind *const pkv_model_kinds[PKV_KIND_COUNT];
static inline const pkv_model_kind *pkv_model_kind_of(const pkv_model *m) {
    return pkv_model_kinds[m->hidden > 0 ? PKV_KIND_SERVED_MODEL : PKV_KIND_STUDY_LAYER];
}
/* The shape's rules (heads, widths, tensor parallelism, a mixture of experts' keys):
 * 0, or -1 with an error naming the key. */
int pkv_model_check(const pkv_model *m, pkv_err *e);
/* The layers whose MLP is a mixture of experts (0: a dense model). */
static inline int pkv_model_moe_layers(const pkv_model *m) {
    return m->experts > 0 ? m->layers - m->dense_layers : 0;
}
/* The section of a calibration file a run of this model reads (pkv_calib_load). */
static inline const char *pkv_model_calib_section(const pkv_model *m) {
    return pkv_model_kind_of(m)->name;
}
/* The attention shape one GPU runs, and the dense part's (kernels/pkvk_model.h). */
pkvk_shape pkv_model_attn_shape(const pkv_model *m);
pkvk_model_shape pkv_model_gpu_shape(const pkv_model *m);
/* Its routed experts as one GPU holds them (each sliced tensor_parallel ways; experts 0: a
 * dense model), its MoE layers from dense_layers on. */
pkvk_moe_shape pkv_model_moe_shape(const pkv_model *m);

/* The dense part of one forward over `tokens` token rows (decode: one per row;
 * prefill: the prompts' tokens), of which `heads` rows go through the LM head. */
typedef struct pkv_dense_cost {
    double flops;                        /* GEMM FLOPs */
    double weight_bytes;                 /* weights read (each once per forward) */
    double act_bytes;                    /* activations read and written by the GEMMs */
    int32_t launches;                    /* GEMMs and small kernels */
    double t_gemm, t_small, t_allreduce; /* a MoE layer's: in t_gemm and t_small */
    double t_predicted;                  /* seconds: the sum */
    /* A MoE model's: experts with tokens, per MoE layer on average; the most tokens on
     * one expert in one layer */
    double experts_active, expert_tokens_max;
} pkv_dense_cost;

/* One MoE layer of m alone as pkvsim bench model times it (its router, experts, permutation,
 * SiLU and combine; no attention): `tokens` tokens spread evenly over `active` experts. */
double pkv_model_moe_layer_time(const pkv_model *m, const pkv_calib *c, double tokens,
                                double active);
/* The grouped expert GEMMs' constants from one MoE layer of m timed alone (pkvsim bench
 * model, calibrate): at rows[i] token rows with active[i] experts active it took
 * seconds[i] (i < n). *us (moe_gemm_us): each grouped call's fixed cost, half what the
 * layers of at most 64 rows took beyond the rest of the layer's cost at c (its experts'
 * weights streamed), their mean; *share (moe_gemm_share): the grouped GEMMs' share of the
 * dense GEMMs' rate that prices the widest layer as measured (0: the dense rate already
 * does); *at (moe_gemm_tflops_at): for each layer above 64 rows, by its rows an expert
 * (rows x experts a token / active), the grouped GEMMs' rate that prices it as measured. */
void pkv_model_moe_fit(const pkv_model *m, const pkv_calib *c, const int *rows,
                       const double *active, const double *seconds, int n, double *us,
                       double *share, pkv_rates *at);

/* One GEMM of m x k by k x n (FP16): max(FLOPs / the GEMM rate at m rows, bytes / gemm
 * bandwidth) + its fixed cost. */
double pkv_gemm_time(const pkv_calib *c, double m, double k, double n);
/* A MoE model's expert layers take their tokens per expert from `moe`, one draw a
 * layer; NULL: the expected spread of a uniform law (E (1 - (1 - k/E)^tokens) experts
 * active, an equal share each), as the plan and the per-token figures use. A grouped
 * GEMM (one launch over the experts) costs each active expert's GEMM over its tokens,
 * as pkv_gemm_time without the fixed cost, plus one fixed cost: the GEMM terms are the
 * dense ones, not a grouped GEMM's own measurement (not calibrated yet). */
void pkv_model_dense_cost(const pkv_model *m, const pkv_calib *c, int64_t tokens, int64_t heads,
                          pkv_moe *moe, pkv_dense_cost *out);
/* Causal attention of a prefill over prompt pieces of these lengths, each from
 * position starts[i] of its prompt on (NULL: whole prompts) and attending to every
 * earlier position (one GPU, every layer), as the GPU's prefill attention runs it
 * (kernels/pkvk_model.h): FlashInfer's fused kernel, the FLOPs of QK^T and PV over
 * the causal triangle at the calibration's prefill_attn_tflops (where not measured,
 * gemm_tflops); cuBLAS's, those FLOPs
 * at the gemm throughput plus the scores' traffic at beta: each score is written
 * (FP32) and read by the softmax, which writes P (FP16) for PV to read: 12 bytes, or
 * 20 where a prompt's row of keys is longer than PKVK_SOFTMAX_SMEM_KEYS and the
 * softmax reads it three times. */
double pkv_model_prefill_attn_time(const pkv_model *m, const pkv_calib *c, const int32_t *lens,
                                   const int32_t *starts, int32_t n);
/* The attention scores of those pieces in every layer: layers x query heads x each
 * query's keys (its prompt's positions up to its own), summed. */
double pkv_model_prefill_scores(const pkv_model *m, const int32_t *lens, const int32_t *starts,
                                int32_t n);
/* Bytes on the GPU: weights, and KV pool per page over all layers. */
double pkv_model_weight_bytes(const pkv_model *m);
double pkv_model_page_bytes(const pkv_model *m);
/* What a step reads and computes per token, per GPU (the summary's and the resolved
 * experiment's figures; the study layer: no weights, no dense FLOPs, its layer's KV). */
typedef struct pkv_model_figures {
    double weight_bytes, kv_bytes_per_token, dense_flops_per_token;
} pkv_model_figures;
pkv_model_figures pkv_model_figures_of(const pkv_model *m);

#endif
