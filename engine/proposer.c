/* Speculative decoding's proposer run for real (issue 47): on a measuring backend (cpu,
 * cuda) a verify step's k proposals are k forwards of the draft model (or of EAGLE's
 * head) over one token a row, after the target's verify (vLLM V1 drafts the next step's
 * tokens there; the time is the step's either way). The proposer is a backend of the
 * target's kind over its own pools of the same pages: the target's block tables and
 * lengths address them, as a draft's KV shares its target's block table in vLLM. Its
 * weights and pools hold the tensor stream's values; it runs over the prompts too (a
 * prefill's, and an iteration's prompt chunks), writing their KV in its pools, as a draft
 * (or EAGLE's head) prefills beside its target. Without it (the model backend, n-gram
 * lookup, EAGLE over a mixture of experts) the step takes the proposals' predicted time
 * (engine.c: proposals), each pass's attention priced on its planner's plan of the
 * step's route (pkv_proposer_price). */
#include "backends.h"
#include "engine_parts.h"

#include <math.h>
#include <stdlib.h>

bool pkv_proposer_model(const pkv_speculative *spec, const pkv_model *m, pkv_model *out) {
    if (spec->method == PKV_SPEC_DRAFT) {
        *out = spec->draft;
        return true;
    }
    if (spec->method != PKV_SPEC_EAGLE) return false;
    *out = *m;
    out->layers = 1, out->dense_layers = 0; /* EAGLE's head: one layer of the target's shape */
    return true;
}

bool pkv_proposer_runs(const pkv_speculative *spec, const pkv_model *m) {
    pkv_model p;
    return pkv_proposer_model(spec, m, &p) && !pkv_model_moe_layers(&p);
}

int pkv_proposer_init(pkv_engine *eng, pkv_backend_kind kind, const pkv_backend_spec *b,
                      int32_t cap_rows, pkv_err *e) {
    pkv_proposer *p = &eng->proposer;
    *p = (pkv_proposer){0};
    if (!pkv_proposer_model(&eng->opts.spec, &eng->model, &p->model)) return 0;
    /* its planner on every backend: the cost model prices its passes by their plans */
    const pkvk_shape s = pkv_model_attn_shape(&p->model);
    p->lens = malloc(sizeof(int32_t) * (size_t)cap_rows);
    if (!p->lens || pkv_planner_init(&p->planner, &s, eng->cal, cap_rows, eng->opts.bucket_mode)) {
        pkv_proposer_free(p);
        return pkv_fail(e, "out of memory for the proposer's planner (%d rows)", cap_rows);
    }
    p->routes = pkv_backend_routes(kind, &p->model);
    if (b && b->cuda_graph) p->routes &= pkv_backend_graph_routes(&p->model);
    if (!pkv_backend_caps_of(kind)->measures || !pkv_proposer_runs(&eng->opts.spec, &eng->model))
        return 0;
    pkv_err sub;
    if (pkv_backend_supports(kind, &p->model, &sub)) {
        pkv_proposer_free(p);
        return pkv_fail(e, "serving.speculative: the proposer %s: %s", p->model.name, sub.msg);
    }
    /* its own pools and weights, whole on the GPU: no swap pool, no shared weights */
    pkv_backend_spec spec = *b;
    spec.swap_slots = 0, spec.layers_measured = 0, spec.weights_from = NULL;
    p->backend = pkv_backend_make(kind, &p->model, p->planner.plans[0].cap_tasks, 1, NULL, &spec,
                                  cap_rows, &sub);
    if (!p->backend) {
        pkv_proposer_free(p);
        return pkv_fail(e, "serving.speculative: the proposer %s: %s", p->model.name, sub.msg);
    }
    return 0;
}

void pkv_proposer_free(pkv_proposer *p) {
    if (p->backend) p->backend->destroy(p->backend);
    if (p->lens) pkv_planner_free(&p->planner);
    free(p->lens);
    *p = (pkv_proposer){0};
}

