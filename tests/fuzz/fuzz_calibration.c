/* libFuzzer target: the calibration reader (flat keys, route_scale, route_model, gates)
 * on arbitrary bytes, applied over the defaults. */
#include <stdlib.h>

#include "fuzz_text.h"
#include "calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    pkv_err e;
    cJSON *o = pkv_json_parse(text, "fuzz/calibration.json", &e);
    if (o) {
        pkv_calib c;
        pkv_calib_defaults(&c);
        pkv_calib_apply(&c, o, "", &e);
        cJSON_Delete(o);
    }
    free(text);
    return 0;
}
