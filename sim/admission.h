/* Admission policies: which waiting request, if any, enters the batch next. The
 * simulator asks again after each admission while the active-request limit allows. */
#ifndef PKV_ADMISSION_H
#define PKV_ADMISSION_H

#include <stddef.h>
#include <stdint.h>

/* What a policy may look at: the waiting queue in arrival order (preempted requests
 * first) and the free KV pages. */
typedef struct pkv_admission_view {
    size_t n_waiting;
    int32_t free_pages;
    /* Pages the i-th waiting request (0 = head) needs to be admitted. */
    int32_t (*pages_needed)(const void *ctx, size_t i);
    /* The i-th waiting request's admission priority (its class's; higher first). */
    int32_t (*priority)(const void *ctx, size_t i);
    const void *ctx;
    /* new_token_ratio: the KV tokens left after what the active requests are expected
     * to write and what this round admitted (see below), and the tokens the i-th
     * waiting request reserves: the tokens it stores to run, plus its output still to
     * come (at most PKV_ADMIT_CLIP_TOKENS). */
    double budget_tokens;
    int64_t (*tokens_needed)(const void *ctx, size_t i);
} pkv_admission_view;

typedef struct pkv_admission_policy {
    const char *name;
    /* Index in the waiting queue of the request to admit now, or -1 for none. */
    int64_t (*pick)(const pkv_admission_view *v);
} pkv_admission_policy;

/* "fcfs": the head is admitted when its pages fit, and nobody overtakes it.
 * "first_fit": the first of the first 64 waiting requests whose pages fit.
 * "priority": among the first 64 waiting, the first of the highest priority is
 * admitted when its pages fit, and nobody overtakes it (FCFS within a class).
 * "new_token_ratio": SGLang's (schedule_policy.py, PrefillAdder): the head is admitted
 * when its pages fit and its reservation is within the budget: the free and evictable KV
 * tokens less each active request's remaining output (at most 4,096) times the
 * new-token ratio, and less what this round admitted (prompt and output in full). The
 * ratio starts at 0.7, falls by (0.7 - 0.098) / 600 each decode step to 0.098, and on a
 * preemption (SGLang's retraction) becomes the running requests' (output so far + 20
 * each) over their outputs in full, at most 1 (scheduler.py; SGLANG_INIT_NEW_TOKEN_RATIO,
 * its defaults since 0.2). */
enum { PKV_ADMIT_NEW_TOKEN_RATIO = 3, PKV_ADMIT_CLIP_TOKENS = 4096, PKV_ADMIT_RETRACT_STEPS = 20 };
#define PKV_ADMIT_RATIO_INIT  0.7
#define PKV_ADMIT_RATIO_MIN   0.098
#define PKV_ADMIT_RATIO_DECAY ((PKV_ADMIT_RATIO_INIT - PKV_ADMIT_RATIO_MIN) / 600)

extern const char *const pkv_admission_names[];
const pkv_admission_policy *pkv_admission_get(int index);

#endif
