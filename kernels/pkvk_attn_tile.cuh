// Private to kernels/pkvk_attn.cu (included inside its anonymous namespace): the
// device helpers of the CTA body's tile pipeline: -inf, cp.async and its groups, the
// XOR swizzle of the shared-memory tiles, ldmatrix and the MMA (FP16 or BF16), packing,
// FP8 codes widened, and the output's rounding.
#pragma once

__device__ __forceinline__ float neg_inf() {
    return __int_as_float(0xff800000);
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copy 16 bytes, or write 16 zero bytes when !valid (src is not read then).
__device__ __forceinline__ void cp_async16_zfill(void *dst, const void *src, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(valid ? 16 : 0));
}

// Copy 4 bytes (through L1), or write 4 zero bytes when !valid.
__device__ __forceinline__ void cp_async4_zfill(void *dst, const void *src, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
                 "r"(valid ? 4 : 0));
}

// Token row t, 16-byte chunk c: XOR-swizzled so that the 8 rows an ldmatrix reads
// at one chunk index land in 8 different bank groups (rows of fewer than 8 chunks, FP8
// at D = 64: in CH, two rows a 128-byte line).
template <int CH> __device__ __forceinline__ int swz_(int t, int c) {
    return t * CH + (c ^ (t & (CH < 8 ? CH - 1 : 7)));
}
#define swz(t, c) swz_<CH>((t), (c))

__device__ __forceinline__ void ldmatrix_x4(uint32_t *b, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *b, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(s));
}

// d += A B for one m16n8k16 tile, its inputs FP16 or (BF) BF16: A's registers a0, a2 hold
// rows 0..7 (the lane's row r), a1, a3 rows 8..15 (row r + 8).
template <bool BF>
__device__ __forceinline__ void mma16816(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The product of a CTA's MMA rows: A's four registers a[0..3] in the MMA's order; where
// !ROWS16, rows 8..15 are zero (a1 = a3 = 0) and only rows 0..7 carry data.
template <bool BF, bool ROWS16>
__device__ __forceinline__ void mma_rows(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    mma16816<BF>(d, a[0], ROWS16 ? a[1] : 0u, a[2], ROWS16 ? a[3] : 0u, b0, b1);
}

// Two floats rounded to the inputs' type, packed as one MMA register.
template <bool BF> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    if (BF) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

// Two E4M3 codes (the low 16 bits of x) as two values of the MMA's type, exact.
template <bool BF> __device__ __forceinline__ uint32_t e4m3x2(uint32_t x) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
    if (!BF) return h.x | (uint32_t)h.y << 16;
    const float2 f = __half22float2(__half2(h));
    return pack2<true>(f.x, f.y);
}

// One output element, rounded to FP16 or (BF) BF16, stored as its 16 bits.
template <bool BF> __device__ __forceinline__ void store16(__half *p, float v) {
    if (BF)
        *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(v);
    else
        *p = __float2half(v);
}
