#include "calib.h"

#include <math.h>
#include <stddef.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG ((double)(INT64_MAX / 2))
#define STR(k, f)                                                                                  \
    {                                                                                              \
        .obj = "", .name = k, .kind = PKV_KEY_STR, .off = offsetof(pkv_calib, f),                  \
        .size = sizeof(((pkv_calib *)0)->f)                                                        \
    }
#define ROW(k, K, f, d, l, h, ...)                                                                 \
    {                                                                                              \
        .obj = "", .name = k, .kind = PKV_KEY_##K, .off = offsetof(pkv_calib, f), .def = d,        \
        .lo = l, .hi = h, __VA_ARGS__                                                              \
    }

/* The keys of a calibration file (and of an experiment's route.overrides). The
 * defaults are the study's gates and margins with the bandwidth and launch cost of an
 * H200-class GPU (placeholders); a file that omits a key inherits its default. */
static const pkv_key rows[] = {
    STR("gpu_name", gpu_name),
    STR("driver", driver),
    STR("date", date),
    ROW("placeholder", BOOL, placeholder, 1, 0, 0),
    {.obj = "", .name = "note", .kind = PKV_KEY_CUSTOM},
    ROW("beta_gbps", NUM, beta, 4500, 1e-3, 1e6, .scale = 1e9),
    ROW("launch_us", NUM, lambda, 4, 0, 1e4, .scale = 1e-6),
    ROW("c_min", NUM, c_min, 2, 1e-6, 1e4),
    ROW("sm_count", INT, sm_count, 132, 1, 100000),
    ROW("gqa_group", INT, gqa_group, 4, 1, 64),
    ROW("min_context_tokens", I64, min_context, 16384, 0, BIG),
    ROW("margin_small_rows", INT, margin_small_rows, 4, 0, 1 << 20),
    ROW("margin_small", NUM, margin_small, 1.5, 0, 100, .lo_open = true),
    ROW("margin_large", NUM, margin_large, 1.05, 0, 100, .lo_open = true),
    ROW("min_split_tiles", INT, min_split_tiles, 4, 1, 1 << 20),
    ROW("resident_ctas_per_sm", INT, resident_ctas_per_sm, 2, 1, 64),
    ROW("flashinfer_decode_ctas_per_sm", INT, flashinfer_decode_ctas_per_sm, 8, 1, 64),
    ROW("wave_balance_min", NUM, wave_balance_min, 0.95, 0, 1, .lo_open = true),
    ROW("kv_fp8_cta_gbps", NUM, kv_fp8_cta_gbps, 15.1, 0, 1e6, .lo_open = true, .scale = 1e9),
    ROW("gemm_tflops", NUM, gemm_tflops, 700, 1e-6, 1e5),
    ROW("gemm_gbps", NUM, gemm_gbps, 4000, 1e-3, 1e6),
    ROW("gemm_us", NUM, gemm_us, 4, 0, 1e4),
    ROW("small_kernel_us", NUM, small_kernel_us, 3, 0, 1e4),
    ROW("moe_gemm_us", NUM, moe_gemm_us, 0, 0, 1e4),
    ROW("moe_gemm_share", NUM, moe_gemm_share, 0, 0, 1),
    ROW("prefill_fixed_us", NUM, prefill_fixed_us, 0, 0, 1e7),
    ROW("prefill_token_us", NUM, prefill_token_us, 0, 0, 1e4),
    ROW("prefill_score_ps", NUM, prefill_score_ps, 0, 0, 1e6),
    ROW("prefill_row_us", NUM, prefill_row_us, 0, 0, 1e4),
    ROW("prefill_attn_tflops", NUM, prefill_attn_tflops, 0, 0, 1e5),
    ROW("allreduce_gbps", NUM, allreduce_gbps, 400, 1e-3, 1e6),
    ROW("allreduce_us", NUM, allreduce_us, 10, 0, 1e4),
    ROW("swap_gbps", NUM, swap_gbps, 50, 1e-3, 1e6),
    ROW("swap_us", NUM, swap_us, 10, 0, 1e6),
    ROW("kv_link_gbps", NUM, kv_link_bps, 50, 1e-3, 1e6, .scale = 1e9),
    ROW("kv_link_us", NUM, kv_link_s, 20, 0, 1e6, .scale = 1e-6),
    ROW("kv_link_concurrency", INT, kv_link_streams, 4, 1, 1 << 16),
    ROW("memory_gib", NUM, memory_gib, 0, 0, 1e6),
    {.obj = "", .name = "route_scale", .kind = PKV_KEY_CUSTOM}, /* one factor per route */
    {.obj = "", .name = "route_model", .kind = PKV_KEY_CUSTOM}, /* fitted constants per route */
    {.obj = "", .name = "route_model_by_group", .kind = PKV_KEY_CUSTOM}, /* the same per G */
    {.obj = "", .name = "route_model_by_q", .kind = PKV_KEY_CUSTOM},     /* per verify's q */
    {.obj = "", .name = "flashinfer_decode_ctas_by_group", .kind = PKV_KEY_CUSTOM}, /* per G */
    {.obj = "", .name = "gates", .kind = PKV_KEY_CUSTOM},          /* the policy's gates per G */
    {.obj = "", .name = "gemm_tflops_at", .kind = PKV_KEY_CUSTOM}, /* GEMM rate per width */
    /* the same for a model at a tensor parallelism, its own shapes' */
    {.obj = "", .name = "gemm_tflops_by_model", .kind = PKV_KEY_CUSTOM},
    /* the grouped expert GEMMs' rate per rows an expert */
    {.obj = "", .name = "moe_gemm_tflops_at", .kind = PKV_KEY_CUSTOM},
    {.obj = "", .name = "fit", .kind = PKV_KEY_CUSTOM},         /* calibrate's fit record */
    {.obj = "", .name = "fit_by_q", .kind = PKV_KEY_CUSTOM},    /* fit --verify-only's record */
    {.obj = "", .name = "derived", .kind = PKV_KEY_CUSTOM},     /* a derived preset: its sources */
    {.obj = "", .name = "section", .kind = PKV_KEY_CUSTOM},     /* the section applied (load) */
    {.obj = "", .name = "study_layer", .kind = PKV_KEY_CUSTOM}, /* a file's sections (load) */
    {.obj = "", .name = "served_model", .kind = PKV_KEY_CUSTOM},
};

