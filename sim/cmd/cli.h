/* The pkvsim command-line program's pieces (sim/cmd/main.c dispatches). */
#ifndef PKV_CLI_H
#define PKV_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pkv_files.h"
#include "fleet.h"

/* A command's options, one row each; pkv_cli_options parses argv by the table. */
typedef enum pkv_cli_kind {
    PKV_CLI_STRING = 0, /* dst: const char **, the value */
    PKV_CLI_FLAG,       /* dst: int *, set to 1 */
    PKV_CLI_BITS,       /* dst: unsigned *, ORed with `most` */
    PKV_CLI_COUNT,      /* dst: int *, a count in 1..most */
    PKV_CLI_LIST,       /* dst: pkv_cli_list *, repeatable, at most `most` values */
} pkv_cli_kind;

typedef struct pkv_cli_list {
    const char **v;
    int n;
} pkv_cli_list;

typedef struct pkv_cli_opt {
    const char *name; /* the long name, without "--" */
    char letter;      /* the short one (0: none) */
    pkv_cli_kind kind;
    void *dst;
    int most;
} pkv_cli_opt;

/* Parse argv's options (getopt_long; --help and -h built in: help() prints the usage).
 * The operands start at optind afterwards. Returns -1 to go on, else the exit code: 0
 * after --help, 2 after a bad option (the message names cmd). */
int pkv_cli_options(const char *cmd, int argc, char **argv, const pkv_cli_opt *opts, int n,
                    void (*help)(void));

/* A non-negative decimal integer; -1 on anything else. */
int pkv_cli_parse_u64(const char *s, uint64_t *out);
/* An option's count in 1..most; -1 (with the message printed) on anything else. */
int pkv_cli_parse_count(const char *cmd, const char *opt, const char *s, int most, int *out);
/* --rows LIST: up to cap comma-separated token widths in 1..8192 into out; *n gets
 * their count. Prints the error (naming cmd) and returns -1 on bad input. */
int pkv_cli_parse_widths(const char *cmd, const char *s, int *out, int cap, int *n);
/* The one EXPERIMENT.json argument left after the options (optind), loaded, with
 * --seed applied. Returns 0, or the exit code (the message is printed). */
int pkv_cli_load_experiment(int argc, char **argv, const char *cmd, const char *seed,
                            pkv_config *cfg);
void pkv_cli_join_args(char *buf, size_t n, int argc, char **argv);

/* A command's output file (a table, a CSV), written whole or not at all (pkv_out: under a
 * temporary name, renamed at close). open: the stream, or NULL with "pkvsim CMD: cannot
 * write PATH: why" printed; close: keeps the file where rc is 0 and every write
 * succeeded, else removes it; returns rc, or 1 with the message printed where the file
 * could not be written. A closed or never opened o (o->f NULL) is left alone. */
FILE *pkv_cli_out_open(const char *cmd, pkv_out *o, const char *path);
int pkv_cli_out_close(const char *cmd, pkv_out *o, int rc);
/* printf to each of outs[0] and outs[1] that is not NULL (a table to stdout and its file). */
void pkv_cli_printf2(FILE *const outs[2], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Now, in UTC, as strftime's fmt gives it, into buf[32]; buf returned. */
const char *pkv_cli_utc(char *buf, const char *fmt);

/* The run command's options that override an experiment's keys (NULL: not given). */
typedef struct pkv_cli_overrides {
    const char *output, *backend, *seed, *route, *calibration;
    const char *slo; /* "ttft=MS,tpot=MS,e2el=MS" (any of them) */
} pkv_cli_overrides;
/* Apply them to a loaded experiment and resolve it again. Returns 0, or 1 with the
 * message printed. */
int pkv_cli_apply(pkv_config *cfg, const pkv_cli_overrides *o);

/* `pkvsim run` of one fleet under mpirun (more than one rank): MPI started, *r the
 * ranks' exchange (sim/fleet.h). -1 with the message printed (a build without MPI). */
int pkv_cli_ranks_start(const pkv_ranks **r);
/* MPI finished; after a failure (status: the exit status, nonzero) the job aborted with
 * it, since the other ranks wait in an exchange. */
void pkv_cli_ranks_end(int status);

int pkv_cmd_workload(int argc, char **argv);
int pkv_cmd_bench_sim(int argc, char **argv);
int pkv_cmd_bench_traces(int argc, char **argv);
int pkv_cmd_bench_fleet(int argc, char **argv);
/* Run run(arg, result) in a child process (so that its peak RSS is its own) and copy
 * its result (size bytes) back; -1 when the child failed. */
int pkv_bench_in_child(void (*run)(const void *arg, void *result), const void *arg, void *result,
                       size_t size);
int pkv_cmd_report(int argc, char **argv);
/* pkvsim fit (sim/cmd/cmd_fit.c); with --engine, an engine profile's fit
 * (sim/cmd/cmd_validate.c). */
int pkv_cmd_fit(int argc, char **argv);
int pkv_cmd_fit_engine(int argc, char **argv);
/* pkvsim validate (sim/cmd/cmd_validate.c). */
int pkv_cmd_validate(int argc, char **argv);
/* pkvsim plan: the fewest replicas and the cheapest configuration meeting a workload's
 * SLOs at each load (sim/cmd/cmd_plan.c); stop: set by a signal. */
int pkv_cmd_plan(int argc, char **argv, volatile sig_atomic_t *stop);

#endif
