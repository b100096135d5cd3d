/* The KV page allocator (sim/kvalloc.h): ownership over long random sequences, holes,
 * and its permutation, drawn as the stack reaches each position. */
#include "check.h"
#include "testrun.h"
#include "kvalloc.h"

#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

enum { POOL = 500, OWNERS = 40, MAXP = 200 };

/* Random admit/grow/finish/preempt sequences: no page is owned twice, the owner table
 * agrees with the owners, none leaks, a refused take changes nothing, the pool runs dry. */
static void pages_owned_once_none_leaks(void) {
    gsl_rng *r = test_rng(11);
    pkv_kvalloc a;
    CHECK(pkv_kvalloc_init(&a, POOL, 0.0, r) == 0, "init");
    int32_t pages[OWNERS][MAXP];
    int32_t n[OWNERS] = {0};
    int64_t ops = 0, refused = 0;
    for (int step = 0; step < 200000; step++) {
        int o = (int)gsl_rng_uniform_int(r, OWNERS);
        int op = (int)gsl_rng_uniform_int(r, 4);
        if (op == 0 && n[o] == 0) { /* admit with a prompt's pages */
            int32_t want = 1 + (int32_t)gsl_rng_uniform_int(r, 60);
            int32_t before = a.n_free;
            if (pkv_kvalloc_take(&a, want, o, pages[o]) == 0) {
                n[o] = want;
            } else {
                refused++;
                CHECK(a.n_free == before, "a refused take changed the pool");
            }
        } else if (op == 1 && n[o] > 0 && n[o] < MAXP) { /* grow by one page */
            if (pkv_kvalloc_take(&a, 1, o, &pages[o][n[o]]) == 0) n[o]++;
        } else if (op >= 2 && n[o] > 0) { /* finish or preempt: give everything back */
            pkv_kvalloc_give(&a, pages[o], n[o], o);
            n[o] = 0;
        }
        ops++;
        if (step % 997 == 0) {
            /* Ownership table agrees with what the owners hold; nothing twice. */
            int owned = 0;
            static int seen[POOL];
            memset(seen, 0, sizeof seen);
            for (int k = 0; k < OWNERS; k++)
                for (int j = 0; j < n[k]; j++) {
                    CHECK(seen[pages[k][j]] == 0, "page %d held twice", pages[k][j]);
                    seen[pages[k][j]] = 1;
                    CHECK(pkv_kvalloc_owner(&a, pages[k][j]) == k, "owner table wrong for page %d",
                          pages[k][j]);
                    owned++;
                }
            CHECK(owned + a.n_free == POOL, "leak: %d owned + %d free != %d", owned, a.n_free,
                  POOL);
            CHECK(a.n_free >= 0 && a.n_free <= POOL, "budget exceeded");
        }
    }
    for (int k = 0; k < OWNERS; k++) pkv_kvalloc_give(&a, pages[k], n[k], k);
    CHECK(a.n_free == POOL, "pages leaked at the end: %d free of %d", a.n_free, POOL);
    CHECK(refused > 0, "the sequence never ran the pool dry (test too weak)");
    pkv_kvalloc_free(&a);
    gsl_rng_free(r);
}

/* With 30% holes only 350 ids are ever handed out, always the same ones. */
static void holes_are_never_handed_out(void) {
    gsl_rng *r = test_rng(12);
    pkv_kvalloc a;
    CHECK(pkv_kvalloc_init(&a, POOL, 0.3, r) == 0 && a.n_free == 350 && a.n_usable == 350,
          "holes: %d free", a.n_free);
    static int ever[POOL];
    static int32_t held[POOL];
    for (int round = 0; round < 50; round++) {
        int32_t n_held = 0, k;
        /* Fill to dry in random-sized takes, then give back in shuffled order. */
        while ((k = 1 + (int32_t)gsl_rng_uniform_int(r, 20)),
               pkv_kvalloc_take(&a, k, 1, held + n_held) == 0)
            n_held += k;
        CHECK(a.n_free < 20 && n_held + a.n_free == 350, "round %d: %d held, %d free", round,
              n_held, a.n_free);
        for (int j = 0; j < n_held; j++) ever[held[j]] = 1;
        gsl_ran_shuffle(r, held, (size_t)n_held, sizeof(int32_t));
        pkv_kvalloc_give(&a, held, n_held, 1);
    }
    int distinct = 0;
    for (int i = 0; i < POOL; i++) distinct += ever[i];
    CHECK(distinct == 350, "%d distinct ids handed out with 350 usable", distinct);
    pkv_kvalloc_free(&a);
    gsl_rng_free(r);
}

