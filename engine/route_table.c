/* The route table: one row per route, from each family's operations. */
#include "route_fi.h"
#include "route_pkv.h"
#include "route_ref.h"

#define PKV_ROUTE_OPS_(e, name, role, family, graph, props) [PKV_ROUTE_##e] = &pkv_route_ops_##e,
static const pkv_route_ops *const table[PKV_ROUTE_COUNT] = {PKV_ROUTES(PKV_ROUTE_OPS_)};

const pkv_route_ops *pkv_route_ops_of(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT ? table[r] : NULL;
}
