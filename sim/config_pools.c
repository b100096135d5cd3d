/* A fleet's pools and its autoscaler, from the experiment's fleet section. */
#include "config_pools.h"
#include "config_keys.h"
#include "config_workload.h"
#include "fleet.h"
#include "jsonv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pool's settings: the experiment's, its model, serving and route objects with the
 * pool's members on top, without the fleet section; parsed as an experiment. */
static int parse_pool(pkv_config *c, const cJSON *root, const cJSON *o, const char *P,
                      pkv_pool *pool, pkv_config_parser parse, pkv_err *e) {
    const char *name, *role;
    int64_t replicas;
    TRY(pkv_keys_check(pkv_config_keys(), PKV_OBJ_POOL, o, P, e));
    TRY(pkv_json_str(o, P, "name", "", NULL, &name, NULL, e));
    TRY(pkv_json_int(o, P, "replicas", 1, 1, 100000, &replicas, e));
    TRY(pkv_json_str(o, P, "role", "mixed", pkv_role_names, &role, &pool->role, e));
    if (!*name || strlen(name) >= sizeof pool->name)
        return pkv_fail(e, "%s.name: a pool's name is 1 to %zu characters", P,
                        sizeof pool->name - 1);
    snprintf(pool->name, sizeof pool->name, "%s", name);
    pool->replicas = (int)replicas;
    cJSON *copy = cJSON_Duplicate(root, 1);
    if (!copy) return pkv_fail(e, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "fleet");
    static const char *const over[] = {"model", "serving", "route"};
    for (size_t k = 0; k < sizeof over / sizeof *over; k++) {
        const cJSON *mine;
        if (pkv_json_sub(o, P, over[k], &mine, e)) {
            cJSON_Delete(copy);
            return -1;
        }
        if (!mine) continue;
        if (!strcmp(over[k], "route")) {
            pool->own_calibration =
                cJSON_HasObjectItem(mine, "calibration") || cJSON_HasObjectItem(mine, "gpu");
            pool->own_policy = cJSON_HasObjectItem(mine, "policy");
        }
        cJSON *base = cJSON_GetObjectItemCaseSensitive(copy, over[k]);
        if (!base) base = cJSON_AddObjectToObject(copy, over[k]);
        for (const cJSON *m = mine->child; base && m; m = m->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(base, m->string);
            cJSON_AddItemToObject(base, m->string, cJSON_Duplicate(m, 1));
        }
    }
    char *text = cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    pool->cfg = calloc(1, sizeof *pool->cfg);
    if (!text || !pool->cfg) {
        free(text);
        return pkv_fail(e, "out of memory");
    }
    pkv_err sub;
    if (parse(pool->cfg, text, c->file, &sub)) {
        free(pool->cfg);
        pool->cfg = NULL;
        const size_t n = strlen(c->file); /* its message begins with the file */
        const char *msg =
            strncmp(sub.msg, c->file, n) == 0 && sub.msg[n] == ':' ? sub.msg + n + 2 : sub.msg;
        return pkv_fail(e, "%s (pool \"%s\", the experiment with its settings): %s", P, name, msg);
    }
    const pkv_model_kind *mk = pkv_model_kind_of(&pool->cfg->model);
    if (pool->role != PKV_ROLE_MIXED && !mk->prefill_samples)
        return pkv_fail(e,
                        "%s.role: a %s pool needs a prefill that samples the first token to "
                        "hand over, which %s's does not",
                        P, role, mk->what);
    return 0;
}

