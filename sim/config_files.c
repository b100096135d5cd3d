#define _DEFAULT_SOURCE /* realpath */
#include "config_files.h"
#include "config_workload.h"
#include "jsonv.h"
#include "pkv_files.h"

#include <dirent.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Edits (insertions, deletions, substitutions) from a to b, each at most 63 long. */
static int edit_distance(const char *a, const char *b) {
    int row[64], la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 1 << 20;
    for (int j = 0; j <= lb; j++) row[j] = j;
    for (int i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= lb; j++) {
            const int up = row[j];
            const int sub = diag + (a[i - 1] != b[j - 1]);
            row[j] = sub < up + 1 ? (sub < row[j - 1] + 1 ? sub : row[j - 1] + 1)
                                  : (up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1);
            diag = up;
        }
    }
    return row[lb];
}

static int by_name(const void *a, const void *b) {
    return strcmp(a, b);
}

/* The presets beside the missing one at path (the *.json of its folder), by name, and
 * the closest to `want` within a third of its length ("" if none). */
static void preset_names(const char *path, const char *want, char *names, size_t n, char *near,
                         size_t nn) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    *names = *near = 0;
    int best = (int)strlen(want) / 3 + 1;
    char found[64][64];
    int nf = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) && nf < 64;) {
        const size_t l = strlen(de->d_name);
        if (l > 6 && l < 68 && !strcmp(de->d_name + l - 5, ".json"))
            snprintf(found[nf++], sizeof found[0], "%.*s", (int)(l - 5), de->d_name);
    }
    if (d) closedir(d);
    qsort(found, (size_t)nf, sizeof found[0], by_name);
    for (int i = 0; i < nf; i++) {
        const size_t used = strlen(names);
        snprintf(names + used, n - used, "%s%.63s", i ? ", " : "", found[i]);
        const int dist = edit_distance(want, found[i]);
        if (dist < best) best = dist, snprintf(near, nn, "%.*s", (int)nn - 1, found[i]);
    }
    if (!*names) snprintf(names, n, "none in %.*s", (int)n - 16, dir);
}

/* Where the shipped data (experiments/models/, experiments/calibration/) is found, so an
 * installed pkvsim works: $PKVSIM_DATA, then beside the program (its folder, the one
 * above it, ../share/pkvsim), then the source tree it was built from. rel: a path
 * under such a root; out receives the first root's path that exists (the source
 * tree's when none does, so the error names it). */
void pkv_config_data_path(char *out, size_t n, const char *rel) {
    char exe[PATH_MAX], dir[PATH_MAX + 32], real[PATH_MAX];
    const char *roots[5] = {getenv("PKVSIM_DATA"), NULL, NULL, NULL, PKV_SOURCE_DIR};
    char beside[3][PATH_MAX + 32];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(beside[0], sizeof beside[0], "%s", exe);
        snprintf(beside[1], sizeof beside[1], "%s/..", exe);
        snprintf(beside[2], sizeof beside[2], "%s/../share/pkvsim", exe);
        for (int k = 0; k < 3; k++) roots[1 + k] = beside[k];
    }
    for (int k = 0; k < 5; k++) {
        if (!roots[k] || !*roots[k]) continue;
        snprintf(dir, sizeof dir, "%s/%s", roots[k], rel);
        if (access(dir, R_OK) == 0) {
            const char *found = realpath(dir, real) ? real : dir;
            size_t l = strlen(found);
            l = l < n ? l : n - 1;
            memcpy(out, found, l);
            out[l] = 0;
            return;
        }
    }
    snprintf(out, n, "%s/%s", PKV_SOURCE_DIR, rel);
}

/* A data file named NAME (DIR/NAME.json from the data path) or given by a path (with a
 * '/' or ending in .json, from the experiment's folder), parsed; its path into path.
 * NULL with the error, which names key and, for a name not found, the files beside
 * it (what: their kind; also: names to list first) and the closest. */
cJSON *pkv_config_named_file(const char *exp_file, const char *name, const char *key,
                             const char *dir, const char *what, const char *also, char *path,
                             size_t n, pkv_err *e) {
    const bool by_path = strchr(name, '/') || strstr(name, ".json");
    if (by_path) {
        if (pkv_config_path(path, n, exp_file, name, key, e)) return NULL;
    } else {
        char rel[300];
        snprintf(rel, sizeof rel, "%s/%s.json", dir, name);
        pkv_config_data_path(path, n, rel);
    }
    pkv_err sub;
    char *text = pkv_read_file(path, NULL, &sub);
    if (!text && by_path) { /* a path given: its folder's other files are no list of names */
        pkv_fail(e, "%s: \"%s\": %s (the path is taken from the experiment's folder: %s)", key,
                 name, sub.msg, path);
        return NULL;
    }
    if (!text) {
        char names[512], near[64];
        preset_names(path, name, names, sizeof names, near, sizeof near);
        pkv_fail(e, "%s: \"%s\": %s (%s: %s%s%s%s%s)", key, name, sub.msg, what, also, names,
                 *near ? "; did you mean \"" : "", near, *near ? "\"?" : "");
        return NULL;
    }
    cJSON *root = pkv_json_parse(text, path, &sub);
    free(text);
    if (!root) pkv_fail(e, "%s: %s", key, sub.msg);
    return root;
}
