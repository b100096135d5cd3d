/* libFuzzer target: an engine profile (experiments/engines/: host work, request path,
 * graphs, gpu terms, its serving and serving_offline defaults, attention backends) on
 * arbitrary bytes, named by path from an experiment whose own serving keys go on top of
 * it, once served through the engine's server and once offline; a parse either
 * succeeds or names its error, and frees everything. */
#include <stdlib.h>

#include "fuzz_text.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "engines");
    if (!path) return 0;
    static const char *const clients[2] = {"", "\"client\": \"offline\", "};
    for (int k = 0; k < 2; k++) {
        char *text = malloc(1024);
        if (!text) return 0;
        snprintf(text, 1024,
                 "{\"workload\": {\"num_requests\": 4}, \"serving\": {%s\"engine\": "
                 "\"%s\", \"max_active\": 8}}",
                 clients[k], path);
        pkv_config cfg;
        pkv_err e;
        if (pkv_config_parse(&cfg, text, "fuzz/experiment.json", &e) == 0) pkv_config_free(&cfg);
    }
    return 0;
}
