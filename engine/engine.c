/* The engine: one step of the served model through its route policy (candidates
 * planned and priced, one chosen, the backend runs it), a prefill batch, a swap, each
 * timed under the run's one clock (engine/clock.c); the oracle's runs in engine/oracle.c. */
#include "engine_parts.h"
#include "backends.h"

#include "pkv_clock.h"
#include "pkv_tol.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pkv_engine_init(pkv_engine *eng, const pkv_model *m, pkv_calib *cal, const pkv_engine_opts *o,
                    const pkv_backend_spec *b, pkv_err *e) {
    *eng = (pkv_engine){.model = *m,
                        .kind = pkv_model_kind_of(m),
                        .shape = pkv_model_attn_shape(m),
                        .cal = cal,
                        .opts = *o};
    eng->opts.policy = NULL;
    const char *policy = o->policy;
    const int32_t cap_rows = o->cap_rows;
    const pkvk_shape *s = &eng->shape;
    const pkv_backend_kind kind = pkv_backend_resolve(b ? b->kind : PKV_BACKEND_MODEL);
    const pkv_backend_caps *caps = pkv_backend_caps_of(kind);
    if (pkv_policy_init(&eng->policy, policy))
        return pkv_fail(e, "unknown route policy \"%s\"", policy);
    /* The model backend predicts every route, built here or not (FlashInfer's): its
     * oracle and adaptive choose among all of them, whatever the build. */
    if (!caps->measures) pkv_policy_predict_all(&eng->policy);
    /* the candidates the backend can run for this shape (FlashInfer's: some only) */
    const uint32_t runs = pkv_backend_routes(kind, m);
    if (!(eng->policy.candidates & runs))
        return pkv_fail(e,
                        "route %s: FlashInfer's paths run 1, 2, 4 or 8 query heads per KV "
                        "head, over FP16 or BF16 KV (and head_dim 128 on the GPU); this model "
                        "has %d, KV %s, head_dim %d",
                        eng->policy.name, s->hq / s->hkv, pkvk_dtype_names[s->kv_dtype], s->d);
    eng->policy.candidates &= runs;
    if (pkv_backend_supports(kind, m, e)) return -1;
    pkv_calib_use_group(cal, s->hq / s->hkv); /* the run's group's route models, if any */
    pkv_calib_use_model(cal, m->name, m->tp); /* the model's own GEMM rates, if any */
    if (caps->gpu) pkv_calib_flashinfer_occupancy(cal, s);
    if (caps->gpu && eng->kind->prefill_attention) {
        const pkvk_model_shape ms = pkv_model_gpu_shape(m);
        int k = pkvk_model_prefill_kernel(&ms);
        if (k < 0) return pkv_fail(e, "run.prefill_attention: %s", pkvk_last_error());
        eng->model.prefill_attn = k;
    } else if (m->prefill_attn == PKVK_PREFILL_AUTO) {
        eng->model.prefill_attn =
            cal->prefill_attn_tflops > 0 ? PKVK_PREFILL_FLASHINFER : PKVK_PREFILL_CUBLAS;
    }
    /* Graph replay: a policy choosing among routes leaves those graphs cannot hold out
     * of its candidates; a fixed route of them is refused. */
    const uint32_t no_graph = ((1u << PKV_ROUTE_COUNT) - 1) & ~pkv_backend_graph_routes(m);
    if (b && b->cuda_graph && (eng->policy.candidates & (eng->policy.candidates - 1))) {
        eng->no_context_gate = !eng->kind->graph_context_gate;
        eng->policy.candidates &= ~no_graph;
    }
    if (b && b->cuda_graph && caps->gpu && (eng->policy.candidates & no_graph)) {
        char can[128] = "";
        for (int r = 0; r < PKV_ROUTE_COUNT; r++)
            if (!(no_graph >> r & 1))
                snprintf(can + strlen(can), sizeof can - strlen(can), "%s%s", *can ? ", " : "",
                         pkv_route_name((pkv_route)r));
        return pkv_fail(e,
                        "run.cuda_graph: route %s cannot be replayed as a CUDA graph of this "
                        "model's step (%s can); run it without graphs",
                        pkv_route_name((pkv_route)__builtin_ctz(eng->policy.candidates)), can);
    }
    /* the experts' draws; a measuring backend routes its forwards by them, and the step's
     * cost reads the routing it ran */
    if (pkv_model_moe_layers(m) &&
        (pkv_moe_init(&eng->moe, m->experts, m->experts_per_token, (pkv_expert_law)m->expert_law,
                      m->expert_exponent, m->expert_seed) ||
         (caps->measures && pkv_moe_keep(&eng->moe, pkv_model_moe_layers(m))))) {
        pkv_moe_free(&eng->moe);
        return pkv_fail(e, "out of memory for the experts' draws (%d experts)", m->experts);
    }
    if (pkv_planner_init(&eng->planner, s, cal, cap_rows, o->bucket_mode)) {
        pkv_moe_free(&eng->moe);
        return pkv_fail(e, "out of memory for the planner (%d rows)", cap_rows);
    }
    if (!b) return 0;
    eng->mlp_bytes = 3.0 * (double)m->mlp_tail * s->hq * s->d * 2;
    /* a verify step's query tokens a row */
    const int32_t q_len = 1 + (o->spec.method != PKV_SPEC_NONE ? o->spec.tokens : 0);
    /* made after the planner, whose task bound sizes its workspace */
    eng->backend = pkv_backend_make(kind, &eng->model, eng->planner.plans[0].cap_tasks, q_len,
                                    eng->moe.experts ? &eng->moe : NULL, b, cap_rows, e);
    if (!eng->backend || pkv_proposer_init(eng, kind, b, cap_rows, e)) {
        pkv_engine_free(eng);
        return -1;
    }
    return 0;
}

