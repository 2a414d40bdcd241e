/* layouts/quantized/block_kernels_x86.h — the AVX2 and AVX-512 dot
 * products of weight blocks with quantized activations (see
 * block_kernels.c for the method), kept apart so that one source serves
 * two builds: block_kernels.c includes it with <immintrin.h> and QT_AVX2 /
 * QT_AVX512 defined as target attributes, and tests/test_quantized_simde.c
 * includes it with those empty and SIMDe's portable intrinsics under the
 * native names, so the AVX-512 code runs (emulated) and is compared with
 * the scalar variant on every machine, not only on one with AVX-512.
 * Uses intrinsics only, and nothing but quantized.h's types. */
#ifndef WEFT_LAYOUTS_QUANTIZED_BLOCK_KERNELS_X86_H
#define WEFT_LAYOUTS_QUANTIZED_BLOCK_KERNELS_X86_H

#include <math.h>
#include <string.h>

#include "quantized.h"

#if !defined(QT_AVX2) || !defined(QT_AVX512)
#error "define QT_AVX2 and QT_AVX512 (target attributes, or empty) before including block_kernels_x86.h"
#endif

/* ------------------------------------------------------------------ AVX2 */

QT_AVX2 static inline float avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sum_j u[j] s[j] of 32 unsigned u and signed s, as 8 int32 partial sums:
 * maddubs's 16-bit pair sums cannot saturate, |u| <= 127 (Q8_0: 127 x 127
 * x 2) or u <= 15 (Q4_0) */
QT_AVX2 static inline __m256i avx2_dot_us(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* the 32 nibbles of a Q4_0 block in element order, unsigned (0..15):
 * elements 0..15 in the low nibbles, 16..31 in the high ones.  The 16
 * bytes loaded into both halves, the upper half shifted right by 4 within
 * each 32-bit lane (a byte's high nibble comes down; the next byte's low
 * one goes up, where the mask drops it): three instructions where two
 * shifts-and-masks and an insert took five, 1.85 -> 1.52 ns a block from
 * the cache (docs/benchmarks.md, issue 17, twelfth session). */
QT_AVX2 static inline __m256i avx2_q4_nibbles(const uint8_t *qs)
{
    __m256i m = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(m, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(0xf));
}

/* one Q8_0 block: signed times signed as |w| times x with w's sign */
QT_AVX2 static inline __m256i avx2_q8_block(const qt_block_q8_0 *w, const qt_block_q8_act *x)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)w->qs);
    __m256i s = _mm256_loadu_si256((const __m256i *)x->qs);
    return avx2_dot_us(_mm256_abs_epi8(q), _mm256_sign_epi8(s, q));
}

/* one Q4_0 block: the 8 lanes less x's sum once each, 8 * sum in all */
QT_AVX2 static inline __m256i avx2_q4_block(const qt_block_q4_0 *w, const qt_block_q8_act *x)
{
    __m256i s = _mm256_loadu_si256((const __m256i *)x->qs);
    return _mm256_sub_epi32(avx2_dot_us(avx2_q4_nibbles(w->qs), s), _mm256_set1_epi32(x->sum));
}

QT_AVX2 static inline __m256 avx2_scaled(__m256i isum, uint16_t dw, float dx, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(dw) * dx), _mm256_cvtepi32_ps(isum), acc);
}

/* A result that is not finite is the scalar kernel's (scalar names it):
 * the lanes multiply a block's scale by each lane's partial integer sum,
 * so an infinite scale met a zero lane (inf x 0 = NaN) or lanes of both
 * signs (inf - inf) and gave NaN where the block's total times the scale,
 * what the scalar kernel and the format mean, is an infinity (found by
 * tests/test_quantized_simde).  Rare enough that the second pass costs
 * nothing in practice; a NaN activation block stays NaN either way. */
#define QT_FINITE_OR(result, scalar) (isfinite(result) ? (result) : (scalar)(w, x, nblocks))

