#include "pkv_keys.h"
#include "jsonv.h"

#include <string.h>

#define MAX_OBJ_KEYS 64

static bool scalar(const pkv_key *r) {
    return r->kind != PKV_KEY_OBJ && r->kind != PKV_KEY_CUSTOM;
}

static bool applies(const pkv_key *r, int variant) {
    return r->when == 0 || (variant >= 0 && variant < 32 && (r->when & PKV_WHEN(variant)));
}

static void *field(void *base, const pkv_key *r) {
    return (char *)base + r->off;
}
static const void *cfield(const void *base, const pkv_key *r) {
    return (const char *)base + r->off;
}

static const pkv_key *selector(pkv_keys k, const char *obj) {
    for (int i = 0; i < k.n; i++)
        if (k.rows[i].selects && strcmp(k.rows[i].obj, obj) == 0) return &k.rows[i];
    return NULL;
}

int pkv_keys_variant(pkv_keys k, const char *obj, const void *src) {
    const pkv_key *s = selector(k, obj);
    return s ? *(const int *)cfield(src, s) : -1;
}

/* The value of an integer row as int64 (for def_key). */
static int64_t int_value(const void *base, const pkv_key *r) {
    return r->kind == PKV_KEY_INT ? *(const int *)cfield(base, r)
                                  : *(const int64_t *)cfield(base, r);
}

static const pkv_key *find(pkv_keys k, const char *obj, const char *name, int variant) {
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        if (strcmp(r->obj, obj) == 0 && strcmp(r->name, name) == 0 && applies(r, variant)) return r;
    }
    return NULL;
}

static int parse_row(pkv_keys k, const pkv_key *r, const cJSON *o, const char *path, void *dst,
                     int variant, bool keep_all, pkv_err *e) {
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, r->name) : NULL;
    if (!v) {
        char p[256];
        pkv_json_path(p, sizeof p, path, r->name);
        if (r->required) {
            const pkv_key *s = r->when ? selector(k, r->obj) : NULL;
            if (s)
                return pkv_fail(e, "%s: is required for %s \"%s\"", p, s->name,
                                s->choices[variant]);
            return pkv_fail(e, "%s: is required", p);
        }
        if (r->keep || keep_all) return 0;
    }
    /* Absent keys fall through with their default; the helpers return it. */
    double scale = r->scale != 0 ? r->scale : 1;
    switch (r->kind) {
    case PKV_KEY_I64:
    case PKV_KEY_INT: {
        int64_t def = (int64_t)r->def, x;
        if (r->def_key) {
            const pkv_key *d = find(k, r->obj, r->def_key, variant);
            if (d) def = int_value(dst, d);
        }
        if (keep_all) def = int_value(dst, r);
        if (pkv_json_int(o, path, r->name, def, (int64_t)r->lo, (int64_t)r->hi, &x, e)) return -1;
        if (r->kind == PKV_KEY_INT)
            *(int *)field(dst, r) = (int)x;
        else
            *(int64_t *)field(dst, r) = x;
        return 0;
    }
    case PKV_KEY_NUM: {
        double *f = field(dst, r), x;
        double def = keep_all ? *f / scale : r->def;
        if (pkv_json_num(o, path, r->name, def, r->lo, r->lo_open, r->hi, &x, e)) return -1;
        *f = x * scale;
        return 0;
    }
    case PKV_KEY_BOOL: {
        bool *f = field(dst, r);
        return pkv_json_bool(o, path, r->name, keep_all ? *f : r->def != 0, f, e);
    }
    case PKV_KEY_ENUM: {
        int *f = field(dst, r), idx;
        const char *s, *def = keep_all ? r->choices[*f] : r->def_s;
        /* An enum whose choices are "false", "true" and others takes the booleans too. */
        int takes_bool = 0;
        for (int j = 0; r->choices[j]; j++) {
            if (strcmp(r->choices[j], "true") && strcmp(r->choices[j], "false")) continue;
            takes_bool = 1;
            if (cJSON_IsBool(v) && strcmp(r->choices[j], cJSON_IsTrue(v) ? "true" : "false") == 0) {
                *f = j;
                return 0;
            }
        }
        if (takes_bool && v && !cJSON_IsString(v)) {
            char p[256], list[256] = "";
            pkv_json_path(p, sizeof p, path, r->name);
            for (int j = 0; r->choices[j]; j++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
                         r->choices[j]);
            return pkv_fail(e, "%s: must be true, false or one of: %s", p, list);
        }
        if (pkv_json_str(o, path, r->name, def, r->choices, &s, &idx, e)) return -1;
        *f = idx;
        return 0;
    }
    case PKV_KEY_STR: {
        char *f = field(dst, r);
        const char *s;
        if (pkv_json_str(o, path, r->name,
                         keep_all   ? f
                         : r->def_s ? r->def_s
                                    : "",
                         r->choices, &s, NULL, e))
            return -1;
        if (strlen(s) >= r->size) {
            char p[256];
            pkv_json_path(p, sizeof p, path, r->name);
            return pkv_fail(e, "%s: longer than %zu characters", p, r->size - 1);
        }
        if (s != f) snprintf(f, r->size, "%s", s);
        return 0;
    }
    default:
        return 0;
    }
}

