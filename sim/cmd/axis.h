/* An axis over an experiment's keys, as a sweep's axes and a plan's loads and candidates
 * give it: a JSON path (any key of an experiment file, a pool's as fleet.pools[N].KEY,
 * or a calibration key under route.overrides) with a list or a range of values; and a
 * path set in an experiment. */
#ifndef PKV_AXIS_H
#define PKV_AXIS_H

#include <cjson/cJSON.h>

#include "cli.h"
#include "pkv_err.h"

enum { PKV_AXIS_MAX_VALUES = 100000 };

typedef struct pkv_axis {
    char path[128];
    cJSON *values; /* array (owned) */
    int n;
} pkv_axis;

/* Axis o (P names it in errors: "sweep.axes[0]"): its path, a key of an experiment that
 * none of the run command's options ov sets, and its values (`values`, or `range` from,
 * to, step). 0, or -1 with the error. */
int pkv_axis_parse(pkv_axis *ax, const cJSON *o, const char *P, const pkv_cli_overrides *ov,
                   pkv_err *e);
void pkv_axis_free(pkv_axis *ax);
/* Set `path` in root to a copy of v, making the objects on the way ("model": "NAME"
 * becomes {"preset": "NAME"}; NAME[N] is item N of the list NAME, which must exist). 0,
 * or -1 with the error naming the path. */
int pkv_json_set_path(cJSON *root, const char *path, const cJSON *v, pkv_err *e);
/* The JSON text of a value as an index holds it (a string without its quotes; owned;
 * NULL when out of memory). */
char *pkv_json_value_text(const cJSON *v);

#endif
