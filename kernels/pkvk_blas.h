// cuBLAS, opened on first use (kernels/ only: its .cu files). A program linked against
// cuBLAS maps and relocates it at start: 0.09 s and 200 MB of every pkvsim process on the
// 2-core machine, the model backend's, `report`'s and a GPU-less machine's alike. Opened
// (dlopen) when the first handle is made, its functions are cuBLAS's own, called through
// pkvk_cublas's pointers (their types from cublas_v2.h).
#ifndef PKVK_BLAS_H
#define PKVK_BLAS_H

#include <cublas_v2.h>

// The exported overloads (cublas_v2.h adds inline ones taking a cudaDataType compute
// type in C++): a type that no longer matches the header fails to compile, below.
typedef cublasStatus_t (*pkvk_gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                          int, int, const void *, const void *, cudaDataType, int,
                                          const void *, cudaDataType, int, const void *, void *,
                                          cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*pkvk_gemm_strided_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                               int, int, int, const void *, const void *,
                                               cudaDataType, int, long long, const void *,
                                               cudaDataType, int, long long, const void *, void *,
                                               cudaDataType, int, long long, int,
                                               cublasComputeType_t, cublasGemmAlgo_t);
static_assert(sizeof(static_cast<pkvk_gemm_ex_fn>(&cublasGemmEx)) &&
                  sizeof(static_cast<pkvk_gemm_strided_fn>(&cublasGemmStridedBatchedEx)),
              "cuBLAS's GEMM types");

typedef struct pkvk_blas_api {
    decltype(&cublasDestroy_v2) destroy;
    pkvk_gemm_ex_fn gemm_ex;
    pkvk_gemm_strided_fn gemm_strided_batched_ex;
    decltype(&cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex;
} pkvk_blas_api;

// Filled when pkvk_blas_handle first succeeds: a handle's holder calls through it.
extern pkvk_blas_api pkvk_cublas;

// A handle on stream st (cuBLAS opened at the first call). Returns a pkvk status; its
// message names the library that could not be opened, or cuBLAS's status.
int pkvk_blas_handle(cublasHandle_t *h, cudaStream_t st);
// A failed cuBLAS call's pkvk status ("WHAT failed: cuBLAS status N").
int pkvk_blas_fail(cublasStatus_t st, const char *what);

#endif
