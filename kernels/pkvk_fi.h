/* Internal to kernels/: the FlashInfer routes of a workspace. Built from
 * pkvk_fi.cu when CMake is given FlashInfer's headers, else from pkvk_fi_none.c
 * (every entry point reports that the routes were not built). */
#ifndef PKVK_FI_H
#define PKVK_FI_H

#include "pkvk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pkvk_fi pkvk_fi;

/* Record msg for pkvk_last_error() and return status. */
int pkvk_fail_msg(int status, const char *msg);

/* cap_pages: room in the CSR page list made now (a larger step grows it, waiting
 * for the stream). */
int pkvk_fi_create(const pkvk_ctx *c, pkvk_fi **f, const pkvk_shape *s, int32_t cap_rows,
                   size_t cap_pages);
void pkvk_fi_destroy(pkvk_fi *f);
/* Run FlashInfer's own planner (DecodePlan or PrefillPlan) for the plan's rows and
 * upload its work lists; fails when its partition differs from the plan's mirror. */
int pkvk_fi_upload(pkvk_fi *f, const pkvk_plan *p);
/* FlashInfer's CSR page list (indptr, indices, last-page lengths) from the batch's
 * block table, in one launch. */
int pkvk_fi_pack_csr(pkvk_fi *f, const pkvk_batch *b);
/* Launch the uploaded plan: FlashInfer's kernel, and its merge when split. */
int pkvk_fi_launch(pkvk_fi *f, const pkvk_batch *b, const pkvk_plan *p, int *launches);

/* The model's prefill attention on FlashInfer's batch prefill kernel over the paged
 * cache, causal (pkvk_fi_prefill.cu): prompt pieces of a chunk attend to their
 * prompts' pages up to their own positions; also a verify step on the FlashInfer routes
 * (pkvk_fi.cu: each row's query tokens a piece). Queries and outputs [tokens][hq][d] of
 * type dtype (pkvk_dtype FP16 or BF16), the pages of dtype's type or FP8 E4M3 (kv_dtype;
 * scale 1, or the caller's K scale folded into pkvk_fi_prefill_launch's softmax scale). */
typedef struct pkvk_fi_prefill pkvk_fi_prefill;
/* Device and pinned bytes one takes. At most cap_pieces pieces a plan. */
size_t pkvk_fi_prefill_bytes(int32_t cap_pieces);
int pkvk_fi_prefill_create(const pkvk_ctx *c, pkvk_fi_prefill **f, int hq, int hkv, int d,
                           int page_size, int dtype, int kv_dtype, int32_t cap_pieces);
void pkvk_fi_prefill_destroy(pkvk_fi_prefill *f);
/* Plan n pieces (host arrays): piece k is tokens [qo_indptr[k], qo_indptr[k + 1]) of
 * the chunk and its prompt's pages [kv_indptr[k], kv_indptr[k + 1]) of the device
 * list pages, the last page holding last[k] tokens; its queries are the prompt's
 * last positions. Waits for the stream (the metadata's host buffers are reused). */
int pkvk_fi_prefill_plan(pkvk_fi_prefill *f, int n, const int32_t *qo_indptr,
                         const int32_t *kv_indptr, const int32_t *last, const int32_t *pages);
/* The planned pieces' attention of one layer. Asynchronous. */
int pkvk_fi_prefill_run(pkvk_fi_prefill *f, const void *q, const void *k_pool, const void *v_pool,
                        void *o);
/* As pkvk_fi_prefill_run, over the device page list `pages` (null: the plan's) at softmax
 * scale sm_scale; *launches (if given): FlashInfer's kernel, and its merge when the plan
 * splits. */
int pkvk_fi_prefill_launch(pkvk_fi_prefill *f, const void *q, const void *k_pool,
                           const void *v_pool, void *o, const int32_t *pages, float sm_scale,
                           int *launches);
/* The last plan's partial-output offsets (host, [pieces + 1]): FlashInfer's o_indptr, a
 * piece's query tokens times its KV chunks. */
const int32_t *pkvk_fi_prefill_o_indptr(const pkvk_fi_prefill *f);

#ifdef __cplusplus
}
#endif
#endif
