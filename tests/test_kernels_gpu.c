/* GPU kernels against references on fresh random inputs (label gpu; exits 77,
 * skipped, where no GPU is usable). Every route, G 1 to 8, page sizes
 * 1/8/16/32, lengths 1..33 and long rows, 50% holes, split counts above the tile
 * count (empty splits), FP16, BF16 and FP8 KV, outputs poisoned with NaN. Small shapes
 * are checked against the CPU FP32 reference, large ones against the GPU FP32
 * reference (itself checked against the CPU on the small ones). The FlashInfer
 * routes, where built, run the same shapes under FlashInfer's own planners, whose
 * partitions must equal pkvsim's mirror of them. Pages swapped to host slots and
 * back keep their bytes. PKV_QUICK=1 runs a small part that compute-sanitizer
 * finishes: one shape through every route, split count and way up, and the swap (the
 * other cases return at once). Cases by behaviour (tests/check.h). */
#include "check.h"
#include "pkv_tol.h"
#include "cost.h"
#include "planner.h"
#include "pkvk.h"
#include "testbatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_randist.h>

typedef struct dev_batch {
    pkvk_batch b; /* device pointers */
    void *q, *o, *k, *v, *bt, *lens;
    float *o32, *k_scale, *v_scale;
} dev_batch;

static int upload(const host_batch *h, dev_batch *d) {
    const pkvk_batch *hb = &h->b;
    size_t bt_bytes = sizeof(int32_t) * (size_t)hb->n_rows * hb->bt_stride;
    const size_t kv_bytes = h->kv_elems * pkvk_dtype_bytes(hb->shape.kv_dtype);
    const size_t scale_bytes = sizeof(float) * (size_t)h->n_pages * hb->shape.hkv;
    int rc = PKVK_OK;
    if (!rc) rc = pkvk_malloc(&d->q, h->q_elems * 2);
    if (!rc) rc = pkvk_malloc(&d->o, h->q_elems * 2);
    if (!rc) rc = pkvk_malloc(&d->k, kv_bytes);
    if (!rc) rc = pkvk_malloc(&d->v, kv_bytes);
    if (!rc && h->k_scale) rc = pkvk_malloc((void **)&d->k_scale, scale_bytes);
    if (!rc && h->k_scale) rc = pkvk_malloc((void **)&d->v_scale, scale_bytes);
    if (!rc && h->k_scale) rc = pkvk_h2d(d->k_scale, h->k_scale, scale_bytes);
    if (!rc && h->k_scale) rc = pkvk_h2d(d->v_scale, h->v_scale, scale_bytes);
    if (!rc) rc = pkvk_malloc(&d->bt, bt_bytes);
    if (!rc) rc = pkvk_malloc(&d->lens, sizeof(int32_t) * hb->n_rows);
    if (!rc) rc = pkvk_malloc((void **)&d->o32, h->q_elems * 4);
    if (!rc) rc = pkvk_h2d(d->q, h->q, h->q_elems * 2);
    if (!rc) rc = pkvk_h2d(d->k, h->k, kv_bytes);
    if (!rc) rc = pkvk_h2d(d->v, h->v, kv_bytes);
    if (!rc) rc = pkvk_h2d(d->bt, h->bt, bt_bytes);
    if (!rc) rc = pkvk_h2d(d->lens, h->lens, sizeof(int32_t) * hb->n_rows);
    d->b = *hb;
    d->b.q = d->q, d->b.o = d->o, d->b.k_cache = d->k, d->b.v_cache = d->v;
    d->b.block_table = d->bt, d->b.seq_lens = d->lens;
    d->b.k_scale = d->k_scale, d->b.v_scale = d->v_scale;
    return rc;
}

static void release(dev_batch *d) {
    pkvk_free(d->q), pkvk_free(d->o), pkvk_free(d->k), pkvk_free(d->v);
    pkvk_free(d->bt), pkvk_free(d->lens), pkvk_free(d->o32);
    pkvk_free(d->k_scale), pkvk_free(d->v_scale);
}

/* Plan uploads by mode and path: [0] in the launch's parameters, [1] parameters
 * asked but too large (copied), [2] copy asked. */
static int uploads[3];
/* Made by setup: the kernels' context, the device, the random stream; quick is PKV_QUICK. */
static pkvk_ctx *ctx;
static pkvk_device_info dev;
static gsl_rng *r;
static int fi_built, quick;

/* Run a plan with the output poisoned; o receives it as floats. how % 3 says how the
 * plan goes up: 0 pkvk_plan_upload, 1 pkvk_step_upload by launch parameters, 2 by
 * its copy. */
static int run_plan(const pkvk_ctx *c, pkvk_workspace *ws, dev_batch *d, const pkvk_plan *p,
                    size_t n, float *o, uint16_t *tmp, int how) {
    int launches, copies = 0, rc = pkvk_memset(d->o, 0xff, n * 2);
    pkvk_upload_mode mode = how % 3 == 1 ? PKVK_UPLOAD_PARAMS : PKVK_UPLOAD_COPY;
    if (!rc && how % 3 == 0)
        rc = pkvk_plan_upload(ws, p);
    else if (!rc) {
        rc = pkvk_step_upload(ws, p, NULL, mode, &copies);
        uploads[mode == PKVK_UPLOAD_PARAMS ? copies : 2]++;
        /* A copy is made exactly when asked for (FlashInfer's planner copies its own). */
        if (mode == PKVK_UPLOAD_COPY && copies != !pkv_route_is_flashinfer(p->route)) rc = -1;
    }
    if (rc || (pkv_route_is_flashinfer(p->route) && pkvk_pack_csr(ws, &d->b)) ||
        pkvk_launch(ws, &d->b, p, &launches) || pkvk_sync(c) || pkvk_d2h(tmp, d->o, n * 2))
        return -1;
    for (size_t j = 0; j < n; j++) o[j] = pkvk_elem(d->b.shape.dtype, tmp, j);
    return 0;
}

