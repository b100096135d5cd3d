/* The model section of an experiment: its preset and keys, the shape's rules (a mixture
 * of experts' among them), its context, and the speculative proposer's model. */
#include "config_model.h"
#include "config_files.h"
#include "config_keys.h"
#include "config_workload.h"
#include "jsonv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* workload.max_context within the model's own context: its default where the workload
 * gives none, and refused past it (an engine refuses a model length past the model's). */
int pkv_config_model_context(pkv_config *c, const cJSON *w, pkv_err *e) {
    const int64_t own = c->model.max_model_len;
    if (own <= 0) return 0;
    if (!cJSON_GetObjectItemCaseSensitive(w, "max_context")) {
        c->workload.max_context = own;
        return 0;
    }
    if (c->workload.max_context > own)
        return pkv_fail(e,
                        "workload.max_context: %lld tokens is past %s's context of %lld "
                        "(model.max_model_len, its config's max_position_embeddings)",
                        (long long)c->workload.max_context, c->model.name, (long long)own);
    return 0;
}

/* The model: its rows' defaults (the study layer), then a preset's file, then the
 * experiment's own keys. "model": "NAME" is {"preset": "NAME"}; a preset is a file
 * of experiments/models/ by name, or a path (with a '/' or ending in .json) taken from
 * the experiment file's folder. */
int pkv_config_parse_model(pkv_config *c, const cJSON *root, pkv_err *e) {
    pkv_keys k = pkv_config_keys();
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model"), *own = m;
    pkv_keys_defaults(k, "model", c);
    const char *preset = NULL;
    if (cJSON_IsString(m)) {
        preset = m->valuestring, own = NULL;
    } else if (m && !cJSON_IsObject(m)) {
        return pkv_fail(e, "model: must be a preset name or an object");
    } else if (m) {
        TRY(pkv_keys_check(k, "model", m, "model", e));
        TRY(pkv_json_str(m, "model", "preset", "", NULL, &preset, NULL, e));
        if (!*preset) preset = NULL;
        snprintf(c->model.name, sizeof c->model.name, "custom");
    }
    if (preset) {
        char path[1024];
        cJSON *p = pkv_config_named_file(c->file, preset, "model.preset", "experiments/models",
                                         "presets", "", path, sizeof path, e);
        if (!p) return -1;
        snprintf(c->model_file, sizeof c->model_file, "%s", path);
        snprintf(c->model.name, sizeof c->model.name, "%s", preset);
        pkv_err sub;
        int rc = pkv_keys_parse(k, "model", p, "", c, true, &sub);
        cJSON_Delete(p);
        if (rc) return pkv_fail(e, "model.preset: %s: %s", path, sub.msg);
    }
    if (own) TRY(pkv_keys_parse(k, "model", own, "model", c, true, e));
    const cJSON *er = NULL;
    if (own) TRY(pkv_json_sub(own, "model", "expert_routing", &er, e));
    TRY(pkv_keys_parse(k, "model.expert_routing", er, "model.expert_routing", c, false, e));
    pkv_model *md = &c->model;
    if (er && !md->experts)
        return pkv_fail(e, "model.expert_routing: routes a mixture of experts' tokens; this "
                           "model has none (model.experts 0)");
    if (md->kv_dtype == PKV_KV_DTYPE_AUTO) md->kv_dtype = md->dtype;
    return pkv_model_check(md, e);
}

/* serving.speculative: on a served model, its draft model's preset read as model.preset
 * reads one (a dense model). */
int pkv_config_parse_speculative(pkv_config *c, pkv_err *e) {
    pkv_speculative *sp = &c->spec;
    if (sp->method == PKV_SPEC_NONE) {
        sp->tokens = 0;
        return 0;
    }
    if (c->scheduler_steps > 1)
        return pkv_fail(e, "serving.speculative: not with serving.scheduler_steps > 1 (vLLM "
                           "ran its multi-step scheduling without speculation)");
    const double m = sp->acceptance, sd = sp->acceptance_sd;
    if (sd > 0 && !(sd * sd < m * (1 - m)))
        return pkv_fail(e,
                        "serving.speculative.acceptance_sd: %g is too wide for a mean of %g: a "
                        "beta law's standard deviation is below sqrt(mean (1 - mean)) = %.4g",
                        sd, m, sqrt(m * (1 - m)));
    if (sp->method != PKV_SPEC_DRAFT) return 0;
    char path[1024];
    cJSON *p = pkv_config_named_file(c->file, sp->draft_model, "serving.speculative.draft_model",
                                     "experiments/models", "presets", "", path, sizeof path, e);
    if (!p) return -1;
    pkv_config *d = calloc(1, sizeof *d);
    if (!d) {
        cJSON_Delete(p);
        return pkv_fail(e, "out of memory");
    }
    pkv_keys k = pkv_config_keys();
    pkv_keys_defaults(k, "model", d);
    pkv_err sub;
    int rc = pkv_keys_parse(k, "model", p, "", d, true, &sub);
    cJSON_Delete(p);
    sp->draft = d->model;
    free(d);
    snprintf(sp->draft.name, sizeof sp->draft.name, "%s", sp->draft_model);
    if (rc) return pkv_fail(e, "serving.speculative.draft_model: %s: %s", path, sub.msg);
    if (!pkv_model_kind_of(&sp->draft)->weights || sp->draft.experts)
        return pkv_fail(e, "serving.speculative.draft_model: %s is not a dense served model",
                        sp->draft_model);
    sp->draft.tp = 1; /* the draft runs whole on each GPU, as vLLM runs it */
    sp->draft.dtype = c->model.dtype, sp->draft.kv_dtype = c->model.kv_dtype;
    sp->draft.page_size = c->model.page_size; /* its KV in pages of the served model's ids */
    return 0;
}
