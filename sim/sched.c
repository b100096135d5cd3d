#include "sched.h"

#include "config_keys.h"

const pkv_scheduler *pkv_scheduler_get(int kind) {
    static const pkv_scheduler *const table[] = {
        [PKV_SCHED_PREFILL_FIRST] = &pkv_sched_prefill_first,
        [PKV_SCHED_CHUNKED] = &pkv_sched_chunked,
    };
    return kind >= 0 && kind < (int)(sizeof table / sizeof *table) ? table[kind] : NULL;
}
