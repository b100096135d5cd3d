/* The element types and shapes of issue 34 on the CPU: the conversions (every FP8
 * E4M3 code, random BF16 and FP8 roundings against their half-unit bounds, saturation
 * and NaN), an FP8 batch's quantization element by element against the bound its
 * format gives, and the CPU mirror of every route against the FP32 reference for Q in
 * FP16 and BF16, KV in FP16, BF16 and FP8, 1 to 8 query heads per KV head and head
 * dimensions 64, 128 and 256, on fresh random batches (odd lengths, page sizes 1 and
 * 16, holes in the page table). The mirror and the reference read the same stored
 * values (FP8: code times scale), so they differ by FP32 summation order only: the
 * tolerance is pkv_tol's, as for FP16; for FP8 the reference is checked against
 * attention over values dequantized here, so that both cannot share a wrong scale. */
#include "check.h"
#include "pkv_tol.h"
#include "planner.h"
#include "routes.h"
#include "testbatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <time.h>

static int32_t three_splits(int32_t route_len, int32_t rows, void *ctx) {
    return 3;
}

/* Route r's plan of four rows of these lengths (pkv_bucket in three splits, the work queue
 * rows split 1, 3, 5 and 2 ways, FlashInfer's in chunks of 8), then the CPU mirror of its
 * family on batch b into o; a status. */
static int run_route(pkvk_plan *p, int r, const pkvk_shape *s, const int32_t lens[4],
                     const pkvk_batch *b, float *part, float *o) {
    static const int32_t splits[4] = {1, 3, 5, 2};
    const int rc = r == PKV_ROUTE_REF_PAGED ? pkvk_plan_ref(p, lens, 4)
                   : r == PKV_ROUTE_BUCKET  ? pkvk_plan_bucket(p, lens, lens, 4, three_splits, NULL)
                   : r >= PKV_ROUTE_FLASHINFER
                       ? pkvk_plan_flashinfer(p, (pkv_route)r, s, lens, 4, 8, 8)
                       : pkvk_plan_workqueue(p, (pkv_route)r, s, lens, splits, 4);
    return rc ? rc : pkvk_cpu_run(b, p, pkv_route_ops_of(p->route)->cpu_attend, part, o);
}

/* Half a unit in the last place of E4M3 at |v| (unscaled): 2^-10 among the
 * subnormals (below 2^-6), 2^(e-4) for |v| in [2^e, 2^(e+1)). */
static double e4m3_half_ulp(double v) {
    v = fabs(v);
    if (v < 0x1p-6) return 0x1p-10;
    int e;
    frexp(v, &e); /* v in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 1 - 4);
}

static void conversions(gsl_rng *r) {
    int bad = 0;
    for (int c = 0; c < 256; c++) { /* 0x7f and 0xff are NaN, the rest round-trip */
        const float f = pkvk_e4m32f((uint8_t)c);
        bad += (c & 0x7f) == 0x7f ? !isnan(f) : pkvk_f2e4m3(f) != c;
    }
    CHECK(bad == 0, "%d of 256 E4M3 codes do not decode and encode back to themselves", bad);
    CHECK(pkvk_e4m32f(0x7e) == 448.f && pkvk_e4m32f(0x01) == 0x1p-9f &&
              pkvk_e4m32f(0x08) == 0x1p-6f && pkvk_e4m32f(0xfe) == -448.f,
          "E4M3's largest, smallest subnormal and smallest normal values");
    CHECK(pkvk_f2e4m3(1e6f) == 0x7e && pkvk_f2e4m3(-500.f) == 0xfe && pkvk_f2e4m3(INFINITY) == 0x7e,
          "E4M3 saturates at +-448");
    CHECK(isnan(pkvk_e4m32f(pkvk_f2e4m3(NAN))) && isnan(pkvk_bf2f(pkvk_f2bf(NAN))), "NaN stays");
    /* ties to even: 1.0625 lies halfway between 1 (mantissa 0) and 1.125 (mantissa 1) */
    CHECK(pkvk_f2e4m3(1.0625f) == 0x38 && pkvk_f2e4m3(1.1875f) == 0x3a,
          "E4M3 ties round to the even mantissa");
    int over8 = 0, overb = 0;
    for (int i = 0; i < 100000; i++) {
        const double v = gsl_ran_gaussian(r, 1.0) * pow(2.0, gsl_rng_uniform(r) * 16 - 10);
        const float f = (float)v;
        if (fabs(f) < 448 && fabs(pkvk_e4m32f(pkvk_f2e4m3(f)) - f) > e4m3_half_ulp(f)) over8++;
        int e;
        frexp(f, &e);
        if (f != 0 && fabs(pkvk_bf2f(pkvk_f2bf(f)) - f) > ldexp(1.0, e - 1 - 8)) overb++;
    }
    CHECK(over8 == 0, "%d of 100000 values rounded to E4M3 beyond half a unit", over8);
    CHECK(overb == 0, "%d of 100000 values rounded to BF16 beyond half a unit", overb);
}