void pkv_engine_free(pkv_engine *eng) {
    pkv_proposer_free(&eng->proposer);
    pkv_planner_free(&eng->planner);
    if (eng->backend) eng->backend->destroy(eng->backend);
    eng->backend = NULL;
    pkv_moe_free(&eng->moe); /* after the backend, which routed its experts by it */
}

bool pkv_engine_graph_replays(const pkv_engine_graphs *g, int64_t n, bool prompt) {
    return n <= g->max && (!prompt || g->mixed);
}

int64_t pkv_engine_graph_rows(const pkv_engine_graphs *g, int64_t n, bool prompt) {
    if (!pkv_engine_graph_replays(g, n, prompt)) return n;
    for (int i = 0; i < g->n_small; i++)
        if (n <= g->small[i]) return g->small[i];
    if (g->step <= 0) return g->max; /* only the largest above the listed sizes */
    const int64_t up = (n + g->step - 1) / g->step * g->step;
    return up < g->max ? up : g->max;
}

/* A forward over prompt pieces beyond its dense part: their attention's roofline and
 * the calibration's fitted terms (per forward, token and score; scores: every layer's). */
static double prompt_extra(const pkv_engine *eng, const pkv_prefill_view *p, int64_t tokens,
                           double scores) {
    const pkv_calib *c = eng->cal;
    return pkv_model_prefill_attn_time(&eng->model, c, p->lens, p->starts, p->n_req) +
           (c->prefill_fixed_us + c->prefill_token_us * (double)tokens) * 1e-6 +
           c->prefill_score_ps * 1e-12 * scores;
}

/* The attention scores of a batch of prompt pieces, every layer. */
static double chunk_scores(const pkv_engine *eng, const pkv_prefill_view *p) {
    return pkv_model_prefill_scores(&eng->model, p->lens, p->starts, p->n_req);
}

/* The tokens of a batch of prompt pieces; *heads gains the pieces that sample. */
static int64_t chunk_tokens(const pkv_prefill_view *p, int64_t *heads) {
    int64_t tokens = 0;
    for (int32_t i = 0; i < p->n_req; i++) {
        tokens += p->lens[i];
        *heads += !p->last || p->last[i];
    }
    return tokens;
}

/* Plan and price every candidate route of the step: sv's candidates and valid bits,
 * rec->t_route; plan_wall[r]: the measuring oracle's planning time of route r. */
