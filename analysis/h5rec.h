/* HDF5 recorder: one self-describing file per run. The file is written under a
 * temporary name and renamed only by pkv_h5rec_close(commit = 1), so an interrupted
 * or failed run leaves either a complete file or none. */
#ifndef PKV_H5REC_H
#define PKV_H5REC_H

#include "summary.h"

typedef struct pkv_h5rec pkv_h5rec;

typedef struct pkv_provenance {
    const char *command_line;
    const char *backend;
    const char *gpu; /* GPU name, or "none" */
    uint64_t seed;
} pkv_provenance;

/* Create <path>.tmp.<pid>; fails (naming the path) when it cannot be created. */
int pkv_h5rec_open(pkv_h5rec **r, const char *path, pkv_err *e);
int pkv_h5rec_config(pkv_h5rec *r, const char *verbatim, const char *resolved, pkv_err *e);
int pkv_h5rec_calibration(pkv_h5rec *r, const pkv_calib *c, pkv_err *e);
int pkv_h5rec_provenance(pkv_h5rec *r, const pkv_provenance *p, pkv_err *e);
/* Buffered append of one /steps row and its /routes predictions. */
int pkv_h5rec_step(pkv_h5rec *r, const pkv_step_rec *s, pkv_err *e);
int pkv_h5rec_requests(pkv_h5rec *r, const pkv_request_rec *q, size_t n, pkv_err *e);
int pkv_h5rec_summary(pkv_h5rec *r, const pkv_summary *s, pkv_err *e);
/* commit: flush, close and rename into place; otherwise close and delete. */
int pkv_h5rec_close(pkv_h5rec *r, int commit, pkv_err *e);

/* The HDF5 compound types, shared with readers (tests). Caller closes them. */
int64_t pkv_h5_step_type(void);
int64_t pkv_h5_request_type(void);

#endif