static int32_t fixed_splits(int32_t route_len, int32_t rows, void *arg) {
    return *(int32_t *)arg;
}

/* Preemption by swap: pages of several pools go to random host slots and come back
 * onto other pages (the pools scrambled in between); the slots and the pages they
 * come back to hold the pages' bytes exactly; a slot beyond the pool is refused. */
static void swapped_pages_keep_their_bytes(void) {
    enum { POOLS = 5, PAGES = 48, SLOTS = 40, N = 19 };
    const size_t page_bytes = 2 * 16 * 128 * 2; /* hkv 2, page size 16, d 128, FP16 */
    const size_t pool_bytes = PAGES * page_bytes;
    uint16_t *pools[POOLS] = {0};
    unsigned char *orig = malloc(POOLS * pool_bytes), *back = malloc(pool_bytes);
    int rc = !orig || !back;
    for (size_t i = 0; !rc && i < POOLS * pool_bytes; i++) orig[i] = (unsigned char)gsl_rng_get(r);
    for (int p = 0; p < POOLS && !rc; p++) {
        rc = pkvk_malloc((void **)&pools[p], pool_bytes);
        if (!rc) rc = pkvk_h2d(pools[p], orig + p * pool_bytes, pool_bytes);
    }
    pkvk_swap *sw = NULL;
    if (!rc) rc = pkvk_swap_create(ctx, &sw, pools, POOLS, page_bytes, SLOTS, N);
    CHECK(rc == 0, "swap pool: %s", pkvk_last_error());
    if (rc) goto out;
    int32_t all[PAGES], from[N], slots[N], to[N];
    for (int32_t i = 0; i < PAGES; i++) all[i] = i;
    gsl_ran_shuffle(r, all, PAGES, sizeof all[0]);
    memcpy(from, all, sizeof from);
    memcpy(to, all + PAGES - N, sizeof to); /* N other pages */
    for (int32_t i = 0; i < SLOTS; i++) all[i] = i;
    gsl_ran_shuffle(r, all, SLOTS, sizeof all[0]);
    memcpy(slots, all, sizeof slots);
    rc = pkvk_swap_copy(sw, 1, from, slots, N);
    if (!rc) rc = pkvk_sync(ctx);
    int out_ok = !rc;
    for (int p = 0; p < POOLS && out_ok; p++)
        for (int i = 0; i < N; i++)
            out_ok &= memcmp(pkvk_swap_slot(sw, slots[i], p),
                             orig + p * pool_bytes + from[i] * page_bytes, page_bytes) == 0;
    CHECK(out_ok, "swap out: a host slot differs from its page (%s)", pkvk_last_error());
    for (int p = 0; p < POOLS && !rc; p++) rc = pkvk_memset(pools[p], 0xA5, pool_bytes);
    if (!rc) rc = pkvk_swap_copy(sw, 0, to, slots, N);
    if (!rc) rc = pkvk_sync(ctx);
    int in_ok = !rc, untouched = 1;
    for (int p = 0; p < POOLS && in_ok; p++) {
        in_ok = pkvk_d2h(back, pools[p], pool_bytes) == 0;
        for (int i = 0; i < N && in_ok; i++)
            in_ok &= memcmp(back + to[i] * page_bytes, orig + p * pool_bytes + from[i] * page_bytes,
                            page_bytes) == 0;
        for (int32_t pg = 0; pg < PAGES; pg++) { /* the other pages keep the scramble */
            int listed = 0;
            for (int i = 0; i < N; i++) listed |= to[i] == pg;
            if (!listed) untouched &= back[pg * page_bytes] == 0xA5;
        }
    }
    CHECK(in_ok && untouched, "swap in: a page differs from the page swapped out (%s)",
          pkvk_last_error());
    int32_t bad = SLOTS;
    CHECK(pkvk_swap_copy(sw, 1, from, &bad, 1) == PKVK_ERR_INVALID,
          "a slot beyond the pool was not refused");
    printf("swap: %d pages of %d pools out to host slots and back onto other pages, bytes equal\n",
           N, POOLS);
out:
    pkvk_swap_destroy(sw);
    for (int p = 0; p < POOLS; p++) pkvk_free(pools[p]);
    free(orig), free(back);
}

static int setup(void) {
    if (pkvk_device_count() == 0) {
        printf("no GPU (%s): skipped\n", pkvk_last_error());
        return SKIP_CODE;
    }
    CHECK(pkvk_ctx_create(&ctx, 0) == 0, "context: %s", pkvk_last_error());
    CHECK(pkvk_device_info_get(&dev) == 0, "device info");
    r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 77);
    fi_built = pkvk_flashinfer_built();
    printf("FlashInfer routes: %s\n", fi_built ? "built" : "not built (skipped)");
    const char *q = getenv("PKV_QUICK");
    quick = q && *q && strcmp(q, "0") != 0;
    return 0;
}

static void teardown(void) {
    gsl_rng_free(r);
    pkvk_ctx_destroy(ctx);
}

/* A device past the visible ones is refused, naming it. */
static void a_device_past_the_visible_ones_is_refused(void) {
    pkvk_ctx *none = NULL;
    int n = pkvk_device_count(), rc = pkvk_ctx_create(&none, n);
    CHECK(rc == PKVK_ERR_NO_DEVICE && !none && strstr(pkvk_last_error(), "does not exist"),
          "context on device %d of %d: status %d (%s)", n, n, rc, pkvk_last_error());
}

/* An allocation past the GPU's memory comes back as out of memory (a status chained
 * with || would turn it into 1, "no device"), from the MLP's and the workspace's
 * constructors alike. */
