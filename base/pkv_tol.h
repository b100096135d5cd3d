/* The correctness tolerances of every attention output against its reference (the
 * study's): max |e| below PKV_TOL_MAX and mean |e| below PKV_TOL_MEAN. The engine's
 * in-loop checks, the kernel benchmark and the tests all compare against these. */
#ifndef PKV_TOL_H
#define PKV_TOL_H

#include <math.h>

#define PKV_TOL_MAX  2e-3
#define PKV_TOL_MEAN 3e-4

/* Written as "not below" so that a NaN (an output never written) fails too. */
static inline int pkv_tol_ok(double max_err, double mean_err) {
    return max_err < PKV_TOL_MAX && mean_err < PKV_TOL_MEAN;
}

/* The same for an output in BF16 (bf16) or over FP8 KV (fp8_kv), whose roundings go
 * beyond FP16's, against the FP32 reference over the same (dequantized) values. Derived
 * from half a unit in the last place: BF16 rounds P before the PV product and the
 * output to 8 significant bits, at most 2^-8 (max|V| + max|O|); over FP8 KV a scale
 * meets the compute type's rounding once more (V scaled, or P times V's relative scale),
 * at most 2^-8 (BF16) or 2^-11 (FP16) of max|V| more; FP16's tolerance on top. v_max:
 * the largest |V| (dequantized), o_max: |output|. pkv_tol_typed_max: the bound on max|e|
 * (FP16's PKV_TOL_MAX where neither). */
static inline double pkv_tol_typed_max(int bf16, int fp8_kv, double v_max, double o_max) {
    double bound = PKV_TOL_MAX;
    if (bf16) bound += ldexp(v_max + o_max, -8);
    if (fp8_kv) bound += ldexp(v_max, bf16 ? -8 : -11);
    return bound;
}
static inline int pkv_tol_typed_ok(int bf16, int fp8_kv, double v_max, double o_max, double max_err,
                                   double mean_err) {
    if (!bf16 && !fp8_kv) return pkv_tol_ok(max_err, mean_err);
    return max_err <= pkv_tol_typed_max(bf16, fp8_kv, v_max, o_max);
}

#endif
