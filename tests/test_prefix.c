/* The prefix cache (sim/prefix.h): a referenced block is never evicted, unreferenced
 * blocks are evicted least recently released first, reference counts never go
 * negative (the cache asserts it), names chain (equal prefixes, equal names), and a
 * random sequence of operations keeps the counts consistent with a direct model. */
#include "check.h"
#include "testrun.h"
#include "prefix.h"

#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_rng.h>

enum { PPB = 4, POOL = 4096 };

/* Three blocks released in the order 1, 0, 2 are evicted in that order; a referenced
 * block (a hit takes one out of the LRU list) is never evicted. */
static void evicts_least_recently_released_unreferenced(void) {
    pkv_prefix c;
    CHECK(pkv_prefix_init(&c, POOL, PPB) == 0, "init");
    int32_t pages[PPB], out[PPB];
    int32_t blk[3];
    for (int k = 0; k < 3; k++) {
        for (int p = 0; p < PPB; p++) pages[p] = 100 * k + p;
        blk[k] = pkv_prefix_insert(&c, pkv_prefix_chain(0, (uint64_t)k), pages);
        CHECK(blk[k] >= 0, "insert %d", k);
    }
    CHECK(pkv_prefix_evict(&c, out) == -1, "evicted a referenced block");
    pkv_prefix_release(&c, blk[1]), pkv_prefix_release(&c, blk[0]), pkv_prefix_release(&c, blk[2]);
    CHECK(c.n_free_pages == 3 * PPB, "evictable pages %d", c.n_free_pages);
    CHECK(pkv_prefix_acquire(&c, pkv_prefix_chain(0, 0)) == blk[0], "hit");
    CHECK(pkv_prefix_acquire(&c, pkv_prefix_chain(0, 7)) == -1, "a miss hit");
    CHECK(pkv_prefix_evict(&c, out) == 0 && out[0] == 100, "first evicted: pages from %d", out[0]);
    CHECK(pkv_prefix_evict(&c, out) == 0 && out[0] == 200, "second evicted: pages from %d", out[0]);
    CHECK(pkv_prefix_evict(&c, out) == -1, "evicted the referenced block");
    CHECK(pkv_prefix_contains(&c, pkv_prefix_chain(0, 0)) &&
              !pkv_prefix_contains(&c, pkv_prefix_chain(0, 1)),
          "contents after eviction");
    pkv_prefix_release(&c, blk[0]);
    CHECK(pkv_prefix_evict(&c, out) == 0 && out[0] == 0 && c.n_blocks == 0, "last eviction");
    pkv_prefix_free(&c);
}

/* The same ids give the same name, another earlier block another. */
static void names_chain(void) {
    CHECK(pkv_prefix_chain(pkv_prefix_chain(0, 5), 6) ==
                  pkv_prefix_chain(pkv_prefix_chain(0, 5), 6) &&
              pkv_prefix_chain(pkv_prefix_chain(0, 5), 6) !=
                  pkv_prefix_chain(pkv_prefix_chain(0, 4), 6),
          "chained names");
}

/* Random inserts, hits, releases and evictions against a direct model of the reference
 * counts: hits find exactly the cached names, only unreferenced blocks are evicted, and
 * the block and free-page counts agree with the model. */
static void counts_agree_with_a_direct_model(void) {
    pkv_prefix c;
    CHECK(pkv_prefix_init(&c, POOL, PPB) == 0, "init");
    int32_t pages[PPB], out[PPB];
    gsl_rng *r = test_rng(5);
    enum { NAMES = 300 };
    int refs[NAMES], cached[NAMES], bad = 0;
    memset(refs, 0, sizeof refs), memset(cached, 0, sizeof cached);
    int32_t slot_of[NAMES];
    for (int it = 0; it < 200000; it++) {
        const int k = (int)gsl_rng_uniform_int(r, NAMES), op = (int)gsl_rng_uniform_int(r, 4);
        const uint64_t h = pkv_prefix_chain(0, (uint64_t)k);
        if (op == 0 && !cached[k]) {
            for (int p = 0; p < PPB; p++) pages[p] = k * PPB + p;
            int32_t b = pkv_prefix_insert(&c, h, pages);
            if (b >= 0) cached[k] = 1, refs[k] = 1, slot_of[k] = b;
        } else if (op == 1) {
            int32_t b = pkv_prefix_acquire(&c, h);
            bad += (b >= 0) != cached[k];
            if (b >= 0) refs[k]++, bad += b != slot_of[k];
        } else if (op == 2 && refs[k] > 0) {
            pkv_prefix_release(&c, slot_of[k]);
            refs[k]--;
        } else if (op == 3 && pkv_prefix_evict(&c, out) == 0) {
            const int v = out[0] / PPB;
            bad += !cached[v] || refs[v] != 0; /* only an unreferenced block goes */
            cached[v] = 0;
        }
        if (it % 1000 == 0) {
            int free_pages = 0, blocks = 0;
            for (int j = 0; j < NAMES; j++)
                blocks += cached[j], free_pages += cached[j] && !refs[j];
            bad += blocks != c.n_blocks || free_pages * PPB != c.n_free_pages;
        }
    }
    CHECK(bad == 0, "%d disagreements with the model", bad);
    gsl_rng_free(r);
    pkv_prefix_free(&c);
}

static const pkv_test_case cases[] = {
    PKV_CASE(evicts_least_recently_released_unreferenced),
    PKV_CASE(names_chain),
    PKV_CASE(counts_agree_with_a_direct_model),
};
PKV_TEST_MAIN(cases)
