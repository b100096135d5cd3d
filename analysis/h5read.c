/* Reading the column tables back (tests and tools). */
#include "h5rec.h"
#include "h5types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A column's rows: its length where it is a 1-D dataset, else -1. */
static int64_t column_rows(hid_t d) {
    hid_t s = d < 0 ? -1 : H5Dget_space(d);
    hsize_t n = 0;
    int ok =
        s >= 0 && H5Sget_simple_extent_ndims(s) == 1 && H5Sget_simple_extent_dims(s, &n, NULL) == 1;
    if (s >= 0) H5Sclose(s);
    return ok ? (int64_t)n : -1;
}

/* Rows of the group's first kept column; 0 when it has none, -1 when that one is not
 * a column. */
static int64_t table_rows(hid_t g, const pkv_column *cols, int n_cols) {
    for (int c = 0; c < n_cols; c++) {
        if (H5Lexists(g, cols[c].name, H5P_DEFAULT) <= 0) continue;
        hid_t d = H5Dopen2(g, cols[c].name, H5P_DEFAULT);
        const int64_t n = column_rows(d);
        if (d >= 0) H5Dclose(d);
        return n;
    }
    return 0;
}

/* The table `table` of the run in group ("": the root) into *out. */
static int read_table(const char *path, const char *group, const char *table,
                      const pkv_column *cols, int n_cols, size_t rec_size, void **out, size_t *n,
                      pkv_err *e) {
    char name[96];
    snprintf(name, sizeof name, "%s%s%s", group, *group ? "/" : "", table);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return pkv_fail(e, "%s: not a readable HDF5 file", path);
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Fclose(f);
        return pkv_fail(e, "%s: no /%s (recorded at a lower run.record level?)", path, name);
    }
    hid_t g = H5Gopen2(f, name, H5P_DEFAULT);
    const int64_t rows = g < 0 ? -1 : table_rows(g, cols, n_cols);
    if (rows < 0) {
        if (g >= 0) H5Gclose(g);
        H5Fclose(f);
        return pkv_fail(e, "%s: /%s is not a table of columns (not a pkvsim output?)", path, name);
    }
    char *recs = calloc(rows ? (size_t)rows : 1, rec_size);
    char *col = malloc((rows ? (size_t)rows : 1) * 8);
    int rc = recs && col ? 0 : pkv_fail(e, "out of memory reading %s", path);
    for (int c = 0; c < n_cols && rc == 0; c++) {
        size_t sz = pkv_col_size(cols[c].kind);
        if (H5Lexists(g, cols[c].name, H5P_DEFAULT) <= 0) {
            /* Left out: NaN for a measurement, zero otherwise (calloc). */
            if (cols[c].kind == PKV_COL_F64)
                for (int64_t i = 0; i < rows; i++) {
                    double nan = NAN;
                    memcpy(recs + (size_t)i * rec_size + cols[c].offset, &nan, 8);
                }
            continue;
        }
        hid_t d = H5Dopen2(g, cols[c].name, H5P_DEFAULT), t = pkv_h5_col_type(cols[c].kind);
        const int64_t here = column_rows(d);
        if (here != rows)
            rc = pkv_fail(e, "%s: /%s/%s: %s, where the table has %lld rows (not a pkvsim output?)",
                          path, name, cols[c].name, here < 0 ? "not a column" : "another length",
                          (long long)rows);
        else if (rows > 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, col) < 0)
            rc = pkv_fail(e, "%s: cannot read /%s/%s", path, name, cols[c].name);
        for (int64_t i = 0; i < rows && rc == 0; i++)
            memcpy(recs + (size_t)i * rec_size + cols[c].offset, col + (size_t)i * sz, sz);
        H5Tclose(t);
        if (d >= 0) H5Dclose(d);
    }
    free(col);
    H5Gclose(g);
    H5Fclose(f);
    if (rc) {
        free(recs);
        return -1;
    }
    *out = recs;
    *n = (size_t)rows;
    return 0;
}

int pkv_h5_read_steps(const char *path, pkv_step_rec **out, size_t *n, pkv_err *e) {
    return pkv_h5_read_steps_at(path, "", out, n, e);
}

