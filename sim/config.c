#include "config.h"
#include "config_workload.h"
#include "jsonv.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const clock_names[] = {"predicted", "wall", "device", "auto", NULL};
static const char *const bucket_names[] = {"exact", "pow2", NULL};

static int parse_model(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {
        "hq", "hkv", "head_dim", "page_size", "dtype", "mlp_intermediate", NULL};
    int64_t hq, hkv, d, ps;
    const char *dtype;
    if (o) TRY(pkv_json_object(o, "model", keys, e));
    TRY(pkv_json_int(o, "model", "hq", 32, 1, 256, &hq, e));
    TRY(pkv_json_int(o, "model", "hkv", 8, 1, 256, &hkv, e));
    TRY(pkv_json_int(o, "model", "head_dim", 128, 8, 512, &d, e));
    TRY(pkv_json_int(o, "model", "page_size", 16, 1, 1024, &ps, e));
    static const char *const dtypes[] = {"fp16", NULL};
    TRY(pkv_json_str(o, "model", "dtype", "fp16", dtypes, &dtype, NULL, e));
    TRY(pkv_json_int(o, "model", "mlp_intermediate", 0, 0, 1 << 20, &c->mlp_inter, e));
    if (hq % hkv)
        return pkv_fail(e, "model.hq: %lld is not a multiple of model.hkv (%lld)", (long long)hq,
                        (long long)hkv);
    if (d % 8)
        return pkv_fail(e, "model.head_dim: must be a multiple of 8 (got %lld)", (long long)d);
    c->shape = (pkvk_shape){(int)hq, (int)hkv, (int)d, (int)ps};
    return 0;
}

static int parse_serving(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"max_active", "kv_pages",    "admission",
                                       "prefill",    "page_tables", NULL};
    static const char *const tkeys[] = {"mode", "hole_fraction", "bucket_len", NULL};
    static const char *const modes[] = {"allocator", "generator", NULL};
    static const char *const pkeys[] = {"base_us", "per_token_us", "measure", NULL};

    const char *adm;
    int64_t ma, kp;
    const cJSON *pf;
    if (o) TRY(pkv_json_object(o, "serving", keys, e));
    TRY(pkv_json_int(o, "serving", "max_active", 64, 1, 4096, &ma, e));
    TRY(pkv_json_int(o, "serving", "kv_pages", 65536, 1, INT32_MAX, &kp, e));
    int ai;
    TRY(pkv_json_str(o, "serving", "admission", "fcfs", pkv_admission_names, &adm, &ai, e));
    c->admission = pkv_admission_get(ai);
    TRY(pkv_json_sub(o, "serving", "prefill", &pf, e));
    if (pf) TRY(pkv_json_object(pf, "serving.prefill", pkeys, e));
    double base_us, tok_us;
    /* Affine prefill model: base + per_token * prompt tokens of the batch. The
     * defaults are of the order of a 7B model's prefill on one H200 (placeholders). */
    TRY(pkv_json_num(pf, "serving.prefill", "base_us", 2000, 0, false, 1e9, &base_us, e));
    TRY(pkv_json_num(pf, "serving.prefill", "per_token_us", 0.1, 0, false, 1e6, &tok_us, e));
    TRY(pkv_json_bool(pf, "serving.prefill", "measure", false, &c->prefill_measure, e));
    const cJSON *pt;
    const char *mode;
    int mi;
    int64_t bl;
    TRY(pkv_json_sub(o, "serving", "page_tables", &pt, e));
    if (pt) TRY(pkv_json_object(pt, "serving.page_tables", tkeys, e));
    TRY(pkv_json_str(pt, "serving.page_tables", "mode", "allocator", modes, &mode, &mi, e));
    TRY(pkv_json_num(pt, "serving.page_tables", "hole_fraction", 0, 0, false, 0.95,
                     &c->hole_fraction, e));
    TRY(pkv_json_int(pt, "serving.page_tables", "bucket_len", 0, 0, 1 << 24, &bl, e));
    if (bl > 0 && mi == 0)
        return pkv_fail(e, "serving.page_tables.bucket_len: only with mode \"generator\"");
    c->reserve_full = mi == 1;
    c->bucket_len = bl;
    c->max_active = (int32_t)ma;
    c->kv_pages = (int32_t)kp;
    c->prefill_base_s = base_us * 1e-6;
    c->prefill_per_token_s = tok_us * 1e-6;
    return 0;
}

