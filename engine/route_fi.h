/* FlashInfer's route family: its CUDA-core batch decode (flashinfer) and its
 * tensor-core batch prefill kernel with one query token a row (flashinfer_tc), each
 * planned by the mirror of FlashInfer's own planner (kernels/pkvk_plan.h). */
#ifndef PKV_ROUTE_FI_H
#define PKV_ROUTE_FI_H

#include "routes.h"

extern const pkv_route_ops pkv_route_ops_FLASHINFER, pkv_route_ops_FLASHINFER_TC;

#endif
