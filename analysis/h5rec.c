#include "pkv_gitrev.h"
#include "h5rec.h"
#include "pkv_files.h"
#include "h5types.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const pkv_record_level_names[] = {"full", "steps", "requests", "summary", NULL};

#define MAX_COLS 48
_Static_assert(PKV_STEP_COLUMN_COUNT <= MAX_COLS && PKV_REQUEST_COLUMN_COUNT <= MAX_COLS &&
                   PKV_PREFILL_COLUMN_COUNT <= MAX_COLS && PKV_REPLICA_COLUMN_COUNT <= MAX_COLS &&
                   PKV_SCALE_COLUMN_COUNT <= MAX_COLS,
               "a record table has more columns than the recorder's MAX_COLS");

/* A table stored by column: one 1-D dataset per enabled column in group g, rows
 * buffered per column a chunk at a time. */
typedef struct col_table {
    hid_t g;
    const pkv_column *cols;
    int n_cols;
    hid_t d[MAX_COLS]; /* -1: column left out */
    hid_t t[MAX_COLS];
    char *buf[MAX_COLS];   /* [PKV_H5_CHUNK_ROWS] values */
    size_t size[MAX_COLS]; /* bytes of one value */
    size_t n;              /* rows buffered */
    hsize_t written;       /* rows in the file */
} col_table;

struct pkv_h5rec {
    hid_t file;
    char path[1024], tmp[1100];
    pkv_h5rec_opts o;
    col_table steps, requests, routes, routes_measured, prefills;
    /* The per-candidate columns of /routes and /routes_measured: views of
     * pkv_step_rec.t_route and t_route_measured. */
    pkv_column route_cols[2][PKV_ROUTE_COUNT];
};

hid_t pkv_h5_col_type(pkv_col_kind k) {
    if (k <= PKV_COL_F64) { /* the numbers' native types, in pkv_col_kind's order */
        const hid_t native[] = {H5T_NATIVE_UINT8,  H5T_NATIVE_UINT32, H5T_NATIVE_INT32,
                                H5T_NATIVE_UINT64, H5T_NATIVE_INT64,  H5T_NATIVE_DOUBLE};
        return H5Tcopy(native[k]);
    }
    if (k != PKV_COL_ROUTE && k != PKV_COL_STATE) return -1;
    hid_t t = H5Tenum_create(H5T_NATIVE_UINT8);
    int n = k == PKV_COL_ROUTE ? PKV_ROUTE_COUNT : PKV_REQ_STATE_COUNT;
    for (int i = 0; i < n; i++) {
        uint8_t v = (uint8_t)i;
        H5Tenum_insert(t,
                       k == PKV_COL_ROUTE ? pkv_route_name((pkv_route)i)
                                          : pkv_request_state_name((pkv_request_state)i),
                       &v);
    }
    return t;
}

/* A chunked, shuffled and deflated 1-D dataset of unlimited length (one column). */
static hid_t make_column(hid_t loc, const char *name, hid_t type) {
    hsize_t dims = 0, maxd = H5S_UNLIMITED, ch = PKV_H5_CHUNK_ROWS;
    hid_t space = H5Screate_simple(1, &dims, &maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &ch);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, PKV_H5_DEFLATE);
    hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

/* Append n values at row `at` of a column. */
/* The OS's reason behind the HDF5 error on the stack: its file driver quotes it
 * ("... error message = 'No space left on device', ..."). */
static herr_t os_reason(unsigned n, const H5E_error2_t *err, void *data) {
    char *why = data;
    const char *m = err->desc ? strstr(err->desc, "error message = '") : NULL;
    if (m && !*why) {
        m += strlen("error message = '");
        const char *q = strchr(m, '\'');
        snprintf(why, 128, "%.*s", (int)(q ? q - m : (ptrdiff_t)strlen(m)), m);
    }
    return 0;
}

/* The reason of the last failed write, kept from the error stack before the calls
 * that follow clear it (per thread, like errno). */
static _Thread_local char g_reason[128];
static void note_reason(void) {
    g_reason[0] = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, os_reason, g_reason);
}