/* How far ahead of the block being read the weights are prefetched.  The
 * hardware prefetcher alone left a Q4_0 matrix-vector product whose
 * weights come from memory (not the cache) at 54-61% of STREAM's
 * bandwidth; 1 KiB ahead measured 55-69% in alternating runs on a quiet
 * machine, 2 KiB no better, 512 B worse, on 4 KiB pages.  With the weight
 * on huge pages (blocks.c) and the cheaper nibble unpack, 4 KiB ahead
 * (227 Q4_0 blocks, into the next row or two) beat 1 KiB by 12-13% and
 * 2 KiB by 5% (median of 288 calls alternating in one process, one and
 * two threads), 8 KiB the same as 4 (docs/benchmarks.md, issue 17,
 * twelfth session).  Reading past the last row is harmless: a prefetch
 * never faults. */
#define QT_PREFETCH_BYTES 4096
/* Two accumulators over alternate blocks: one would make every block wait
 * on the last one's multiply-add latency. */
QT_AVX2 static float avx2_dot_q8_0(const qt_block_q8_0 *w, const qt_block_q8_act *x,
                                   int64_t nblocks)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nblocks; b += 2) {
        _mm_prefetch((const char *)&w[b] + QT_PREFETCH_BYTES, _MM_HINT_T0);
        acc0 = avx2_scaled(avx2_q8_block(&w[b], &x[b]), w[b].d, x[b].d, acc0);
        acc1 = avx2_scaled(avx2_q8_block(&w[b + 1], &x[b + 1]), w[b + 1].d, x[b + 1].d, acc1);
    }
    if (b < nblocks)
        acc0 = avx2_scaled(avx2_q8_block(&w[b], &x[b]), w[b].d, x[b].d, acc0);
    float r = avx2_hsum(_mm256_add_ps(acc0, acc1));
    return QT_FINITE_OR(r, qt__kernels_scalar.dot_q8_0);
}

/* the scalar Q4_0 kernel as QT_FINITE_OR calls it */
static inline float qt_scalar_q4(const qt_block_q4_0 *w, const qt_block_q8_act *x, int64_t nblocks)
{
    return qt__kernels_scalar.dot_q4_0(w, x, NULL, nblocks);
}

/* Q4_0 eight blocks at a time, the AVX2 variant's kernel.  A block at a
 * time (avx2_q4_block) spent three instructions on the nibbles of one
 * block, a widening multiply, a correction, a conversion and a scale of
 * its own (a float16 load, convert, multiply, broadcast) on every block:
 * 15 instructions, about 4 cycles a block from the L1 cache (1.27 ns,
 * 14 GB/s of weights a core), so two Zen 3 cores were barely faster than
 * their memory, and the 4096 x 4096 product moved between 66% and 87% of
 * STREAM with the machine's load.  Eight at a time, the
 * activations laid out to match (qt_q4_act_group), two blocks' nibbles
 * share a register and its masks, the 16-bit products of four pairs are
 * summed by two horizontal adds (no overflow: a pair's lane is at most
 * 2 x 2 x 15 x 127 = 7620, two of them 15240), one widening multiply per
 * two pairs, a third horizontal add leaves one exact integer per block,
 * and the eight blocks' scales are one float16 vector: one conversion,
 * one multiply, one fused multiply-add for the eight.  1.6x the one-block
 * kernel from the L1 cache (0.79 against 1.27 ns a block, min of 40,
 * same process; docs/benchmarks.md, issue 17, eighteenth session). */
QT_AVX2 static inline __m256i avx2_q4_pair16(const qt_block_q4_0 *w, const int8_t *lo,
                                             const int8_t *hi)
{
    const __m256i low = _mm256_set1_epi8(0xf);
    __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)w[0].qs)),
        _mm_loadu_si128((const __m128i *)w[1].qs), 1);
    __m256i l = _mm256_maddubs_epi16(_mm256_and_si256(v, low),
                                     _mm256_loadu_si256((const __m256i *)lo));
    __m256i h = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                                     _mm256_loadu_si256((const __m256i *)hi));
    return _mm256_add_epi16(l, h);
}

