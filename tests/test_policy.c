/* The adaptive route policy's gates and margins on constructed steps. */
#include "check.h"
#include "policy.h"

static pkv_step_view view(int rows, int64_t ctx, int G, double t_ref, double t_bucket,
                          double t_wq) {
    pkv_step_view v = {.rows = rows, .context_tokens = ctx, .gqa_group = G, .valid = 7};
    v.cand[PKV_ROUTE_REF_PAGED].t_predicted = t_ref;
    v.cand[PKV_ROUTE_BUCKET].t_predicted = t_bucket;
    v.cand[PKV_ROUTE_WORKQUEUE].t_predicted = t_wq;
    return v;
}

int main(void) {
    pkv_calib c = {.gqa_group = 4,
                   .min_context = 16384,
                   .margin_small_rows = 4,
                   .margin_small = 1.5,
                   .margin_large = 1.05};
    pkv_step_view v;
    /* Gate on G: a 2x win is ignored for an uncalibrated group size. */
    v = view(8, 100000, 8, 2.0, 1.0, 1.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_REF_PAGED, "G gate");
    /* Gate on context: just under 16K tokens stays on ref; at 16K it may promote. */
    v = view(8, 16383, 4, 2.0, 1.0, 1.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_REF_PAGED, "context gate");
    v = view(8, 16384, 4, 2.0, 1.0, 1.5);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_BUCKET, "promote to bucket");
    /* The cheaper PersistentKV route is the one promoted. */
    v = view(8, 65536, 4, 2.0, 1.5, 1.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_WORKQUEUE, "promote to workqueue");
    /* Large-batch margin 1.05: 1.04x stays, 1.06x promotes. */
    v = view(8, 65536, 4, 1.04, 1.0, 2.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_REF_PAGED, "1.04x under margin 1.05");
    v = view(8, 65536, 4, 1.06, 1.0, 2.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_BUCKET, "1.06x over margin 1.05");
    /* Small-batch margin 1.50 (rows <= 4): 1.4x stays, 1.6x promotes. */
    v = view(4, 65536, 4, 1.4, 1.0, 2.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_REF_PAGED, "1.4x under margin 1.5");
    v = view(4, 65536, 4, 1.6, 1.0, 2.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_BUCKET, "1.6x over margin 1.5");
    v = view(5, 65536, 4, 1.4, 1.0, 2.0);
    CHECK(pkv_policy_adaptive(&c, &v) == PKV_ROUTE_BUCKET, "5 rows use the large margin");
    /* Names: every route and the two policies resolve; others do not. */
    pkv_route_policy p;
    for (int i = 0; pkv_policy_names[i]; i++)
        CHECK(pkv_policy_init(&p, pkv_policy_names[i]) == 0, "%s", pkv_policy_names[i]);
    CHECK(pkv_policy_init(&p, "fastest") == -1, "unknown policy accepted");
    CHECK(pkv_policy_init(&p, "pkv_workqueue") == 0 && p.candidates == 1u << PKV_ROUTE_WORKQUEUE,
          "fixed policy plans only its route");
    /* The oracle picks the minimum predicted among all planned candidates. */
    CHECK(pkv_policy_init(&p, "oracle") == 0, "oracle");
    v = view(2, 100, 1, 3.0, 2.0, 4.0); /* gates do not apply to the oracle */
    v.valid = 15;
    v.cand[PKV_ROUTE_FUSED].t_predicted = 1.0;
    CHECK(p.choose(&p, &c, &v) == PKV_ROUTE_FUSED, "oracle min");
    CHECK_DONE();
}
