/* Internal to sim/config*.c: the experiment file's workload section (arrivals,
 * lengths, traces, presets) lives in config_workload.c. */
#ifndef PKV_CONFIG_INTERNAL_H
#define PKV_CONFIG_INTERNAL_H

#include "config.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

/* A relative path in an experiment file is taken from the file's own folder. */
void pkv_config_path(char *dst, size_t n, const char *exp_file, const char *p);
/* Parse and validate `workload` (o may be NULL: an error, it is required). */
int pkv_config_parse_workload(pkv_config *c, const cJSON *o, pkv_err *e);
/* Add the resolved workload section to the resolved-config object r. */
void pkv_config_resolve_workload(const pkv_config *c, cJSON *r);

#endif
