/* serving.engine: a serving engine's profile by name and version (experiments/engines/
 * NAME@VERSION.json), or by path; its serving defaults, host work, CUDA-graph sizes,
 * attention backends and request path into the experiment. */
#include "config_engine.h"
#include "config_files.h"
#include "config_workload.h"
#include "jsonv.h"

#include <ctype.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PROFILES = 64 };

/* A version is numbers joined by dots ("0.9.0"); its parts into v (missing ones 0).
 * -1: not of that form. */
static int version_parts(const char *s, long v[4]) {
    memset(v, 0, 4 * sizeof *v);
    for (int i = 0;; i++) {
        if (i == 4 || !isdigit((unsigned char)*s)) return -1;
        char *end;
        v[i] = strtol(s, &end, 10);
        if (!*end) return 0;
        if (*end != '.') return -1;
        s = end + 1;
    }
}

int pkv_version_cmp(const char *a, const char *b) {
    long va[4], vb[4];
    version_parts(a, va), version_parts(b, vb);
    for (int i = 0; i < 4; i++)
        if (va[i] != vb[i]) return va[i] < vb[i] ? -1 : 1;
    return 0;
}

typedef struct profile_name {
    char engine[64], version[32];
} profile_name;

static int by_engine_version(const void *a, const void *b) {
    const profile_name *x = a, *y = b;
    const int c = strcmp(x->engine, y->engine);
    return c ? c : pkv_version_cmp(x->version, y->version);
}

/* item onto the list in buf, after ", " (dropped where buf is full). */
static void append(char *buf, size_t cap, const char *item) {
    const size_t u = strlen(buf);
    if (u + 2 + strlen(item) >= cap) return;
    if (u) strcat(buf, ", ");
    strcat(buf, item);
}

/* The profiles in dir (NAME@VERSION.json), at most cap. */
static int list_profiles(const char *dir, profile_name *out, int cap) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) && n < cap;) {
        const size_t l = strlen(de->d_name);
        const char *at = strchr(de->d_name, '@');
        if (l < 8 || strcmp(de->d_name + l - 5, ".json") || !at) continue;
        profile_name p;
        const int ne = (int)(at - de->d_name), nv = (int)(de->d_name + l - 5 - at - 1);
        if (ne < 1 || ne >= (int)sizeof p.engine || nv < 1 || nv >= (int)sizeof p.version) continue;
        snprintf(p.engine, sizeof p.engine, "%.*s", ne, de->d_name);
        snprintf(p.version, sizeof p.version, "%.*s", nv, at + 1);
        long v[4];
        if (!version_parts(p.version, v)) out[n++] = p;
    }
    if (d) closedir(d);
    return n;
}

int pkv_engine_resolve(const char *dir, const char *spec, char *taken, size_t n, pkv_err *e) {
    char name[64], want[32] = "";
    const char *at = strchr(spec, '@');
    const size_t ln = at ? (size_t)(at - spec) : strlen(spec);
    if (ln < 1 || ln >= sizeof name || (at && strlen(at + 1) >= sizeof want))
        return pkv_fail(e, "serving.engine: \"%s\" is not NAME or NAME@VERSION", spec);
    snprintf(name, sizeof name, "%.*s", (int)ln, spec);
    long v[4];
    if (at) {
        snprintf(want, sizeof want, "%s", at + 1);
        if (version_parts(want, v))
            return pkv_fail(e,
                            "serving.engine: \"%s\": a version is numbers joined by dots (as "
                            "vllm@0.9.0)",
                            spec);
    }
    profile_name all[MAX_PROFILES];
    const int np = list_profiles(dir, all, MAX_PROFILES);
    int best = -1;
    char same[512] = "", every[1024] = "";
    qsort(all, (size_t)np, sizeof *all, by_engine_version);
    for (int i = 0; i < np; i++) {
        char item[sizeof all->engine + sizeof all->version + 1];
        snprintf(item, sizeof item, "%.63s@%.31s", all[i].engine, all[i].version);
        append(every, sizeof every, item);
        if (strcmp(all[i].engine, name)) continue;
        append(same, sizeof same, all[i].version);
        if (*want && pkv_version_cmp(all[i].version, want) > 0) continue;
        if (best < 0 || pkv_version_cmp(all[i].version, all[best].version) > 0) best = i;
    }
    if (!*same)
        return pkv_fail(e,
                        "serving.engine: no profile of engine \"%s\" in %s (profiles: %s; or "
                        "pkvsim, its own loop, or a profile's path)",
                        name, dir, *every ? every : "none");
    if (best < 0)
        return pkv_fail(e,
                        "serving.engine: \"%s\" is older than every profile of %s (versions: "
                        "%s); name one of them",
                        spec, name, same);
    snprintf(taken, n, "%s@%s", all[best].engine, all[best].version);
    return 0;
}

