#define _DEFAULT_SOURCE /* basename */
#include "config.h"
#include "fleet.h"
#include "backend.h"
#include "calib.h"
#include "config_engine.h"
#include "config_files.h"
#include "config_model.h"
#include "config_pools.h"
#include "config_workload.h"
#include "jsonv.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sections of pkv_config whose rows are all scalars or sub-objects of it. */
static const char *const config_objs[] = {
    "model", "serving", "serving.prefill", "serving.page_tables", "serving.speculative", "route",
    "run",   "slo",     "fleet",           "fleet.autoscale"};

static int parse_section(pkv_config *c, const cJSON *root, const char *obj, pkv_err *e) {
    const cJSON *o = root;
    char part[64];
    for (const char *p = obj; o && *p;) { /* walk "serving.prefill" down the tree */
        size_t n = strcspn(p, ".");
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        const cJSON *sub;
        char parent[64];
        snprintf(parent, sizeof parent, "%.*s", (int)(p - obj > 0 ? p - obj - 1 : 0), obj);
        TRY(pkv_json_sub(o, parent, part, &sub, e));
        o = sub;
        p += n + (p[n] == '.');
    }
    return pkv_keys_parse(pkv_config_keys(), obj, o, obj, c, false, e);
}

/* run.seed: a whole number up to 9e15 (a JSON number is a double: below 2^53 every
 * whole number typed is the one read), or any up to 2^64 - 1 as a string of digits;
 * default 1. */
#define SEED_NUMBER_MAX 9e15
/* cJSON prints 15 significant digits: below this, the printed number is exact. */
#define SEED_PRINT_MAX 1e15
static int parse_seed(const cJSON *v, uint64_t *seed, pkv_err *e) {
    *seed = 1;
    if (!v) return 0;
    if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (!(d >= 0 && d <= SEED_NUMBER_MAX && d == floor(d)))
            return pkv_fail(e,
                            "run.seed: must be a whole number in [0, 9e15] (got %.17g); a larger "
                            "seed, up to 2^64 - 1, goes as a string of digits, e.g. "
                            "\"18446744073709551615\", since a JSON number is a double",
                            d);
        *seed = (uint64_t)d;
        return 0;
    }
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    char *end;
    errno = 0;
    unsigned long long u = s && isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
    if (!s || !isdigit((unsigned char)*s) || *end || errno == ERANGE)
        return pkv_fail(e, "run.seed: must be a whole number in [0, 9e15] or a string of digits "
                           "up to 18446744073709551615");
    *seed = u;
    return 0;
}

/* The seed in /config/resolved: a number while it prints exactly, else its digits. */
static cJSON *seed_json(uint64_t seed) {
    if ((double)seed < SEED_PRINT_MAX) return cJSON_CreateNumber((double)seed);
    char digits[24];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)seed);
    return cJSON_CreateString(digits);
}

/* Whether route.gpu `gpu`'s file in the GPUs' index serves a run of `section`'s kind;
 * why (may be NULL) receives the reason its file cannot be read ("" if it can). */
static bool gpu_serves(const cJSON *gpus, const char *gpu, const char *section, pkv_err *why) {
    if (why) why->msg[0] = 0;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(gpus, gpu);
    if (!cJSON_IsString(f) || strchr(f->valuestring, '/')) return false;
    char rel[300], path[1024];
    snprintf(rel, sizeof rel, "experiments/calibration/%s", f->valuestring);
    pkv_config_data_path(path, sizeof path, rel);
    pkv_err ignored;
    cJSON *cal = pkv_json_read(path, why ? why : &ignored);
    const bool ok = cal && pkv_calib_serves(cal, section);
    cJSON_Delete(cal);
    return ok;
}

/* No route.calibration: route.gpu's file, as experiments/calibration/gpus.json names
 * it, where it serves the run's kind of model (a served model, or the study layer); an
 * error naming the GPUs whose files do otherwise. A placeholder is never chosen. */
