/* The attention routes of a decode step: one table of their names, in enum order,
 * shared by the kernels (which plan and launch them), the engine (which chooses),
 * the recorder (whose route enum maps these names) and the experiment files. */
#ifndef PKV_ROUTE_H
#define PKV_ROUTE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM_SUFFIX, "name", role): the one list of routes, in enum order. The role says
 * what the route policy does with a route: a BASELINE every server has (adaptive's
 * fallback), a PersistentKV SPLIT route (adaptive promotes one over the baseline), an
 * ABLATION (never a candidate of adaptive). */
#define PKV_ROUTES(X)                                                                              \
    X(REF_PAGED, "ref_paged", BASELINE)         /* one CTA per (row, kvh), no split */             \
    X(BUCKET, "pkv_bucket", SPLIT)              /* rows grouped by route length; split + merge     \
                                                   per bucket */                                   \
    X(WORKQUEUE, "pkv_workqueue", SPLIT)        /* one launch over compact tasks, one segmented    \
                                                   merge */                                        \
    X(FUSED, "pkv_fused", ABLATION)             /* workqueue whose last split merges in-kernel */  \
    X(FLASHINFER, "flashinfer", BASELINE)       /* FlashInfer's CUDA-core batch decode             \
                                                   (DecodePlan) */                                 \
    X(FLASHINFER_TC, "flashinfer_tc", BASELINE) /* FlashInfer's tensor cores: batch prefill        \
                                                   kernel, one query token per row (PrefillPlan),  \
                                                   merged when split */

#define PKV_ROUTE_ENUM_(e, name, role) PKV_ROUTE_##e,
#define PKV_ROUTE_NAME_(e, name, role) name,
#define PKV_ROUTE_ROLE_(e, name, role) PKV_ROLE_##role,

typedef enum pkv_route_role { PKV_ROLE_BASELINE, PKV_ROLE_SPLIT, PKV_ROLE_ABLATION } pkv_route_role;

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

static inline bool pkv_route_is_flashinfer(pkv_route r) {
    return r == PKV_ROUTE_FLASHINFER || r == PKV_ROUTE_FLASHINFER_TC;
}

/* Routes whose plan is a workqueue task list (written out only for a launch). */
static inline bool pkv_route_is_workqueue(pkv_route r) {
    return r == PKV_ROUTE_WORKQUEUE || r == PKV_ROUTE_FUSED;
}

#ifdef __cplusplus
}
#endif
#endif
