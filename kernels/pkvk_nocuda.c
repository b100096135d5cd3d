/* Device entry points of a build without CUDA: every one reports that no device
 * exists, so callers take their CPU or model paths. */
#include "pkvk.h"
#include "pkvk_fi.h"

int pkvk_fail_msg(int status, const char *msg) {
    return status; /* pkvk_last_error() already says the build has no CUDA */
}
const char *pkvk_last_error(void) {
    return "pkvsim was built without CUDA (configure with nvcc on PATH, or -DPKV_CUDA=ON)";
}
int pkvk_device_count(void) {
    return 0;
}
int pkvk_device_info_get(pkvk_device_info *out) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_malloc(void **p, size_t bytes) {
    *p = 0;
    return PKVK_ERR_NO_DEVICE;
}
void pkvk_free(void *p) {}
int pkvk_h2d(void *dst, const void *src, size_t bytes) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_d2h(void *dst, const void *src, size_t bytes) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_memset(void *dst, int value, size_t bytes) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_sync(void) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_workspace_create(pkvk_workspace **ws, const pkvk_shape *s, int32_t cap_rows,
                          int32_t cap_slots, int32_t cap_tasks) {
    *ws = 0;
    return PKVK_ERR_NO_DEVICE;
}
void pkvk_workspace_destroy(pkvk_workspace *ws) {}
int pkvk_plan_upload(pkvk_workspace *ws, const pkvk_plan *p) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_workspace_flashinfer(pkvk_workspace *ws, size_t cap_pages) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_workspace_reserve(pkvk_workspace *ws, size_t extra_bytes) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_launch(pkvk_workspace *ws, const pkvk_batch *b, const pkvk_plan *p, int *launches) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_gpu_reference(const pkvk_batch *b, float *o32) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_timer_start(void) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_timer_stop(float *ms) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_flush_l2(void) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_time_read(size_t bytes, int reps, float *ms) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_measure_ceilings(pkvk_ceilings *c) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_host_alloc(void **p, size_t bytes) {
    *p = 0;
    return PKVK_ERR_NO_DEVICE;
}
void pkvk_host_free(void *p) {}
int pkvk_h2d_async(void *dst, const void *src, size_t bytes) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_mark(int k) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_mark_elapsed(int a, int b, float *ms) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_step_upload(pkvk_workspace *ws, const pkvk_plan *p, const pkvk_step *step,
                     pkvk_upload_mode mode, int *copies) {
    if (copies) *copies = 0;
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_occupancy(int d, int G, int *ctas_per_sm) {
    *ctas_per_sm = 0;
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_mlp_create(pkvk_mlp **m, int hidden, int inter, int cap_rows, const uint16_t *w,
                    size_t w_n) {
    *m = 0;
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_mlp_run(pkvk_mlp *m, int rows, const uint16_t *x, const uint16_t **out) {
    return PKVK_ERR_NO_DEVICE;
}
void pkvk_mlp_destroy(pkvk_mlp *m) {}
int pkvk_graph_begin(void) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_graph_end(pkvk_graph **g, int *reused) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_graph_launch(pkvk_graph *g) {
    return PKVK_ERR_NO_DEVICE;
}
void pkvk_graph_abort(void) {}
void pkvk_graph_destroy(pkvk_graph *g) {}
int pkvk_fill_pages(const pkvk_shape *s, uint16_t *k_cache, uint16_t *v_cache, const int32_t *pages,
                    int32_t n_pages, const uint16_t *blk_k, const uint16_t *blk_v, size_t blk_n) {
    return PKVK_ERR_NO_DEVICE;
}
int pkvk_pack_csr(pkvk_workspace *ws, const pkvk_batch *b) {
    return PKVK_ERR_NO_DEVICE;
}
