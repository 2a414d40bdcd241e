/* layouts/quantized/igemm.c — quantized linear's GEMM on AVX2 without VNNI:
 * u8 activations times s8 weights, int32 sums, requantized to u8 by
 * oneDNN's arithmetic (docs/design.md, "The int8 GEMM on AVX2 without
 * VNNI").
 *
 * Why by hand: without VNNI the u8 x s8 product is vpmaddubsw (32 products
 * summed in pairs into 16-bit lanes, saturating) then vpmaddwd by ones (the
 * pairs summed into 32-bit lanes): two multiplies for 32 products, where
 * float32 needs four FMAs, so int8 has twice float's peak and oneDNN's
 * GEMM (and torch's) sits at that line.  Summing two vpmaddubsw results in
 * 16 bits first (vpaddw) and widening once makes it three multiplies for
 * 64 products.  That is exact only where no 16-bit lane can overflow, so
 * the weight is packed with a bound per group of 8 k: over its 16 columns
 * and their 16-bit lanes, the larger of the sums of the positive and of
 * the negative weights among the four a lane gathers (inputs are >= 0, so
 * a lane's partial sums lie in [-a N, a P]).  A call takes each 4-row
 * panel's largest input a; a group whose bound b has a * b <= 32767 can
 * overflow nowhere, and runs the 16-bit way; the others run the
 * two-multiply way, where pairs saturate exactly as oneDNN's and torch's
 * do on such CPUs.  Groups are packed in ascending order of their bound
 * (their place in k kept beside them), so the safe ones are a prefix found
 * by one binary search, and the inner loops have no branch.
 *
 * The layout: columns in blocks of 16 (the last padded with zero weights),
 * k in groups of 8; a group is 128 bytes, two halves of k (0-3, 4-7), each
 * two 8-column registers of [column][4 k].  Uses no oneDNN: quantized.h's
 * types and weft's public API only. */
#include <stdlib.h>
#include <string.h>

#include "quantized.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QT_IGEMM_X86 1
#else
#define QT_IGEMM_X86 0
#endif

#define BLOCK_BYTES 128 /* one group of 8 k x 16 columns */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void qt__igemm_free(qt_igemm *p)
{
    free(p->b);
    free(p->bound);
    free(p->place);
    memset(p, 0, sizeof *p);
}

int qt__igemm_pack(qt_igemm *p, const int8_t *w, int64_t n, int64_t k, const char *op)
{
    memset(p, 0, sizeof *p);
    if (n < 1 || k < 8 || k % 8 || k / 8 > UINT16_MAX)
        return weft_set_error(WEFT_EINVAL, "%s: the AVX2 int8 GEMM takes in_features a "
                                           "multiple of 8 up to %d, got %lld",
                              op, 8 * UINT16_MAX, (long long)k);
    int64_t nb = (n + 15) / 16, kg = k / 8;
    void *b = NULL;
    uint32_t *key = malloc(sizeof *key * (size_t)kg);
    p->bound = malloc(sizeof *p->bound * (size_t)(nb * kg));
    p->place = malloc(sizeof *p->place * (size_t)(nb * kg));
    if (posix_memalign(&b, 64, (size_t)(nb * kg * BLOCK_BYTES)) || !key || !p->bound ||
        !p->place) {
        free(b);
        free(key);
        qt__igemm_free(p);
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory for the packed weight", op);
    }
    p->b = b;
    p->n = n, p->k = k, p->nb = nb, p->kg = kg;
    for (int64_t jb = 0; jb < nb; jb++) {
        int cols = n - jb * 16 < 16 ? (int)(n - jb * 16) : 16;
        for (int64_t g = 0; g < kg; g++) {
            int most = 0;
            for (int c = 0; c < cols; c++) {
                const int8_t *r = w + (jb * 16 + c) * k + g * 8;
                /* lane 0 of the column gathers k 0, 1, 4, 5; lane 1 k 2, 3, 6, 7 */
                static const int lane[2][4] = {{0, 1, 4, 5}, {2, 3, 6, 7}};
                for (int l = 0; l < 2; l++) {
                    /* inputs are >= 0: the lane's sums lie in [-a N, a P] */
                    int pos = 0, neg = 0;
                    for (int q = 0; q < 4; q++)
                        if (r[lane[l][q]] > 0)
                            pos += r[lane[l][q]];
                        else
                            neg -= r[lane[l][q]];
                    most = pos > most ? pos : most;
                    most = neg > most ? neg : most;
                }
            }
            key[g] = (uint32_t)most << 16 | (uint32_t)g;
        }
        qsort(key, (size_t)kg, sizeof *key, cmp_u32);
        for (int64_t i = 0; i < kg; i++) {
            int64_t g = key[i] & 0xffff;
            p->bound[jb * kg + i] = (uint16_t)(key[i] >> 16);
            p->place[jb * kg + i] = (uint16_t)g;
            int8_t *dst = p->b + (jb * kg + i) * BLOCK_BYTES;
            memset(dst, 0, BLOCK_BYTES);
            for (int c = 0; c < cols; c++) {
                const int8_t *r = w + (jb * 16 + c) * k + g * 8;
                for (int h = 0; h < 2; h++)
                    memcpy(dst + h * 64 + (c / 8) * 32 + (c % 8) * 4, r + h * 4, 4);
            }
        }
    }
    free(key);
    return 0;
}