const char *const pkv_route_model_keys[PKV_ROUTE_MODEL_PARAMS + 1] = {
    "cta_gbps",  "cta_us",  "launch_us",          "fixed_us", "merge_gbps",
    "peak_gbps", "host_us", "host_us_per_ktoken", NULL};

int pkv_calib_group_index(int G) {
    for (int k = 0; k < PKV_GATE_GROUPS; k++)
        if (G == pkv_calib_group_of(k)) return k;
    return -1;
}

int pkv_calib_group_of(int k) {
    return k < 8 ? k + 1 : 16 << (k - 8);
}

/* Member `it` of an object at `parent` keyed by GQA group size (read from key: the
 * member's name or its end): its log2 G and its path in ip; -1 (with the error) for a
 * key that is not one, or (object: 1) a member that is not an object. */
static int group_member_of(const cJSON *it, const char *key, const char *parent, char *ip, size_t n,
                           int object, pkv_err *e) {
    char *end;
    long G = strtol(key, &end, 10);
    pkv_json_path(ip, n, parent, it->string);
    int k = *end || end == key ? -1 : pkv_calib_group_index((int)G);
    if (k < 0) return pkv_fail(e, "%s: a key is a GQA group size: 1 to 8, 16, 32 or 64", ip);
    if (object && !cJSON_IsObject(it)) return pkv_fail(e, "%s: must be an object", ip);
    return k;
}

static int group_member(const cJSON *it, const char *parent, char *ip, size_t n, int object,
                        pkv_err *e) {
    return group_member_of(it, it->string, parent, ip, n, object, e);
}

/* A route_model object at rp: {"ROUTE": {"cta_gbps": .., "cta_us": .., ...}, ...} into
 * dst; every constant of a named route must be given (a partly fitted model would
 * predict nonsense). */
