/* The adaptive route policy's gates, margins, fallback and reasons on constructed
 * steps. */
#include "check.h"
#include "jsonv.h"
#include "policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pkv_step_view view(int rows, int64_t ctx, int G, double t_ref, double t_bucket,
                          double t_wq) {
    pkv_step_view v = {.rows = rows, .context_tokens = ctx, .gqa_group = G, .valid = 7};
    v.cand[PKV_ROUTE_REF_PAGED].t_predicted = t_ref;
    v.cand[PKV_ROUTE_BUCKET].t_predicted = t_bucket;
    v.cand[PKV_ROUTE_WORKQUEUE].t_predicted = t_wq;
    return v;
}

/* pkv_calib_apply of a JSON text (where: the path its errors name); -2 if it does not
 * parse. */
static int apply_text(pkv_calib *c, const char *json, const char *where, pkv_err *e) {
    cJSON *o = cJSON_Parse(json);
    int rc = o ? pkv_calib_apply(c, o, where, e) : -2;
    cJSON_Delete(o);
    return rc;
}

/* adaptive's route, checking its reason bits too. */
static pkv_route adapt(const pkv_calib *c, const pkv_step_view *v, uint8_t want_why,
                       const char *what) {
    uint8_t why = 0xff;
    pkv_route r = pkv_policy_adaptive(c, v, &why);
    CHECK(why == want_why, "%s: policy_why %u, expected %u", what, why, want_why);
    return r;
}

/* A constructed step and adaptive's verdict on it: the route and the reason bits. */
typedef struct verdict {
    int rows;
    int64_t ctx;
    int G;
    double t_ref, t_bucket, t_wq;
    uint8_t why;
    pkv_route want;
    const char *what;
} verdict;

/* Each step of the table judged under c. */
static void judge(const pkv_calib *c, const verdict *t, int n) {
    for (int i = 0; i < n; i++) {
        const pkv_step_view v =
            view(t[i].rows, t[i].ctx, t[i].G, t[i].t_ref, t[i].t_bucket, t[i].t_wq);
        const pkv_route r = adapt(c, &v, t[i].why, t[i].what);
        CHECK(r == t[i].want, "%s: %s, not %s", t[i].what, pkv_route_name(r),
              pkv_route_name(t[i].want));
    }
}
#define JUDGE(c, t) judge(c, t, (int)(sizeof t / sizeof *t))

/* A calibration file with a section per kind of run: each kind reads its section's keys
 * over the top level's and records what it applied; NULL reads the top level; a file
 * without the run's section, a section inside a section and a section given as an
 * override are errors naming it. */
static void calibration_sections(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/pkv-sections-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs("{\"gpu_name\": \"G\", \"placeholder\": false, \"sm_count\": 100, \"beta_gbps\": 1000,"
          " \"study_layer\": {\"beta_gbps\": 2000, \"note\": \"s\"},"
          " \"served_model\": {\"beta_gbps\": 3000, \"sm_count\": 50}}",
          f);
    fclose(f);
    pkv_calib c;
    pkv_err e;
    const double want[3] = {1000e9, 2000e9, 3000e9};
    const char *sec[3] = {NULL, pkv_calib_section(false), pkv_calib_section(true)};
    for (int k = 0; k < 3; k++) {
        int rc = pkv_calib_load(&c, path, sec[k], &e);
        CHECK(rc == 0, "section %s: %s", sec[k] ? sec[k] : "none", e.msg);
        if (rc) continue;
        cJSON *applied = cJSON_Parse(c.json);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(applied, "section");
        CHECK(c.beta == want[k] && c.sm_count == (k == 2 ? 50 : 100) &&
                  !cJSON_HasObjectItem(applied, "study_layer") &&
                  !cJSON_HasObjectItem(applied, "served_model") &&
                  (sec[k] ? cJSON_IsString(s) && !strcmp(s->valuestring, sec[k]) : !s),
              "section %s: beta %g, %d SMs, recorded %s", sec[k] ? sec[k] : "none", c.beta,
              c.sm_count, c.json);
        cJSON_Delete(applied);
        pkv_calib_free(&c);
    }
    f = fopen(path, "w");
    fputs("{\"study_layer\": {\"beta_gbps\": 2000}}", f);
    fclose(f);
    CHECK(pkv_calib_load(&c, path, pkv_calib_section(true), &e) == -1 && strstr(e.msg, path) &&
              strstr(e.msg, "no \"served_model\" section") && strstr(e.msg, "has: study_layer"),
          "a missing section: %s", e.msg);
    f = fopen(path, "w");
    fputs("{\"served_model\": {\"study_layer\": {}}}", f);
    fclose(f);
    CHECK(pkv_calib_load(&c, path, pkv_calib_section(true), &e) == -1 &&
              strstr(e.msg, "served_model.study_layer"),
          "a section in a section: %s", e.msg);
    remove(path);
    pkv_calib_defaults(&c);
    CHECK(apply_text(&c, "{\"served_model\": {\"beta_gbps\": 1}}", "route.overrides", &e) == -1 &&
              strstr(e.msg, "route.overrides.served_model"),
          "a section as an override: %s", e.msg);
}

