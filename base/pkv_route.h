/* The attention routes of a decode step: one table of their names, in enum order,
 * shared by the kernels (which plan and launch them), the engine (which chooses),
 * the recorder (whose route enum maps these names) and the experiment files. */
#ifndef PKV_ROUTE_H
#define PKV_ROUTE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM_SUFFIX, "name", role, family, graph, props): the one list of routes, in enum
 * order. The role says what the route policy does with a route: a BASELINE every
 * server has (adaptive's fallback), a PersistentKV SPLIT route (adaptive promotes one
 * over the baseline), an ABLATION (never a candidate of adaptive). The family names the
 * kernels that run it: REF (one CTA per row and KV head), BUCKET (split kernels per
 * bucket of rows, each with its merge), TASKS (one launch over a task list), FI
 * (FlashInfer's planner and kernels). graph: FIXED where a fixed grid runs it (a full
 * model's step is captured once per rows bucket and replayed), CAPTURE where a step's
 * own graph can be captured, NONE (FlashInfer's planner may allocate). props: what else
 * its kernels are (pkv_route_prop), asked with pkv_route_has. The routes: ref_paged, one CTA per
 * (row, KV head), no split; pkv_bucket, rows grouped by route length, a split and a merge per
 * bucket; pkv_workqueue, one launch over compact tasks, one segmented merge; pkv_fused, the
 * workqueue whose last split merges in-kernel; flashinfer, FlashInfer's CUDA-core batch decode
 * (DecodePlan); flashinfer_tc, FlashInfer's tensor cores: its batch prefill kernel at one query
 * token a row (PrefillPlan), merged when split. */
#define PKV_RP_PKV (PKV_RP_FP8_CAP | PKV_RP_VERIFY)
#define PKV_RP_FI  (PKV_RP_CSR | PKV_RP_FI_SHAPES)
#define PKV_ROUTES(X)                                                                              \
    X(REF_PAGED, "ref_paged", BASELINE, REF, FIXED, PKV_RP_PKV)                                    \
    X(BUCKET, "pkv_bucket", SPLIT, BUCKET, CAPTURE, PKV_RP_PKV)                                    \
    X(WORKQUEUE, "pkv_workqueue", SPLIT, TASKS, FIXED, PKV_RP_PKV)                                 \
    X(FUSED, "pkv_fused", ABLATION, TASKS, CAPTURE, PKV_RP_PKV)                                    \
    X(FLASHINFER, "flashinfer", BASELINE, FI, NONE, PKV_RP_FI)                                     \
    X(FLASHINFER_TC, "flashinfer_tc", BASELINE, FI, NONE, PKV_RP_FI)

#define PKV_ROUTE_ENUM_(e, name, role, family, graph, props)   PKV_ROUTE_##e,
#define PKV_ROUTE_NAME_(e, name, role, family, graph, props)   name,
#define PKV_ROUTE_ROLE_(e, name, role, family, graph, props)   PKV_ROLE_##role,
#define PKV_ROUTE_FAMILY_(e, name, role, family, graph, props) PKV_FAMILY_##family,
#define PKV_ROUTE_GRAPH_(e, name, role, family, graph, props)  PKV_GRAPH_##graph,
#define PKV_ROUTE_PROPS_(e, name, role, family, graph, props)  (unsigned)(props),

/* What a route's kernels are beyond their family, bits of the props column (PKV_RP_PKV:
 * PersistentKV's kernels and the reference's; PKV_RP_FI: FlashInfer's). */
typedef enum pkv_route_prop {
    PKV_RP_CSR = 1u << 0,       /* reads its pages as a CSR list, packed before each launch
                                   (step metadata: outside the attention's device time) */
    PKV_RP_FP8_CAP = 1u << 1,   /* over FP8 KV one CTA widens at most kv_fp8_cta_gbps: the
                                   cost model's cap, which pkvsim calibrate fits over these */
    PKV_RP_FI_SHAPES = 1u << 2, /* built for FlashInfer's shapes only: 1, 2, 4 or 8 query
                                   heads per KV head (pkv_flashinfer_group), head_dim 128
                                   on the GPU */
    PKV_RP_VERIFY = 1u << 3,    /* its kernels take a verify step's query tokens a row
                                   (pkvk_batch.q_len) packed beside the group's heads in
                                   query blocks (pkvk_verify_pack); FlashInfer's routes
                                   run a verify step on its prefill path instead */
} pkv_route_prop;

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
/* Whether route r's row has property p (none outside the enum); the set (bit r) of the
 * routes that have it. */
bool pkv_route_has(pkv_route r, pkv_route_prop p);
unsigned pkv_routes_with(pkv_route_prop p);

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
