/* The fuzz input as a NUL-terminated string the parsers take (caller frees; NULL when
 * out of memory). */
#ifndef PKV_FUZZ_TEXT_H
#define PKV_FUZZ_TEXT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline char *fuzz_text(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = 0;
    }
    return text;
}

/* The fuzz input as the file fuzz_work/DIR/in-PID.json under the current folder (the
 * build's, not the sources'), beside fuzz_work/calibration, a link to the sources'
 * calibrations (files name them as ../calibration/NAME.json). Its absolute path (static), or NULL
 * when it cannot be written. */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *dir) {
    static char path[1024];
    char folder[256], cwd[512];
    snprintf(folder, sizeof folder, "fuzz_work/%s", dir);
    mkdir("fuzz_work", 0755), mkdir(folder, 0755);
    symlink(PKV_SOURCE_DIR "/experiments/calibration", "fuzz_work/calibration");
    if (!getcwd(cwd, sizeof cwd)) return NULL;
    snprintf(path, sizeof path, "%s/%s/in-%ld.json", cwd, folder, (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    const int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok ? path : NULL;
}

#endif