static int choose_calibration(pkv_config *c, pkv_err *e) {
    const char *section = pkv_model_calib_section(&c->model);
    char index[1024];
    pkv_config_data_path(index, sizeof index, "experiments/calibration/gpus.json");
    pkv_err sub;
    cJSON *root = pkv_json_read(index, &sub);
    if (!root)
        return pkv_fail(e,
                        "route.calibration: none given, and the GPUs' index cannot be read "
                        "(%s); name a calibration file",
                        sub.msg);
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(gpus, c->gpu);
    int rc = 0;
    pkv_err unread;
    if (gpu_serves(gpus, c->gpu, section, &unread)) {
        char rel[300];
        snprintf(rel, sizeof rel, "experiments/calibration/%s", f->valuestring);
        pkv_config_data_path(c->calibration, sizeof c->calibration, rel);
    } else {
        char known[512] = "";
        for (const cJSON *x = gpus ? gpus->child : NULL; x; x = x->next)
            if (gpu_serves(gpus, x->string, section, NULL))
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         *known ? ", " : "", x->string);
        const char *what =
            !strcmp(section, pkv_calib_section(true)) ? "served model's" : "study layer's";
        rc = f && unread.msg[0]
                 ? pkv_fail(e,
                            "route.calibration: none given, and route.gpu \"%s\"'s file, as %s "
                            "names it, cannot be read (%s); name a calibration file with "
                            "route.calibration",
                            c->gpu, index, unread.msg)
             : f ? pkv_fail(e,
                            "route.calibration: none given, and route.gpu \"%s\" has no %s "
                            "calibration (a \"%s\" section in its file named by %s; GPUs with one: "
                            "%s); name a file with route.calibration",
                            c->gpu, what, section, index, *known ? known : "none")
                 : pkv_fail(e,
                            "route.gpu: \"%s\" is not in %s (GPUs with a %s calibration: %s); "
                            "name a calibration file with route.calibration",
                            c->gpu, index, what, *known ? known : "none");
    }
    cJSON_Delete(root);
    return rc;
}

/* The keys that apply to one kind of model (pkv_key.kinds) hold their defaults on
 * another. */
static int check_kinds(const pkv_config *c, pkv_err *e) {
    const char *what[PKV_KIND_COUNT + 1] = {0};
    for (int i = 0; i < PKV_KIND_COUNT; i++) what[i] = pkv_model_kinds[i]->what;
    return pkv_keys_check_kinds(pkv_config_keys(), c, pkv_model_kind_of(&c->model)->id, what, e);
}

