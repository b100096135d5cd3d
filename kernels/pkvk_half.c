/* Element conversions (FP16, BF16, FP8 E4M3) for the CPU reference and mirror and for
 * filling test inputs. */
#include "pkvk.h"

#include <math.h>
#include <string.h>

uint16_t pkvk_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) /* inf or nan: keep nan-ness */
        return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
    if (mag >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (mag < 0x38800000u) { /* subnormal half or zero */
        if (mag < 0x33000000u) return (uint16_t)sign;
        uint32_t e = mag >> 23;
        uint32_t m = (mag & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* value = m * 2^(e-150); half units are 2^-24 */
        uint32_t half_m = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half_m & 1))) half_m++;
        return (uint16_t)(sign | half_m);
    }
    uint32_t h = ((mag - 0x38000000u) >> 13); /* rebias exponent 127 -> 15 */
    uint32_t rem = mag & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float pkvk_h2f(uint16_t h) {
    /* the magnitude's bits under a float's exponent and mantissa, then times 2^112 (the
     * exponent's bias 15 -> 127; exact, subnormals normalised by the multiply); infinities
     * and NaNs take the top exponent */
    uint32_t x = (uint32_t)(h & 0x7fffu) << 13;
    float f;
    if ((h & 0x7c00u) == 0x7c00u) {
        x |= 0x7f800000u;
        memcpy(&f, &x, sizeof f);
    } else {
        memcpy(&f, &x, sizeof f);
        f *= 0x1p112f;
    }
    memcpy(&x, &f, sizeof x);
    x |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &x, sizeof f);
    return f;
}

const char *const pkvk_dtype_names[PKVK_DTYPES + 1] = {"fp16", "bf16", "fp8_e4m3", NULL};

uint16_t pkvk_f2bf(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u); /* to nearest, ties to even (overflow gives inf) */
    return (uint16_t)(x >> 16);
}

float pkvk_bf2f(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* E4M3: exponent field e (bias 7), mantissa m; e = 0 holds the subnormals m x 2^-9;
 * e = 15 with m = 7 is NaN, so the largest finite value is 1.75 x 2^8 = 448. */
float pkvk_e4m32f(uint8_t x) {
    const uint32_t e = (x >> 3) & 0xf, m = x & 7;
    if (e == 15 && m == 7) return NAN;
    float f; /* exact either way: m 2^-9, or (1 + m / 8) 2^(e - 7) built from its bits */
    if (e == 0) {
        f = (float)m * 0x1p-9f;
    } else {
        const uint32_t bits = (e + 120) << 23 | m << 20;
        memcpy(&f, &bits, sizeof f);
    }
    return x & 0x80 ? -f : f;
}

uint8_t pkvk_f2e4m3(float f) {
    if (isnan(f)) return 0x7f;
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 448.f) return sign | 0x7e; /* saturated, as cvt's satfinite */
    if (a < 0x1p-6f) { /* subnormal (or zero): multiples of 2^-9, 8 of them make 2^-6 */
        const int m = (int)nearbyintf(a * 0x1p9f);
        return sign | (uint8_t)m; /* m = 8 is the smallest normal's code */
    }
    int ex;
    frexpf(a, &ex); /* a = fr 2^ex, fr in [0.5, 1): a's exponent is ex - 1 */
    int e = ex - 1 + 7, m = (int)nearbyintf((ldexpf(a, 1 - ex) - 1.f) * 8.f);
    if (m == 8) m = 0, e++;
    if (e > 15 || (e == 15 && m == 7)) return sign | 0x7e;
    return sign | (uint8_t)(e << 3 | m);
}

void pkvk_elems(int t, const void *base, size_t i, int n, float scale, float *out) {
    const uint16_t *h = (const uint16_t *)base + i;
    const uint8_t *b = (const uint8_t *)base + i;
    switch (t) {
    case PKVK_BF16:
        for (int k = 0; k < n; k++) out[k] = pkvk_bf2f(h[k]) * scale;
        break;
    case PKVK_FP8_E4M3:
        for (int k = 0; k < n; k++) out[k] = pkvk_e4m32f(b[k]) * scale;
        break;
    default:
        for (int k = 0; k < n; k++) out[k] = pkvk_h2f(h[k]) * scale;
        break;
    }
}

float pkvk_elem(int t, const void *base, size_t i) {
    float x; /* times 1: exact (-0 kept, a NaN stays a NaN) */
    pkvk_elems(t, base, i, 1, 1.f, &x);
    return x;
}

void pkvk_store(int t, void *base, size_t i, float f) {
    switch (t) {
    case PKVK_BF16:
        ((uint16_t *)base)[i] = pkvk_f2bf(f);
        break;
    case PKVK_FP8_E4M3:
        ((uint8_t *)base)[i] = pkvk_f2e4m3(f);
        break;
    default:
        ((uint16_t *)base)[i] = pkvk_f2h(f);
        break;
    }
}

float pkvk_round(int t, float f) {
    uint16_t b = 0;
    pkvk_store(t, &b, 0, f);
    return pkvk_elem(t, &b, 0);
}
