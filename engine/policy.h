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
    uint32_t valid; /* bit r: candidates[r] was planned */
    pkv_counters cand[PKV_ROUTE_COUNT];
} pkv_step_view;

typedef struct pkv_route_policy {
    const char *name;
    uint32_t candidates; /* bit r: plan and predict route r each step */
    pkv_route fixed;     /* the route of a fixed policy */
    int measured_oracle; /* the oracle: on a measuring backend, run all and keep the fastest */
    pkv_route (*choose)(const struct pkv_route_policy *self, const pkv_calib *cal,
                        const pkv_step_view *v);
} pkv_route_policy;

/* Names accepted in experiment files: the routes, "adaptive" and "oracle". */
extern const char *const pkv_policy_names[];
/* Fill *p for a policy name; returns -1 for an unknown name. */
int pkv_policy_init(pkv_route_policy *p, const char *name);

/* The adaptive rule, exposed for tests: PersistentKV only when the step's G equals
 * the calibrated G and its context reaches min_context; then the cheaper of bucket
 * and workqueue is promoted over ref_paged when ref's predicted time is at least
 * margin times it (margin_small for steps of at most margin_small_rows rows). */
pkv_route pkv_policy_adaptive(const pkv_calib *cal, const pkv_step_view *v);

#endif
