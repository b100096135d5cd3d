/* Internal to sim/config*.c: serving.engine, a serving engine's profile by name and
 * version (experiments/engines/NAME@VERSION.json; `pkvsim keys` lists a profile's keys). */
#ifndef PKV_CONFIG_ENGINE_H
#define PKV_CONFIG_ENGINE_H

#include <cjson/cJSON.h>

#include "config.h"

/* Compare two versions of numbers joined by dots ("0.10.1" > "0.9.2"; missing parts
 * are 0): <0, 0, >0. */
int pkv_version_cmp(const char *a, const char *b);
/* The profile serving.engine `spec` takes among dir's NAME@VERSION.json: NAME@VERSION,
 * the newest profile of NAME at or below VERSION; NAME alone, NAME's newest. Its name
 * (NAME@VERSION of the file) into taken; -1 with an error naming the profiles there
 * when NAME has none, or none old enough. */
int pkv_engine_resolve(const char *dir, const char *spec, char *taken, size_t n, pkv_err *e);
/* serving.engine into c: "pkvsim" (the default, no profile), NAME[@VERSION], or a path
 * (with a '/' or ending in .json) from the experiment's folder. The profile's "serving"
 * keys are defaults (its "serving_offline" over them for an offline client, the
 * engine's in-process defaults): the experiment's own serving keys (parsed already) are
 * parsed again on top. Its attention backend (serving.attention_backend, else its
 * default) sets route.policy where the experiment gives none. */
int pkv_config_parse_engine(pkv_config *c, const cJSON *root, pkv_err *e);

#endif
