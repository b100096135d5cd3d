/* An invariant check that is never compiled out. */
#ifndef PKV_ASSERT_H
#define PKV_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define PKV_ASSERT(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "pkvsim: internal error: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