/* fleet.autoscale: its pool, and the replicas it starts with within min and max. */
static int parse_autoscale(pkv_config *c, const cJSON *fl, pkv_err *e) {
    pkv_autoscale *a = &c->fleet.autoscale;
    if (!(a->on = fl && cJSON_GetObjectItemCaseSensitive(fl, "autoscale"))) return 0;
    if (a->max < 1) return pkv_fail(e, "fleet.autoscale.max: required, 1 or more");
    if (!(a->target > 0))
        return pkv_fail(e, "fleet.autoscale.target: required, above 0 (the metric's value it "
                           "aims at: waiting requests or requests per replica, the KV pool's "
                           "used share, or the TTFT percentile in ms)");
    if (a->min > a->max)
        return pkv_fail(e, "fleet.autoscale.min: %d is above fleet.autoscale.max %d", a->min,
                        a->max);
    const char *key = "fleet.replicas";
    a->pool_index = 0;
    if (c->fleet.n_pools) {
        a->pool_index = -1;
        for (int p = 0; p < c->fleet.n_pools; p++)
            if (!*a->pool ? p == 0 : !strcmp(a->pool, c->fleet.pools[p].name)) a->pool_index = p;
        if (a->pool_index < 0)
            return pkv_fail(e, "fleet.autoscale.pool: \"%s\" names no pool of fleet.pools",
                            a->pool);
        a->initial = c->fleet.pools[a->pool_index].replicas;
        key = "its pool's replicas";
    } else if (*a->pool) {
        return pkv_fail(e, "fleet.autoscale.pool: there are no fleet.pools to name");
    } else {
        a->initial = c->fleet.replicas;
    }
    if (a->metric == PKV_SCALE_TTFT && c->fleet.n_pools &&
        c->fleet.pools[a->pool_index].role == PKV_ROLE_DECODE)
        return pkv_fail(e,
                        "fleet.autoscale.metric: ttft is stamped where a request is "
                        "prefilled, not on the decode pool \"%s\"",
                        c->fleet.pools[a->pool_index].name);
    if (a->initial < a->min || a->initial > a->max)
        return pkv_fail(e,
                        "fleet.autoscale: the fleet starts with %s (%d), outside min %d and "
                        "max %d",
                        key, a->initial, a->min, a->max);
    return 0;
}

/* fleet.pools: the pools in order (replicas numbered across them). */
int pkv_config_parse_pools(pkv_config *c, const cJSON *root, pkv_config_parser parse, pkv_err *e) {
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(root, "fleet");
    const cJSON *pl = fl ? cJSON_GetObjectItemCaseSensitive(fl, "pools") : NULL;
    if (!pl) return parse_autoscale(c, fl, e);
    if (cJSON_GetObjectItemCaseSensitive(fl, "replicas"))
        return pkv_fail(e, "fleet.replicas: give fleet.replicas or fleet.pools (each pool "
                           "its own replicas), not both");
    const int n = cJSON_IsArray(pl) ? cJSON_GetArraySize(pl) : 0;
    if (n < 1 || n > 64) return pkv_fail(e, "fleet.pools: must be a list of 1 to 64 pools");
    if (!(c->fleet.pools = calloc((size_t)n, sizeof *c->fleet.pools)))
        return pkv_fail(e, "out of memory");
    c->fleet.n_pools = n;
    int roles[3] = {0}, total = 0;
    for (int i = 0; i < n; i++) {
        char P[32];
        snprintf(P, sizeof P, "fleet.pools[%d]", i);
        const cJSON *o = cJSON_GetArrayItem(pl, i);
        pkv_pool *pool = &c->fleet.pools[i];
        TRY(parse_pool(c, root, o, P, pool, parse, e));
        for (int j = 0; j < i; j++)
            if (!strcmp(c->fleet.pools[j].name, pool->name))
                return pkv_fail(e, "%s.name: \"%s\" names fleet.pools[%d] too", P, pool->name, j);
        roles[pool->role] += pool->replicas;
        if ((total += pool->replicas) > 100000)
            return pkv_fail(e, "fleet.pools: more than 100000 replicas in all");
    }
    if (!roles[PKV_ROLE_PREFILL] != !roles[PKV_ROLE_DECODE])
        return pkv_fail(e, "fleet.pools: a %s pool needs a %s pool to send its requests to",
                        roles[PKV_ROLE_PREFILL] ? "prefill" : "decode",
                        roles[PKV_ROLE_PREFILL] ? "decode" : "prefill");
    /* a prefilled request's KV continues on a decode pool only where the model that wrote
     * it runs: the same layers, heads, head dimension, KV type and pages */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && c->fleet.pools[i].role == PKV_ROLE_PREFILL; j++) {
            const pkv_model *a = &c->fleet.pools[i].cfg->model, *b = &c->fleet.pools[j].cfg->model;
            if (c->fleet.pools[j].role != PKV_ROLE_DECODE) continue;
            if (a->layers != b->layers || a->hidden != b->hidden || a->hq != b->hq ||
                a->hkv != b->hkv || a->head_dim != b->head_dim || a->kv_dtype != b->kv_dtype ||
                a->page_size != b->page_size)
                return pkv_fail(e,
                                "fleet.pools[%d]: its model (%s) is not decode pool "
                                "fleet.pools[%d]'s (%s), where its prefilled KV goes: the KV "
                                "continues only on the model that wrote it (layers, heads, head "
                                "dimension, KV type and page size alike)",
                                i, a->name, j, b->name);
        }
    c->fleet.replicas = total;
    return parse_autoscale(c, fl, e);
}
