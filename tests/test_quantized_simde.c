/* tests/test_quantized_simde.c — the quantized plugin's AVX2 and AVX-512
 * block kernels (layouts/quantized/block_kernels_x86.h, the very source the
 * plugin compiles for those ISAs) built against SIMDe's portable intrinsics,
 * so that they run on every machine, this one without AVX-512 and valgrind
 * (which has no AVX-512) included.  Their integer block sums must equal the
 * exact ones bit for bit, and their dot products the scalar variant's
 * within the bound of float summation in another order (the only difference
 * the variants are allowed), on random blocks, nblocks 0, 1, odd and even,
 * whole groups of eight and groups with a tail (the Q4_0 kernels'
 * unit in both ISAs), extreme values (weight -128, activations +-127, nibbles 0 and 15,
 * scale 0), and the same NaN or infinity as the scalar variant where a
 * scale or an activation is not finite.  Skipped, with the reason, where SIMDe's
 * headers (Debian: libsimde-dev, which ./quickstart installs) are absent. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#if defined(__has_include)
#if __has_include(<simde/x86/avx512.h>) && __has_include(<simde/x86/f16c.h>)
#define TEST_HAVE_SIMDE 1
#endif
#endif

#ifndef TEST_HAVE_SIMDE
int main(void)
{
    skip_all("SIMDe's headers (simde/x86/avx512.h; Debian: libsimde-dev) are not installed, so the "
             "AVX-512 block kernels cannot be emulated on this machine");
}
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

/* What SIMDe 0.7.4 (Debian 12) lacks of the intrinsics the kernels use,
 * written with those it has; a SIMDe that has them keeps its own. */
/* SIMDe 0.7.4's alias of _mm512_madd_epi16 takes the four arguments of
 * the masked form (a slip in its avx512/madd.h); its function is right */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
#ifndef _mm512_cvtepi32_ps
static inline __m512 test_mm512_cvtepi32_ps(__m512i v)
{
    int32_t i[16];
    float f[16];
    _mm512_storeu_si512(i, v);
    for (int k = 0; k < 16; k++)
        f[k] = (float)i[k]; /* round to nearest, as vcvtdq2ps */
    return _mm512_loadu_ps(f);
}
#define _mm512_cvtepi32_ps test_mm512_cvtepi32_ps
#endif
#ifndef _mm512_reduce_add_ps
/* in GCC's order (avx512fintrin.h): halves, then quarters, then pairs */
static inline float test_mm512_reduce_add_ps(__m512 v)
{
    float f[16];
    _mm512_storeu_ps(f, v);
    for (int width = 8; width >= 1; width /= 2)
        for (int k = 0; k < width; k++)
            f[k] = f[k] + f[k + width];
    return f[0];
}
#define _mm512_reduce_add_ps test_mm512_reduce_add_ps
#endif
#ifndef _MM_FROUND_NO_EXC
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif
#ifndef _MM_FROUND_CUR_DIRECTION
#define _MM_FROUND_CUR_DIRECTION SIMDE_MM_FROUND_CUR_DIRECTION
#endif
#ifndef _cvtsh_ss
static inline float test_cvtsh_ss(uint16_t h)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
#define _cvtsh_ss test_cvtsh_ss
#endif

#define QT_AVX2
#define QT_AVX512
#include "layouts/quantized/block_kernels_x86.h"

/* ------------------------------------------------------------ test data */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rnd_unit(void) /* [-1, 1) */
{
    return (float)(rnd() % 65536) / 32768.0f - 1.0f;
}

/* Random weight blocks and activations (already quantized, any int8 in
 * -127..127 as qt__quantize_activations makes), with one block in eight
 * at the extremes and one in eight with a zero weight scale. */
static void fill(qt_block_q8_0 *w8, qt_block_q4_0 *w4, qt_block_q8_act *x, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        int kind = (int)(rnd() % 8);
        int8_t all = rnd() % 2 ? 127 : -127;
        int32_t sum = 0;
        for (int j = 0; j < QT_BLOCK; j++) {
            int8_t a = kind == 0   ? (j % 2 ? 127 : -127)
                       : kind == 3 ? all
                                   : (int8_t)((int)(rnd() % 255) - 127);
            x[b].qs[j] = a;
            sum += a;
            w8[b].qs[j] = kind == 0 ? -128 : (int8_t)(rnd() % 256);
        }
        /* kind 3: every nibble 15 against +-127, the largest 16-bit
         * partial sums of the AVX2 group kernel (2 x 2 x 2 x 15 x 127) */
        for (int j = 0; j < QT_BLOCK / 2; j++)
            w4[b].qs[j] = kind == 0   ? (j % 2 ? 0xf0 : 0x0f)
                          : kind == 3 ? 0xff
                                      : (uint8_t)(rnd() % 256);
        x[b].sum = sum;
        x[b].d = kind == 1 ? 0.0f : ldexpf(1.0f + 0.5f * rnd_unit(), (int)(rnd() % 20) - 10);
        float dw = ldexpf(1.0f + 0.5f * rnd_unit(), (int)(rnd() % 20) - 14);
        w8[b].d = w4[b].d = kind == 2 ? 0 : qt__fp32_to_fp16(dw);
    }
}

