/* The error type of every layer above the kernels: a message buffer passed down by
 * callers, filled by the first failure; functions return 0 or -1. */
#ifndef PKV_ERR_H
#define PKV_ERR_H

typedef struct pkv_err {
    char msg[1024];
} pkv_err;

/* Write the message into e; returns -1, so that `return pkv_fail(e, ...)` reads. */
int pkv_fail(pkv_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