int pkv_keys_check(pkv_keys k, const char *obj, const cJSON *o, const char *path, pkv_err *e) {
    const char *allowed[MAX_OBJ_KEYS + 1];
    int n = 0;
    for (int i = 0; i < k.n && n < MAX_OBJ_KEYS; i++) {
        const pkv_key *r = &k.rows[i];
        if (strcmp(r->obj, obj) != 0) continue;
        bool dup = false;
        for (int j = 0; j < n && !dup; j++) dup = strcmp(allowed[j], r->name) == 0;
        if (!dup) allowed[n++] = r->name;
    }
    allowed[n] = NULL;
    return pkv_json_object(o, path, allowed, e);
}

int pkv_keys_parse(pkv_keys k, const char *obj, const cJSON *o, const char *path, void *dst,
                   bool keep_all, pkv_err *e) {
    if (o && pkv_keys_check(k, obj, o, path, e)) return -1;
    const pkv_key *s = selector(k, obj);
    int variant = -1;
    if (s) {
        if (parse_row(k, s, o, path, dst, -1, keep_all, e)) return -1;
        variant = *(int *)field(dst, s);
    }
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        if (r == s || strcmp(r->obj, obj) != 0 || !scalar(r) || !applies(r, variant)) continue;
        if (parse_row(k, r, o, path, dst, variant, keep_all, e)) return -1;
    }
    return 0;
}

void pkv_keys_write(pkv_keys k, const char *obj, const void *src, cJSON *out) {
    int variant = pkv_keys_variant(k, obj, src);
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        if (strcmp(r->obj, obj) != 0 || !scalar(r) || !applies(r, variant)) continue;
        const void *f = cfield(src, r);
        switch (r->kind) {
        case PKV_KEY_I64:
        case PKV_KEY_INT:
            cJSON_AddNumberToObject(out, r->name, (double)int_value(src, r));
            break;
        case PKV_KEY_NUM:
            cJSON_AddNumberToObject(out, r->name,
                                    *(const double *)f / (r->scale != 0 ? r->scale : 1));
            break;
        case PKV_KEY_BOOL:
            cJSON_AddBoolToObject(out, r->name, *(const bool *)f);
            break;
        case PKV_KEY_ENUM:
            cJSON_AddStringToObject(out, r->name, r->choices[*(const int *)f]);
            break;
        case PKV_KEY_STR:
            cJSON_AddStringToObject(out, r->name, (const char *)f);
            break;
        default:
            break;
        }
    }
}

int pkv_keys_attrs(pkv_keys k, const char *obj, const void *src, pkv_attr *a, int cap) {
    int n = 0, variant = pkv_keys_variant(k, obj, src);
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        if (strcmp(r->obj, obj) != 0 || !scalar(r) || !applies(r, variant)) continue;
        if (n == cap) return -1;
        pkv_attr *t = &a[n++];
        *t = (pkv_attr){.kind = PKV_ATTR_U64};
        snprintf(t->name, sizeof t->name, "%s", r->name);
        const void *f = cfield(src, r);
        switch (r->kind) {
        case PKV_KEY_NUM:
            t->kind = PKV_ATTR_F64;
            t->f64 = *(const double *)f / (r->scale != 0 ? r->scale : 1);
            break;
        case PKV_KEY_BOOL:
            t->u64 = *(const bool *)f;
            break;
        case PKV_KEY_ENUM:
            t->kind = PKV_ATTR_STR;
            t->str = r->choices[*(const int *)f];
            break;
        case PKV_KEY_STR:
            t->kind = PKV_ATTR_STR;
            t->str = (const char *)f;
            break;
        default:
            t->u64 = (uint64_t)int_value(src, r);
            break;
        }
    }
    return n;
}

