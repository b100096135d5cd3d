/* libFuzzer target: a sweep file (its axes, ranges, modes and paths) and the
 * experiments of its first points, on arbitrary bytes; each is accepted or names its
 * error, and frees everything. */
#include <stdlib.h>

#include "fuzz_text.h"
#include "sweep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    pkv_err e;
    pkv_sweep_check(text, "fuzz/sweep.json", 8, &e);
    free(text);
    return 0;
}
