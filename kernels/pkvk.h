/* pkvk: paged decode-attention kernels behind a C API.
 *
 * Layout (the PersistentKV study's): K and V caches are [n_pages][hkv][page_size][d] of
 * the shape's KV type (FP16, BF16; FP8 E4M3 with a scale per page and KV head on the CPU
 * side); Q and O are [n_rows][hq][d] of its type (FP16, BF16); each row has a
 * block table row (logical page -> physical page) and a true length seq_lens[i].
 * A CTA computes all G = hq/hkv query heads that share one KV head.
 *
 * Plan and run are split: the host builds a pkvk_plan (integer offsets only), the
 * device side only launches. No CUDA type appears here. Without CUDA only the
 * host parts (plans, the CPU reference and mirror, the element types) and the device query are
 * built: pkvk_device_count() is 0 and pkvk_last_error() says why.
 *
 * This header holds the shared types (status, shape, batch, element types) and the device
 * query; each job has its own header, all included here:
 *   pkvk_plan.h   plans and the host planners' mechanism (tasks, buckets, FlashInfer's
 *                 planners mirrored);
 *   pkvk_ref.h    the CPU reference and mirror, the FP32 GPU reference;
 *   pkvk_run.h    device memory, the workspace, uploads, launches, the step's
 *                 prologue, prefill's page write, the MLP tail, graph replay;
 *   pkvk_bench.h  timers, step marks, L2 flush, measured ceilings;
 *   pkvk_model.h  the dense part of a served model (norms, GEMMs, RoPE, the head) and
 *                 its prefill, around the routes.
 */
#ifndef PKVK_H
#define PKVK_H

#include "pkvk_bench.h"
#include "pkvk_core.h"
#include "pkvk_model.h"
#include "pkvk_plan.h"
#include "pkvk_ref.h"
#include "pkvk_run.h"

#endif