void pkv_keys_defaults(pkv_keys k, const char *obj, void *dst) {
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        if (strcmp(r->obj, obj) != 0 || !scalar(r) || r->required) continue;
        void *f = field(dst, r);
        switch (r->kind) {
        case PKV_KEY_I64:
            *(int64_t *)f = (int64_t)r->def;
            break;
        case PKV_KEY_INT:
            *(int *)f = (int)r->def;
            break;
        case PKV_KEY_NUM:
            *(double *)f = r->def * (r->scale != 0 ? r->scale : 1);
            break;
        case PKV_KEY_BOOL:
            *(bool *)f = r->def != 0;
            break;
        case PKV_KEY_ENUM: {
            int idx = 0;
            for (int j = 0; r->def_s && r->choices[j]; j++)
                if (strcmp(r->choices[j], r->def_s) == 0) idx = j;
            *(int *)f = idx;
            break;
        }
        case PKV_KEY_STR:
            snprintf(f, r->size, "%s", r->def_s ? r->def_s : "");
            break;
        default:
            break;
        }
    }
}

/* Whether a scalar row's value in src is other than its default (pkv_keys_defaults'). */
static bool not_default(const pkv_key *r, const void *src) {
    const void *f = cfield(src, r);
    switch (r->kind) {
    case PKV_KEY_I64:
        return *(const int64_t *)f != (int64_t)r->def;
    case PKV_KEY_INT:
        return *(const int *)f != (int)r->def;
    case PKV_KEY_NUM:
        return *(const double *)f != r->def * (r->scale != 0 ? r->scale : 1);
    case PKV_KEY_BOOL:
        return *(const bool *)f != (r->def != 0);
    case PKV_KEY_ENUM:
        return strcmp(r->choices[*(const int *)f], r->def_s ? r->def_s : r->choices[0]) != 0;
    case PKV_KEY_STR:
        return strcmp((const char *)f, r->def_s ? r->def_s : "") != 0;
    default:
        return false;
    }
}

int pkv_keys_check_kinds(pkv_keys k, const void *src, int kind, const char *const *what,
                         pkv_err *e) {
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        if (!r->kinds || r->kinds >> kind & 1 || !scalar(r)) continue;
        if (!applies(r, pkv_keys_variant(k, r->obj, src)) || !not_default(r, src)) continue;
        char to[256] = "";
        for (int j = 0; what[j]; j++)
            if (r->kinds >> j & 1)
                snprintf(to + strlen(to), sizeof to - strlen(to), "%s%s", *to ? " or " : "",
                         what[j]);
        return pkv_fail(e, "%s%s%s: applies to %s only; this model is %s", r->obj,
                        *r->obj ? "." : "", r->name, to, what[kind]);
    }
    return 0;
}

void pkv_keys_print(pkv_keys k, const char *prefix, const char *const *kind_names, FILE *out) {
    static const char *const kinds[] = {"int",  "int",    "number", "bool",
                                        "enum", "string", "object", "custom"};
    for (int i = 0; i < k.n; i++) {
        const pkv_key *r = &k.rows[i];
        char p[256], def[64] = "-";
        const char *parts[3] = {prefix, r->obj, r->name};
        p[0] = 0;
        for (int j = 0; j < 3; j++)
            if (*parts[j])
                snprintf(p + strlen(p), sizeof p - strlen(p), "%s%s", *p ? "." : "", parts[j]);
        if (r->required || r->keep || r->def_key || !scalar(r))
            ;
        else if (r->kind == PKV_KEY_ENUM || r->kind == PKV_KEY_STR)
            snprintf(def, sizeof def, "%s", r->def_s ? r->def_s : "");
        else if (r->kind == PKV_KEY_BOOL)
            snprintf(def, sizeof def, "%s", r->def != 0 ? "true" : "false");
        else
            snprintf(def, sizeof def, "%.15g", r->def);
        fprintf(out, "%s\t%s\t%s", p, kinds[r->kind], def);
        if (kind_names) {
            char to[128] = "";
            for (int j = 0; kind_names[j]; j++)
                if (r->kinds >> j & 1)
                    snprintf(to + strlen(to), sizeof to - strlen(to), "%s%s", *to ? "," : "",
                             kind_names[j]);
            fprintf(out, "\t%s", *to ? to : "-");
        }
        fputc('\n', out);
    }
}
