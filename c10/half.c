/* c10/half.c — IEEE binary16 and bfloat16 to and from float, by bit
 * manipulation only, so the results do not depend on the FPU's rounding mode,
 * flush-to-zero flags or compiler options such as -ffast-math. */
#include <string.h>

#include "c10/core.h"

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float wf__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1f;
    uint32_t mantissa = h & 0x3ff;
    if (exponent == 0x1f) /* inf or nan: keep the payload */
        return bits_float(sign | 0x7f800000 | (mantissa << 13));
    if (exponent == 0) {
        /* zero or subnormal: mantissa * 2^-24, exact in float */
        float magnitude = (float)mantissa * 0x1p-24f;
        return bits_float(sign | float_bits(magnitude));
    }
    return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/* Rounds value >> shift to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t value, int shift)
{
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1)))
        kept++;
    return kept;
}

uint16_t wf__float_to_half(float f)
{
    uint32_t x = float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t magnitude = x & 0x7fffffff;
    if (magnitude > 0x7f800000) /* nan: quiet it, keep the payload's top bits */
        return sign | 0x7e00 | (uint16_t)((magnitude >> 13) & 0x3ff);
    int exponent = (int)(magnitude >> 23) - 127 + 15; /* biased for half */
    if (exponent >= 31) /* too large even before rounding, or inf */
        return sign | 0x7c00;
    if (exponent <= 0) {
        /* a half subnormal (or zero): the significand, shifted so that one
         * unit is 2^-24; below 2^-25 everything rounds to zero */
        if (exponent < -10)
            return sign;
        uint32_t significand = (magnitude & 0x7fffff) | 0x800000;
        /* a carry into bit 10 gives the smallest normal, correctly encoded */
        return sign | (uint16_t)shift_round_even(significand, 14 - exponent);
    }
    /* normal: the carry of rounding may step into the exponent, and from the
     * largest finite value into infinity, both of which are correct */
    uint32_t h = ((uint32_t)exponent << 10) | ((magnitude >> 13) & 0x3ff);
    uint32_t rest = magnitude & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

float wf__bfloat16_to_float(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

uint16_t wf__float_to_bfloat16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) /* nan: truncating could make it inf */
        return (uint16_t)((x >> 16) | 0x40);
    uint32_t rounding_bias = 0x7fff + ((x >> 16) & 1);
    return (uint16_t)((x + rounding_bias) >> 16);
}
