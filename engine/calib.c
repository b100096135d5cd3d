#include "calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const calib_keys[] = {"gpu_name",
                                         "driver",
                                         "date",
                                         "placeholder",
                                         "note",
                                         "beta_gbps",
                                         "launch_us",
                                         "c_min",
                                         "sm_count",
                                         "gqa_group",
                                         "min_context_tokens",
                                         "margin_small_rows",
                                         "margin_small",
                                         "margin_large",
                                         "min_split_tiles",
                                         "resident_ctas_per_sm",
                                         "flashinfer_decode_ctas_per_sm",
                                         "wave_balance_min",
                                         "route_scale",
                                         "fit",
                                         NULL};

static int copy_str(const cJSON *o, const char *path, const char *key, char *dst, size_t n,
                    pkv_err *e) {
    const char *s;
    if (pkv_json_str(o, path, key, dst, NULL, &s, NULL, e)) return -1;
    if (s != dst) snprintf(dst, n, "%s", s);
    return 0;
}

int pkv_calib_apply(pkv_calib *c, const cJSON *o, const char *path, pkv_err *e) {
    if (pkv_json_object(o, path, calib_keys, e)) return -1;
    double beta_gbps = c->beta / 1e9, launch_us = c->lambda * 1e6;
    int64_t sm = c->sm_count, g = c->gqa_group, mc = c->min_context, msr = c->margin_small_rows,
            mst = c->min_split_tiles, res = c->resident_ctas_per_sm,
            fdc = c->flashinfer_decode_ctas_per_sm;
    if (copy_str(o, path, "gpu_name", c->gpu_name, sizeof c->gpu_name, e) ||
        copy_str(o, path, "driver", c->driver, sizeof c->driver, e) ||
        copy_str(o, path, "date", c->date, sizeof c->date, e) ||
        pkv_json_bool(o, path, "placeholder", c->placeholder, &c->placeholder, e) ||
        pkv_json_num(o, path, "beta_gbps", beta_gbps, 0, true, 1e6, &beta_gbps, e) ||
        pkv_json_num(o, path, "launch_us", launch_us, 0, false, 1e4, &launch_us, e) ||
        pkv_json_num(o, path, "c_min", c->c_min, 0, true, 1e4, &c->c_min, e) ||
        pkv_json_int(o, path, "sm_count", sm, 1, 100000, &sm, e) ||
        pkv_json_int(o, path, "gqa_group", g, 1, 64, &g, e) ||
        pkv_json_int(o, path, "min_context_tokens", mc, 0, INT64_MAX / 2, &mc, e) ||
        pkv_json_int(o, path, "margin_small_rows", msr, 0, 1 << 20, &msr, e) ||
        pkv_json_num(o, path, "margin_small", c->margin_small, 0, true, 100, &c->margin_small, e) ||
        pkv_json_num(o, path, "margin_large", c->margin_large, 0, true, 100, &c->margin_large, e) ||
        pkv_json_num(o, path, "wave_balance_min", c->wave_balance_min, 0, true, 1,
                     &c->wave_balance_min, e) ||
        pkv_json_int(o, path, "min_split_tiles", mst, 1, 1 << 20, &mst, e) ||
        pkv_json_int(o, path, "resident_ctas_per_sm", res, 1, 64, &res, e) ||
        pkv_json_int(o, path, "flashinfer_decode_ctas_per_sm", fdc, 1, 64, &fdc, e))
        return -1;
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
    c->beta = beta_gbps * 1e9;
    c->lambda = launch_us * 1e-6;
    c->sm_count = (int)sm;
    c->gqa_group = (int)g;
    c->min_context = mc;
    c->margin_small_rows = (int)msr;
    c->min_split_tiles = (int)mst;
    c->resident_ctas_per_sm = (int)res;
    c->flashinfer_decode_ctas_per_sm = (int)fdc;
    return 0;
}

void pkv_calib_defaults(pkv_calib *c) {
    /* The study's gates and margins; bandwidth and launch cost of an H200-class
     * GPU. A file that omits a key inherits its default. */
    *c = (pkv_calib){.beta = 4.5e12,
                     .lambda = 4e-6,
                     .c_min = 2.0,
                     .sm_count = 132,
                     .gqa_group = 4,
                     .min_context = 16384,
                     .margin_small_rows = 4,
                     .margin_small = 1.50,
                     .margin_large = 1.05,
                     .min_split_tiles = 4,
                     .resident_ctas_per_sm = 2,
                     .flashinfer_decode_ctas_per_sm = 8,
                     .wave_balance_min = 0.95,
                     .placeholder = true};
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
    int n = 0;
#define F(key, v)                                                                                  \
    a[n++] = (pkv_attr) {                                                                          \
        .name = key, .kind = PKV_ATTR_F64, .f64 = (v)                                              \
    }
#define U(key, v)                                                                                  \
    a[n++] = (pkv_attr) {                                                                          \
        .name = key, .kind = PKV_ATTR_U64, .u64 = (uint64_t)(v)                                    \
    }
    if (cap < PKV_CALIB_ATTRS) return -1;
    a[n++] = (pkv_attr){.name = "gpu_name", .kind = PKV_ATTR_STR, .str = c->gpu_name};
    U("placeholder", c->placeholder);
    F("beta_bytes_per_s", c->beta);
    F("lambda_s", c->lambda);
    F("c_min", c->c_min);
    U("sm_count", c->sm_count);
    U("gqa_group", c->gqa_group);
    U("min_context_tokens", c->min_context);
    F("margin_small", c->margin_small);
    U("margin_small_rows", c->margin_small_rows);
    F("margin_large", c->margin_large);
    U("min_split_tiles", c->min_split_tiles);
    U("resident_ctas_per_sm", c->resident_ctas_per_sm);
    U("flashinfer_decode_ctas_per_sm", c->flashinfer_decode_ctas_per_sm);
    F("wave_balance_min", c->wave_balance_min);
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) {
        snprintf(a[n].name, sizeof a[n].name, "route_scale_%s", pkv_route_name((pkv_route)k));
        a[n].kind = PKV_ATTR_F64;
        a[n++].f64 = c->route_scale[k];
    }
#undef F
#undef U
    return n;
}