/* What the rows cannot say: cross-key rules, paths, derived fields. */
static int finish_sections(pkv_config *c, const cJSON *root, pkv_err *e) {
    if (pkv_config_parse_speculative(c, e)) return -1;
    /* prefill_first: batches of the model kind's size unless given (by the experiment or
     * its engine profile); a served model's are one forward each, so that a prompt's
     * first token is its forward's */
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "serving");
    const pkv_model_kind *mk = pkv_model_kind_of(&c->model);
    if (c->scheduler == PKV_SCHED_PREFILL_FIRST && c->prefill_batch_tokens == 0 &&
        !cJSON_HasObjectItem(sv, "prefill_batch_tokens"))
        c->prefill_batch_tokens = mk->prefill_batch_tokens;
    if (c->bucket_len > 0 && c->page_tables != PKV_PAGE_TABLES_GENERATOR)
        return pkv_fail(e, "serving.page_tables.bucket_len: only with mode \"generator\"");
    if (c->preemption == PKV_PREEMPT_SWAP) {
        if (c->swap_pages < 1)
            return pkv_fail(e, "serving.swap_pages: preemption by swap needs a host pool (1 or "
                               "more pages)");
        if (c->page_tables == PKV_PAGE_TABLES_GENERATOR)
            return pkv_fail(e, "serving.preemption: \"swap\" only with the page allocator (the "
                               "generator never preempts)");
    }
    if (c->prefix_caching) {
        if (c->prefix_block_tokens % c->model.page_size)
            return pkv_fail(e,
                            "serving.prefix_block_tokens: %d is not a multiple of the page size "
                            "(model.page_size %d)",
                            c->prefix_block_tokens, c->model.page_size);
        if (c->page_tables == PKV_PAGE_TABLES_GENERATOR)
            return pkv_fail(e, "serving.prefix_caching: only with the page allocator "
                               "(serving.page_tables.mode \"allocator\")");
    }
    if (c->scheduler_steps > 1 && c->scheduler != PKV_SCHED_PREFILL_FIRST)
        return pkv_fail(e, "serving.scheduler_steps: windows of decode steps need the "
                           "prefill_first scheduler (as vLLM's multi-step scheduling did not "
                           "mix prompt chunks into its steps)");
    if (c->scheduler == PKV_SCHED_CHUNKED) {
        if (!mk->mixed)
            return pkv_fail(e, "serving.scheduler: \"chunked\" needs a model with a dense part "
                               "(model.hidden > 0): the study layer's prefill is the placeholder "
                               "of serving.prefill, which has no chunks to batch");
        if (c->token_budget < c->max_active)
            return pkv_fail(e,
                            "serving.token_budget: %d tokens cannot hold a decode token of each of "
                            "serving.max_active's %d rows; raise it to at least %d",
                            c->token_budget, c->max_active, c->max_active);
    }
    if (c->fleet.router == PKV_ROUTER_PREFIX_AFFINITY && !c->prefix_caching)
        return pkv_fail(e, "fleet.router: \"prefix_affinity\" routes by the replicas' cached "
                           "prefixes; set serving.prefix_caching to true");
    if (c->fleet.decode_router == PKV_ROUTER_CENTRAL_QUEUE ||
        c->fleet.decode_router == PKV_ROUTER_PREFIX_AFFINITY)
        return pkv_fail(e,
                        "fleet.decode_router: \"%s\" cannot choose a decode replica (a "
                        "prefilled request goes on at once, and brings its own KV); use "
                        "another router",
                        pkv_router_names[c->fleet.decode_router]);
    c->admit = pkv_admission_get(c->admission);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "route");
    const cJSON *cv = r ? cJSON_GetObjectItemCaseSensitive(r, "calibration") : NULL;
    if (cv) { /* relative to the experiment file */
        char given[sizeof c->calibration];
        snprintf(given, sizeof given, "%s", c->calibration);
        TRY(pkv_config_path(c->calibration, sizeof c->calibration, c->file, given,
                            "route.calibration", e));
    } else {
        TRY(choose_calibration(c, e));
    }
    const cJSON *ov;
    TRY(pkv_json_sub(r, "route", "overrides", &ov, e));
    c->calib_overrides = ov ? cJSON_Duplicate(ov, 1) : NULL;
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(root, "run");
    TRY(parse_seed(run ? cJSON_GetObjectItemCaseSensitive(run, "seed") : NULL, &c->seed, e));
    c->model.expert_seed = c->seed;
    const cJSON *pc = run ? cJSON_GetObjectItemCaseSensitive(run, "percentiles") : NULL;
    static const double def_pcts[] = {50, 90, 99};
    c->n_percentiles = 3;
    memcpy(c->percentiles, def_pcts, sizeof def_pcts);
    if (pc) {
        int n = cJSON_IsArray(pc) ? cJSON_GetArraySize(pc) : 0;
        if (n < 1 || n > PKV_MAX_PERCENTILES)
            return pkv_fail(e, "run.percentiles: must be a list of 1 to %d numbers in (0, 100]",
                            PKV_MAX_PERCENTILES);
        for (int i = 0; i < n; i++) {
            const cJSON *v = cJSON_GetArrayItem(pc, i);
            if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 100))
                return pkv_fail(e, "run.percentiles[%d]: must be a number in (0, 100]", i);
            c->percentiles[i] = v->valuedouble;
        }
        c->n_percentiles = n;
    }
    c->model.prefill_attn = c->prefill_attention; /* the names' order is PKVK_PREFILL_*'s */
    if (!*c->output) /* run.output is an artifact: relative to the working folder, like -o */
        snprintf(c->output, sizeof c->output, "%s.h5", c->name);
    return 0;
}

/* Every request must fit an empty pool, or FCFS admission would wait forever; and
 * something must end the run. */
/* The weights a GPU holds, and a page's bytes over every layer: the served model's, with
 * a speculative proposer's beside them (its KV in pages of the same ids, as vLLM sizes
 * the pool for the draft's layers too). */