/* The four pairs' 16-bit sums (pair k's blocks in the two 128-bit
 * halves of p_k, as qt_q4_act_group lays them out) to sum_j (n_j - 8) q_j
 * of the group's eight blocks, exact, lane l holding block
 * QT_GROUP_ORDER[l]: each horizontal add works within 128-bit halves */
QT_AVX2 static inline __m256i avx2_q4_reduce(__m256i p0, __m256i p1, __m256i p2, __m256i p3,
                                             const qt_q4_act_group *g)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s01 = _mm256_madd_epi16(_mm256_hadd_epi16(p0, p1), ones); /* A A C C | B B D D */
    __m256i s23 = _mm256_madd_epi16(_mm256_hadd_epi16(p2, p3), ones); /* E E G G | F F H H */
    return _mm256_sub_epi32(_mm256_hadd_epi32(s01, s23),
                            _mm256_loadu_si256((const __m256i *)g->sum8));
}

/* The group's integer sums (avx2_q4_reduce) and, in *scales, its eight
 * weight scales as float16 in the same lane order */
QT_AVX2 static inline __m256i avx2_q4_group_sums(const qt_block_q4_0 *w, const qt_q4_act_group *g,
                                                 __m128i *scales)
{
    __m128i h = _mm_cvtsi32_si128(w[0].d);
    h = _mm_insert_epi16(h, w[2].d, 1);
    h = _mm_insert_epi16(h, w[4].d, 2);
    h = _mm_insert_epi16(h, w[6].d, 3);
    h = _mm_insert_epi16(h, w[1].d, 4);
    h = _mm_insert_epi16(h, w[3].d, 5);
    h = _mm_insert_epi16(h, w[5].d, 6);
    *scales = _mm_insert_epi16(h, w[7].d, 7);
    return avx2_q4_reduce(avx2_q4_pair16(w, g->lo[0], g->hi[0]),
                          avx2_q4_pair16(w + 2, g->lo[1], g->hi[1]),
                          avx2_q4_pair16(w + 4, g->lo[2], g->hi[2]),
                          avx2_q4_pair16(w + 6, g->lo[3], g->hi[3]), g);
}

/* The Q4_0 dot product a group at a time through `sums` (one of the two
 * functions above), the tail of fewer than eight blocks a block at a time.
 * A group is 144 bytes: three prefetches 48 apart reach every 64-byte
 * line of the stream (two 72 apart could step over one). */
#define QT_Q4_GROUP_DOT(name, attr, sums)                                                      \
    attr static float name(const qt_block_q4_0 *w, const qt_block_q8_act *x,                   \
                           const qt_q4_act_group *g, int64_t nblocks)                          \
    {                                                                                          \
        __m256 acc = _mm256_setzero_ps();                                                      \
        int64_t b = 0;                                                                         \
        for (; b + QT_GROUP <= nblocks; b += QT_GROUP, g++) {                                  \
            const char *ahead = (const char *)&w[b] + QT_PREFETCH_BYTES;                       \
            _mm_prefetch(ahead, _MM_HINT_T0);                                                  \
            _mm_prefetch(ahead + 48, _MM_HINT_T0);                                             \
            _mm_prefetch(ahead + 96, _MM_HINT_T0);                                             \
            __m128i h;                                                                         \
            __m256i t = sums(&w[b], g, &h);                                                    \
            __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_loadu_ps(g->d));           \
            acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(t), acc);                          \
        }                                                                                      \
        for (; b < nblocks; b++)                                                               \
            acc = avx2_scaled(avx2_q4_block(&w[b], &x[b]), w[b].d, x[b].d, acc);               \
        float r = avx2_hsum(acc);                                                              \
        return QT_FINITE_OR(r, qt_scalar_q4);                                                  \
    }