int pkv_proposer_prefill(pkv_engine *eng, const pkv_prefill_view *pv, double *t_device,
                         pkv_err *e) {
    pkv_proposer *p = &eng->proposer;
    *t_device = NAN;
    if (!p->backend || !p->backend->prefill) return 0;
    if (p->backend->prefill(p->backend, pv, t_device, e)) return -1;
    eng->backend->t_unrun += p->backend->t_unrun;
    p->backend->t_unrun = 0;
    return 0;
}

/* The route a pass runs on: the step's where the proposer can run it. */
static pkv_route pass_route(const pkv_proposer *p, pkv_route r) {
    if (p->routes >> r & 1) return r;
    return p->routes >> PKV_ROUTE_WORKQUEUE & 1 ? PKV_ROUTE_WORKQUEUE : PKV_ROUTE_REF_PAGED;
}

/* Pass j's lengths: each row's less k - j (its proposal j + 1 not yet in the KV). */
static void pass_lens(pkv_proposer *p, const pkv_batch_view *v, int32_t j) {
    for (int32_t i = 0; i < v->n_rows; i++) p->lens[i] = v->seq_lens[i] - v->spec_tokens + j;
}

int pkv_proposer_price(pkv_engine *eng, const pkv_batch_view *v, pkv_route r, double *t_layer,
                       pkv_err *e) {
    pkv_proposer *p = &eng->proposer;
    *t_layer = 0;
    if (!p->lens || !v->n_rows || !v->spec_tokens) return 0;
    r = pass_route(p, r);
    pass_lens(p, v, (v->spec_tokens - 1) / 2);
    p->planner.plans[r].counts_only = 1;
    const int rc = pkv_planner_build(&p->planner, r, p->lens, v->n_rows);
    if (rc) return pkv_fail(e, "planning the proposer's passes failed (status %d)", rc);
    pkv_counters c;
    pkv_cost_counters(eng->cal, &p->planner.ctx.shape, &p->planner.plans[r], p->lens, 1, &c);
    *t_layer = c.t_predicted;
    return 0;
}

int pkv_proposer_run(pkv_engine *eng, const pkv_batch_view *v, pkv_route r, uint64_t index,
                     double *t_device, double *t_attn, pkv_err *e) {
    pkv_proposer *p = &eng->proposer;
    *t_device = *t_attn = NAN;
    if (!p->backend || !v->n_rows || !v->spec_tokens) return 0;
    double t = 0, attn = 0; /* the iteration's prompt chunks first, then the passes */
    if (v->chunks) {
        if (pkv_proposer_prefill(eng, v->chunks, &t, e)) return -1;
        if (isnan(t)) t = 0;
    }
    r = pass_route(p, r);
    for (int32_t j = 0; j < v->spec_tokens; j++) {
        pass_lens(p, v, j);
        /* the block-table entries that changed go with the first pass (every decode step of
         * a speculative run is a verify: the proposer sees each step's changes) */
        pkv_batch_view pv = *v;
        pv.seq_lens = p->lens, pv.chunks = NULL, pv.spec_tokens = 0;
        if (j) pv.n_dirty = 0;
        pkv_step_rec rec = {.index = index};
        p->planner.plans[r].counts_only = 0;
        int rc = pkv_planner_build(&p->planner, r, p->lens, v->n_rows);
        if (rc)
            return pkv_fail(e, "step %llu: planning the proposer's pass %d failed (status %d)",
                            (unsigned long long)index, j + 1, rc);
        if (p->backend->prepare(p->backend, &pv, e) ||
            p->backend->run(p->backend, &pv, &p->planner.plans[r], 0, &rec, e))
            return -1;
        t += rec.t_device + (isnan(rec.t_dense) ? 0 : rec.t_dense);
        attn += rec.t_device;
        eng->backend->t_unrun += p->backend->t_unrun;
        p->backend->t_unrun = 0;
    }
    *t_device = t, *t_attn = attn;
    return 0;
}
