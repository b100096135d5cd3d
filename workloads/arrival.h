/* Arrival processes. Renewal processes draw gaps from GSL distributions; the
 * Markov-modulated and piecewise-rate processes keep a little state. */
#ifndef PKV_ARRIVAL_H
#define PKV_ARRIVAL_H

#include <stdint.h>
#include <signal.h>
#include <gsl/gsl_rng.h>

typedef enum pkv_arrival_kind {
    PKV_ARRIVAL_POISSON = 0,   /* exponential gaps at `rate` */
    PKV_ARRIVAL_GAMMA,         /* Gamma renewal: mean gap 1/rate, coefficient of variation cv */
    PKV_ARRIVAL_WEIBULL,       /* Weibull renewal: mean gap 1/rate, cv */
    PKV_ARRIVAL_DETERMINISTIC, /* gaps exactly 1/rate */
    PKV_ARRIVAL_CLOSED,        /* `concurrency` requests always in the system */
    PKV_ARRIVAL_MMPP,          /* two-state Markov-modulated Poisson (on/off bursts) */
    PKV_ARRIVAL_PIECEWISE,     /* Poisson with a piecewise-linear rate over time */
} pkv_arrival_kind;

extern const char *const pkv_arrival_names[]; /* indexed by pkv_arrival_kind, NULL-ended */

enum { PKV_ARRIVAL_MAX_POINTS = 64 };

typedef struct pkv_arrival_spec {
    pkv_arrival_kind kind;
    double rate;           /* requests/second (open-loop renewal kinds) */
    double cv;             /* gap coefficient of variation (gamma, weibull) */
    int64_t concurrency;   /* closed loop */
    double start_jitter_s; /* closed loop: the first requests arrive uniformly over it */
    /* mmpp: Poisson at rate_on / rate_off; sojourns exponential with these means */
    double rate_on, rate_off, mean_on_s, mean_off_s;
    /* piecewise: rate(t) linear between points (t_s[i], rates[i]), constant after
     * the last point, or repeating with period_s > 0 (a diurnal cycle) */
    double t_s[PKV_ARRIVAL_MAX_POINTS], rates[PKV_ARRIVAL_MAX_POINTS];
    int n_points;
    double period_s;
    /* derived by pkv_arrival_prepare */
    double shape, scale; /* gamma: k, theta; weibull: b (shape), a (scale) */
    double rate_max;     /* piecewise: thinning bound */
} pkv_arrival_spec;

typedef struct pkv_arrival_state {
    int on;          /* mmpp: current state */
    double t_switch; /* mmpp: time of the next state change; < 0 before the first draw */
    double t_stuck;  /* where the search could not advance (after a NAN) */
} pkv_arrival_state;

/* Derive distribution parameters; returns -1 when they cannot be reached. */
int pkv_arrival_prepare(pkv_arrival_spec *a);
/* Seconds until the next arrival of a renewal kind (poisson ... deterministic). */
double pkv_arrival_gap(const pkv_arrival_spec *a, gsl_rng *r);
/* Where a search for the next arrival gives up: past t_end (the run's max_time_s;
 * INFINITY for none: it returns a time past t_end, no later than the arrival), or once
 * *stop is set (may be NULL; it returns INFINITY). */
typedef struct pkv_arrival_limits {
    double t_end;
    volatile sig_atomic_t *stop;
} pkv_arrival_limits;

/* The next arrival time after t (open-loop kinds). st starts zeroed with t_switch < 0;
 * lim may be NULL (no limits). INFINITY: the process has no further arrival (a
 * piecewise rate that ends at 0 with no period), or the search was stopped.
 * NAN: the process cannot advance at this time (its periods or gaps are below the
 * clock's resolution there, a thousand times in a row). */
double pkv_arrival_next(const pkv_arrival_spec *a, pkv_arrival_state *st, double t, gsl_rng *r,
                        const pkv_arrival_limits *lim);
/* piecewise: the rate at t and its integral over [0, t] (for tests and reports). */
double pkv_arrival_rate_at(const pkv_arrival_spec *a, double t);
double pkv_arrival_cumulative(const pkv_arrival_spec *a, double t);

#endif
