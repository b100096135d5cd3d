// The decode step's prologue: metadata updates and the K/V append of the step's new
// token, as a serving engine does before attention.
#include <cuda_fp16.h>
#include <stdint.h>

#include "pkvk_cuda.h"

namespace {

// Blocks [0, n_rows): row i's lengths, new K/V token and Q; blocks past that: the
// block-table updates, 128 per block.
__global__ void prologue_kernel(int32_t n_rows, const int32_t *__restrict__ stage,
                                int32_t n_updates, int32_t *seq_lens, int32_t *bt,
                                int32_t bt_stride, uint4 *k, uint4 *v, uint4 *q, const uint4 *src_k,
                                const uint4 *src_v, const uint4 *src_q, int32_t src_rows,
                                int64_t first_src, int hkv, int hq, int ps, int d) {
    const int b = blockIdx.x, tid = threadIdx.x;
    if (b >= n_rows) {
        int u = (b - n_rows) * blockDim.x + tid;
        if (u < n_updates) {
            const int32_t *t = stage + 2 * n_rows + 3 * u;
            bt[(size_t)t[0] * bt_stride + t[1]] = t[2];
        }
        return;
    }
    int32_t len = stage[b];
    if (tid == 0) seq_lens[b] = len;
    // The page comes with the stage: the table's entry may be one of this step's
    // updates, written by another block.
    int32_t pos = len - 1, page = stage[n_rows + b];
    const int chunks = d / 8; // 16-byte chunks per head row
    size_t src = (size_t)((first_src + b) % src_rows);
    for (int c = tid; c < hkv * chunks; c += blockDim.x) {
        int h = c / chunks, j = c % chunks;
        size_t dst = (((size_t)page * hkv + h) * ps + pos % ps) * chunks + j;
        k[dst] = src_k[(src * hkv + h) * chunks + j];
        v[dst] = src_v[(src * hkv + h) * chunks + j];
    }
    for (int c = tid; c < hq * chunks; c += blockDim.x)
        q[(size_t)b * hq * chunks + c] = src_q[src * hq * chunks + c];
}

// One block per listed page: the page's K and V rows, 16 bytes per thread and step.
__global__ void fill_pages_kernel(const int32_t *__restrict__ pages, size_t page_chunks, uint4 *k,
                                  uint4 *v, const uint4 *__restrict__ blk_k,
                                  const uint4 *__restrict__ blk_v, size_t blk_chunks) {
    const size_t base = (size_t)pages[blockIdx.x] * page_chunks;
    for (size_t j = threadIdx.x; j < page_chunks; j += blockDim.x) {
        size_t b = (base + j) % blk_chunks;
        k[base + j] = blk_k[b];
        v[base + j] = blk_v[b];
    }
}

} // namespace

extern "C" int pkvk_fill_pages(const pkvk_shape *s, uint16_t *k_cache, uint16_t *v_cache,
                               const int32_t *pages, int32_t n_pages, const uint16_t *blk_k,
                               const uint16_t *blk_v, size_t blk_n) {
    if (n_pages == 0) return PKVK_OK;
    if (s->d % 8 || blk_n % 8)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "fill: sizes must be multiples of 8 halves");
    size_t page_chunks = (size_t)s->hkv * s->page_size * s->d / 8;
    fill_pages_kernel<<<n_pages, 256, 0, pkvk_stream()>>>(pages, page_chunks, (uint4 *)k_cache,
                                                          (uint4 *)v_cache, (const uint4 *)blk_k,
                                                          (const uint4 *)blk_v, blk_n / 8);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

extern "C" int pkvk_step_prologue(const pkvk_shape *s, int32_t n_rows, const int32_t *stage,
                                  int32_t n_updates, int32_t *seq_lens, int32_t *block_table,
                                  int32_t bt_stride, uint16_t *k_cache, uint16_t *v_cache,
                                  uint16_t *q, const uint16_t *src_k, const uint16_t *src_v,
                                  const uint16_t *src_q, int32_t src_rows, int64_t first_src) {
    if (n_rows == 0 && n_updates == 0) return PKVK_OK;
    if (s->d % 8)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension must be a multiple of 8");
    int blocks = n_rows + (n_updates + 127) / 128;
    prologue_kernel<<<blocks, 128, 0, pkvk_stream()>>>(
        n_rows, stage, n_updates, seq_lens, block_table, bt_stride, (uint4 *)k_cache,
        (uint4 *)v_cache, (uint4 *)q, (const uint4 *)src_k, (const uint4 *)src_v,
        (const uint4 *)src_q, src_rows, first_src, s->hkv, s->hq, s->page_size, s->d);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}
