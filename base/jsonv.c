#include "jsonv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

void pkv_json_path(char *out, size_t n, const char *parent, const char *key) {
    if (!parent || !*parent)
        snprintf(out, n, "%s", key);
    else
        snprintf(out, n, "%s.%s", parent, key);
}

int pkv_json_object(const cJSON *o, const char *path, const char *const *allowed, pkv_err *e) {
    if (!cJSON_IsObject(o)) return pkv_fail(e, "%s: must be an object", *path ? path : "(top)");
    for (const cJSON *c = o->child; c; c = c->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = strcmp(*a, c->string) == 0;
        if (!ok) {
            char p[256];
            pkv_json_path(p, sizeof p, path, c->string);
            char list[512] = "";
            for (const char *const *a = allowed; *a; a++) {
                strncat(list, *a, sizeof list - strlen(list) - 1);
                if (a[1]) strncat(list, ", ", sizeof list - strlen(list) - 1);
            }
            return pkv_fail(e, "%s: unknown key (allowed here: %s)", p, list);
        }
    }
    return 0;
}

static const cJSON *member(const cJSON *o, const char *key) {
    return o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* o's member key (NULL: none), its path into p[256] for the messages. */
static const cJSON *member_at(const cJSON *o, const char *path, const char *key, char *p) {
    pkv_json_path(p, 256, path, key);
    return member(o, key);
}

int pkv_json_num(const cJSON *o, const char *path, const char *key, double def, double lo,
                 bool lo_open, double hi, double *out, pkv_err *e) {
    char p[256];
    const cJSON *v = member_at(o, path, key, p);
    if (!v) return *out = def, 0;
    if (!cJSON_IsNumber(v)) return pkv_fail(e, "%s: must be a number", p);
    double x = v->valuedouble;
    if (!isfinite(x)) return pkv_fail(e, "%s: must be finite", p);
    if (lo_open ? !(x > lo) : !(x >= lo))
        return pkv_fail(e, "%s: must be %s %g (got %g)", p, lo_open ? ">" : ">=", lo, x);
    if (x > hi) return pkv_fail(e, "%s: must be <= %g (got %g)", p, hi, x);
    *out = x;
    return 0;
}

int pkv_json_int(const cJSON *o, const char *path, const char *key, int64_t def, int64_t lo,
                 int64_t hi, int64_t *out, pkv_err *e) {
    char p[256];
    const cJSON *v = member_at(o, path, key, p);
    if (!v) return *out = def, 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return pkv_fail(e, "%s: must be an integer", p);
    if (fabs(v->valuedouble) > 9.0e15) /* a double holds whole numbers exactly up to 2^53 */
        return pkv_fail(e,
                        "%s: must be an integer of at most 9e15 in magnitude (JSON numbers are "
                        "doubles, exact only up to 2^53; got %.17g)",
                        p, v->valuedouble);
    int64_t x = (int64_t)v->valuedouble;
    if (x < lo || x > hi)
        return pkv_fail(e, "%s: must be in [%lld, %lld] (got %lld)", p, (long long)lo,
                        (long long)hi, (long long)x);
    *out = x;
    return 0;
}

int pkv_json_bool(const cJSON *o, const char *path, const char *key, bool def, bool *out,
                  pkv_err *e) {
    char p[256];
    const cJSON *v = member_at(o, path, key, p);
    if (!v) return *out = def, 0;
    if (!cJSON_IsBool(v)) return pkv_fail(e, "%s: must be true or false", p);
    *out = cJSON_IsTrue(v);
    return 0;
}

int pkv_json_str(const cJSON *o, const char *path, const char *key, const char *def,
                 const char *const *choices, const char **out, int *idx, pkv_err *e) {
    char p[256];
    const cJSON *v = member_at(o, path, key, p);
    const char *s = def;
    if (v) {
        if (!cJSON_IsString(v)) return pkv_fail(e, "%s: must be a string", p);
        s = v->valuestring;
    }
    if (!s) return pkv_fail(e, "%s: is required", p);
    int found = -1;
    if (choices) {
        char list[512] = "";
        for (int i = 0; choices[i]; i++) {
            if (strcmp(choices[i], s) == 0) found = i;
            strncat(list, choices[i], sizeof list - strlen(list) - 1);
            if (choices[i + 1]) strncat(list, ", ", sizeof list - strlen(list) - 1);
        }
        if (found < 0) return pkv_fail(e, "%s: \"%s\" is not one of: %s", p, s, list);
    }
    *out = s;
    if (idx) *idx = found;
    return 0;
}

int pkv_json_sub(const cJSON *o, const char *path, const char *key, const cJSON **out, pkv_err *e) {
    const cJSON *v = member(o, key);
    *out = NULL;
    if (!v) return 0;
    if (!cJSON_IsObject(v)) {
        char p[256];
        pkv_json_path(p, sizeof p, path, key);
        return pkv_fail(e, "%s: must be an object", p);
    }
    *out = v;
    return 0;
}

char *pkv_read_file(const char *path, size_t *len, pkv_err *e) {
    /* Only a regular file of bounded size is read: a device (/dev/zero) would be read to
     * exhaustion, and opening a pipe waits for a writer (hence O_NONBLOCK to look). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        pkv_fail(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pkv_fail(e, "%s: not a regular file (%s)", path,
                 S_ISDIR(st.st_mode) ? "a directory" : "a device, pipe or socket");
        close(fd);
        return NULL;
    }
    FILE *f = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        pkv_fail(e, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > PKV_MAX_INPUT_BYTES) {
        pkv_fail(e, "%s: %.1f GiB, larger than the %.0f GiB an input file may be", path,
                 st.st_size / 1073741824.0, PKV_MAX_INPUT_BYTES / 1073741824.0);
        fclose(f);
        return NULL;
    }
    size_t n = 0, cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    if (buf) n = fread(buf, 1, cap - 1, f);
    if (!buf || ferror(f)) {
        pkv_fail(e, buf ? "%s: read failed: %s" : "%s: out of memory reading it", path,
                 strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* The 1-based line of position at in text. */
static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *c = text; *c && c < at; c++) line += *c == '\n';
    return line;
}

