/* LD_PRELOAD shim: FAIL_AT=N makes the N-th allocation (malloc, calloc, realloc) fail;
 * COUNT_FILE receives the number of allocations made, at exit. SKIP_LIB=NAME[:NAME...]
 * leaves out (neither counts nor fails) the allocations called from a library whose
 * path contains a NAME (libhdf5: its own allocation failures crash inside it).
 * Allocations before main (the libraries' static initializers: CUDA's runtime
 * registering its kernels) are left out too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
static long n, fail_at = -1;
static int started; /* main has been entered */
static const char *skip_lib;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static char boot[1 << 16];
static size_t boot_used;
static int init(void) {
    if (real_malloc) return 1;
    static int in;
    if (in) return 0;
    in = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    const char *f = getenv("FAIL_AT");
    if (f) fail_at = atol(f);
    skip_lib = getenv("SKIP_LIB");
    if (skip_lib && !*skip_lib) skip_lib = NULL;
    in = 0;
    return 1;
}
/* Whether an allocation was called from inside the skipped library: any frame of the
 * call stack in it (HDF5 allocates through libc's strdup too). The shim's own
 * allocations (backtrace loading libgcc) are skipped as well. */
static __thread int busy;
static int from_skipped(void) {
    if (!started) return 1; /* static initializers, before main */
    if (!skip_lib) return 0;
    if (busy) return 1;
    busy = 1;
    void *fr[48];
    int k = backtrace(fr, 48), hit = 0;
    for (int i = 1; i < k && !hit; i++) {
        Dl_info info;
        if (!dladdr(fr[i], &info) || !info.dli_fname) continue;
        for (const char *p = skip_lib; *p && !hit; p += strcspn(p, ":"), p += *p == ':') {
            const size_t len = strcspn(p, ":");
            const char *f = info.dli_fname;
            for (; *f && !hit; f++) hit = len && !strncmp(f, p, len);
        }
    }
    busy = 0;
    return hit;
}
#define should_fail() (!from_skipped() && ++n == fail_at)
void *malloc(size_t s) {
    if (!init()) {
        void *p = boot + boot_used;
        boot_used += (s + 15) & ~15;
        return p;
    }
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return real_malloc(s);
}
void *calloc(size_t a, size_t b) {
    if (!init()) {
        void *p = boot + boot_used;
        boot_used += (a * b + 15) & ~15;
        memset(p, 0, a * b);
        return p;
    }
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return real_calloc(a, b);
}
void *realloc(void *p, size_t s) {
    if (!init()) return NULL;
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return real_realloc(p, s);
}
void free(void *p) {
    static void (*rf)(void *);
    if ((char *)p >= boot && (char *)p < boot + sizeof boot) return;
    if (!rf) rf = dlsym(RTLD_NEXT, "free");
    rf(p);
}
__attribute__((destructor)) static void fin(void) {
    const char *c = getenv("COUNT_FILE");
    if (c) {
        FILE *f = fopen(c, "w");
        if (f) {
            fprintf(f, "%ld\n", n);
            fclose(f);
        }
    }
}

/* main is entered through this wrapper, which marks the start. */
typedef int (*main_fn)(int, char **, char **);
static main_fn real_main;
static int wrap_main(int argc, char **argv, char **envp) {
    started = 1;
    return real_main(argc, argv, envp);
}
int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end) {
    int (*real)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *) =
        dlsym(RTLD_NEXT, "__libc_start_main");
    real_main = main;
    return real(wrap_main, argc, argv, init, fini, rtld_fini, stack_end);
}
