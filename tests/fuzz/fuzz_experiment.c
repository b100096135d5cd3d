/* libFuzzer target: the experiment parser (every key, sweep and model section) on
 * arbitrary bytes; a parse either succeeds or names its error, and frees everything. */
#include <stdlib.h>

#include "fuzz_text.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    pkv_config cfg;
    pkv_err e;
    if (pkv_config_parse(&cfg, text, "fuzz/experiment.json", &e) == 0) pkv_config_free(&cfg);
    return 0;
}
