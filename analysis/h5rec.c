#include "pkv_gitrev.h"
#include "h5rec.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { STEP_CHUNK = 4096, REQ_CHUNK = 4096 };

struct pkv_h5rec {
    hid_t file, steps, routes, routes_measured, step_type;
    char path[1024], tmp[1100];
    pkv_step_rec buf[STEP_CHUNK];
    double rbuf[STEP_CHUNK][PKVK_ROUTE_COUNT];
    double mbuf[STEP_CHUNK][PKVK_ROUTE_COUNT];
    size_t nbuf;
    hsize_t nsteps; /* rows written to the file */
};

static hid_t route_enum(void) {
    hid_t t = H5Tenum_create(H5T_NATIVE_UINT8);
    for (int r = 0; r < PKVK_ROUTE_COUNT; r++) {
        uint8_t v = (uint8_t)r;
        H5Tenum_insert(t, pkvk_route_name((pkvk_route)r), &v);
    }
    return t;
}

int64_t pkv_h5_step_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(pkv_step_rec)), re = route_enum();
#define F(name, type) H5Tinsert(t, #name, HOFFSET(pkv_step_rec, name), type)
    F(index, H5T_NATIVE_UINT64);
    F(t_sim, H5T_NATIVE_DOUBLE);
    F(rows, H5T_NATIVE_UINT32);
    F(context_tokens, H5T_NATIVE_UINT64);
    F(route, re);
    F(warmup, H5T_NATIVE_UINT8);
    F(splits, H5T_NATIVE_UINT32);
    F(launches, H5T_NATIVE_UINT32);
    F(merge_launches, H5T_NATIVE_UINT32);
    F(tasks, H5T_NATIVE_UINT32);
    F(ctas, H5T_NATIVE_UINT64);
    F(cta_work_per_sm, H5T_NATIVE_DOUBLE);
    F(kv_bytes, H5T_NATIVE_UINT64);
    F(merge_bytes, H5T_NATIVE_UINT64);
    F(t_predicted, H5T_NATIVE_DOUBLE);
    F(t_device, H5T_NATIVE_DOUBLE);
    F(t_wall, H5T_NATIVE_DOUBLE);
    F(max_err, H5T_NATIVE_DOUBLE);
    F(mean_err, H5T_NATIVE_DOUBLE);
    F(out_mean_abs, H5T_NATIVE_DOUBLE);
    F(t_mlp, H5T_NATIVE_DOUBLE);
    F(t_meta, H5T_NATIVE_DOUBLE);
#undef F
    H5Tclose(re);
    return t;
}

int64_t pkv_h5_request_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(pkv_request_rec));
#define F(name, type) H5Tinsert(t, #name, HOFFSET(pkv_request_rec, name), type)
    F(id, H5T_NATIVE_INT64);
    F(t_arrival, H5T_NATIVE_DOUBLE);
    F(t_admitted, H5T_NATIVE_DOUBLE);
    F(t_first_token, H5T_NATIVE_DOUBLE);
    F(t_finish, H5T_NATIVE_DOUBLE);
    F(prompt_len, H5T_NATIVE_INT32);
    F(decode_len, H5T_NATIVE_INT32);
    F(generated, H5T_NATIVE_INT32);
    F(preemptions, H5T_NATIVE_INT32);
    F(state, H5T_NATIVE_UINT8);
#undef F
    return t;
}

/* A chunked, shuffled and deflated dataset of `rank` dims, the first unlimited. */
static hid_t make_table(hid_t loc, const char *name, hid_t type, int rank, hsize_t cols,
                        hsize_t chunk) {
    hsize_t dims[2] = {0, cols}, maxd[2] = {H5S_UNLIMITED, cols}, ch[2] = {chunk, cols};
    hid_t space = H5Screate_simple(rank, dims, maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank, ch);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 4);
    hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

static herr_t append(hid_t d, hid_t type, hsize_t at, hsize_t n, int rank, hsize_t cols,
                     const void *data) {
    hsize_t size[2] = {at + n, cols}, start[2] = {at, 0}, count[2] = {n, cols};
    if (H5Dset_extent(d, size) < 0) return -1;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, count, NULL);
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (rc >= 0) rc = H5Dwrite(d, type, ms, fs, H5P_DEFAULT, data);
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