QT_Q4_GROUP_DOT(avx2_dot_q4_0, QT_AVX2, avx2_q4_group_sums)

/* The activation blocks of qt__quantize_activations, the same bits (the
 * tests compare them byte for byte): the same maximum, the same 127 / amax,
 * one float multiply per value, and vroundps in the current rounding mode
 * is nearbyintf.  The scalar loop calls libm's fmaxf and nearbyintf for
 * every value, about 5% of a 4096 x 4096 Q4_0 matrix-vector product. */
QT_AVX2 static void avx2_quantize_activations(const float *x, qt_block_q8_act *y, int64_t nblocks)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY), lim = _mm256_set1_ps(127.0f);
    const __m256 neg_lim = _mm256_set1_ps(-127.0f);
    /* packs interleaves its two sources in 4-value groups: back in order */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        __m256 v[4], amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            __m256 a = _mm256_and_ps(v[k], abs_mask);
            amax = _mm256_max_ps(amax, a);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* inf or NaN */
        }
        if (_mm256_movemask_ps(bad)) {
            memset(y[b].qs, 0, sizeof y[b].qs);
            y[b].d = NAN;
            y[b].sum = 0;
            continue;
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        float am = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
        float d = am / 127.0f, id = d > 0 ? 127.0f / am : 0.0f;
        __m256 scale = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], scale),
                                       _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC);
            q[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, neg_lim), lim));
        }
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                           _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)y[b].qs, _mm256_permutevar8x32_epi32(bytes, order));
        y[b].d = d;
        y[b].sum = _mm_cvtsi128_si32(s4);
    }
}

/* --------------------------------------------------------------- AVX-512 */

/* Two blocks per 512-bit register: block b in lanes 0..7 (int32) or bytes
 * 0..31, block b + 1 above. */
QT_AVX512 static inline __m512i avx512_pair(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

QT_AVX512 static inline __m512i avx512_dot_us(__m512i u, __m512i s)
{
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

QT_AVX512 static inline __m512i avx512_act_pair(const qt_block_q8_act *x)
{
    return avx512_pair(_mm256_loadu_si256((const __m256i *)x[0].qs),
                       _mm256_loadu_si256((const __m256i *)x[1].qs));
}

/* AVX-512 has no sign_epi8: x negated under the mask of w's negative bytes */
QT_AVX512 static inline __m512i avx512_q8_pair(const qt_block_q8_0 *w, const qt_block_q8_act *x)
{
    __m512i q = avx512_pair(_mm256_loadu_si256((const __m256i *)w[0].qs),
                            _mm256_loadu_si256((const __m256i *)w[1].qs));
    __m512i s = avx512_act_pair(x);
    s = _mm512_mask_sub_epi8(s, _mm512_movepi8_mask(q), _mm512_setzero_si512(), s);
    return avx512_dot_us(_mm512_abs_epi8(q), s);
}

QT_AVX512 static float avx512_dot_q8_0(const qt_block_q8_0 *w, const qt_block_q8_act *x,
                                       int64_t nblocks)
{
    __m512 acc = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nblocks; b += 2) {
        _mm_prefetch((const char *)&w[b] + QT_PREFETCH_BYTES, _MM_HINT_T0);
        __m512 d = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_cvtsh_ss(w[b].d) * x[b].d),
                                        _mm512_set1_ps(_cvtsh_ss(w[b + 1].d) * x[b + 1].d));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(avx512_q8_pair(&w[b], &x[b])), acc);
    }
    __m256 tail = _mm256_setzero_ps();
    if (b < nblocks)
        tail = avx2_scaled(avx2_q8_block(&w[b], &x[b]), w[b].d, x[b].d, tail);
    float r = _mm512_reduce_add_ps(acc) + avx2_hsum(tail);
    return QT_FINITE_OR(r, qt__kernels_scalar.dot_q8_0);
}

