/* libFuzzer target: a validation file (experiments/validation/: the experiment, its
 * engine by name, and the validation section: source, client, role, the published
 * figures and their bands) on arbitrary bytes, loaded as `pkvsim validate` and `fit
 * --engine` load it; a load either succeeds or names its error, and frees everything. */
#include "fuzz_text.h"
#include "vfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "validation");
    if (!path) return 0;
    pkv_vfile v;
    pkv_err e;
    if (pkv_vfile_load(&v, path, &e) == 0) pkv_config_free(&v.cfg);
    return 0;
}
