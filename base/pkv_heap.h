/* A time-ordered queue: a binary min-heap keyed on (time, sequence number). The
 * sequence number is assigned at push, so entries at equal times pop in push order
 * and a run is reproducible from its seed. The simulator's events and the
 * workload's pending turns of multi-turn sessions use it. */
#ifndef PKV_HEAP_H
#define PKV_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct pkv_event {
    double t;     /* seconds */
    uint64_t seq; /* tie-breaker, set by push */
    int kind;     /* the user's: the simulator's pkv_event_kind */
    int64_t arg;  /* the user's: a request or session slot, or unused */
} pkv_event;

typedef struct pkv_heap {
    pkv_event *ev;
    size_t n, cap;
    uint64_t next_seq;
} pkv_heap;

void pkv_heap_init(pkv_heap *h);
void pkv_heap_free(pkv_heap *h);
/* Returns -1 when memory runs out. */
int pkv_heap_push(pkv_heap *h, double t, int kind, int64_t arg);
/* Pop the earliest event into *out; returns 0, or -1 when empty. */
int pkv_heap_pop(pkv_heap *h, pkv_event *out);
/* The earliest event, or NULL. */
const pkv_event *pkv_heap_top(const pkv_heap *h);

#endif
