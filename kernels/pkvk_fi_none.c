/* The FlashInfer routes of a build without FlashInfer's headers: every entry point
 * says how to build them. */
#include "pkvk_fi.h"

static const char *const not_built =
    "the FlashInfer routes were not built: run scripts/fetch_flashinfer.sh and configure "
    "with -DPKV_FLASHINFER_DIR=third_party/flashinfer-0.7.4";

int pkvk_flashinfer_built(void) {
    return 0;
}
int pkvk_flashinfer_occupancy(const pkvk_shape *s, int *ctas_per_sm) {
    *ctas_per_sm = 0;
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
int pkvk_fi_create(const pkvk_ctx *c, pkvk_fi **f, const pkvk_shape *s, int32_t cap_rows,
                   size_t cap_pages) {
    *f = 0;
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
void pkvk_fi_destroy(pkvk_fi *f) {}
int pkvk_fi_upload(pkvk_fi *f, const pkvk_plan *p) {
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
int pkvk_fi_pack_csr(pkvk_fi *f, const pkvk_batch *b) {
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
int pkvk_fi_launch(pkvk_fi *f, const pkvk_batch *b, const pkvk_plan *p, int *launches) {
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
size_t pkvk_fi_prefill_bytes(int32_t cap_pieces) {
    return 0;
}
int pkvk_fi_prefill_create(const pkvk_ctx *c, pkvk_fi_prefill **f, int hq, int hkv, int d,
                           int page_size, int dtype, int kv_dtype, int32_t cap_pieces) {
    *f = 0;
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
void pkvk_fi_prefill_destroy(pkvk_fi_prefill *f) {}
int pkvk_fi_prefill_plan(pkvk_fi_prefill *f, int n, const int32_t *qo_indptr,
                         const int32_t *kv_indptr, const int32_t *last, const int32_t *pages) {
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
int pkvk_fi_prefill_run(pkvk_fi_prefill *f, const void *q, const void *k_pool, const void *v_pool,
                        void *o) {
    return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, not_built);
}
