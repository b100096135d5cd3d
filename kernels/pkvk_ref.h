/* pkvk: the references every route is checked against (CPU FP32, GPU FP32) and the
 * CPU mirror of the GPU algorithm. */
#ifndef PKVK_REF_H
#define PKVK_REF_H

#include <stddef.h>
#include <stdint.h>

#include "pkvk_core.h"
#include "pkvk_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU reference and mirror (host pointers) ------------------------------------ */
/* Plain FP32 attention: o [n_rows][hq][d] ([n_rows][q_len][hq][d] for a verify step's
 * query tokens, each over the keys up to its own position). Allocates nothing;
 * PKVK_ERR_UNSUPPORTED for a head dimension above PKVK_MAX_HEAD_DIM; PKVK_ERR_INVALID for
 * a row with fewer keys than query tokens. */
enum { PKVK_MAX_HEAD_DIM = 512 };
int pkvk_cpu_reference(const pkvk_batch *b, float *o);
/* The same algorithm the GPU runs, in plain C: each CTA's online-softmax partial
 * state over its token range (`attend`: the plan's route family's, as the engine's
 * route table names it), then the segmented merge (a row of one slot: its state
 * written out). part: workspace of pkvk_partial_floats(shape, plan->n_slots) floats a
 * query token (times q_len). o as above; a verify step's query tokens each attend the
 * plan's ranges up to their own position (the plan is the decode step's, by the rows'
 * keys). */
typedef int (*pkvk_cpu_attend)(const pkvk_batch *b, const pkvk_plan *p, float *part);
int pkvk_cpu_run(const pkvk_batch *b, const pkvk_plan *p, pkvk_cpu_attend attend, float *part,
                 float *o);
/* The families' CPU CTAs: ref_paged's (each row whole, in its one slot), pkv_bucket's
 * (each bucket's rows in its even splits), FlashInfer's (each row in chunks of
 * chunk_tokens), PersistentKV's work queue (its tasks; a counts-only plan is refused). */
int pkvk_cpu_attend_whole(const pkvk_batch *b, const pkvk_plan *p, float *part);
int pkvk_cpu_attend_buckets(const pkvk_batch *b, const pkvk_plan *p, float *part);
int pkvk_cpu_attend_chunks(const pkvk_batch *b, const pkvk_plan *p, float *part);
int pkvk_cpu_attend_tasks(const pkvk_batch *b, const pkvk_plan *p, float *part);
size_t pkvk_partial_floats(const pkvk_shape *s, int32_t n_slots);
/* Max and mean of |o - ref| over n elements, o given as floats (o32) or as 16-bit
 * values of type o16_dtype, FP16 or BF16 (o16; pass NULL for the other). A NaN in o (an
 * unwritten output) makes max NaN. */
void pkvk_compare(const float *o32, const uint16_t *o16, int o16_dtype, const float *ref, size_t n,
                  double *max_err, double *mean_err);

/* FP32 GPU reference into o32 (device, float [n_rows][hq][d], [n_rows][q_len][hq][d] for a
 * verify step's query tokens): one launch on the context's stream, nothing allocated (head
 * dim up to 256; rows of at least q_len keys, unchecked: the lengths are on the device). */
int pkvk_gpu_reference(const pkvk_ctx *c, const pkvk_batch *b, float *o32);

#ifdef __cplusplus
}
#endif
#endif
