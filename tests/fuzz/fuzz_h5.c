/* libFuzzer target: the HDF5 readers of `report` and `fit` (the run list, /steps,
 * /prefills, /requests, the texts, the summary tables, a sweep's index and a point's
 * key) on valid HDF5 files that are not what pkvsim wrote. The input is a list of edits
 * applied to a copy of a real run or sweep (tests/fuzz/h5): objects and attributes
 * removed, datasets replaced by others of another type, rank or length (empty, 2-D,
 * strings), extendible columns cut to other lengths, values set to NaN, -1 or 1e308.
 * Every read succeeds or names its error. Raw bytes are not fuzzed: libhdf5 1.10 itself
 * crashes on corrupt files (tests/README.md). PKV_FUZZ_H5 names the templates' folder. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5rec.h"
#include "h5sweep.h"
#include "report.h"

enum { MAX_OBJECTS = 512 };

/* The object API took a `fields` argument in HDF5 1.12. */
#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t obj_info;
#define VISIT(o, op, d) H5Ovisit3(o, H5_INDEX_NAME, H5_ITER_INC, op, d, H5O_INFO_ALL)
#define INFO(f, p, i)   H5Oget_info_by_name3(f, p, i, H5O_INFO_ALL, H5P_DEFAULT)
#else
typedef H5O_info_t obj_info;
#define VISIT(o, op, d) H5Ovisit(o, H5_INDEX_NAME, H5_ITER_INC, op, d)
#define INFO(f, p, i)   H5Oget_info_by_name(f, p, i, H5P_DEFAULT)
#endif

typedef struct objects {
    char path[MAX_OBJECTS][96];
    int n;
} objects;

static herr_t collect(hid_t o, const char *name, const obj_info *info, void *op) {
    objects *s = op;
    (void)o, (void)info;
    if (s->n < MAX_OBJECTS && strcmp(name, ".") != 0)
        snprintf(s->path[s->n++], sizeof s->path[0], "/%s", name);
    return 0;
}

static hid_t string_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    return t;
}

/* A new dataset at path of kind k (0 doubles, 1 a string, 2 a 2-D int, 3 empty). */
static void replace(hid_t f, const char *path, int k, int rows) {
    H5Ldelete(f, path, H5P_DEFAULT);
    hsize_t dims[2] = {(hsize_t)rows, 2};
    const double special[4] = {NAN, -1, 1e308, 0};
    if (k == 1) {
        hid_t t = string_type(), s = H5Screate(H5S_SCALAR);
        const char *v = "x";
        hid_t d = H5Dcreate2(f, path, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d >= 0) H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v), H5Dclose(d);
        H5Sclose(s), H5Tclose(t);
        return;
    }
    hid_t t = k == 2 ? H5T_NATIVE_INT : H5T_NATIVE_DOUBLE;
    if (k == 3) dims[0] = 0;
    hid_t s = H5Screate_simple(k == 2 ? 2 : 1, dims, NULL);
    hid_t d = H5Dcreate2(f, path, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    size_t n = (size_t)dims[0] * (k == 2 ? 2 : 1);
    double *v = calloc(n + 1, sizeof *v);
    for (size_t i = 0; v && i < n; i++) v[i] = special[i % 4];
    if (d >= 0 && v && n) H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    free(v);
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
}