static herr_t append(hid_t d, hid_t type, hsize_t at, hsize_t n, const void *data) {
    hsize_t size = at + n;
    if (H5Dset_extent(d, &size) < 0) {
        note_reason();
        return -1;
    }
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &n, NULL);
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &n, NULL);
    if (rc >= 0) rc = H5Dwrite(d, type, ms, fs, H5P_DEFAULT, data);
    if (rc < 0) note_reason();
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static herr_t attr_str(hid_t loc, const char *name, const char *v) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, t, &v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    return rc;
}

static herr_t attr_num(hid_t loc, const char *name, hid_t type, const void *v) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Aexists(loc, name) > 0 ? H5Aopen(loc, name, H5P_DEFAULT)
                                       : H5Acreate2(loc, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, type, v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    return rc;
}

static herr_t attr_f64(hid_t loc, const char *name, double v) {
    return attr_num(loc, name, H5T_NATIVE_DOUBLE, &v);
}

static herr_t attr_u64(hid_t loc, const char *name, uint64_t v) {
    return attr_num(loc, name, H5T_NATIVE_UINT64, &v);
}

/* A scalar variable-length string dataset (for texts too large for attributes). */
static herr_t text_dataset(hid_t loc, const char *name, const char *v) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    H5Tclose(t);
    return rc;
}

static herr_t write_attrs(hid_t g, const pkv_attr *a, int n) {
    herr_t rc = 0;
    for (int i = 0; i < n && rc >= 0; i++) {
        switch (a[i].kind) {
        case PKV_ATTR_F64:
            rc = attr_f64(g, a[i].name, a[i].f64);
            break;
        case PKV_ATTR_U64:
            rc = attr_u64(g, a[i].name, a[i].u64);
            break;
        case PKV_ATTR_STR:
            rc = attr_str(g, a[i].name, a[i].str ? a[i].str : "");
            break;
        }
    }
    return rc;
}

static int h5fail(pkv_h5rec *r, pkv_err *e, const char *what) {
    if (!*g_reason) note_reason(); /* the failing call may be the last one made */
    int rc = pkv_fail(e, "%s: HDF5 error while writing %s%s%s", r->path, what,
                      *g_reason ? ": " : "", g_reason);
    g_reason[0] = 0;
    return rc;
}

void pkv_h5_init(void) {
    /* A file whose close failed (a full disk) stays in HDF5's tables, and its exit
     * handler crashes closing it again: the files are closed here, not at exit. */
    H5dont_atexit();
}

/* The group and one dataset per kept column; measured columns only when `measured`,
 * those marked k >= 2 (a fleet's, an engine profile's, ...) only where bit k of `kinds` is
 * set. */
static int table_open(col_table *t, hid_t file, const char *name, const pkv_column *cols,
                      int n_cols, bool measured, unsigned kinds) {
    *t = (col_table){.cols = cols, .n_cols = n_cols};
    for (int c = 0; c < MAX_COLS; c++) t->d[c] = t->t[c] = -1;
    t->g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (t->g < 0) return -1;
    char left_out[512] = "", units[2048] = "";
    for (int c = 0; c < n_cols; c++) {
        if (cols[c].measured >= 2 && !(kinds >> cols[c].measured & 1)) continue;
        if (cols[c].measured == 1 && !measured) {
            if (*left_out) strcat(left_out, ",");
            strcat(left_out, cols[c].name);
            continue;
        }
        t->size[c] = pkv_col_size(cols[c].kind);
        t->t[c] = pkv_h5_col_type(cols[c].kind);
        t->d[c] = make_column(t->g, cols[c].name, t->t[c]);
        t->buf[c] = malloc(t->size[c] * PKV_H5_CHUNK_ROWS);
        if (t->d[c] < 0 || !t->buf[c] || attr_str(t->d[c], "units", cols[c].unit) < 0) return -1;
        snprintf(units + strlen(units), sizeof units - strlen(units), "%s%s", *units ? "," : "",
                 cols[c].name);
    }
    if (attr_str(t->g, "columns", units) < 0 || attr_str(t->g, "columns_left_out", left_out) < 0)
        return -1;
    return 0;
}

