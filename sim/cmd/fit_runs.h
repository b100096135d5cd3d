/* The measured steps and forwards pkvsim fit reads from runs (sim/cmd/cmd_fit.c). */
#ifndef PKV_FIT_RUNS_H
#define PKV_FIT_RUNS_H

#include <stddef.h>

#include "pkv_err.h"
#include "routes.h"

typedef struct pkv_fit_set {
    pkv_counters *k[PKV_ROUTE_COUNT];
    double *t[PKV_ROUTE_COUNT];
    double *host[PKV_ROUTE_COUNT]; /* wall less the device times of the step's work */
    double *ktok[PKV_ROUTE_COUNT]; /* the step's context, thousands of tokens */
    size_t n[PKV_ROUTE_COUNT], cap[PKV_ROUTE_COUNT];
    /* Forwards over prompt tokens (prefill batches; chunked steps' dense parts): their
     * prompt tokens, attention scores (every layer; 0 where the file does not record
     * them), decode rows beside them (0 in a prefill batch), measured seconds,
     * predicted seconds without the calibration's prefill terms, and with them (the
     * run's own prediction) */
    double *p_tok, *p_sc, *p_rows, *p_meas, *p_base, *p_pred;
    size_t p_n, p_cap;
} pkv_fit_set;
void pkv_fit_set_free(pkv_fit_set *s);
/* Every run of a file (a sweep's points are runs); *groups receives the G values seen
 * (bit G). */
int pkv_fit_load(const char *path, pkv_fit_set *s, pkv_fit_set *per_file, pkv_fit_set *s8,
                 unsigned *groups, pkv_err *e);
/* MAPE and relative error of the sum of the forwards' predictions: base plus the
 * prefill terms (seconds) fixed + per token x tokens + per score x scores + per decode
 * row x rows, or (term NULL) the runs' own. */
void pkv_fit_forward_error(const pkv_fit_set *s, const double *term, double *mape, double *sum_err);

#endif
