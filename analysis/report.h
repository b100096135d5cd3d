/* Report tables over runs (output files, and the points of sweep files). Runs are
 * grouped by their resolved configuration less the seed, the output name, the policy
 * and the backend (never by name alone), and by policy and backend; the keys whose
 * values differ between runs are columns, and groups come in the numeric order of
 * them. Each group's summary values are given as mean +/- sample standard deviation
 * over its runs (seeds), with decode throughput as a ratio to the baseline policy's
 * group of the same configuration and backend: of the means, and paired by seed (the
 * mean of the runs' ratios to the baseline run of their seed, with a 95% Student t
 * interval, GSL), and TPOT p50 as a ratio of the means. A fleet's runs add a table per
 * pool (its /replicas summed, the TTFT p50 of the requests it prefilled and the TPOT p50 of
 * those it decoded), in the JSON as each group's "pools". */
#ifndef PKV_REPORT_H
#define PKV_REPORT_H

#include <stdio.h>

#include <cJSON.h>

#include "pkv_err.h"

/* The tables a report adds to its first. */
enum {
    PKV_REPORT_ROUTES = 1u,   /* wall and device throughput ratios paired by seed, max and
                                 mean error, the routes the steps ran: the study's Table 2 */
    PKV_REPORT_COUNTERS = 2u, /* the structural counters per step: launches, merge launches,
                                 CTA work per SM, useful KV and merge bytes: Table 4 */
};

/* Read the n output files and write the Markdown table to `table` (and the tables
 * the bits of `tables` add, PKV_REPORT_*) and, when csv is not NULL, the first table's
 * numbers as CSV (times in seconds, their columns named NAME_s_mean); when json is not
 * NULL, every group's figures (the counters included) as one JSON document; with best
 * (a figure's name), the best group of each policy and backend by it (a sweep's best
 * point), or ("cheapest") the one of fewest GPUs that meets its SLOs. A group meets its
 * SLOs (the experiment's slo section) when its runs served every request and its mean
 * SLO attainment is at least attain (a fraction). Fails naming the file that cannot be
 * read. */
int pkv_report_write(const char *const *paths, int n, const char *baseline, unsigned tables,
                     const char *best, double attain, FILE *table, FILE *csv, FILE *json,
                     pkv_err *e);

/* A list of fleet pools (a resolved configuration's, or a plan's layout) as text, each
 * pool's name, replicas, role and the GPU its calibration file names ("p 1 prefill h200 +
 * d 2 decode h200"; owned); NULL when v is not one. */
char *pkv_report_pools_text(const cJSON *v);

#endif