static double weight_bytes(const pkv_config *c) {
    pkv_model p;
    return pkv_model_weight_bytes(&c->model) +
           (pkv_proposer_model(&c->spec, &c->model, &p) ? pkv_model_weight_bytes(&p) : 0);
}
static double page_bytes(const pkv_config *c) {
    pkv_model p;
    return pkv_model_page_bytes(&c->model) +
           (pkv_proposer_model(&c->spec, &c->model, &p) ? pkv_model_page_bytes(&p) : 0);
}

/* Bytes the KV pool may take on a GPU of memory_gib (negative: not even the weights fit). */
static double kv_budget(const pkv_config *c, double memory_gib) {
    return memory_gib * (double)(1 << 30) * c->gpu_memory_utilization - weight_bytes(c) -
           (double)(1 << 30);
}

int pkv_config_check_memory(const pkv_config *c, double memory_gib, const char *gpu, pkv_err *e) {
    if (!(memory_gib > 0)) return 0;
    const double page = page_bytes(c), budget = kv_budget(c, memory_gib);
    const double pool = page * c->kv_pages, gib = (double)(1 << 30);
    if (pool <= budget) return 0;
    return pkv_fail(e,
                    "serving.kv_pages: %d pages of %s's KV are %.1f GiB; with %.1f GiB of "
                    "weights and 1 GiB of activations that passes %.2f of the %.1f GiB of %s "
                    "(the calibration's memory_gib, serving.gpu_memory_utilization): at most "
                    "%.0f pages fit; lower serving.kv_pages or leave it out (then it is sized "
                    "to fit)",
                    c->kv_pages, c->model.name, pool / gib, weight_bytes(c) / gib,
                    c->gpu_memory_utilization, memory_gib, gpu,
                    budget > 0 ? floor(budget / page) : 0);
}

/* serving.kv_pages sized to the calibration's GPU as an engine sizes its pool (what
 * serving.gpu_memory_utilization of its memory leaves after the weights, a speculative
 * proposer's included, and a GiB of activations; route.overrides apply) where the experiment does
 * not give it, and checked where it does. A calibration that cannot be read, or gives no
 * memory_gib, leaves the pool as given (the run reports an unreadable one). */
static int fit_memory(pkv_config *c, const cJSON *root, pkv_err *e) {
    pkv_calib cal;
    pkv_err ignored;
    if (pkv_calib_load(&cal, c->calibration, pkv_model_calib_section(&c->model), &ignored))
        return 0;
    if (c->calib_overrides &&
        pkv_calib_apply(&cal, c->calib_overrides, "route.overrides", &ignored)) {
        pkv_calib_free(&cal);
        return 0; /* the run names the bad override */
    }
    const double mem = cal.memory_gib;
    char gpu[sizeof cal.gpu_name];
    memcpy(gpu, cal.gpu_name, sizeof gpu);
    pkv_calib_free(&cal);
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "serving");
    if (!(mem > 0) || (sv && cJSON_GetObjectItemCaseSensitive(sv, "kv_pages")))
        return pkv_config_check_memory(c, mem, gpu, e);
    const double pages = floor(kv_budget(c, mem) / page_bytes(c));
    if (pages < 1)
        return pkv_fail(e,
                        "model: %s's %.1f GiB of weights leave no room for a KV page in %.2f of "
                        "the %.1f GiB of %s (the calibration's memory_gib, "
                        "serving.gpu_memory_utilization)",
                        c->model.name, weight_bytes(c) / (double)(1 << 30),
                        c->gpu_memory_utilization, mem, gpu);
    c->kv_pages = pages > INT32_MAX ? INT32_MAX : (int32_t)pages;
    return 0;
}

/* serving.max_active from the engine profile's max_running (SGLang's max_running_requests:
 * model_runner.py and tp_worker.py) where the experiment does not give it: per_context
 * requests per model context's worth of the pool's tokens, within [min, max] (min where the
 * model's context is unknown), at most pool_share of the pool's tokens, and under the
 * chunked scheduler no more than a step's token budget holds. */