static int plan_candidates(pkv_engine *eng, const pkv_batch_view *v, int lazy, int measured_oracle,
                           pkv_step_view *sv, double *plan_wall, pkv_step_rec *rec, pkv_err *e) {
    /* Without a per-step record of the candidates, only those the policy consults */
    uint32_t plan = eng->opts.plan_needed && !eng->backend->measures
                        ? pkv_policy_needed(&eng->policy, eng->cal, sv)
                        : eng->policy.candidates;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++) {
        rec->t_route[r] = NAN;
        if (!(plan >> r & 1)) continue;
        double tp = measured_oracle ? pkv_clock_now() : 0;
        eng->planner.plans[r].counts_only = lazy || !eng->backend->measures;
        eng->planner.plans[r].q_len = 1 + v->spec_tokens; /* FlashInfer's: its prefill path */
        int rc = pkv_planner_build(&eng->planner, (pkv_route)r, v->seq_lens, v->n_rows);
        if (rc)
            return pkv_fail(e, "step %llu: planning %s failed (status %d)",
                            (unsigned long long)rec->index, pkv_route_name((pkv_route)r), rc);
        pkv_cost_counters(eng->cal, &eng->shape, &eng->planner.plans[r], v->seq_lens,
                          1 + v->spec_tokens, &sv->cand[r]);
        const pkv_route_model *rm =
            pkv_calib_route_model(eng->cal, (pkv_route)r, 1 + v->spec_tokens);
        if (eng->opts.clock == PKV_CLOCK_WALL && rm->set)
            sv->cand[r].t_host = (rm->v[PKV_RM_HOST_US] +
                                  rm->v[PKV_RM_HOST_US_PER_KTOKEN] * 1e-3 * sv->context_tokens) *
                                 1e-6;
        sv->valid |= 1u << r;
        rec->t_route[r] = sv->cand[r].t_predicted;
        if (measured_oracle) plan_wall[r] = pkv_clock_now() - tp;
    }
    return 0;
}

/* The step's counters and prediction as the chosen route's plan gives them. */
static void record_route(pkv_step_rec *rec, pkv_route r, const pkv_counters *c) {
    rec->route = (uint8_t)r;
    rec->splits = (uint32_t)c->max_splits;
    rec->launches = (uint32_t)c->launches;
    rec->merge_launches = (uint32_t)c->merge_launches;
    rec->tasks = (uint32_t)c->tasks;
    rec->ctas = (uint64_t)c->ctas;
    rec->cta_work_per_sm = c->cta_work_per_sm;
    rec->kv_bytes = (uint64_t)c->kv_bytes;
    rec->merge_bytes = (uint64_t)c->merge_bytes;
    rec->max_cta_bytes = (uint64_t)c->max_cta_bytes;
    rec->t_predicted = c->t_predicted;
}

const char *const pkv_spec_method_names[] = {"none", "draft", "eagle", "ngram", NULL};

/* The proposer's forward over prompt pieces of `tokens` tokens, `heads` of them sampling
 * (a prefill batch's, or an iteration's chunks): its dense part and its prompt attention
 * (a draft, or EAGLE's head, prefills its KV as its target does); 0 without a proposer. */
static double proposer_prompt(const pkv_engine *eng, const pkv_prefill_view *p, int64_t tokens,
                              int64_t heads) {
    pkv_model m;
    if (!pkv_proposer_model(&eng->opts.spec, &eng->model, &m)) return 0;
    pkv_dense_cost dc;
    pkv_model_dense_cost(&m, eng->cal, tokens, heads, NULL, &dc);
    return dc.t_predicted + pkv_model_prefill_attn_time(&m, eng->cal, p->lens, p->starts, p->n_req);
}

/* Speculative decoding's proposals for the step's rows: k passes of the proposer over one
 * token a row, each its dense part and its layers' attention as the cost model prices the
 * step's route for the proposer's shape (planned over the rows' contexts), after its
 * forward over the iteration's prompt chunks (none in an iteration of chunks alone). */
static int proposals(pkv_engine *eng, const pkv_batch_view *v, pkv_route r, int64_t chunk_tok,
                     int64_t chunk_heads, double *t, double *t_attn, pkv_err *e) {
    const pkv_speculative *sp = &eng->opts.spec;
    pkv_model m;
    *t = *t_attn = 0;
    if (!pkv_proposer_model(sp, &eng->model, &m) || !v->n_rows || !v->spec_tokens) return 0;
    const double chunks = v->chunks ? proposer_prompt(eng, v->chunks, chunk_tok, chunk_heads) : 0;
    double t_layer;
    if (pkv_proposer_price(eng, v, r, &t_layer, e)) return -1;
    pkv_dense_cost dc;
    pkv_model_dense_cost(&m, eng->cal, v->n_rows, v->n_rows, NULL, &dc);
    *t_attn = sp->tokens * m.layers * t_layer;
    *t = chunks + sp->tokens * dc.t_predicted + *t_attn;
    return 0;
}

/* What the cost model adds to the route's time: the MLP tail, and a full model's
 * layers around its dense part. *t_proposals: the proposals' part of it (a measuring
 * backend without a proposer's backend takes their predicted time too), *t_pattn their
 * passes' attention. */
