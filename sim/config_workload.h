/* Internal to sim/config*.c: the experiment file's workload section (arrivals,
 * lengths, traces, presets), parsed into the workload's own types; config.c calls it,
 * and it knows nothing of the experiment's other sections. */
#ifndef PKV_CONFIG_WORKLOAD_H
#define PKV_CONFIG_WORKLOAD_H

#include <cjson/cJSON.h>

#include "workload.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

/* A relative path in an experiment file is taken from the file's own folder; a result
 * that does not fit n is an error naming `key`, never a cut path. */
int pkv_config_path(char *dst, size_t n, const char *exp_file, const char *p, const char *key,
                    pkv_err *e);
/* Parse and validate `workload` of experiment file exp_file (o may be NULL: an error,
 * it is required) into w; a trace is loaded into *trace (w->trace points there) as
 * *ts says. */
int pkv_config_parse_workload(pkv_workload_spec *w, pkv_trace_spec *ts, pkv_trace *trace,
                              const char *exp_file, const cJSON *o, pkv_err *e);
/* Add the resolved workload section to the resolved-config object r. */
void pkv_config_resolve_workload(const pkv_workload_spec *w, const pkv_trace_spec *ts, cJSON *r);

#endif
