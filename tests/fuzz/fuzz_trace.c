/* libFuzzer target: the trace readers on arbitrary bytes written to a file: the first
 * byte picks CSV (azure, vidur or study columns) or JSON Lines / a JSON array (mooncake
 * columns) and whether bad rows are skipped; the rest is the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

static char path[64];
static void remove_file(void) {
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!*path) {
        snprintf(path, sizeof path, "/tmp/pkvsim-fuzz-trace.%d", (int)getpid());
        atexit(remove_file);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    static const char *const cols[] = {"azure", "vidur", "study", "mooncake"};
    static const pkv_trace_format fmts[] = {PKV_TRACE_CSV, PKV_TRACE_CSV, PKV_TRACE_CSV,
                                            PKV_TRACE_JSONL, PKV_TRACE_JSON};
    pkv_trace_spec s;
    pkv_trace_spec_default(&s);
    snprintf(s.path, sizeof s.path, "%s", path);
    int k = data[0] % 5;
    s.format = fmts[k];
    pkv_trace_columns_builtin(cols[k < 3 ? k : 3], &s.cols);
    s.skip_bad = data[0] >> 7;
    s.spread_tick_s = data[0] & 0x40 ? 1.0 : 0;
    pkv_trace tr;
    pkv_err e;
    if (pkv_trace_load(&tr, &s, &e) == 0) pkv_trace_free(&tr);
    return 0;
}