static int predict_model(pkv_engine *eng, const pkv_batch_view *v, int64_t chunk_tok,
                         int64_t chunk_heads, bool replayed, pkv_step_rec *rec, double *t_proposals,
                         double *t_pattn, pkv_err *e) {
    if (proposals(eng, v, (pkv_route)rec->route, chunk_tok, chunk_heads, t_proposals, t_pattn, e))
        return -1;
    /* The MLP tail reads its weights once per step: memory bound at decode sizes. */
    if (eng->mlp_bytes > 0)
        rec->t_predicted += eng->mlp_bytes / eng->cal->beta + 3 * eng->cal->lambda;
    /* The route runs in every layer (the study layer's one), around the dense part
     * (none in the study layer), which runs over the rows and the iteration's prompt
     * chunks at once; the chunks' attention is the prefill's. */
    const double t_chunks = v->chunks
                                ? prompt_extra(eng, v->chunks, chunk_tok, rec->prefill_scores) +
                                      eng->cal->prefill_row_us * 1e-6 * v->n_rows
                                : 0;
    pkv_dense_cost dc;
    const int64_t rows = (int64_t)v->n_rows * (1 + v->spec_tokens); /* a verify: k + 1 a row */
    eng->moe.real_tokens = rows + chunk_tok; /* the requests' rows, before a graph's padding */
    eng->moe.replayed = replayed;
    pkv_model_dense_cost(
        &eng->model, eng->cal,
        pkv_engine_graph_rows(&eng->opts.host.graphs, rows + chunk_tok, v->chunks != NULL),
        rows + chunk_heads, eng->moe.experts ? &eng->moe : NULL, &dc);
    rec->experts_active = dc.experts_active;
    rec->expert_tokens_max = (uint32_t)dc.expert_tokens_max;
    rec->t_dense_predicted = dc.t_predicted + t_chunks + *t_proposals;
    rec->t_predicted = eng->model.layers * rec->t_predicted + rec->t_dense_predicted;
    return 0;
}

