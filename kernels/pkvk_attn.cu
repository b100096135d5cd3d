// PersistentKV paged decode attention: split, bucket, workqueue and fused routes,
// the segmented merge, and the ref_paged baseline, all from one CTA body.
//
// A CTA owns one (row, KV head, token range) and computes all G query heads that
// share the KV head, on tensor cores: the G heads are the rows of m16n8k16 MMAs
// (rows G..15 are zero; a verify step's query tokens are packed beside the heads, in 8
// rows or all 16, each row masked past its own position), S = Q K^T and O += P V per 16
// tokens. Each of the
// 4 warps streams its own 16 tokens of every 64-token tile through a 3-stage cp.async pipeline into
// an XOR-swizzled shared-memory layout read by ldmatrix, and keeps its own exact online-softmax
// state (m, l, O) in FP32 (P is rounded to the inputs' type, FP16 or BF16, for the PV product); the
// warps' states are merged once at the end. Scores are kept in the log2 domain (scaled by sm_scale
// * log2 e) so every exponential is exp2f.
//
// FP8 (E4M3) KV: the pipeline loads the codes and each token's page scales, 32 tokens a
// warp per tile (as many bytes as 16 of the 16-bit types). The MMAs take the codes widened in
// registers to the inputs' type (exact in FP16 and BF16): ldmatrix gives a lane four
// consecutive codes of one token, which are K's B fragment once Q's dimensions within each
// 16 follow the same order; ldmatrix's transpose gives a lane two tokens' pairs of codes,
// whose even and odd dimensions are V's B fragments, the output's dimensions permuted
// (undone when the warp's state is written). K's scale multiplies the FP32
// scores; V's multiplies P (relative to the first token's page's, so that P stays in the
// 16-bit type's range), and that reference scale multiplies the output.
#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "pkvk_cuda.h"
#include "pkvk_fi.h"
#include "pkvk_softmax.h"

