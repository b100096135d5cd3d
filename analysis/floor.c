#include "floor.h"

#include "pkv_heap.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>

/* Shortest remaining work first over the requests in arrival order (by[]): the mean of
 * their flow times. The heap holds the waiting requests keyed on their remaining work. */
static int srpt_mean(const double *arrival, const double *work, const size_t *by, size_t n,
                     double *mean) {
    pkv_heap h;
    pkv_heap_init(&h);
    double t = 0, sum = 0;
    size_t next = 0;
    while (next < n || h.n) {
        if (!h.n && arrival[by[next]] > t) t = arrival[by[next]];
        for (; next < n && arrival[by[next]] <= t; next++)
            if (pkv_heap_push(&h, work[by[next]], 0, (int64_t)by[next])) goto oom;
        pkv_event top;
        pkv_heap_pop(&h, &top);
        const double until = next < n ? arrival[by[next]] : INFINITY;
        if (t + top.t <= until) { /* it finishes before the next arrival */
            t += top.t;
            sum += t - arrival[top.arg];
        } else { /* the next arrival comes first: what is left of it waits with it */
            if (pkv_heap_push(&h, top.t - (until - t), 0, top.arg)) goto oom;
            t = until;
        }
    }
    pkv_heap_free(&h);
    *mean = n ? sum / (double)n : NAN;
    return 0;
oom:
    pkv_heap_free(&h);
    return -1;
}

int pkv_floor_flows(const double *arrival, const double *work, size_t n, double *mean,
                    double *sorted) {
    size_t *by = malloc((n ? n : 1) * sizeof *by);
    if (!by) return -1;
    gsl_sort_index(by, arrival, 1, n);
    const bool at_once = n && arrival[by[0]] == arrival[by[n - 1]];
    const int rc = srpt_mean(arrival, work, by, n, mean);
    free(by);
    if (rc) return -1;
    memcpy(sorted, work, n * sizeof *sorted);
    gsl_sort(sorted, 1, n);
    if (at_once) /* the k-th to finish waited for k works at least */
        for (size_t i = 1; i < n; i++) sorted[i] += sorted[i - 1];
    return 0;
}