/* Q4_0 a group of eight blocks at a time with AVX-512 BW, against the same
 * regrouped activations.  Every block's scale and its 16 bytes start at
 * an even offset of the group's 144 bytes (18 k and 18 k + 2), so three
 * loads and word permutes (vpermt2w) put four blocks' bytes in one
 * register and the eight scales in one vector, where the AVX2 kernel
 * loads every block's bytes and scale on its own (8 loads, 4 inserts and
 * 8 scale inserts a group); the unpack and the multiplies then take half
 * the instructions in 512 bits, and the sums meet as the AVX2 kernel's
 * (horizontal adds have no 512-bit form).  It replaces a pair kernel (a
 * block's unpack and scale each on its own) that ran about 7 cycles a
 * block on the 16-core Xeon host, which left one thread at 62% of its
 * STREAM figure (docs/benchmarks.md, fourteenth session); this one is
 * tested (tests/test_quantized_simde, emulated) but not yet timed on an
 * AVX-512 machine. */
static const uint16_t qt_q4_words_abcd[32] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12,
                                              13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24,
                                              25, 26, 28, 29, 30, 31, 32, 33, 34, 35};
/* blocks 4..7 from words 32..95 (the second and third loads) */
static const uint16_t qt_q4_words_efgh[32] = {5,  6,  7,  8,  9,  10, 11, 12, 14, 15, 16,
                                              17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28,
                                              29, 30, 32, 33, 34, 35, 36, 37, 38, 39};
/* the scales, word 9 k of block k, in QT_GROUP_ORDER */
static const uint16_t qt_q4_words_scales[32] = {0, 18, 36, 54, 9, 27, 45, 63};

QT_AVX512 static inline __m512i avx512_q4_quad16(__m512i q, const int8_t *lo, const int8_t *hi)
{
    const __m512i low = _mm512_set1_epi8(0xf);
    __m512i l = _mm512_maddubs_epi16(_mm512_and_si512(q, low), _mm512_loadu_si512(lo));
    __m512i h = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q, 4), low),
                                     _mm512_loadu_si512(hi));
    return _mm512_add_epi16(l, h);
}

QT_AVX512 static inline __m256i avx512_q4_group_sums(const qt_block_q4_0 *w,
                                                     const qt_q4_act_group *g, __m128i *scales)
{
    const uint16_t *u = (const uint16_t *)(const void *)w;
    __m512i z0 = _mm512_loadu_si512(u), z1 = _mm512_loadu_si512(u + 32);
    /* the group's last 16 bytes; the permute reads only these words of it */
    __m512i z2 = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(u + 64)));
    __m512i q0 = _mm512_permutex2var_epi16(z0, _mm512_loadu_si512(qt_q4_words_abcd), z1);
    __m512i q1 = _mm512_permutex2var_epi16(z1, _mm512_loadu_si512(qt_q4_words_efgh), z2);
    *scales = _mm512_castsi512_si128(
        _mm512_permutex2var_epi16(z0, _mm512_loadu_si512(qt_q4_words_scales), z1));
    /* lo[0], lo[1] (and hi) are adjacent: blocks 0..3's activations */
    __m512i p01 = avx512_q4_quad16(q0, g->lo[0], g->hi[0]);
    __m512i p23 = avx512_q4_quad16(q1, g->lo[2], g->hi[2]);
    return avx2_q4_reduce(_mm512_castsi512_si256(p01), _mm512_extracti64x4_epi64(p01, 1),
                          _mm512_castsi512_si256(p23), _mm512_extracti64x4_epi64(p23, 1), g);
}

QT_Q4_GROUP_DOT(avx512_dot_q4_0, QT_AVX512, avx512_q4_group_sums)

#endif /* WEFT_LAYOUTS_QUANTIZED_BLOCK_KERNELS_X86_H */