/* The calibration the constructed steps are judged under: gates for G 4 from 16K tokens
 * of context, margin 1.5 up to 4 rows, 1.05 above. */
static pkv_calib base(void) {
    return (pkv_calib){.gqa_group = 4,
                       .min_context = 16384,
                       .margin_small_rows = 4,
                       .margin_small = 1.5,
                       .margin_large = 1.05};
}

/* Gate on G: a 2x win is ignored for an uncalibrated group size. Gate on context: just
 * under 16K tokens stays on ref; at 16K it may promote. */
static void gates_on_group_and_context(void) {
    const pkv_calib c = base();
    static const verdict t[] = {
        {8, 100000, 8, 2.0, 1.0, 1.0, PKV_WHY_NO_GATE, PKV_ROUTE_REF_PAGED, "G gate"},
        {8, 16383, 4, 2.0, 1.0, 1.0, PKV_WHY_CONTEXT, PKV_ROUTE_REF_PAGED, "context gate"},
        {8, 16384, 4, 2.0, 1.0, 1.5, PKV_WHY_PROMOTED, PKV_ROUTE_BUCKET, "promote to bucket"},
    };
    JUDGE(&c, t);
}

/* A full model's graphs (ref_paged and pkv_workqueue only): no context gate, the
 * margin still holds. */
static void graphs_drop_the_context_gate_not_the_margin(void) {
    pkv_calib c = base();
    pkv_step_view v;
    v = view(8, 1000, 4, 2.0, 9.0, 1.0);
    v.valid = 1u << PKV_ROUTE_REF_PAGED | 1u << PKV_ROUTE_WORKQUEUE;
    v.no_context_gate = true;
    CHECK(adapt(&c, &v, PKV_WHY_PROMOTED, "graphs") == PKV_ROUTE_WORKQUEUE, "no context gate");
    v.cand[PKV_ROUTE_REF_PAGED].t_predicted = 1.04;
    CHECK(adapt(&c, &v, PKV_WHY_MARGIN, "graphs, 1.04x") == PKV_ROUTE_REF_PAGED,
          "no context gate: the margin");
}

/* What a step needs planned: adaptive's PersistentKV routes only where its gate is
 * open (the same gates as its choice), every candidate of another policy. */
static void needed_routes_follow_the_gates(void) {
    pkv_calib c = base();
    pkv_step_view v;
    pkv_route_policy ad, fixed;
    CHECK(pkv_policy_init(&ad, "adaptive") == 0 && pkv_policy_init(&fixed, "pkv_bucket") == 0,
          "policies");
    pkv_policy_predict_all(&ad);
    const uint32_t split = pkv_routes_of_role(PKV_ROLE_SPLIT);
    CHECK((ad.candidates & split) == split, "adaptive plans the split routes");
    v = view(8, 16383, 4, 2.0, 1.0, 1.0);
    CHECK(pkv_policy_needed(&ad, &c, &v) == (ad.candidates & ~split), "context gate closed");
    v = view(8, 100000, 8, 2.0, 1.0, 1.0);
    CHECK(pkv_policy_needed(&ad, &c, &v) == (ad.candidates & ~split), "no gate for G 8");
    v = view(8, 16384, 4, 2.0, 1.0, 1.0);
    CHECK(pkv_policy_needed(&ad, &c, &v) == ad.candidates, "gate open");
    v = view(8, 1000, 4, 2.0, 1.0, 1.0);
    v.no_context_gate = true;
    CHECK(pkv_policy_needed(&ad, &c, &v) == ad.candidates, "no context gate");
    CHECK(pkv_policy_needed(&fixed, &c, &v) == 1u << PKV_ROUTE_BUCKET, "a fixed route");
}

/* The cheaper PersistentKV route is the one promoted; the large-batch margin (1.05:
 * 1.04x stays and says so, 1.06x promotes), a baseline predicted faster than both (no
 * reason bit), the small-batch margin (1.5 up to 4 rows). */
