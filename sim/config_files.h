/* Internal to sim/config*.c: the shipped data files an experiment names (model presets,
 * engine profiles, calibrations), found by name from the data path or by a path from
 * the experiment's folder. */
#ifndef PKV_CONFIG_FILES_H
#define PKV_CONFIG_FILES_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "pkv_err.h"

/* Where the shipped data (experiments/models/, experiments/calibration/, ...) is found,
 * so an installed pkvsim works: $PKVSIM_DATA, then beside the program (its folder, the
 * one above it, ../share/pkvsim), then the source tree it was built from. rel: a path
 * under such a root; out receives the first root's path that exists (the source
 * tree's when none does, so the error names it). */
void pkv_config_data_path(char *out, size_t n, const char *rel);
/* A data file named NAME (DIR/NAME.json from the data path) or given by a path (with a
 * '/' or ending in .json, from exp_file's folder), parsed; its path into path. NULL
 * with the error, which names key and, for a name not found, the files beside it
 * (what: their kind; also: names to list first) and the closest. */
cJSON *pkv_config_named_file(const char *exp_file, const char *name, const char *key,
                             const char *dir, const char *what, const char *also, char *path,
                             size_t n, pkv_err *e);

#endif
