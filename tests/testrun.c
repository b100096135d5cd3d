#include "testrun.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int test_run_json(pkv_summary *sum, char **resolved, pkv_err *e, const char *fmt, ...) {
    char *text = malloc(8192);
    if (!text) return pkv_fail(e, "out of memory");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, 8192, fmt, ap);
    va_end(ap);
    pkv_config cfg;
    if (pkv_config_parse(&cfg, text, "test.json", e)) return -1; /* takes the text */
    pkv_run_opts o = {.quiet = 1, .record = 1};
    pkv_summary local;
    int rc = pkv_run_experiment(&cfg, &o, sum ? sum : &local, e);
    if (resolved) *resolved = strdup(cfg.resolved);
    pkv_config_free(&cfg);
    return rc;
}

void test_temp_file(char *tmpl) {
    int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
}

gsl_rng *test_rng(unsigned long seed) {
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r) gsl_rng_set(r, seed);
    return r;
}
