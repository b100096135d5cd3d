/* Report tables over runs. Runs are grouped by (experiment name, route policy,
 * backend); each group's summary values are given as mean +/- sample standard
 * deviation over its runs (seeds), with decode throughput as a ratio to the baseline
 * policy's group of the same experiment and backend. */
#ifndef PKV_REPORT_H
#define PKV_REPORT_H

#include <stdio.h>

#include "pkv_err.h"

/* Read the n output files and write the Markdown table to `table` and, when csv is
 * not NULL, the same numbers as CSV. Fails naming the file that cannot be read. */
int pkv_report_write(const char *const *paths, int n, const char *baseline, FILE *table, FILE *csv,
                     pkv_err *e);

#endif
