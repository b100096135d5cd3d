/* Axes over an experiment's keys (sweeps, plans): sim/cmd/axis.h. */
#include "axis.h"
#include "calib.h"
#include "config_keys.h"
#include "jsonv.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

/* An axis may name any key of the experiment's tables (the rows that serve several
 * places by where they stand) or a calibration key under route.overrides. */
static int path_known(const char *path) {
    /* a pool's key: fleet.pools[N].KEY, its own (name, replicas, role, ...) or one of its
     * model, serving and route members, which take the experiment's keys */
    static const char pools[] = "fleet.pools[";
    if (!strncmp(path, pools, sizeof pools - 1)) {
        const char *p = path + sizeof pools - 1;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
        if (strncmp(p, "].", 2)) return 0;
        p += 2;
        if (strchr(p, '.')) return path_known(p);
        const pkv_keys k = pkv_config_keys();
        for (int i = 0; i < k.n; i++)
            if (!strcmp(k.rows[i].obj, PKV_OBJ_POOL) && !strcmp(k.rows[i].name, p)) return 1;
        return 0;
    }
    static const struct {
        const char *prefix, *obj;
    } shared[] = {{"workload.prompt.trace.", PKV_OBJ_TRACE},
                  {"workload.decode.trace.", PKV_OBJ_TRACE},
                  {"workload.trace.columns.", PKV_OBJ_COLUMNS},
                  {"workload.trace.", PKV_OBJ_TRACE},
                  {"workload.prompt.", PKV_OBJ_LENGTH},
                  {"workload.decode.", PKV_OBJ_LENGTH},
                  {"route.overrides.", ""}};
    const char *obj_s = NULL, *name = NULL;
    char obj[128];
    pkv_keys k = pkv_config_keys();
    for (size_t i = 0; i < sizeof shared / sizeof shared[0] && !name; i++)
        if (!strncmp(path, shared[i].prefix, strlen(shared[i].prefix))) {
            obj_s = shared[i].obj;
            name = path + strlen(shared[i].prefix);
            if (!*obj_s) k = pkv_calib_keys(); /* route.overrides */
        }
    if (!name) {
        const char *dot = strrchr(path, '.');
        snprintf(obj, sizeof obj, "%.*s", dot ? (int)(dot - path) : 0, path);
        obj_s = obj;
        name = dot ? dot + 1 : path;
    }
    if (strchr(name, '.')) return 0;
    for (int i = 0; i < k.n; i++)
        if (!strcmp(k.rows[i].obj, obj_s) && !strcmp(k.rows[i].name, name)) return 1;
    return 0;
}

/* The keys the run command's options set: an axis may not name them too. */
static const char *option_for(const char *path, const pkv_cli_overrides *o) {
    if (o->seed && !strcmp(path, "run.seed")) return "--seed";
    if (o->backend && !strcmp(path, "run.backend")) return "--backend";
    if (o->route && !strcmp(path, "route.policy")) return "--route";
    if (o->calibration && !strcmp(path, "route.calibration")) return "--calibration";
    if (!strcmp(path, "run.output")) return "the sweep's own point files";
    return NULL;
}

