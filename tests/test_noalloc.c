/* The step path allocates nothing: every route policy's steps on the model and cpu
 * backends (and the cuda backend where a GPU is usable), after the first, make no
 * host allocation (malloc, calloc, realloc, aligned allocations) and no device or
 * pinned allocation (cudaMalloc and friends). The allocators are wrapped at link
 * time (-Wl,--wrap), so every call from pkvsim's own code (and the statically linked
 * CUDA runtime's) is counted; the steps are counted on a second pass over the same
 * sequence, after each kernel's first launch has loaded it. Steps go
 * through the batch shapes a run makes: rows joining and leaving, lengths growing
 * across page boundaries, block-table updates, every step checked against the
 * reference on the backends that compute outputs. */
#include "check.h"
#include "engine.h"
#include "testrun.h"

#include <execinfo.h>
#include <stdlib.h>
#include <string.h>

static volatile int counting;
static long allocs, shown;

/* A counted allocation: its call stack goes to stderr (addresses; addr2line -e
 * test_noalloc names them), the first few times. */
#define COUNT()                                                                                    \
    do {                                                                                           \
        if (counting) {                                                                            \
            allocs++;                                                                              \
            if (shown++ < 4) {                                                                     \
                void *pcs[16];                                                                     \
                counting = 0;                                                                      \
                backtrace_symbols_fd(pcs, backtrace(pcs, 16), 2);                                  \
                counting = 1;                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

void *__real_malloc(size_t n);
void *__real_calloc(size_t m, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t m, size_t n);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n) {
    COUNT();
    return __real_malloc(n);
}
void *__wrap_calloc(size_t m, size_t n) {
    COUNT();
    return __real_calloc(m, n);
}
void *__wrap_realloc(void *p, size_t n) {
    COUNT();
    return __real_realloc(p, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    COUNT();
    return __real_posix_memalign(p, a, n);
}
#ifdef PKV_HAVE_CUDA
/* The CUDA runtime's allocators, as the kernel layer calls them. */
int __real_cudaMalloc(void **p, size_t n);
int __real_cudaMallocHost(void **p, size_t n);
int __real_cudaHostAlloc(void **p, size_t n, unsigned f);
int __wrap_cudaMalloc(void **p, size_t n);
int __wrap_cudaMallocHost(void **p, size_t n);
int __wrap_cudaHostAlloc(void **p, size_t n, unsigned f);
int __wrap_cudaMalloc(void **p, size_t n) {
    COUNT();
    return __real_cudaMalloc(p, n);
}
int __wrap_cudaMallocHost(void **p, size_t n) {
    COUNT();
    return __real_cudaMallocHost(p, n);
}
int __wrap_cudaHostAlloc(void **p, size_t n, unsigned f) {
    COUNT();
    return __real_cudaHostAlloc(p, n, f);
}
#endif

enum { CAP_ROWS = 12, STEPS = 150 };

/* Steps of a batch whose rows come and go and grow: row count cycles through 1..cap,
 * each row's length grows by one a step from its own start, and a row crossing a
 * page boundary gets a new table entry (a dirty row, as the allocator makes them). */
static long steps_allocs(pkv_backend_kind kind, const pkv_model *m, const char *policy,
                         int32_t max_len, int check, pkv_err *e) {
    const pkvk_shape sh = pkv_model_attn_shape(m), *s = &sh;
    pkv_calib cal;
    if (pkv_calib_load(&cal, TEST_CALIBRATION, NULL, e)) return -1;
    cal.min_context = 0; /* let adaptive pick PersistentKV routes too */
    const int32_t bt_stride = (max_len + s->page_size - 1) / s->page_size;
    pkv_backend_spec bs = {
        .kind = kind, .kv_pages = CAP_ROWS * bt_stride + 8, .bt_stride = bt_stride, .seed = 7};
    pkv_engine eng;
    const pkv_engine_opts eo = {.policy = policy,
                                .bucket_mode = PKV_BUCKET_MODE_EXACT,
                                .cap_rows = CAP_ROWS,
                                .clock = kind == PKV_BACKEND_MODEL ? PKV_CLOCK_PREDICTED
                                                                   : PKV_CLOCK_WALL,
                                .check_every = check};
    if (pkv_engine_init(&eng, m, &cal, &eo, &bs, e)) {
        pkv_calib_free(&cal);
        return -1;
    }
    static int32_t bt[CAP_ROWS * 375]; /* bt_stride is at most 375 (page size 8) */
    int32_t lens[CAP_ROWS], dirty[CAP_ROWS], from[CAP_ROWS];
    for (int32_t i = 0; i < CAP_ROWS * bt_stride; i++) bt[i] = i; /* each row its own pages */
    for (int32_t i = 0; i < CAP_ROWS; i++) lens[i] = 1 + (100 + 211 * i) % (max_len - 1);
    /* Two passes over the same sequence, counted in the second: the CUDA runtime loads
     * a kernel's module at its first launch (lazy loading), which allocates once. */
    long n = 0;
    for (int step = 0; step < 2 * STEPS; step++) {
        int32_t rows = 1 + (step / 7) % CAP_ROWS, nd = 0;
        for (int32_t i = 0; i < rows; i++) {
            lens[i] = lens[i] % (max_len - 1) + 1;
            if (step == 0 || (lens[i] - 1) % s->page_size == 0) {
                dirty[nd++] = i;
                from[i] = step == 0 ? 0 : (lens[i] - 1) / s->page_size;
            }
        }
        pkv_batch_view v = {rows, lens, bt, bt_stride, dirty, nd, from, NULL, 0};
        pkv_step_rec rec = {.index = (uint64_t)step};
        double adv;
        counting = step >= STEPS;
        allocs = 0;
        int rc = pkv_engine_step(&eng, &v, &rec, &adv, e);
        counting = 0;
        if (rc) {
            n = -1;
            break;
        }
        n += allocs;
    }
    pkv_engine_free(&eng);
    pkv_calib_free(&cal);
    return n;
}

static const char *const policies[] = {"adaptive",      "oracle",    "ref_paged",  "pkv_bucket",
                                       "pkv_workqueue", "pkv_fused", "flashinfer", "flashinfer_tc"};
/* The study layer, a small layer for the cpu backend, and small full models (two layers:
 * their dense part around the routes in every decode step; the cpu backend's a narrower one). */
static const pkv_model small = {.name = "small",
                                .layers = 1,
                                .hq = 8,
                                .hkv = 2,
                                .head_dim = 64,
                                .tp = 1,
                                .page_size = 8},
                       study = TEST_STUDY_LAYER(16),
                       tiny = {.name = "tiny",
                               .layers = 2,
                               .hidden = 512,
                               .hq = 8,
                               .hkv = 2,
                               .head_dim = 128,
                               .inter = 1024,
                               .vocab = 1000,
                               .tp = 1,
                               .page_size = 16,
                               .rope_theta = 10000,
                               .norm_eps = 1e-5};

static void model_backend_steps_allocate_nothing(void) {
    pkv_err e;
    for (int k = 0; k < 8; k++) {
        long a = steps_allocs(PKV_BACKEND_MODEL, &study, policies[k], 3000, 0, &e);
        CHECK(a == 0, "model backend, %s: %ld allocations in steps (%s)", policies[k], a,
              a < 0 ? e.msg : "");
    }
}

/* The study layer and a full model, every route, checked every tenth step. */
static void cpu_backend_steps_allocate_nothing(void) {
    pkv_err e;
    pkv_model tiny_cpu = tiny;
    snprintf(tiny_cpu.name, sizeof tiny_cpu.name, "tiny-cpu");
    tiny_cpu.hidden = 128, tiny_cpu.inter = 256, tiny_cpu.vocab = 500;
    tiny_cpu.hq = 4, tiny_cpu.head_dim = 64, tiny_cpu.page_size = 8;
    for (int k = 0; k < 8; k++) {
        long a = steps_allocs(PKV_BACKEND_CPU, &small, policies[k], 240, 10, &e);
        CHECK(a == 0, "cpu backend, %s: %ld allocations in steps (%s)", policies[k], a,
              a < 0 ? e.msg : "");
        if (!strcmp(policies[k], "oracle")) continue; /* not with a full model */
        a = steps_allocs(PKV_BACKEND_CPU, &tiny_cpu, policies[k], 240, 10, &e);
        CHECK(a == 0, "cpu backend, model tiny-cpu, %s: %ld allocations in steps (%s)", policies[k],
              a, a < 0 ? e.msg : "");
    }
}

/* Host and pinned or device allocations alike, where a GPU is usable. */
static void cuda_backend_steps_allocate_nothing(void) {
    pkv_err e;
    if (pkvk_device_count() <= 0) {
        printf("no GPU: the cuda backend's steps were not counted\n");
        return;
    }
    for (int k = 0; k < 8; k++) {
        if (!strncmp(policies[k], "flashinfer", 10) && !pkvk_flashinfer_built()) continue;
        long a = steps_allocs(PKV_BACKEND_CUDA, &study, policies[k], 3000, 10, &e);
        CHECK(a == 0, "cuda backend, %s: %ld allocations in steps (%s)", policies[k], a,
              a < 0 ? e.msg : "");
        printf("cuda backend, %s: %ld allocations in %d steps\n", policies[k], a, STEPS);
        if (!strcmp(policies[k], "oracle")) continue; /* not with a full model */
        a = steps_allocs(PKV_BACKEND_CUDA, &tiny, policies[k], 3000, 10, &e);
        CHECK(a == 0, "cuda backend, model tiny, %s: %ld allocations in steps (%s)", policies[k], a,
              a < 0 ? e.msg : "");
        printf("cuda backend, model tiny, %s: %ld allocations in %d steps\n", policies[k], a,
               STEPS);
    }
}

static const pkv_test_case cases[] = {
    PKV_CASE(model_backend_steps_allocate_nothing),
    PKV_CASE(cpu_backend_steps_allocate_nothing),
    PKV_CASE(cuda_backend_steps_allocate_nothing),
};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    return pkv_test_main(cases, (int)(sizeof cases / sizeof *cases), argc, argv);
}