static void margins_promote_the_cheaper_route(void) {
    const pkv_calib c = base();
    static const verdict t[] = {
        {8, 65536, 4, 2.0, 1.5, 1.0, PKV_WHY_PROMOTED, PKV_ROUTE_WORKQUEUE, "promote to workqueue"},
        /* large-batch margin 1.05: 1.04x stays (and says so), 1.06x promotes */
        {8, 65536, 4, 1.04, 1.0, 2.0, PKV_WHY_MARGIN, PKV_ROUTE_REF_PAGED, "1.04x under 1.05"},
        {8, 65536, 4, 1.06, 1.0, 2.0, PKV_WHY_PROMOTED, PKV_ROUTE_BUCKET, "1.06x over 1.05"},
        /* a baseline predicted faster than both: no reason bit, the baseline */
        {8, 65536, 4, 0.5, 1.0, 2.0, 0, PKV_ROUTE_REF_PAGED, "baseline faster"},
        /* small-batch margin 1.50 (rows <= 4): 1.4x stays, 1.6x promotes */
        {4, 65536, 4, 1.4, 1.0, 2.0, PKV_WHY_MARGIN, PKV_ROUTE_REF_PAGED, "1.4x under margin 1.5"},
        {4, 65536, 4, 1.6, 1.0, 2.0, PKV_WHY_PROMOTED, PKV_ROUTE_BUCKET, "1.6x over margin 1.5"},
        {5, 65536, 4, 1.4, 1.0, 2.0, PKV_WHY_PROMOTED, PKV_ROUTE_BUCKET, "5 rows: large margin"},
    };
    JUDGE(&c, t);
}

/* The fallback is the planned baseline predicted fastest (FlashInfer's paths where
 * they were planned: the model backend plans them whatever the build, a backend
 * that runs them where they are built), never a PersistentKV route or the fused
 * ablation. */
static void fallback_is_the_fastest_planned_baseline(void) {
    pkv_calib c = base();
    pkv_step_view v;
    v = view(8, 100, 4, 3.0, 0.5, 0.5); /* context gate: fallback */
    v.valid |= 1u << PKV_ROUTE_FUSED | 1u << PKV_ROUTE_FLASHINFER | 1u << PKV_ROUTE_FLASHINFER_TC;
    v.cand[PKV_ROUTE_FUSED].t_predicted = 0.1;
    v.cand[PKV_ROUTE_FLASHINFER].t_predicted = 2.0;
    v.cand[PKV_ROUTE_FLASHINFER_TC].t_predicted = 1.0;
    pkv_route fb = adapt(&c, &v, PKV_WHY_CONTEXT, "fallback");
    CHECK(fb == PKV_ROUTE_FLASHINFER_TC, "fallback %s, not the fastest baseline",
          pkv_route_name(fb));
    /* The margin is taken against that best baseline, not against ref_paged. */
    v.context_tokens = 65536;
    v.cand[PKV_ROUTE_BUCKET].t_predicted = v.cand[PKV_ROUTE_WORKQUEUE].t_predicted = 0.98;
    pkv_route vs = adapt(&c, &v, PKV_WHY_MARGIN, "margin against the best baseline");
    CHECK(vs == PKV_ROUTE_FLASHINFER_TC, "margin against the best baseline: %s",
          pkv_route_name(vs));
    /* A baseline not planned (a backend that cannot run it) is no fallback. */
    v.valid &= ~(1u << PKV_ROUTE_FLASHINFER | 1u << PKV_ROUTE_FLASHINFER_TC);
    v.context_tokens = 100;
    fb = adapt(&c, &v, PKV_WHY_CONTEXT, "fallback without FlashInfer planned");
    CHECK(fb == PKV_ROUTE_REF_PAGED, "fallback %s without FlashInfer planned", pkv_route_name(fb));
}

/* The model backend plans every route; adaptive's candidates take FlashInfer's paths
 * whatever the build, and the oracle every route. */
static void model_backend_plans_every_route(void) {
    pkv_route_policy pa, po;
    pkv_policy_init(&pa, "adaptive");
    pkv_policy_init(&po, "oracle");
    pkv_policy_predict_all(&pa);
    pkv_policy_predict_all(&po);
    CHECK(pa.candidates >> PKV_ROUTE_FLASHINFER_TC & 1 && pa.candidates >> PKV_ROUTE_FLASHINFER & 1,
          "adaptive on the model backend plans FlashInfer's paths");
    CHECK(po.candidates == (1u << PKV_ROUTE_COUNT) - 1, "the model backend's oracle: every route");
}