/* Each stored FP8 element, code x scale, within half a unit (times the scale) of the
 * value it was made from; no code saturated, the scale being the block's amax / 448. */
static void quantization(gsl_rng *r) {
    const pkvk_shape s = {.hq = 8, .hkv = 2, .d = 64, .page_size = 16, .kv_dtype = PKVK_FP8_E4M3};
    const int32_t lens[3] = {1, 77, 300};
    host_batch h;
    make_batch(&h, r, s, lens, 3, 0.3);
    const size_t per = (size_t)s.page_size * s.d;
    size_t over = 0;
    for (size_t j = 0; j < h.kv_elems; j++) {
        const float ks = h.k_scale[j / per], vs = h.v_scale[j / per];
        const double k = pkvk_e4m32f(((const uint8_t *)h.k)[j]) * (double)ks;
        const double v = pkvk_e4m32f(((const uint8_t *)h.v)[j]) * (double)vs;
        over += fabs(k - h.kf[j]) > e4m3_half_ulp(h.kf[j] / ks) * ks * (1 + 1e-6) ||
                fabs(v - h.vf[j]) > e4m3_half_ulp(h.vf[j] / vs) * vs * (1 + 1e-6);
    }
    CHECK(over == 0, "%zu of %zu FP8 elements off their value by more than half a unit", over,
          h.kv_elems);
    free_batch(&h);
}

/* FP8 KV: the reference against attention computed here in double over the stored
 * values dequantized here (each code times its page and KV head's scale, indexed as the
 * layout says), within pkv_tol: a scale read at the wrong page or head, or a code
 * decoded wrong, breaks it (the rounding itself is checked element by element in
 * quantization()). Returns the rows and heads outside. */
static int fp8_dequant(const host_batch *h, const float *ref) {
    const pkvk_shape *s = &h->b.shape;
    const int G = s->hq / s->hkv, d = s->d;
    int outside = 0;
    double q[512], acc[512];
    for (int32_t i = 0; i < h->b.n_rows; i++)
        for (int hd = 0; hd < s->hq; hd++) {
            const int kvh = hd / G;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < d; j++)
                q[j] = pkvk_elem(s->dtype, h->q, ((size_t)i * s->hq + hd) * d + j);
            memset(acc, 0, sizeof acc);
            for (int pass = 0; pass < 2; pass++)
                for (int32_t t = 0; t < h->lens[i]; t++) {
                    const int32_t pg = h->bt[(size_t)i * h->b.bt_stride + t / s->page_size];
                    const size_t ph = (size_t)pg * s->hkv + kvh;
                    const size_t at = (ph * s->page_size + t % s->page_size) * d;
                    double sc = 0;
                    for (int j = 0; j < d; j++)
                        sc += q[j] * pkvk_e4m32f(((const uint8_t *)h->k)[at + j]) * h->k_scale[ph];
                    sc *= h->b.sm_scale;
                    if (pass == 0) {
                        m = fmax(m, sc);
                        continue;
                    }
                    const double w = exp(sc - m);
                    l += w;
                    for (int j = 0; j < d; j++)
                        acc[j] += w * pkvk_e4m32f(((const uint8_t *)h->v)[at + j]) * h->v_scale[ph];
                }
            double mx = 0;
            for (int j = 0; j < d; j++)
                mx = fmax(mx, fabs(ref[((size_t)i * s->hq + hd) * d + j] - acc[j] / l));
            outside += !(mx < PKV_TOL_MAX);
        }
    return outside;
}

static gsl_rng *fresh_rng(void) {
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)time(NULL)); /* fresh inputs each run */
    return r;
}

static void types_convert_and_round(void) {
    gsl_rng *r = fresh_rng();
    conversions(r);
    gsl_rng_free(r);
}

static void fp8_quantizes_within_half_an_ulp(void) {
    gsl_rng *r = fresh_rng();
    quantization(r);
    gsl_rng_free(r);
}

/* Every shape (1 to 8 query heads per KV head, head_dim 64, 128, 256, pages of 1 and 16)
 * x type x route through the CPU mirror, against the FP32 reference. */
