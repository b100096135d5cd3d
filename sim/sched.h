/* The scheduler: which iteration the GPU runs next. After admission (admission.h's
 * table picks whom), a scheduler returns the next iteration (a decode step over the
 * running batch with the prompt chunks it carries, or a prefill batch) and is told
 * when it is done. Preemption (preempt.c) frees pages when the batch cannot grow.
 *
 * prefill_first: a prefill batch of every admitted prompt whole, else a decode step
 * over every running request. chunked (a full model): every iteration runs each
 * running request's decode token and, in the rest of serving.token_budget, the next
 * chunk of each admitted prompt in admission order (at most max_prefill_chunk tokens
 * of one prompt); an iteration with decode rows is a step (its chunks counted in it),
 * one without them a prefill batch of chunks. */
#ifndef PKV_SCHED_H
#define PKV_SCHED_H

#include "backend.h"
#include "pkv_err.h"

struct pkv_sim;

typedef enum pkv_iter_kind {
    PKV_ITER_NONE = 0, /* nothing to run now */
    PKV_ITER_RETRY,    /* the rows were all preempted and nothing else runs: admit again */
    PKV_ITER_STEP,     /* a decode step over the running batch (its chunks in the view) */
    PKV_ITER_PREFILL,  /* a prefill batch (whole prompts, or chunks) */
} pkv_iter_kind;

typedef struct pkv_scheduler {
    const char *name;
    /* The next iteration, with the pages it needs taken: *kind, and the prompts (or
     * the step's chunks; n_req 0: none) in *pv, which points into s's scratch. */
    int (*next)(struct pkv_sim *s, pkv_iter_kind *kind, pkv_prefill_view *pv, pkv_err *e);
    /* The iteration of that kind ended now (a step's rows' tokens are counted already). */
    int (*done)(struct pkv_sim *s, pkv_iter_kind kind, pkv_err *e);
} pkv_scheduler;

/* One file each. */
extern const pkv_scheduler pkv_sched_prefill_first, pkv_sched_chunked;
/* serving.scheduler's (PKV_SCHED_*, in pkv_scheduler_names' order). */
const pkv_scheduler *pkv_scheduler_get(int kind);

#endif