/* Gates from the calibration's `gates` object, per G: only the named G has one,
 * with its own minimum and margins. */
static void calibrated_gates_per_group(void) {
    pkv_step_view v;
    pkv_calib g;
    pkv_calib_defaults(&g);
    pkv_err e;
    CHECK(apply_text(&g,
                     "{\"gates\": {\"2\": {\"min_context_tokens\": 1000, \"margin_large\": 1.2}}}",
                     "cal.json", &e) == 0,
          "gates: %s", e.msg);
    static const verdict own[] = {
        {8, 2000, 4, 2.0, 1.0, 1.0, PKV_WHY_NO_GATE, PKV_ROUTE_REF_PAGED, "G=4 without a gate"},
        {8, 999, 2, 2.0, 1.0, 1.0, PKV_WHY_CONTEXT, PKV_ROUTE_REF_PAGED, "G=2 under its minimum"},
        {8, 1000, 2, 1.19, 1.0, 1.0, PKV_WHY_MARGIN, PKV_ROUTE_REF_PAGED, "G=2 under its margin"},
        {8, 1000, 2, 1.21, 1.0, 1.0, PKV_WHY_PROMOTED, PKV_ROUTE_BUCKET, "G=2 over its margin"},
    };
    JUDGE(&g, own);
    /* Flat gate keys given on top (route.overrides, a sweep axis) apply to those gates. */
    CHECK(apply_text(&g, "{\"min_context_tokens\": 5000, \"margin_large\": 1.5}", "route.overrides",
                     &e) == 0,
          "overrides: %s", e.msg);
    static const verdict overridden[] = {
        {8, 4999, 2, 2.0, 1.0, 1.0, PKV_WHY_CONTEXT, PKV_ROUTE_REF_PAGED,
         "G=2 under the overridden minimum"},
        {8, 5000, 2, 1.4, 1.0, 1.0, PKV_WHY_MARGIN, PKV_ROUTE_REF_PAGED,
         "G=2 under the overridden margin"},
        {8, 5000, 4, 2.0, 1.0, 1.0, PKV_WHY_NO_GATE, PKV_ROUTE_REF_PAGED,
         "G=4 still without a gate"},
    };
    JUDGE(&g, overridden);
    /* A gate keyed by anything but a group the kernels run (1 to 8, 16, 32, 64) is
     * refused, naming it. */
    CHECK(apply_text(&g, "{\"gates\": {\"9\": {}}}", "cal.json", &e) == -1 &&
              strstr(e.msg, "gates.9"),
          "gate 9 accepted (%s)", e.msg);
    /* Every group the kernels run has its own gate: 7 query heads per KV head too. */
    CHECK(apply_text(&g, "{\"gates\": {\"7\": {\"min_context_tokens\": 100}}}", "cal.json", &e) ==
              0,
          "gate 7: %s", e.msg);
    static const verdict seven[] = {
        {8, 200, 7, 2.0, 1.0, 1.0, PKV_WHY_PROMOTED, PKV_ROUTE_BUCKET, "G=7 over its minimum"},
        {8, 200, 6, 2.0, 1.0, 1.0, PKV_WHY_NO_GATE, PKV_ROUTE_REF_PAGED, "G=6 without a gate"},
    };
    JUDGE(&g, seven);
    CHECK(apply_text(&g, "{\"gates\": {\"fp8/4\": {}}}", "cal.json", &e) == -1 &&
              strstr(e.msg, "gates.fp8/4"),
          "gate fp8/4 accepted (%s)", e.msg);
    /* FP8 KV's own gate ("fp8_e4m3/G"): an FP8 step of that G takes it, a 16-bit step
     * the plain G's; an FP8 step of a G without its own takes the plain one. Written back
     * as read. */
    CHECK(apply_text(&g,
                     "{\"gates\": {\"4\": {\"min_context_tokens\": 1000},"
                     " \"fp8_e4m3/4\": {\"min_context_tokens\": 3000, \"margin_large\": 1.1},"
                     " \"2\": {\"min_context_tokens\": 500}}}",
                     "cal.json", &e) == 0,
          "fp8 gates: %s", e.msg);
    v = view(8, 2000, 4, 2.0, 1.0, 1.0);
    CHECK(adapt(&g, &v, PKV_WHY_PROMOTED, "FP16 G=4 over its minimum") == PKV_ROUTE_BUCKET,
          "fp16 gate");
    v.kv_dtype = PKVK_FP8_E4M3;
    CHECK(adapt(&g, &v, PKV_WHY_CONTEXT, "FP8 G=4 under its own minimum") == PKV_ROUTE_REF_PAGED,
          "fp8 gate");
    v = view(8, 3000, 4, 1.09, 1.0, 1.0);
    v.kv_dtype = PKVK_FP8_E4M3;
    CHECK(adapt(&g, &v, PKV_WHY_MARGIN, "FP8 G=4 under its own margin") == PKV_ROUTE_REF_PAGED,
          "fp8 margin");
    v = view(8, 600, 2, 2.0, 1.0, 1.0);
    v.kv_dtype = PKVK_FP8_E4M3;
    CHECK(adapt(&g, &v, PKV_WHY_PROMOTED, "FP8 G=2 on the plain gate") == PKV_ROUTE_BUCKET,
          "fp8 fallback");
    cJSON *written = cJSON_CreateObject();
    pkv_calib_route_model_json(&g, written);
    const cJSON *bg = cJSON_GetObjectItemCaseSensitive(written, "gates"),
                *b8 = cJSON_GetObjectItemCaseSensitive(bg, "fp8_e4m3/4");
    CHECK(cJSON_GetArraySize(bg) == 3 && b8 &&
              cJSON_GetObjectItemCaseSensitive(b8, "min_context_tokens")->valuedouble == 3000,
          "FP8 gates written back");
    cJSON_Delete(written);
    /* Verify steps' own gates ("qN/G", "qN/fp8_e4m3/G"): a step of q query tokens a row takes
     * the nearest named length at most q, then the decode gate; over FP8 KV, FP8's chain
     * first. Written back as read; N outside 2 to 16 is refused, naming the key. */
    CHECK(apply_text(&g,
                     "{\"gates\": {\"4\": {\"min_context_tokens\": 1000},"
                     " \"q3/4\": {\"min_context_tokens\": 4000},"
                     " \"q5/4\": {\"min_context_tokens\": 100, \"margin_large\": 1.5},"
                     " \"q3/fp8_e4m3/4\": {\"min_context_tokens\": 7000}}}",
                     "cal.json", &e) == 0,
          "verify gates: %s", e.msg);
    static const struct {
        int q, fp8;
        int64_t ctx;
        double t_ref; /* against 1.0 for the PersistentKV routes */
        uint8_t why;
        const char *what;
    } qs[] = {
        {1, 0, 2000, 2.0, PKV_WHY_PROMOTED, "decode over the G=4 minimum"},
        {2, 0, 2000, 2.0, PKV_WHY_PROMOTED, "2 tokens: no q2 gate, decode's"},
        {3, 0, 2000, 2.0, PKV_WHY_CONTEXT, "3 tokens: its own minimum"},
        {4, 0, 3999, 2.0, PKV_WHY_CONTEXT, "4 tokens: q3's minimum"},
        {5, 0, 200, 1.4, PKV_WHY_MARGIN, "5 tokens: its own margin"},
        {9, 0, 200, 2.0, PKV_WHY_PROMOTED, "9 tokens: q5's"},
        {3, 1, 5000, 2.0, PKV_WHY_CONTEXT, "FP8, 3 tokens: its own minimum"},
        {5, 1, 5000, 2.0, PKV_WHY_CONTEXT, "FP8, 5 tokens: FP8's q3 before 16-bit q5"},
    };
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        v = view(8, qs[i].ctx, 4, qs[i].t_ref, 1.0, 1.0);
        v.q_len = qs[i].q;
        if (qs[i].fp8) v.kv_dtype = PKVK_FP8_E4M3;
        adapt(&g, &v, qs[i].why, qs[i].what);
    }
    written = cJSON_CreateObject();
    pkv_calib_route_model_json(&g, written);
    bg = cJSON_GetObjectItemCaseSensitive(written, "gates");
    const cJSON *q5 = cJSON_GetObjectItemCaseSensitive(bg, "q5/4");
    CHECK(cJSON_GetArraySize(bg) == 4 && q5 &&
              cJSON_GetObjectItemCaseSensitive(q5, "margin_large")->valuedouble == 1.5 &&
              cJSON_GetObjectItemCaseSensitive(bg, "q3/fp8_e4m3/4"),
          "verify gates written back");
    cJSON_Delete(written);
    static const char *const bad_q[] = {"q1/4", "q17/4", "q/4", "q3-4", "q3"};
    for (size_t i = 0; i < sizeof bad_q / sizeof bad_q[0]; i++) {
        char text[96];
        snprintf(text, sizeof text, "{\"gates\": {\"%s\": {}}}", bad_q[i]);
        CHECK(apply_text(&g, text, "cal.json", &e) == -1 && strstr(e.msg, bad_q[i]),
              "gate %s accepted (%s)", bad_q[i], e.msg);
    }
}

