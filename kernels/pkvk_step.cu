// The decode step's prologue: metadata updates and the K/V append of the step's new
// token, as a serving engine does before attention.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "pkvk_cuda.h"

namespace {

// What the prologue needs besides the stage: the caller's step (its host stage
// pointer unused here) and the shape.
struct StepArgs {
    pkvk_step st;
    int32_t row_blocks, update_blocks; // row_blocks: the plan's layout rows, at least n_rows
    int hkv, hq, ps, chunks;           // chunks: 16-byte chunks per head row
    // Parameter path: words [0, copy_end) of the parameters go to arena.
    uint32_t *arena;
    int32_t copy_end;
    int32_t stage_word; // the stage's first word in the parameters or the arena
};

constexpr int PRO_THREADS = 128;

// Eight FP16 values (one 16-byte chunk) over a scale as eight E4M3 codes: divided (as the
// CPU backend does), rounded to nearest, saturating at 448.
__device__ __forceinline__ uint2 quantize8(uint4 x, float scale) {
    const uint32_t w[4] = {x.x, x.y, x.z, x.w};
    uint32_t out[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
        const __nv_fp8x2_storage_t c = __nv_cvt_float2_to_fp8x2(
            make_float2(__fdiv_rn(f.x, scale), __fdiv_rn(f.y, scale)), __NV_SATFINITE, __NV_E4M3);
        out[i / 2] |= (uint32_t)c << (16 * (i % 2));
    }
    return make_uint2(out[0], out[1]);
}

// Block b of the prologue. Blocks [0, n_rows): row b's length, new K/V token and Q;
// [n_rows, row_blocks): rows past the step's on a fixed grid, length 0 (no work); the
// next update_blocks: the block-table updates, PRO_THREADS per block; past those
// (parameter path only): the plan's words, PRO_THREADS per block, so that each warp
// reads 128 contiguous bytes of the parameters.
__device__ void prologue_block(const StepArgs &a, const int32_t *stage, const uint32_t *words) {
    const int b = blockIdx.x, tid = threadIdx.x;
    const pkvk_step &st = a.st;
    if (b >= a.row_blocks + a.update_blocks) {
        int i = (b - a.row_blocks - a.update_blocks) * PRO_THREADS + tid;
        if (i < a.copy_end) a.arena[i] = words[i];
        return;
    }
    if (b >= a.row_blocks) {
        int u = (b - a.row_blocks) * PRO_THREADS + tid;
        if (u < st.n_updates) {
            const int32_t *t = stage + 2 * st.n_rows + 3 * u;
            st.block_table[(size_t)t[0] * st.bt_stride + t[1]] = t[2];
        }
        return;
    }
    if (b >= st.n_rows) {
        if (tid == 0) st.seq_lens[b] = 0;
        return;
    }
    int32_t len = stage[b];
    if (tid == 0) st.seq_lens[b] = len;
    // The page comes with the stage: the table's entry may be one of this step's
    // updates, written by another block.
    int32_t pos = len - 1, page = stage[st.n_rows + b];
    size_t src = (size_t)((st.first_src + b) % st.src_rows);
    uint4 *k = (uint4 *)st.k_cache, *v = (uint4 *)st.v_cache, *q = (uint4 *)st.q;
    const uint4 *sk = (const uint4 *)st.src_k, *sv = (const uint4 *)st.src_v;
    const uint4 *sq = (const uint4 *)st.src_q;
    for (int c = tid; c < a.hkv * a.chunks; c += PRO_THREADS) {
        int h = c / a.chunks, j = c % a.chunks;
        size_t dst = (((size_t)page * a.hkv + h) * a.ps + pos % a.ps) * a.chunks + j;
        const size_t from = (src * a.hkv + h) * a.chunks + j;
        if (st.k_scale) { // an FP8 pool: 8 codes (8 bytes) per chunk of the source
            const size_t ph = (size_t)page * a.hkv + h;
            reinterpret_cast<uint2 *>(k)[dst] = quantize8(sk[from], st.k_scale[ph]);
            reinterpret_cast<uint2 *>(v)[dst] = quantize8(sv[from], st.v_scale[ph]);
        } else {
            k[dst] = sk[from];
            v[dst] = sv[from];
        }
    }
    for (int c = tid; c < a.hq * a.chunks; c += PRO_THREADS)
        q[(size_t)b * a.hq * a.chunks + c] = sq[src * a.hq * a.chunks + c];
}

// Copy path: the stage was copied to the device.
__global__ void __launch_bounds__(PRO_THREADS)
    prologue_kernel(const StepArgs a, const int32_t *__restrict__ stage) {
    prologue_block(a, stage + a.stage_word, nullptr);
}

// Parameter path: the stage and the plan's arrays are this launch's parameters
// (read in place through the __grid_constant__ blob's address).
template <int N> struct Blob { uint4 x[N / 16]; };
template <int N>
__global__ void __launch_bounds__(PRO_THREADS)
    prologue_param_kernel(const StepArgs a, const __grid_constant__ Blob<N> blob) {
    prologue_block(a, reinterpret_cast<const int32_t *>(&blob) + a.stage_word,
                   reinterpret_cast<const uint32_t *>(&blob));
}

template <int N>
int launch_param(cudaStream_t st, int blocks, const StepArgs &a, const char *host) {
    static_assert(N % 16 == 0 && N <= PKVK_PARAM_BYTES, "blob within the parameter limit");
    // The blob is read from the caller's pinned staging (at least PKVK_PARAM_BYTES).
    void *args[] = {(void *)&a, (void *)host};
    PKVK_CK(cudaLaunchKernel((const void *)prologue_param_kernel<N>, dim3(blocks),
                             dim3(PRO_THREADS), args, 0, st));
    return PKVK_OK;
}

// One block per listed page: the page's K and V rows, 8 elements per thread and step
// (16-bit pools: copied; FP8 pools (k_scale set): quantized over the page and head's
// scales, head_chunks chunks a head).
__global__ void fill_pages_kernel(const int32_t *__restrict__ pages, size_t page_chunks,
                                  size_t head_chunks, uint4 *k, uint4 *v, const float *k_scale,
                                  const float *v_scale, int hkv, const uint4 *__restrict__ blk_k,
                                  const uint4 *__restrict__ blk_v, size_t blk_chunks) {
    const size_t page = (size_t)pages[blockIdx.x], base = page * page_chunks;
    for (size_t j = threadIdx.x; j < page_chunks; j += blockDim.x) {
        size_t b = (base + j) % blk_chunks;
        if (k_scale) {
            const size_t ph = page * hkv + j / head_chunks;
            reinterpret_cast<uint2 *>(k)[base + j] = quantize8(blk_k[b], k_scale[ph]);
            reinterpret_cast<uint2 *>(v)[base + j] = quantize8(blk_v[b], v_scale[ph]);
        } else {
            k[base + j] = blk_k[b];
            v[base + j] = blk_v[b];
        }
    }
}

} // namespace

