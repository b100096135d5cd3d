/* PersistentKV's split route family: pkv_bucket (rows grouped by route length, a split
 * and a merge launch per bucket), pkv_workqueue (one launch over compact tasks, one
 * segmented merge) and pkv_fused (the workqueue merging in-kernel), with their split
 * policy. */
#ifndef PKV_ROUTE_PKV_H
#define PKV_ROUTE_PKV_H

#include "routes.h"

extern const pkv_route_ops pkv_route_ops_BUCKET, pkv_route_ops_WORKQUEUE, pkv_route_ops_FUSED;

#endif