/* gemm_tflops_at: the rate at a width, in log rows between the file's widths and
 * held beyond them; bad tables are refused naming the entry (moe_gemm_tflops_at's too, the
 * same reader). */
static void gemm_tflops_at_interpolates(void) {
    pkv_err e;
    pkv_calib rc;
    pkv_calib_defaults(&rc);
    CHECK(pkv_calib_gemm_tflops(&rc, 300) == rc.gemm_tflops, "no table: gemm_tflops");
    CHECK(apply_text(&rc, "{\"gemm_tflops_at\": {\"128\": 300, \"512\": 800}}", "cal.json", &e) ==
              0,
          "gemm_tflops_at: %s", e.msg);
    CHECK(pkv_calib_gemm_tflops(&rc, 1) == 300 && pkv_calib_gemm_tflops(&rc, 4096) == 800,
          "held beyond the widths");
    CHECK(fabs(pkv_calib_gemm_tflops(&rc, 256) - 550) < 1e-9, "256 rows: %g (log midpoint 550)",
          pkv_calib_gemm_tflops(&rc, 256));
    static const char *const bad[] = {
        "{\"gemm_tflops_at\": {\"512\": 800, \"128\": 300}}", "{\"gemm_tflops_at\": {\"x\": 800}}",
        "{\"gemm_tflops_at\": {\"64\": 0}}", "{\"gemm_tflops_at\": [1, 2]}",
        "{\"moe_gemm_tflops_at\": {\"64\": 100, \"16\": 50}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(apply_text(&rc, bad[i], "cal.json", &e) == -1 && strstr(e.msg, "cal.json") &&
                  strstr(e.msg, i == 4 ? "moe_gemm_tflops_at.16" : "gemm_tflops_at"),
              "%s accepted (%s)", bad[i], e.msg);
    }
    CHECK(apply_text(&rc, "{\"moe_gemm_tflops_at\": {\"16\": 50, \"256\": 260}}", "cal.json", &e) ==
                  0 &&
              rc.moe_at.n == 2 && fabs(pkv_rates_at(&rc.moe_at, 64, 0) - 155) < 1e-9,
          "moe_gemm_tflops_at: %s (64 rows an expert: %g, log midpoint 155)", e.msg,
          pkv_rates_at(&rc.moe_at, 64, 0));
}