/* the exact integer dot product of one block, element by element */
static int32_t block_int_q8(const qt_block_q8_0 *w, const qt_block_q8_act *x)
{
    int32_t s = 0;
    for (int j = 0; j < QT_BLOCK; j++)
        s += w->qs[j] * x->qs[j];
    return s;
}
static int q4_value(const qt_block_q4_0 *w, int j) /* element j, -8..7 */
{
    return (j < 16 ? w->qs[j] & 0xf : w->qs[j - 16] >> 4) - 8;
}
static int32_t block_int_q4(const qt_block_q4_0 *w, const qt_block_q8_act *x)
{
    int32_t s = 0;
    for (int j = 0; j < QT_BLOCK; j++)
        s += q4_value(w, j) * x->qs[j];
    return s;
}

/* The sum of a vector's int32 lanes [from, from + n) */
static int64_t lanes512(__m512i v, int from, int n)
{
    int32_t l[16];
    _mm512_storeu_si512(l, v);
    int64_t s = 0;
    for (int k = from; k < from + n; k++)
        s += l[k];
    return s;
}
static int64_t lanes256(__m256i v)
{
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)l, v);
    int64_t s = 0;
    for (int k = 0; k < 8; k++)
        s += l[k];
    return s;
}

/* Every block pair's integer sums from the AVX-512 Q8_0 pair function,
 * the AVX2 block functions, and every group's sums and scales from the
 * AVX2 and AVX-512 Q4_0 group functions (on the activations regrouped as
 * the plugin regroups them), against the exact ones and the blocks'
 * scales; counts mismatches. */
static int integer_mismatches(const qt_block_q8_0 *w8, const qt_block_q4_0 *w4,
                              const qt_block_q8_act *x, const qt_q4_act_group *g, int64_t nblocks)
{
    static const int order[QT_GROUP] = QT_GROUP_ORDER;
    int bad = 0;
    for (int64_t b = 0; b + QT_GROUP <= nblocks; b += QT_GROUP) {
        int32_t l2[8], l512[8];
        uint16_t h2[8], h512[8];
        __m128i s2, s512;
        _mm256_storeu_si256((__m256i *)l2, avx2_q4_group_sums(&w4[b], &g[b / QT_GROUP], &s2));
        _mm256_storeu_si256((__m256i *)l512,
                            avx512_q4_group_sums(&w4[b], &g[b / QT_GROUP], &s512));
        _mm_storeu_si128((__m128i *)h2, s2);
        _mm_storeu_si128((__m128i *)h512, s512);
        for (int k = 0; k < QT_GROUP; k++) {
            const qt_block_q4_0 *wk = &w4[b + order[k]];
            int32_t want = block_int_q4(wk, &x[b + order[k]]);
            bad += (l2[k] != want) + (l512[k] != want) + (h2[k] != wk->d) + (h512[k] != wk->d);
        }
    }
    for (int64_t b = 0; b + 2 <= nblocks; b += 2) {
        __m512i p8 = avx512_q8_pair(&w8[b], &x[b]);
        bad += lanes512(p8, 0, 8) != block_int_q8(&w8[b], &x[b]);
        bad += lanes512(p8, 8, 8) != block_int_q8(&w8[b + 1], &x[b + 1]);
    }
    for (int64_t b = 0; b < nblocks; b++) {
        bad += lanes256(avx2_q8_block(&w8[b], &x[b])) != block_int_q8(&w8[b], &x[b]);
        bad += lanes256(avx2_q4_block(&w4[b], &x[b])) != block_int_q4(&w4[b], &x[b]);
    }
    return bad;
}

/* The exact dot product (double) and the bound on any order of float
 * summation of the kernels' terms: each lane's partial integer sum times
 * the block's scale product, nblocks / 2 multiply-adds per lane and a
 * reduction of at most 16 lanes, so at most nblocks + 8 roundings of sums
 * no larger than the sum of the terms' magnitudes. */