/* profile.graphs: the captured batch sizes (sizes, then every step up to max). */
static int parse_graphs(pkv_engine_graphs *g, const cJSON *o, pkv_err *e) {
    const pkv_keys k = pkv_config_keys();
    TRY(pkv_keys_parse(k, PKV_OBJ_ENGINE ".graphs", o, "graphs", g, false, e));
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "sizes");
    const int n = s ? cJSON_GetArraySize(s) : 0;
    if (s && (!cJSON_IsArray(s) || n > PKV_GRAPH_SMALL))
        return pkv_fail(e, "graphs.sizes: a list of at most %d batch sizes", PKV_GRAPH_SMALL);
    int32_t last = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(s, i);
        const double d = cJSON_IsNumber(x) ? x->valuedouble : 0;
        if (!(d >= 1 && d <= 1 << 24) || d != floor(d) || (int32_t)d <= last)
            return pkv_fail(e,
                            "graphs.sizes[%d]: batch sizes are whole numbers from 1 to 2^24, "
                            "increasing",
                            i);
        g->small[g->n_small++] = last = (int32_t)d;
    }
    if (g->max > 0 && g->max < last)
        return pkv_fail(e, "graphs.max: %d is below graphs.sizes' largest (%d)", g->max, last);
    return 0;
}

/* profile.attention_backends: {"NAME": "ROUTE POLICY"}; serving.attention_backend (or
 * the profile's attention_backend) picks one, and its policy prices the decode
 * attention unless the experiment names route.policy. */
static int parse_attention(pkv_config *c, const cJSON *p, const cJSON *root, pkv_err *e) {
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(p, "attention_backends");
    const char *dflt;
    TRY(pkv_json_str(p, "", "attention_backend", "", NULL, &dflt, NULL, e));
    if (all && !cJSON_IsObject(all))
        return pkv_fail(e, "attention_backends: an object of backend names and route policies");
    if (!*c->attention_backend)
        snprintf(c->attention_backend, sizeof c->attention_backend, "%s", dflt);
    if (!*c->attention_backend) return 0;
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(all, c->attention_backend);
    if (!cJSON_IsString(pol)) {
        char names[256] = "";
        for (const cJSON *x = all ? all->child : NULL; x; x = x->next) {
            const size_t u = strlen(names);
            snprintf(names + u, sizeof names - u, "%s%s", u ? ", " : "", x->string);
        }
        return pkv_fail(e, "serving.attention_backend: \"%s\" is not one this engine offers (%s)",
                        c->attention_backend, *names ? names : "none");
    }
    const cJSON *route = cJSON_GetObjectItemCaseSensitive(root, "route");
    if (cJSON_GetObjectItemCaseSensitive(route, "policy")) return 0; /* the experiment's own */
    int known = 0;
    while (pkv_policy_names[known] && strcmp(pkv_policy_names[known], pol->valuestring)) known++;
    if (!pkv_policy_names[known] || strlen(pol->valuestring) >= sizeof c->policy)
        return pkv_fail(e, "attention_backends.%s: \"%s\" is not a route policy (route.policy's)",
                        c->attention_backend, pol->valuestring);
    snprintf(c->policy, sizeof c->policy, "%s", pol->valuestring);
    return 0;
}

