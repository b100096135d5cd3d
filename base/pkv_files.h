/* Output files: never one of the run's inputs, never a device or a folder; their
 * temporary files (OUT.tmp.PID) removed when a dead process left one, and by a
 * second stop signal, which ends the program at once. */
#ifndef PKV_FILES_H
#define PKV_FILES_H

#include <limits.h>
#include <stdio.h>

#include <stdbool.h>
#include <stdint.h>

#include "pkv_err.h"

/* `out` may be written: it is not one of the inputs (same device and inode, whatever
 * the name) and, where it exists, a regular file. `what` names each input in the
 * error ("the experiment file"). */
int pkv_output_ok(const char *out, const char *const *inputs, const char *const *what, int n,
                  const char *option, pkv_err *e);
/* a and b name one file, whether it exists yet or not (their folders resolved, then
 * their last names compared; the paths themselves where a folder does not exist). */
bool pkv_same_path(const char *a, const char *b);
/* a and b are one file: one inode where both exist (a hard link, a second path),
 * else pkv_same_path. */
bool pkv_same_file(const char *a, const char *b);
/* Remove out's temporary files (out.tmp.PID) whose process no longer runs, saying so
 * on `report` (may be NULL). Returns how many. */
int pkv_remove_stale_tmp(const char *out, FILE *report);

/* An output written under a temporary name (path.tmp.PID, registered for removal if
 * the program is stopped) and renamed over path when complete: a reader sees the old
 * file or the new one, never part of one. open gives the stream (NULL with errno set);
 * close keeps the file where ok and every write succeeded (0), else removes it (-1;
 * where ok, errno says why). */
typedef struct pkv_out {
    const char *path;
    char tmp[PATH_MAX + 32];
    FILE *f;
} pkv_out;
FILE *pkv_out_open(pkv_out *o, const char *path);
int pkv_out_close(pkv_out *o, int ok);
/* text and a newline to path, through a pkv_out. */
int pkv_write_atomic(const char *path, const char *text);

/* Disk space for a file about to be written (path exists, `name` is what the errors
 * call it), so that writing it cannot fail half way (libhdf5 1.10 crashes in its
 * object copy when a write fails): checks the file-size limit and takes `bytes`
 * beyond the file's end (fallocate; where the file system has none, compares with its
 * free space). -1 with strerror's "File too large" or "No space left on device".
 * pkv_reserve_end gives back what the file did not use. */
int pkv_reserve(const char *path, const char *name, uint64_t bytes, pkv_err *e);
void pkv_reserve_end(const char *path);

/* Temporary files to remove if the program is stopped at once (up to 4). */
void pkv_cleanup_add(const char *path);
void pkv_cleanup_drop(const char *path);
/* Async-signal-safe: unlink every registered file. */
void pkv_cleanup_now(void);

#endif