int pkv_h5_read_steps_at(const char *path, const char *group, pkv_step_rec **out, size_t *n,
                         pkv_err *e) {
    void *p;
    if (read_table(path, group, "steps", pkv_step_columns, pkv_step_column_count, sizeof **out, &p,
                   n, e))
        return -1;
    *out = p;
    /* Per-candidate times live in /routes; the step rows alone leave them NaN. */
    for (size_t i = 0; i < *n; i++)
        for (int k = 0; k < PKV_ROUTE_COUNT; k++)
            (*out)[i].t_route[k] = (*out)[i].t_route_measured[k] = NAN;
    return 0;
}

/* pkv_h5_read_NAME_at: group/NAME's rows as pkv_KIND_rec records (read_table). */
#define PKV_H5_READER(NAME, KIND)                                                                  \
    int pkv_h5_read_##NAME##_at(const char *path, const char *group, pkv_##KIND##_rec **out,       \
                                size_t *n, pkv_err *e) {                                           \
        void *p;                                                                                   \
        if (read_table(path, group, #NAME, pkv_##KIND##_columns, pkv_##KIND##_column_count,        \
                       sizeof **out, &p, n, e))                                                    \
            return -1;                                                                             \
        *out = p;                                                                                  \
        return 0;                                                                                  \
    }
PKV_H5_READER(prefills, prefill)
PKV_H5_READER(requests, request)
PKV_H5_READER(replicas, replica)

int pkv_h5_runs(const char *path, char (**groups)[32], int *n, pkv_err *e) {
    *groups = NULL, *n = 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return pkv_fail(e, "%s: not a readable HDF5 file", path);
    int rc = 0;
    if (H5Lexists(f, "sweep", H5P_DEFAULT) > 0 && H5Lexists(f, "points", H5P_DEFAULT) > 0) {
        hid_t g = H5Gopen2(f, "points", H5P_DEFAULT);
        H5G_info_t info;
        if (g < 0 || H5Gget_info(g, &info) < 0 ||
            !(*groups = calloc(info.nlinks ? info.nlinks : 1, sizeof **groups)))
            rc = pkv_fail(e, "%s: unreadable /points", path);
        for (hsize_t i = 0; !rc && i < info.nlinks; i++) {
            char name[24];
            if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                   H5P_DEFAULT) < 0)
                rc = pkv_fail(e, "%s: unreadable /points", path);
            else
                snprintf((*groups)[(*n)++], 32, "points/%s", name);
        }
        if (g >= 0) H5Gclose(g);
    } else if (!(*groups = calloc(1, sizeof **groups))) {
        rc = pkv_fail(e, "out of memory");
    } else {
        *n = 1; /* the file's root: "" */
    }
    H5Fclose(f);
    if (rc) free(*groups), *groups = NULL, *n = 0;
    return rc;
}

int pkv_h5_read_requests(const char *path, pkv_request_rec **out, size_t *n, pkv_err *e) {
    return pkv_h5_read_requests_at(path, "", out, n, e);
}

int pkv_h5_text(hid_t f, const char *path, int attribute, const char *attr, char **out) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8); /* as written: HDF5 converts no character sets */
    char *s = NULL;
    int rc = -1;
    if (attribute) {
        hid_t a = H5Aopen_by_name(f, path, attr, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            rc = H5Aread(a, t, &s) < 0 ? -1 : 0;
            H5Aclose(a);
        }
    } else {
        hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
        if (d >= 0) {
            rc = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s) < 0 ? -1 : 0;
            H5Dclose(d);
        }
    }
    H5Tclose(t);
    if (rc == 0 && s) {
        *out = strdup(s);
        H5free_memory(s);
    }
    return rc == 0 && *out ? 0 : -1;
}

int pkv_h5_read_text(const char *path, const char *dataset, char **out, pkv_err *e) {
    *out = NULL;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return pkv_fail(e, "%s: not a readable HDF5 file", path);
    int rc = pkv_h5_text(f, dataset, 0, NULL, out);
    H5Fclose(f);
    return rc ? pkv_fail(e, "%s: no /%s (not a pkvsim output)", path, dataset) : 0;
}
