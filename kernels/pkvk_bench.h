/* pkvk: measuring helpers for benchmarks, calibration and the cuda backend's step
 * timing: event timers and marks, L2 flush, the measured ceilings. */
#ifndef PKVK_BENCH_H
#define PKVK_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "pkvk_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA event owned by its caller (the cuda backend keeps one per interval it
 * times): record marks its context's stream now; elapsed waits for b and gives the
 * milliseconds from a to b. */
typedef struct pkvk_event pkvk_event;
int pkvk_event_create(const pkvk_ctx *c, pkvk_event **ev);
void pkvk_event_destroy(pkvk_event *ev);
int pkvk_event_record(pkvk_event *ev);
/* While the stream is captured into a CUDA graph: record the event as an event
 * record node of the graph (external), so that every replay records it and it times
 * the replay. */
int pkvk_event_record_node(pkvk_event *ev);
int pkvk_event_elapsed(pkvk_event *a, pkvk_event *b, float *ms);
/* The sum (ms) of the intervals (ev[2 i], ev[2 i + 1]), i < pairs, after one wait for
 * the last event. */
int pkvk_events_elapsed_sum(pkvk_event *const *ev, int pairs, float *ms);
/* Evict the L2 by reading the context's buffer of twice its size. */
int pkvk_flush_l2(const pkvk_ctx *c);

typedef struct pkvk_ceilings {
    double copy_gbps; /* device-to-device copy, bytes read + written per second / 1e9 */
    double read_gbps; /* read-only streaming kernel */
    double launch_us; /* back-to-back empty kernel launch */
    /* From an idle GPU (the host busy for 20 us before each): */
    double idle_launch_us;     /* host wall of one empty launch and the wait for it */
    double step_floor_us;      /* the least host overhead of a step shaped like the cuda
                                  backend's: event, a one-block kernel, event, an empty
                                  kernel, event, wait; wall minus the time between the
                                  last two events */
    double d2h_gbps, h2d_gbps; /* the host link: one copy of 1 GiB of pinned memory each way */
} pkvk_ceilings;
int pkvk_measure_ceilings(const pkvk_ctx *ctx, pkvk_ceilings *c);
/* Preemption by swap's copy (pkvk_swap_copy): n_pages pages of n_pools pools,
 * page_bytes each, in a scattered order, to host slots (*ms_out) and back (*ms_in):
 * medians of reps, in ms. */
int pkvk_time_swap(const pkvk_ctx *c, int n_pools, size_t page_bytes, int32_t n_pages, int reps,
                   float *ms_out, float *ms_in);
/* The read-only streaming kernel over `bytes` contiguous bytes, L2 flushed: median
 * of reps calls, in ms. */
int pkvk_time_read(const pkvk_ctx *c, size_t bytes, int reps, float *ms);

#ifdef __cplusplus
}
#endif
#endif