namespace {

constexpr int WARPS = 4, THREADS = 32 * WARPS;
// Tokens per warp per tile: 16 (16-bit KV) or 32 (FP8 KV, F8: as many bytes), a CTA's
// iteration WARPS times as many.
template <bool F8> __host__ __device__ constexpr int wtok() {
    return F8 ? 32 : 16;
}

// The cp.async pipeline's depth per warp.
constexpr int STAGES = 3;

enum Mode { MODE_REF = 0, MODE_BUCKET = 1, MODE_TASKS = 2, MODE_FUSED = 3 };

struct Params {
    const __half *q;
    __half *o;
    const void *k, *v;              // the KV type's elements (FP8: bytes)
    const float *k_scale, *v_scale; // FP8 KV: [page][hkv]
    const int32_t *bt;
    int32_t bt_stride;
    const int32_t *seq_lens;
    int hq, hkv, ps, ps_shift; // ps_shift >= 0 when the page size is a power of two
    float scale_log2;
    const int32_t *split_offsets;
    const int32_t *bucket_rows;
    int32_t row_begin, splits;
    // workqueue, fused: the plan's tasks; CTA x runs task x / (hkv qbn), KV head x % hkv
    const pkvk_task *spans;
    int32_t layout_rows; // a fixed grid's plan: split_offsets[layout_rows] is its slot count
    float *part_acc;     // [slot][hkv][qlen x grp][D]
    float *part_ml;      // [slot][hkv][qlen x grp][2]: m (log2 domain), l
    int *counters;       // [n_rows * hkv * qbn] fused completion counters, left at 0
    int bf16;            // Q and O (K and V unless kv8) are BF16, else FP16
    int kv8;             // K and V are FP8 E4M3 codes with their scales
    // Query tokens: qlen a row (1: a decode step; a verify step's k + 1, token j at position
    // seq_len - qlen + j, attending the keys up to its own), grp query heads a KV head. A
    // CTA's G MMA rows hold G / grp query tokens beside their grp heads (as GQA packs
    // heads; pkvk_verify_pack), qbn such blocks a (row, KV head, split), the last one
    // possibly short; a slot's states of a KV head are qlen x grp, token-major.
    int qlen, grp, qbn;
};

#include "pkvk_attn_tile.cuh"
#include "pkvk_attn_merge.cuh"

// Head dimensions above 128 keep Q's MMA fragments in shared memory, read at each use:
// in registers beside the O fragments (D / 2 floats a lane) they would spill.
__host__ __device__ constexpr bool q_shared(int D) {
    return D > 128;
}

// A CTA's shared memory: the pipeline's stages, [STAGES][WARPS][K, V][wtok][D x the KV
// element's bytes / 16] 16-byte chunks, XOR-swizzled, read by ldmatrix; for FP8 KV also
// each loaded token's scales ([STAGES][WARPS][K, V][wtok] floats); then, where q_shared,
// Q's fragments ([D / 16][2][32 lanes] words: rows 0..7's, as 16 rows are not built there).
template <bool F8> __host__ __device__ constexpr size_t pipe_bytes(int D) {
    return (size_t)STAGES * WARPS * 2 * wtok<F8>() * (F8 ? D + sizeof(float) : 2 * D);
}
template <bool F8> __host__ __device__ constexpr size_t smem_bytes(int D) {
    return pipe_bytes<F8>(D) + (q_shared(D) ? (size_t)D / 16 * 2 * 32 * sizeof(uint32_t) : 0);
}

// The work of CTA x of a launch (x: blockIdx.x, or a fixed grid's task index). Every
// return is taken by the whole CTA.
template <int D, int G, int MODE, bool BF, bool F8>
__device__ __forceinline__ void attn_cta(const Params &p, unsigned x) {
    static_assert(D % 16 == 0 && (G <= 8 || (G == 16 && D <= 128)), "MMA rows: up to 8, or 16");
    constexpr bool W = G > 8; // a lane's rows: r, and r + 8 where W
    constexpr int NH = W ? 2 : 1;
    int row, kvh, qb, split, tb, te; // qb: the block of query tokens (Params::qbn)
    if (MODE == MODE_REF) {
        row = x, kvh = blockIdx.y % p.hkv, qb = blockIdx.y / p.hkv, split = 0, tb = 0,
        te = p.seq_lens[row];
    } else if (MODE == MODE_BUCKET) {
        row = p.bucket_rows[p.row_begin + x], kvh = blockIdx.y % p.hkv, qb = blockIdx.y / p.hkv,
        split = blockIdx.z;
        // pkvk_split_range on the row's true length.
        int len = p.seq_lens[row], tiles = (len + PKVK_TILE - 1) / PKVK_TILE;
        int tps = (tiles + p.splits - 1) / p.splits, t0 = split * tps;
        tb = min(t0, tiles) * PKVK_TILE;
        te = min(min(t0 + tps, tiles) * PKVK_TILE, len);
        if (tb > len) tb = len;
    } else {
        const unsigned per = (unsigned)(p.hkv * p.qbn), rem = x % per;
        const pkvk_task t = p.spans[x / per];
        row = t.row, kvh = rem % p.hkv, qb = rem / p.hkv, split = t.split, tb = t.t_begin,
        te = t.t_end;
    }
    const int slot0 = MODE == MODE_REF ? 0 : p.split_offsets[row];
    const int nslots = MODE == MODE_REF ? 1 : p.split_offsets[row + 1] - slot0;
    const bool direct = nslots == 1;
    const int NS = p.qlen * p.grp;      // a slot's states of a KV head
    const int nv = min(G, NS - qb * G); // this CTA's states (the last block's may be fewer)
    const size_t sidx = ((size_t)(slot0 + split) * p.hkv + kvh) * NS + qb * G; // this CTA's first
    const int tid = threadIdx.x;

    if (tb >= te) { // empty split: the neutral state, before touching Q or shared memory
        for (int i = tid; i < nv * D; i += THREADS) p.part_acc[sidx * D + i] = 0.f;
        if (tid < nv) {
            p.part_ml[(sidx + tid) * 2] = neg_inf();
            p.part_ml[(sidx + tid) * 2 + 1] = 0.f;
        }
        return;
    }

    extern __shared__ uint4 smem[];                                  // smem_bytes's layout
    constexpr int S = STAGES, EB = F8 ? 1 : 2;                       // KV element bytes
    constexpr int CH = D * EB / 16;                                  // 16-byte chunks per token row
    constexpr int WT = wtok<F8>(), NB = WT / 16, CTILE = WARPS * WT; // NB: 16-token blocks
    const int warp = tid / 32, lane = tid % 32;
    const int r = lane / 4;        // the MMA row (query head) this lane holds
    const int cq = (lane % 4) * 2; // its column pair in a fragment

    // Q as MMA A fragments, one per 16 dimensions, its registers i in the MMA's order (row
    // r + 8 (i % 2), columns q0 or q1 (i / 2)): rows past nv are zero, and where !W rows 8..15
    // (a1 = a3 are not read). Where q_shared, warp w writes the fragments kk = w, w + WARPS,
    // ... of every lane once, after the pipeline's buffers, and each use reads them (qf).
    constexpr bool QS = q_shared(D);
    static_assert(!(QS && W), "16 rows keep Q in registers");
    uint32_t qa[QS ? 1 : D / 16][4];
    uint32_t *qsm =
        reinterpret_cast<uint32_t *>(reinterpret_cast<char *>(smem) + pipe_bytes<F8>(D));
    // FP8 KV: a lane's dimensions of each 16 are K's fragment's, 4c..4c+3 (c = lane % 4).
    const int q0 = F8 ? 4 * (lane % 4) : cq, q1 = F8 ? q0 + 2 : cq + 8;
    // Row r + 8h (valid below nv) is query token jq's head; its keys end at its own position.
    const __half *qrow[NH];
    int te_r[NH];
#pragma unroll
    for (int h = 0; h < NH; h++) {
        const int st = qb * G + min(r + 8 * h, nv - 1), jq = st / p.grp;
        qrow[h] = p.q + (((size_t)row * p.qlen + jq) * p.hq + kvh * p.grp + st % p.grp) * D;
        te_r[h] = min(te, p.seq_lens[row] - p.qlen + jq + 1);
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        if (QS && kk % WARPS != warp) continue;
#pragma unroll
        for (int i = 0; i < 2 * NH; i++) {
            const int h = i % NH; // NH = 1: i = 0, 1 are a0, a2
            const uint32_t a =
                r + 8 * h < nv
                    ? *reinterpret_cast<const uint32_t *>(qrow[h] + kk * 16 + (i / NH ? q1 : q0))
                    : 0u;
            const int ai = NH == 2 ? i : 2 * i; // the register's index in the MMA's order
            if constexpr (QS)
                qsm[(kk * 2 + ai / 2) * 32 + lane] = a;
            else
                qa[kk][ai] = a;
        }
    }
    if (QS) __syncthreads();
    auto mma_q = [&](float *d, int kk, uint32_t b0, uint32_t b1) {
        if constexpr (QS) {
            const uint32_t a[4] = {qsm[kk * 64 + lane], 0u, qsm[kk * 64 + 32 + lane], 0u};
            mma_rows<BF, W>(d, a, b0, b1);
        } else {
            mma_rows<BF, W>(d, qa[kk], b0, b1);
        }
    };
    float m[NH], l[NH]; // the state of rows r (and r + 8) over this warp's tokens
#pragma unroll
    for (int h = 0; h < NH; h++) m[h] = neg_inf(), l[h] = 0.f;
    float o[D / 8][4]; // O fragments: rows r (0, 1) and r + 8 (2, 3; unused where !W), 8 dims
#pragma unroll
    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    const int n_iter = (te - tb + CTILE - 1) / CTILE;
    const int32_t *bt_row = p.bt + (size_t)row * p.bt_stride;
    const char *kc = static_cast<const char *>(p.k), *vc = static_cast<const char *>(p.v);
    constexpr size_t STAGE = (size_t)WARPS * 2 * WT * CH; // uint4 per stage
    uint4 *wbase = smem + (size_t)warp * 2 * WT * CH;
    float *wscale = reinterpret_cast<float *>(smem + S * STAGE) +
                    (size_t)warp * 2 * WT; // FP8: + stage * WARPS * 2 * WT
    // FP8: the V scale P is taken relative to (tb's page's; 1 where that is not positive).
    float vref = 1.f;
    if (F8) {
        const float v = p.v_scale[(size_t)bt_row[tb / p.ps] * p.hkv + kvh];
        vref = v > 0.f ? v : 1.f;
    }
    const float vinv = 1.f / vref;

    // Each warp streams its own WT tokens of every tile. One copy instruction
    // moves whole token rows (16-bit: two, 16 lanes x 16 bytes each; FP8: four), so every
    // warp request is fully used 256-byte (FP8: 128-byte) segments. Tokens past te are
    // zero-filled (FP8: their scales too) so that P = 0 never meets stale (possibly NaN)
    // V data in the MMA.
    //
    // PAGED16 (pages of at least 16 tokens, a power of two, and tb a multiple of 16): each
    // 16 tokens lie in one page, looked up once per lane; else once per token.
    auto issue = [&](int it, auto paged16) {
        constexpr bool P16 = decltype(paged16)::value;
        constexpr int JG = 16 * CH / 32; // copy steps per 16 tokens
        if (it < n_iter) {
            uint4 *st = wbase + (size_t)(it % S) * STAGE;
            float *sst = wscale + (size_t)(it % S) * WARPS * 2 * WT;
            const int c = lane % CH, tw = tb + it * CTILE + warp * WT; // the warp's first token
            uint32_t ph = 0; // the page's KV head (pages x hkv fit 32 bits: int32 ids)
            size_t base = 0; // a token's byte offset
#pragma unroll
            for (int j = 0; j < WT * CH / 32; j++) {
                const int tl = j * (32 / CH) + lane / CH, t = tw + tl, g16 = 16 * (j / JG);
                const bool valid = t < te;
                if (P16 ? j % JG == 0 && tw + g16 < te : valid) { // P16: the 16's first token
                    const int tt = P16 ? tw + g16 : t;
                    const int pi = p.ps_shift >= 0 ? tt >> p.ps_shift : tt / p.ps;
                    ph = (uint32_t)bt_row[pi] * p.hkv + kvh;
                    base = ((size_t)ph * p.ps + (tt - pi * p.ps)) * D * EB;
                }
                const size_t off = P16 ? base + (size_t)(tl - g16) * D * EB : base;
                cp_async16_zfill(st + swz(tl, c), kc + off + c * 16, valid);
                cp_async16_zfill(st + WT * CH + swz(tl, c), vc + off + c * 16, valid);
                if (F8 && c == 0) {
                    cp_async4_zfill(sst + tl, p.k_scale + ph, valid);
                    cp_async4_zfill(sst + WT + tl, p.v_scale + ph, valid);
                }
            }
        }
        cp_async_commit(); // empty groups keep the wait count uniform
    };

    // FP8: a lane's row address in ldmatrix's four matrices (tokens 16 b16 + 0-7, + 8-15) x
    // (16-byte chunks c, c + 1) of a loaded tile.
    auto f8_at = [&](const uint4 *tile, int b16, int c) {
        const int mi = lane / 8;
        return tile + swz(16 * b16 + (mi % 2) * 8 + lane % 8, c + mi / 2);
    };
    const bool paged16 = p.ps_shift >= 4 && tb % 16 == 0;
    auto issue_any = [&](int it) {
        if (paged16)
            issue(it, std::true_type());
        else
            issue(it, std::false_type());
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) issue_any(s);

    for (int it = 0; it < n_iter; it++) {
        issue_any(it + S - 1);
        cp_async_wait<S - 1>();
        __syncwarp(); // the lanes' copies are visible to the whole warp
        const uint4 *ks = wbase + (size_t)(it % S) * STAGE, *vs = ks + WT * CH;
        const float *sst = wscale + (size_t)(it % S) * WARPS * 2 * WT; // FP8: K's, V's scales

        // S = Q K^T for WT tokens: n8 tiles of 8 tokens each.
        float sc[2 * NB][4];
#pragma unroll
        for (int n = 0; n < 2 * NB; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
        if (F8) { // matrices (tokens 16b + 0-7, + 8-15) x (dimensions kk, kk + 1 of 16 codes)
#pragma unroll
            for (int b16 = 0; b16 < NB; b16++)
#pragma unroll
                for (int kk = 0; kk < D / 16; kk += 2) {
                    uint32_t b[4];
                    ldmatrix_x4(b, f8_at(ks, b16, kk));
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        mma_q(sc[2 * b16 + i % 2], kk + i / 2, e4m3x2<BF>(b[i]),
                              e4m3x2<BF>(b[i] >> 16));
                }
        } else {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t b[4];
                int mi = lane / 8, t = (mi / 2) * 8 + lane % 8;
                ldmatrix_x4(b, ks + swz(t, kk * 2 + mi % 2));
                mma_q(sc[0], kk, b[0], b[1]);
                mma_q(sc[1], kk, b[2], b[3]);
            }
        }
        // Online softmax of rows r (sc[n][0, 1]) and r + 8 (sc[n][2, 3]) over the WT tokens
        // (4 NB here, the rest in the quad).
        int t0 = tb + it * CTILE + warp * WT + cq;
        float c[NH];
        bool moved = false;
#pragma unroll
        for (int h = 0; h < NH; h++) {
            float mx = neg_inf();
#pragma unroll
            for (int n = 0; n < 2 * NB; n++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float f = F8 ? p.scale_log2 * sst[cq + n * 8 + j] : p.scale_log2;
                    float &e = sc[n][2 * h + j];
                    e = t0 + n * 8 + j < te_r[h] ? e * f : neg_inf();
                    mx = fmaxf(mx, e);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            c[h] = pkvk_sm_fold(&m[h], mx);
            const bool seen = m[h] != neg_inf(); // else no valid token seen yet by this warp
#pragma unroll
            for (int n = 0; n < 2 * NB; n++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    float &e = sc[n][2 * h + j];
                    e = seen ? exp2f(e - m[h]) : 0.f;
                }
            l[h] *= c[h];
#pragma unroll
            for (int n = 0; n < 2 * NB; n++) l[h] += sc[n][2 * h] + sc[n][2 * h + 1];
            moved |= c[h] != 1.f;
        }
        if (__any_sync(0xffffffffu, moved)) // once the maxima settle, no row's moves
#pragma unroll
            for (int n = 0; n < D / 8; n++)
#pragma unroll
                for (int i = 0; i < 2 * NH; i++) o[n][i] *= c[i / 2];

        // O += P V: P's C fragments are the A fragment of a 16x16 product, one per 16-token
        // block (FP8: each token's weight times its V scale over vref), in the MMA's order.
        uint32_t pa[NB][4];
#pragma unroll
        for (int b16 = 0; b16 < NB; b16++) {
            float w[4] = {1.f, 1.f, 1.f, 1.f};
            if (F8)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    w[i] = sst[WT + 16 * b16 + cq + (i / 2) * 8 + i % 2] * vinv;
#pragma unroll
            for (int h = 0; h < NH; h++) { // a0 (h = 0) or a1: tokens cq, cq + 1; a2, a3: + 8
                pa[b16][h] = pack2<BF>(sc[2 * b16][2 * h] * w[0], sc[2 * b16][2 * h + 1] * w[1]);
                pa[b16][2 + h] =
                    pack2<BF>(sc[2 * b16 + 1][2 * h] * w[2], sc[2 * b16 + 1][2 * h + 1] * w[3]);
            }
        }
        if (F8) { // matrices as K's, transposed in pairs of codes: a lane holds dimensions
                  // 2s, 2s + 1 (s = lane / 4) of tokens 2c, 2c + 1, so its even and its odd
                  // dimensions are the B fragments of two n8 tiles
#pragma unroll
            for (int b16 = 0; b16 < NB; b16++)
#pragma unroll
                for (int nd = 0; nd < D / 16; nd += 2) {
                    uint32_t b[4];
                    ldmatrix_x4_trans(b, f8_at(vs, b16, nd));
#pragma unroll
                    for (int i = 0; i < 4; i += 2)
#pragma unroll
                        for (int h = 0; h < 2; h++) // bytes 0, 2 (h = 0) or 1, 3
                            mma_rows<BF, W>(o[2 * (nd + i / 2) + h], pa[b16],
                                            e4m3x2<BF>(__byte_perm(b[i], 0, 0x20 + 0x11 * h)),
                                            e4m3x2<BF>(__byte_perm(b[i + 1], 0, 0x20 + 0x11 * h)));
                }
        } else {
#pragma unroll
            for (int nd = 0; nd < D / 16; nd++) {
                uint32_t b[4];
                int mi = lane / 8, t = (mi % 2) * 8 + lane % 8;
                ldmatrix_x4_trans(b, vs + swz(t, nd * 2 + mi / 2));
                mma_rows<BF, W>(o[2 * nd], pa[0], b[0], b[1]);
                mma_rows<BF, W>(o[2 * nd + 1], pa[0], b[2], b[3]);
            }
        }
        __syncwarp(); // all lanes are done with this stage before it is refilled
    }
    cp_async_wait<0>();
#pragma unroll
    for (int h = 0; h < NH; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    __syncthreads(); // the pipeline buffers become the reduction buffer

    // Merge the WARPS states: red_ml[warp][g] = (m, l), fin[g] = (M, L), red_acc[warp][g][D].
    float *red_ml = reinterpret_cast<float *>(smem);
    float *fin = red_ml + 2 * WARPS * G;
    float *red_acc = fin + 2 * G;
#pragma unroll
    for (int h = 0; h < NH; h++)
        if (lane % 4 == 0 && r + 8 * h < G) {
            red_ml[(warp * G + r + 8 * h) * 2] = m[h];
            red_ml[(warp * G + r + 8 * h) * 2 + 1] = l[h];
        }
    __syncthreads();
    if (tid < G) {
        float M = neg_inf(), L = 0.f;
        for (int w = 0; w < WARPS; w++) M = fmaxf(M, red_ml[(w * G + tid) * 2]);
        for (int w = 0; w < WARPS; w++) {
            float mw = red_ml[(w * G + tid) * 2];
            L += pkvk_sm_weight(mw, M) * red_ml[(w * G + tid) * 2 + 1];
        }
        fin[tid * 2] = M, fin[tid * 2 + 1] = L;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < NH; h++) {
        const int rr = r + 8 * h;
        if (rr >= G) continue;
        const float c = pkvk_sm_weight(m[h], fin[rr * 2]) * vref;
#pragma unroll
        for (int n = 0; n < D / 8; n++) { // FP8: the dimensions (above) put back in order
            const int d0 = F8 ? 16 * (n / 2) + 4 * (lane % 4) + n % 2 : n * 8 + cq;
            red_acc[(warp * G + rr) * D + d0] = o[n][2 * h] * c;
            red_acc[(warp * G + rr) * D + d0 + (F8 ? 2 : 1)] = o[n][2 * h + 1] * c;
        }
    }
    __syncthreads();
    // State i of this CTA: query token (qb G + i) / grp's head (qb G + i) % grp.
    __half *const orow = p.o + ((size_t)row * p.qlen * p.hq + kvh * p.grp) * D;
    const int s0 = qb * G, grp = p.grp, hq = p.hq;
    auto out_at = [=](int i) { return orow + ((size_t)(s0 + i) / grp * hq + (s0 + i) % grp) * D; };
    for (int idx = tid; idx < nv * D; idx += THREADS) {
        int i = idx / D, d = idx % D;
        float a = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) a += red_acc[(w * G + i) * D + d];
        if (direct)
            store16<BF>(out_at(i) + d, a / fin[i * 2 + 1]);
        else
            p.part_acc[(sidx + i) * D + d] = a;
    }
    if (direct) return;
    if (tid < nv) {
        p.part_ml[(sidx + tid) * 2] = fin[tid * 2];
        p.part_ml[(sidx + tid) * 2 + 1] = fin[tid * 2 + 1];
    }
    if (MODE != MODE_FUSED) return;

    // Fused: the last CTA of this (row, kvh) to finish merges all its splits. The
    // barrier orders every thread's partial-state writes before thread 0's release
    // (the counter's add, acquire-release at GPU scope), and the last CTA's acquire
    // before its reads, which go through L2.
    __shared__ int s_last;
    __syncthreads();
    if (tid == 0) {
        cuda::atomic_ref<int, cuda::thread_scope_device> ctr(
            p.counters[((size_t)row * p.hkv + kvh) * p.qbn + qb]);
        s_last = ctr.fetch_add(1, cuda::memory_order_acq_rel) == nslots - 1;
        if (s_last) ctr.store(0, cuda::memory_order_relaxed); // ready for the next launch
    }
    __syncthreads();
    if (!s_last) return;
    const size_t base = ((size_t)slot0 * p.hkv + kvh) * NS + qb * G;
    // The CTA's rows at once where a block is whole (one chain of L2 round trips for the CTA,
    // not one per head; 16 rows as two 8s, which fit registers), a short block's one by one.
    const float *ml = p.part_ml + base * 2, *acc = p.part_acc + base * D;
    float *sh = reinterpret_cast<float *>(smem);
    const int sh_floats = (int)(smem_bytes<F8>(D) / sizeof(float));
    const int sml = p.hkv * NS * 2, sacc = p.hkv * NS * D;
    constexpr int NG = W ? 8 : G;
    for (int g0 = 0; g0 < nv; g0 += NG)
        if (nv - g0 >= NG)
            merge_states<D, THREADS, NG, true, BF>(ml + 2 * g0, acc + (size_t)g0 * D, nslots, sml,
                                                   sacc, sh, sh_floats,
                                                   [=](int i) { return out_at(g0 + i); });
        else
            for (int g = g0; g < nv; g++)
                merge_states<D, THREADS, 1, true, BF>(ml + 2 * g, acc + (size_t)g * D, nslots, sml,
                                                      sacc, sh, sh_floats,
                                                      [=](int) { return out_at(g); });
}

// FIXED (the workqueue only): a grid of fixed size (CUDA graph replay) whose CTAs
// take the plan's tasks x = blockIdx.x, blockIdx.x + gridDim.x, ... up to its count,
// read from the device; CTAs past it return at once.
template <int D, int G, int MODE, bool FIXED, bool BF, bool F8>
__global__ void __launch_bounds__(THREADS, 2) attn_kernel(const Params p) {
    // A merge launched after this kernel (launch_merge) may be scheduled now: its
    // blocks wait for this grid's completion (griddepcontrol.wait) while resident.
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    if (!FIXED) {
        attn_cta<D, G, MODE, BF, F8>(p, blockIdx.x);
        return;
    }
    const unsigned n = (unsigned)(p.split_offsets[p.layout_rows] * p.hkv * p.qbn);
    for (unsigned x = blockIdx.x; x < n; x += gridDim.x) {
        attn_cta<D, G, MODE, BF, F8>(p, x);
        __syncthreads(); // the next task refills the shared memory this one read
    }
}

#include "pkvk_attn_launch.cuh"

} // namespace

int pkvk_attn_configure(void) {
    int rc = configure_g<64>();
    if (!rc) rc = configure_g<128>();
    if (!rc) rc = configure_g<256>();
    return rc;
}
#include "pkvk_workspace.cuh"

// ---- each route's launch (the route table: base/pkv_route.h) --------------------------
// Each adds the kernels it launched to *launches; rows: the grid's (a fixed grid's, or
// the plan's).
typedef int (*route_launch)(const pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                            Params &p, int G, int d, int32_t rows, int *launches);

static int launch_ref(const pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                      Params &p, int G, int d, int32_t rows, int *launches) {
    int rc = launch_mode<MODE_REF>(w->ctx->stream, d, G, dim3(rows, w->shape.hkv * p.qbn), p);
    *launches += rc == PKVK_OK;
    return rc;
}

// A launch per bucket (its rows, split its way), each split one merged.
static int launch_bucket(const pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                         Params &p, int G, int d, int32_t rows, int *launches) {
    const cudaStream_t st = w->ctx->stream;
    int rc = PKVK_OK;
    p.bucket_rows = w->bucket_rows;
    for (int k = 0; k < plan->n_buckets && rc == PKVK_OK; k++) {
        const pkvk_bucket &B = plan->buckets[k];
        p.row_begin = B.row_begin, p.splits = B.splits;
        unsigned n = (unsigned)(B.row_end - B.row_begin);
        rc = launch_mode<MODE_BUCKET>(st, d, G, dim3(n, w->shape.hkv * p.qbn, B.splits), p);
        *launches += rc == PKVK_OK;
        if (rc == PKVK_OK && B.splits > 1) {
            rc = launch_merge(st, p, d, n);
            *launches += rc == PKVK_OK;
        }
    }
    return rc;
}

// One launch over the tasks (a fixed grid's CTAs loop over them), one merge where rows
// split.
static int launch_workqueue(const pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                            Params &p, int G, int d, int32_t rows, int *launches) {
    const cudaStream_t st = w->ctx->stream;
    int rc = w->fixed_rows ? launch_mode<MODE_TASKS, true>(st, d, G, dim3(w->fixed_ctas), p)
                           : launch_mode<MODE_TASKS>(st, d, G, dim3(plan->n_tasks * p.qbn), p);
    *launches += rc == PKVK_OK;
    if (rc == PKVK_OK && pkvk_plan_merges(plan)) {
        rc = launch_merge(st, p, d, (unsigned)rows);
        *launches += rc == PKVK_OK;
    }
    return rc;
}

// The tasks, the last split of each row merging in-kernel.
static int launch_fused(const pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                        Params &p, int G, int d, int32_t rows, int *launches) {
    int rc = launch_mode<MODE_FUSED>(w->ctx->stream, d, G, dim3(plan->n_tasks * p.qbn), p);
    *launches += rc == PKVK_OK;
    return rc;
}

// FlashInfer's routes: their planner's state and kernels (pkvk_fi.cu).
static int launch_fi(const pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan, Params &p,
                     int G, int d, int32_t rows, int *launches) {
    // FlashInfer's FP8 path takes one K and one V scale for the whole cache.
    if (b->shape.kv_dtype == PKVK_FP8_E4M3 && !(b->k_scale_all > 0.f && b->v_scale_all > 0.f))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED,
                             "FlashInfer's FP8 path takes one K and one V scale for the whole "
                             "cache; this pool's scales vary by page and head");
    if (!w->fi) return pkvk_fail_msg(PKVK_ERR_INVALID, "FlashInfer plan not uploaded");
    return pkvk_fi_launch(w->fi, b, plan, launches);
}