static void engine_max_active(pkv_config *c, const cJSON *root) {
    const double per = c->engine.max_running.per_context;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "serving");
    if (!(per > 0) || (sv && cJSON_GetObjectItemCaseSensitive(sv, "max_active"))) return;
    const double tokens = (double)c->kv_pages * c->model.page_size;
    double n = c->model.max_model_len > 0 ? floor(tokens / c->model.max_model_len * per) : 0;
    n = fmin(fmax(n, c->engine.max_running.min), c->engine.max_running.max);
    n = fmin(n, floor(tokens * c->engine.max_running.pool_share));
    if (c->scheduler == PKV_SCHED_CHUNKED) n = fmin(n, c->token_budget);
    c->max_active = n < 1 ? 1 : (int)n;
}

static int check_consistency(const pkv_config *c, pkv_err *e) {
    const pkv_workload_spec *w = &c->workload;
    if (w->warm_requests > 0 && !c->prefix_caching)
        return pkv_fail(e, "workload.warm_requests: prompts in a prefix cache need "
                           "serving.prefix_caching true (an engine without the cache computes "
                           "every prompt)");
    if (c->layers_measured > c->model.layers)
        return pkv_fail(e, "run.layers_measured: %d, but model %s has %d layers",
                        c->layers_measured, c->model.name, c->model.layers);
    if (c->layers_measured > 0 && strcmp(c->policy, "oracle") == 0)
        return pkv_fail(e, "run.layers_measured: the oracle times every route over every layer; "
                           "use a fixed route or adaptive");
    if (c->cuda_graph == PKV_GRAPH_ON && strcmp(c->policy, "oracle") == 0)
        return pkv_fail(e, "run.cuda_graph: the oracle times every route separately; use a fixed "
                           "route or adaptive with graph replay");

    if (!w->trace && w->num_requests == 0 && c->max_steps == 0 && c->max_time == 0)
        return pkv_fail(e, "run: nothing ends this run: set workload.num_requests, "
                           "run.max_steps or run.max_time_s");
    int64_t pm = w->trace ? -1 : pkv_length_max(&w->prompt);
    int64_t dm = w->trace ? -1 : pkv_length_max(&w->decode);
    int64_t longest = pm < 0 || dm < 0 || pm + dm > w->max_context ? w->max_context : pm + dm;
    if (c->bucket_len > 0) longest = (longest + c->bucket_len - 1) / c->bucket_len * c->bucket_len;
    int64_t pages = (longest + c->model.page_size - 1) / c->model.page_size;
    int64_t usable = c->kv_pages - (int64_t)(c->hole_fraction * c->kv_pages);
    if (pages > usable)
        return pkv_fail(e,
                        "serving.kv_pages: %lld usable pages of %d tokens (%d, less %.0f%% holes) "
                        "cannot hold one request of %lld tokens (the workload's longest); raise "
                        "kv_pages to at least %lld",
                        (long long)usable, c->model.page_size, c->kv_pages, 100 * c->hole_fraction,
                        (long long)longest, (long long)ceil(pages / (1 - c->hole_fraction)));
    return 0;
}

void pkv_config_relocated(pkv_config *c) {
    if (c->workload.trace) c->workload.trace = &c->trace;
}

int pkv_config_inputs(const pkv_config *c, const char **paths, const char **what) {
    int n = 0;
    paths[n] = c->file, what[n++] = "the experiment file";
    paths[n] = c->calibration, what[n++] = "the calibration file";
    if (*c->model_file) paths[n] = c->model_file, what[n++] = "the model's preset file";
    if (*c->engine_file) paths[n] = c->engine_file, what[n++] = "the engine's profile file";
    if (c->workload.trace) paths[n] = c->trace_spec.path, what[n++] = "the trace";
    const pkv_length_spec *ls[2] = {&c->workload.prompt, &c->workload.decode};
    for (int i = 0; i < 2; i++)
        if (ls[i]->kind == PKV_LENGTH_EMPIRICAL)
            paths[n] = ls[i]->trace_path, what[n++] = "a length distribution's trace";
    for (int p = 0; p < c->fleet.n_pools; p++) { /* a pool's own calibration and preset */
        const pkv_config *pc = c->fleet.pools[p].cfg;
        if (strcmp(pc->calibration, c->calibration))
            paths[n] = pc->calibration, what[n++] = "a fleet pool's calibration file";
        if (*pc->model_file && strcmp(pc->model_file, c->model_file))
            paths[n] = pc->model_file, what[n++] = "a fleet pool's model preset file";
        if (*pc->engine_file && strcmp(pc->engine_file, c->engine_file))
            paths[n] = pc->engine_file, what[n++] = "a fleet pool's engine profile file";
    }
    return n;
}