extern "C" int pkvk_fill_pages(const pkvk_ctx *c, const pkvk_shape *s, uint16_t *k_cache,
                               uint16_t *v_cache, const float *k_scale, const float *v_scale,
                               const int32_t *pages, int32_t n_pages, const uint16_t *blk_k,
                               const uint16_t *blk_v, size_t blk_n) {
    if (n_pages == 0) return PKVK_OK;
    if (s->d % 8 || blk_n % 8)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "fill: sizes must be multiples of 8 halves");
    const bool fp8 = s->kv_dtype == PKVK_FP8_E4M3;
    if (fp8 != (k_scale && v_scale))
        return pkvk_fail_msg(PKVK_ERR_INVALID, "fill: scales go with an FP8 pool, and only there");
    size_t head_chunks = (size_t)s->page_size * s->d / 8, page_chunks = s->hkv * head_chunks;
    fill_pages_kernel<<<n_pages, 256, 0, c->stream>>>(
        pages, page_chunks, head_chunks, (uint4 *)k_cache, (uint4 *)v_cache, k_scale, v_scale,
        s->hkv, (const uint4 *)blk_k, (const uint4 *)blk_v, blk_n / 8);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

extern "C" int pkvk_step_upload(pkvk_workspace *ws, const pkvk_plan *p, const pkvk_step *st,
                                pkvk_upload_mode mode, int *copies) {
    const int32_t n_rows = st ? st->n_rows : 0, n_updates = st ? st->n_updates : 0;
    const size_t stage_bytes = sizeof(int32_t) * (2 * (size_t)n_rows + 3 * (size_t)n_updates);
    if (copies) *copies = 0;
    pkvk_packed pk;
    int rc = pkvk_plan_pack(ws, p, st ? st->stage : nullptr, stage_bytes, &pk);
    if (rc) return rc;
    const cudaStream_t stream = pkvk_workspace_ctx(ws)->stream;
    StepArgs a = {};
    a.update_blocks = (n_updates + PRO_THREADS - 1) / PRO_THREADS;
    a.stage_word = (int32_t)(pk.extra_begin / 4);
    if (st) {
        const pkvk_shape *s = pkvk_workspace_shape(ws);
        if (s->d % 8)
            return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension must be a multiple of 8");
        if ((s->kv_dtype == PKVK_FP8_E4M3) != (st->k_scale && st->v_scale))
            return pkvk_fail_msg(PKVK_ERR_INVALID,
                                 "the append: scales go with an FP8 pool, and only there");
        a.st = *st;
        a.row_blocks = pk.rows > n_rows ? pk.rows : n_rows;
        a.hkv = s->hkv, a.hq = s->hq, a.ps = s->page_size, a.chunks = s->d / 8;
    }
    if (mode == PKVK_UPLOAD_PARAMS && pk.bytes <= PKVK_PARAM_BYTES) {
        a.arena = (uint32_t *)pk.dev;
        a.copy_end = (int32_t)((pk.plan_end + 3) / 4);
        int blocks = a.row_blocks + a.update_blocks + (a.copy_end + PRO_THREADS - 1) / PRO_THREADS;
        if (blocks == 0) return PKVK_OK;
        // A launch's cost grows with its parameters' size: the smallest blob that fits.
        return pk.bytes <= 1024    ? launch_param<1024>(stream, blocks, a, pk.host)
               : pk.bytes <= 2048  ? launch_param<2048>(stream, blocks, a, pk.host)
               : pk.bytes <= 4096  ? launch_param<4096>(stream, blocks, a, pk.host)
               : pk.bytes <= 12288 ? launch_param<12288>(stream, blocks, a, pk.host)
                                   : launch_param<PKVK_PARAM_BYTES>(stream, blocks, a, pk.host);
    }
    if (pk.bytes) {
        PKVK_CK(cudaMemcpyAsync(pk.dev, pk.host, pk.bytes, cudaMemcpyHostToDevice, stream));
        if (copies) *copies = 1;
    }
    int blocks = a.row_blocks + a.update_blocks;
    if (blocks == 0) return PKVK_OK;
    prologue_kernel<<<blocks, PRO_THREADS, 0, stream>>>(a, (const int32_t *)pk.dev);
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}
