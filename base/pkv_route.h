/* The attention routes of a decode step: one table of their names, in enum order,
 * shared by the kernels (which plan and launch them), the engine (which chooses),
 * the recorder (whose route enum maps these names) and the experiment files. */
#ifndef PKV_ROUTE_H
#define PKV_ROUTE_H

#include <stdbool.h>

typedef enum pkv_route {
    PKV_ROUTE_REF_PAGED = 0, /* one CTA per (row, kvh), no split */
    PKV_ROUTE_BUCKET,        /* rows grouped by route length; split + merge per bucket */
    PKV_ROUTE_WORKQUEUE,     /* one launch over compact tasks, one segmented merge */
    PKV_ROUTE_FUSED,         /* workqueue whose last split merges in-kernel */
    /* FlashInfer's paged decode paths (optional build, pkvk_flashinfer_built()): */
    PKV_ROUTE_FLASHINFER,    /* CUDA-core batch decode, planned by DecodePlan */
    PKV_ROUTE_FLASHINFER_TC, /* tensor cores: batch prefill kernel, one query token per
                                row, planned by PrefillPlan, merged when split */
    PKV_ROUTE_COUNT
} pkv_route;

/* "ref_paged", "pkv_bucket", ...; "unknown" outside the enum. */
const char *pkv_route_name(pkv_route r);
/* The route named `name`; -1 when no route has that name. */
int pkv_route_parse(const char *name);

static inline bool pkv_route_is_flashinfer(pkv_route r) {
    return r == PKV_ROUTE_FLASHINFER || r == PKV_ROUTE_FLASHINFER_TC;
}

/* Routes whose plan is a workqueue task list (written out only for a launch). */
static inline bool pkv_route_is_workqueue(pkv_route r) {
    return r == PKV_ROUTE_WORKQUEUE || r == PKV_ROUTE_FUSED;
}

#endif
