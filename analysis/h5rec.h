/* HDF5 recorder: one self-describing file per run. The file is written under a
 * temporary name and renamed only by pkv_h5rec_close(commit = 1), so an interrupted
 * or failed run leaves either a complete file or none.
 *
 * Tables are stored by column: /steps, /prefills and /requests are groups holding one 1-D
 * dataset per column of the record schema (base/pkv_record.h), each of a plain
 * numeric type (no padding, nothing hidden), chunked, shuffled and deflated, so that
 * a reader reads one column without decompressing the others. Route and request
 * state columns are HDF5 enums of their names. /routes (and /routes_measured) hold
 * one column per candidate route of the policy. Rows are buffered a chunk at a time
 * and written as whole chunks. */
#ifndef PKV_H5REC_H
#define PKV_H5REC_H

#include <stdbool.h>
#include <stddef.h>

#include "pkv_attr.h"
#include "pkv_err.h"
#include "pkv_record.h"
#include "summary.h"

typedef struct pkv_h5rec pkv_h5rec;

/* What a run records (run.record). */
typedef enum pkv_record_level {
    PKV_RECORD_FULL = 0, /* /steps, /routes (and /routes_measured), /requests */
    PKV_RECORD_STEPS,    /* /steps and /requests, no per-candidate route tables */
    PKV_RECORD_REQUESTS, /* /requests only */
    PKV_RECORD_SUMMARY,  /* neither: /summary, /config, /calibration, /provenance */
} pkv_record_level;
extern const char *const pkv_record_level_names[];

typedef struct pkv_h5rec_opts {
    pkv_record_level level;
    bool measured;        /* the backend measures: keep the measured columns */
    bool routes_measured; /* write /routes_measured (an oracle on a measuring backend) */
    uint32_t candidates;  /* bit r: route r is planned each step (a column of /routes) */
    bool fleet;           /* a fleet's run: its columns (the replica) too */
    bool engine_host;     /* serving.engine adds host work: its columns (t_host_engine) */
    bool moe;             /* a mixture of experts is served: its columns (experts_active...) */
    bool speculative;     /* serving.speculative: its columns (spec_proposed, spec_accepted) */
    bool proposer;        /* its proposer run for real (a draft or EAGLE, measured): t_draft */
} pkv_h5rec_opts;

/* Rows per chunk and deflate level, chosen by measurement (bench/RESULTS.md). */
enum { PKV_H5_CHUNK_ROWS = 65536, PKV_H5_DEFLATE = 1 };

typedef struct pkv_provenance {
    const char *command_line;
    const char *backend;
    const char *gpu; /* GPU name, or "none" */
    uint64_t seed;
    const char *prefill_attention; /* the prefill attention's kernel, or "none" */
    int layers_measured;           /* a full model's layers run for real (0: not written) */
    bool cuda_graph;               /* decode steps replayed as CUDA graphs (run.cuda_graph) */
    const char *sweep_point;       /* a sweep point's key (sim/cmd/sweep.c), or NULL */
} pkv_provenance;

/* Create <path>.tmp.<pid>; fails (naming the path) when it cannot be created. */
/* Before any other HDF5 call of the program: HDF5 registers no exit handler. */
void pkv_h5_init(void);
int pkv_h5rec_open(pkv_h5rec **r, const char *path, const pkv_h5rec_opts *o, pkv_err *e);
int pkv_h5rec_config(pkv_h5rec *r, const char *verbatim, const char *resolved, pkv_err *e);
/* A group `name` with the text dataset `file` and the attributes. */
int pkv_h5rec_group(pkv_h5rec *r, const char *name, const char *file_text, const pkv_attr *a, int n,
                    pkv_err *e);
int pkv_h5rec_provenance(pkv_h5rec *r, const pkv_provenance *p, pkv_err *e);
/* Buffered append of one /steps row and its /routes predictions (per the level). */
int pkv_h5rec_step(pkv_h5rec *r, const pkv_step_rec *s, pkv_err *e);
/* Buffered append of one /prefills row (levels full and steps). */
int pkv_h5rec_prefill(pkv_h5rec *r, const pkv_prefill_rec *p, pkv_err *e);
/* Buffered append of one /requests row (per the level). */
int pkv_h5rec_request(pkv_h5rec *r, const pkv_request_rec *q, pkv_err *e);
int pkv_h5rec_summary(pkv_h5rec *r, const pkv_summary *s, pkv_err *e);
/* A whole table at once (a fleet's /replicas and /scale, at the end): n rows of
 * row_bytes each, the columns' offsets into a row. */
int pkv_h5rec_rows(pkv_h5rec *r, const char *name, const pkv_column *cols, int n_cols,
                   const void *rows, size_t row_bytes, size_t n, pkv_err *e);
/* commit: flush, close and rename into place; otherwise close and delete. */
int pkv_h5rec_close(pkv_h5rec *r, int commit, pkv_err *e);

/* Reading back (tests, tools): every row of /steps or /requests into a new array
 * (caller frees); columns a file leaves out read as NaN (or 0 for integers). */
int pkv_h5_read_steps(const char *path, pkv_step_rec **out, size_t *n, pkv_err *e);
int pkv_h5_read_requests(const char *path, pkv_request_rec **out, size_t *n, pkv_err *e);
/* The same of the run in group ("": the file's root; "points/NNNNN": a sweep's point). */
int pkv_h5_read_steps_at(const char *path, const char *group, pkv_step_rec **out, size_t *n,
                         pkv_err *e);
int pkv_h5_read_prefills_at(const char *path, const char *group, pkv_prefill_rec **out, size_t *n,
                            pkv_err *e);
int pkv_h5_read_requests_at(const char *path, const char *group, pkv_request_rec **out, size_t *n,
                            pkv_err *e);
/* A fleet's /replicas (fails where the run has none). */
int pkv_h5_read_replicas_at(const char *path, const char *group, pkv_replica_rec **out, size_t *n,
                            pkv_err *e);
/* The runs a file holds: its root (one group "") or each point of a sweep
 * ("points/NNNNN"); *groups is the caller's to free. */
int pkv_h5_runs(const char *path, char (**groups)[32], int *n, pkv_err *e);
/* A text dataset of a run (config/resolved, calibration/file) into *out (caller
 * frees). */
int pkv_h5_read_text(const char *path, const char *dataset, char **out, pkv_err *e);

#endif
