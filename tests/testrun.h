/* Running an experiment given as JSON text, for end-to-end tests. */
#ifndef PKV_TESTRUN_H
#define PKV_TESTRUN_H

#include "runner.h"

/* The calibration file the tests use. */
#define TEST_CALIBRATION PKV_SOURCE_DIR "/experiments/calibration/default.json"

/* Format the experiment (printf-style), parse it and run it quietly with recording.
 * sum and resolved (a copy of /config/resolved, caller frees) may be NULL. Returns 0,
 * or -1 with e saying what failed (parsing or running). */
int test_run_json(pkv_summary *sum, char **resolved, pkv_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
