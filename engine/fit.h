/* Fitting the structured cost model (engine/cost.h) of one route to measured steps:
 * GSL's nonlinear least squares (trust region, Levenberg-Marquardt) on the log of each
 * step's predicted over measured time, the constants kept positive (fitted as their
 * logarithms). A constant the steps cannot show (the merge's when no step merges) is
 * left out of the fit and of the model. */
#ifndef PKV_FIT_H
#define PKV_FIT_H

#include <stddef.h>

#include "cost.h"

/* Fit route r's device-time model to n steps (counters k[i], measured seconds t[i] > 0)
 * with the calibration's beta, SM count and occupancies; *m receives the constants
 * (set; host_us 0, the caller's to set).
 * Returns 0, or -1 with e set (too few steps, or the solver failed). */
int pkv_fit_route(const pkv_calib *c, pkv_route r, const pkv_counters *k, const double *t, size_t n,
                  pkv_route_model *m, pkv_err *e);

/* Route r's model for verify steps: *from (its decode model) with the constants of a CTA's
 * work, which a verify changes, fitted to n steps as pkv_fit_route does: its streaming rate
 * (cta_gbps) and its cost a wave (cta_us): the query rows of a verify share each KV tile,
 * more work a byte, and a CTA writes a state per query row. The other constants stay
 * from's (host_us 0, the caller's to set): the launch's and step's fixed costs, which a
 * verify's steps alone do not separate, and the peak, which enough CTAs still reach (the
 * isolated kernels at Q = 4 against Q = 1: within 2% at B = 8, 32K; bench/RESULTS.md). */
int pkv_fit_route_rate(const pkv_calib *c, pkv_route r, const pkv_route_model *from,
                       const pkv_counters *k, const double *t, size_t n, pkv_route_model *m,
                       pkv_err *e);

/* Whether step k counts among the steps of q query tokens a row (1: decode; the last
 * length, PKV_GATE_QLENS, takes the longer ones too): the fit's and the gates' grouping. */
static inline bool pkv_fit_step_of_q(const pkv_counters *k, int q) {
    const int ql = k->q_len > 1 ? k->q_len : 1;
    return ql == q || (q == PKV_GATE_QLENS && ql > q);
}

/* Mean absolute relative error of route r's model m over n steps (m NULL: the
 * calibration's prediction), and the relative error of their sum. */
void pkv_fit_error(const pkv_calib *c, pkv_route r, const pkv_route_model *m, const pkv_counters *k,
                   const double *t, size_t n, double *mape, double *sum_err);

/* The adaptive policy's margins by query tokens a row (margin[q - 1], q 1 to PKV_GATE_QLENS;
 * NaN where the steps of that length hold no baseline or no split route): a baseline
 * predicted too slow by b and a split route too fast by p make the split route look
 * 1 + b - p times faster than it is, so 1 + the baselines' largest summed error - the
 * split routes' smallest, held in [1, 2]. Route r's n[r] steps (counters k[r], measured
 * t[r]; their q_len the query tokens a row) priced by c's model of r, for the routes of `routes`
 * (bit r); base_bias[q - 1] and split_bias[q - 1] (where not NULL): those summed errors. The last
 * length takes the longer ones too. */
void pkv_fit_gate_margins(const pkv_calib *c, uint32_t routes, pkv_counters *const *k,
                          double *const *t, const size_t *n, double *margin, double *base_bias,
                          double *split_bias);

/* FP8 KV: the per-CTA cap (kv_fp8_cta_gbps, bytes/s into *bps) that brings the
 * calibration's models of PersistentKV's routes closest to steps over FP8 KV (route
 * r's n[r] steps k[r][i], measured t[r][i]; FlashInfer's routes ignored), minimizing
 * the summed squared log ratio over a cap from 1 GB/s to 10 TB/s (GSL's Brent
 * minimizer on its log). sum_err (may be NULL) receives the relative error of those
 * steps' summed prediction at the calibration's cap and at the fitted one. 0, or -1
 * with e set (no step of a PersistentKV route). */
int pkv_fit_fp8_cap(const pkv_calib *c, pkv_counters *const *k, const double *const *t,
                    const size_t *n, double *bps, double sum_err[2], pkv_err *e);

/* y ~ sum_j coef[j] x[j] over n points by (weighted: w, else ordinary) least squares
 * (GSL), no coefficient negative; x[j] NULL is the constant term. Exact for the few
 * terms it takes (every subset is fitted). 0, or -1 (out of memory, or more than
 * PKV_FIT_MAX_TERMS terms: coef untouched). */
enum { PKV_FIT_MAX_TERMS = 4 };
int pkv_fit_nonneg(const double *const *x, int k, const double *y, const double *w, size_t n,
                   double *coef);

/* The host's share of a route's step (each step's wall less its device time, s) as a
 * line in its context (ktok, thousands of tokens), fitted robustly against the host's
 * heavy tail: the steps sorted by context into PKV_FIT_HOST_BINS bins of equal count,
 * each bin's median host time at its median context, and a non-negative line through
 * those, weighted by the bins' counts (one context size: the median). NaN times are
 * skipped. Sets m's host_us and host_us_per_ktoken; 0, or -1 (out of memory). */
enum { PKV_FIT_HOST_BINS = 16 };
int pkv_fit_host(const double *host, const double *ktok, size_t n, pkv_route_model *m);

#endif
