/* Runs one experiment: calibration, backend, engine, simulation, recording. */
#ifndef PKV_RUNNER_H
#define PKV_RUNNER_H

#include "sim.h"

typedef struct pkv_run_opts {
    int quiet;                   /* no progress line */
    int record;                  /* write the HDF5 file (cfg->output) */
    volatile sig_atomic_t *stop; /* may be NULL */
    const char *command_line;    /* for /provenance */
    /* When non-NULL: receives the /requests table (caller frees) and its length. */
    pkv_request_rec **requests;
    size_t *n_requests;
} pkv_run_opts;

/* The backend `auto` resolves to on this machine. */
pkv_backend_kind pkv_backend_resolve(pkv_backend_kind k);

/* On failure nothing is left at cfg->output. */
int pkv_run_experiment(const pkv_config *cfg, const pkv_run_opts *o, pkv_summary *out, pkv_err *e);

#endif