static int parse_route_models(pkv_route_model *dst, const cJSON *rm, const char *rp, pkv_err *e) {
    const char *const *names = pkv_route_names, *const *keys = pkv_route_model_keys;
    if (pkv_json_object(rm, rp, names, e)) return -1;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
        const cJSON *m;
        char mp[160];
        if (pkv_json_sub(rm, rp, names[r], &m, e)) return -1;
        if (!m) continue;
        pkv_json_path(mp, sizeof mp, rp, names[r]);
        if (pkv_json_object(m, mp, keys, e)) return -1;
        pkv_route_model *d = &dst[r];
        for (int k = 0; k < PKV_ROUTE_MODEL_PARAMS; k++) {
            if (!cJSON_GetObjectItemCaseSensitive(m, keys[k])) {
                if (k == PKV_RM_HOST_US_PER_KTOKEN) { /* files before it lack it */
                    d->v[k] = 0;
                    continue;
                }
                char kp[200];
                pkv_json_path(kp, sizeof kp, mp, keys[k]);
                return pkv_fail(e, "%s: missing (a route's model needs all of its constants)", kp);
            }
            if (pkv_json_num(m, mp, keys[k], 0, 0, false, PKV_ROUTE_MODEL_MAX, &d->v[k], e))
                return -1;
        }
        d->set = true;
    }
    return 0;
}

/* route_model; route_model_by_group: {"G": {route_model's object}, ...};
 * route_model_by_q: {"q": {route_model's object}, ...};
 * flashinfer_decode_ctas_by_group: {"G": CTAs per SM, ...}. */
static int apply_route_model(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e) {
    const cJSON *rm, *bg, *qg, *fg, *it;
    char rp[128], bp[128], qp[128], fp[128];
    pkv_json_path(rp, sizeof rp, path, "route_model");
    pkv_json_path(qp, sizeof qp, path, "route_model_by_q");
    pkv_json_path(bp, sizeof bp, path, "route_model_by_group");
    pkv_json_path(fp, sizeof fp, path, "flashinfer_decode_ctas_by_group");
    if (pkv_json_sub(o, path, "route_model", &rm, e) ||
        (rm && parse_route_models(c->route_model, rm, rp, e)) ||
        pkv_json_sub(o, path, "route_model_by_group", &bg, e) ||
        pkv_json_sub(o, path, "flashinfer_decode_ctas_by_group", &fg, e))
        return -1;
    if (bg && !cJSON_IsObject(bg)) return pkv_fail(e, "%s: must be an object", bp);
    if (fg && !cJSON_IsObject(fg)) return pkv_fail(e, "%s: must be an object", fp);
    cJSON_ArrayForEach(it, bg) {
        char ip[160];
        int k = group_member(it, bp, ip, sizeof ip, 1, e);
        if (k < 0 || parse_route_models(c->group_model[k], it, ip, e)) return -1;
    }
    if (pkv_json_sub(o, path, "route_model_by_q", &qg, e)) return -1;
    if (qg && !cJSON_IsObject(qg)) return pkv_fail(e, "%s: must be an object", qp);
    cJSON_ArrayForEach(it, qg) {
        char ip[160], *end;
        const long q = strtol(it->string, &end, 10);
        pkv_json_path(ip, sizeof ip, qp, it->string);
        if (*end || end == it->string || q < 2 || q > PKV_GATE_QLENS)
            return pkv_fail(e, "%s: a key is a verify step's query tokens a row, 2 to %d", ip,
                            PKV_GATE_QLENS);
        if (!cJSON_IsObject(it)) return pkv_fail(e, "%s: must be an object", ip);
        if (parse_route_models(c->q_model[q - 1], it, ip, e)) return -1;
    }
    cJSON_ArrayForEach(it, fg) {
        char ip[160];
        int k = group_member(it, fp, ip, sizeof ip, 0, e);
        if (k < 0) return -1;
        if (!cJSON_IsNumber(it) || it->valuedouble != (int)it->valuedouble || it->valuedouble < 1 ||
            it->valuedouble > 64)
            return pkv_fail(e, "%s: an integer from 1 to 64", ip);
        c->fi_ctas_group[k] = (int)it->valuedouble;
    }
    return 0;
}

