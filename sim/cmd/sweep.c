#include "sweep.h"
#include "axis.h"
#include "calib.h"
#include "config_keys.h"
#include "h5sweep.h"
#include "jsonv.h"
#include "pkv_files.h"
#include "rng.h"
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef PKV_HAVE_MPI
#include <mpi.h>
#endif

enum { MAX_AXES = 8, MAX_POINTS = 100000 };

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x) return -1;                                                                          \
    } while (0)

typedef struct sweep {
    char *text;  /* the file verbatim (owned) */
    cJSON *base; /* the experiment without its sweep section (owned) */
    int zip;
    int n_axes;
    pkv_axis axes[MAX_AXES];
    size_t n_points;
} sweep;

/* The processes of a sweep: one, or the ranks of an MPI job (mpirun), which take the
 * next point from a counter on rank 0 (one-sided fetch-and-add), so that a slow point
 * idles no other rank; rank 0 then assembles the file. */
typedef struct ranks {
    int rank, size;
    int gpu; /* this rank's GPU: its rank on the host modulo the visible GPUs */
    int mpi; /* MPI_Init was called (under mpirun, in a build with MPI) */
#ifdef PKV_HAVE_MPI
    MPI_Win win;
    long *counter;
#endif
    long next; /* one process: the next point */
} ranks;

static int under_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static int ranks_init(ranks *r) {
    *r = (ranks){.rank = 0, .size = 1};
#ifdef PKV_HAVE_MPI
    r->win = MPI_WIN_NULL;
    if (!under_mpirun()) return 0;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return -1;
    r->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->size);
    if (MPI_Win_allocate(r->rank == 0 ? sizeof(long) : 0, sizeof(long), MPI_INFO_NULL,
                         MPI_COMM_WORLD, &r->counter, &r->win) != MPI_SUCCESS)
        return -1;
    if (r->rank == 0) *r->counter = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int n_gpus = pkvk_device_count();
    if (n_gpus > 0) r->gpu = (local ? atoi(local) : r->rank) % n_gpus;
#else
    if (under_mpirun()) {
        fputs("pkvsim: this build has no MPI (Open MPI's headers were not found): every rank "
              "would run the whole sweep\n",
              stderr);
        return -1;
    }
#endif
    return 0;
}

static long next_point(ranks *r) {
#ifdef PKV_HAVE_MPI
    if (r->size > 1) {
        long one = 1, got = 0;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, r->win);
        MPI_Fetch_and_op(&one, &got, MPI_LONG, 0, 0, MPI_SUM, r->win);
        MPI_Win_unlock(0, r->win);
        return got;
    }
#endif
    return r->next++;
}

/* Every rank's outcome of the points it ran, on rank 0: codes (0 not run here, 1 done,
 * 2 failed, 3 interrupted) and the failed points' errors. */
