#include "policy.h"

#include <string.h>

const char *const pkv_policy_names[] = {PKV_ROUTES(PKV_ROUTE_NAME_) "adaptive", "oracle", NULL};

static pkv_route choose_fixed(const pkv_route_policy *self, const pkv_calib *cal,
                              const pkv_step_view *v) {
    return self->fixed;
}

pkv_route pkv_policy_adaptive(const pkv_calib *cal, const pkv_step_view *v) {
    if (v->gqa_group != cal->gqa_group || v->context_tokens < cal->min_context)
        return PKV_ROUTE_REF_PAGED;
    pkv_route best = PKV_ROUTE_BUCKET;
    if (v->cand[PKV_ROUTE_WORKQUEUE].t_predicted < v->cand[PKV_ROUTE_BUCKET].t_predicted)
        best = PKV_ROUTE_WORKQUEUE;
    double margin = v->rows <= cal->margin_small_rows ? cal->margin_small : cal->margin_large;
    double t_ref = v->cand[PKV_ROUTE_REF_PAGED].t_predicted;
    return t_ref >= margin * v->cand[best].t_predicted ? best : PKV_ROUTE_REF_PAGED;
}

static pkv_route choose_adaptive(const pkv_route_policy *self, const pkv_calib *cal,
                                 const pkv_step_view *v) {
    return pkv_policy_adaptive(cal, v);
}

/* On the model backend the oracle's "measured" times are the predictions, so it is
 * the cost model's own optimum, with no gates or margins. */
static pkv_route choose_oracle(const pkv_route_policy *self, const pkv_calib *cal,
                               const pkv_step_view *v) {
    pkv_route best = PKV_ROUTE_REF_PAGED;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if ((v->valid >> r & 1) && v->cand[r].t_predicted < v->cand[best].t_predicted)
            best = (pkv_route)r;
    return best;
}

int pkv_policy_init(pkv_route_policy *p, const char *name) {
    int r = pkv_route_parse(name);
    if (r >= 0) {
        *p = (pkv_route_policy){pkv_policy_names[r], 1u << r, (pkv_route)r, 0, choose_fixed};
        return 0;
    }
    uint32_t pkv3 = 1u << PKV_ROUTE_REF_PAGED | 1u << PKV_ROUTE_BUCKET | 1u << PKV_ROUTE_WORKQUEUE;
    if (strcmp(name, "adaptive") == 0) {
        *p = (pkv_route_policy){"adaptive", pkv3, PKV_ROUTE_REF_PAGED, 0, choose_adaptive};
        return 0;
    }
    if (strcmp(name, "oracle") == 0) {
        /* Every route this build can run: FlashInfer's where it is built. */
        uint32_t all = 0;
        for (int k = 0; k < PKV_ROUTE_COUNT; k++)
            all |= (uint32_t)pkvk_route_built((pkv_route)k) << k;
        *p = (pkv_route_policy){"oracle", all, PKV_ROUTE_REF_PAGED, 1, choose_oracle};
        return 0;
    }
    return -1;
}
