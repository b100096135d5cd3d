/* Event queue: a binary min-heap keyed on (time, sequence number). The sequence
 * number is assigned at push, so events at equal times pop in push order and a
 * run is reproducible from its seed. */
#ifndef PKV_HEAP_H
#define PKV_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef enum pkv_event_kind {
    PKV_EVENT_ARRIVAL = 0,
    PKV_EVENT_PREFILL_DONE,
    PKV_EVENT_STEP_DONE,
    PKV_EVENT_FINISH,
} pkv_event_kind;

typedef struct pkv_event {
    double t;     /* seconds */
    uint64_t seq; /* tie-breaker, set by push */
    pkv_event_kind kind;
    int64_t arg; /* request index, or unused */
} pkv_event;

typedef struct pkv_heap {
    pkv_event *ev;
    size_t n, cap;
    uint64_t next_seq;
} pkv_heap;

void pkv_heap_init(pkv_heap *h);
void pkv_heap_free(pkv_heap *h);
/* Returns -1 when memory runs out. */
int pkv_heap_push(pkv_heap *h, double t, pkv_event_kind kind, int64_t arg);
/* Pop the earliest event into *out; returns 0, or -1 when empty. */
int pkv_heap_pop(pkv_heap *h, pkv_event *out);
/* The earliest event, or NULL. */
const pkv_event *pkv_heap_top(const pkv_heap *h);

#endif