static int h5fail(pkv_h5rec *r, pkv_err *e, const char *what) {
    return pkv_fail(e, "%s: HDF5 error while writing %s", r->path, what);
}

int pkv_h5rec_open(pkv_h5rec **out, const char *path, pkv_err *e) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported by us, with the path */
    pkv_h5rec *r = calloc(1, sizeof *r);
    if (!r) return pkv_fail(e, "out of memory");
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->tmp, sizeof r->tmp, "%s.tmp.%ld", path, (long)getpid());
    r->file = H5Fcreate(r->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (r->file < 0) {
        free(r);
        return pkv_fail(e, "%s: cannot create the output file (is its folder there and writable?)",
                        path);
    }
    r->step_type = (hid_t)pkv_h5_step_type();
    r->steps = make_table(r->file, "steps", r->step_type, 1, 1, STEP_CHUNK);
    r->routes = make_table(r->file, "routes", H5T_NATIVE_DOUBLE, 2, PKVK_ROUTE_COUNT, STEP_CHUNK);
    r->routes_measured =
        make_table(r->file, "routes_measured", H5T_NATIVE_DOUBLE, 2, PKVK_ROUTE_COUNT, STEP_CHUNK);
    char names[256] = "";
    for (int i = 0; i < PKVK_ROUTE_COUNT; i++) {
        strcat(names, pkvk_route_name((pkvk_route)i));
        if (i + 1 < PKVK_ROUTE_COUNT) strcat(names, ",");
    }
    if (r->steps < 0 || r->routes < 0 || r->routes_measured < 0 ||
        attr_str(r->routes, "columns", names) < 0 ||
        attr_str(r->routes_measured, "columns", names) < 0 ||
        attr_str(r->routes_measured, "units",
                 "seconds (device time of each route, measured by the oracle on a GPU; NaN "
                 "otherwise)") < 0 ||
        attr_str(r->routes, "units", "seconds (cost-model prediction; NaN: not planned)") < 0 ||
        attr_str(r->steps, "units",
                 "t_*: seconds; kv_bytes, merge_bytes: bytes; NaN: not measured") < 0) {
        pkv_h5rec_close(r, 0, e);
        return pkv_fail(e, "%s: cannot create the step tables", path);
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

int pkv_h5rec_calibration(pkv_h5rec *r, const pkv_calib *c, pkv_err *e) {
    hid_t g = H5Gcreate2(r->file, "calibration", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : 0;
    if (rc >= 0) rc = text_dataset(g, "file", c->json ? c->json : "");
    if (rc >= 0) rc = attr_str(g, "gpu_name", c->gpu_name);
    if (rc >= 0) rc = attr_u64(g, "placeholder", c->placeholder);
    if (rc >= 0) rc = attr_f64(g, "beta_bytes_per_s", c->beta);
    if (rc >= 0) rc = attr_f64(g, "lambda_s", c->lambda);
    if (rc >= 0) rc = attr_f64(g, "c_min", c->c_min);
    if (rc >= 0) rc = attr_u64(g, "sm_count", (uint64_t)c->sm_count);
    if (rc >= 0) rc = attr_u64(g, "gqa_group", (uint64_t)c->gqa_group);
    if (rc >= 0) rc = attr_u64(g, "min_context_tokens", (uint64_t)c->min_context);
    if (rc >= 0) rc = attr_f64(g, "margin_small", c->margin_small);
    if (rc >= 0) rc = attr_u64(g, "margin_small_rows", (uint64_t)c->margin_small_rows);
    if (rc >= 0) rc = attr_f64(g, "margin_large", c->margin_large);
    if (rc >= 0) rc = attr_u64(g, "min_split_tiles", (uint64_t)c->min_split_tiles);
    if (rc >= 0) rc = attr_u64(g, "resident_ctas_per_sm", (uint64_t)c->resident_ctas_per_sm);
    if (rc >= 0)
        rc = attr_u64(g, "flashinfer_decode_ctas_per_sm",
                      (uint64_t)c->flashinfer_decode_ctas_per_sm);
    if (rc >= 0) rc = attr_f64(g, "wave_balance_min", c->wave_balance_min);
    for (int k = 0; k < PKVK_ROUTE_COUNT && rc >= 0; k++) {
        char name[64];
        snprintf(name, sizeof name, "route_scale_%s", pkvk_route_name((pkvk_route)k));
        rc = attr_f64(g, name, c->route_scale[k]);
    }
    if (g >= 0) H5Gclose(g);
    return rc < 0 ? h5fail(r, e, "/calibration") : 0;
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
    if (rc >= 0) rc = attr_u64(g, "interrupted", 0);
    if (g >= 0) H5Gclose(g);
    return rc < 0 ? h5fail(r, e, "/provenance") : 0;
}

static int flush_steps(pkv_h5rec *r, pkv_err *e) {
    if (r->nbuf == 0) return 0;
    if (append(r->steps, r->step_type, r->nsteps, r->nbuf, 1, 1, r->buf) < 0 ||
        append(r->routes, H5T_NATIVE_DOUBLE, r->nsteps, r->nbuf, 2, PKVK_ROUTE_COUNT, r->rbuf) <
            0 ||
        append(r->routes_measured, H5T_NATIVE_DOUBLE, r->nsteps, r->nbuf, 2, PKVK_ROUTE_COUNT,
               r->mbuf) < 0)
        return h5fail(r, e, "/steps");
    r->nsteps += r->nbuf;
    r->nbuf = 0;
    return 0;
}

int pkv_h5rec_step(pkv_h5rec *r, const pkv_step_rec *s, pkv_err *e) {
    r->buf[r->nbuf] = *s;
    memcpy(r->rbuf[r->nbuf], s->t_route, sizeof s->t_route);
    memcpy(r->mbuf[r->nbuf], s->t_route_measured, sizeof s->t_route_measured);
    return ++r->nbuf == STEP_CHUNK ? flush_steps(r, e) : 0;
}

int pkv_h5rec_requests(pkv_h5rec *r, const pkv_request_rec *q, size_t n, pkv_err *e) {
    hid_t t = (hid_t)pkv_h5_request_type();
    hid_t d = make_table(r->file, "requests", t, 1, 1, REQ_CHUNK);
    herr_t rc = d < 0 ? -1 : n ? append(d, t, 0, n, 1, 1, q) : 0;
    if (rc >= 0)
        rc = attr_str(d, "units",
                      "t_*: seconds of simulated time; NaN: not reached; "
                      "state: 0 waiting, 1 prefill, 2 running, 3 finished");
    if (d >= 0) H5Dclose(d);
    H5Tclose(t);
    return rc < 0 ? h5fail(r, e, "/requests") : 0;
}

int pkv_h5rec_summary(pkv_h5rec *r, const pkv_summary *s, pkv_err *e) {
    hid_t g = H5Gcreate2(r->file, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : 0;
#define U(name)                                                                                    \
    if (rc >= 0) rc = attr_u64(g, #name, s->name)
#define D(name)                                                                                    \
    if (rc >= 0) rc = attr_f64(g, #name, s->name)
    U(steps);
    U(steps_measured);
    U(decode_tokens);
    U(arrived);
    U(finished);
    U(preemptions);
    D(decode_tok_s);
    D(decode_tok_s_wall);
    D(decode_tok_s_device);
    D(mean_rows);
    D(host_overhead_s);
    D(t_end);
    D(ttft_p50);
    D(ttft_p90);
    D(ttft_p99);
    D(tpot_p50);
    D(tpot_p90);
    D(tpot_p99);
#undef U
#undef D
    for (int i = 0; i < PKVK_ROUTE_COUNT && rc >= 0; i++) {
        char name[64];
        snprintf(name, sizeof name, "steps_%s", pkvk_route_name((pkvk_route)i));
        rc = attr_u64(g, name, s->route_steps[i]);
    }
    if (rc >= 0) rc = attr_u64(g, "interrupted", (uint64_t)s->interrupted);
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
    if (commit) rc = flush_steps(r, e);
    if (r->steps >= 0) H5Dclose(r->steps);
    if (r->routes >= 0) H5Dclose(r->routes);
    if (r->routes_measured >= 0) H5Dclose(r->routes_measured);
    H5Tclose(r->step_type);
    if (H5Fclose(r->file) < 0 && commit && rc == 0) rc = h5fail(r, e, "the file");
    if (commit && rc == 0 && rename(r->tmp, r->path) != 0)
        rc = pkv_fail(e, "%s: cannot move the finished file into place", r->path);
    if (!commit || rc != 0) unlink(r->tmp);
    free(r);
    return rc;
}
