#include "pkv_route.h"

#include <string.h>

static const char *const names[PKV_ROUTE_COUNT] = {"ref_paged", "pkv_bucket", "pkv_workqueue",
                                                   "pkv_fused", "flashinfer", "flashinfer_tc"};

const char *pkv_route_name(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT ? names[r] : "unknown";
}

int pkv_route_parse(const char *name) {
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if (strcmp(name, names[r]) == 0) return r;
    return -1;
}
