/* pkvsim bench kernels: isolated-kernel benchmark against measured ceilings. */
#ifndef PKV_KBENCH_H
#define PKV_KBENCH_H

/* argv[0] is "kernels". Returns the process exit code. */
int pkv_bench_kernels_main(int argc, char **argv);

#endif
