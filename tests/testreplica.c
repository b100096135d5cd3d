#include "testreplica.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The study layer, Poisson arrivals, prefill_first; a small full model, chunked
 * prefill, prefix caching and swap under page pressure. */
const char *const replica_experiments[2] = {
    "{\"name\": \"a\", \"model\": {\"hq\": 32, \"hkv\": 8, \"head_dim\": 128, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 300},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 100, \"max\": 20000},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 200},"
    "   \"num_requests\": 150, \"max_context\": 24000},"
    " \"serving\": {\"max_active\": 12, \"kv_pages\": 6000},"
    " \"route\": {\"policy\": \"adaptive\", \"calibration\": \"" PKV_SOURCE_DIR
    "/experiments/calibration/default.json\"}, \"run\": {\"seed\": 4}}",
    "{\"name\": \"b\", \"model\": {\"layers\": 4, \"hidden\": 1024, \"hq\": 8, \"hkv\": 2,"
    "   \"head_dim\": 128, \"intermediate\": 2048, \"vocab\": 4096, \"page_size\": 16},"
    " \"workload\": {\"arrival\": {\"process\": \"poisson\", \"rate\": 400},"
    "   \"prompt\": {\"dist\": \"uniform\", \"min\": 16, \"max\": 3000},"
    "   \"decode\": {\"dist\": \"uniform\", \"min\": 2, \"max\": 300},"
    "   \"num_requests\": 200, \"max_context\": 4096},"
    " \"serving\": {\"max_active\": 16, \"kv_pages\": 900, \"scheduler\": \"chunked\","
    "   \"token_budget\": 512, \"prefix_caching\": true, \"preemption\": \"swap\","
    "   \"swap_pages\": 400},"
    " \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"" PKV_SOURCE_DIR
    "/experiments/calibration/default.json\"}, \"run\": {\"seed\": 9}}"};

/* FNV-1a over 64-bit words (the fields are doubles): a byte at a time was a fifth of
 * the fleet's Erlang check, which runs millions of steps. */
static void mix(seen *w, const double *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &f[i], sizeof b);
        w->hash = (w->hash ^ b) * 1099511628211ull;
    }
}

static int on_step(void *ctx, const pkv_step_rec *r, double adv, pkv_err *e) {
    seen *w = ctx;
    if (!w->steps || adv < w->step_min) w->step_min = adv;
    if (!w->steps || adv > w->step_max) w->step_max = adv;
    w->steps++, w->advance += adv;
    /* the fields a model backend decides (host times are measured, so not compared) */
    const double f[] = {r->t_sim,
                        r->t_predicted,
                        (double)r->rows,
                        (double)r->route,
                        (double)r->context_tokens,
                        (double)r->prefill_tokens};
    mix(w, f, sizeof f / sizeof *f);
    return 0;
}

static int on_prefill(void *ctx, const pkv_prefill_rec *p, pkv_err *e) {
    seen *w = ctx;
    w->prefills++;
    const double f[] = {p->t_sim, p->t_advance, (double)p->tokens, (double)p->requests};
    mix(w, f, sizeof f / sizeof *f);
    return 0;
}

static int on_request(void *ctx, const pkv_request_rec *q, pkv_err *e) {
    seen *w = ctx;
    w->requests++;
    w->finished += !isnan(q->t_finish);
    w->wait_sum += q->t_admitted - q->t_arrival;
    if (!isnan(q->t_finish)) w->ttft_sum += q->t_first_token - q->t_arrival;
    const double f[] = {(double)q->id, q->t_arrival,         q->t_first_token,
                        q->t_finish,   (double)q->generated, (double)q->preemptions};
    mix(w, f, sizeof f / sizeof *f);
    return 0;
}

static int on_itl(void *ctx, int64_t id, double gap, pkv_err *e) {
    (void)id;
    seen *w = ctx;
    w->itls++;
    mix(w, &gap, 1);
    return 0;
}

static int on_end(void *ctx, double t_end, bool interrupted, const pkv_sim_counts *c, pkv_err *e) {
    seen *w = ctx;
    w->counts = *c, w->t_end = t_end;
    return 0;
}

int replica_init(replica *r, const char *text, pkv_err *e) {
    memset(r, 0, sizeof *r);
    if (pkv_config_parse(&r->cfg, strdup(text), "replica.json", e) ||
        pkv_calib_load(&r->cal, r->cfg.calibration, pkv_model_calib_section(&r->cfg.model), e) ||
        (r->cfg.calib_overrides &&
         pkv_calib_apply(&r->cal, r->cfg.calib_overrides, "route.overrides", e)))
        return -1;
    const pkv_backend_spec bs = {.kind = PKV_BACKEND_MODEL,
                                 .kv_pages = r->cfg.kv_pages,
                                 .bt_stride = pkv_sim_bt_stride(&r->cfg),
                                 .seed = r->cfg.seed};
    const pkv_engine_opts eo = {.policy = r->cfg.policy,
                                .bucket_mode = (pkv_bucket_mode)r->cfg.bucket_mode,
                                .cap_rows = r->cfg.max_active,
                                .clock = PKV_CLOCK_PREDICTED,
                                .prefill_base_s = r->cfg.prefill_base_s,
                                .prefill_per_token_s = r->cfg.prefill_per_token_s};
    if (pkv_engine_init(&r->eng, &r->cfg.model, &r->cal, &eo, &bs, e)) return -1;
    const pkv_sim_sink sink = {.ctx = &r->w,
                               .step = on_step,
                               .prefill = on_prefill,
                               .request = on_request,
                               .itl = on_itl,
                               .end = on_end};
    return pkv_sim_init(&r->sim, &r->cfg, &r->eng, &sink, NULL, e);
}

void replica_free(replica *r) {
    pkv_sim_free(&r->sim);
    pkv_engine_free(&r->eng);
    pkv_calib_free(&r->cal);
    pkv_config_free(&r->cfg);
}

int seen_same(const seen *a, const seen *b) {
    return a->steps == b->steps && a->prefills == b->prefills && a->requests == b->requests &&
           a->itls == b->itls && a->advance == b->advance && a->hash == b->hash &&
           a->t_end == b->t_end && memcmp(&a->counts, &b->counts, sizeof a->counts) == 0;
}
