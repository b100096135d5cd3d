// The served model's row-major GEMM on cuBLAS.
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// C (n x m, row-major, ldc) = A (n x k, row-major, lda) B (k x m, row-major, ldb)
// (+ C with beta = 1), all of type ct: in cuBLAS's column-major terms C^T = B^T A^T.
// An empty product (no rows or columns, or k = 0 onto C) is nothing to do: a mixture of
// experts' model has no dense MLP (its width 0), which cuBLAS would refuse by its ld.
int gemm(cublasHandle_t h, cudaDataType_t ct, int n, int m, int k, const elem16 *A, int lda,
         const elem16 *B, int ldb, elem16 *C, int ldc, float beta) {
    if (n == 0 || m == 0 || (k == 0 && beta == 1.f)) return PKVK_OK;
    const float one = 1.f;
    cublasStatus_t st =
        pkvk_cublas.gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, B, ct, ldb, A, ct, lda,
                            &beta, C, ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? PKVK_OK : pkvk_blas_fail(st, "cublasGemmEx");
}

} // namespace pkvkm