static void every_shape_type_route_matches_the_reference(void) {
    gsl_rng *r = fresh_rng();
    const int dtypes[2] = {PKVK_FP16, PKVK_BF16},
              kv_dtypes[3] = {PKVK_FP16, PKVK_BF16, PKVK_FP8_E4M3};
    const int heads[3] = {64, 128, 256}, pss[2] = {1, 16};
    int cases = 0;
    for (int qt = 0; qt < 2; qt++)
        for (int kt = 0; kt < 3; kt++)
            for (int G = 1; G <= 8; G++)
                for (int hd = 0; hd < 3; hd++) {
                    const pkvk_shape s = {.hq = 2 * G,
                                          .hkv = 2,
                                          .d = heads[hd],
                                          .page_size = pss[(G + hd) % 2],
                                          .dtype = dtypes[qt],
                                          .kv_dtype = kv_dtypes[kt]};
                    int32_t lens[4] = {1, 33, 1 + (int32_t)gsl_rng_uniform_int(r, 700),
                                       1 + (int32_t)gsl_rng_uniform_int(r, 64)};
                    host_batch h;
                    make_batch(&h, r, s, lens, 4, 0.5);
                    const size_t on = (size_t)4 * s.hq * s.d;
                    float *ref = malloc(on * 4), *o = malloc(on * 4);
                    float *part = malloc(pkvk_partial_floats(&s, 512) * 4);
                    pkvk_plan p;
                    CHECK(ref && o && part && pkvk_plan_init(&p, 4, 512) == 0, "memory");
                    CHECK(pkvk_cpu_reference(&h.b, ref) == PKVK_OK, "reference");
                    if (s.kv_dtype == PKVK_FP8_E4M3)
                        CHECK(fp8_dequant(&h, ref) == 0,
                              "FP8 KV, G=%d, d=%d: the reference is not attention over the "
                              "dequantized values",
                              G, s.d);
                    for (int route = 0; route < PKV_ROUTE_COUNT; route++) {
                        for (size_t j = 0; j < on; j++) o[j] = NAN;
                        const int rc = run_route(&p, route, &s, lens, &h.b, part, o);
                        double mx = NAN, mean = NAN;
                        if (!rc) pkvk_compare(o, NULL, PKVK_FP16, ref, on, &mx, &mean);
                        CHECK(!rc && pkv_tol_ok(mx, mean),
                              "Q %s, KV %s, G=%d, d=%d, ps=%d, %s: status %d, max|e| %.3g mean "
                              "%.3g",
                              pkvk_dtype_names[s.dtype], pkvk_dtype_names[s.kv_dtype], G, s.d,
                              s.page_size, pkv_route_name((pkv_route)route), rc, mx, mean);
                        cases++;
                    }
                    pkvk_plan_free(&p);
                    free(ref), free(o), free(part);
                    free_batch(&h);
                }
    printf("%d shape and route cases against the FP32 reference\n", cases);
    gsl_rng_free(r);
}

/* A verify step's query tokens (q_len 2, 4, 8 a row; issue 47): the reference's token j is
 * a decode step's over the keys up to its own position (the causal mask's meaning, computed
 * apart, bit for bit), and the CPU mirror of every route matches the reference, for 1 to 8
 * query heads per KV head, Q in FP16 and BF16, KV in FP16 and FP8, on fresh random batches;
 * a row with fewer keys than query tokens is refused. */
