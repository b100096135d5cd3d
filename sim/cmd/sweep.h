/* Sweeps: an experiment file with a `sweep` section names axes by JSON path (any
 * experiment key, or a calibration override under route.overrides) with lists or
 * ranges of values, combined as a product or zipped. `pkvsim run` then runs every
 * point and writes one HDF5 file: /points/NNNNN holds each point's run (the groups a
 * single run writes), /sweep/index a table of the points' values, status, error and
 * summary figures, /sweep/experiment the sweep file.
 *
 * Each finished point is first written whole (to a temporary name, then renamed) as
 * OUT.points/NNNNN.h5; the single file is assembled from those and from the points of
 * an earlier OUT itself (HDF5 object copy) under a temporary name and renamed into
 * place, after which the point files are removed. So a killed job leaves a valid OUT
 * (or none) and its finished points; running the same sweep again skips every point
 * already finished, retries failed and interrupted ones, and assembles. A finished
 * point is one whose run carries the point's key (/provenance's sweep_point: a hash of
 * the point's experiment text and the options that apply to it); one made with other
 * axis values or options runs again, and a file in the folder without a key (a run of
 * its own, another file) stops the sweep, left as it is. One process at a time: the
 * folder's lock names the one running it. A failed point
 * is recorded with its error and the others still run. Ctrl-C stops the point at its
 * step (the point is not kept), assembles what is finished and exits 130. */
#ifndef PKV_SWEEP_H
#define PKV_SWEEP_H

#include <signal.h>
#include <stddef.h>

#include "cli.h"
#include "pkv_err.h"

/* A point's key (its run's /provenance sweep_point): a hash of its experiment's text and
 * the run command's options that apply to it ("v1:" and 16 hex digits). */
enum { PKV_SWEEP_KEY_LEN = 24 };
void pkv_sweep_point_key(const char *text, const pkv_cli_overrides *o, char key[PKV_SWEEP_KEY_LEN]);

/* One process at a time on a sweep's (or a plan's) output: a lock on DIR/.lock (its
 * folder of point files; fcntl: the system drops it when the process ends, however it
 * ends). 0 with *fd set; -1 with a message naming out and the process that holds it. */
int pkv_sweep_lock(const char *dir, const char *out, int *fd, pkv_err *e);

/* 1: the file has a `sweep` section; 0: it has none; -1: it cannot be read (printed). */
int pkv_sweep_present(const char *path);
/* Parse a sweep file's text and the experiments of its first max_points points, as
 * `run` would before running them (the fuzz target's entry); 0, or -1 with the error. */
int pkv_sweep_check(const char *text, const char *path, size_t max_points, pkv_err *e);
/* Run (or with dry, list) the sweep of experiment file `path`; the run command's
 * options apply to every point (an axis may not name a key they set). Returns the
 * exit code. */
int pkv_sweep_main(const char *path, const pkv_cli_overrides *o, int quiet, int dry,
                   volatile sig_atomic_t *stop, const char *command_line);

#endif
