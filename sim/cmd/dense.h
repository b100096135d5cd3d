/* What the GPU commands share (sim/cmd/dense.c): a preset's configuration and the
 * measured dense part of a served model. */
#ifndef PKV_DENSE_H
#define PKV_DENSE_H

#include <stdio.h>

#include "config.h"
#include "pkvk.h"

/* The most token widths a measurement takes (--rows). */
enum { PKV_DENSE_MAX_WIDTHS = 16 };

/* A preset of experiments/models/ through the experiment parser (checked as a run's
 * model is); -1 with the reason where it is not one or has no dense part. */
int pkv_model_preset_config(const char *name, pkv_config *cfg, pkv_err *e);

/* The dense-part constants of the calibration, fitted on the context's GPU. */
typedef struct pkv_dense_fit {
    double gemm_gbps, gemm_us;          /* time = bytes / gemm_gbps + gemm_us at <= 64 rows */
    double gemm_tflops;                 /* the best rate of the model's GEMMs at >= 2048 rows */
    double prefill_attn_tflops;         /* the fused prefill attention's causal FLOPs a second (0:
                                           not built) */
    double moe_gemm_us, moe_gemm_share; /* a mixture's grouped GEMMs (0: not one) */
    pkv_rates moe_at;                   /* moe_gemm_tflops_at: by rows an expert (n 0: not one) */
    int points;                         /* of the bandwidth fit */
    pkv_rates gemm_at;                  /* gemm_tflops_at: the widths above 64 rows */
} pkv_dense_fit;
/* Times the model's GEMMs alone at each of the widths (token rows) and its prefill
 * attention alone, printing the tables to outs (NULL entries skipped), and fits the
 * constants; full: also the sustained rates and a prefill layer in parts. A pkvk_status. */
int pkv_measure_dense(pkvk_ctx *ctx, const pkv_model *md, const int *widths, int nw, int reps,
                      int full, FILE *outs[2], pkv_dense_fit *fit);
/* The fitted constants into c: the GEMMs' (where fitted), the prefill attention's and a
 * mixture's grouped GEMMs' (0: not measured). */
void pkv_dense_fit_apply(const pkv_dense_fit *fit, pkv_calib *c);

#endif