bool pkv_config_graphs(const pkv_config *c) {
    if (strcmp(c->policy, "oracle") == 0) return false; /* it times every route apart */
    if (c->cuda_graph != PKV_GRAPH_AUTO) return c->cuda_graph == PKV_GRAPH_ON;
    const int r = pkv_route_parse(c->policy);
    return pkv_model_kind_of(&c->model)->graphs_default && !pkv_model_moe_layers(&c->model) &&
           (strcmp(c->policy, "adaptive") == 0 ||
            (r >= 0 && pkv_backend_graph_routes(&c->model) >> r & 1));
}

int pkv_config_resolve(pkv_config *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "name", c->name);
    cJSON *sec[sizeof config_objs / sizeof *config_objs];
    for (size_t i = 0; i < sizeof config_objs / sizeof *config_objs; i++) {
        const char *obj = config_objs[i], *dot = strchr(obj, '.');
        cJSON *parent = r;
        if (dot) /* a sub-object of an earlier section */
            for (size_t j = 0; j < i; j++)
                if (strncmp(config_objs[j], obj, (size_t)(dot - obj)) == 0 &&
                    !config_objs[j][dot - obj])
                    parent = sec[j];
        sec[i] = cJSON_AddObjectToObject(parent, dot ? dot + 1 : obj);
        pkv_keys_write(pkv_config_keys(), obj, c, sec[i]);
        if (i == 0 && c->model.experts) {
            pkv_keys_write(pkv_config_keys(), "model.expert_routing", c,
                           cJSON_AddObjectToObject(sec[i], "expert_routing"));
        } else if (i == 0) { /* a dense model's record as before the experts came */
            static const char *const moe_keys[] = {
                "experts",        "experts_per_token", "expert_intermediate",
                "shared_experts", "dense_layers",      "expert_parallel"};
            for (size_t j = 0; j < sizeof moe_keys / sizeof *moe_keys; j++)
                cJSON_DeleteItemFromObjectCaseSensitive(sec[i], moe_keys[j]);
        }
        if (i == 0) {
            /* The model's figures (per GPU): what a step reads and computes. */
            cJSON *f = cJSON_AddObjectToObject(sec[i], "figures");
            const pkv_model_figures mf = pkv_model_figures_of(&c->model);
            cJSON_AddNumberToObject(f, "weight_bytes", mf.weight_bytes);
            cJSON_AddNumberToObject(f, "kv_bytes_per_token", mf.kv_bytes_per_token);
            cJSON_AddNumberToObject(f, "dense_flops_per_token", mf.dense_flops_per_token);
            pkv_config_resolve_workload(&c->workload, &c->trace_spec, r);
        }
    }
    cJSON *rr = cJSON_GetObjectItemCaseSensitive(r, "run");
    cJSON_AddItemToObject(rr, "seed", seed_json(c->seed));
    cJSON_AddItemToObject(rr, "percentiles",
                          cJSON_CreateDoubleArray(c->percentiles, c->n_percentiles));
    if (*c->engine_file) { /* the profile's figures: the run depends on them */
        cJSON *sv = cJSON_GetObjectItemCaseSensitive(r, "serving");
        cJSON_AddStringToObject(sv, "engine", c->engine.name);
        cJSON *ep = cJSON_AddObjectToObject(sv, "engine_profile");
        cJSON_AddStringToObject(ep, "file", c->engine_file);
        cJSON_AddStringToObject(ep, "requested", c->engine.requested);
        pkv_keys_write(pkv_config_keys(), PKV_OBJ_ENGINE ".host", &c->engine,
                       cJSON_AddObjectToObject(ep, "host"));
        pkv_keys_write(pkv_config_keys(), PKV_OBJ_ENGINE ".request", &c->engine,
                       cJSON_AddObjectToObject(ep, "request"));
        pkv_keys_write(pkv_config_keys(), PKV_OBJ_ENGINE ".gpu", &c->engine,
                       cJSON_AddObjectToObject(ep, "gpu"));
        const pkv_engine_graphs *g = &c->engine.host.graphs;
        if (g->max > 0) {
            cJSON *go = cJSON_AddObjectToObject(ep, "graphs");
            cJSON_AddItemToObject(go, "sizes", cJSON_CreateIntArray(g->small, g->n_small));
            pkv_keys_write(pkv_config_keys(), PKV_OBJ_ENGINE ".graphs", g, go);
        }
    }
    if (c->calib_overrides)
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(r, "route"), "overrides",
                              cJSON_Duplicate(c->calib_overrides, 1));
    if (c->fleet.n_pools) { /* each pool's own settings as resolved */
        cJSON *pools =
            cJSON_AddArrayToObject(cJSON_GetObjectItemCaseSensitive(r, "fleet"), "pools");
        for (int i = 0; i < c->fleet.n_pools && pools; i++) {
            const pkv_pool *p = &c->fleet.pools[i];
            cJSON *o = cJSON_CreateObject(), *pr = cJSON_Parse(p->cfg->resolved);
            cJSON_AddStringToObject(o, "name", p->name);
            cJSON_AddNumberToObject(o, "replicas", p->replicas);
            cJSON_AddStringToObject(o, "role", pkv_role_names[p->role]);
            static const char *const own[] = {"model", "serving", "route"};
            for (size_t k = 0; k < sizeof own / sizeof *own && pr; k++)
                cJSON_AddItemToObject(o, own[k], cJSON_DetachItemFromObject(pr, own[k]));
            cJSON_Delete(pr);
            cJSON_AddItemToArray(pools, o);
        }
    }
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
    const char *name, *desc;
    pkv_err sub;
    char base[1024];
    snprintf(base, sizeof base, "%s", path);
    char *stem = basename(base);
    char *dot = strrchr(stem, '.');
    if (dot) *dot = 0;
    int rc = -1;
    const cJSON *w;
    if (pkv_keys_check(pkv_config_keys(), "", root, "", &sub) ||
        pkv_json_str(root, "", "name", stem, NULL, &name, NULL, &sub) ||
        pkv_json_str(root, "", "description", "", NULL, &desc, NULL, &sub) ||
        pkv_json_sub(root, "", "workload", &w, &sub))
        goto out;
    if (!*name || strchr(name, '/') || strlen(name) >= sizeof c->name) {
        pkv_fail(&sub,
                 "name: \"%s\" must be 1 to %zu characters without '/' (it names the "
                 "default output file)",
                 name, sizeof c->name - 1);
        goto out;
    }
    snprintf(c->name, sizeof c->name, "%s", name);
    if (pkv_config_parse_model(c, root, &sub)) goto out;
    for (size_t i = 1; i < sizeof config_objs / sizeof *config_objs; i++) /* after the model */
        if (parse_section(c, root, config_objs[i], &sub)) goto out;
    if (check_kinds(c, &sub)) goto out;
    if (pkv_config_parse_engine(c, root, &sub) || finish_sections(c, root, &sub) ||
        pkv_config_parse_workload(&c->workload, &c->trace_spec, &c->trace, c->file, w, &sub) ||
        pkv_config_model_context(c, w, &sub) || fit_memory(c, root, &sub))
        goto out;
    engine_max_active(c, root); /* from the pool fit_memory sized */
    if (check_consistency(c, &sub) || pkv_config_parse_pools(c, root, pkv_config_parse, &sub))
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
    for (int i = 0; i < c->fleet.n_pools; i++)
        if (c->fleet.pools[i].cfg)
            pkv_config_free(c->fleet.pools[i].cfg), free(c->fleet.pools[i].cfg);
    free(c->fleet.pools);
    pkv_trace_free(&c->trace);
    pkv_length_free(&c->workload.prompt);
    pkv_length_free(&c->workload.decode);
    pkv_length_free(&c->workload.turns);
    free(c->text);
    free(c->resolved);
    cJSON_Delete(c->calib_overrides);
    *c = (pkv_config){0};
}
