/* Runs one experiment: calibration, backend, engine, simulation, recording. */
#ifndef PKV_RUNNER_H
#define PKV_RUNNER_H

#include "fleet.h"
#include "sim.h"

typedef struct pkv_run_opts {
    int quiet;                   /* no progress line */
    int record;                  /* write the HDF5 file (cfg->output) */
    volatile sig_atomic_t *stop; /* may be NULL */
    const char *command_line;    /* for /provenance */
    int gpu;                     /* the GPU's ordinal on the cuda backend */
    const char *sweep_point;     /* a sweep point's key, kept in /provenance; may be NULL */
    pkv_sim_observer observe;    /* tests: sees each iteration as it starts; may be NULL */
    void *observe_ctx;
    const pkv_ranks *ranks; /* an MPI job running one fleet (each rank its replicas, rank 0
                               the output); NULL: one process */
    struct pkv_request_log *request_log; /* keeps every request and gap (vLLM's per-request
                                            arrays); NULL: none */
} pkv_run_opts;

/* On failure nothing is left at cfg->output. */
int pkv_run_experiment(const pkv_config *cfg, const pkv_run_opts *o, pkv_summary *out, pkv_err *e);

#endif