const pkv_route_model *pkv_calib_route_model(const pkv_calib *c, pkv_route r, int q_len) {
    for (int q = q_len > PKV_GATE_QLENS ? PKV_GATE_QLENS : q_len; q >= 2; q--)
        if (c->q_model[q - 1][r].set) return &c->q_model[q - 1][r];
    return &c->route_model[r];
}

void pkv_calib_use_group(pkv_calib *c, int G) {
    const int k = pkv_calib_group_index(G);
    if (k < 0) return;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if (c->group_model[k][r].set) c->route_model[r] = c->group_model[k][r];
    if (c->fi_ctas_group[k] > 0) c->flashinfer_decode_ctas_per_sm = c->fi_ctas_group[k];
}

/* A table of rates (gemm_tflops_at, moe_gemm_tflops_at): {"ROWS": TFLOP/s, ...}, widths
 * ascending; replaces the table. */
static int apply_rates(pkv_rates *t, const cJSON *o, const char *path, const char *key,
                       pkv_err *e) {
    const cJSON *g, *it;
    char gp[128];
    pkv_json_path(gp, sizeof gp, path, key);
    if (pkv_json_sub(o, path, key, &g, e)) return -1;
    if (!g) return 0;
    if (!cJSON_IsObject(g)) return pkv_fail(e, "%s: must be an object", gp);
    int n = 0;
    cJSON_ArrayForEach(it, g) {
        char *end, ip[160];
        const long width = strtol(it->string, &end, 10);
        pkv_json_path(ip, sizeof ip, gp, it->string);
        if (*end || end == it->string || width < 1 || width > (1 << 24))
            return pkv_fail(e, "%s: a key is a width in token rows, 1 to 16777216", ip);
        if (n && width <= t->rows[n - 1]) return pkv_fail(e, "%s: widths must ascend", ip);
        if (n == PKV_GEMM_RATES) return pkv_fail(e, "%s: at most %d widths", gp, PKV_GEMM_RATES);
        if (!cJSON_IsNumber(it) || !(it->valuedouble > 0) || it->valuedouble > 1e5)
            return pkv_fail(e, "%s: a rate in TFLOP/s, above 0 and at most 100000", ip);
        t->rows[n] = (double)width;
        t->tflops[n++] = it->valuedouble;
    }
    t->n = n;
    return 0;
}

/* gemm_tflops_by_model: {"MODEL/tpN": {"ROWS": TFLOP/s, ...}, ...}, each table as
 * gemm_tflops_at's; replaces the tables. */
static int apply_model_rates(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e) {
    const cJSON *g, *it;
    char gp[128];
    pkv_json_path(gp, sizeof gp, path, "gemm_tflops_by_model");
    if (pkv_json_sub(o, path, "gemm_tflops_by_model", &g, e)) return -1;
    if (!g) return 0;
    if (!cJSON_IsObject(g)) return pkv_fail(e, "%s: must be an object", gp);
    int n = 0;
    cJSON_ArrayForEach(it, g) {
        char ip[192];
        pkv_json_path(ip, sizeof ip, gp, it->string);
        const char *at = strrchr(it->string, '/');
        char *end = NULL;
        const long tp = at && !strncmp(at, "/tp", 3) ? strtol(at + 3, &end, 10) : 0;
        const size_t len = at ? (size_t)(at - it->string) : 0;
        if (!end || *end || end == at + 3 || tp < 1 || tp > 64 || len == 0 ||
            len >= sizeof c->by_model[0].model)
            return pkv_fail(e,
                            "%s: a key is MODEL/tpN, a preset's name and its tensor "
                            "parallelism (1 to 64), as \"llama-3.1-70b/tp4\"",
                            ip);
        if (n == PKV_MODEL_RATES) return pkv_fail(e, "%s: at most %d models", gp, PKV_MODEL_RATES);
        pkv_model_rates *m = &c->by_model[n];
        memcpy(m->model, it->string, len);
        m->model[len] = 0;
        m->tp = (int)tp;
        m->at = (pkv_rates){0};
        if (apply_rates(&m->at, g, gp, it->string, e)) return -1;
        if (m->at.n == 0) return pkv_fail(e, "%s: a table of at least one width", ip);
        n++;
    }
    c->n_by_model = n;
    return 0;
}

