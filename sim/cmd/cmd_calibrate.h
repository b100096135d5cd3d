/* pkvsim calibrate: measure the cost model's constants on the present GPU. */
#ifndef PKV_CALIBRATE_H
#define PKV_CALIBRATE_H

/* argv[0] is "calibrate". Returns the process exit code. */
int pkv_calibrate_main(int argc, char **argv);

#endif
