#define _GNU_SOURCE /* realpath, fallocate */
#include "pkv_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* The folder of path resolved, and its last name. */
static void path_key(const char *path, char *out, size_t n) {
    char dir[PATH_MAX], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (slash == dir)
        snprintf(dir, sizeof dir, "/");
    else if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    if (realpath(dir, real))
        snprintf(out, n, "%s/%s", real, base);
    else
        snprintf(out, n, "%s", path);
}

bool pkv_same_path(const char *a, const char *b) {
    char ka[2 * PATH_MAX + 2], kb[2 * PATH_MAX + 2];
    path_key(a, ka, sizeof ka), path_key(b, kb, sizeof kb);
    return strcmp(ka, kb) == 0;
}

bool pkv_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return pkv_same_path(a, b);
}

int pkv_output_ok(const char *out, const char *const *inputs, const char *const *what, int n,
                  const char *option, pkv_err *e) {
    if (!out || !*out) return pkv_fail(e, "%s: no output file named", option);
    struct stat so;
    if (stat(out, &so) != 0) return 0; /* a new file */
    if (!S_ISREG(so.st_mode))
        return pkv_fail(e, "%s %s: not a regular file (a folder or a device); name a file", option,
                        out);
    for (int i = 0; i < n; i++) {
        struct stat si;
        if (inputs[i] && *inputs[i] && stat(inputs[i], &si) == 0 && si.st_dev == so.st_dev &&
            si.st_ino == so.st_ino)
            return pkv_fail(e,
                            "%s %s: is %s (%s) of this run; it is left as it is: name another "
                            "output",
                            option, out, what[i], inputs[i]);
    }
    return 0;
}

int pkv_remove_stale_tmp(const char *out, FILE *report) {
    char dir[1024];
    const char *slash = strrchr(out, '/');
    const char *base = slash ? slash + 1 : out;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
    if (slash == out) snprintf(dir, sizeof dir, "/");
    char prefix[1100];
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    size_t np = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, prefix, np) != 0) continue;
        char *end;
        long pid = strtol(de->d_name + np, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* it runs (or is not ours) */
        char p[2200];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) == 0) {
            n++;
            if (report)
                fprintf(report, "pkvsim: removed %s, left by process %ld, which no longer runs\n",
                        p, pid);
        }
    }
    closedir(d);
    return n;
}

enum { MAX_CLEANUP = 4 };
static char cleanup[MAX_CLEANUP][PATH_MAX + 32];
static volatile sig_atomic_t cleanup_used[MAX_CLEANUP];

void pkv_cleanup_add(const char *path) {
    for (int i = 0; i < MAX_CLEANUP; i++)
        if (!cleanup_used[i]) {
            snprintf(cleanup[i], sizeof cleanup[i], "%s", path);
            cleanup_used[i] = 1;
            return;
        }
}

void pkv_cleanup_drop(const char *path) {
    for (int i = 0; i < MAX_CLEANUP; i++)
        if (cleanup_used[i] && !strcmp(cleanup[i], path)) cleanup_used[i] = 0;
}

void pkv_cleanup_now(void) {
    for (int i = 0; i < MAX_CLEANUP; i++)
        if (cleanup_used[i]) unlink(cleanup[i]);
}

FILE *pkv_out_open(pkv_out *o, const char *path) {
    *o = (pkv_out){.path = path};
    if (snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof o->tmp) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    if ((o->f = fopen(o->tmp, "w"))) pkv_cleanup_add(o->tmp);
    return o->f;
}

int pkv_out_close(pkv_out *o, int ok) {
    if (!o->f) return -1;
    int bad = ferror(o->f);
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    if (ok && !bad && rename(o->tmp, o->path) == 0) {
        pkv_cleanup_drop(o->tmp);
        return 0;
    }
    int err = errno;
    unlink(o->tmp);
    pkv_cleanup_drop(o->tmp);
    errno = err;
    return -1;
}

int pkv_write_atomic(const char *path, const char *text) {
    pkv_out o;
    FILE *f = pkv_out_open(&o, path);
    if (!f) return -1;
    return pkv_out_close(&o, fputs(text, f) >= 0 && fputc('\n', f) >= 0);
}

int pkv_reserve(const char *path, const char *name, uint64_t bytes, pkv_err *e) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        bytes > (uint64_t)lim.rlim_cur)
        return pkv_fail(e,
                        "%s: %s (it needs about %llu bytes; the file-size limit, ulimit -f, is "
                        "%llu)",
                        name, strerror(EFBIG), (unsigned long long)bytes,
                        (unsigned long long)lim.rlim_cur);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return pkv_fail(e, "%s: %s", name, strerror(errno));
    int rc = bytes ? fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) : 0, err = errno;
    struct statvfs fs;
    if (rc != 0 && (err == EOPNOTSUPP || err == ENOSYS)) /* no reservation: compare */
        rc = fstatvfs(fd, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < bytes ? -1 : 0,
        err = ENOSPC;
    close(fd);
    if (rc != 0)
        return pkv_fail(e, "%s: %s (it needs about %llu bytes)", name, strerror(err),
                        (unsigned long long)bytes);
    return 0;
}

void pkv_reserve_end(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && truncate(path, st.st_size) != 0)
        errno = 0; /* the reserved space stays taken until the file goes */
}