static int parse_route(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {"policy",    "buckets",         "calibration",
                                       "overrides", "allow_other_gpu", NULL};
    const char *pol, *bm;
    int bmi;
    const cJSON *ov;
    if (o) TRY(pkv_json_object(o, "route", keys, e));
    TRY(pkv_json_str(o, "route", "policy", "adaptive", pkv_policy_names, &pol, NULL, e));
    TRY(pkv_json_str(o, "route", "buckets", "exact", bucket_names, &bm, &bmi, e));
    const cJSON *cv = o ? cJSON_GetObjectItemCaseSensitive(o, "calibration") : NULL;
    if (cv && !cJSON_IsString(cv)) return pkv_fail(e, "route.calibration: must be a string");
    if (cv)
        pkv_config_path(c->calibration, sizeof c->calibration, c->file, cv->valuestring);
    else
        snprintf(c->calibration, sizeof c->calibration, "%s",
                 PKV_SOURCE_DIR "/experiments/calibration/default.json");
    TRY(pkv_json_sub(o, "route", "overrides", &ov, e));
    TRY(pkv_json_bool(o, "route", "allow_other_gpu", false, &c->allow_other_gpu, e));
    snprintf(c->policy, sizeof c->policy, "%s", pol);
    c->bucket_mode = (pkv_bucket_mode)bmi;
    c->calib_overrides = ov ? cJSON_Duplicate(ov, 1) : NULL;
    return 0;
}

static int parse_run(pkv_config *c, const cJSON *o, pkv_err *e) {
    static const char *const keys[] = {
        "max_steps", "max_time_s",  "warmup_steps", "seed",       "output",          "backend",
        "clock",     "check_every", "check_first",  "cuda_graph", "metadata_upload", "record",
        NULL};
    static const char *const upload_names[] = {"params", "copy", NULL};
    const char *out, *be, *ck, *up, *rl;
    int bei, cki, upi, rli;
    int64_t seed;
    if (o) TRY(pkv_json_object(o, "run", keys, e));
    TRY(pkv_json_int(o, "run", "max_steps", 0, 0, INT64_MAX / 2, &c->max_steps, e));
    TRY(pkv_json_num(o, "run", "max_time_s", 0, 0, false, 1e12, &c->max_time, e));
    TRY(pkv_json_int(o, "run", "warmup_steps", 0, 0, INT64_MAX / 2, &c->warmup_steps, e));
    TRY(pkv_json_int(o, "run", "seed", 1, 0, INT64_MAX / 2, &seed, e));
    TRY(pkv_json_str(o, "run", "output", "", NULL, &out, NULL, e));
    TRY(pkv_json_str(o, "run", "backend", "auto", pkv_backend_names, &be, &bei, e));
    TRY(pkv_json_str(o, "run", "clock", "auto", clock_names, &ck, &cki, e));
    TRY(pkv_json_int(o, "run", "check_every", 0, 0, INT64_MAX / 2, &c->check_every, e));
    TRY(pkv_json_int(o, "run", "check_first", 0, 0, INT64_MAX / 2, &c->check_first, e));
    TRY(pkv_json_bool(o, "run", "cuda_graph", false, &c->cuda_graph, e));
    TRY(pkv_json_str(o, "run", "metadata_upload", "params", upload_names, &up, &upi, e));
    TRY(pkv_json_str(o, "run", "record", "full", pkv_record_level_names, &rl, &rli, e));
    c->metadata_copy = upi == 1;
    c->record = (pkv_record_level)rli;
    c->seed = (uint64_t)seed;
    c->backend = (pkv_backend_kind)bei;
    c->clock = cki == 3 ? -1 : cki;
    if (*out) /* an artifact: relative to the working folder, like -o */
        snprintf(c->output, sizeof c->output, "%s", out);
    else
        snprintf(c->output, sizeof c->output, "%s.h5", c->name);
    return 0;
}