static void allocations_past_the_gpu_are_out_of_memory(void) {
    if (quick) return;
    pkvk_mlp *m = NULL;
    pkvk_workspace *w = NULL;
    const pkvk_shape big = {.hq = 32, .hkv = 8, .d = 128, .page_size = 16};
    uint16_t wt[64] = {0};
    int rm = pkvk_mlp_create(ctx, &m, 4096, 1 << 20, 1 << 16, wt, 64);
    int rw = pkvk_workspace_create(ctx, &w, &big, 1 << 20, 1 << 30, 1 << 20);
    CHECK(rm == PKVK_ERR_OUT_OF_MEMORY && !m, "oversized MLP: status %d", rm);
    CHECK(rw == PKVK_ERR_OUT_OF_MEMORY && !w, "oversized workspace: status %d", rw);
}

/* The workqueue kernel's residency (a fixed grid's size): at least one CTA an SM at
 * every head dimension built (256: its pipeline takes most of an SM's shared memory),
 * two at 64 and 128; another dimension refused. */
static void the_workqueue_kernel_keeps_its_residency(void) {
    int occ[3] = {0, 0, 0}, bad = 0;
    const int ds[3] = {64, 128, 256};
    for (int i = 0; i < 3; i++)
        CHECK(pkvk_occupancy(ds[i], 4, &occ[i]) == 0 && occ[i] >= (ds[i] < 256 ? 2 : 1),
              "occupancy at d=%d: %d CTAs an SM (%s)", ds[i], occ[i], pkvk_last_error());
    CHECK(pkvk_occupancy(96, 4, &bad) == PKVK_ERR_UNSUPPORTED, "d=96 not refused");
    printf("workqueue CTAs an SM at G=4: d=64 %d, d=128 %d, d=256 %d\n", occ[0], occ[1], occ[2]);
}

/* The types' bound (pkv_tol.h) needs the largest |V| (dequantized) and |output|. */
static void typed_bounds(const host_batch *h, const float *ref, double *vmax, double *omax) {
    const pkvk_shape *s = &h->b.shape;
    const size_t per_head = (size_t)s->page_size * s->d;
    *vmax = *omax = 0;
    for (size_t j = 0; j < h->kv_elems; j++)
        *vmax = fmax(*vmax, fabs(pkvk_elem(s->kv_dtype, h->v, j) *
                                 (h->v_scale ? h->v_scale[j / per_head] : 1.f)));
    for (size_t j = 0; j < h->q_elems; j++) *omax = fmax(*omax, fabs(ref[j]));
}

/* Small shapes through every route (one shape under PKV_QUICK, the step's prologue among
 * its ways up); the plans go up every way, by launch parameters and by copy. */
