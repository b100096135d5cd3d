/* pkvsim bench model and bench allreduce (their mains). */
#ifndef PKV_CMD_BMODEL_H
#define PKV_CMD_BMODEL_H

/* argv[0] is "model" (after "bench"). Returns the process exit code. */
int pkv_bench_model_main(int argc, char **argv);
/* argv[0] is "allreduce" (after "bench"): sim/cmd/cmd_ballreduce.c. */
int pkv_bench_allreduce_main(int argc, char **argv);

#endif