static int table_flush(col_table *t) {
    if (t->n == 0) return 0;
    for (int c = 0; c < t->n_cols; c++)
        if (t->d[c] >= 0 && append(t->d[c], t->t[c], t->written, t->n, t->buf[c]) < 0) return -1;
    t->written += t->n;
    t->n = 0;
    return 0;
}

/* Copy one record's kept columns into the buffers; flush a full chunk. */
static int table_add(col_table *t, const void *rec) {
    if (t->n_cols == 0) return 0; /* a table this run does not record */
    const char *p = rec;
    size_t n = t->n;
    for (int c = 0; c < t->n_cols; c++) {
        if (!t->buf[c]) continue;
        const pkv_column *col = &t->cols[c];
        switch (t->size[c]) {
        case 8:
            memcpy(t->buf[c] + n * 8, p + col->offset, 8);
            break;
        case 4:
            memcpy(t->buf[c] + n * 4, p + col->offset, 4);
            break;
        default:
            t->buf[c][n] = p[col->offset];
            break;
        }
    }
    return ++t->n == PKV_H5_CHUNK_ROWS ? table_flush(t) : 0;
}

static void table_close(col_table *t) {
    for (int c = 0; c < t->n_cols; c++) {
        if (t->d[c] >= 0) H5Dclose(t->d[c]);
        if (t->t[c] >= 0) H5Tclose(t->t[c]);
        free(t->buf[c]);
    }
    if (t->g > 0) H5Gclose(t->g);
    t->g = 0;
}

/* The columns of route table k (0: predictions, 1: measured) for the routes in mask. */
static int routes_columns(pkv_h5rec *r, int k, uint32_t mask) {
    int n = 0;
    for (int i = 0; i < PKV_ROUTE_COUNT; i++)
        if (mask >> i & 1)
            r->route_cols[k][n++] = (pkv_column){
                pkv_route_name((pkv_route)i),
                (k ? offsetof(pkv_step_rec, t_route_measured) : offsetof(pkv_step_rec, t_route)) +
                    sizeof(double) * (size_t)i,
                PKV_COL_F64, 0,
                k ? "seconds: device time of the route, measured by the oracle"
                  : "seconds: cost-model prediction of the route"};
    return n;
}

static void close_tables(pkv_h5rec *r) {
    table_close(&r->steps);
    table_close(&r->requests);
    table_close(&r->routes);
    table_close(&r->routes_measured);
    table_close(&r->prefills);
}

int pkv_h5rec_open(pkv_h5rec **out, const char *path, const pkv_h5rec_opts *o, pkv_err *e) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported by us, with the path */
    pkv_h5rec *r = calloc(1, sizeof *r);
    if (!r) return pkv_fail(e, "out of memory");
    r->o = *o;
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->tmp, sizeof r->tmp, "%s.tmp.%ld", path, (long)getpid());
    pkv_remove_stale_tmp(path, stderr);
    pkv_cleanup_add(r->tmp);
    r->file = H5Fcreate(r->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (r->file < 0) {
        unlink(r->tmp); /* a create that failed half-way (out of memory) may leave it */
        pkv_cleanup_drop(r->tmp);
        free(r);
        return pkv_fail(e, "%s: cannot create the output file (is its folder there and writable?)",
                        path);
    }
    int rc = 0;
    const unsigned kinds = (unsigned)o->fleet << 2 | (unsigned)o->engine_host << 3 |
                           (unsigned)o->moe << 4 | (unsigned)o->speculative << 5 |
                           (unsigned)o->proposer << 6;
    if (o->level <= PKV_RECORD_STEPS)
        rc = table_open(&r->steps, r->file, "steps", pkv_step_columns, pkv_step_column_count,
                        o->measured, kinds);
    if (!rc && o->level == PKV_RECORD_FULL) {
        rc = table_open(&r->routes, r->file, "routes", r->route_cols[0],
                        routes_columns(r, 0, o->candidates), true, 0);
        if (!rc && o->routes_measured)
            rc = table_open(&r->routes_measured, r->file, "routes_measured", r->route_cols[1],
                            routes_columns(r, 1, o->candidates), true, 0);
    }
    if (!rc && o->level <= PKV_RECORD_STEPS)
        rc = table_open(&r->prefills, r->file, "prefills", pkv_prefill_columns,
                        pkv_prefill_column_count, o->measured, kinds);
    if (!rc && o->level <= PKV_RECORD_REQUESTS)
        rc = table_open(&r->requests, r->file, "requests", pkv_request_columns,
                        pkv_request_column_count, true, kinds);
    if (rc) {
        pkv_h5rec_close(r, 0, e);
        return pkv_fail(e, "%s: cannot create the tables (out of memory or disk?)", path);
    }
    *out = r;
    return 0;
}

