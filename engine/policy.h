/* Route policies: given the candidate routes' counters for a step, pick one.
 * A policy is a small interface: which routes it wants planned and predicted, and
 * a choice among them. */
#ifndef PKV_POLICY_H
#define PKV_POLICY_H

#include "cost.h"

typedef struct pkv_step_view {
    int32_t rows;
    int64_t context_tokens;
    int gqa_group;
    int kv_dtype;   /* pkvk_dtype of the KV cache (its own gates: pkv_calib_gate) */
    int q_len;      /* query tokens a row: a verify step's k + 1 (its own gates); 0 or 1: one */
    uint32_t valid; /* bit r: candidates[r] was planned */
    /* The context gates are off: they were fitted against FlashInfer's paths, which
     * a full model's graph replay leaves out (the prediction and the margin decide a
     * promotion over ref_paged). */
    bool no_context_gate;
    pkv_counters cand[PKV_ROUTE_COUNT];
} pkv_step_view;

/* Why adaptive chose what it chose (the /steps column policy_why, bits). */
enum {
    PKV_WHY_NO_GATE = 1, /* the calibration has no gate for the step's G */
    PKV_WHY_CONTEXT = 2, /* the step's context is below its gate's minimum */
    PKV_WHY_MARGIN = 4,  /* a PersistentKV route was predicted faster, not by the margin */
    PKV_WHY_PROMOTED = 8 /* a PersistentKV route was chosen */
};

typedef struct pkv_route_policy {
    const char *name;
    uint32_t candidates; /* bit r: plan and predict route r each step */
    pkv_route fixed;     /* the route of a fixed policy */
    int measured_oracle; /* the oracle: on a measuring backend, run all and keep the fastest */
    pkv_route (*choose)(const struct pkv_route_policy *self, const pkv_calib *cal,
                        const pkv_step_view *v, uint8_t *why);
} pkv_route_policy;

/* Names accepted in experiment files: the routes, "adaptive" and "oracle". */
extern const char *const pkv_policy_names[];
/* Fill *p for a policy name; returns -1 for an unknown name. */
int pkv_policy_init(pkv_route_policy *p, const char *name);

/* The baselines every server has, the fallback of adaptive: ref_paged and, where
 * they are built, FlashInfer's two paths. */
uint32_t pkv_policy_baselines(void);

/* A policy that chooses among routes takes every route as a candidate, built or not
 * (the model backend, which only predicts them). */
void pkv_policy_predict_all(pkv_route_policy *p);
/* The adaptive rule, exposed for tests. Its candidates are the baselines and the
 * PersistentKV split routes (pkv_bucket, pkv_workqueue); a candidate's cost is its
 * predicted time plus its host share (t_host); the fallback is the baseline predicted
 * fastest. A PersistentKV route is considered only where the calibration
 * has a gate for the step's G (pkv_calib_gate) and the step's context reaches the
 * gate's minimum; the one predicted faster of the two is chosen when the best
 * baseline's predicted time is at least margin times its own (the gate's
 * margin_small for steps of at most margin_small_rows rows, else margin_large).
 * *why receives the PKV_WHY_ bits. */
pkv_route pkv_policy_adaptive(const pkv_calib *cal, const pkv_step_view *v, uint8_t *why);
/* The candidates of p that a step of v's rows, group, KV type and context needs planned
 * (v's counters unread): adaptive's PersistentKV routes only where its gate is open for
 * the step (it chooses the fastest baseline otherwise, unseen); all of them for the other
 * policies. */
uint32_t pkv_policy_needed(const pkv_route_policy *p, const pkv_calib *cal, const pkv_step_view *v);

#endif
