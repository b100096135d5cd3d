#include "pkv_err.h"

#include <stdarg.h>
#include <stdio.h>

int pkv_fail(pkv_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}
