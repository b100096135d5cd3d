/* Internal to sim/config*.c: fleet.pools (each pool parsed as an experiment with its
 * members on top) and fleet.autoscale. */
#ifndef PKV_CONFIG_POOLS_H
#define PKV_CONFIG_POOLS_H

#include <cjson/cJSON.h>

#include "config.h"

/* An experiment's parser (pkv_config_parse): each pool is parsed as an experiment. */
typedef int (*pkv_config_parser)(pkv_config *c, char *text, const char *path, pkv_err *e);
/* fleet.pools in order (replicas numbered across them, each pool's settings by `parse`),
 * then fleet.autoscale. */
int pkv_config_parse_pools(pkv_config *c, const cJSON *root, pkv_config_parser parse, pkv_err *e);

#endif