void pkv_calib_use_model(pkv_calib *c, const char *model, int tp) {
    for (int i = 0; i < c->n_by_model; i++)
        if (c->by_model[i].tp == (tp > 0 ? tp : 1) && !strcmp(c->by_model[i].model, model))
            c->gemm_at = c->by_model[i].at;
}

double pkv_rates_at(const pkv_rates *t, double width, double otherwise) {
    const int n = t->n;
    const double *x = t->rows, *y = t->tflops;
    if (n == 0) return otherwise;
    if (width <= x[0]) return y[0];
    for (int i = 1; i < n; i++)
        if (width <= x[i]) {
            const double f = log(width / x[i - 1]) / log(x[i] / x[i - 1]);
            return y[i - 1] + f * (y[i] - y[i - 1]);
        }
    return y[n - 1];
}

double pkv_calib_gemm_tflops(const pkv_calib *c, double width) {
    return pkv_rates_at(&c->gemm_at, width, c->gemm_tflops);
}

void pkv_calib_gemm_rates_json(const pkv_calib *c, cJSON *root) {
    const pkv_rates *t[2] = {&c->gemm_at, &c->moe_at};
    const char *key[2] = {"gemm_tflops_at", "moe_gemm_tflops_at"};
    for (int k = 0; k < 2; k++) {
        if (!t[k]->n) continue;
        cJSON *g = cJSON_AddObjectToObject(root, key[k]);
        for (int i = 0; i < t[k]->n; i++) {
            char name[16];
            snprintf(name, sizeof name, "%.0f", t[k]->rows[i]);
            cJSON_AddNumberToObject(g, name, t[k]->tflops[i]);
        }
    }
}

/* gates: {"G": {"min_context_tokens": .., "margin_small": .., "margin_large": ..}, and
 * "fp8_e4m3/G" for FP8 KV's own, each after "qN/" (N 2 to 16) for verify steps of N query
 * tokens a row}: replaces every gate (a G not named has none). */
static int apply_gates(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e) {
    const cJSON *g;
    char gp[128];
    pkv_json_path(gp, sizeof gp, path, "gates");
    if (pkv_json_sub(o, path, "gates", &g, e)) return -1;
    if (!g) return 0;
    static const char *const keys[] = {"min_context_tokens", "margin_small", "margin_large", NULL};
    pkv_gate gates[2][PKV_GATE_QLENS][PKV_GATE_GROUPS] = {{{{0}}}}; /* 16-bit KV's, FP8's */
    const cJSON *it;
    cJSON_ArrayForEach(it, g) {
        char ip[160];
        const char *name = it->string;
        int q = 1;
        if (name[0] == 'q') { /* "qN/": a verify step's gate */
            char *end;
            const long n = strtol(name + 1, &end, 10);
            if (end == name + 1 || *end != '/' || n < 2 || n > PKV_GATE_QLENS)
                return pkv_fail(e,
                                "%s.%s: \"qN/\" names the gate of verify steps of N query tokens "
                                "a row, N 2 to %d",
                                gp, name, PKV_GATE_QLENS);
            q = (int)n, name = end + 1;
        }
        const size_t pre = strlen(PKV_GATE_FP8);
        const int kv8 = strncmp(name, PKV_GATE_FP8, pre) == 0;
        int k = group_member_of(it, name + (kv8 ? pre : 0), gp, ip, sizeof ip, 1, e);
        if (k < 0 || pkv_json_object(it, ip, keys, e)) return -1;
        int64_t mc;
        pkv_gate *d = &gates[kv8][q - 1][k];
        d->on = true;
        if (pkv_json_int(it, ip, "min_context_tokens", c->min_context, 0, INT64_MAX / 2, &mc, e) ||
            pkv_json_num(it, ip, "margin_small", c->margin_small, 0, true, 100, &d->margin_small,
                         e) ||
            pkv_json_num(it, ip, "margin_large", c->margin_large, 0, true, 100, &d->margin_large,
                         e))
            return -1;
        d->min_context = mc;
    }
    memcpy(c->gates, gates, sizeof gates);
    c->gates_set = true;
    return 0;
}

