/* Arrival processes: inter-arrival times drawn from GSL distributions. */
#ifndef PKV_ARRIVAL_H
#define PKV_ARRIVAL_H

#include <stdint.h>
#include <gsl/gsl_rng.h>

typedef enum pkv_arrival_kind {
    PKV_ARRIVAL_POISSON = 0,   /* exponential gaps at `rate` */
    PKV_ARRIVAL_GAMMA,         /* Gamma renewal: mean gap 1/rate, coefficient of variation cv */
    PKV_ARRIVAL_WEIBULL,       /* Weibull renewal: mean gap 1/rate, cv */
    PKV_ARRIVAL_DETERMINISTIC, /* gaps exactly 1/rate */
    PKV_ARRIVAL_CLOSED,        /* `concurrency` requests always in the system */
} pkv_arrival_kind;

extern const char *const pkv_arrival_names[]; /* indexed by pkv_arrival_kind, NULL-ended */

typedef struct pkv_arrival_spec {
    pkv_arrival_kind kind;
    double rate;         /* requests/second (open loop) */
    double cv;           /* gap coefficient of variation (gamma, weibull) */
    int64_t concurrency; /* closed loop */
    /* derived at init */
    double shape, scale; /* gamma: k, theta; weibull: b (shape), a (scale) */
} pkv_arrival_spec;

/* Derive distribution parameters; returns -1 when the cv cannot be reached. */
int pkv_arrival_prepare(pkv_arrival_spec *a);
/* Seconds until the next arrival (open-loop kinds). */
double pkv_arrival_gap(const pkv_arrival_spec *a, gsl_rng *r);

#endif
