/* Mixture of experts: which of a model's experts a step's tokens choose.
 *
 * Each token of a MoE layer goes to experts_per_token (k) distinct experts of `experts`
 * (E), drawn from the routing law (model.expert_routing): uniform, or expert r (by
 * rank) chosen with weight (r + 1)^-exponent (Zipf), as a router that prefers a few
 * experts does. The law, not the weights, decides the time: on one GPU a step reads
 * every expert some token chose and runs one GEMM per expert over its tokens, so the
 * step's time moves with how many experts are active and how their tokens spread.
 *
 * A layer's draw is exact (k distinct experts per token, by rejection) where the
 * step's tokens are few (tokens x k <= PKV_MOE_EXACT_DRAWS); above that it draws the
 * experts' counts at once, multinomially over each expert's probability of being among
 * a token's k (for Zipf estimated once at set-up), then caps each at the step's tokens:
 * the counts sum to tokens x k either way. */
#ifndef PKV_MOE_H
#define PKV_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#define PKV_MOE_EXACT_DRAWS 4096
#define PKV_MOE_MAX_EP                                                                             \
    64 /* GPUs an expert-parallel layer spreads over (tensor_parallel's most)                      \
        */

typedef enum pkv_expert_law { PKV_EXPERTS_UNIFORM = 0, PKV_EXPERTS_ZIPF } pkv_expert_law;
extern const char *const pkv_expert_law_names[]; /* model.expert_routing.law's names */

typedef struct pkv_moe {
    int experts, k;
    gsl_rng *r;
    gsl_ran_discrete_t *law; /* one expert drawn from the law */
    double *incl;            /* each expert's share of the k picks (sums to 1) */
    uint32_t *stamp;         /* the token that last chose each expert (the exact draw) */
    uint32_t token;
    unsigned int *count; /* the multinomial draw's */
    double *counts;      /* the last draw: tokens per expert */
    int64_t real_tokens; /* of the next cost's tokens, the requests' (pkv_model_dense_cost; 0:
                            all): the rest are a CUDA graph's padding rows */
    bool replayed;       /* the next cost's forward is replayed from a CUDA graph */
    int32_t *place;      /* each expert's slot in a fixed shuffle of them: expert parallel,
                            GPU g of G holds the slots [g E / G, (g + 1) E / G), so that the
                            law's favourites (its first ranks) fall on GPUs at random */
    /* a measuring backend's last forward (pkv_moe_keep, pkv_moe_route): each MoE layer's
     * counts in the order routed, for the cost of the same step to take */
    int32_t *kept;
    int kept_cap, kept_layers, kept_last; /* layers it holds; routed; the last layer routed */
    int64_t kept_tokens;                  /* their tokens (-1: none) */
} pkv_moe;

/* E experts, k a token, the law (exponent: Zipf's), seeded from (seed, the experts'
 * stream). 0, or -1 on a lack of memory (nothing held). */
int pkv_moe_init(pkv_moe *m, int experts, int k, pkv_expert_law law, double exponent,
                 uint64_t seed);
void pkv_moe_free(pkv_moe *m);
/* Reseed the draws of a fleet's replica r from (seed + r, the experts' stream), so that
 * replicas draw apart (the experts' placement stays pkv_moe_init's). */
void pkv_moe_seed(pkv_moe *m, uint64_t seed, uint32_t replica);
/* One layer's draw for `tokens` tokens: m->counts[e] tokens on expert e (their sum
 * tokens x k). */
void pkv_moe_draw(pkv_moe *m, int64_t tokens);
/* A measuring backend's routing (pkvk_moe_route, ctx a pkv_moe): a draw of each MoE
 * layer's counts for the forward's tokens, as the model backend's; kept where
 * pkv_moe_keep asked (a forward routes its layers in order: a layer not above the last one
 * routed begins the next forward). */
int pkv_moe_route(void *ctx, int l, int tokens, int32_t *counts);
/* Keep the draws of a measuring backend's last forward, up to `layers` MoE layers, so that
 * the cost of the step it ran reads the routing the backend ran (its /steps columns too).
 * 0, or -1 on a lack of memory. */
int pkv_moe_keep(pkv_moe *m, int layers);
/* MoE layer l's draw (counted from the first) for `tokens` tokens and `pad` copies of one
 * more, as pkv_moe_draw_padded: the kept forward's layer l where it routed these tokens,
 * else a new draw. */
void pkv_moe_draw_layer(pkv_moe *m, int l, int64_t tokens, int64_t pad);
/* The kept forward is spent (its step's cost taken). */
void pkv_moe_forget(pkv_moe *m);
/* The same for `tokens` tokens and `pad` copies of one more (a CUDA graph's padding rows:
 * one token's input, so one token's k experts). */
void pkv_moe_draw_padded(pkv_moe *m, int64_t tokens, int64_t pad);

#endif
