#include "admission.h"

const char *const pkv_admission_names[] = {"fcfs", "first_fit", "priority", "new_token_ratio",
                                           NULL};

static int64_t pick_fcfs(const pkv_admission_view *v) {
    return v->n_waiting > 0 && v->pages_needed(v->ctx, 0) <= v->free_pages ? 0 : -1;
}

/* Bounded look-ahead keeps a long queue from costing O(queue) per admission. */
static int64_t pick_first_fit(const pkv_admission_view *v) {
    for (size_t i = 0; i < v->n_waiting && i < 64; i++)
        if (v->pages_needed(v->ctx, i) <= v->free_pages) return (int64_t)i;
    return -1;
}

static int64_t pick_priority(const pkv_admission_view *v) {
    size_t best = 0;
    for (size_t i = 1; i < v->n_waiting && i < 64; i++)
        if (v->priority(v->ctx, i) > v->priority(v->ctx, best)) best = i;
    return v->n_waiting > 0 && v->pages_needed(v->ctx, best) <= v->free_pages ? (int64_t)best : -1;
}

static int64_t pick_new_token_ratio(const pkv_admission_view *v) {
    return pick_fcfs(v) == 0 && (double)v->tokens_needed(v->ctx, 0) <= v->budget_tokens ? 0 : -1;
}

static const pkv_admission_policy policies[] = {{"fcfs", pick_fcfs},
                                                {"first_fit", pick_first_fit},
                                                {"priority", pick_priority},
                                                {"new_token_ratio", pick_new_token_ratio}};
_Static_assert(sizeof policies / sizeof policies[0] == PKV_ADMIT_NEW_TOKEN_RATIO + 1,
               "the policies in pkv_admission_names' order");

const pkv_admission_policy *pkv_admission_get(int index) {
    return index >= 0 && index < (int)(sizeof policies / sizeof policies[0]) ? &policies[index] : 0;
}
