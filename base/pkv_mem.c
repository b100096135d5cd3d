#include "pkv_mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* A number from the first line of `path` that starts with `key` (the whole first line
 * where key is ""), in the file's unit; -1 where there is none ("max" included). */
static double read_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) {
            if (sscanf(line + strlen(key), "%lf", &v) != 1) v = -1;
            break;
        }
    fclose(f);
    return v;
}

/* The process's virtual size and data segment, in bytes (/proc/self/statm). */
static void process_size(double *vm, double *data) {
    unsigned long size = 0, rss, shared, text, lib, dat = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%lu %lu %lu %lu %lu %lu", &size, &rss, &shared, &text, &lib, &dat) != 6)
        size = dat = 0;
    if (f) fclose(f);
    const double page = (double)sysconf(_SC_PAGESIZE);
    *vm = size * page, *data = dat * page;
}

/* A cgroup file of `hierarchy` for the group `rel`; where that path is not mounted (a
 * container sees its own group as the root), the hierarchy's root. */
static double cgroup_number(const char *hierarchy, const char *rel, const char *file) {
    char path[1200];
    snprintf(path, sizeof path, "/sys/fs/cgroup%s%s/%s", hierarchy, rel, file);
    double v = read_number(path, "");
    if (v < 0) {
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/%s", hierarchy, file);
        v = read_number(path, "");
    }
    return v;
}

/* The cgroup's limit less its use (cgroup v2, then v1), or -1 where none is set. */
static double cgroup_room(void) {
    char line[1024];
    FILE *f = fopen("/proc/self/cgroup", "r");
    double room = -1;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *rel = strchr(line, ':') ? strchr(strchr(line, ':') + 1, ':') : NULL;
        if (!rel) continue;
        rel++;
        if (!strcmp(rel, "/")) rel = "";
        double max, cur;
        if (!strncmp(line, "0::", 3)) {
            max = cgroup_number("", rel, "memory.max");
            cur = cgroup_number("", rel, "memory.current");
        } else if (strstr(line, ":memory:")) {
            max = cgroup_number("/memory", rel, "memory.limit_in_bytes");
            cur = cgroup_number("/memory", rel, "memory.usage_in_bytes");
            if (max >= 9e18) max = -1; /* v1's "no limit" */
        } else {
            continue;
        }
        if (max >= 0 && (room < 0 || max - (cur > 0 ? cur : 0) < room))
            room = max - (cur > 0 ? cur : 0);
    }
    if (f) fclose(f);
    return room;
}

double pkv_mem_allowed(const char **which) {
    double best = read_number("/proc/meminfo", "MemAvailable:") * 1024.0;
    *which = "this machine's available memory";
    if (best < 0) {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        best = pages > 0 && page > 0 ? (double)pages * page : 1e300;
        *which = "this machine's memory";
    }
    double vm, data;
    process_size(&vm, &data);
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
        (double)r.rlim_cur - vm < best)
        best = (double)r.rlim_cur - vm, *which = "the address-space limit (ulimit -v) less what "
                                                 "the process holds";
    if (getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
        (double)r.rlim_cur - data < best)
        best = (double)r.rlim_cur - data, *which = "the data-size limit (ulimit -d) less what "
                                                   "the process holds";
    const double cg = cgroup_room();
    if (cg >= 0 && cg < best) best = cg, *which = "the cgroup's memory limit less its use";
    return best > 0 ? best : 0;
}

int pkv_resize(void *array, size_t n, size_t size) {
    void *p;
    memcpy(&p, array, sizeof p); /* the T * as a void * (one representation on POSIX) */
    if (size && n > SIZE_MAX / size) return -1;
    void *q = realloc(p, n * size);
    if (!q && n * size > 0) return -1;
    memcpy(array, &q, sizeof q);
    return 0;
}
