#include "policy.h"

#include <string.h>

const char *const pkv_policy_names[] = {PKV_ROUTES(PKV_ROUTE_NAME_) "adaptive", "oracle", NULL};

uint32_t pkv_policy_baselines(void) {
    uint32_t b = 0;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        b |= (uint32_t)(pkv_route_role_of((pkv_route)r) == PKV_ROLE_BASELINE &&
                        pkvk_route_built((pkv_route)r))
             << r;
    return b;
}

static pkv_route choose_fixed(const pkv_route_policy *self, const pkv_calib *cal,
                              const pkv_step_view *v, uint8_t *why) {
    *why = 0;
    return self->fixed;
}

/* What a route's step costs on the run's clock: its device time, and on the wall its
 * host share. */
static double cost(const pkv_step_view *v, int r) {
    return v->cand[r].t_predicted + v->cand[r].t_host;
}

/* The planned route of `set` predicted fastest (-1: none planned). */
static int fastest(const pkv_step_view *v, uint32_t set) {
    int best = -1;
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if ((set & v->valid) >> r & 1 && (best < 0 || cost(v, r) < cost(v, best))) best = r;
    return best;
}

/* Why adaptive keeps to the baselines for the step, before any prediction (0: its gate is
 * open). */
static uint8_t gated(const pkv_calib *cal, const pkv_step_view *v, pkv_gate *g) {
    *g = pkv_calib_gate(cal, v->gqa_group, v->kv_dtype, v->q_len);
    return !g->on                                                      ? PKV_WHY_NO_GATE
           : !v->no_context_gate && v->context_tokens < g->min_context ? PKV_WHY_CONTEXT
                                                                       : 0;
}

pkv_route pkv_policy_adaptive(const pkv_calib *cal, const pkv_step_view *v, uint8_t *why) {
    /* the baselines planned for the step: every one on the model backend, those built
     * on a backend that runs them */
    int base = fastest(v, pkv_routes_of_role(PKV_ROLE_BASELINE));
    if (base < 0) base = PKV_ROUTE_REF_PAGED;
    pkv_gate g;
    *why = gated(cal, v, &g);
    int pkv = fastest(v, pkv_routes_of_role(PKV_ROLE_SPLIT));
    if (*why || pkv < 0) return (pkv_route)base;
    double margin = v->rows <= cal->margin_small_rows ? g.margin_small : g.margin_large;
    double t_base = cost(v, base), t_pkv = cost(v, pkv);
    if (t_base >= margin * t_pkv) {
        *why = PKV_WHY_PROMOTED;
        return (pkv_route)pkv;
    }
    *why = t_pkv < t_base ? PKV_WHY_MARGIN : 0;
    return (pkv_route)base;
}

static pkv_route choose_adaptive(const pkv_route_policy *self, const pkv_calib *cal,
                                 const pkv_step_view *v, uint8_t *why) {
    return pkv_policy_adaptive(cal, v, why);
}

uint32_t pkv_policy_needed(const pkv_route_policy *p, const pkv_calib *cal,
                           const pkv_step_view *v) {
    pkv_gate g;
    if (p->choose == choose_adaptive && gated(cal, v, &g))
        return p->candidates & ~pkv_routes_of_role(PKV_ROLE_SPLIT);
    return p->candidates;
}

/* On the model backend the oracle's "measured" times are the predictions, so it is
 * the cost model's own optimum, with no gates or margins. */
static pkv_route choose_oracle(const pkv_route_policy *self, const pkv_calib *cal,
                               const pkv_step_view *v, uint8_t *why) {
    *why = 0;
    int best = fastest(v, ~0u);
    return best < 0 ? PKV_ROUTE_REF_PAGED : (pkv_route)best;
}

void pkv_policy_predict_all(pkv_route_policy *p) {
    if (p->choose == choose_adaptive) p->candidates |= pkv_routes_of_role(PKV_ROLE_BASELINE);
    if (p->choose == choose_oracle) p->candidates = (1u << PKV_ROUTE_COUNT) - 1;
}

int pkv_policy_init(pkv_route_policy *p, const char *name) {
    int r = pkv_route_parse(name);
    if (r >= 0) {
        *p = (pkv_route_policy){pkv_policy_names[r], 1u << r, (pkv_route)r, 0, choose_fixed};
        return 0;
    }
    if (strcmp(name, "adaptive") == 0) {
        *p = (pkv_route_policy){"adaptive",
                                pkv_policy_baselines() | pkv_routes_of_role(PKV_ROLE_SPLIT),
                                PKV_ROUTE_REF_PAGED, 0, choose_adaptive};
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