pkv_gate pkv_calib_gate(const pkv_calib *c, int G, int kv_dtype, int q_len) {
    int k = pkv_calib_group_index(G);
    if (k < 0) return (pkv_gate){0};
    if (c->gates_set) {
        const int top = q_len < 1 ? 1 : q_len > PKV_GATE_QLENS ? PKV_GATE_QLENS : q_len;
        for (int kv8 = kv_dtype == PKVK_FP8_E4M3; kv8 >= 0; kv8--)
            for (int q = top; q >= 1; q--)
                if (c->gates[kv8][q - 1][k].on) return c->gates[kv8][q - 1][k];
        return (pkv_gate){0};
    }
    if (G != c->gqa_group) return (pkv_gate){0};
    return (pkv_gate){true, c->min_context, c->margin_small, c->margin_large};
}

/* The routes of m that are set, as a route_model object named `name` of parent. */
static void route_models_json(const pkv_route_model *m, cJSON *parent, const char *name) {
    cJSON *rm = NULL;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
        if (!m[r].set) continue;
        if (!rm) rm = cJSON_AddObjectToObject(parent, name);
        cJSON *o = cJSON_AddObjectToObject(rm, pkv_route_name((pkv_route)r));
        for (int k = 0; k < PKV_ROUTE_MODEL_PARAMS; k++)
            cJSON_AddNumberToObject(o, pkv_route_model_keys[k], m[r].v[k]);
    }
}

void pkv_calib_gates_json(const pkv_calib *c, cJSON *g, int q_min) {
    for (int q = q_min; q <= PKV_GATE_QLENS; q++)
        for (int kv8 = 0; kv8 < 2; kv8++)
            for (int k = 0; k < PKV_GATE_GROUPS; k++) {
                const pkv_gate *d = &c->gates[kv8][q - 1][k];
                if (!d->on) continue;
                char name[40], qn[8] = "";
                if (q > 1) snprintf(qn, sizeof qn, "q%d/", q);
                snprintf(name, sizeof name, "%s%s%d", qn, kv8 ? PKV_GATE_FP8 : "",
                         pkv_calib_group_of(k));
                cJSON_DeleteItemFromObjectCaseSensitive(g, name);
                cJSON *o = cJSON_AddObjectToObject(g, name);
                cJSON_AddNumberToObject(o, "min_context_tokens", (double)d->min_context);
                cJSON_AddNumberToObject(o, "margin_small", d->margin_small);
                cJSON_AddNumberToObject(o, "margin_large", d->margin_large);
            }
}

void pkv_calib_verify_models_json(const pkv_calib *c, cJSON *root) {
    cJSON *qg = NULL;
    for (int q = 2; q <= PKV_GATE_QLENS; q++) {
        int any = 0;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++) any |= c->q_model[q - 1][r].set;
        if (!any) continue;
        char name[8];
        snprintf(name, sizeof name, "%d", q);
        if (!qg) qg = cJSON_AddObjectToObject(root, "route_model_by_q");
        route_models_json(c->q_model[q - 1], qg, name);
    }
}

void pkv_calib_route_model_json(const pkv_calib *c, cJSON *root) {
    if (c->gates_set) pkv_calib_gates_json(c, cJSON_AddObjectToObject(root, "gates"), 1);
    route_models_json(c->route_model, root, "route_model");
    cJSON *bg = NULL;
    for (int k = 0; k < PKV_GATE_GROUPS; k++) {
        int any = 0;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++) any |= c->group_model[k][r].set;
        if (!any) continue;
        char name[8];
        snprintf(name, sizeof name, "%d", pkv_calib_group_of(k));
        if (!bg) bg = cJSON_AddObjectToObject(root, "route_model_by_group");
        route_models_json(c->group_model[k], bg, name);
    }
    pkv_calib_verify_models_json(c, root);
    cJSON *fg = NULL;
    for (int k = 0; k < PKV_GATE_GROUPS; k++) {
        if (c->fi_ctas_group[k] <= 0) continue;
        char name[8];
        snprintf(name, sizeof name, "%d", pkv_calib_group_of(k));
        if (!fg) fg = cJSON_AddObjectToObject(root, "flashinfer_decode_ctas_by_group");
        cJSON_AddNumberToObject(fg, name, c->fi_ctas_group[k]);
    }
}

