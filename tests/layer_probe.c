/* Must not compile: the engine's target links kernels and base only, so a header of
 * the simulator (a layer above) is not on its include path. */
#include "sim.h"

int pkv_layer_probe(void);
int pkv_layer_probe(void) {
    return 0;
}