bool qt__igemm_on;

int qt__choose_igemm(void)
{
    const char *want = getenv("WEFT_QUANTIZED_GEMM");
    bool runs = qt__igemm_runs();
    if (!want || !*want)
        qt__igemm_on = qt__igemm_preferred();
    else if (strcmp(want, "onednn") == 0)
        qt__igemm_on = false;
    else if (strcmp(want, "avx2") == 0 && runs)
        qt__igemm_on = true;
    else
        return weft_set_error(WEFT_ENOTSUP,
                              "quantized: WEFT_QUANTIZED_GEMM=%s: expected onednn or avx2, one "
                              "this CPU runs (avx2: %s)",
                              want, runs ? "yes" : "no");
    return 0;
}

#if QT_IGEMM_X86
/* no "fma": GCC would fuse the requantization's multiply and add, which
 * oneDNN's arithmetic (and the tests' reference) rounds apart */
#define QT_AVX2 __attribute__((target("avx2")))

QT_AVX2 static inline unsigned row_max(const uint8_t *x, int64_t k)
{
    __m256i m = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32)
        m = _mm256_max_epu8(m, _mm256_loadu_si256((const __m256i *)(x + i)));
    __m128i h = _mm_max_epu8(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epu8(h, _mm_srli_si128(h, 8));
    h = _mm_max_epu8(h, _mm_srli_si128(h, 4));
    h = _mm_max_epu8(h, _mm_srli_si128(h, 2));
    h = _mm_max_epu8(h, _mm_srli_si128(h, 1));
    unsigned r = (unsigned)_mm_cvtsi128_si32(h) & 0xff;
    for (; i < k; i++)
        r = x[i] > r ? x[i] : r;
    return r;
}

/* 4 input bytes to every 32-bit lane (memcpy: a row may start at any byte) */
QT_AVX2 static inline __m256i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}
#define BCAST(p) bcast4(p)
#define LOAD(p) _mm256_load_si256((const __m256i *)(const void *)(p))

/* The sums of one group for one row and 8 columns (b0: k 0-3, b1: k 4-7):
 * the 16-bit way adds the two vpmaddubsw results before widening, the
 * exact way widens each first. */
QT_AVX2 static inline __m256i group_16bit(__m256i a0, __m256i a1, __m256i b0, __m256i b1)
{
    return _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(a0, b0), _mm256_maddubs_epi16(a1, b1)),
        _mm256_set1_epi16(1));
}

QT_AVX2 static inline __m256i group_exact(__m256i a0, __m256i a1, __m256i b0, __m256i b1)
{
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(a0, b0), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(a1, b1), ones));
}

/* groups [g, end) of R rows the way `group` sums them */
#define GROUPS(R, end, group)                                                                     \
    for (; g < (end); g++, b += BLOCK_BYTES) {                                                    \
        const uint8_t *xg = x + (int64_t)place[g] * 8;                                            \
        const __m256i b00 = LOAD(b), b01 = LOAD(b + 32), b10 = LOAD(b + 64), b11 = LOAD(b + 96);  \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                     \
            __m256i a0 = BCAST(xg + r * ldx), a1 = BCAST(xg + r * ldx + 4);                       \
            c[r][0] = _mm256_add_epi32(c[r][0], group(a0, a1, b00, b10));                         \
            c[r][1] = _mm256_add_epi32(c[r][1], group(a0, a1, b01, b11));                         \
        }                                                                                         \
    }

