/* Minimal test helpers: CHECK records a failure with its location and goes on;
 * CHECK_DONE() ends main with the count. Exit code 77 marks a skipped test. Cases by
 * behaviour: PKV_CASE and PKV_TEST_MAIN below. */
#ifndef PKV_TEST_CHECK_H
#define PKV_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures = 0, check_count = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_DONE()                                                                               \
    do {                                                                                           \
        printf("%d checks, %d failed\n", check_count, check_failures);                             \
        return check_failures ? 1 : 0;                                                             \
    } while (0)

#define SKIP_CODE 77

/* Cases by behaviour: a test program's cases are functions named for what they hold,
 * in a table of PKV_CASE rows (tests/CMakeLists.txt registers each with
 * ctest as PROGRAM.CASE: `ctest -R kvalloc.holes_are_never_handed_out`). PKV_TEST_MAIN(table)
 * is the program's main: no argument runs every case, a case's name runs that one,
 * --list prints the names; the counts of CHECK_DONE at the end. */
typedef struct pkv_test_case {
    const char *name;
    void (*run)(void);
} pkv_test_case;
#define PKV_CASE(fn)                                                                               \
    { #fn, fn }

static inline int pkv_test_main(const pkv_test_case *cases, int n, int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: %s [CASE | --list]\n", argv[0]);
        return 2;
    }
    int ran = 0;
    for (int i = 0; i < n; i++) {
        if (argc == 2 && !strcmp(argv[1], "--list")) {
            puts(cases[i].name);
            continue;
        }
        if (argc == 2 && strcmp(argv[1], cases[i].name)) continue;
        cases[i].run();
        ran++;
    }
    if (argc == 2 && !strcmp(argv[1], "--list")) return 0;
    if (!ran) {
        fprintf(stderr, "%s: no case %s (--list names them)\n", argv[0], argv[1]);
        return 2;
    }
    CHECK_DONE();
}
#define PKV_TEST_MAIN(table)                                                                       \
    int main(int argc, char **argv) {                                                              \
        return pkv_test_main(table, (int)(sizeof table / sizeof *table), argc, argv);              \
    }

/* A test whose cases share a set-up (a GPU's context): setup runs first unless the
 * names are only listed, and may end the program with its status (SKIP_CODE where no
 * GPU is usable); teardown, where given, after the cases. */
static inline int pkv_test_main_with(const pkv_test_case *cases, int n, int argc, char **argv,
                                     int (*setup)(void), void (*teardown)(void)) {
    const int listing = argc == 2 && !strcmp(argv[1], "--list");
    int rc = listing ? 0 : setup();
    if (rc) return rc;
    rc = pkv_test_main(cases, n, argc, argv);
    if (!listing && teardown) teardown();
    return rc;
}
#define PKV_TEST_MAIN_WITH(table, setup, teardown)                                                 \
    int main(int argc, char **argv) {                                                              \
        return pkv_test_main_with(table, (int)(sizeof table / sizeof *table), argc, argv, setup,   \
                                  teardown);                                                       \
    }

#endif
