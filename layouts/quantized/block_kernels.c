/* layouts/quantized/block_kernels.c — the dot products of a row of Q8_0 or
 * Q4_0 weight blocks with activations quantized once per call to 8-bit
 * blocks (qt__quantize_activations), as ggml does: within a block the
 * products are integers (AVX2's maddubs/madd: unsigned 8-bit times signed
 * 8-bit, pairs summed to 16 bits, then to 32), and each block costs one
 * float multiply-add by the product of the two scales.  Widening every
 * weight to float instead left the Q4_0 matrix-vector product at a third
 * of the memory bandwidth; the integer form reads 18 bytes per 32 weights
 * and does a handful of instructions for them.  Written once per ISA:
 * scalar, AVX2 and AVX-512, compiled for their ISA through target
 * attributes, so this one plugin carries all three and picks at load
 * (qt__choose_kernels) the widest this CPU and its OS run, as the CPU
 * plugin's variants are picked by score; WEFT_QUANTIZED_KERNELS names one
 * to force it (the tests run each in turn).  The AVX2 and AVX-512 kernels
 * live in block_kernels_x86.h, which tests/test_quantized_simde also builds
 * against SIMDe's portable intrinsics, so the AVX-512 code is tested on
 * machines without it.  The integer sums are the same in every variant;
 * only the order of the float additions across blocks differs, so results
 * agree to rounding, not bit for bit (non-finite ones exactly: see
 * QT_FINITE_OR). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quantized.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define QT_X86 1
#else
#define QT_X86 0
#endif

/* ------------------------------------------------ activation quantizing */

/* The reference the vector variants match bit for bit (one rounding rule
 * everywhere keeps the integer sums equal across variants). */
void qt__quantize_activations(const float *x, qt_block_q8_act *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        float amax = 0;
        bool finite = true;
        for (int j = 0; j < QT_BLOCK; j++) {
            finite &= isfinite(x[j]) != 0;
            amax = fmaxf(amax, fabsf(x[j]));
        }
        float d = amax / 127.0f, id = d > 0 ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < QT_BLOCK; j++) {
            float q = finite ? nearbyintf(x[j] * id) : 0.0f;
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            y[b].qs[j] = (int8_t)q;
            sum += (int8_t)q;
        }
        y[b].d = finite ? d : NAN;
        y[b].sum = sum;
    }
}

void qt__group_q4_activations(const qt_block_q8_act *x, qt_q4_act_group *g, int64_t nblocks)
{
    static const int order[QT_GROUP] = QT_GROUP_ORDER;
    for (int64_t b = 0; b + QT_GROUP <= nblocks; b += QT_GROUP, x += QT_GROUP, g++) {
        for (int k = 0; k < 4; k++)
            for (int h = 0; h < 2; h++) {
                memcpy(g->lo[k] + 16 * h, x[2 * k + h].qs, 16);
                memcpy(g->hi[k] + 16 * h, x[2 * k + h].qs + 16, 16);
            }
        for (int l = 0; l < QT_GROUP; l++) {
            g->sum8[l] = 8 * x[order[l]].sum;
            g->d[l] = x[order[l]].d;
        }
    }
}

/* ---------------------------------------------------------------- scalar */

static float scalar_dot_q8_0(const qt_block_q8_0 *w, const qt_block_q8_act *x, int64_t nblocks)
{
    float sum = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        int32_t s = 0;
        for (int j = 0; j < QT_BLOCK; j++)
            s += w[b].qs[j] * x[b].qs[j];
        sum += (float)s * (qt__fp16_to_fp32(w[b].d) * x[b].d);
    }
    return sum;
}

/* sum_j (n[j] - 8) q[j] = sum_j n[j] q[j] - 8 sum: the form the vector
 * kernels use, with the nibbles n unsigned */
static float scalar_dot_q4_0(const qt_block_q4_0 *w, const qt_block_q8_act *x,
                             const qt_q4_act_group *g, int64_t nblocks)
{
    (void)g;
    float sum = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        int32_t s = 0;
        for (int j = 0; j < QT_BLOCK / 2; j++)
            s += (w[b].qs[j] & 0xf) * x[b].qs[j] + (w[b].qs[j] >> 4) * x[b].qs[j + 16];
        s -= 8 * x[b].sum;
        sum += (float)s * (qt__fp16_to_fp32(w[b].d) * x[b].d);
    }
    return sum;
}

const qt_block_kernels qt__kernels_scalar = {"scalar", qt__quantize_activations, scalar_dot_q8_0,
                                             scalar_dot_q4_0, false};

#if QT_X86
/* ------------------------------------------------------------------ AVX2 */

#define QT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define QT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#include "block_kernels_x86.h"

const qt_block_kernels qt__kernels_avx2 = {"avx2", avx2_quantize_activations, avx2_dot_q8_0,
                                           avx2_dot_q4_0, true};
/* the activations are a K-vector against N x K weights: AVX2's quantizer
 * is enough there */
const qt_block_kernels qt__kernels_avx512 = {"avx512", avx2_quantize_activations, avx512_dot_q8_0,
                                             avx512_dot_q4_0, true};

/* The OS must save the registers a variant uses (XCR0): a CPU may have
 * AVX-512 that its kernel or hypervisor keeps switched off. */
bool qt__os_saves(unsigned bits)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return false;
    unsigned lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0)); /* xgetbv */
    (void)hi;
    return (lo & bits) == bits;
}

static bool runs_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c") && qt__os_saves((1u << 1) | (1u << 2));
}

static bool runs_avx512(void)
{
    return runs_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           qt__os_saves((1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7));
}
#else
const qt_block_kernels qt__kernels_avx2 = {"avx2", NULL, NULL, NULL, false};
const qt_block_kernels qt__kernels_avx512 = {"avx512", NULL, NULL, NULL, false};
bool qt__os_saves(unsigned bits)
{
    (void)bits;
    return false;
}
static bool runs_avx2(void)
{
    return false;
}
static bool runs_avx512(void)
{
    return false;
}
#endif

const qt_block_kernels *qt__kernels = &qt__kernels_scalar;

int qt__choose_kernels(void)
{
    const char *want = getenv("WEFT_QUANTIZED_KERNELS");
    bool avx512 = runs_avx512(), avx2 = runs_avx2();
    if (!want || !*want) {
        qt__kernels = avx512 ? &qt__kernels_avx512 : avx2 ? &qt__kernels_avx2 : &qt__kernels_scalar;
        return 0;
    }
    if (strcmp(want, "scalar") == 0)
        qt__kernels = &qt__kernels_scalar;
    else if (strcmp(want, "avx2") == 0 && avx2)
        qt__kernels = &qt__kernels_avx2;
    else if (strcmp(want, "avx512") == 0 && avx512)
        qt__kernels = &qt__kernels_avx512;
    else
        return weft_set_error(WEFT_ENOTSUP,
                              "quantized: WEFT_QUANTIZED_KERNELS=%s: expected scalar, avx2 or "
                              "avx512, one this CPU runs (avx2: %s, avx512: %s)",
                              want, avx2 ? "yes" : "no", avx512 ? "yes" : "no");
    return 0;
}