int pkv_engine_step(pkv_engine *eng, const pkv_batch_view *v, pkv_step_rec *rec, double *advance,
                    pkv_err *e) {
    if (v->chunks && eng->backend->measures && !eng->backend->mixed)
        return pkv_fail(e,
                        "step %llu: the %s backend cannot run prompt chunks inside a decode "
                        "step (serving.scheduler chunked)",
                        (unsigned long long)rec->index, eng->backend->name);
    double t0 = eng->backend->measures ? pkv_clock_now() : 0;
    pkv_step_view sv = {.rows = v->n_rows,
                        .gqa_group = eng->shape.hq / eng->shape.hkv,
                        .kv_dtype = eng->shape.kv_dtype,
                        .q_len = 1 + v->spec_tokens,
                        .no_context_gate = eng->no_context_gate};
    for (int32_t i = 0; i < v->n_rows; i++) sv.context_tokens += v->seq_lens[i];
    /* The oracle on a measuring backend runs every candidate and keeps the fastest. */
    const int measured_oracle = eng->policy.measured_oracle && eng->backend->measures;
    /* A backend that launches nothing, or a policy that launches one of several
     * candidates, plans them by their counts only (no task lists); the chosen one is
     * then laid out in full. */
    const int lazy = eng->backend->measures && !measured_oracle &&
                     (eng->policy.candidates & (eng->policy.candidates - 1)) != 0;
    double plan_wall[PKV_ROUTE_COUNT] = {0}; /* the measuring oracle's planning, per route */
    if (plan_candidates(eng, v, lazy, measured_oracle, &sv, plan_wall, rec, e)) return -1;
    const double t_planned = eng->backend->measures ? pkv_clock_now() : 0;
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) rec->t_route_measured[k] = NAN;
    /* Only a backend that computes outputs (cpu, cuda) can be checked. */
    int check = eng->backend->measures && eng->opts.check_every > 0 &&
                ((int64_t)rec->index < eng->opts.check_first ||
                 (int64_t)rec->index % eng->opts.check_every == 0);
    rec->t_meta = NAN;
    rec->t_device = rec->t_dense = rec->max_err = rec->mean_err = rec->out_mean_abs = NAN;
    rec->t_noise = rec->t_plan = rec->t_choose = NAN;
    rec->policy_why = 0;
    _Static_assert(PKV_ROUTE_COUNT <= 8, "/steps candidates holds a bit per route");
    rec->candidates = (uint8_t)sv.valid;
    pkv_route r = PKV_ROUTE_REF_PAGED;
    double oracle_spent = 0, oracle_wall = 0;
    if (measured_oracle) {
        if (pkv_engine_run_oracle(eng, v, &sv, check, rec, &r, &oracle_spent, &oracle_wall, e))
            return -1;
    } else {
        if (eng->backend->prepare(eng->backend, v, e)) return -1;
        r = eng->policy.choose(&eng->policy, eng->cal, &sv, &rec->policy_why);
        /* The chosen plan's task list (the workqueue routes'), from its counted layout. */
        if (lazy) {
            int rc = pkvk_plan_write_tasks(&eng->planner.plans[r], &eng->shape, v->seq_lens);
            if (rc)
                return pkv_fail(e, "step %llu: laying out %s failed (status %d)",
                                (unsigned long long)rec->index, pkv_route_name(r), rc);
        }
        /* The host's parts of the step before the backend runs it (NaN under the
         * measuring oracle, whose step is its best candidate's) */
        if (eng->backend->measures) {
            rec->t_plan = t_planned - t0;
            rec->t_choose = pkv_clock_now() - t_planned;
        }
    }
    const pkv_counters *c = &sv.cand[r];
    rec->rows = (uint32_t)v->n_rows;
    int64_t chunk_heads = 0; /* the chunks that end their prompts (they sample) */
    const int64_t chunk_tok = v->chunks ? chunk_tokens(v->chunks, &chunk_heads) : 0;
    rec->prefill_tokens = (uint32_t)chunk_tok;
    rec->prefill_chunks = v->chunks ? (uint32_t)v->chunks->n_req : 0;
    rec->prefill_scores = v->chunks ? chunk_scores(eng, v->chunks) : 0;
    rec->context_tokens = (uint64_t)sv.context_tokens;
    record_route(rec, r, c);
    if (!measured_oracle &&
        eng->backend->run(eng->backend, v, &eng->planner.plans[r], check, rec, e))
        return -1;
    rec->t_mlp = NAN;
    if (eng->backend->finish && eng->backend->finish(eng->backend, v, rec, e)) return -1;
    /* the proposals: run for real where the proposer has a backend (in the step's wall
     * time, rec->t_draft its device time), else their predicted time added */
    double t_draft_attn;
    if (pkv_proposer_run(eng, v, r, rec->index, &rec->t_draft, &t_draft_attn, e)) return -1;
    /* the forward over the rows (k + 1 a row in a verify) and the chunks: from a graph? */
    const bool replayed = pkv_engine_graph_replays(
        &eng->opts.host.graphs, (int64_t)v->n_rows * (1 + v->spec_tokens) + chunk_tok,
        v->chunks != NULL);
    double t_proposals, t_pattn;
    if (predict_model(eng, v, chunk_tok, chunk_heads, replayed, rec, &t_proposals, &t_pattn, e))
        return -1;
    const bool drafted = !isnan(rec->t_draft);
    if (drafted && !rec->warmup) {
        pkv_proposer *p = &eng->proposer;
        p->measured += rec->t_draft, p->predicted += t_proposals;
        p->measured_attn += t_draft_attn, p->predicted_attn += t_pattn;
        p->steps++;
    }
    if (eng->backend->measures && !drafted) eng->backend->t_unrun += t_proposals;
    rec->t_wall = eng->backend->measures ? pkv_clock_now() - t0 + eng->backend->t_unrun : NAN;
    eng->backend->t_unrun = 0;
    /* The oracle's step is the one its best route would have made: the step's own host
     * work, its best candidate's planning and median run, not the planning and the runs
     * made only to compare. */
    if (measured_oracle) {
        rec->t_wall += oracle_wall - oracle_spent;
        for (int k = 0; k < PKV_ROUTE_COUNT; k++)
            if (k != (int)r) rec->t_wall -= plan_wall[k];
    }
    /* An output is a weighted mean of V's rows: |O| <= v_max. */
    const int bf16 = eng->shape.dtype == PKVK_BF16, fp8 = eng->shape.kv_dtype == PKVK_FP8_E4M3;
    const double vmax = eng->backend->v_max;
    if (check && !pkv_tol_typed_ok(bf16, fp8, vmax, vmax, rec->max_err, rec->mean_err))
        return pkv_fail(e,
                        "step %llu: route %s disagrees with the reference: max|e| %.3g (limit "
                        "%.3g), mean|e| %.3g (limit %.3g)",
                        (unsigned long long)rec->index, pkv_route_name(r), rec->max_err,
                        pkv_tol_typed_max(bf16, fp8, vmax, vmax), rec->mean_err,
                        bf16 || fp8 ? INFINITY : PKV_TOL_MEAN);
    *advance = pkv_engine_clock_time(eng, rec->t_predicted, rec->t_wall,
                                     rec->t_device + (isnan(rec->t_mlp) ? 0 : rec->t_mlp) +
                                         (isnan(rec->t_dense) ? 0 : rec->t_dense) +
                                         (drafted ? rec->t_draft : t_proposals));
    *advance = pkv_engine_with_host(eng, *advance, (int64_t)v->n_rows + rec->prefill_chunks,
                                    chunk_tok, (int64_t)v->n_rows + chunk_heads,
                                    eng->opts.host.window > 1 ? 1.0 / eng->opts.host.window : 1,
                                    replayed, &rec->t_host_engine);
    if (t_proposals > 0) { /* the drafting loop's host work, pass by pass */
        const double drafting = eng->opts.spec.tokens * eng->opts.host.per_proposal_s;
        *advance += drafting, rec->t_host_engine += drafting;
    }
    if (!(*advance >= 0))
        return pkv_fail(e, "step %llu: the %s backend measured no %s time",
                        (unsigned long long)rec->index, eng->backend->name,
                        eng->opts.clock == PKV_CLOCK_WALL ? "wall" : "device");
    return 0;
}