/* Every request must fit an empty pool, or FCFS admission would wait forever; and
 * something must end the run. */
static int check_consistency(const pkv_config *c, pkv_err *e) {
    const pkv_workload_spec *w = &c->workload;
    if (c->cuda_graph && strcmp(c->policy, "oracle") == 0)
        return pkv_fail(e, "run.cuda_graph: the oracle times every route separately; use a fixed "
                           "route or adaptive with graph replay");
    if (!w->trace && w->num_requests == 0 && c->max_steps == 0 && c->max_time == 0)
        return pkv_fail(e, "run: nothing ends this run: set workload.num_requests, "
                           "run.max_steps or run.max_time_s");
    int64_t pm = w->trace ? -1 : pkv_length_max(&w->prompt);
    int64_t dm = w->trace ? -1 : pkv_length_max(&w->decode);
    int64_t longest = pm < 0 || dm < 0 || pm + dm > w->max_context ? w->max_context : pm + dm;
    if (c->bucket_len > 0) longest = (longest + c->bucket_len - 1) / c->bucket_len * c->bucket_len;
    int64_t pages = (longest + c->shape.page_size - 1) / c->shape.page_size;
    int64_t usable = c->kv_pages - (int64_t)(c->hole_fraction * c->kv_pages);
    if (pages > usable)
        return pkv_fail(e,
                        "serving.kv_pages: %lld usable pages of %d tokens (%d, less %.0f%% holes) "
                        "cannot hold one request of %lld tokens (the workload's longest); raise "
                        "kv_pages to at least %lld",
                        (long long)usable, c->shape.page_size, c->kv_pages, 100 * c->hole_fraction,
                        (long long)longest, (long long)ceil(pages / (1 - c->hole_fraction)));
    return 0;
}

int pkv_config_resolve(pkv_config *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "name", c->name);
    cJSON *m = cJSON_AddObjectToObject(r, "model");
    cJSON_AddNumberToObject(m, "hq", c->shape.hq);
    cJSON_AddNumberToObject(m, "hkv", c->shape.hkv);
    cJSON_AddNumberToObject(m, "head_dim", c->shape.d);
    cJSON_AddNumberToObject(m, "page_size", c->shape.page_size);
    cJSON_AddStringToObject(m, "dtype", "fp16");
    cJSON_AddNumberToObject(m, "mlp_intermediate", (double)c->mlp_inter);
    pkv_config_resolve_workload(&c->workload, &c->trace_spec, r);
    cJSON *sv = cJSON_AddObjectToObject(r, "serving");
    cJSON_AddNumberToObject(sv, "max_active", c->max_active);
    cJSON_AddNumberToObject(sv, "kv_pages", c->kv_pages);
    cJSON_AddStringToObject(sv, "admission", c->admission->name);
    cJSON *ptab = cJSON_AddObjectToObject(sv, "page_tables");
    cJSON_AddStringToObject(ptab, "mode", c->reserve_full ? "generator" : "allocator");
    cJSON_AddNumberToObject(ptab, "hole_fraction", c->hole_fraction);
    cJSON_AddNumberToObject(ptab, "bucket_len", (double)c->bucket_len);
    cJSON *pf = cJSON_AddObjectToObject(sv, "prefill");
    cJSON_AddNumberToObject(pf, "base_us", c->prefill_base_s * 1e6);
    cJSON_AddNumberToObject(pf, "per_token_us", c->prefill_per_token_s * 1e6);
    cJSON_AddBoolToObject(pf, "measure", c->prefill_measure);
    cJSON *rt = cJSON_AddObjectToObject(r, "route");
    cJSON_AddStringToObject(rt, "policy", c->policy);
    cJSON_AddStringToObject(rt, "buckets", bucket_names[c->bucket_mode]);
    cJSON_AddStringToObject(rt, "calibration", c->calibration);
    cJSON_AddBoolToObject(rt, "allow_other_gpu", c->allow_other_gpu);
    if (c->calib_overrides)
        cJSON_AddItemToObject(rt, "overrides", cJSON_Duplicate(c->calib_overrides, 1));
    cJSON *rn = cJSON_AddObjectToObject(r, "run");
    cJSON_AddNumberToObject(rn, "max_steps", (double)c->max_steps);
    cJSON_AddNumberToObject(rn, "max_time_s", c->max_time);
    cJSON_AddNumberToObject(rn, "warmup_steps", (double)c->warmup_steps);
    cJSON_AddNumberToObject(rn, "seed", (double)c->seed);
    cJSON_AddStringToObject(rn, "output", c->output);
    cJSON_AddStringToObject(rn, "backend", pkv_backend_names[c->backend]);
    cJSON_AddStringToObject(rn, "clock", c->clock < 0 ? "auto" : clock_names[c->clock]);
    cJSON_AddNumberToObject(rn, "check_every", (double)c->check_every);
    cJSON_AddNumberToObject(rn, "check_first", (double)c->check_first);
    cJSON_AddBoolToObject(rn, "cuda_graph", c->cuda_graph);
    cJSON_AddStringToObject(rn, "metadata_upload", c->metadata_copy ? "copy" : "params");
    cJSON_AddStringToObject(rn, "record", pkv_record_level_names[c->record]);
    free(c->resolved);
    c->resolved = cJSON_Print(r);
    cJSON_Delete(r);
    return c->resolved ? 0 : -1;
}

