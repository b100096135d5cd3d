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

#ifdef __cplusplus
}
#endif
#endif