int pkv_config_parse_engine(pkv_config *c, const cJSON *root, pkv_err *e) {
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "serving");
    const char *name = "pkvsim";
    if (sv) TRY(pkv_json_str(sv, "serving", "engine", "pkvsim", NULL, &name, NULL, e));
    if (!*name || strlen(name) >= sizeof c->engine.name)
        return pkv_fail(e, "serving.engine: a profile's name is 1 to %zu characters",
                        sizeof c->engine.name - 1);
    snprintf(c->engine.requested, sizeof c->engine.requested, "%s", name);
    snprintf(c->engine.name, sizeof c->engine.name, "%s", name);
    if (!strcmp(name, "pkvsim")) {
        if (*c->attention_backend)
            return pkv_fail(e, "serving.attention_backend: an engine's choice; pkvsim's own loop "
                               "prices the attention by route.policy");
        return 0;
    }
    const bool by_path = strchr(name, '/') || strstr(name, ".json");
    char dir[1024], taken[sizeof c->engine.name], path[1024];
    if (!by_path) {
        pkv_config_data_path(dir, sizeof dir, "experiments/engines");
        TRY(pkv_engine_resolve(dir, name, taken, sizeof taken, e));
        snprintf(c->engine.name, sizeof c->engine.name, "%s", taken);
    }
    cJSON *p =
        pkv_config_named_file(c->file, c->engine.name, "serving.engine", "experiments/engines",
                              "profiles", "pkvsim, ", path, sizeof path, e);
    if (!p) return -1;
    snprintf(c->engine_file, sizeof c->engine_file, "%s", path);
    pkv_err sub;
    const pkv_keys k = pkv_config_keys();
    const cJSON *host = NULL, *req = NULL, *dflt = NULL, *offline = NULL, *graphs = NULL,
                *gpu = NULL, *running = NULL;
    int rc =
        pkv_keys_check(k, PKV_OBJ_ENGINE, p, "", &sub) ||
        pkv_json_sub(p, "", "host", &host, &sub) || pkv_json_sub(p, "", "request", &req, &sub) ||
        pkv_json_sub(p, "", "serving", &dflt, &sub) ||
        pkv_json_sub(p, "", "serving_offline", &offline, &sub) ||
        pkv_json_sub(p, "", "graphs", &graphs, &sub) || pkv_json_sub(p, "", "gpu", &gpu, &sub) ||
        pkv_json_sub(p, "", "max_running", &running, &sub) ||
        pkv_keys_parse(k, PKV_OBJ_ENGINE ".gpu", gpu, "gpu", &c->engine, false, &sub) ||
        pkv_keys_parse(k, PKV_OBJ_ENGINE ".max_running", running, "max_running", &c->engine, false,
                       &sub) ||
        pkv_keys_parse(k, PKV_OBJ_ENGINE ".host", host, "host", &c->engine, false, &sub) ||
        pkv_keys_parse(k, PKV_OBJ_ENGINE ".request", req, "request", &c->engine, false, &sub) ||
        parse_graphs(&c->engine.host.graphs, graphs, &sub);
    if (!rc && c->engine.max_running.min > c->engine.max_running.max)
        rc = pkv_fail(&sub, "max_running: min %d is above max %d", c->engine.max_running.min,
                      c->engine.max_running.max);
    for (const cJSON *d = dflt; !rc && d; d = d == dflt ? offline : NULL)
        if (cJSON_GetObjectItemCaseSensitive(d, "engine") ||
            cJSON_GetObjectItemCaseSensitive(d, "client"))
            rc = pkv_fail(&sub, "%s: a profile names neither another engine nor the client",
                          d == dflt ? "serving" : "serving_offline");
    /* the engine's defaults (offline: its in-process usage's on top), then the
     * experiment's own serving keys again over them */
    if (!rc && dflt) rc = pkv_keys_parse(k, "serving", dflt, "serving", c, true, &sub);
    if (!rc && offline && c->client == PKV_CLIENT_OFFLINE)
        rc = pkv_keys_parse(k, "serving", offline, "serving_offline", c, true, &sub);
    if (!rc && (dflt || offline)) rc = pkv_keys_parse(k, "serving", sv, "serving", c, true, &sub);
    if (!rc) rc = parse_attention(c, p, root, &sub);
    cJSON_Delete(p);
    if (c->client == PKV_CLIENT_OFFLINE)
        c->engine.client_s = c->engine.multi_gpu_s = c->engine.frontend_s = 0;
    return rc ? pkv_fail(e, "serving.engine: %s: %s", path, sub.msg) : 0;
}
