/* Path-aware validation of cJSON trees: every error names the JSON path
 * ("workload.arrival.rate: must be > 0"). Shared by experiment and calibration files. */
#ifndef PKV_JSONV_H
#define PKV_JSONV_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "pkv_err.h"

/* Join a parent path and a key ("" + "model" = "model", "model" + "d" = "model.d"). */
void pkv_json_path(char *out, size_t n, const char *parent, const char *key);

/* o must be an object whose keys are all in `allowed` (NULL-terminated). */
int pkv_json_object(const cJSON *o, const char *path, const char *const *allowed, pkv_err *e);

/* o's member key, an array of 1 to most items: *arr and its length; -1 with "PATH.key:
 * must be an array of 1 to MOST what" where it is none (absent included). */
int pkv_json_array(const cJSON *o, const char *path, const char *key, int most, const char *what,
                   const cJSON **arr, int *n, pkv_err *e);

/* Optional members: absent (or o == NULL) gives the default. Bounds are inclusive
 * unless *_open says otherwise. */
int pkv_json_num(const cJSON *o, const char *path, const char *key, double def, double lo,
                 bool lo_open, double hi, double *out, pkv_err *e);
int pkv_json_int(const cJSON *o, const char *path, const char *key, int64_t def, int64_t lo,
                 int64_t hi, int64_t *out, pkv_err *e);
int pkv_json_bool(const cJSON *o, const char *path, const char *key, bool def, bool *out,
                  pkv_err *e);
/* choices: NULL-terminated list, or NULL for any string. *idx receives the index
 * of the choice (or -1 without choices); *out the string (owned by the tree or def). */
int pkv_json_str(const cJSON *o, const char *path, const char *key, const char *def,
                 const char *const *choices, const char **out, int *idx, pkv_err *e);
/* A member that must be an object when present; *out is NULL when absent. */
int pkv_json_sub(const cJSON *o, const char *path, const char *key, const cJSON **out, pkv_err *e);

/* Read a whole file into a NUL-terminated buffer (caller frees): a regular file of at
 * most PKV_MAX_INPUT_BYTES; anything else is refused before reading. */
#define PKV_MAX_INPUT_BYTES ((uint64_t)16 << 30)
char *pkv_read_file(const char *path, size_t *len, pkv_err *e);
/* Parse JSON text; a syntax error names the file, line and column. */
cJSON *pkv_json_parse(const char *text, const char *file, pkv_err *e);
/* Read and parse a JSON file (pkv_read_file, then pkv_json_parse); NULL with the error. */
cJSON *pkv_json_read(const char *path, pkv_err *e);
/* The first key object o gives twice (cJSON keeps both; a lookup finds the first),
 * or NULL (also when o is not an object). */
const char *pkv_json_key_twice(const cJSON *o);

#endif
