#include "h5sweep.h"
#include "pkv_files.h"
#include "h5types.h"
#include "summary.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The summary figures the index carries for each point (attributes of /summary): the
 * summary table's rows marked `index`, each with its unit as an attribute. */
static int index_figures(const pkv_summary_figure **out) {
    int n = 0;
    for (int i = 0; i < pkv_summary_n_figures; i++)
        if (pkv_summary_figures[i].index) out[n++] = &pkv_summary_figures[i];
    return n;
}

static hid_t str_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

/* A 1-D dataset of n values of type t (or a scalar when scalar). */
static herr_t put(hid_t loc, const char *name, hid_t t, size_t n, const void *v, int scalar) {
    hsize_t dim = n;
    hid_t s = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
    hid_t d = H5Dcreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : n ? H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) : 0;
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    return rc;
}

/* The attribute "unit" of dataset name in loc (a string of type t). */
static herr_t unit_attr(hid_t loc, const char *name, hid_t t, const char *unit) {
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT), s = H5Screate(H5S_SCALAR);
    hid_t a = d < 0 ? -1 : H5Acreate2(d, "unit", t, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, t, &unit);
    if (a >= 0) H5Aclose(a);
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    return rc;
}

typedef struct copy_ctx {
    hid_t dst;
    herr_t rc;
} copy_ctx;

/* H5Literate's callback type changed in HDF5 1.12. */
#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t link_info;
#else
typedef H5L_info_t link_info;
#endif

static herr_t copy_link(hid_t g, const char *name, const link_info *info, void *op) {
    copy_ctx *c = op;
    (void)info;
    if (H5Ocopy(g, name, c->dst, name, H5P_DEFAULT, H5P_DEFAULT) < 0) c->rc = -1;
    return c->rc < 0 ? -1 : 0;
}

