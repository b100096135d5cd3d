/* The attention routes of a decode step: one table of their names, in enum order,
 * shared by the kernels (which plan and launch them), the engine (which chooses),
 * the recorder (whose route enum maps these names) and the experiment files. */
#ifndef PKV_ROUTE_H
#define PKV_ROUTE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM_SUFFIX, "name", role, family, graph): the one list of routes, in enum order.
 * The role says what the route policy does with a route: a BASELINE every server has
 * (adaptive's fallback), a PersistentKV SPLIT route (adaptive promotes one over the
 * baseline), an ABLATION (never a candidate of adaptive). The family names the kernels
 * that run it: REF (one CTA per row and KV head), BUCKET (split kernels per bucket of
 * rows, each with its merge), TASKS (one launch over a task list), FI (FlashInfer's
 * planner and kernels). graph: FIXED where a fixed grid runs it (a full model's step is
 * captured once per rows bucket and replayed), CAPTURE where a step's own graph can be
 * captured, NONE (FlashInfer's planner may allocate). */
#define PKV_ROUTES(X)                                                                              \
    X(REF_PAGED, "ref_paged", BASELINE, REF, FIXED)    /* one CTA per (row, kvh), no split */      \
    X(BUCKET, "pkv_bucket", SPLIT, BUCKET, CAPTURE)    /* rows grouped by route length; split +    \
                                                          merge per bucket */                      \
    X(WORKQUEUE, "pkv_workqueue", SPLIT, TASKS, FIXED) /* one launch over compact tasks, one       \
                                                          segmented merge */                       \
    X(FUSED, "pkv_fused", ABLATION, TASKS, CAPTURE)    /* workqueue whose last split merges        \
                                                          in-kernel */                             \
    X(FLASHINFER, "flashinfer", BASELINE, FI, NONE)    /* FlashInfer's CUDA-core batch decode      \
                                                          (DecodePlan) */                          \
    X(FLASHINFER_TC, "flashinfer_tc", BASELINE, FI,                                                \
      NONE) /* FlashInfer's tensor cores: batch                                                    \
               prefill kernel, one query token per                                                 \
               row (PrefillPlan), merged when split */

#define PKV_ROUTE_ENUM_(e, name, role, family, graph)   PKV_ROUTE_##e,
#define PKV_ROUTE_NAME_(e, name, role, family, graph)   name,
#define PKV_ROUTE_ROLE_(e, name, role, family, graph)   PKV_ROLE_##role,
#define PKV_ROUTE_FAMILY_(e, name, role, family, graph) PKV_FAMILY_##family,
#define PKV_ROUTE_GRAPH_(e, name, role, family, graph)  PKV_GRAPH_##graph,

typedef enum pkv_route_role { PKV_ROLE_BASELINE, PKV_ROLE_SPLIT, PKV_ROLE_ABLATION } pkv_route_role;
typedef enum pkv_route_family {
    PKV_FAMILY_REF,
    PKV_FAMILY_BUCKET,
    PKV_FAMILY_TASKS,
    PKV_FAMILY_FI
} pkv_route_family;
typedef enum pkv_route_graph { PKV_GRAPH_NONE, PKV_GRAPH_CAPTURE, PKV_GRAPH_FIXED } pkv_route_graph;

/* FlashInfer's routes are an optional build (pkvk_flashinfer_built()). */
typedef enum pkv_route { PKV_ROUTES(PKV_ROUTE_ENUM_) PKV_ROUTE_COUNT } pkv_route;

/* "ref_paged", "pkv_bucket", ...; "unknown" outside the enum. */
const char *pkv_route_name(pkv_route r);
/* Every route's name in enum order, NULL-terminated (a JSON object's allowed keys). */
extern const char *const pkv_route_names[PKV_ROUTE_COUNT + 1];
/* The route's role, and the set (bit r) of the routes of a role. */
pkv_route_role pkv_route_role_of(pkv_route r);
unsigned pkv_routes_of_role(pkv_route_role role);
/* The route named `name`; -1 when no route has that name. */
int pkv_route_parse(const char *name);

/* The route's family and graph column (FI and NONE outside the enum); the set (bit
 * r) of the routes a graph can hold at least as `g`. */
pkv_route_family pkv_route_family_of(pkv_route r);
pkv_route_graph pkv_route_graph_of(pkv_route r);
unsigned pkv_routes_in_graph(pkv_route_graph g);

static inline bool pkv_route_is_flashinfer(pkv_route r) {
    return pkv_route_family_of(r) == PKV_FAMILY_FI;
}

/* FlashInfer's paths (its decode and prefill kernels, as built here) take 1, 2, 4 or 8
 * query heads per KV head. */
static inline bool pkv_flashinfer_group(int g) {
    return g == 1 || g == 2 || g == 4 || g == 8;
}

/* Routes whose plan is a workqueue task list (written out only for a launch). */
static inline bool pkv_route_is_workqueue(pkv_route r) {
    return pkv_route_family_of(r) == PKV_FAMILY_TASKS;
}

#ifdef __cplusplus
}
#endif
#endif