static void verify_query_tokens_attend_causally(void) {
    gsl_rng *r = fresh_rng();
    const int qls[3] = {2, 4, 8}, kv_dtypes[2] = {PKVK_FP16, PKVK_FP8_E4M3};
    int cases = 0;
    for (int qi = 0; qi < 3; qi++)
        for (int kt = 0; kt < 2; kt++)
            for (int G = 1; G <= 8; G *= 2) {
                const int Q = qls[qi];
                const pkvk_shape s = {.hq = 2 * G,
                                      .hkv = 2,
                                      .d = (G + qi) % 2 ? 64 : 128,
                                      .page_size = 16,
                                      .dtype = (qi + kt) % 2 ? PKVK_BF16 : PKVK_FP16,
                                      .kv_dtype = kv_dtypes[kt]};
                int32_t lens[4] = {Q, Q + 31, Q + (int32_t)gsl_rng_uniform_int(r, 700),
                                   Q + (int32_t)gsl_rng_uniform_int(r, 64)};
                host_batch h;
                make_batch(&h, r, s, lens, 4, 0.5);
                const size_t hd = (size_t)s.hq * s.d, qn = (size_t)4 * Q * hd;
                uint16_t *q = malloc(qn * 2);
                float *ref = malloc(qn * 4), *o = malloc(qn * 4), *one = malloc(hd * 4);
                float *part = malloc(pkvk_partial_floats(&s, 512) * Q * 4);
                pkvk_plan p;
                CHECK(q && ref && o && one && part && pkvk_plan_init(&p, 4, 512) == 0, "memory");
                for (size_t i = 0; i < qn; i++) {
                    const float x = (float)gsl_ran_gaussian(r, 1.0);
                    q[i] = s.dtype == PKVK_BF16 ? pkvk_f2bf(x) : pkvk_f2h(x);
                }
                pkvk_batch vb = h.b;
                vb.q = q, vb.q_len = Q;
                CHECK(pkvk_cpu_reference(&vb, ref) == PKVK_OK, "reference at q_len %d", Q);
                double apart = 0; /* token j of row i against a decode row of its keys */
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < Q; j++) {
                        pkvk_batch b1 = h.b;
                        const int32_t n = lens[i] - Q + j + 1;
                        b1.n_rows = 1, b1.seq_lens = &n, b1.q = q + ((size_t)i * Q + j) * hd;
                        b1.block_table = h.b.block_table + (size_t)i * h.b.bt_stride;
                        CHECK(pkvk_cpu_reference(&b1, one) == PKVK_OK, "decode reference");
                        for (size_t e = 0; e < hd; e++)
                            apart = fmax(apart, fabs(one[e] - ref[((size_t)i * Q + j) * hd + e]));
                    }
                CHECK(apart == 0,
                      "q_len %d, G=%d: a query token is not a decode row over its "
                      "keys (max |diff| %.3g)",
                      Q, G, apart);
                for (int route = 0; route < PKV_ROUTE_COUNT; route++) {
                    for (size_t j = 0; j < qn; j++) o[j] = NAN;
                    const int rc = run_route(&p, route, &s, lens, &vb, part, o);
                    double mx = NAN, mean = NAN;
                    if (!rc) pkvk_compare(o, NULL, PKVK_FP16, ref, qn, &mx, &mean);
                    CHECK(!rc && pkv_tol_ok(mx, mean),
                          "q_len %d, Q %s, KV %s, G=%d, d=%d, %s: status %d, max|e| %.3g mean "
                          "%.3g",
                          Q, pkvk_dtype_names[s.dtype], pkvk_dtype_names[s.kv_dtype], G, s.d,
                          pkv_route_name((pkv_route)route), rc, mx, mean);
                    cases++;
                }
                int32_t few[4] = {Q - 1, lens[1], lens[2], lens[3]};
                vb.seq_lens = few; /* fewer keys than query tokens in row 0 */
                CHECK(pkvk_cpu_reference(&vb, ref) == PKVK_ERR_INVALID &&
                          pkvk_cpu_run(&vb, &p, pkvk_cpu_attend_whole, part, o) == PKVK_ERR_INVALID,
                      "q_len %d over a row of %d keys is refused", Q, Q - 1);
                pkvk_plan_free(&p);
                free(q), free(ref), free(o), free(one), free(part);
                free_batch(&h);
            }
    printf("%d verify cases (q_len x shape x route) against the FP32 reference\n", cases);
    gsl_rng_free(r);
}

/* FP8 KV without its scales, or FP8 queries, are refused, not read. */
static void fp8_without_scales_refused(void) {
    gsl_rng *r = fresh_rng();
    const int32_t one = 40;
    host_batch h;
    make_batch(&h, r,
               (pkvk_shape){.hq = 4, .hkv = 1, .d = 64, .page_size = 16, .kv_dtype = PKVK_FP8_E4M3},
               &one, 1, 0);
    float o[4 * 64];
    h.b.k_scale = NULL;
    CHECK(pkvk_cpu_reference(&h.b, o) == PKVK_ERR_INVALID, "FP8 KV without scales");
    h.b.k_scale = h.k_scale;
    h.b.shape.dtype = PKVK_FP8_E4M3;
    CHECK(pkvk_cpu_reference(&h.b, o) == PKVK_ERR_INVALID, "FP8 queries");
    free_batch(&h);
    gsl_rng_free(r);
}

static const pkv_test_case cases[] = {
    PKV_CASE(types_convert_and_round),
    PKV_CASE(fp8_quantizes_within_half_an_ulp),
    PKV_CASE(every_shape_type_route_matches_the_reference),
    PKV_CASE(verify_query_tokens_attend_causally),
    PKV_CASE(fp8_without_scales_refused),
};
PKV_TEST_MAIN(cases)
