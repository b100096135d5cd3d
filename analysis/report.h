/* pkvsim report: tables over runs. Runs are grouped by (experiment name, route
 * policy, backend); each group's summary values are given as mean +/- sample standard
 * deviation over its runs (seeds), with decode throughput as a ratio to the baseline
 * policy's group of the same experiment and backend. */
#ifndef PKV_REPORT_H
#define PKV_REPORT_H

/* argv[0] is "report". Returns the process exit code. */
int pkv_report_main(int argc, char **argv);

#endif
