// RoPE and the K/V append of the served model's layers.
#include "pkvk_model_impl.cuh"

namespace pkvkm {

// One warp per (row, head of q, k and v), four heads a block: RoPE (rotate-half, at
// the row's position; a verify step's token rows: qlen a row) on q and k, then q to its place
// (decode and FlashInfer's prefill: [rows][hq][d]; cuBLAS's prefill: [hkv][cap_tokens][G][d]) and
// k, v into the layer's pages at the row's position, as KT (the activations' type T, or FP8 codes
// at scale 1).
enum { ROPE_HEADS = 4 };
template <class T, class KT, bool PREFILL>
static __global__ void
rope_append_kernel(const T *__restrict__ qkv, int hq, int hkv, int d, int ps, float theta,
                   const int32_t *__restrict__ lens, const int32_t *__restrict__ bt, int bt_stride,
                   const int32_t *__restrict__ pages, segs_t segs, int cap_tokens, int ragged,
                   KT *__restrict__ kpool, KT *__restrict__ vpool, T *__restrict__ q, norm_in nin,
                   int qlen) {
    const int r = blockIdx.x, hd = blockIdx.y * ROPE_HEADS + threadIdx.x / 32,
              lane = threadIdx.x % 32, W = (hq + 2 * hkv) * d, i = r / qlen; // i: r's row
    if (!PREFILL && lens[i] <= 0) return; // a row past the step's on a fixed grid (graph replay)
    __shared__ float sh[32];
    const float sc = nin.scale<T>(r, sh); // qkv is x W' (the norm folded): RMSNorm(x) W = sc x W'
    if (hd >= hq + 2 * hkv) return;
    int pos, page;
    if (PREFILL) {
        int k = 0;
        while (k + 1 < segs.n && r >= segs.s[k + 1].t0) k++;
        const seg_t &g = segs.s[k];
        pos = g.q0 + r - g.t0;
        page = pages[g.page_off + pos / ps];
    } else {
        pos = lens[i] - qlen + r % qlen;
        page = bt[(size_t)i * bt_stride + pos / ps];
    }
    const T *src = qkv + (size_t)r * W + (size_t)hd * d;
    T *qd = nullptr;
    KT *kd = nullptr;
    if (hd < hq) {
        const int G = hq / hkv;
        qd = PREFILL && !ragged ? q + (((size_t)(hd / G) * cap_tokens + r) * G + hd % G) * d
                                : q + ((size_t)r * hq + hd) * d;
    } else {
        const int kh = hd < hq + hkv ? hd - hq : hd - hq - hkv;
        kd = (hd < hq + hkv ? kpool : vpool) + (((size_t)page * hkv + kh) * ps + pos % ps) * d;
    }
    const bool rotate = hd < hq + hkv;
    for (int i = lane; i < d / 2; i += 32) {
        float a = to_f(src[i]) * sc, b = to_f(src[i + d / 2]) * sc;
        if (rotate) {
            float f = powf(theta, -2.f * i / d) * pos, c, sn;
            sincosf(f, &sn, &c);
            const float ra = a * c - b * sn;
            b = b * c + a * sn;
            a = ra;
        }
        if (qd)
            qd[i] = from_f<T>(a), qd[i + d / 2] = from_f<T>(b);
        else
            kd[i] = from_f<KT>(a), kd[i + d / 2] = from_f<KT>(b);
    }
}

static dim3 rope_grid(const pkvk_model_shape *s, int rows) {
    return dim3(rows, (s->hq + 2 * s->hkv + ROPE_HEADS - 1) / ROPE_HEADS);
}

int rope_append(cudaStream_t st, bool prefill, const pkvk_model_shape *s, int rows,
                const elem16 *qkv, const int32_t *lens, const int32_t *bt, int bt_stride,
                const int32_t *pages, const segs_t &segs, int cap_tokens, int ragged, void *kpool,
                void *vpool, elem16 *q, norm_in nin, int qlen) {
    with_tk(s, [&](auto t, auto kt) {
        using T = decltype(t);
        using KT = decltype(kt);
        auto k = prefill ? rope_append_kernel<T, KT, true> : rope_append_kernel<T, KT, false>;
        k<<<rope_grid(s, rows), 32 * ROPE_HEADS, 0, st>>>(
            (const T *)qkv, s->hq, s->hkv, s->d, s->page_size, s->rope_theta, lens, bt, bt_stride,
            pages, segs, cap_tokens, ragged, (KT *)kpool, (KT *)vpool, (T *)q, nin, qlen);
        return 0;
    });
    PKVK_CK_LAUNCH();
    return PKVK_OK;
}

} // namespace pkvkm