/* R rows x 16 columns: groups [0, nfast) summed in 16 bits, the rest the
 * exact way; x the panel's first row, groups at place[g] * 8 in k. The
 * row loops unroll (GCC's pragma), so the 2R sums stay in registers. */
#define KERNEL(R)                                                                                 \
    QT_AVX2 static void kernel##R(const int8_t *b, const uint16_t *place, int64_t nfast,         \
                                  int64_t kg, const uint8_t *x, int64_t ldx, __m256i *acc)       \
    {                                                                                             \
        __m256i c[R][2];                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                       \
            c[r][0] = c[r][1] = _mm256_setzero_si256();                                           \
        int64_t g = 0;                                                                            \
        GROUPS(R, nfast, group_16bit)                                                             \
        GROUPS(R, kg, group_exact)                                                                \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                       \
            acc[2 * r] = c[r][0], acc[2 * r + 1] = c[r][1];                                       \
    }
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)

/* One call: the operands and the requantization, per column padded to the
 * blocks' 16. */
typedef struct igemm_job {
    const qt_igemm *p;
    const uint8_t *x;
    uint8_t *y;
    int64_t m, rows_each, col_pieces, blocks_each;
    const float *scale, *bias; /* nb * 16 each; bias NULL: none */
    float zero_point;
    bool relu;
} igemm_job;

#define PANELS 16 /* 4-row panels a task's rows are cut into: 64 rows */

/* oneDNN's order, so that the two agree bit for bit: (sum + bias) * scale,
 * relu, + the zero point, clamped to [0, 255], rounded half to even. */
QT_AVX2 static inline __m128i requantize(__m256i a0, __m256i a1, const float *scale,
                                         const float *bias, __m256 zp, bool relu)
{
    __m256 v0 = _mm256_cvtepi32_ps(a0), v1 = _mm256_cvtepi32_ps(a1);
    if (bias) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(bias));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(bias + 8));
    }
    v0 = _mm256_mul_ps(v0, _mm256_loadu_ps(scale));
    v1 = _mm256_mul_ps(v1, _mm256_loadu_ps(scale + 8));
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    if (relu) {
        v0 = _mm256_max_ps(v0, zero);
        v1 = _mm256_max_ps(v1, zero);
    }
    v0 = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v0, zp), zero), top);
    v1 = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v1, zp), zero), top);
    __m256i w = _mm256_packs_epi32(_mm256_cvtps_epi32(v0), _mm256_cvtps_epi32(v1));
    /* packs works per 128-bit half: bytes come out as columns 0-3, 8-11,
     * 4-7, 12-15 */
    __m128i u = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    return _mm_shuffle_epi32(u, _MM_SHUFFLE(3, 1, 2, 0));
}