typedef struct expected {
    double exact, bound;
} expected;

static expected expect(const void *w, int q4, const qt_block_q8_act *x, int64_t nblocks)
{
    expected e = {0, 0};
    for (int64_t b = 0; b < nblocks; b++) {
        const qt_block_q8_0 *w8 = (const qt_block_q8_0 *)w + b;
        const qt_block_q4_0 *w4 = (const qt_block_q4_0 *)w + b;
        float c = qt__fp16_to_fp32(q4 ? w4->d : w8->d) * x[b].d;
        double mag = 0;
        for (int j = 0; j < QT_BLOCK; j++)
            mag += fabs((double)(q4 ? (j < 16 ? w4->qs[j] & 0xf : w4->qs[j - 16] >> 4) : w8->qs[j]) *
                        x[b].qs[j]);
        if (q4)
            mag += 8.0 * fabs((double)x[b].sum);
        e.exact += (double)(q4 ? block_int_q4(w4, &x[b]) : block_int_q8(w8, &x[b])) * c;
        e.bound += mag * fabs(c);
    }
    e.bound *= (double)(nblocks + 8) * ldexp(1.0, -24);
    return e;
}

/* got within the bound of the exact value */
static int within(float got, expected e)
{
    return fabs((double)got - e.exact) <= e.bound + 1e-30;
}

/* NaN where the scalar variant gives NaN, the same infinity where it
 * gives one, a finite value where it gives one */
static int same_class(float got, float want)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return isfinite(got);
}

static void random_blocks(int64_t nblocks)
{
    qt_block_q8_0 *w8 = calloc((size_t)nblocks + 1, sizeof *w8);
    qt_block_q4_0 *w4 = calloc((size_t)nblocks + 1, sizeof *w4);
    qt_block_q8_act *x = calloc((size_t)nblocks + 1, sizeof *x);
    qt_q4_act_group *g = calloc((size_t)(nblocks / QT_GROUP) + 1, sizeof *g);
    int bad_int = 0, bad512 = 0, bad2 = 0, bad_scalar = 0;
    for (int round = 0; round < 20; round++) {
        fill(w8, w4, x, nblocks);
        qt__group_q4_activations(x, g, nblocks);
        bad_int += integer_mismatches(w8, w4, x, g, nblocks);
        expected e8 = expect(w8, 0, x, nblocks), e4 = expect(w4, 1, x, nblocks);
        float s8 = qt__kernels_scalar.dot_q8_0(w8, x, nblocks);
        float s4 = qt__kernels_scalar.dot_q4_0(w4, x, NULL, nblocks);
        float v8 = avx512_dot_q8_0(w8, x, nblocks), v4 = avx512_dot_q4_0(w4, x, g, nblocks);
        float a8 = avx2_dot_q8_0(w8, x, nblocks), a4 = avx2_dot_q4_0(w4, x, g, nblocks);
        bad_scalar += !within(s8, e8) + !within(s4, e4);
        if (!within(v8, e8) || !within(v4, e4)) {
            if (!bad512)
                diag("nblocks %lld: avx512 %.9g %.9g, scalar %.9g %.9g, exact %.9g %.9g +- %.3g %.3g",
                     (long long)nblocks, v8, v4, s8, s4, e8.exact, e4.exact, e8.bound, e4.bound);
            bad512++;
        }
        bad2 += !within(a8, e8) + !within(a4, e4);
    }
    ok(bad_int == 0,
       "nblocks %lld: AVX-512 and AVX2 integer block and group sums exact (%d mismatches)",
       (long long)nblocks, bad_int);
    ok(bad512 == 0, "nblocks %lld: AVX-512 Q8_0 and Q4_0 dots within the summation bound of the "
       "exact value, as the scalar's (%d of 20 rounds off)", (long long)nblocks, bad512);
    ok(bad2 == 0 && bad_scalar == 0, "nblocks %lld: AVX2 and scalar dots within it too (%d, %d off)",
       (long long)nblocks, bad2, bad_scalar);
    free(w8);
    free(w4);
    free(x);
    free(g);
}

/* One weight block's scale replaced by a non-finite one (or the
 * activations of one block made of an infinity, so d = NaN): every
 * variant's result is the scalar's NaN or infinity. */
