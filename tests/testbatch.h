/* Random paged batches for kernel tests: Gaussian Q/K/V from GSL, block tables
 * from the study's generator (pagetable.h) with a given fraction of holes. */
#ifndef PKV_TESTBATCH_H
#define PKV_TESTBATCH_H

#include <gsl/gsl_rng.h>

#include "pkvk.h"

typedef struct host_batch {
    pkvk_batch b;             /* host pointers */
    uint16_t *q, *k, *v;      /* shape.dtype's and shape.kv_dtype's elements (FP8: bytes) */
    float *k_scale, *v_scale; /* FP8 KV: each page and KV head's amax / 448 */
    float *kf, *vf;           /* FP8 KV: the values before quantization */
    int32_t *bt, *lens;
    int32_t n_pages; /* page universe */
    size_t kv_elems, q_elems;
} host_batch;

/* In the shape's types: Q FP16 or BF16 (rounded to nearest), KV also FP8 E4M3 (each
 * page and KV head scaled by its largest magnitude over 448, rounded to nearest). */
void make_batch(host_batch *h, gsl_rng *r, pkvk_shape s, const int32_t *lens, int n, double holes);
void free_batch(host_batch *h);
/* FP8 KV: h's codes again over one K and one V scale for the whole cache (the largest
 * magnitude of each over 448), as FlashInfer's FP8 path takes them (b.k_scale_all). */
void fp8_one_scale(host_batch *h);
/* Prefix sharing: rows 1.. of h take row 0's first pages in place of their own (all
 * but the last page of the shortest of them, at most row 0's: their contexts begin
 * with row 0's); *priv receives the same batch with each row's shared pages copied
 * into pages of its own (the same content in private pages). Returns the pages
 * shared. */
int32_t share_prefix(host_batch *h, host_batch *priv);

#endif