QT_AVX2 static void run_task(const igemm_job *j, int64_t t)
{
    const qt_igemm *p = j->p;
    int64_t r0 = (t / j->col_pieces) * j->rows_each;
    int64_t r1 = r0 + j->rows_each < j->m ? r0 + j->rows_each : j->m;
    int64_t jb0 = (t % j->col_pieces) * j->blocks_each;
    int64_t jb1 = jb0 + j->blocks_each < p->nb ? jb0 + j->blocks_each : p->nb;
    int64_t k = p->k, n = p->n, kg = p->kg;
    const __m256 zp = _mm256_set1_ps(j->zero_point);
    for (int64_t rc = r0; rc < r1; rc += 4 * PANELS) {
        int64_t re = rc + 4 * PANELS < r1 ? rc + 4 * PANELS : r1;
        unsigned limit[PANELS]; /* per panel: the largest bound a group may have */
        for (int64_t r = rc, i = 0; r < re; r += 4, i++) {
            unsigned most = 0;
            for (int64_t q = r; q < r + 4 && q < re; q++) {
                unsigned v = row_max(j->x + q * k, k);
                most = v > most ? v : most;
            }
            limit[i] = most ? 32767u / most : UINT16_MAX;
        }
        for (int64_t jb = jb0; jb < jb1; jb++) {
            const int8_t *b = p->b + jb * kg * BLOCK_BYTES;
            const uint16_t *bound = p->bound + jb * kg, *place = p->place + jb * kg;
            const float *scale = j->scale + jb * 16, *bias = j->bias ? j->bias + jb * 16 : NULL;
            int cols = n - jb * 16 < 16 ? (int)(n - jb * 16) : 16;
            for (int64_t r = rc, i = 0; r < re; r += 4, i++) {
                int64_t lo = 0, hi = kg; /* the groups of bound <= limit: a prefix */
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (bound[mid] <= limit[i])
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                int rows = re - r < 4 ? (int)(re - r) : 4;
                const uint8_t *xr = j->x + r * k;
                __m256i acc[8];
                switch (rows) {
                case 4: kernel4(b, place, lo, kg, xr, k, acc); break;
                case 3: kernel3(b, place, lo, kg, xr, k, acc); break;
                case 2: kernel2(b, place, lo, kg, xr, k, acc); break;
                default: kernel1(b, place, lo, kg, xr, k, acc); break;
                }
                for (int q = 0; q < rows; q++) {
                    __m128i u = requantize(acc[2 * q], acc[2 * q + 1], scale, bias, zp, j->relu);
                    uint8_t *dst = j->y + (r + q) * n + jb * 16;
                    if (cols == 16) {
                        _mm_storeu_si128((__m128i *)(void *)dst, u);
                    } else {
                        uint8_t tmp[16];
                        _mm_storeu_si128((__m128i *)(void *)tmp, u);
                        memcpy(dst, tmp, (size_t)cols);
                    }
                }
            }
        }
    }
}

static void run_range(int64_t begin, int64_t end, void *ctx)
{
    for (int64_t t = begin; t < end; t++)
        run_task(ctx, t);
}

bool qt__igemm_runs(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && qt__os_saves((1u << 1) | (1u << 2)); /* XMM, YMM */
}

bool qt__igemm_preferred(void)
{
    /* VNNI's vpdpbusd does 4 products a lane in one instruction (oneDNN
     * uses it), and AVX-512BW's vpmaddubsw is twice as wide: there oneDNN
     * is faster than these kernels */
    return qt__igemm_runs() && !__builtin_cpu_supports("avx512bw") &&
           !__builtin_cpu_supports("avx512vnni") && !__builtin_cpu_supports("avxvnni");
}

int qt__igemm_run(const qt_igemm *p, const uint8_t *x, int64_t m, uint8_t *y, const float *scale,
                  const float *bias, int32_t zero_point, bool relu)
{
    int64_t cols = p->nb * 16;
    igemm_job j = {p, x, y, m, 4 * PANELS, 1, p->nb, scale, bias, (float)zero_point, relu};
    int threads = weft_get_num_threads();
    double work = (double)m * (double)p->k * (double)cols;
    int64_t row_pieces = (m + j.rows_each - 1) / j.rows_each;
    if (work >= 1048576.0 && threads > 1 && row_pieces < 2 * threads) {
        /* few rows for the threads: cut the columns too */
        int64_t want = (2 * threads + row_pieces - 1) / row_pieces;
        j.col_pieces = want < p->nb ? want : p->nb;
        j.blocks_each = (p->nb + j.col_pieces - 1) / j.col_pieces;
        j.col_pieces = (p->nb + j.blocks_each - 1) / j.blocks_each;
    }
    int64_t tasks = row_pieces * j.col_pieces;
    if (work < 1048576.0 || threads < 2)
        run_range(0, tasks, &j);
    else
        weft_parallel_for(0, tasks, 1, run_range, &j);
    return 0;
}
#else
bool qt__igemm_runs(void)
{
    return false;
}

bool qt__igemm_preferred(void)
{
    return false;
}

int qt__igemm_run(const qt_igemm *p, const uint8_t *x, int64_t m, uint8_t *y, const float *scale,
                  const float *bias, int32_t zero_point, bool relu)
{
    (void)p, (void)x, (void)m, (void)y, (void)scale, (void)bias, (void)zero_point, (void)relu;
    return weft_set_error(WEFT_ENOTSUP, "quantized_linear: the AVX2 int8 GEMM needs an x86 CPU");
}
#endif
