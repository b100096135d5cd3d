#include "pkv_route.h"

#include <string.h>

const char *const pkv_route_names[PKV_ROUTE_COUNT + 1] = {PKV_ROUTES(PKV_ROUTE_NAME_) NULL};
static const pkv_route_role roles[PKV_ROUTE_COUNT] = {PKV_ROUTES(PKV_ROUTE_ROLE_)};
static const pkv_route_family families[PKV_ROUTE_COUNT] = {PKV_ROUTES(PKV_ROUTE_FAMILY_)};
static const pkv_route_graph graphs[PKV_ROUTE_COUNT] = {PKV_ROUTES(PKV_ROUTE_GRAPH_)};
static const unsigned props[PKV_ROUTE_COUNT] = {PKV_ROUTES(PKV_ROUTE_PROPS_)};

const char *pkv_route_name(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT ? pkv_route_names[r] : "unknown";
}

pkv_route_role pkv_route_role_of(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT ? roles[r] : PKV_ROLE_ABLATION;
}

unsigned pkv_routes_of_role(pkv_route_role role) {
    unsigned set = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) set |= (unsigned)(roles[r] == role) << r;
    return set;
}

pkv_route_family pkv_route_family_of(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT ? families[r] : PKV_FAMILY_FI;
}

pkv_route_graph pkv_route_graph_of(pkv_route r) {
    return (unsigned)r < PKV_ROUTE_COUNT ? graphs[r] : PKV_GRAPH_NONE;
}

unsigned pkv_routes_in_graph(pkv_route_graph g) {
    unsigned set = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) set |= (unsigned)(graphs[r] >= g) << r;
    return set;
}

bool pkv_route_has(pkv_route r, pkv_route_prop p) {
    return (unsigned)r < PKV_ROUTE_COUNT && (props[r] & p);
}

unsigned pkv_routes_with(pkv_route_prop p) {
    unsigned set = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) set |= (unsigned)((props[r] & p) != 0) << r;
    return set;
}

int pkv_route_parse(const char *name) {
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if (strcmp(name, pkv_route_names[r]) == 0) return r;
    return -1;
}