static int ranks_gather(ranks *r, int *codes, char (*errs)[1100], size_t n) {
#ifdef PKV_HAVE_MPI
    if (r->size > 1) {
        int *all = r->rank == 0 ? malloc(sizeof *all * n) : NULL;
        if (r->rank == 0 && !all) return -1;
        MPI_Reduce(codes, all, (int)n, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) { /* the errors of failed points, one message each */
            int mine = codes[i] == 2, from = 0;
            int who = mine ? r->rank : 0;
            MPI_Allreduce(&who, &from, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (r->rank == 0 && all[i] == 2 && from != 0)
                MPI_Recv(errs[i], sizeof errs[i], MPI_CHAR, from, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            else if (mine && r->rank != 0)
                MPI_Send(errs[i], (int)strlen(errs[i]) + 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
        if (r->rank == 0) memcpy(codes, all, sizeof *all * n);
        free(all);
    }
#else
    (void)r, (void)codes, (void)errs, (void)n;
#endif
    return 0;
}

static void ranks_end(ranks *r) {
#ifdef PKV_HAVE_MPI
    if (r->mpi) {
        if (r->win != MPI_WIN_NULL) MPI_Win_free(&r->win);
        MPI_Finalize();
    }
#else
    (void)r;
#endif
}

static void sweep_free(sweep *s) {
    free(s->text);
    cJSON_Delete(s->base);
    for (int a = 0; a < s->n_axes; a++) pkv_axis_free(&s->axes[a]);
    *s = (sweep){0};
}

int pkv_sweep_present(const char *path) {
    pkv_err e;
    cJSON *root = pkv_json_read(path, &e);
    if (!root) {
        fprintf(stderr, "pkvsim: %s\n", e.msg);
        return -1;
    }
    int has = cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "sweep");
    cJSON_Delete(root);
    return has;
}

/* The sweep of a file's text (taken: freed with the sweep); path names it in errors. */
static int sweep_parse(sweep *s, char *text, const char *path, const pkv_cli_overrides *ov,
                       pkv_err *e) {
    *s = (sweep){.text = text};
    pkv_err sub;
    if (!s->text) return -1;
    s->base = pkv_json_parse(s->text, path, e);
    if (!s->base) return -1;
    cJSON *sw = cJSON_DetachItemFromObjectCaseSensitive(s->base, "sweep");
    int rc = -1;
    static const char *const modes[] = {"product", "zip", NULL};
    const char *mode;
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(sw, "axes");
    if (pkv_keys_check(pkv_config_keys(), "sweep", sw, "sweep", &sub) ||
        pkv_json_str(sw, "sweep", "mode", "product", modes, &mode, &s->zip, &sub))
        goto out;
    int n = cJSON_IsArray(axes) ? cJSON_GetArraySize(axes) : 0;
    if (n < 1 || n > MAX_AXES) {
        pkv_fail(&sub, "sweep.axes: must be a list of 1 to %d axes", MAX_AXES);
        goto out;
    }
    s->n_points = 1;
    for (int a = 0; a < n; a++) {
        char P[32];
        snprintf(P, sizeof P, "sweep.axes[%d]", a);
        if (pkv_axis_parse(&s->axes[a], cJSON_GetArrayItem(axes, a), P, ov, &sub)) goto out;
        s->n_axes = a + 1;
        for (int b = 0; b < a; b++)
            if (!strcmp(s->axes[b].path, s->axes[a].path)) {
                pkv_fail(&sub, "%s.path: \"%s\" is swept twice", P, s->axes[a].path);
                goto out;
            }
        if (s->zip && s->axes[a].n != s->axes[0].n) {
            pkv_fail(&sub, "%s.values: %d values; mode zip needs as many as axis 0 (%d)", P,
                     s->axes[a].n, s->axes[0].n);
            goto out;
        }
        s->n_points = s->zip ? (size_t)s->axes[0].n : s->n_points * (size_t)s->axes[a].n;
        if (s->n_points > MAX_POINTS) {
            pkv_fail(&sub, "sweep: more than %d points", MAX_POINTS);
            goto out;
        }
    }
    rc = 0;
out:
    cJSON_Delete(sw);
    if (rc) pkv_fail(e, "%s: %s", path, sub.msg);
    return rc;
}

static int sweep_load(sweep *s, const char *path, const pkv_cli_overrides *ov, pkv_err *e) {
    return sweep_parse(s, pkv_read_file(path, NULL, e), path, ov, e);
}

/* Point i's value of axis a (product: the last axis varies fastest). */
static const cJSON *point_value(const sweep *s, size_t i, int a) {
    if (s->zip) return cJSON_GetArrayItem(s->axes[a].values, (int)i);
    size_t stride = 1;
    for (int b = s->n_axes - 1; b > a; b--) stride *= (size_t)s->axes[b].n;
    return cJSON_GetArrayItem(s->axes[a].values, (int)(i / stride % (size_t)s->axes[a].n));
}

static void describe(const sweep *s, size_t i, char *buf, size_t n) {
    buf[0] = 0;
    for (int a = 0; a < s->n_axes; a++) {
        char *t = pkv_json_value_text(point_value(s, i, a));
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s=%s", a ? " " : "", s->axes[a].path,
                 t ? t : "?");
        free(t);
    }
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Point i's experiment: the base with the point's axis values set, as text (owned). */
static char *point_text(const sweep *s, size_t i, pkv_err *e) {
    cJSON *root = cJSON_Duplicate(s->base, 1);
    if (!root) {
        pkv_fail(e, "out of memory");
        return NULL;
    }
    int rc = 0;
    for (int a = 0; a < s->n_axes && !rc; a++)
        rc = pkv_json_set_path(root, s->axes[a].path, point_value(s, i, a), e);
    char *text = rc ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (!rc && !text) pkv_fail(e, "out of memory");
    return text;
}

/* A point's key: its experiment's text and the run command's options that apply to it,
 * hashed. A point file is reused only when its key is this one. */
enum { KEY_LEN = PKV_SWEEP_KEY_LEN };
void pkv_sweep_point_key(const char *text, const pkv_cli_overrides *o, char key[KEY_LEN]) {
    uint64_t h = pkv_text_hash(PKV_TEXT_HASH_START, text);
    const char *opts[] = {o->seed, o->backend, o->route, o->calibration, o->slo};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        h = pkv_text_hash(h, "\n");
        h = pkv_text_hash(h, opts[k] ? opts[k] : "-");
    }
    snprintf(key, KEY_LEN, "v1:%016llx", (unsigned long long)h);
}

/* Run point i into `file`; *status and err say how it went. Returns -1 only for an
 * error that should stop the sweep (out of memory). */
static int run_point(const sweep *s, size_t i, int gpu, const char *sweep_path, const char *file,
                     const char *key, const pkv_cli_overrides *ov, volatile sig_atomic_t *stop,
                     const char *command_line, const char **status, char *err, size_t n_err) {
    pkv_err e;
    char *text = point_text(s, i, &e);
    *status = "failed";
    if (!text) {
        if (!strcmp(e.msg, "out of memory")) return -1;
        snprintf(err, n_err, "%.*s", (int)n_err - 1, e.msg);
        return 0;
    }
    pkv_config cfg;
    if (pkv_config_parse(&cfg, text, sweep_path, &e)) { /* takes the text */
        snprintf(err, n_err, "%.*s", (int)n_err - 1, e.msg);
        return 0;
    }
    pkv_cli_overrides o = *ov;
    o.output = file;
    if (pkv_cli_apply(&cfg, &o)) {
        snprintf(err, n_err, "the run command's options do not apply (printed above)");
        pkv_config_free(&cfg);
        return 0;
    }
    pkv_run_opts ro = {.quiet = 1,
                       .record = 1,
                       .stop = stop,
                       .command_line = command_line,
                       .gpu = gpu,
                       .sweep_point = key};
    pkv_summary sum;
    if (pkv_run_experiment(&cfg, &ro, &sum, &e)) {
        snprintf(err, n_err, "%.*s", (int)n_err - 1, e.msg);
    } else if (sum.interrupted) {
        *status = "interrupted";
        unlink(file); /* not a finished point */
    } else {
        *status = "done";
        snprintf(err, n_err, "decode %.1f tokens/s, TTFT p50 %.4g s, TPOT p50 %.4g s",
                 sum.decode_tok_s, sum.ttft_p50, sum.tpot_p50);
    }
    pkv_config_free(&cfg);
    return 0;
}

/* One process at a time on a sweep's output: a lock (fcntl, so the system drops it when
 * the process ends, however it ends) on DIR/.lock. 0 with *fd set; -1 with a message
 * naming the process that holds it. */
int pkv_sweep_lock(const char *dir, const char *out, int *fd, pkv_err *e) {
    char path[1200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    for (int tries = 0; tries < 8; tries++) {
        int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (f < 0)
            return pkv_fail(e, "%s: cannot create the sweep's lock: %s", path, strerror(errno));
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(f, F_SETLK, &l) != 0) {
            int err = errno;
            struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            int got = fcntl(f, F_GETLK, &who) == 0 && who.l_type != F_UNLCK;
            close(f);
            if (err == EACCES || err == EAGAIN)
                return got ? pkv_fail(e,
                                      "%s: another pkvsim (pid %ld) is running it now; "
                                      "wait for it, or stop it and run again",
                                      out, (long)who.l_pid)
                           : pkv_fail(e, "%s: another process is running it now", out);
            return pkv_fail(e, "%s: cannot lock: %s", path, strerror(err));
        }
        /* Locked; the file may have been removed by a sweep that just finished. */
        struct stat a, b;
        if (fstat(f, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            *fd = f;
            return 0;
        }
        close(f);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return pkv_fail(e, "%s: cannot create the folder of point files: %s", dir,
                            strerror(errno));
    }
    return pkv_fail(e, "%s: cannot lock (the folder keeps changing)", path);
}

int pkv_sweep_check(const char *text, const char *path, size_t max_points, pkv_err *e) {
    sweep s;
    const pkv_cli_overrides none = {0};
    char *copy = strdup(text);
    if (!copy) return pkv_fail(e, "out of memory");
    int rc = sweep_parse(&s, copy, path, &none, e);
    for (size_t i = 0; !rc && i < s.n_points && i < max_points; i++) {
        char *point = point_text(&s, i, e);
        pkv_config cfg;
        if (!point || pkv_config_parse(&cfg, point, path, e)) /* takes the text */
            rc = -1;
        else
            pkv_config_free(&cfg);
    }
    sweep_free(&s);
    return rc;
}

int pkv_sweep_main(const char *path, const pkv_cli_overrides *ov, int quiet, int dry,
                   volatile sig_atomic_t *stop, const char *command_line) {
    sweep s;
    pkv_err e;
    if (sweep_load(&s, path, ov, &e)) {
        fprintf(stderr, "pkvsim: %s\n", e.msg);
        sweep_free(&s);
        return 1;
    }
    /* The output: -o, else the base experiment's run.output or NAME.h5. */
    char out[1024];
    {
        pkv_config base;
        char *text = cJSON_Print(s.base);
        if (!text || pkv_config_parse(&base, text, path, &e)) {
            fprintf(stderr, "pkvsim: %s (the experiment without its sweep)\n",
                    text ? e.msg : "out of memory");
            sweep_free(&s);
            return 1;
        }
        snprintf(out, sizeof out, "%s", ov->output ? ov->output : base.output);
        const char *in[PKV_CONFIG_INPUTS], *what[PKV_CONFIG_INPUTS];
        int n_in = pkv_config_inputs(&base, in, what);
        int bad = pkv_output_ok(out, in, what, n_in, "output", &e);
        pkv_config_free(&base);
        if (bad) {
            fprintf(stderr, "pkvsim: %s\n", e.msg);
            sweep_free(&s);
            return 1;
        }
    }
    if (dry) {
        printf("point");
        for (int a = 0; a < s.n_axes; a++) printf("\t%s", s.axes[a].path);
        printf("\n");
        for (size_t i = 0; i < s.n_points; i++) {
            printf("%zu", i);
            for (int a = 0; a < s.n_axes; a++) {
                char *t = pkv_json_value_text(point_value(&s, i, a));
                printf("\t%s", t ? t : "?");
                free(t);
            }
            printf("\n");
        }
        sweep_free(&s);
        return 0;
    }
    ranks rk;
    if (ranks_init(&rk)) {
        fputs("pkvsim: cannot start MPI\n", stderr);
        sweep_free(&s);
        return 1;
    }
    char rank_tag[32] = "";
    if (rk.size > 1) snprintf(rank_tag, sizeof rank_tag, "rank %d: ", rk.rank);
    /* What an earlier run of the same sweep left: its file and its point files. */
    char dir[1100];
    snprintf(dir, sizeof dir, "%s.points", out);
    char *old_exp = NULL, **old_status = NULL, **old_keys = NULL;
    size_t old_n = 0;
    int have_old = 0, lock = -1;
    if (file_exists(out)) {
        if (pkv_h5sweep_read(out, &old_exp, &old_n, &old_status, &old_keys, &e) ||
            strcmp(old_exp, s.text) != 0 || old_n != s.n_points) {
            fprintf(stderr, "pkvsim: %s: %s; it is left as it is: remove it or choose another -o\n",
                    out, old_exp ? "holds another sweep" : e.msg);
            pkv_h5sweep_free_read(old_exp, old_n, old_status, old_keys);
            sweep_free(&s);
            ranks_end(&rk);
            return 1;
        }
        have_old = 1;
    }
    int bad = mkdir(dir, 0777) != 0 && errno != EEXIST;
    if (bad)
        pkv_fail(&e, "%s: cannot create the folder of point files: %s", dir, strerror(errno));
    else if (rk.rank == 0)
        bad = pkv_sweep_lock(dir, out, &lock, &e);
#ifdef PKV_HAVE_MPI
    if (rk.size > 1) MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
    if (bad) {
        if (rk.rank == 0) fprintf(stderr, "pkvsim: %s\n", e.msg);
        pkv_h5sweep_free_read(old_exp, old_n, old_status, old_keys);
        sweep_free(&s);
        ranks_end(&rk);
        return 1;
    }
    size_t n = s.n_points;
    pkv_h5sweep_point *pts = calloc(n, sizeof *pts);
    char(*files)[1200] = calloc(n, sizeof *files);
    char(*errs)[1100] = calloc(n, sizeof *errs);
    char(*keys)[KEY_LEN] = calloc(n, sizeof *keys);
    char **vals = calloc(n * (size_t)s.n_axes + 1, sizeof *vals);
    char(*grp)[32] = calloc(n, sizeof *grp);
    int rc = !pts || !files || !errs || !keys || !vals || !grp;
    size_t done = 0, failed = 0, skipped = 0, stale = 0;
    int foreign = 0; /* a file in the folder that is no sweep point */
    /* A point is done when its file, or the earlier OUT's group, holds a run of this
     * point's key; one with another key (axis values edited, other options) runs again;
     * a file that is no sweep point stops the sweep, left as it is. */
    for (size_t i = 0; i < n && !rc; i++) {
        snprintf(files[i], sizeof files[i], "%s/%05zu.h5", dir, i);
        for (int a = 0; a < s.n_axes; a++)
            if (!(vals[i * s.n_axes + a] = pkv_json_value_text(point_value(&s, i, a)))) rc = 1;
        pts[i] = (pkv_h5sweep_point){NULL, "/", "pending", ""};
        char *text = point_text(&s, i, &e);
        if (text) pkv_sweep_point_key(text, ov, keys[i]); /* else the point fails when it runs */
        free(text);
        if (file_exists(files[i])) {
            char *k = NULL;
            int got = pkv_h5sweep_point_key(files[i], &k);
            if (got == 1 && !strcmp(k, keys[i])) {
                pts[i].src_file = files[i], pts[i].status = "done";
            } else if (got == 1) {
                stale++;
            } else if (rk.rank == 0) { /* got != 1 */
                fprintf(stderr,
                        "pkvsim: %s: %s, not a point of a sweep; it is left as it is: move it "
                        "away, or choose another -o\n",
                        files[i],
                        got < 0 ? "not an HDF5 file"
                                : "an HDF5 file without a sweep point's key (a run of its own, "
                                  "or not a pkvsim run)");
            }
            if (got != 1) rc = foreign = 1;
            free(k);
        } else if (have_old && !strcmp(old_status[i], "done")) {
            if (old_keys[i] && !strcmp(old_keys[i], keys[i]))
                pts[i].src_file = out, pts[i].status = "done";
            else
                stale++;
        }
        skipped += pts[i].src_file != NULL;
    }
    if (!rc && !quiet && skipped && rk.rank == 0)
        fprintf(stderr, "pkvsim: %s: %zu of %zu points already finished; running the rest\n", out,
                skipped, n);
    if (!rc && stale && rk.rank == 0)
        fprintf(stderr,
                "pkvsim: %s: %zu finished points were run with other settings (axis values or "
                "the options --seed, --backend, --route, --calibration, --slo); running them "
                "again\n",
                out, stale);
    int *codes = rc ? NULL : calloc(n, sizeof *codes);
    if (!codes && !foreign) {
        fprintf(stderr, "pkvsim: %s: out of memory for the table of %zu points\n", out, n);
        rc = 1;
    }
    for (long i; !rc && !(stop && *stop) && (i = next_point(&rk)) < (long)n;) {
        if (pts[i].src_file) continue;
        char what[512];
        describe(&s, (size_t)i, what, sizeof what);
        if (!quiet) fprintf(stderr, "pkvsim: %s[%ld/%zu] %s\n", rank_tag, i + 1, n, what);
        if (run_point(&s, i, rk.gpu, path, files[i], keys[i], ov, stop, command_line,
                      &pts[i].status, errs[i], sizeof errs[i])) {
            fputs("pkvsim: out of memory\n", stderr);
            rc = 1;
            break;
        }
        if (!strcmp(pts[i].status, "done")) {
            codes[i] = 1;
            if (!quiet) fprintf(stderr, "pkvsim: %s  %s\n", rank_tag, errs[i]);
            errs[i][0] = 0;
        } else if (!strcmp(pts[i].status, "failed")) {
            codes[i] = 2;
            fprintf(stderr, "pkvsim: %s  point %ld failed: %s\n", rank_tag, i, errs[i]);
        } else {
            codes[i] = 3;
        }
    }
    /* Every rank's points, on rank 0, which assembles; the others are done. */
    int interrupted = stop && *stop;
#ifdef PKV_HAVE_MPI
    if (rk.size > 1) {
        int any = interrupted || rc, all_any = 0;
        MPI_Allreduce(&any, &all_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        interrupted = all_any;
    }
#endif
    if (!rc && codes && ranks_gather(&rk, codes, errs, n)) rc = 1;
    for (size_t i = 0; !rc && i < n; i++) { /* every point's row is set when !rc */
        static const char *const st[] = {NULL, "done", "failed", "interrupted"};
        if (codes[i]) pts[i].status = st[codes[i]];
        if (codes[i] == 1) pts[i].src_file = files[i];
        pts[i].error = errs[i];
        done += !strcmp(pts[i].status, "done");
        failed += codes[i] == 2;
    }
    free(codes);
    /* The single file, from the finished points (those of the earlier file read from
     * it while the new one is written under another name); then the point files go. */
    if (!rc && rk.rank == 0) {
        const char *paths[MAX_AXES];
        for (int a = 0; a < s.n_axes; a++) paths[a] = s.axes[a].path;
        for (size_t i = 0; i < n; i++)
            if (pts[i].src_file == out) {
                snprintf(grp[i], sizeof grp[i], "/points/%05zu", i);
                pts[i].src_group = grp[i];
            }
        if (pkv_h5sweep_write(out, s.text, s.zip ? "zip" : "product", s.n_axes, paths, n, pts,
                              (const char *const *)vals, &e)) {
            fprintf(stderr, "pkvsim: %s\n", e.msg);
            rc = 1;
        } else {
            for (size_t i = 0; i < n; i++) unlink(files[i]);
            char lock_path[1200];
            snprintf(lock_path, sizeof lock_path, "%s/.lock", dir);
            unlink(lock_path);
            rmdir(dir);
            if (!quiet)
                printf("%s -> %s: %zu points, %zu finished, %zu failed%s\n", path, out, n, done,
                       failed, done + failed < n ? ", the rest not run (interrupted)" : "");
        }
    }
    for (size_t i = 0; vals && i < n * (size_t)s.n_axes; i++) free(vals[i]);
    free(vals), free(errs), free(files), free(keys), free(pts), free(grp);
    if (lock >= 0) close(lock);
    pkv_h5sweep_free_read(old_exp, old_n, old_status, old_keys);
    sweep_free(&s);
    ranks_end(&rk);
    /* an error a signal caused (set-up stopped) ends with the signal's status */
    return rc ? (*stop ? 128 + (int)*stop : 1) : interrupted ? 128 + (int)*stop : failed ? 3 : 0;
}
