/* The file of a sweep (sim/cmd/sweep.h): /sweep/experiment (the sweep file's text),
 * /sweep/index (one row a point: `point`, `status`, `error`, one column per axis
 * named by its JSON path, number or text, and the point's summary figures, NaN where
 * it has none), and /points/NNNNN, each a copy of a point's run file (HDF5 object
 * copy). Written under a temporary name and renamed into place. */
#ifndef PKV_H5SWEEP_H
#define PKV_H5SWEEP_H

#include <stddef.h>

#include "pkv_err.h"

typedef struct pkv_h5sweep_point {
    const char *src_file;  /* the file holding the point's run; NULL: none (not finished) */
    const char *src_group; /* "/" for a point's own file, "/points/NNNNN" in a sweep file */
    const char *status;    /* "done", "failed", "interrupted", "pending" */
    const char *error;     /* the failed point's error, else "" */
} pkv_h5sweep_point;

/* values: n_points x n_axes JSON texts of the axes' values (a string's without
 * quotes). */
int pkv_h5sweep_write(const char *path, const char *experiment, const char *mode, int n_axes,
                      const char *const *axis_paths, size_t n_points,
                      const pkv_h5sweep_point *points, const char *const *values, pkv_err *e);
/* An earlier sweep file: its experiment text, each point's status and each point's
 * key (/points/NNNNN/provenance's sweep_point, NULL where it has none); the caller
 * frees them with pkv_h5sweep_free_read. -1 with a message when path is not one. */
int pkv_h5sweep_read(const char *path, char **experiment, size_t *n_points, char ***status,
                     char ***keys, pkv_err *e);
void pkv_h5sweep_free_read(char *experiment, size_t n_points, char **status, char **keys);
/* The key of the point run in `file` (its /provenance's sweep_point) into *key (the
 * caller frees): 1; 0 for an HDF5 file that has none (not a sweep's point); -1 for a
 * file HDF5 cannot open. */
int pkv_h5sweep_point_key(const char *file, char **key);
/* The /summary figures `names` of the run at `group` of `file` ("/" for a point's own file,
 * "/points/NNNNN" in a sweep file) into out (NaN where absent); -1 when the file cannot be
 * opened. */
int pkv_h5sweep_figures(const char *file, const char *group, int n, const char *const *names,
                        double *out);

#endif
