// cuBLAS opened on first use (pkvk_blas.h).
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "pkvk_blas.h"
#include "pkvk_cuda.h"

#define PKVK_STR_(x) #x
#define PKVK_STR(x)  PKVK_STR_(x)

pkvk_blas_api pkvk_cublas;

static decltype(&cublasCreate_v2) blas_create;
static decltype(&cublasSetStream_v2) blas_set_stream;
static char load_error[512]; // empty: loaded

// The soname of the toolkit pkvsim was built with, then the library's path at build time
// (PKVK_CUBLAS_PATH: where no loader path names the toolkit's folder).
static void load(void) {
    const char *names[] = {"libcublas.so." PKVK_STR(CUBLAS_VER_MAJOR),
#ifdef PKVK_CUBLAS_PATH
                           PKVK_CUBLAS_PATH
#endif
    };
    void *lib = nullptr;
    for (const char *n : names)
        if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
        snprintf(load_error, sizeof load_error, "cuBLAS could not be opened: %s", dlerror());
        return;
    }
    const struct {
        void **at;
        const char *name;
    } syms[] = {{(void **)&blas_create, "cublasCreate_v2"},
                {(void **)&blas_set_stream, "cublasSetStream_v2"},
                {(void **)&pkvk_cublas.destroy, "cublasDestroy_v2"},
                {(void **)&pkvk_cublas.gemm_ex, "cublasGemmEx"},
                {(void **)&pkvk_cublas.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx"},
                {(void **)&pkvk_cublas.gemm_grouped_batched_ex, "cublasGemmGroupedBatchedEx"}};
    for (const auto &s : syms)
        if (!(*s.at = dlsym(lib, s.name))) {
            snprintf(load_error, sizeof load_error, "cuBLAS has no %s: %s", s.name, dlerror());
            return;
        }
}

int pkvk_blas_fail(cublasStatus_t st, const char *what) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s failed: cuBLAS status %d", what, (int)st);
    return pkvk_fail_msg(st == CUBLAS_STATUS_ALLOC_FAILED ? PKVK_ERR_OUT_OF_MEMORY : PKVK_ERR_CUDA,
                         msg);
}

int pkvk_blas_handle(cublasHandle_t *h, cudaStream_t st) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    *h = nullptr;
    if (*load_error) return pkvk_fail_msg(PKVK_ERR_CUDA, load_error);
    cublasStatus_t s = blas_create(h);
    if (s == CUBLAS_STATUS_SUCCESS) s = blas_set_stream(*h, st);
    if (s == CUBLAS_STATUS_SUCCESS) return PKVK_OK;
    if (*h) pkvk_cublas.destroy(*h);
    *h = nullptr;
    return pkvk_blas_fail(s, "cublasCreate");
}