int pkv_axis_parse(pkv_axis *ax, const cJSON *o, const char *P, const pkv_cli_overrides *ov,
                   pkv_err *e) {
    const char *path;
    TRY(pkv_keys_check(pkv_config_keys(), PKV_OBJ_AXIS, o, P, e));
    TRY(pkv_json_str(o, P, "path", NULL, NULL, &path, NULL, e));
    if (strlen(path) >= sizeof ax->path || !path_known(path))
        return pkv_fail(e, "%s.path: \"%s\" is not a key of an experiment file (pkvsim keys)", P,
                        path);
    const char *opt = option_for(path, ov);
    if (opt)
        return pkv_fail(e, "%s.path: \"%s\" is set by %s; sweep it or set it, not both", P, path,
                        opt);
    snprintf(ax->path, sizeof ax->path, "%s", path);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "values");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "range");
    if (!v == !r) return pkv_fail(e, "%s: give either values (a list) or range", P);
    if (v) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1)
            return pkv_fail(e, "%s.values: must be a non-empty list", P);
        ax->values = cJSON_Duplicate(v, 1);
    } else {
        char rp[160];
        snprintf(rp, sizeof rp, "%s.range", P);
        double from, to, step;
        TRY(pkv_keys_check(pkv_config_keys(), PKV_OBJ_RANGE, r, rp, e));
        if (!cJSON_GetObjectItemCaseSensitive(r, "from") ||
            !cJSON_GetObjectItemCaseSensitive(r, "to"))
            return pkv_fail(e, "%s: needs from and to (and step, 1 by default)", rp);
        TRY(pkv_json_num(r, rp, "from", 0, -1e300, false, 1e300, &from, e));
        TRY(pkv_json_num(r, rp, "to", 0, -1e300, false, 1e300, &to, e));
        TRY(pkv_json_num(r, rp, "step", 1, 0, true, 1e300, &step, e));
        if (to < from) return pkv_fail(e, "%s.to: must be >= from", rp);
        double n = floor((to - from) / step * (1 + 1e-12)) + 1;
        if (n > PKV_AXIS_MAX_VALUES)
            return pkv_fail(e, "%s: more than %d values", rp, PKV_AXIS_MAX_VALUES);
        ax->values = cJSON_CreateArray();
        for (int i = 0; ax->values && i < (int)n; i++)
            cJSON_AddItemToArray(ax->values, cJSON_CreateNumber(from + i * step));
    }
    if (!ax->values) return pkv_fail(e, "out of memory");
    ax->n = cJSON_GetArraySize(ax->values);
    return 0;
}

int pkv_json_set_path(cJSON *root, const char *path, const cJSON *v, pkv_err *e) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *o = root;
    for (char *p = buf, *dot; (dot = strchr(p, '.')); p = dot + 1) {
        *dot = 0;
        char *br = strchr(p, '[');
        if (br) { /* NAME[N]: the experiment's list NAME, its item N */
            *br = 0;
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, p);
            const int i = atoi(br + 1), n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
            cJSON *item = cJSON_GetArrayItem(list, i);
            if (!cJSON_IsObject(item))
                return pkv_fail(e, "%s: the experiment's \"%s\" has %d item%s: no item %d", path, p,
                                n, n == 1 ? "" : "s", i);
            o = item;
            continue;
        }
        cJSON *next = cJSON_GetObjectItemCaseSensitive(o, p);
        if (next && cJSON_IsString(next) && !strcmp(p, "model")) {
            /* "model": "NAME" is {"preset": "NAME"} */
            cJSON *obj = cJSON_CreateObject();
            cJSON_AddStringToObject(obj, "preset", next->valuestring);
            cJSON_ReplaceItemInObjectCaseSensitive(o, p, obj);
            next = obj;
        }
        if (!next) next = cJSON_AddObjectToObject(o, p);
        if (!cJSON_IsObject(next))
            return pkv_fail(e, "%s: the experiment's \"%s\" is not an object", path, p);
        o = next;
    }
    const char *last = strrchr(path, '.') ? strrchr(path, '.') + 1 : path;
    cJSON *copy = cJSON_Duplicate(v, 1);
    if (!copy) return pkv_fail(e, "out of memory");
    if (cJSON_GetObjectItemCaseSensitive(o, last))
        cJSON_ReplaceItemInObjectCaseSensitive(o, last, copy);
    else
        cJSON_AddItemToObject(o, last, copy);
    return 0;
}

char *pkv_json_value_text(const cJSON *v) {
    return cJSON_IsString(v) ? strdup(v->valuestring) : cJSON_PrintUnformatted(v);
}

void pkv_axis_free(pkv_axis *ax) {
    cJSON_Delete(ax->values);
    ax->values = NULL, ax->n = 0;
}