/* The pool hands out gsl_ran_shuffle's permutation of its initial stack, top first, drawn
 * as the stack reaches each position: in takes of random sizes with pages given back
 * between them (the stack goes down and up again), with and without holes (the bottom
 * positions swapped with, never handed out), and a pool that is never touched draws
 * nothing. */
static void permutation_is_gsl_shuffle_drawn_as_reached(void) {
    gsl_rng *r = test_rng(13);
    pkv_kvalloc a;
    for (int32_t size = 1; size <= (1 << 21); size = size * 7 + 3) {
        for (int h = 0; h < 2; h++) {
            const double holes = h ? 0.25 : 0.0;
            gsl_rng *ra = gsl_rng_alloc(gsl_rng_mt19937), *rb = gsl_rng_alloc(gsl_rng_mt19937);
            unsigned long seed = gsl_rng_get(r);
            gsl_rng_set(ra, seed), gsl_rng_set(rb, seed);
            int32_t *want = malloc(sizeof *want * (size_t)size);
            int32_t *got = malloc(sizeof *got * (size_t)size);
            CHECK(want && got && pkv_kvalloc_init(&a, size, holes, ra) == 0, "init %d", size);
            for (int32_t i = 0; i < size; i++) want[i] = size - 1 - i;
            gsl_ran_shuffle(rb, want, (size_t)size, sizeof *want);
            const int32_t usable = a.n_usable;
            int32_t n = 0;
            while (n < usable) {
                int32_t k = 1 + (int32_t)gsl_rng_uniform_int(r, 1 + (unsigned long)size / 8);
                if (k > usable - n) k = usable - n;
                CHECK(pkv_kvalloc_take(&a, k, 7, got + n) == 0, "take %d of %d", k, size);
                if (gsl_rng_uniform(r) < 0.3) { /* give back the last ones, last first (so
                                                   the stack is as before), take them again */
                    for (int32_t i = 0; i < k / 2; i++) {
                        const int32_t t = got[n + i];
                        got[n + i] = got[n + k - 1 - i], got[n + k - 1 - i] = t;
                    }
                    pkv_kvalloc_give(&a, got + n, k, 7);
                    CHECK(pkv_kvalloc_take(&a, k, 7, got + n) == 0, "retake %d", k);
                }
                n += k;
            }
            int same = 1;
            for (int32_t i = 0; i < usable; i++) same &= got[i] == want[size - 1 - i];
            CHECK(same, "pool of %d, holes %.2f: not gsl_ran_shuffle's permutation top first", size,
                  holes);
            CHECK(pkv_kvalloc_take(&a, 1, 7, got) == -1, "a dry pool of %d gave a page", size);
            pkv_kvalloc_free(&a);
            free(want), free(got);
            gsl_rng_free(ra), gsl_rng_free(rb);
        }
    }
    gsl_rng *ra = gsl_rng_alloc(gsl_rng_mt19937), *rb = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(ra, 5), gsl_rng_set(rb, 5);
    CHECK(pkv_kvalloc_init(&a, 1 << 24, 0.0, ra) == 0, "init");
    pkv_kvalloc_free(&a);
    CHECK(gsl_rng_get(ra) == gsl_rng_get(rb), "an untouched pool drew from its stream");
    gsl_rng_free(ra), gsl_rng_free(rb);
    gsl_rng_free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(pages_owned_once_none_leaks),
    PKV_CASE(holes_are_never_handed_out),
    PKV_CASE(permutation_is_gsl_shuffle_drawn_as_reached),
};
PKV_TEST_MAIN(cases)