/* Edit the object at path by op (see the header), with parameter p. */
static void edit(hid_t f, const char *path, int op, int p) {
    obj_info info;
    if (INFO(f, path, &info) < 0) return;
    const int dataset = info.type == H5O_TYPE_DATASET;
    switch (op % 8) {
    case 0:
        H5Ldelete(f, path, H5P_DEFAULT);
        break;
    case 1:
    case 2:
    case 3:
    case 4:
        if (dataset) replace(f, path, op % 8 - 1, p % 70);
        break;
    case 5:
        if (info.num_attrs > 0)
            H5Adelete_by_idx(f, path, H5_INDEX_NAME, H5_ITER_INC, (hsize_t)p % info.num_attrs,
                             H5P_DEFAULT);
        break;
    case 6: { /* an attribute of another type under an existing name */
        if (info.num_attrs == 0) break;
        char name[128];
        if (H5Aget_name_by_idx(f, path, H5_INDEX_NAME, H5_ITER_INC, (hsize_t)p % info.num_attrs,
                               name, sizeof name, H5P_DEFAULT) <= 0)
            break;
        H5Adelete_by_name(f, path, name, H5P_DEFAULT);
        hid_t o = H5Oopen(f, path, H5P_DEFAULT), s = H5Screate(H5S_SCALAR);
        hid_t t = p % 2 ? string_type() : H5Tcopy(H5T_NATIVE_DOUBLE);
        hid_t a = o < 0 ? -1 : H5Acreate2(o, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
        const char *str = "";
        const double nan = NAN;
        if (a >= 0) H5Awrite(a, t, p % 2 ? (const void *)&str : (const void *)&nan), H5Aclose(a);
        H5Tclose(t), H5Sclose(s);
        if (o >= 0) H5Oclose(o);
        break;
    }
    case 7: { /* an extendible column cut (or a value set to a special one) */
        hid_t d = dataset ? H5Dopen2(f, path, H5P_DEFAULT) : -1;
        if (d < 0) break;
        hid_t s = H5Dget_space(d), t = H5Dget_type(d);
        hsize_t dims[1] = {0}, max[1];
        if (H5Sget_simple_extent_ndims(s) == 1 && H5Sget_simple_extent_dims(s, dims, max) == 1) {
            if (max[0] == H5S_UNLIMITED) {
                hsize_t n = dims[0] ? (hsize_t)p % (dims[0] + 1) : 0;
                H5Dset_extent(d, &n);
            } else if (dims[0] > 0 && H5Tget_class(t) == H5T_FLOAT) {
                hsize_t at = (hsize_t)p % dims[0], one = 1;
                hid_t m = H5Screate_simple(1, &one, NULL);
                H5Sselect_hyperslab(s, H5S_SELECT_SET, &at, NULL, &one, NULL);
                const double v = p % 3 ? -1e308 : NAN;
                H5Dwrite(d, H5T_NATIVE_DOUBLE, m, s, H5P_DEFAULT, &v);
                H5Sclose(m);
            }
        }
        H5Tclose(t), H5Sclose(s), H5Dclose(d);
        break;
    }
    }
}

static char *templates[2];
static size_t template_size[2];

static void load_templates(void) {
    const char *dir = getenv("PKV_FUZZ_H5");
    static const char *const names[2] = {"run.h5", "sweep.h5"};
    for (int i = 0; i < 2; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir ? dir : PKV_SOURCE_DIR "/tests/fuzz/h5", names[i]);
        FILE *f = fopen(p, "rb");
        if (!f || fseek(f, 0, SEEK_END) || (template_size[i] = (size_t)ftell(f)) == 0 ||
            fseek(f, 0, SEEK_SET) || !(templates[i] = malloc(template_size[i])) ||
            fread(templates[i], 1, template_size[i], f) != template_size[i]) {
            fprintf(stderr, "fuzz_h5: cannot read the template %s\n", p);
            abort();
        }
        fclose(f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    static FILE *null;
    if (!*path) {
        snprintf(path, sizeof path, "/tmp/pkv-fuzz-h5-%ld.h5", (long)getpid());
        null = fopen("/dev/null", "w");
        pkv_h5_init();
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        load_templates();
    }
    if (size < 1) return 0;
    const int which = data[0] % 2;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(templates[which], 1, template_size[which], f) == template_size[which];
    if (fclose(f) != 0 || !ok) return 0;
    hid_t h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (h < 0) return 0;
    static objects objs;
    objs.n = 0;
    VISIT(h, collect, &objs);
    for (size_t i = 1; i + 2 < size && objs.n > 0; i += 3)
        edit(h, objs.path[data[i + 1] % objs.n], data[i], data[i + 2]);
    H5Fclose(h);

    pkv_err e;
    const char *paths[] = {path};
    pkv_report_write(paths, 1, NULL, PKV_REPORT_ROUTES | PKV_REPORT_COUNTERS, "decode_tok_s", 0.99,
                     null, null, null, &e);
    char(*groups)[32] = NULL;
    int n = 0;
    if (!pkv_h5_runs(path, &groups, &n, &e)) {
        for (int i = 0; i < n; i++) {
            pkv_step_rec *st = NULL;
            pkv_prefill_rec *pf = NULL;
            size_t ns = 0, np = 0;
            if (!pkv_h5_read_steps_at(path, groups[i], &st, &ns, &e)) free(st);
            if (!pkv_h5_read_prefills_at(path, groups[i], &pf, &np, &e)) free(pf);
        }
        free(groups);
    }
    pkv_request_rec *rq = NULL;
    size_t nr = 0;
    if (!pkv_h5_read_requests(path, &rq, &nr, &e)) free(rq);
    char *text = NULL;
    if (!pkv_h5_read_text(path, "config/resolved", &text, &e)) free(text);
    char *exp = NULL, **status = NULL, **keys = NULL;
    size_t n_points = 0;
    if (!pkv_h5sweep_read(path, &exp, &n_points, &status, &keys, &e))
        pkv_h5sweep_free_read(exp, n_points, status, keys);
    char *key = NULL;
    pkv_h5sweep_point_key(path, &key);
    free(key);
    unlink(path);
    return 0;
}
