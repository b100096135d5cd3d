/* The fuzz input as a NUL-terminated string the parsers take (caller frees; NULL when
 * out of memory). */
#ifndef PKV_FUZZ_TEXT_H
#define PKV_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_text(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = 0;
    }
    return text;
}

#endif
