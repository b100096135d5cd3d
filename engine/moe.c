#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

const char *const pkv_expert_law_names[] = {"uniform", "zipf", NULL};

enum { INCL_TOKENS = 1 << 15 }; /* tokens drawn at set-up to estimate a Zipf law's shares */

/* k distinct experts for one token (or `amount` copies of it), by rejection, counted
 * into counts. */
static void draw_token(pkv_moe *m, gsl_rng *r, double *counts, double amount) {
    const uint32_t t = ++m->token;
    for (int j = 0; j < m->k;) {
        size_t e = gsl_ran_discrete(r, m->law);
        if (m->stamp[e] == t) continue;
        m->stamp[e] = t;
        counts[e] += amount;
        j++;
    }
}

int pkv_moe_init(pkv_moe *m, int experts, int k, pkv_expert_law law, double exponent,
                 uint64_t seed) {
    *m = (pkv_moe){.experts = experts, .k = k, .kept_tokens = -1};
    double *w = malloc(sizeof(double) * (size_t)experts);
    m->incl = calloc((size_t)experts, sizeof(double));
    m->stamp = calloc((size_t)experts, sizeof(uint32_t));
    m->count = malloc(sizeof(unsigned int) * (size_t)experts);
    m->counts = malloc(sizeof(double) * (size_t)experts);
    m->place = malloc(sizeof(int32_t) * (size_t)experts);
    m->r = pkv_stream_create(seed, PKV_STREAM_EXPERTS);
    if (w)
        for (int e = 0; e < experts; e++)
            w[e] = law == PKV_EXPERTS_ZIPF ? pow(e + 1.0, -exponent) : 1.0;
    m->law = w ? gsl_ran_discrete_preproc((size_t)experts, w) : NULL;
    free(w);
    gsl_rng *est = law == PKV_EXPERTS_ZIPF ? pkv_stream_create(0, PKV_STREAM_EXPERTS) : NULL;
    if (!m->incl || !m->stamp || !m->count || !m->counts || !m->place || !m->r || !m->law ||
        (law == PKV_EXPERTS_ZIPF && !est)) {
        if (est) gsl_rng_free(est);
        pkv_moe_free(m);
        return -1;
    }
    for (int e = 0; e < experts; e++) m->place[e] = e;
    gsl_ran_shuffle(m->r, m->place, (size_t)experts, sizeof(int32_t)); /* before any draw */
    if (est) { /* the shares under distinct picks: the law's, flattened where k > 1 */
        for (int i = 0; i < INCL_TOKENS; i++) draw_token(m, est, m->incl, 1);
        for (int e = 0; e < experts; e++) m->incl[e] /= (double)INCL_TOKENS * k;
        gsl_rng_free(est);
    } else {
        for (int e = 0; e < experts; e++) m->incl[e] = 1.0 / experts;
    }
    return 0;
}

void pkv_moe_seed(pkv_moe *m, uint64_t seed, uint32_t replica) {
    gsl_rng_set(m->r, pkv_stream_seed(seed + replica, PKV_STREAM_EXPERTS));
}

void pkv_moe_free(pkv_moe *m) {
    if (m->r) gsl_rng_free(m->r);
    if (m->law) gsl_ran_discrete_free(m->law);
    free(m->incl);
    free(m->stamp);
    free(m->count);
    free(m->counts);
    free(m->place);
    free(m->kept);
    *m = (pkv_moe){0};
}

void pkv_moe_draw(pkv_moe *m, int64_t tokens) {
    const int E = m->experts;
    double *counts = m->counts;
    for (int e = 0; e < E; e++) counts[e] = 0;
    if (tokens <= 0) return;
    if (tokens * m->k <= PKV_MOE_EXACT_DRAWS) {
        for (int64_t t = 0; t < tokens; t++) draw_token(m, m->r, counts, 1);
        return;
    }
    gsl_ran_multinomial(m->r, (size_t)E, (unsigned int)(tokens * m->k), m->incl, m->count);
    /* a token chooses an expert once: what lands above `tokens` goes to the others */
    double excess = 0;
    for (int e = 0; e < E; e++) {
        counts[e] = m->count[e];
        if (counts[e] > (double)tokens) excess += counts[e] - (double)tokens, counts[e] = tokens;
    }
    for (int e = 0; e < E && excess > 0; e++) {
        double room = (double)tokens - counts[e], add = room < excess ? room : excess;
        counts[e] += add;
        excess -= add;
    }
}

int pkv_moe_route(void *ctx, int l, int tokens, int32_t *counts) {
    pkv_moe *m = ctx;
    pkv_moe_draw(m, tokens);
    for (int e = 0; e < m->experts; e++) counts[e] = (int32_t)m->counts[e];
    if (!m->kept) return 0;
    if (m->kept_tokens != tokens || l <= m->kept_last) /* the next forward */
        m->kept_tokens = tokens, m->kept_layers = 0;
    if (m->kept_layers < m->kept_cap)
        memcpy(m->kept + (size_t)m->kept_layers * m->experts, counts,
               sizeof(int32_t) * (size_t)m->experts);
    m->kept_layers++, m->kept_last = l;
    return 0;
}

int pkv_moe_keep(pkv_moe *m, int layers) {
    free(m->kept);
    m->kept = layers > 0 ? malloc(sizeof(int32_t) * (size_t)layers * m->experts) : NULL;
    m->kept_cap = m->kept ? layers : 0;
    pkv_moe_forget(m);
    return layers > 0 && !m->kept ? -1 : 0;
}

void pkv_moe_draw_layer(pkv_moe *m, int l, int64_t tokens, int64_t pad) {
    if (m->kept_tokens != tokens || l >= m->kept_layers || l >= m->kept_cap) {
        pkv_moe_draw_padded(m, tokens, pad);
        return;
    }
    const int32_t *c = m->kept + (size_t)l * m->experts;
    for (int e = 0; e < m->experts; e++) m->counts[e] = c[e];
    if (pad > 0) draw_token(m, m->r, m->counts, (double)pad);
}

void pkv_moe_forget(pkv_moe *m) {
    m->kept_tokens = -1, m->kept_layers = 0, m->kept_last = -1;
}

void pkv_moe_draw_padded(pkv_moe *m, int64_t tokens, int64_t pad) {
    pkv_moe_draw(m, tokens);
    if (pad > 0) draw_token(m, m->r, m->counts, (double)pad);
}
