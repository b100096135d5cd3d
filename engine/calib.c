#include "calib.h"

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
    ROW("beta_gbps", NUM, beta, 4500, 0, 1e6, .lo_open = true, .scale = 1e9),
    ROW("launch_us", NUM, lambda, 4, 0, 1e4, .scale = 1e-6),
    ROW("c_min", NUM, c_min, 2, 0, 1e4, .lo_open = true),
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
    ROW("gemm_tflops", NUM, gemm_tflops, 700, 0, 1e5, .lo_open = true),
    ROW("gemm_gbps", NUM, gemm_gbps, 4000, 0, 1e6, .lo_open = true),
    ROW("gemm_us", NUM, gemm_us, 4, 0, 1e4),
    ROW("small_kernel_us", NUM, small_kernel_us, 3, 0, 1e4),
    ROW("allreduce_gbps", NUM, allreduce_gbps, 400, 0, 1e6, .lo_open = true),
    ROW("allreduce_us", NUM, allreduce_us, 10, 0, 1e4),
    {.obj = "", .name = "route_scale", .kind = PKV_KEY_CUSTOM}, /* one factor per route */
    {.obj = "", .name = "fit", .kind = PKV_KEY_CUSTOM},         /* calibrate's fit record */
};

pkv_keys pkv_calib_keys(void) {
    return PKV_KEYS(rows);
}

int pkv_calib_apply(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e) {
    if (pkv_keys_parse(pkv_calib_keys(), "", o, path, c, true, e)) return -1;
    const cJSON *rs;
    char rp[128];
    pkv_json_path(rp, sizeof rp, path, "route_scale");
    if (pkv_json_sub(o, path, "route_scale", &rs, e)) return -1;
    if (rs) {
        const char *names[PKV_ROUTE_COUNT + 1];
        for (int r = 0; r < PKV_ROUTE_COUNT; r++) names[r] = pkv_route_name((pkv_route)r);
        names[PKV_ROUTE_COUNT] = NULL;
        if (pkv_json_object(rs, rp, names, e)) return -1;
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (pkv_json_num(rs, rp, names[r], c->route_scale[r], 0, true, 1e3, &c->route_scale[r],
                             e))
                return -1;
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

int pkv_calib_load(pkv_calib *c, const char *path, pkv_err *e) {
    pkv_calib_defaults(c);
    c->json = pkv_read_file(path, NULL, e);
    if (!c->json) return -1;
    cJSON *root = pkv_json_parse(c->json, path, e);
    if (!root) goto fail;
    pkv_err sub;
    if (pkv_calib_apply(c, root, "", &sub)) {
        pkv_fail(e, "%s: %s", path, sub.msg);
        cJSON_Delete(root);
        goto fail;
    }
    cJSON_Delete(root);
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
    if (n < 0 || n + PKV_ROUTE_COUNT > cap) return -1;
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        snprintf(a[n].name, sizeof a[n].name, "route_scale_%s", pkv_route_name((pkv_route)k));
        a[n].kind = PKV_ATTR_F64;
        a[n++].f64 = c->route_scale[k];
    }
    return n;
}