const char *pkv_json_key_twice(const cJSON *o) {
    if (!cJSON_IsObject(o)) return NULL;
    for (const cJSON *a = o->child; a; a = a->next)
        for (const cJSON *b = a->next; a->string && b; b = b->next)
            if (b->string && strcmp(a->string, b->string) == 0) return a->string;
    return NULL;
}

/* A key given twice in one object: the first would be used and the second ignored
 * without a word. Where the key's text occurs exactly twice in the file, both lines
 * are named. */
static int find_duplicate(const cJSON *o, const char *path, const char *text, const char *file,
                          pkv_err *e) {
    const char *key = pkv_json_key_twice(o);
    if (key) {
        char full[256], quoted[160];
        pkv_json_path(full, sizeof full, path, key);
        snprintf(quoted, sizeof quoted, "\"%s\"", key);
        const char *p1 = strstr(text, quoted), *p2 = p1 ? strstr(p1 + 1, quoted) : NULL;
        const char *p3 = p2 ? strstr(p2 + 1, quoted) : NULL;
        if (p2 && !p3)
            return pkv_fail(e, "%s:%d and %d: %s: the key is given twice", file, line_of(text, p1),
                            line_of(text, p2), full);
        return pkv_fail(e, "%s: %s: the key is given twice in one object", file, full);
    }
    for (const cJSON *a = o ? o->child : NULL; a; a = a->next) {
        char sub[256];
        if (a->string)
            pkv_json_path(sub, sizeof sub, path, a->string);
        else
            snprintf(sub, sizeof sub, "%s", path);
        if ((cJSON_IsObject(a) || cJSON_IsArray(a)) && find_duplicate(a, sub, text, file, e))
            return -1;
    }
    return 0;
}

cJSON *pkv_json_parse(const char *text, const char *file, pkv_err *e) {
    if ((unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF)
        text += 3; /* a UTF-8 byte order mark */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        if (!at) at = end ? end : text;
        int line = 1, col = 1;
        for (const char *c = text; *c && c < at; c++) {
            if (*c == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        pkv_fail(e, "%s:%d:%d: invalid JSON near here", file, line, col);
        return NULL;
    }
    if (find_duplicate(root, "", text, file, e)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

cJSON *pkv_json_read(const char *path, pkv_err *e) {
    char *text = pkv_read_file(path, NULL, e);
    cJSON *root = text ? pkv_json_parse(text, path, e) : NULL;
    free(text);
    return root;
}

int pkv_json_array(const cJSON *o, const char *path, const char *key, int most, const char *what,
                   const cJSON **arr, int *n, pkv_err *e) {
    char p[256];
    *arr = member_at(o, path, key, p);
    *n = cJSON_IsArray(*arr) ? cJSON_GetArraySize(*arr) : 0;
    if (*n < 1 || *n > most)
        return pkv_fail(e, "%s: must be an array of 1 to %d %s", p, most, what);
    return 0;
}