int pkv_engine_prefill(pkv_engine *eng, const pkv_prefill_view *p, pkv_prefill_rec *rec,
                       double *advance, pkv_err *e) {
    int64_t heads = 0, tokens = chunk_tokens(p, &heads);
    rec->index = (uint64_t)eng->prefills++;
    rec->requests = (uint32_t)p->n_req;
    rec->tokens = (uint64_t)tokens;
    rec->scores = chunk_scores(eng, p);
    rec->t_predicted = rec->t_device = rec->t_wall = NAN;
    const bool replayed = pkv_engine_graph_replays(&eng->opts.host.graphs, tokens, true);
    if (eng->kind->prefill_predicted) {
        pkv_dense_cost dc;
        eng->moe.real_tokens = tokens;
        eng->moe.replayed = replayed;
        pkv_model_dense_cost(&eng->model, eng->cal,
                             pkv_engine_graph_rows(&eng->opts.host.graphs, tokens, true), heads,
                             eng->moe.experts ? &eng->moe : NULL, &dc);
        rec->t_predicted = dc.t_predicted + prompt_extra(eng, p, tokens, rec->scores) +
                           proposer_prompt(eng, p, tokens, heads);
    }
    if (eng->backend->prefill) {
        double t0 = pkv_clock_now(), t_draft;
        if (eng->backend->prefill(eng->backend, p, &rec->t_device, e) ||
            pkv_proposer_prefill(eng, p, &t_draft, e))
            return -1;
        if (!isnan(t_draft)) rec->t_device += t_draft; /* the proposer's prefill beside it */
        rec->t_wall = pkv_clock_now() - t0 + eng->backend->t_unrun;
        eng->backend->t_unrun = 0;
    }
    *advance = eng->kind->prefill_predicted || eng->opts.prefill_measure
                   ? pkv_engine_clock_time(eng, rec->t_predicted, rec->t_wall, rec->t_device)
                   : eng->opts.prefill_base_s + eng->opts.prefill_per_token_s * (double)tokens;
    *advance = pkv_engine_with_host(eng, *advance, p->n_req, tokens,
                                    eng->kind->prefill_samples ? heads : 0, 1, replayed,
                                    &rec->t_host_engine);
    return 0;
}

int pkv_engine_swap(pkv_engine *eng, int to_host, const int32_t *pages, const int32_t *slots,
                    int32_t n, double *t, double *t_predicted, pkv_err *e) {
    const pkv_calib *c = eng->cal;
    *t_predicted = c->swap_us * 1e-6 + n * pkv_model_page_bytes(&eng->model) / (c->swap_gbps * 1e9);
    *t = *t_predicted;
    if (!eng->backend->swap) return 0; /* modelled only, whatever the clock */
    double t_device, t0 = pkv_clock_now();
    if (eng->backend->swap(eng->backend, to_host, pages, slots, n, &t_device, e)) return -1;
    *t = pkv_engine_clock_time(eng, *t_predicted, pkv_clock_now() - t0 + eng->backend->t_unrun,
                               t_device);
    eng->backend->t_unrun = 0;
    return 0;
}