/* Copy a point's run (every object of src_group) into a new group dst_name. */
static herr_t copy_point(hid_t out, const char *dst_name, const pkv_h5sweep_point *p) {
    hid_t f = H5Fopen(p->src_file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    hid_t src = H5Gopen2(f, p->src_group, H5P_DEFAULT);
    hid_t dst = H5Gcreate2(out, dst_name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    copy_ctx c = {dst, src < 0 || dst < 0 ? -1 : 0};
    if (c.rc >= 0) H5Literate(src, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_link, &c);
    if (dst >= 0) H5Gclose(dst);
    if (src >= 0) H5Gclose(src);
    H5Fclose(f);
    return c.rc;
}

static double figure(hid_t out, const char *point_group, const char *name) {
    char p[64];
    snprintf(p, sizeof p, "%s/summary", point_group);
    double v = NAN;
    if (H5Lexists(out, p, H5P_DEFAULT) <= 0) return v;
    hid_t g = H5Gopen2(out, p, H5P_DEFAULT);
    if (g >= 0 && H5Aexists(g, name) > 0) {
        hid_t a = H5Aopen(g, name, H5P_DEFAULT);
        if (a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) v = NAN;
        if (a >= 0) H5Aclose(a);
    }
    if (g >= 0) H5Gclose(g);
    return v;
}

int pkv_h5sweep_figures(const char *file, const char *group, int n, const char *const *names,
                        double *out) {
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    const char *g = strcmp(group, "/") ? group : ""; /* "/summary", not "//summary" */
    for (int i = 0; i < n; i++) out[i] = figure(f, g, names[i]);
    H5Fclose(f);
    return 0;
}

static int numeric(const char *json) {
    char *end;
    strtod(json, &end);
    return *json && !*end;
}

/* An upper bound of the sweep file's size: its sources (each file once; an object copy
 * keeps the chunks as they are, and the copies' metadata took at most 4 KiB a point
 * more than the sources in every sweep measured) and the index. */
static uint64_t size_bound(const pkv_h5sweep_point *pts, size_t n_points, int n_axes) {
    uint64_t b = 65536 + (uint64_t)n_points * (uint64_t)(n_axes + pkv_summary_n_figures + 3) * 64;
    int earlier_counted = 0; /* the earlier sweep file: once */
    for (size_t i = 0; i < n_points; i++) {
        struct stat st;
        int earlier = pts[i].src_file && strcmp(pts[i].src_group, "/") != 0;
        if (!pts[i].src_file || (earlier && earlier_counted)) continue;
        earlier_counted |= earlier;
        if (stat(pts[i].src_file, &st) == 0)
            b += (uint64_t)st.st_size + (uint64_t)st.st_size / 32 + 8192;
    }
    return b;
}

int pkv_h5sweep_write(const char *path, const char *experiment, const char *mode, int n_axes,
                      const char *const *axis_paths, size_t n_points, const pkv_h5sweep_point *pts,
                      const char *const *values, pkv_err *e) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    pkv_remove_stale_tmp(path, stderr);
    pkv_cleanup_add(tmp);
    hid_t out = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (out < 0) {
        pkv_cleanup_drop(tmp);
        return pkv_fail(e, "%s: cannot create the sweep file", path);
    }
    if (pkv_reserve(tmp, path, size_bound(pts, n_points, n_axes), e)) {
        H5Fclose(out);
        unlink(tmp);
        pkv_cleanup_drop(tmp);
        return -1;
    }
    hid_t st = str_type();
    hid_t sw = H5Gcreate2(out, "sweep", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t pg = H5Gcreate2(out, "points", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t ix = sw < 0 ? -1 : H5Gcreate2(sw, "index", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = sw < 0 || pg < 0 || ix < 0 ? -1 : 0;
    if (rc >= 0) rc = put(sw, "experiment", st, 1, &experiment, 1);
    if (rc >= 0) rc = put(sw, "mode", st, 1, &mode, 1);
    if (rc >= 0) rc = put(sw, "axes", st, (size_t)n_axes, axis_paths, 0);
    const pkv_summary_figure *figures[pkv_summary_n_figures];
    const int N_FIG = index_figures(figures);
    double *fig = calloc(n_points * N_FIG + 1, sizeof *fig);
    double *num = calloc(n_points + 1, sizeof *num);
    unsigned long long *id = calloc(n_points + 1, sizeof *id);
    const char **txt = calloc(n_points + 1, sizeof *txt);
    if (!fig || !num || !id || !txt) rc = -1;
    const char *bad = NULL; /* a point whose run could not be copied */
    for (size_t i = 0; i < n_points && rc >= 0; i++) {
        char g[32];
        snprintf(g, sizeof g, "/points/%05zu", i);
        id[i] = i;
        if (pts[i].src_file && copy_point(out, g, &pts[i]) < 0) {
            bad = pts[i].src_file;
            rc = -1;
        }
        for (int k = 0; k < N_FIG; k++)
            fig[k * n_points + i] = pts[i].src_file ? figure(out, g, figures[k]->name) : NAN;
    }
    if (rc >= 0) rc = put(ix, "point", H5T_NATIVE_ULLONG, n_points, id, 0);
    for (size_t i = 0; i < n_points && txt; i++) txt[i] = pts[i].status;
    if (rc >= 0) rc = put(ix, "status", st, n_points, txt, 0);
    for (size_t i = 0; i < n_points && txt; i++) txt[i] = pts[i].error ? pts[i].error : "";
    if (rc >= 0) rc = put(ix, "error", st, n_points, txt, 0);
    for (int a = 0; a < n_axes && rc >= 0; a++) {
        int all_num = 1;
        for (size_t i = 0; i < n_points; i++) all_num &= numeric(values[i * n_axes + a]);
        for (size_t i = 0; i < n_points; i++) {
            num[i] = all_num ? strtod(values[i * n_axes + a], NULL) : 0;
            txt[i] = values[i * n_axes + a];
        }
        rc = all_num ? put(ix, axis_paths[a], H5T_NATIVE_DOUBLE, n_points, num, 0)
                     : put(ix, axis_paths[a], st, n_points, txt, 0);
    }
    for (int k = 0; k < N_FIG && rc >= 0; k++) {
        rc = put(ix, figures[k]->name, H5T_NATIVE_DOUBLE, n_points, fig + k * n_points, 0);
        if (rc >= 0) rc = unit_attr(ix, figures[k]->name, st, figures[k]->unit);
    }
    free(fig), free(num), free(id), free(txt);
    if (ix >= 0) H5Gclose(ix);
    if (sw >= 0) H5Gclose(sw);
    if (pg >= 0) H5Gclose(pg);
    H5Tclose(st);
    if (H5Fclose(out) < 0) rc = -1;
    pkv_reserve_end(tmp);
    pkv_cleanup_drop(tmp);
    if (rc >= 0 && rename(tmp, path) != 0) {
        unlink(tmp);
        return pkv_fail(e, "%s: cannot move the sweep file into place", path);
    }
    if (rc < 0) {
        unlink(tmp);
        return bad ? pkv_fail(e, "%s: cannot copy a point's run from %s", path, bad)
                   : pkv_fail(e, "%s: cannot write the sweep file (disk full?)", path);
    }
    return 0;
}

/* A variable-length string dataset's values (n of them) into new strings. */
static int get_strings(hid_t loc, const char *name, size_t *n, char ***out) {
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t s = H5Dget_space(d);
    hssize_t cnt = H5Sget_simple_extent_npoints(s);
    hid_t t = str_type();
    char **raw = cnt > 0 ? calloc((size_t)cnt, sizeof *raw) : NULL;
    int rc = cnt < 0 || (cnt > 0 && !raw) ? -1 : 0;
    if (!rc && cnt > 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0) rc = -1;
    char **copy = rc || cnt == 0 ? NULL : calloc((size_t)cnt, sizeof *copy);
    for (hssize_t i = 0; copy && i < cnt; i++) copy[i] = strdup(raw[i] ? raw[i] : "");
    if (!rc && cnt > 0) H5Dvlen_reclaim(t, s, H5P_DEFAULT, raw);
    free(raw);
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);
    if (rc || (cnt > 0 && !copy)) return -1;
    *n = (size_t)cnt;
    *out = copy;
    return 0;
}

int pkv_h5sweep_read(const char *path, char **experiment, size_t *n_points, char ***status,
                     char ***keys, pkv_err *e) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    *experiment = NULL, *n_points = 0, *status = NULL, *keys = NULL;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return pkv_fail(e, "%s: exists but is not an HDF5 file", path);
    size_t n1 = 0;
    char **exp = NULL;
    int rc = get_strings(f, "/sweep/experiment", &n1, &exp);
    if (!rc && n1 == 1) rc = get_strings(f, "/sweep/index/status", n_points, status);
    if (!rc && n1 == 1 && !(*keys = calloc(*n_points + 1, sizeof **keys))) rc = -1;
    for (size_t i = 0; !rc && n1 == 1 && i < *n_points; i++) {
        char g[64];
        snprintf(g, sizeof g, "/points/%05zu/provenance", i);
        if (!strcmp((*status)[i], "done"))
            pkv_h5_text(f, g, 1, "sweep_point", &(*keys)[i]); /* NULL where absent */
    }
    H5Fclose(f);
    if (rc || n1 != 1) {
        for (size_t i = 0; exp && i < n1; i++) free(exp[i]);
        free(exp);
        pkv_h5sweep_free_read(NULL, *n_points, *status, *keys);
        *n_points = 0, *status = NULL, *keys = NULL;
        return pkv_fail(e, "%s: exists but is not a sweep file", path);
    }
    *experiment = exp[0];
    free(exp);
    return 0;
}

void pkv_h5sweep_free_read(char *experiment, size_t n_points, char **status, char **keys) {
    free(experiment);
    for (size_t i = 0; i < n_points; i++) {
        if (status) free(status[i]);
        if (keys) free(keys[i]);
    }
    free(status);
    free(keys);
}

int pkv_h5sweep_point_key(const char *file, char **key) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    *key = NULL;
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    int rc = pkv_h5_text(f, "/provenance", 1, "sweep_point", key) ? 0 : 1;
    H5Fclose(f);
    return rc;
}
