/* Event heap: pops in (time, push order) order over random pushes and pops. */
#include "check.h"
#include "testrun.h"
#include "pkv_heap.h"

#include <gsl/gsl_rng.h>

/* Pushes and pops at random, coarse times forcing ties (the arg records push order):
 * every pop comes in (time, push order) order, and the heap ends empty. */
static void pops_in_time_then_push_order(void) {
    pkv_heap h;
    pkv_heap_init(&h);
    gsl_rng *r = test_rng(7);
    int64_t pushed = 0;
    double last_t = -1;
    int64_t last_arg = -1;
    int order_ok = 1;
    for (int round = 0; round < 200; round++) {
        int n = (int)gsl_rng_uniform_int(r, 50);
        for (int i = 0; i < n; i++) {
            double t = (double)(last_t < 0 ? 0 : last_t) + (double)gsl_rng_uniform_int(r, 5);
            CHECK(pkv_heap_push(&h, t, 0, pushed++) == 0, "push");
        }
        int m = (int)gsl_rng_uniform_int(r, 50);
        for (int i = 0; i < m; i++) {
            pkv_event e;
            if (pkv_heap_pop(&h, &e)) break;
            if (e.t < last_t || (e.t == last_t && e.arg < last_arg)) order_ok = 0;
            last_t = e.t;
            last_arg = e.arg;
        }
    }
    pkv_event e;
    while (pkv_heap_pop(&h, &e) == 0) {
        if (e.t < last_t || (e.t == last_t && e.arg < last_arg)) order_ok = 0;
        last_t = e.t;
        last_arg = e.arg;
    }
    CHECK(order_ok, "events popped out of (time, sequence) order");
    CHECK(pkv_heap_top(&h) == NULL, "heap not empty");
    pkv_heap_free(&h);
    gsl_rng_free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(pops_in_time_then_push_order),
};
PKV_TEST_MAIN(cases)
