/* The correctness tolerances of every attention output against its reference (the
 * study's): max |e| below PKV_TOL_MAX and mean |e| below PKV_TOL_MEAN. The engine's
 * in-loop checks, the kernel benchmark and the tests all compare against these. */
#ifndef PKV_TOL_H
#define PKV_TOL_H

#define PKV_TOL_MAX  2e-3
#define PKV_TOL_MEAN 3e-4

/* Written as "not below" so that a NaN (an output never written) fails too. */
static inline int pkv_tol_ok(double max_err, double mean_err) {
    return max_err < PKV_TOL_MAX && mean_err < PKV_TOL_MEAN;
}

#endif
