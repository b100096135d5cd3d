/* libFuzzer target: the calibration reader (flat keys, route_scale, route_model, gates,
 * a section per kind of run) on arbitrary bytes, loaded for each kind and for none. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *sections[3] = {NULL, pkv_calib_section(false), pkv_calib_section(true)};
    for (int k = 0; k < 3; k++) {
        char *text = fuzz_text(data, size);
        if (!text) return 0;
        pkv_calib c;
        pkv_err e;
        if (!pkv_calib_load_text(&c, text, "fuzz/calibration.json", sections[k], &e))
            pkv_calib_free(&c); /* the text, kept or replaced */
    }
    return 0;
}
