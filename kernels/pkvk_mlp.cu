// The gated MLP tail: two cuBLAS GEMMs around a fused SiLU-times-up kernel.
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>

#include "pkvk_blas.h"
#include "pkvk_cuda.h"

struct pkvk_mlp {
    cudaStream_t stream;
    cublasHandle_t h;
    int hidden, inter, cap_rows;
    __half *w_gu, *w_down; // [hidden][2 * inter], [inter][hidden] (row-major)
    __half *y, *a, *z;     // [cap_rows][2 * inter], [cap_rows][inter], [cap_rows][hidden]
};

// C (n x m, row-major) = A (n x k, row-major) B (k x m, row-major): in cuBLAS's
// column-major terms C^T = B^T A^T, so B goes first.
static int gemm(cublasHandle_t h, int n, int m, int k, const __half *A, const __half *B,
                __half *C) {
    const float one = 1.f, zero = 0.f;
    cublasStatus_t s = pkvk_cublas.gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, B,
                                           CUDA_R_16F, m, A, CUDA_R_16F, k, &zero, C, CUDA_R_16F, m,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? PKVK_OK : pkvk_blas_fail(s, "cublasGemmEx");
}

extern "C" int pkvk_mlp_create(const pkvk_ctx *c, pkvk_mlp **out, int hidden, int inter,
                               int cap_rows, const uint16_t *w, size_t w_n) {
    *out = nullptr;
    pkvk_mlp *m = (pkvk_mlp *)calloc(1, sizeof *m);
    if (!m) return PKVK_ERR_OUT_OF_MEMORY;
    m->stream = c->stream;
    m->hidden = hidden, m->inter = inter, m->cap_rows = cap_rows;
    size_t ngu = (size_t)hidden * 2 * inter, nd = (size_t)inter * hidden;
    int rc = PKVK_OK;
    if (!rc) rc = pkvk_malloc((void **)&m->w_gu, ngu * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->w_down, nd * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->y, (size_t)cap_rows * 2 * inter * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->a, (size_t)cap_rows * inter * 2);
    if (!rc) rc = pkvk_malloc((void **)&m->z, (size_t)cap_rows * hidden * 2);
    for (size_t off = 0; !rc && off < ngu; off += w_n)
        rc = pkvk_h2d(m->w_gu + off, w, 2 * (ngu - off < w_n ? ngu - off : w_n));
    for (size_t off = 0; !rc && off < nd; off += w_n)
        rc = pkvk_h2d(m->w_down + off, w, 2 * (nd - off < w_n ? nd - off : w_n));
    if (!rc) {
        rc = pkvk_blas_handle(&m->h, m->stream);
    }
    return pkvk_created(rc, m, out, pkvk_mlp_destroy);
}

extern "C" int pkvk_mlp_run(pkvk_mlp *m, int rows, const uint16_t *x, const uint16_t **out) {
    if (rows > m->cap_rows) return pkvk_fail_msg(PKVK_ERR_INVALID, "MLP rows over capacity");
    if (rows == 0) return PKVK_OK;
    int rc = gemm(m->h, rows, 2 * m->inter, m->hidden, (const __half *)x, m->w_gu, m->y);
    if (rc) return rc;
    rc = pkvk_silu_mul(m->stream, m->y, m->a, rows, m->inter);
    if (!rc) rc = gemm(m->h, rows, m->hidden, m->inter, m->a, m->w_down, m->z);
    if (!rc) *out = (const uint16_t *)m->z;
    return rc;
}

extern "C" void pkvk_mlp_destroy(pkvk_mlp *m) {
    if (!m) return;
    if (m->h) pkvk_cublas.destroy(m->h);
    pkvk_free_each(m->w_gu, m->w_down, m->y, m->a, m->z);
    free(m);
}
