/* Running an experiment given as JSON text, for end-to-end tests. */
#ifndef PKV_TESTRUN_H
#define PKV_TESTRUN_H

#include "runner.h"

#include <gsl/gsl_rng.h>

/* The calibration file the tests use. */
#define TEST_CALIBRATION PKV_SOURCE_DIR "/experiments/calibration/default.json"

/* Format the experiment (printf-style), parse it and run it quietly with recording.
 * sum and resolved (a copy of /config/resolved, caller frees) may be NULL. Returns 0,
 * or -1 with e saying what failed (parsing or running). */
int test_run_json(pkv_summary *sum, char **resolved, pkv_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A Mersenne Twister stream seeded with seed (the caller frees it). */
gsl_rng *test_rng(unsigned long seed);

/* An empty file made from tmpl ("/tmp/NAME_XXXXXX", its name written back): the run
 * outputs' path a test then removes. */
void test_temp_file(char *tmpl);

/* The study layer's shape (experiments/models/study-layer.json) at page size ps, as a
 * pkv_model's initializer. */
#define TEST_STUDY_LAYER(ps)                                                                       \
    {                                                                                              \
        .name = "study-layer", .layers = 1, .hq = 32, .hkv = 8, .head_dim = 128, .tp = 1,          \
        .page_size = (ps)                                                                          \
    }

#endif
