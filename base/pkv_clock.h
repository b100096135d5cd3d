/* The one monotonic clock of the program: host wall time for step and prefill
 * timings, progress lines and benchmarks. */
#ifndef PKV_CLOCK_H
#define PKV_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double pkv_clock_now(void);

#endif
