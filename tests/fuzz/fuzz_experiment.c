/* libFuzzer target: the experiment parser (every key, sweep and model section) on
 * arbitrary bytes; a parse either succeeds or names its error, and frees everything. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    pkv_config cfg;
    pkv_err e;
    if (pkv_config_parse(&cfg, text, "fuzz/experiment.json", &e) == 0) pkv_config_free(&cfg);
    return 0;
}
