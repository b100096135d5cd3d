/* The least a published TTFT could be on a GPU, for the requests a run drew: a realism
 * check of a figure against the physics, apart from any model of an engine. Each
 * request's prompt is work (its tokens times the model's dense FLOPs per token, over the
 * GPU's top GEMM rate) that cannot start before its arrival; one GPU does one FLOP rate
 * in all, so batching prompts cannot beat serving them one at a time, shortest
 * remaining first (which no schedule beats on the mean). Attention, the first decode
 * step, the host and the client only add to it; a prefix cache that skips a prompt's
 * work would take it below (the floor assumes none). */
#ifndef PKV_FLOOR_H
#define PKV_FLOOR_H

#include <stddef.h>

/* The n requests' flow times at best: *mean, the least mean over them (shortest
 * remaining work first, preemptive); sorted[n] (ascending), a lower bound of each order
 * statistic of their flow times, so that any quantile of sorted (linear interpolation)
 * bounds the same quantile of the flows: with every arrival at one instant, the k-th
 * shortest works summed; otherwise the k-th shortest work. work[i] >= 0 seconds,
 * arrival[i] seconds. 0, or -1 (out of memory). */
int pkv_floor_flows(const double *arrival, const double *work, size_t n, double *mean,
                    double *sorted);

#endif