static void non_finite(void)
{
    enum { N = 9 };
    qt_block_q8_0 w8[N];
    qt_block_q4_0 w4[N];
    qt_block_q8_act x[N];
    qt_q4_act_group g[N / QT_GROUP];
    static const uint16_t scales[] = {0x7c00, 0xfc00, 0x7e00}; /* inf, -inf, nan */
    static const char *const names[] = {"inf", "-inf", "nan"};
    for (int which = 0; which < 4; which++) {
        int bad = 0;
        for (int round = 0; round < 40; round++) {
            fill(w8, w4, x, N);
            int at = (int)(rnd() % N);
            if (round % 4 == 0) /* a block whose integer sum is 0: 0 * inf */
                memset(x[at].qs, 0, sizeof x[at].qs), x[at].sum = 0;
            if (which < 3) {
                w8[at].d = w4[at].d = scales[which];
            } else {
                float v[QT_BLOCK];
                for (int j = 0; j < QT_BLOCK; j++)
                    v[j] = j == 5 ? INFINITY : rnd_unit();
                qt__quantize_activations(v, &x[at], 1);
            }
            qt__group_q4_activations(x, g, N);
            float s8 = qt__kernels_scalar.dot_q8_0(w8, x, N);
            float s4 = qt__kernels_scalar.dot_q4_0(w4, x, NULL, N);
            float got[4] = {avx512_dot_q8_0(w8, x, N), avx512_dot_q4_0(w4, x, g, N),
                            avx2_dot_q8_0(w8, x, N), avx2_dot_q4_0(w4, x, g, N)};
            for (int k = 0; k < 4; k++)
                if (!same_class(got[k], k % 2 ? s4 : s8)) {
                    if (!bad)
                        diag("%s %s: got %g, scalar %g", k < 2 ? "avx512" : "avx2",
                             k % 2 ? "q4_0" : "q8_0", got[k], k % 2 ? s4 : s8);
                    bad++;
                }
        }
        ok(bad == 0, "%s%s: AVX-512 and AVX2 give the scalar's NaN or infinity (%d off)",
           which < 3 ? "weight scale " : "activations with an infinity (d = NaN)",
           which < 3 ? names[which] : "", bad);
    }
}

/* The AVX2 activation quantizer against the scalar reference, byte for
 * byte (scale, integer sum and every int8): random blocks at many scales,
 * ties (values whose scaled form is k + 0.5, which nearest-even rounding
 * splits both ways), all-zero blocks, negative zeros, and blocks with an
 * infinity or a NaN among finite values. */
static void activation_quantizer(void)
{
    enum { NB = 64 };
    float v[NB * QT_BLOCK];
    qt_block_q8_act want[NB], got[NB];
    int bad = 0, blocks = 0;
    for (int round = 0; round < 50; round++) {
        for (int b = 0; b < NB; b++) {
            int kind = (int)(rnd() % 8);
            float scale = ldexpf(1.0f, (int)(rnd() % 60) - 30);
            for (int j = 0; j < QT_BLOCK; j++) {
                float *e = &v[b * QT_BLOCK + j];
                *e = rnd_unit() * scale;
                if (kind == 1) /* max 127 so the scale is 1: halves tie */
                    *e = j == 0 ? 127.0f : (float)((int)(rnd() % 200) - 100) + 0.5f;
                if (kind == 2)
                    *e = j % 2 ? -0.0f : 0.0f;
                if (kind == 3 && j == (int)(rnd() % QT_BLOCK))
                    *e = rnd() % 2 ? INFINITY : -INFINITY;
                if (kind == 4 && j == 7)
                    *e = NAN;
            }
        }
        memset(want, 0x55, sizeof want);
        memset(got, 0xaa, sizeof got);
        qt__quantize_activations(v, want, NB);
        avx2_quantize_activations(v, got, NB);
        for (int b = 0; b < NB; b++, blocks++) {
            bool same_d = memcmp(&want[b].d, &got[b].d, sizeof want[b].d) == 0 ||
                          (isnan(want[b].d) && isnan(got[b].d));
            if (!same_d || want[b].sum != got[b].sum ||
                memcmp(want[b].qs, got[b].qs, sizeof want[b].qs) != 0) {
                if (!bad)
                    diag("block %d: scalar d %g sum %d q0 %d, avx2 d %g sum %d q0 %d", b,
                         want[b].d, want[b].sum, want[b].qs[0], got[b].d, got[b].sum, got[b].qs[0]);
                bad++;
            }
        }
    }
    ok(bad == 0, "AVX2 activation quantizer equals the scalar one byte for byte (%d of %d blocks "
       "differ)", bad, blocks);
}

int main(void)
{
    static const int64_t counts[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 33, 128};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        random_blocks(counts[k]);
    non_finite();
    activation_quantizer();
    printf("1..%d\n", tap_count_);
    return tap_failed_ != 0;
}
#endif