/* gemm_tflops_by_model: a run of the named model at its tensor parallelism takes that
 * model's table in place of gemm_tflops_at; another model, or the same one at another
 * tensor parallelism, keeps gemm_tflops_at; bad keys and tables are refused naming them. */
static void gemm_tflops_by_model_is_taken_by_its_model(void) {
    pkv_err e;
    pkv_calib base;
    pkv_calib_defaults(&base);
    CHECK(apply_text(&base,
                     "{\"gemm_tflops_at\": {\"128\": 300, \"512\": 800}, "
                     "\"gemm_tflops_by_model\": {\"llama-3.1-70b/tp4\": {\"128\": 400}, "
                     "\"llama-3.1-70b/tp8\": {\"128\": 250, \"512\": 650}}}",
                     "cal.json", &e) == 0 &&
              base.n_by_model == 2,
          "gemm_tflops_by_model: %s", e.msg);
    pkv_calib tp4 = base, tp8 = base, tp2 = base, other = base;
    pkv_calib_use_model(&tp4, "llama-3.1-70b", 4);
    pkv_calib_use_model(&tp8, "llama-3.1-70b", 8);
    pkv_calib_use_model(&tp2, "llama-3.1-70b", 2);
    pkv_calib_use_model(&other, "llama-3.1-8b", 4);
    CHECK(pkv_calib_gemm_tflops(&tp4, 1000) == 400, "tp 4: %g", pkv_calib_gemm_tflops(&tp4, 1000));
    CHECK(pkv_calib_gemm_tflops(&tp8, 512) == 650 && pkv_calib_gemm_tflops(&tp8, 64) == 250,
          "tp 8: %g, %g", pkv_calib_gemm_tflops(&tp8, 512), pkv_calib_gemm_tflops(&tp8, 64));
    CHECK(pkv_calib_gemm_tflops(&tp2, 512) == 800 && pkv_calib_gemm_tflops(&other, 512) == 800,
          "another parallelism or model keeps gemm_tflops_at: %g, %g",
          pkv_calib_gemm_tflops(&tp2, 512), pkv_calib_gemm_tflops(&other, 512));
    static const char *const bad[][2] = {
        {"{\"gemm_tflops_by_model\": {\"llama-3.1-70b\": {\"128\": 1}}}", "llama-3.1-70b"},
        {"{\"gemm_tflops_by_model\": {\"m/tp0\": {\"128\": 1}}}", "m/tp0"},
        {"{\"gemm_tflops_by_model\": {\"/tp4\": {\"128\": 1}}}", "/tp4"},
        {"{\"gemm_tflops_by_model\": {\"m/tp4x\": {\"128\": 1}}}", "m/tp4x"},
        {"{\"gemm_tflops_by_model\": {\"m/tp4\": {}}}", "m/tp4"},
        {"{\"gemm_tflops_by_model\": {\"m/tp4\": {\"512\": 1, \"128\": 2}}}", "m/tp4.128"},
        {"{\"gemm_tflops_by_model\": [1]}", "gemm_tflops_by_model"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pkv_calib c = base;
        CHECK(apply_text(&c, bad[i][0], "cal.json", &e) == -1 && strstr(e.msg, "cal.json") &&
                  strstr(e.msg, bad[i][1]),
              "%s accepted (%s)", bad[i][0], e.msg);
    }
}

/* route_model_by_group: a run of group G takes its group's models for the routes
 * that have one, the joint route_model's for the rest; written back as read; bad
 * keys and partial models refused, naming them. */
static void route_models_by_group(void) {
    pkv_err e;
    pkv_calib gm;
    pkv_calib_defaults(&gm);
    /* a route's model: every constant given, cta_gbps %d */
    static const char rm[] = "{\"cta_gbps\": %d, \"cta_us\": 1, \"launch_us\": 2, "
                             "\"fixed_us\": 3, \"merge_gbps\": 0, \"peak_gbps\": 0, "
                             "\"host_us\": 0}";
    char m10[160], m20[160], m30[160], by_group[800];
    snprintf(m10, sizeof m10, rm, 10);
    snprintf(m20, sizeof m20, rm, 20);
    snprintf(m30, sizeof m30, rm, 30);
    snprintf(by_group, sizeof by_group,
             "{\"route_model\": {\"ref_paged\": %s, \"flashinfer\": %s}, "
             "\"route_model_by_group\": {\"8\": {\"flashinfer\": %s}}, "
             "\"flashinfer_decode_ctas_per_sm\": 8, "
             "\"flashinfer_decode_ctas_by_group\": {\"1\": 4, \"8\": 6}}",
             m10, m20, m30);
    CHECK(apply_text(&gm, by_group, "cal.json", &e) == 0, "by group: %s", e.msg);
    pkv_calib g4 = gm, g8 = gm;
    pkv_calib_use_group(&g4, 4);
    pkv_calib_use_group(&g8, 8);
    const int FI = PKV_ROUTE_FLASHINFER, RP = PKV_ROUTE_REF_PAGED;
    CHECK(g4.flashinfer_decode_ctas_per_sm == 8 && g8.flashinfer_decode_ctas_per_sm == 6,
          "FlashInfer's occupancy by group: G=4 %d, G=8 %d", g4.flashinfer_decode_ctas_per_sm,
          g8.flashinfer_decode_ctas_per_sm);
    CHECK(g4.route_model[FI].v[PKV_RM_CTA_GBPS] == 20 &&
              g8.route_model[FI].v[PKV_RM_CTA_GBPS] == 30 &&
              g8.route_model[RP].v[PKV_RM_CTA_GBPS] == 10,
          "group models: G=4 flashinfer %g, G=8 flashinfer %g, G=8 ref_paged %g",
          g4.route_model[FI].v[PKV_RM_CTA_GBPS], g8.route_model[FI].v[PKV_RM_CTA_GBPS],
          g8.route_model[RP].v[PKV_RM_CTA_GBPS]);
    cJSON *w = cJSON_CreateObject();
    pkv_calib_route_model_json(&gm, w);
    pkv_calib back;
    pkv_calib_defaults(&back);
    const int i1 = pkv_calib_group_index(1), i4 = pkv_calib_group_index(4),
              i8 = pkv_calib_group_index(8);
    CHECK(pkv_calib_apply(&back, w, "written", &e) == 0 && back.group_model[i8][FI].set &&
              back.group_model[i8][FI].v[PKV_RM_CTA_GBPS] == 30 && !back.group_model[i4][FI].set &&
              !back.group_model[i8][RP].set && back.fi_ctas_group[i1] == 4 &&
              back.fi_ctas_group[i8] == 6 && back.fi_ctas_group[i4] == 0,
          "route_model_by_group written and read back: %s", e.msg);
    cJSON_Delete(w);
    static const char *const bad_g[] = {
        "{\"route_model_by_group\": {\"9\": {}}}",
        "{\"route_model_by_group\": {\"8\": {\"flashinfer\": {\"cta_gbps\": 1}}}}",
        "{\"route_model_by_group\": {\"8\": {\"nope\": {}}}}",
        "{\"route_model_by_group\": [1]}",
        "{\"flashinfer_decode_ctas_by_group\": {\"8\": 0}}",
        "{\"flashinfer_decode_ctas_by_group\": {\"12\": 2}}",
        "{\"flashinfer_decode_ctas_by_group\": {\"2\": 2.5}}"};
    for (size_t i = 0; i < sizeof bad_g / sizeof bad_g[0]; i++) {
        CHECK(apply_text(&gm, bad_g[i], "cal.json", &e) == -1 && strstr(e.msg, "cal.json.") &&
                  strstr(e.msg, "_by_group"),
              "%s accepted (%s)", bad_g[i], e.msg);
    }
}

/* The route table: every route has one role and its name parses back to it. */
static void route_roles_and_policy_names(void) {
    unsigned all = (1u << PKV_ROUTE_COUNT) - 1, b = pkv_routes_of_role(PKV_ROLE_BASELINE),
             sp = pkv_routes_of_role(PKV_ROLE_SPLIT), ab = pkv_routes_of_role(PKV_ROLE_ABLATION);
    CHECK((b | sp | ab) == all && !(b & sp) && !(b & ab) && !(sp & ab), "route roles");
    CHECK(sp == (1u << PKV_ROUTE_BUCKET | 1u << PKV_ROUTE_WORKQUEUE) && ab == 1u << PKV_ROUTE_FUSED,
          "the split routes and the ablation");
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        CHECK(pkv_route_parse(pkv_route_name((pkv_route)r)) == r, "route %d's name", r);
    /* Names: every route and the two policies resolve; others do not. */
    pkv_route_policy p;
    for (int i = 0; pkv_policy_names[i]; i++)
        CHECK(pkv_policy_init(&p, pkv_policy_names[i]) == 0, "%s", pkv_policy_names[i]);
    CHECK(pkv_policy_init(&p, "fastest") == -1, "unknown policy accepted");
    CHECK(pkv_policy_init(&p, "pkv_workqueue") == 0 && p.candidates == 1u << PKV_ROUTE_WORKQUEUE,
          "fixed policy plans only its route");
    CHECK(pkv_policy_init(&p, "adaptive") == 0 &&
              p.candidates ==
                  (pkv_policy_baselines() | 1u << PKV_ROUTE_BUCKET | 1u << PKV_ROUTE_WORKQUEUE),
          "adaptive plans the baselines and the split routes");
}

/* The oracle picks the minimum predicted among all planned candidates. */
static void oracle_takes_the_minimum(void) {
    pkv_calib c = base();
    pkv_step_view v;
    pkv_route_policy p;
    CHECK(pkv_policy_init(&p, "oracle") == 0, "oracle");
    v = view(2, 100, 1, 3.0, 2.0, 4.0); /* gates do not apply to the oracle */
    v.valid = 15;
    v.cand[PKV_ROUTE_FUSED].t_predicted = 1.0;
    uint8_t why;
    CHECK(p.choose(&p, &c, &v, &why) == PKV_ROUTE_FUSED && why == 0, "oracle min");
}

static const pkv_test_case cases[] = {
    PKV_CASE(gates_on_group_and_context),
    PKV_CASE(graphs_drop_the_context_gate_not_the_margin),
    PKV_CASE(needed_routes_follow_the_gates),
    PKV_CASE(margins_promote_the_cheaper_route),
    PKV_CASE(fallback_is_the_fastest_planned_baseline),
    PKV_CASE(model_backend_plans_every_route),
    PKV_CASE(calibrated_gates_per_group),
    PKV_CASE(gemm_tflops_at_interpolates),
    PKV_CASE(gemm_tflops_by_model_is_taken_by_its_model),
    PKV_CASE(route_models_by_group),
    PKV_CASE(route_roles_and_policy_names),
    PKV_CASE(oracle_takes_the_minimum),
    PKV_CASE(calibration_sections),
};
PKV_TEST_MAIN(cases)