int pkv_config_load(pkv_config *c, const char *path, pkv_err *e) {
    char *text = pkv_read_file(path, NULL, e);
    return text ? pkv_config_parse(c, text, path, e) : -1;
}

int pkv_config_parse(pkv_config *c, char *text, const char *path, pkv_err *e) {
    *c = (pkv_config){.text = text};
    snprintf(c->file, sizeof c->file, "%s", path);
    cJSON *root = pkv_json_parse(c->text, path, e);
    if (!root) {
        pkv_config_free(c);
        return -1;
    }
    static const char *const keys[] = {"name",    "description", "model", "workload",
                                       "serving", "route",       "run",   NULL};
    const cJSON *m, *w, *s, *r, *u;
    const char *name;
    pkv_err sub;
    char base[1024];
    snprintf(base, sizeof base, "%s", path);
    char *stem = basename(base);
    char *dot = strrchr(stem, '.');
    if (dot) *dot = 0;
    int rc = -1;
    if (pkv_json_object(root, "", keys, &sub) ||
        pkv_json_str(root, "", "name", stem, NULL, &name, NULL, &sub) ||
        pkv_json_sub(root, "", "model", &m, &sub) || pkv_json_sub(root, "", "workload", &w, &sub) ||
        pkv_json_sub(root, "", "serving", &s, &sub) || pkv_json_sub(root, "", "route", &r, &sub) ||
        pkv_json_sub(root, "", "run", &u, &sub))
        goto out;
    snprintf(c->name, sizeof c->name, "%s", name);
    if (parse_model(c, m, &sub) ||
        pkv_config_parse_workload(&c->workload, &c->trace_spec, &c->trace, c->file, w, &sub) ||
        parse_serving(c, s, &sub) || parse_route(c, r, &sub) || parse_run(c, u, &sub) ||
        check_consistency(c, &sub))
        goto out;
    rc = pkv_config_resolve(c);
    if (rc) pkv_fail(&sub, "out of memory");
out:
    if (rc) pkv_fail(e, "%s: %s", path, sub.msg);
    cJSON_Delete(root);
    if (rc) pkv_config_free(c); /* on failure nothing stays owned */
    return rc;
}

void pkv_config_free(pkv_config *c) {
    pkv_trace_free(&c->trace);
    pkv_length_free(&c->workload.prompt);
    pkv_length_free(&c->workload.decode);
    free(c->text);
    free(c->resolved);
    cJSON_Delete(c->calib_overrides);
    *c = (pkv_config){0};
}