static void small_shapes_match_the_reference_on_every_route(void) {
    const int Gs[8] = {1, 2, 4, 8, 3, 5, 6, 7}, pss[4] = {1, 8, 16, 32};
    int turn = 0; /* cycles the plans' ways up (run_plan) */
    /* Every route and split count against the CPU reference, in FP16
     * (every page size), and in BF16, FP16 over FP8 KV and BF16 over FP8 KV (page sizes
     * 1 and 16); at head dimension 128, then at 64 and 256 (groups 1, 2, 4, 8 and 7, page
     * sizes 1 and 16; FlashInfer's paths are built for 128 only). Over FP8 the pages'
     * scales vary at group 1, 4 and 8 (FlashInfer's routes refused: its FP8 path takes one
     * scale for the cache) and are one value at group 2 (FlashInfer's routes run). */
    const int types[4][2] = {{PKVK_FP16, PKVK_FP16},
                             {PKVK_BF16, PKVK_BF16},
                             {PKVK_FP16, PKVK_FP8_E4M3},
                             {PKVK_BF16, PKVK_FP8_E4M3}};
    const int dims[3] = {128, 64, 256};
    for (int di = 0; di < 3; di++)
        for (int ty = 0; ty < 4; ty++)
            for (int gi = quick ? 2 : 0; gi < (quick ? 3 : 8); gi++)
                for (int pi = quick ? 2 : 0; pi < (quick ? 3 : 4); pi++) {
                    if ((ty || di) && pi % 2) continue;
                    if (di && gi > 3 && gi != 7) continue;
                    const int dt = types[ty][0], kdt = types[ty][1], fp16 = ty == 0;
                    pkvk_shape s = {.hq = 2 * Gs[gi],
                                    .hkv = 2,
                                    .d = dims[di],
                                    .page_size = pss[pi],
                                    .dtype = dt,
                                    .kv_dtype = kdt};
                    int32_t lens[10] = {1, 15, 16, 17, 31, 33, 1029, 2000};
                    lens[8] = 1 + (int32_t)gsl_rng_uniform_int(r, 4000);
                    lens[9] = 1 + (int32_t)gsl_rng_uniform_int(r, 64);
                    int n = 10;
                    host_batch h;
                    make_batch(&h, r, s, lens, n, 0.5);
                    const int fp8 = kdt == PKVK_FP8_E4M3, one_scale = fp8 && Gs[gi] == 2;
                    if (one_scale) fp8_one_scale(&h);
                    dev_batch d = {0};
                    CHECK(upload(&h, &d) == 0, "upload: %s", pkvk_last_error());
                    float *ref = malloc(h.q_elems * 4), *o = malloc(h.q_elems * 4),
                          *g32 = malloc(h.q_elems * 4);
                    uint16_t *tmp = malloc(h.q_elems * 2);
                    CHECK(pkvk_cpu_reference(&h.b, ref) == PKVK_OK, "CPU reference");
                    /* The GPU FP32 reference agrees with the CPU one. */
                    CHECK(pkvk_gpu_reference(ctx, &d.b, d.o32) == 0 &&
                              pkvk_d2h(g32, d.o32, h.q_elems * 4) == 0,
                          "gpu reference: %s", pkvk_last_error());
                    double mx, mean;
                    pkvk_compare(g32, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
                    CHECK(mx < 1e-4, "GPU FP32 reference vs CPU: max|e| %.3g", mx);
                    double vmax, omax;
                    typed_bounds(&h, ref, &vmax, &omax);
                    pkvk_plan p;
                    pkvk_workspace *ws;
                    CHECK(pkvk_plan_init(&p, n, 4096) == 0, "plan");
                    CHECK(pkvk_workspace_create(ctx, &ws, &s, n, 4096, 4096) == 0, "workspace: %s",
                          pkvk_last_error());
                    int fi_occ = 0;
                    /* FlashInfer's paths: group sizes 1, 2, 4 and 8, head dimension 128 */
                    const int fi_g = pkv_flashinfer_group(Gs[gi]) && s.d == 128;
                    if (fi_built && fi_g)
                        CHECK(pkvk_flashinfer_occupancy(&s, &fi_occ) == 0 && fi_occ > 0,
                              "FlashInfer occupancy: %s", pkvk_last_error());
                    for (int route = 0; route < PKV_ROUTE_COUNT; route++) {
                        const int32_t counts[3] = {1, 3,
                                                   80}; /* 80 splits > 63 tiles: empty splits */
                        if (!pkvk_route_built((pkv_route)route)) continue;
                        if (pkv_route_is_flashinfer((pkv_route)route) &&
                            (!fi_g || (fp8 && !one_scale)))
                            continue;
                        for (int sc = 0; sc < 3; sc++) {
                            int32_t S = counts[sc], splits[10];
                            for (int i = 0; i < n; i++) splits[i] = S;
                            /* ref_paged has no splits; FlashInfer's planners choose their own. */
                            if ((route == PKV_ROUTE_REF_PAGED ||
                                 pkv_route_is_flashinfer((pkv_route)route)) &&
                                sc)
                                continue;
                            int rc = route == PKV_ROUTE_REF_PAGED ? pkvk_plan_ref(&p, lens, n)
                                     : route == PKV_ROUTE_BUCKET
                                         ? pkvk_plan_bucket(&p, lens, lens, n, fixed_splits, &S)
                                     : pkv_route_is_flashinfer((pkv_route)route)
                                         ? pkvk_plan_flashinfer(&p, (pkv_route)route, &s, lens, n,
                                                                dev.sm_count, fi_occ)
                                         : pkvk_plan_workqueue(&p, (pkv_route)route, &s, lens,
                                                               splits, n);
                            CHECK(rc == 0, "plan");
                            /* The fused route runs twice: its counters must reset themselves. */
                            for (int rep = 0; rep < (route == PKV_ROUTE_FUSED ? 2 : 1); rep++) {
                                CHECK(run_plan(ctx, ws, &d, &p, h.q_elems, o, tmp, turn++) == 0,
                                      "run: %s", pkvk_last_error());
                                pkvk_compare(o, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
                                CHECK(pkv_tol_typed_ok(dt == PKVK_BF16, kdt == PKVK_FP8_E4M3, vmax,
                                                       omax, mx, mean),
                                      "%s/%s d=%d G=%d ps=%d %s S=%d rep %d: max|e| %.3g mean|e| "
                                      "%.3g "
                                      "(NaN: an output was not written)",
                                      pkvk_dtype_names[dt], pkvk_dtype_names[kdt], s.d, Gs[gi],
                                      pss[pi], pkv_route_name((pkv_route)route), S, rep, mx, mean);
                                if ((!fp16 || di) && rep == 0 && sc == 0 &&
                                    (gi == 0 || (one_scale && pi == 0)))
                                    printf("%s/%s d=%d %s: max|e| %.3g mean|e| %.3g\n",
                                           pkvk_dtype_names[dt], pkvk_dtype_names[kdt], s.d,
                                           pkv_route_name((pkv_route)route), mx, mean);
                            }
                        }
                    }
                    if (fp8 && !one_scale && fi_built && fi_g && pi == 0) { /* refused */
                        int launches;
                        CHECK(pkvk_plan_flashinfer(&p, PKV_ROUTE_FLASHINFER_TC, &s, lens, n,
                                                   dev.sm_count, fi_occ) == 0 &&
                                  pkvk_launch(ws, &d.b, &p, &launches) == PKVK_ERR_UNSUPPORTED,
                              "%s/%s on FlashInfer's route: not refused", pkvk_dtype_names[dt],
                              pkvk_dtype_names[kdt]);
                    }
                    pkvk_workspace_destroy(ws);
                    pkvk_plan_free(&p);
                    free(ref), free(o), free(g32), free(tmp);
                    release(&d);
                    free_batch(&h);
                }

    CHECK(quick || (uploads[0] > 10 && uploads[2] > 10),
          "upload paths not all taken: %d in parameters, %d copied", uploads[0], uploads[2]);
}

/* A verify step (issue 47): h's rows take Q query tokens each, fresh Gaussian queries
 * [n_rows][Q][hq][d] in Q's type. */
static void with_query_tokens(host_batch *h, gsl_rng *rng, int Q) {
    h->q_elems *= (size_t)Q;
    free(h->q);
    h->q = malloc(h->q_elems * 2);
    CHECK(h->q != NULL, "memory");
    for (size_t i = 0; i < h->q_elems; i++) {
        const float x = (float)gsl_ran_gaussian(rng, 1.0);
        h->q[i] = h->b.shape.dtype == PKVK_BF16 ? pkvk_f2bf(x) : pkvk_f2h(x);
    }
    h->b.q = h->q, h->b.q_len = Q;
}

/* A verify step's query tokens (q_len 2 to 8 a row, packed beside the group's heads, each
 * over the keys up to its own position: in 8 MMA rows or 16, the last query block short
 * where the tokens do not fill it, as for G 3 or q_len 3 at G 4) on every PersistentKV route
 * and split count (empty splits among them, where a token's keys end before its split
 * begins), against the CPU reference, and the GPU reference against it; FlashInfer's routes
 * on its prefill path (FP8 KV at one scale; refused where scales vary); a workspace too
 * small for the states refuses the step. Under
 * PKV_QUICK one q_len and group (3 tokens at G 4: a short block, 12 of 16 rows at d 64 and
 * 128, blocks of 2 and 1 tokens in 8 rows at d 256). */
static void verify_steps_match_the_reference(void) {
    const int qls[5] = {2, 3, 4, 5, 8}, Gs[5] = {1, 2, 3, 4, 8}, dims[3] = {128, 64, 256};
    const int types[3][2] = {
        {PKVK_FP16, PKVK_FP16}, {PKVK_BF16, PKVK_BF16}, {PKVK_FP16, PKVK_FP8_E4M3}};
    int cases = 0;
    for (int qi = quick ? 1 : 0; qi < (quick ? 2 : 5); qi++)
        for (int gi = quick ? 3 : 0; gi < (quick ? 4 : 5); gi++)
            for (int ty = 0; ty < 3; ty++) {
                const int Q = qls[qi], G = Gs[gi], dt = types[ty][0], kdt = types[ty][1];
                const pkvk_shape s = {.hq = 2 * G,
                                      .hkv = 2,
                                      .d = dims[(qi + gi + ty) % 3],
                                      .page_size = (qi + ty) % 2 ? 1 : 16,
                                      .dtype = dt,
                                      .kv_dtype = kdt};
                int32_t lens[6] = {Q,
                                   Q + 1,
                                   Q + 15,
                                   Q + 31 + (int32_t)gsl_rng_uniform_int(r, 64),
                                   Q + 1000 + (int32_t)gsl_rng_uniform_int(r, 1500),
                                   Q + (int32_t)gsl_rng_uniform_int(r, 4000)};
                const int n = 6;
                host_batch h;
                make_batch(&h, r, s, lens, n, 0.5);
                const int one_scale = kdt == PKVK_FP8_E4M3 && (G == 2 || G == 4);
                if (one_scale) fp8_one_scale(&h);
                with_query_tokens(&h, r, Q);
                dev_batch d = {0};
                CHECK(upload(&h, &d) == 0, "upload: %s", pkvk_last_error());
                float *ref = malloc(h.q_elems * 4), *o = malloc(h.q_elems * 4),
                      *g32 = malloc(h.q_elems * 4);
                uint16_t *tmp = malloc(h.q_elems * 2);
                CHECK(ref && o && g32 && tmp, "memory");
                CHECK(pkvk_cpu_reference(&h.b, ref) == PKVK_OK, "CPU reference");
                double mx, mean, vmax, omax;
                CHECK(pkvk_gpu_reference(ctx, &d.b, d.o32) == 0 &&
                          pkvk_d2h(g32, d.o32, h.q_elems * 4) == 0,
                      "gpu reference: %s", pkvk_last_error());
                pkvk_compare(g32, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
                CHECK(mx < 1e-4, "q_len %d: GPU FP32 reference vs CPU: max|e| %.3g", Q, mx);
                typed_bounds(&h, ref, &vmax, &omax);
                pkvk_plan p;
                pkvk_workspace *ws;
                CHECK(pkvk_plan_init(&p, n, 4096) == 0, "plan");
                CHECK(pkvk_workspace_create(ctx, &ws, &s, n * Q, 512 * Q, 4096) == 0,
                      "workspace: %s", pkvk_last_error());
                for (int route = 0; route <= PKV_ROUTE_FUSED; route++)
                    for (int sc = 0; sc < (route == PKV_ROUTE_REF_PAGED ? 1 : 3); sc++) {
                        int32_t S = (int32_t[]){1, 3, 80}[sc], splits[6];
                        for (int i = 0; i < n; i++) splits[i] = S;
                        const int rc =
                            route == PKV_ROUTE_REF_PAGED ? pkvk_plan_ref(&p, lens, n)
                            : route == PKV_ROUTE_BUCKET
                                ? pkvk_plan_bucket(&p, lens, lens, n, fixed_splits, &S)
                                : pkvk_plan_workqueue(&p, (pkv_route)route, &s, lens, splits, n);
                        CHECK(rc == 0, "plan");
                        CHECK(run_plan(ctx, ws, &d, &p, h.q_elems, o, tmp, cases) == 0,
                              "q_len %d %s: %s", Q, pkv_route_name((pkv_route)route),
                              pkvk_last_error());
                        pkvk_compare(o, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
                        CHECK(pkv_tol_typed_ok(dt == PKVK_BF16, kdt == PKVK_FP8_E4M3, vmax, omax,
                                               mx, mean),
                              "q_len %d %s/%s d=%d G=%d ps=%d %s S=%d: max|e| %.3g mean|e| %.3g "
                              "(NaN: an output was not written)",
                              Q, pkvk_dtype_names[dt], pkvk_dtype_names[kdt], s.d, G, s.page_size,
                              pkv_route_name((pkv_route)route), S, mx, mean);
                        cases++;
                    }
                int launches;
                /* FlashInfer's routes run it on its prefill path, planned by PrefillPlan
                 * against pkvsim's mirror (the upload refuses a partition it did not
                 * predict); over FP8 KV with one scale, refused where scales vary */
                for (int route = PKV_ROUTE_FLASHINFER;
                     fi_built && pkv_flashinfer_group(G) && s.d == 128 &&
                     route <= PKV_ROUTE_FLASHINFER_TC;
                     route++) {
                    int occ = 0;
                    p.q_len = Q;
                    CHECK(pkvk_flashinfer_occupancy(&s, &occ) == 0 &&
                              pkvk_plan_flashinfer(&p, (pkv_route)route, &s, lens, n, dev.sm_count,
                                                   occ) == 0,
                          "q_len %d: FlashInfer plan: %s", Q, pkvk_last_error());
                    if (kdt == PKVK_FP8_E4M3 && !one_scale) {
                        CHECK(pkvk_launch(ws, &d.b, &p, &launches) == PKVK_ERR_UNSUPPORTED,
                              "q_len %d on %s over FP8 KV of varying scales: not refused", Q,
                              pkv_route_name((pkv_route)route));
                        continue;
                    }
                    CHECK(run_plan(ctx, ws, &d, &p, h.q_elems, o, tmp, cases) == 0,
                          "q_len %d %s: %s", Q, pkv_route_name((pkv_route)route),
                          pkvk_last_error());
                    pkvk_compare(o, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
                    CHECK(pkv_tol_typed_ok(dt == PKVK_BF16, kdt == PKVK_FP8_E4M3, vmax, omax, mx,
                                           mean),
                          "q_len %d %s/%s G=%d ps=%d %s (%d slots): max|e| %.3g mean|e| %.3g", Q,
                          pkvk_dtype_names[dt], pkvk_dtype_names[kdt], G, s.page_size,
                          pkv_route_name((pkv_route)route), p.n_slots, mx, mean);
                    cases++;
                }
                p.q_len = 0;
                /* A workspace with room for the decode step's states only. */
                pkvk_workspace *small;
                int32_t three[6] = {3, 3, 3, 3, 3, 3};
                CHECK(pkvk_plan_workqueue(&p, PKV_ROUTE_WORKQUEUE, &s, lens, three, n) == 0 &&
                          pkvk_workspace_create(ctx, &small, &s, n, p.n_slots, 4096) == 0,
                      "small workspace: %s", pkvk_last_error());
                CHECK(pkvk_plan_upload(small, &p) == 0 &&
                          pkvk_launch(small, &d.b, &p, &launches) == PKVK_ERR_INVALID,
                      "q_len %d: %d slots' states in a workspace of %d slots not refused", Q,
                      p.n_slots * Q, p.n_slots);
                pkvk_workspace_destroy(small);
                pkvk_workspace_destroy(ws);
                pkvk_plan_free(&p);
                free(ref), free(o), free(g32), free(tmp);
                release(&d);
                free_batch(&h);
            }
    printf("%d verify cases (q_len x shape x route x splits) against the FP32 reference\n", cases);
}

/* More states than the merges' shared buffers hold (512 slots per head in the merge
 * kernel, 12288 floats in the fused one): 1250 slots of G = 8 heads in a row take the
 * serial merge path, for every split route and every way up; the workqueue plans (2500
 * splits) are too large for a launch's parameters. */
static void many_states_take_the_serial_merge(void) {
    if (quick) return;
    pkvk_shape s = {.hq = 16, .hkv = 2, .d = 128, .page_size = 16};
    int32_t lens[2] = {40000, 39990}, S = 1300, splits[2] = {1300, 1300};
    host_batch h;
    make_batch(&h, r, s, lens, 2, 0.5);
    dev_batch d = {0};
    CHECK(upload(&h, &d) == 0, "upload: %s", pkvk_last_error());
    float *ref = malloc(h.q_elems * 4), *o = malloc(h.q_elems * 4);
    uint16_t *tmp = malloc(h.q_elems * 2);
    CHECK(pkvk_cpu_reference(&h.b, ref) == PKVK_OK, "CPU reference");
    pkvk_plan p;
    pkvk_workspace *ws;
    CHECK(pkvk_plan_init(&p, 2, 8192) == 0, "plan");
    CHECK(pkvk_workspace_create(ctx, &ws, &s, 2, 4096, 8192) == 0, "workspace");
    for (int route = PKV_ROUTE_BUCKET; route < PKV_ROUTE_FLASHINFER; route++) {
        int rc = route == PKV_ROUTE_BUCKET
                     ? pkvk_plan_bucket(&p, lens, lens, 2, fixed_splits, &S)
                     : pkvk_plan_workqueue(&p, (pkv_route)route, &s, lens, splits, 2);
        CHECK(rc == 0 && p.split_offsets[1] - p.split_offsets[0] > 512, "plan %d", route);
        for (int how = 0; how < 3; how++) {
            CHECK(run_plan(ctx, ws, &d, &p, h.q_elems, o, tmp, how) == 0, "run: %s",
                  pkvk_last_error());
            double mx, mean;
            pkvk_compare(o, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
            CHECK(pkv_tol_ok(mx, mean), "%d-slot %s, upload %d: max|e| %.3g mean|e| %.3g",
                  p.split_offsets[1] - p.split_offsets[0], pkv_route_name((pkv_route)route), how,
                  mx, mean);
        }
    }
    pkvk_workspace_destroy(ws);
    pkvk_plan_free(&p);
    free(ref), free(o), free(tmp);
    release(&d);
    free_batch(&h);
    CHECK(uploads[1] > 0, "no plan was too large for a launch's parameters");
}

/* The MLP tail against a CPU FP32 reference: hidden 256, intermediate 512, 5 rows,
 * weights tiled from a block whose length is not a multiple of either width. */
static void the_mlp_tail_matches_the_reference(void) {
    if (quick) return;
    enum { HID = 256, INTER = 512, ROWS = 5, WN = 100003 };
    uint16_t *w = malloc(WN * 2), *x = malloc(ROWS * HID * 2), *z = malloc(ROWS * HID * 2);
    for (int j = 0; j < WN; j++) w[j] = pkvk_f2h((float)(gsl_ran_gaussian(r, 1.0) / 16));
    for (int j = 0; j < ROWS * HID; j++) x[j] = pkvk_f2h((float)gsl_ran_gaussian(r, 1.0));
    pkvk_mlp *m;
    void *dx;
    const uint16_t *dz;
    CHECK(pkvk_mlp_create(ctx, &m, HID, INTER, ROWS, w, WN) == 0 &&
              pkvk_malloc(&dx, ROWS * HID * 2) == 0 && pkvk_h2d(dx, x, ROWS * HID * 2) == 0 &&
              pkvk_mlp_run(m, ROWS, dx, &dz) == 0 && pkvk_sync(ctx) == 0 &&
              pkvk_d2h(z, dz, ROWS * HID * 2) == 0,
          "mlp: %s", pkvk_last_error());
    double num = 0, den = 0;
    static double y[2 * INTER], a[INTER];
    for (int rr = 0; rr < ROWS; rr++) {
        for (int j = 0; j < 2 * INTER; j++) {
            y[j] = 0;
            for (int h = 0; h < HID; h++)
                y[j] += pkvk_h2f(x[rr * HID + h]) * pkvk_h2f(w[((size_t)h * 2 * INTER + j) % WN]);
        }
        for (int j = 0; j < INTER; j++) a[j] = y[j] / (1 + exp(-y[j])) * y[INTER + j];
        for (int h = 0; h < HID; h++) {
            double ref = 0;
            for (int j = 0; j < INTER; j++) ref += a[j] * pkvk_h2f(w[((size_t)j * HID + h) % WN]);
            double d = pkvk_h2f(z[rr * HID + h]) - ref;
            num += d * d, den += ref * ref;
        }
    }
    CHECK(sqrt(num / den) < 5e-3, "MLP relative error %.3g", sqrt(num / den));
    printf("mlp tail: relative error %.2e against the CPU FP32 reference\n", sqrt(num / den));
    pkvk_mlp_destroy(m);
    pkvk_free(dx);
    free(w), free(x), free(z);
}

/* The engine's planner for three rows of shape s (cal: the defaults' calibration, an
 * H200's, on this GPU's SMs; the planner keeps a pointer to it) and a workspace its
 * plans fit. */
static pkvk_workspace *long_rows_planner(const pkvk_shape *s, pkv_calib *cal, pkv_planner *pl) {
    pkv_calib_defaults(cal);
    cal->sm_count = dev.sm_count;
    pkv_calib_flashinfer_occupancy(cal, s);
    pkvk_workspace *ws = NULL;
    CHECK(pkv_planner_init(pl, s, cal, 3, PKV_BUCKET_MODE_EXACT) == 0, "planner");
    CHECK(pkvk_workspace_create(ctx, &ws, s, 3, pl->plans[0].cap_tasks, pl->plans[0].cap_tasks) ==
              0,
          "workspace: %s", pkvk_last_error());
    return ws;
}

/* Long rows with the engine's planner (the study's shape), against the GPU FP32
 * reference: B=3 at 100K, 32K and 5 tokens; a second context (its own stream, its own
 * workspace) runs the same plan to the same output, bit for bit. */
static void long_rows_match_under_the_engine_planner(void) {
    if (quick) return;
    pkvk_shape s = {.hq = 32, .hkv = 8, .d = 128, .page_size = 16};
    int32_t lens[3] = {100000, 32768, 5};
    host_batch h;
    make_batch(&h, r, s, lens, 3, 0.5);
    dev_batch d = {0};
    CHECK(upload(&h, &d) == 0, "upload: %s", pkvk_last_error());
    float *ref = malloc(h.q_elems * 4), *o = malloc(h.q_elems * 4), *o2 = malloc(h.q_elems * 4);
    uint16_t *tmp = malloc(h.q_elems * 2);
    CHECK(pkvk_gpu_reference(ctx, &d.b, d.o32) == 0 && pkvk_d2h(ref, d.o32, h.q_elems * 4) == 0,
          "reference: %s", pkvk_last_error());
    pkv_planner pl;
    pkv_calib cal;
    pkvk_workspace *ws = long_rows_planner(&s, &cal, &pl);
    for (int route = 0, turn = 0; route < PKV_ROUTE_COUNT; route++) {
        if (!pkvk_route_built((pkv_route)route)) continue;
        CHECK(pkv_planner_build(&pl, (pkv_route)route, lens, 3) == 0, "plan");
        CHECK(run_plan(ctx, ws, &d, &pl.plans[route], h.q_elems, o, tmp, turn++) == 0, "run: %s",
              pkvk_last_error());
        double mx, mean;
        pkvk_compare(o, NULL, PKVK_FP16, ref, h.q_elems, &mx, &mean);
        CHECK(pkv_tol_ok(mx, mean), "long %s: max|e| %.3g mean|e| %.3g",
              pkv_route_name((pkv_route)route), mx, mean);
        printf("long rows, %-14s max|e| %.3g mean|e| %.3g\n", pkv_route_name((pkv_route)route), mx,
               mean);
    }
    pkvk_ctx *c2 = NULL;
    pkvk_workspace *w2 = NULL;
    const pkvk_plan *wq = &pl.plans[PKV_ROUTE_WORKQUEUE];
    CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, lens, 3) == 0, "plan");
    CHECK(run_plan(ctx, ws, &d, wq, h.q_elems, o, tmp, 0) == 0, "run: %s", pkvk_last_error());
    CHECK(pkvk_ctx_create(&c2, 0) == 0 &&
              pkvk_workspace_create(c2, &w2, &s, 3, pl.plans[0].cap_tasks, pl.plans[0].cap_tasks) ==
                  0,
          "second context: %s", pkvk_last_error());
    CHECK(run_plan(c2, w2, &d, wq, h.q_elems, o2, tmp, 1) == 0, "run: %s", pkvk_last_error());
    CHECK(memcmp(o, o2, h.q_elems * 4) == 0, "a second context's output differs");
    pkvk_workspace_destroy(w2);
    pkvk_ctx_destroy(c2);
    pkvk_workspace_destroy(ws);
    pkv_planner_free(&pl);
    free(ref), free(o), free(o2), free(tmp);
    release(&d);
    free_batch(&h);
}

/* Plans the kernels cannot run are refused at upload: a partition FlashInfer's planner
 * would not make (where its routes are built), a workqueue plan whose CTA count is not
 * hkv per split entry. */
static void plans_the_kernels_cannot_run_are_refused(void) {
    if (quick) return;
    pkvk_shape s = {.hq = 32, .hkv = 8, .d = 128, .page_size = 16};
    int32_t lens[3] = {100000, 32768, 5};
    pkv_planner pl;
    pkv_calib cal;
    pkvk_workspace *ws = long_rows_planner(&s, &cal, &pl);
    if (fi_built) {
        pkvk_plan *fp = &pl.plans[PKV_ROUTE_FLASHINFER_TC];
        CHECK(pkv_planner_build(&pl, PKV_ROUTE_FLASHINFER_TC, lens, 3) == 0, "plan");
        fp->split_offsets[1]++;
        CHECK(pkvk_plan_upload(ws, fp) == PKVK_ERR_INVALID, "a wrong mirror was accepted");
        printf("mirror mismatch refused: %s\n", pkvk_last_error());
    }
    pkvk_plan *wp = &pl.plans[PKV_ROUTE_WORKQUEUE];
    CHECK(pkv_planner_build(&pl, PKV_ROUTE_WORKQUEUE, lens, 3) == 0, "plan");
    wp->n_tasks += 1;
    CHECK(pkvk_plan_upload(ws, wp) == PKVK_ERR_INVALID,
          "a task count that is not hkv per split was accepted");
    wp->n_tasks -= 1;
    pkvk_workspace_destroy(ws);
    pkv_planner_free(&pl);
}

/* Prefix caching's block tables: rows naming the same physical pages give, under every
 * built route, the output of the same content in private pages, bit for bit, and both
 * agree with the CPU reference. */
static void shared_prefix_pages_match_private_ones(void) {
    if (quick) return;
    pkvk_shape s2 = {.hq = 32, .hkv = 8, .d = 128, .page_size = 16};
    int32_t l2[5];
    for (int i = 0; i < 5; i++) l2[i] = 300 + (int32_t)gsl_rng_uniform_int(r, 6000);
    host_batch hs, hp;
    make_batch(&hs, r, s2, l2, 5, 0.3);
    const int32_t m = share_prefix(&hs, &hp);
    dev_batch ds = {0}, dp = {0};
    CHECK(upload(&hs, &ds) == 0 && upload(&hp, &dp) == 0, "upload: %s", pkvk_last_error());
    const size_t on = hs.q_elems;
    float *o1 = malloc(on * 4), *o2 = malloc(on * 4), *r2 = malloc(on * 4);
    uint16_t *t2 = malloc(on * 2);
    CHECK(pkvk_cpu_reference(&hp.b, r2) == PKVK_OK, "CPU reference");
    pkvk_plan p;
    pkvk_workspace *w2;
    int fi_occ = 0;
    CHECK(pkvk_plan_init(&p, 5, 4096) == 0 &&
              pkvk_workspace_create(ctx, &w2, &s2, 5, 4096, 4096) == 0 &&
              (!fi_built || pkvk_flashinfer_occupancy(&s2, &fi_occ) == 0),
          "setup: %s", pkvk_last_error());
    int routes = 0;
    for (int route = 0; route < PKV_ROUTE_COUNT; route++) {
        if (!pkvk_route_built((pkv_route)route)) continue;
        int32_t S = 3, sp[5] = {3, 3, 3, 3, 3};
        int rc = route == PKV_ROUTE_REF_PAGED ? pkvk_plan_ref(&p, l2, 5)
                 : route == PKV_ROUTE_BUCKET  ? pkvk_plan_bucket(&p, l2, l2, 5, fixed_splits, &S)
                 : pkv_route_is_flashinfer((pkv_route)route)
                     ? pkvk_plan_flashinfer(&p, (pkv_route)route, &s2, l2, 5, dev.sm_count, fi_occ)
                     : pkvk_plan_workqueue(&p, (pkv_route)route, &s2, l2, sp, 5);
        CHECK(rc == 0 && run_plan(ctx, w2, &ds, &p, on, o1, t2, 0) == 0 &&
                  run_plan(ctx, w2, &dp, &p, on, o2, t2, 0) == 0,
              "route %d: %s", route, pkvk_last_error());
        double mx, mean;
        pkvk_compare(o1, NULL, PKVK_FP16, r2, on, &mx, &mean);
        CHECK(memcmp(o1, o2, on * 4) == 0 && pkv_tol_ok(mx, mean),
              "route %s: shared pages differ from private ones (max|e| %.3g)",
              pkv_route_name((pkv_route)route), mx);
        routes++;
    }
    printf("shared pages: %d pages of 4 rows shared, %d routes match private pages\n", m, routes);
    pkvk_workspace_destroy(w2);
    pkvk_plan_free(&p);
    free(o1), free(o2), free(r2), free(t2);
    release(&ds), release(&dp);
    free_batch(&hs), free_batch(&hp);
}

static const pkv_test_case cases[] = {
    PKV_CASE(a_device_past_the_visible_ones_is_refused),
    PKV_CASE(allocations_past_the_gpu_are_out_of_memory),
    PKV_CASE(the_workqueue_kernel_keeps_its_residency),
    PKV_CASE(small_shapes_match_the_reference_on_every_route),
    PKV_CASE(verify_steps_match_the_reference),
    PKV_CASE(many_states_take_the_serial_merge),
    PKV_CASE(the_mlp_tail_matches_the_reference),
    PKV_CASE(long_rows_match_under_the_engine_planner),
    PKV_CASE(plans_the_kernels_cannot_run_are_refused),
    PKV_CASE(shared_prefix_pages_match_private_ones),
    PKV_CASE(swapped_pages_keep_their_bytes),
};
PKV_TEST_MAIN_WITH(cases, setup, teardown)