int pkv_h5rec_config(pkv_h5rec *r, const char *verbatim, const char *resolved, pkv_err *e) {
    hid_t g = H5Gcreate2(r->file, "config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : 0;
    if (rc >= 0) rc = text_dataset(g, "experiment", verbatim);
    if (rc >= 0) rc = text_dataset(g, "resolved", resolved);
    if (g >= 0) H5Gclose(g);
    return rc < 0 ? h5fail(r, e, "/config") : 0;
}

int pkv_h5rec_group(pkv_h5rec *r, const char *name, const char *file_text, const pkv_attr *a, int n,
                    pkv_err *e) {
    hid_t g = H5Gcreate2(r->file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : 0;
    if (rc >= 0) rc = text_dataset(g, "file", file_text ? file_text : "");
    if (rc >= 0) rc = write_attrs(g, a, n);
    if (g >= 0) H5Gclose(g);
    return rc < 0 ? h5fail(r, e, name) : 0;
}

int pkv_h5rec_provenance(pkv_h5rec *r, const pkv_provenance *p, pkv_err *e) {
    char host[256] = "unknown", when[64];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    hid_t g = H5Gcreate2(r->file, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : 0;
    if (rc >= 0) rc = attr_str(g, "pkvsim_version", PKV_VERSION);
    if (rc >= 0) rc = attr_str(g, "git_revision", PKV_GIT_REV);
    if (rc >= 0) rc = attr_str(g, "host", host);
    if (rc >= 0) rc = attr_str(g, "gpu", p->gpu);
    if (rc >= 0) rc = attr_str(g, "backend", p->backend);
    if (rc >= 0) rc = attr_str(g, "command_line", p->command_line);
    if (rc >= 0) rc = attr_str(g, "start_time", when);
    if (rc >= 0) rc = attr_u64(g, "seed", p->seed);
    if (rc >= 0 && p->prefill_attention)
        rc = attr_str(g, "prefill_attention", p->prefill_attention);
    if (rc >= 0 && p->layers_measured > 0)
        rc = attr_u64(g, "layers_measured", (uint64_t)p->layers_measured);
    if (rc >= 0) rc = attr_u64(g, "cuda_graph", p->cuda_graph);
    if (rc >= 0) rc = attr_u64(g, "interrupted", 0);
    if (rc >= 0 && p->sweep_point) rc = attr_str(g, "sweep_point", p->sweep_point);
    if (g >= 0) H5Gclose(g);
    return rc < 0 ? h5fail(r, e, "/provenance") : 0;
}

int pkv_h5rec_step(pkv_h5rec *r, const pkv_step_rec *s, pkv_err *e) {
    if (r->o.level > PKV_RECORD_STEPS) return 0;
    if (table_add(&r->steps, s) || table_add(&r->routes, s) || table_add(&r->routes_measured, s))
        return h5fail(r, e, "/steps");
    return 0;
}

int pkv_h5rec_prefill(pkv_h5rec *r, const pkv_prefill_rec *p, pkv_err *e) {
    if (r->o.level > PKV_RECORD_STEPS) return 0;
    return table_add(&r->prefills, p) ? h5fail(r, e, "/prefills") : 0;
}

int pkv_h5rec_request(pkv_h5rec *r, const pkv_request_rec *q, pkv_err *e) {
    if (r->o.level > PKV_RECORD_REQUESTS) return 0;
    return table_add(&r->requests, q) ? h5fail(r, e, "/requests") : 0;
}

/* A family row's attributes (summary.h). */
static herr_t summary_family(hid_t g, const pkv_summary *s, const pkv_summary_figure *f) {
    herr_t rc = 0;
    char n[96];
    switch (f->type) {
    case PKV_FIGURE_PCTS: { /* seconds, as vLLM's figures (its are ms) */
        const pkv_latency *l = (const pkv_latency *)((const char *)s + f->offset);
        for (int k = 0; k < s->n_pcts && rc >= 0; k++) {
            snprintf(n, sizeof n, "p%g_%s", s->pcts[k], f->name);
            rc = attr_f64(g, n, l->pct[k]);
        }
        return rc;
    }
    case PKV_FIGURE_BY_CLASS:
        for (int k = 0; k < s->n_classes && rc >= 0; k++) {
            snprintf(n, sizeof n, "finished_%s", s->class_names[k]);
            rc = attr_u64(g, n, s->class_finished[k]);
            snprintf(n, sizeof n, "good_%s", s->class_names[k]);
            if (rc >= 0) rc = attr_u64(g, n, s->class_good[k]);
            snprintf(n, sizeof n, "slo_attainment_%s", s->class_names[k]);
            if (rc >= 0)
                rc = attr_f64(g, n,
                              s->class_finished[k]
                                  ? (double)s->class_good[k] / (double)s->class_finished[k]
                                  : NAN);
        }
        return rc;
    case PKV_FIGURE_BY_ROUTE:
        for (int i = 0; i < PKV_ROUTE_COUNT && rc >= 0; i++) {
            snprintf(n, sizeof n, "%s%s", f->name, pkv_route_name((pkv_route)i));
            rc = attr_u64(g, n, s->route_steps[i]);
        }
        return rc;
    default:
        return -1;
    }
}

int pkv_h5rec_rows(pkv_h5rec *r, const char *name, const pkv_column *cols, int n_cols,
                   const void *rows, size_t row_bytes, size_t n, pkv_err *e) {
    col_table t;
    int rc = table_open(&t, r->file, name, cols, n_cols, false, 1u << 2);
    for (size_t i = 0; i < n && !rc; i++) rc = table_add(&t, (const char *)rows + i * row_bytes);
    if (!rc) rc = table_flush(&t);
    table_close(&t);
    return rc ? h5fail(r, e, name) : 0;
}

int pkv_h5rec_summary(pkv_h5rec *r, const pkv_summary *s, pkv_err *e) {
    hid_t g = H5Gcreate2(r->file, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : 0;
    for (int i = 0; i < pkv_summary_n_figures && rc >= 0; i++) {
        const pkv_summary_figure *f = &pkv_summary_figures[i];
        switch (f->type) {
        case PKV_FIGURE_F64:
            rc = attr_f64(g, f->name, pkv_summary_figure_value(s, f));
            break;
        case PKV_FIGURE_U64:
            rc = attr_u64(g, f->name, *(const uint64_t *)((const char *)s + f->offset));
            break;
        case PKV_FIGURE_INT:
            rc = attr_u64(g, f->name, (uint64_t) * (const int *)((const char *)s + f->offset));
            break;
        default:
            rc = summary_family(g, s, f);
        }
    }
    if (g >= 0) H5Gclose(g);
    if (rc >= 0 && s->interrupted) {
        hid_t p = H5Gopen2(r->file, "provenance", H5P_DEFAULT);
        rc = p < 0 ? -1 : attr_u64(p, "interrupted", 1);
        if (p >= 0) H5Gclose(p);
    }
    return rc < 0 ? h5fail(r, e, "/summary") : 0;
}

int pkv_h5rec_close(pkv_h5rec *r, int commit, pkv_err *e) {
    int rc = 0;
    if (commit &&
        (table_flush(&r->steps) || table_flush(&r->routes) || table_flush(&r->routes_measured) ||
         table_flush(&r->requests) || table_flush(&r->prefills)))
        rc = h5fail(r, e, "the tables");
    close_tables(r);
    if (H5Fclose(r->file) < 0 && commit && rc == 0) rc = h5fail(r, e, "the file");
    if (commit && rc == 0 && rename(r->tmp, r->path) != 0)
        rc = pkv_fail(e, "%s: cannot move the finished file into place", r->path);
    if (!commit || rc != 0) unlink(r->tmp);
    pkv_cleanup_drop(r->tmp);
    free(r);
    return rc;
}
