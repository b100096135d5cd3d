/* The reference route family: ref_paged, one CTA per (row, KV head), no split. */
#ifndef PKV_ROUTE_REF_H
#define PKV_ROUTE_REF_H

#include "routes.h"

extern const pkv_route_ops pkv_route_ops_REF_PAGED;

#endif
