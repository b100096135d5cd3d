/* Minimal test helpers: CHECK records a failure with its location and goes on;
 * CHECK_DONE() ends main with the count. Exit code 77 marks a skipped test. */
#ifndef PKV_TEST_CHECK_H
#define PKV_TEST_CHECK_H

#include <stdio.h>

static int check_failures = 0, check_count = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_DONE()                                                                               \
    do {                                                                                           \
        printf("%d checks, %d failed\n", check_count, check_failures);                             \
        return check_failures ? 1 : 0;                                                             \
    } while (0)

#define SKIP_CODE 77

#endif