// In the routes' enum order (base/pkv_route.h).
static const route_launch launchers[PKV_ROUTE_COUNT] = {
    launch_ref, launch_bucket, launch_workqueue, launch_fused, launch_fi, launch_fi};
static_assert(PKV_ROUTE_REF_PAGED == 0 && PKV_ROUTE_BUCKET == 1 && PKV_ROUTE_WORKQUEUE == 2 &&
                  PKV_ROUTE_FUSED == 3 && PKV_ROUTE_FLASHINFER == 4 &&
                  PKV_ROUTE_FLASHINFER_TC == 5 && PKV_ROUTE_COUNT == 6,
              "launchers[] follows the route enum");

extern "C" int pkvk_launch(pkvk_workspace *w, const pkvk_batch *b, const pkvk_plan *plan,
                           int *launches) {
    const pkvk_shape &s = b->shape;
    *launches = 0;
    if (s.hq % s.hkv || s.hq != w->shape.hq || s.hkv != w->shape.hkv || s.d != w->shape.d)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "batch shape differs from the workspace's");
    if (plan->n_rows == 0) return PKVK_OK;
    if ((unsigned)plan->route >= PKV_ROUTE_COUNT)
        return pkvk_fail_msg(PKVK_ERR_INVALID, "unknown route");
    int G = s.hq / s.hkv, shift = -1;
    for (int k = 0; k < 31; k++)
        if ((1 << k) == s.page_size) shift = k;
    const bool kv8 = s.kv_dtype == PKVK_FP8_E4M3;
    if ((s.dtype != PKVK_FP16 && s.dtype != PKVK_BF16) || (s.kv_dtype != s.dtype && !kv8))
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "the GPU kernels take Q FP16 or BF16 and KV "
                                                   "of Q's type or FP8 E4M3");
    if (kv8 && (!b->k_scale || !b->v_scale))
        return pkvk_fail_msg(PKVK_ERR_INVALID, "FP8 KV without its scales");
    // A verify step's query tokens, packed beside the group's heads.
    const int qlen = b->q_len > 1 ? b->q_len : 1;
    int per;
    const int rows_cta = pkvk_verify_pack(G, s.d, qlen, &per), qbn = (qlen + per - 1) / per;
    if (qlen > 1 && pkv_route_has(plan->route, PKV_RP_VERIFY)) { // FlashInfer plans its own
        if ((int64_t)plan->n_slots * qlen > w->cap_slots)
            return pkvk_fail_msg(PKVK_ERR_INVALID, "a verify step's states (slots x query "
                                                   "tokens) exceed the workspace's slots");
        if (plan->route == PKV_ROUTE_FUSED && (int64_t)plan->n_rows * qbn > w->cap_rows)
            return pkvk_fail_msg(PKVK_ERR_INVALID, "the fused route's counters (rows x query "
                                                   "blocks) exceed the workspace's rows");
    }
    Params p = {};
    p.qlen = qlen, p.grp = G, p.qbn = qbn;
    p.bf16 = s.dtype == PKVK_BF16;
    p.kv8 = kv8;
    p.q = (const __half *)b->q;
    p.o = (__half *)b->o;
    p.k = b->k_cache;
    p.v = b->v_cache;
    p.k_scale = b->k_scale, p.v_scale = b->v_scale;
    p.bt = b->block_table;
    p.bt_stride = b->bt_stride;
    p.seq_lens = b->seq_lens;
    p.hq = s.hq, p.hkv = s.hkv, p.ps = s.page_size, p.ps_shift = shift;
    p.scale_log2 = b->sm_scale * PKVK_LOG2E;
    p.split_offsets = w->split_offsets;
    p.spans = w->spans;
    p.layout_rows = w->fixed_rows;
    // A fixed grid (pkvk_workspace_fixed) covers the rows it was set for.
    const int32_t rows = w->fixed_rows ? w->fixed_rows : plan->n_rows;
    p.part_acc = w->part_acc, p.part_ml = w->part_ml, p.counters = w->counters;
    return launchers[plan->route](w, b, plan, p, rows_cta, s.d, rows, launches);
}

// The workqueue kernel of head dimension D and group size g (FP16), as launch_g finds it.
template <int D, int G = 1> static const void *tasks_kernel(int g) {
    if (g == G) return (const void *)attn_kernel<D, G, MODE_TASKS, false, false, false>;
    if constexpr (G < 8) return tasks_kernel<D, G + 1>(g);
    return nullptr;
}

extern "C" int pkvk_occupancy(int d, int G, int *ctas_per_sm) {
    const void *k = d == 64    ? tasks_kernel<64>(G)
                    : d == 128 ? tasks_kernel<128>(G)
                    : d == 256 ? tasks_kernel<256>(G)
                               : nullptr;
    if (!k)
        return pkvk_fail_msg(PKVK_ERR_UNSUPPORTED, "head dimension 64, 128 or 256 and a GQA "
                                                   "group of 1 to 8");
    int rc = pkvk_attn_configure(); // callable without a context (calibration, tests)
    if (rc) return rc;
    const size_t smem = d == 64    ? smem_bytes<false>(64)
                        : d == 128 ? smem_bytes<false>(128)
                                   : smem_bytes<false>(256);
    PKVK_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, k, THREADS, smem));
    return PKVK_OK;
}
