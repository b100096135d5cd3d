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
} pkv_admission_view;

typedef struct pkv_admission_policy {
    const char *name;
    /* Index in the waiting queue of the request to admit now, or -1 for none. */
    int64_t (*pick)(const pkv_admission_view *v);
} pkv_admission_policy;

/* "fcfs": the head is admitted when its pages fit, and nobody overtakes it.
 * "first_fit": the first of the first 64 waiting requests whose pages fit.
 * "priority": among the first 64 waiting, the first of the highest priority is
 * admitted when its pages fit, and nobody overtakes it (FCFS within a class). */
extern const char *const pkv_admission_names[];
const pkv_admission_policy *pkv_admission_get(int index);

#endif
