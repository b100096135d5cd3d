/* Keys of a JSON file declared once: a table of pkv_key rows drives the check for
 * unknown keys, the parse (types, ranges, defaults, required keys) into a struct,
 * the resolved values written back, and the documentation check (`pkvsim keys`).
 * Experiment files (sim/config_keys.c) and calibration files (engine/calib.c) use it. */
#ifndef PKV_KEYS_H
#define PKV_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#include "pkv_attr.h"
#include "pkv_err.h"

typedef enum pkv_key_kind {
    PKV_KEY_I64,    /* int64_t (or uint64_t holding a value >= 0) */
    PKV_KEY_INT,    /* int */
    PKV_KEY_NUM,    /* double, stored as value * scale */
    PKV_KEY_BOOL,   /* bool */
    PKV_KEY_ENUM,   /* int: the index of the value in choices */
    PKV_KEY_STR,    /* char[size]; one of choices when given */
    PKV_KEY_OBJ,    /* a sub-object with its own rows (obj = this row's path) */
    PKV_KEY_CUSTOM, /* a value the caller's code reads (arrays, names or objects) */
} pkv_key_kind;

typedef struct pkv_key {
    const char *obj;  /* the object it belongs to: "serving.prefill", "" for the top */
    const char *name; /* its key there */
    pkv_key_kind kind;
    size_t off, size; /* field in the object's struct; size of a STR buffer */
    double def, lo, hi;
    bool lo_open;               /* NUM: lo itself is refused */
    bool required;              /* absent is an error (naming the selector's value when `when`) */
    bool keep;                  /* absent leaves the field's current value (a caller's default) */
    bool selects;               /* ENUM whose index chooses which `when` rows of the object apply */
    double scale;               /* NUM: field = value * scale (0 means 1) */
    const char *def_s;          /* ENUM, STR: default value */
    const char *const *choices; /* ENUM, STR: NULL-terminated */
    const char *def_key;        /* I64, INT: absent takes this key's (already parsed) value */
    uint32_t when;              /* bit i: applies when the selector's index is i; 0: always */
    uint32_t kinds; /* bit i: the key applies to the caller's kind i only (a model's kind,
                       pkv_keys_check_kinds); 0: to every kind */
} pkv_key;

typedef struct pkv_keys {
    const pkv_key *rows;
    int n;
} pkv_keys;

#define PKV_KEYS(table) ((pkv_keys){table, (int)(sizeof table / sizeof table[0])})
#define PKV_WHEN(i)     (1u << (i))

/* `o` is an object whose keys are all rows of `obj`. */
int pkv_keys_check(pkv_keys k, const char *obj, const cJSON *o, const char *path, pkv_err *e);
/* Check `o` (an object, or NULL for absent) against the rows of `obj`, then parse
 * every scalar row that applies into dst. `path` names the object in errors (the
 * same rows serve objects in several places, such as length objects). With
 * keep_all, every absent key keeps the field's current value. Returns 0 or -1. */
int pkv_keys_parse(pkv_keys k, const char *obj, const cJSON *o, const char *path, void *dst,
                   bool keep_all, pkv_err *e);
/* The selector's index parsed into dst for `obj` (-1 when the object has none). */
int pkv_keys_variant(pkv_keys k, const char *obj, const void *src);
/* Add the scalar rows of `obj` that apply, with their values in src, to `out`. */
void pkv_keys_write(pkv_keys k, const char *obj, const void *src, cJSON *out);
/* The scalar rows of `obj` that apply as named attributes (for the recorder): fills
 * up to cap entries; returns how many, -1 when cap is short. */
int pkv_keys_attrs(pkv_keys k, const char *obj, const void *src, pkv_attr *a, int cap);
/* Every row's default into dst (the rows with a numeric or string default). */
void pkv_keys_defaults(pkv_keys k, const char *obj, void *dst);
/* The first scalar row whose kinds leave out `kind` (an index) and whose value in src
 * is not its default: -1 with an error naming the key, what it applies to and what
 * this is (what[i]: kind i, in words); else 0. */
int pkv_keys_check_kinds(pkv_keys k, const void *src, int kind, const char *const *what,
                         pkv_err *e);
/* One line per row, "PATH\tKIND\tDEFAULT" ("-": none, required, or the caller's), for
 * the documentation check; PATH is prefix.obj.name without empty parts. With kind
 * names (NULL-terminated, index i: bit i of pkv_key.kinds), a fourth column names the
 * kinds a row applies to, comma-separated ("-": every kind). */
void pkv_keys_print(pkv_keys k, const char *prefix, const char *const *kind_names, FILE *out);

#endif