pkv_keys pkv_calib_keys(void) {
    return PKV_KEYS(rows);
}

static const char *const sections[] = {PKV_CALIB_STUDY_LAYER, PKV_CALIB_SERVED_MODEL, NULL};

const char *pkv_calib_section(bool served_model) {
    return sections[served_model];
}

static bool is_section(const char *name) {
    for (int i = 0; sections[i]; i++)
        if (!strcmp(name, sections[i])) return true;
    return false;
}

bool pkv_calib_sectioned(const cJSON *root) {
    bool any = false;
    for (int i = 0; sections[i]; i++) any |= cJSON_HasObjectItem(root, sections[i]);
    return any;
}

bool pkv_calib_serves(const cJSON *root, const char *section) {
    return !pkv_calib_sectioned(root) || cJSON_HasObjectItem(root, section);
}

int pkv_calib_apply(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e) {
    if (pkv_keys_parse(pkv_calib_keys(), "", o, path, c, true, e)) return -1;
    for (const cJSON *it = o ? o->child : NULL; it; it = it->next)
        if (is_section(it->string))
            return pkv_fail(e,
                            "%s%s%s: a section is read from a calibration file's top level only "
                            "(for a run of its kind)",
                            path, *path ? "." : "", it->string);
    const cJSON *rs;
    char rp[128];
    pkv_json_path(rp, sizeof rp, path, "route_scale");
    if (pkv_json_sub(o, path, "route_scale", &rs, e)) return -1;
    if (rs) {
        if (pkv_json_object(rs, rp, pkv_route_names, e)) return -1;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (pkv_json_num(rs, rp, pkv_route_names[r], c->route_scale[r], 0, true, 1e3,
                             &c->route_scale[r], e))
                return -1;
    }
    if (apply_route_model(c, o, path, e) || apply_gates(c, o, path, e) ||
        apply_rates(&c->gemm_at, o, path, "gemm_tflops_at", e) ||
        apply_model_rates(c, o, path, e) ||
        apply_rates(&c->moe_at, o, path, "moe_gemm_tflops_at", e))
        return -1;
    /* The flat gate keys given on top of a calibration with its own gates (an
     * experiment's route.overrides, a sweep axis) apply to each of those gates. */
    if (c->gates_set && !cJSON_GetObjectItemCaseSensitive(o, "gates"))
        for (size_t k = 0; k < sizeof c->gates / sizeof(pkv_gate); k++) {
            pkv_gate *g = &c->gates[0][0][0] + k;
            if (!g->on) continue;
            if (cJSON_GetObjectItemCaseSensitive(o, "min_context_tokens"))
                g->min_context = c->min_context;
            if (cJSON_GetObjectItemCaseSensitive(o, "margin_small"))
                g->margin_small = c->margin_small;
            if (cJSON_GetObjectItemCaseSensitive(o, "margin_large"))
                g->margin_large = c->margin_large;
        }
    return 0;
}

void pkv_calib_defaults(pkv_calib *c) {
    *c = (pkv_calib){0};
    pkv_keys_defaults(pkv_calib_keys(), "", c);
    snprintf(c->gpu_name, sizeof c->gpu_name, "unknown");
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) c->route_scale[r] = 1.0;
}

void pkv_calib_flashinfer_occupancy(pkv_calib *c, const pkvk_shape *s) {
    int occ;
    if (pkvk_flashinfer_built() && pkvk_flashinfer_occupancy(s, &occ) == PKVK_OK && occ > 0)
        c->flashinfer_decode_ctas_per_sm = occ;
}

/* A file with sections: its top level with `section`'s keys in place (NULL: none),
 * every section removed, and "section" naming the one applied. *had: whether the file
 * has sections at all (a file without is left as it is). */
