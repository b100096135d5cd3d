/* Internal to sim/config*.c: fleet.pools (each pool parsed as an experiment with its
 * members on top) and fleet.autoscale. */
#ifndef PKV_CONFIG_POOLS_H
#define PKV_CONFIG_POOLS_H

#include <cjson/cJSON.h>

#include "config.h"

/* fleet.pools in order (replicas numbered across them), then fleet.autoscale. */
int pkv_config_parse_pools(pkv_config *c, const cJSON *root, pkv_err *e);

#endif