static int flatten(cJSON *root, const char *section, bool *had, pkv_err *e) {
    char names[64] = "";
    *had = false;
    for (int i = 0; sections[i]; i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, sections[i]);
        if (!s) continue;
        if (!cJSON_IsObject(s)) return pkv_fail(e, "%s: not an object", sections[i]);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *had ? ", " : "",
                 sections[i]);
        *had = true;
    }
    if (!*had) return 0;
    cJSON *s = section ? cJSON_DetachItemFromObjectCaseSensitive(root, section) : NULL;
    if (section && !s)
        return pkv_fail(e,
                        "no \"%s\" section, which a run of this kind reads (the file has: %s); "
                        "name a calibration for it",
                        section, names);
    for (int i = 0; sections[i]; i++) cJSON_DeleteItemFromObjectCaseSensitive(root, sections[i]);
    for (cJSON *it = s ? s->child : NULL, *next; it; it = next) {
        next = it->next;
        if (is_section(it->string) || !strcmp(it->string, "section")) {
            pkv_fail(e, "%s.%s: a section holds a kind's keys, not another section", section,
                     it->string);
            cJSON_Delete(s);
            return -1;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(root, it->string);
        cJSON *moved = cJSON_DetachItemViaPointer(s, it);
        if (!cJSON_AddItemToObject(root, moved->string, moved)) {
            cJSON_Delete(moved);
            cJSON_Delete(s);
            return pkv_fail(e, "out of memory");
        }
    }
    cJSON_Delete(s);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "section");
    if (section && !cJSON_AddStringToObject(root, "section", section))
        return pkv_fail(e, "out of memory");
    return 0;
}

int pkv_calib_load(pkv_calib *c, const char *path, const char *section, pkv_err *e) {
    char *text = pkv_read_file(path, NULL, e);
    if (!text) {
        pkv_calib_defaults(c);
        return -1;
    }
    return pkv_calib_load_text(c, text, path, section, e);
}

int pkv_calib_load_text(pkv_calib *c, char *text, const char *path, const char *section,
                        pkv_err *e) {
    pkv_calib_defaults(c);
    c->json = text;
    cJSON *root = pkv_json_parse(c->json, path, e);
    if (!root) goto fail;
    pkv_err sub;
    bool had;
    int bad = flatten(root, section, &had, &sub) || pkv_calib_apply(c, root, "", &sub);
    if (!bad && had) { /* what the run applied, not the file's other sections */
        char *applied = cJSON_Print(root);
        if (!applied) bad = pkv_fail(&sub, "out of memory") != 0;
        free(c->json);
        c->json = applied;
    }
    cJSON_Delete(root);
    if (bad) {
        pkv_fail(e, "%s: %s", path, sub.msg);
        goto fail;
    }
    return 0;
fail:
    free(c->json);
    c->json = NULL;
    return -1;
}

void pkv_calib_free(pkv_calib *c) {
    free(c->json);
    c->json = NULL;
}

int pkv_calib_attrs(const pkv_calib *c, pkv_attr *a, int cap) {
    int n = pkv_keys_attrs(pkv_calib_keys(), "", c, a, cap);
    if (n < 0 || n + PKV_ROUTE_COUNT + c->gemm_at.n + c->moe_at.n > cap) return -1;
    for (int i = 0; i < c->gemm_at.n; i++) {
        snprintf(a[n].name, sizeof a[n].name, "gemm_tflops_at_%.0f", c->gemm_at.rows[i]);
        a[n].kind = PKV_ATTR_F64;
        a[n++].f64 = c->gemm_at.tflops[i];
    }
    for (int i = 0; i < c->moe_at.n; i++) {
        snprintf(a[n].name, sizeof a[n].name, "moe_gemm_tflops_at_%.0f", c->moe_at.rows[i]);
        a[n].kind = PKV_ATTR_F64;
        a[n++].f64 = c->moe_at.tflops[i];
    }
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        snprintf(a[n].name, sizeof a[n].name, "route_scale_%s", pkv_route_name((pkv_route)k));
        a[n].kind = PKV_ATTR_F64;
        a[n++].f64 = c->route_scale[k];
        for (int j = 0; c->route_model[k].set && j < PKV_ROUTE_MODEL_PARAMS; j++) {
            if (n >= cap) return -1;
            snprintf(a[n].name, sizeof a[n].name, "route_model_%s_%s", pkv_route_name((pkv_route)k),
                     pkv_route_model_keys[j]);
            a[n].kind = PKV_ATTR_F64;
            a[n++].f64 = c->route_model[k].v[j];
        }
    }
    return n;
}
