/* tests/test_random.c — bernoulli_, bernoulli, randint (random_), randperm
 * and multinomial: exact values against a reference written here from the
 * documented Philox mapping (weft_philox), statistical sanity (means and
 * frequencies within a few standard deviations, permutations, no repeats
 * without replacement, zero-probability classes never drawn), bad input
 * (a clear error, nothing written), and the same numbers with 1 and 2
 * threads (the program runs itself with WEFT_NUM_THREADS=1 and 2). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/ops.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"
#include "tests/rerun.h"

#define INTS(...) ((const int64_t[]){__VA_ARGS__})

static weft_generator *seeded(uint64_t seed)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, seed);
    return g;
}

static weft_tensor *empty_of(weft_dtype dt, const int64_t *sizes, int nd)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, nd, dt, WEFT_DEVICE_CPU);
    return keep(t);
}

static weft_tensor *from_doubles(const int64_t *sizes, int nd, const double *v)
{
    weft_tensor *t = empty_of(WEFT_FLOAT64, sizes, nd);
    memcpy(weft_tensor_data_ptr(t), v, (size_t)weft_tensor_numel(t) * sizeof(double));
    return t;
}

/* the reference mappings (see backends/cpu/random.c) */
static double ref_u32(uint64_t seed, uint64_t offset, int64_t i)
{
    uint32_t w[4];
    weft_philox(seed, offset + (uint64_t)(i / 4), w);
    return w[i % 4] * 0x1p-32;
}

static uint64_t ref_u64(uint64_t seed, uint64_t offset, int64_t i)
{
    uint32_t w[4];
    weft_philox(seed, offset + (uint64_t)(i / 2), w);
    int k = (int)(i % 2) * 2;
    return (uint64_t)w[k] << 32 | w[k + 1];
}

/* ------------------------------------------------------------ bernoulli */

static void test_bernoulli(void)
{
    const int64_t n = 100000;
    weft_generator *g = seeded(1234);
    weft_tensor *x = empty_of(WEFT_FLOAT32, &n, 1);
    ok(weft_bernoulli_ex_(x, 0.3, g) == 0, "bernoulli_(p=0.3) of 100000");
    const double *v = values_of(x);
    int64_t mismatches = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = ref_u32(1234, 0, i) < 0.3 ? 1 : 0;
        mismatches += v[i] != want;
        sum += v[i];
    }
    is_int(mismatches, 0, "  every value is the reference's (block i/4, word i%%4)");
    is_double(sum / n, 0.3, 0.02, "  mean within tolerance of p");
    /* the next call continues the stream: offset advanced by n/4 blocks */
    weft_tensor *y = empty_of(WEFT_UINT8, INTS(7), 1);
    weft_bernoulli_ex_(y, 0.5, g);
    v = values_of(y);
    mismatches = 0;
    for (int64_t i = 0; i < 7; i++)
        mismatches += v[i] != (ref_u32(1234, 25000, i) < 0.5 ? 1 : 0);
    is_int(mismatches, 0, "  the generator's offset moved on by 25000 blocks (uint8 result)");

    /* dtypes and p at the ends */
    static const weft_dtype dts[] = {WEFT_BOOL, WEFT_INT64, WEFT_FLOAT16, WEFT_BFLOAT16,
                                     WEFT_FLOAT64, WEFT_INT8};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        weft_tensor *t = empty_of(dts[d], INTS(50), 1);
        weft_tensor *s0 = NULL, *s1 = NULL;
        weft_bernoulli_ex_(t, 0.0, g);
        weft_sum(&s0, t, NULL, 0, false);
        weft_bernoulli_ex_(t, 1.0, g);
        weft_sum(&s1, t, NULL, 0, false);
        double a = -1, b = -1;
        weft_tensor_item(keep(s0), &a);
        weft_tensor_item(keep(s1), &b);
        ok(a == 0 && b == 50, "bernoulli_ %s: p=0 gives zeros, p=1 ones", weft_dtype_name(dts[d]));
    }
    /* a non-contiguous target gets the values in row-major order */
    weft_tensor *base = empty_of(WEFT_FLOAT64, INTS(3, 4), 2), *tr = NULL;
    weft_transpose(&tr, base, 0, 1);
    keep(tr);
    weft_generator *g2 = seeded(99);
    ok(weft_bernoulli_ex_(tr, 0.5, g2) == 0, "bernoulli_ into a transposed tensor");
    mismatches = 0;
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++) {
            double got = 0;
            weft_tensor_get(tr, INTS(i, j), &got);
            mismatches += got != (ref_u32(99, 0, i * 3 + j) < 0.5 ? 1 : 0);
        }
    is_int(mismatches, 0, "  element (i, j) is value i*3+j of the stream");
    weft_generator_destroy(g2);

    /* p as a tensor, broadcast */
    weft_tensor *p = from_doubles(INTS(1, 3), 2, (double[]){0, 0.5, 1});
    weft_tensor *m = empty_of(WEFT_FLOAT32, INTS(20000, 3), 2);
    ok(weft_bernoulli_tensor_ex_(m, p, g) == 0, "bernoulli_(p tensor [1, 3]) into [20000, 3]");
    v = values_of(m);
    double col[3] = {0, 0, 0};
    for (int64_t i = 0; i < 20000; i++)
        for (int c = 0; c < 3; c++)
            col[c] += v[i * 3 + c];
    ok(col[0] == 0 && col[2] == 20000, "  p=0 column all zeros, p=1 column all ones");
    is_double(col[1] / 20000, 0.5, 0.04, "  p=0.5 column mean");
    weft_tensor *out = NULL;
    weft_tensor *probs = from_doubles(INTS(2, 2), 2, (double[]){0, 1, 1, 0});
    ok(weft_bernoulli_ex(&out, probs, g) == 0 && values_of(keep(out)) &&
           values_of(out)[0] == 0 && values_of(out)[1] == 1 && values_of(out)[2] == 1 &&
           values_of(out)[3] == 0 && weft_tensor_dtype(out) == WEFT_FLOAT64,
       "bernoulli(probs): draws with self's probabilities, self's dtype");
    weft_tensor *e = empty_of(WEFT_FLOAT32, INTS(0, 3), 2);
    ok(weft_bernoulli_ex_(e, 0.5, g) == 0, "bernoulli_ of an empty tensor");

    /* bad input: nothing written */
    weft_tensor *z = NULL;
    weft_zeros(&z, INTS(4), 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(z);
    ok(weft_bernoulli_(z, 1.5) == WEFT_EINVAL, "bernoulli_(p=1.5) fails");
    like(weft_last_error(), "[0, 1]", "  the message gives the range");
    ok(weft_bernoulli_(z, NAN) == WEFT_EINVAL, "bernoulli_(p=nan) fails");
    weft_tensor *badp = from_doubles(INTS(4), 1, (double[]){0.5, 1, -0.25, 0});
    ok(weft_bernoulli_tensor_(z, badp) == WEFT_EINVAL, "a p tensor with -0.25 fails");
    like(weft_last_error(), "-0.25", "  the message names the value");
    weft_tensor *wrongp = from_doubles(INTS(3), 1, (double[]){0.5, 0.5, 0.5});
    ok(weft_bernoulli_tensor_(z, wrongp) == WEFT_ESHAPE, "a p tensor that does not broadcast");
    weft_tensor *s = NULL;
    weft_sum(&s, z, NULL, 0, false);
    double total = -1;
    weft_tensor_item(keep(s), &total);
    is_double(total, 0, 0, "  the failed calls wrote nothing");
    weft_tensor *ints = empty_of(WEFT_INT64, INTS(3), 1);
    ok(weft_bernoulli(&out, ints) == WEFT_EDTYPE, "bernoulli of int64 probabilities fails");
    weft_tensor *cplx = empty_of(WEFT_COMPLEX64, INTS(3), 1);
    ok(weft_bernoulli_(cplx, 0.5) == WEFT_EDTYPE, "bernoulli_ into complex64 is not supported");
    weft_generator_destroy(g);
    drop_all();
}

/* ------------------------------------------------------ randint, random_ */

static void test_randint(void)
{
    const int64_t n = 80000;
    weft_generator *g = seeded(7);
    weft_tensor *r = NULL;
    ok(weft_randint(&r, -3, 5, &n, 1, WEFT_INT64, WEFT_DEVICE_CPU, g) == 0,
       "randint(-3, 5, [80000])");
    keep(r);
    const int64_t *v = weft_tensor_data_ptr(r);
    int64_t mismatches = 0, counts[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        mismatches += v[i] != -3 + (int64_t)(ref_u64(7, 0, i) % 8);
        if (v[i] >= -3 && v[i] < 5)
            counts[v[i] + 3]++;
    }
    is_int(mismatches, 0, "  every value is the reference's (64 bits from block i/2)");
    double worst = 0;
    for (int k = 0; k < 8; k++)
        worst = fmax(worst, fabs(counts[k] / (double)n - 0.125));
    ok(worst < 0.01, "  each of the 8 values has frequency 1/8 (worst off by %.4f)", worst);

    static const struct {
        weft_dtype dt;
        int64_t low, high;
    } cases[] = {{WEFT_UINT8, 250, 256}, {WEFT_INT8, -128, -120}, {WEFT_INT16, -5, 5},
                 {WEFT_INT32, 1000000, 1000003}, {WEFT_FLOAT32, -16777216, -16777210},
                 {WEFT_FLOAT16, 2040, 2049}, {WEFT_BOOL, 0, 2}, {WEFT_FLOAT64, 0, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        weft_tensor *t = NULL;
        int rc = weft_randint(&t, cases[c].low, cases[c].high, INTS(500), 1, cases[c].dt,
                              WEFT_DEVICE_CPU, g);
        keep(t);
        const double *d = rc == 0 ? values_of(t) : NULL;
        bool inside = d != NULL, hit_low = false, hit_high = false;
        for (int i = 0; d && i < 500; i++) {
            inside &= d[i] >= cases[c].low && d[i] < cases[c].high && d[i] == floor(d[i]);
            hit_low |= d[i] == cases[c].low;
            hit_high |= d[i] == cases[c].high - 1;
        }
        ok(inside && hit_low && hit_high && weft_tensor_dtype(t) == cases[c].dt,
           "randint(%lld, %lld) as %s: integers in range, both ends drawn",
           (long long)cases[c].low, (long long)cases[c].high, weft_dtype_name(cases[c].dt));
    }
    /* random_ with to=None: the whole of uint8 */
    weft_tensor *u = empty_of(WEFT_UINT8, INTS(4000), 1);
    ok(weft_random_ex_(u, 0, NULL, g) == 0, "random_(from=0, to=None) on uint8");
    const double *d = values_of(u);
    bool saw0 = false, saw255 = false;
    for (int i = 0; i < 4000; i++) {
        saw0 |= d[i] == 0;
        saw255 |= d[i] == 255;
    }
    ok(saw0 && saw255, "  draws span 0..255");
    weft_tensor *full64 = empty_of(WEFT_INT64, INTS(4), 1);
    ok(weft_random_ex_(full64, INT64_MIN, NULL, g) == 0, "random_ over all of int64 (2^64 values)");
    /* bad bounds: clear errors, no tensor */
    weft_tensor *bad = (weft_tensor *)&n;
    ok(weft_randint(&bad, 5, 5, INTS(3), 1, WEFT_INT64, WEFT_DEVICE_CPU, g) == WEFT_EINVAL &&
           bad == NULL,
       "randint(5, 5) fails, out NULL");
    like(weft_last_error(), "low < high", "  the message says low < high");
    ok(weft_randint(&bad, 0, 300, INTS(3), 1, WEFT_UINT8, WEFT_DEVICE_CPU, g) == WEFT_EINVAL,
       "randint(0, 300) as uint8 fails");
    like(weft_last_error(), "out of bounds for uint8", "  the message names the dtype");
    ok(weft_randint(&bad, -129, 0, INTS(3), 1, WEFT_INT8, WEFT_DEVICE_CPU, g) == WEFT_EINVAL,
       "randint(-129, 0) as int8 fails");
    ok(weft_randint(&bad, 0, 3, INTS(3), 1, WEFT_COMPLEX64, WEFT_DEVICE_CPU, g) == WEFT_EDTYPE,
       "randint as complex64 is not supported");
    weft_generator_destroy(g);
    drop_all();
}

/* ------------------------------------------------------------- randperm */

static bool is_permutation(const weft_tensor *t, int64_t n)
{
    const double *v = values_of(t);
    if (!v || weft_tensor_numel(t) != n)
        return false;
    char *seen = calloc((size_t)n + 1, 1);
    bool good = true;
    for (int64_t i = 0; i < n && good; i++) {
        int64_t k = (int64_t)v[i];
        good = v[i] == (double)k && k >= 0 && k < n && !seen[k];
        if (good)
            seen[k] = 1;
    }
    free(seen);
    return good;
}

static void test_randperm(void)
{
    weft_generator *g = seeded(42);
    weft_tensor *p = NULL, *q = NULL;
    ok(weft_randperm(&p, 1000, WEFT_INT64, WEFT_DEVICE_CPU, g) == 0 && is_permutation(keep(p), 1000),
       "randperm(1000) is a permutation of 0..999");
    int64_t fixed = 0;
    for (int64_t i = 0; i < 1000; i++)
        fixed += ((int64_t *)weft_tensor_data_ptr(p))[i] == i;
    ok(fixed < 10, "  it is shuffled (%lld fixed points)", (long long)fixed);
    weft_generator_set_seed(g, 42);
    weft_randperm(&q, 1000, WEFT_INT64, WEFT_DEVICE_CPU, g);
    ok(memcmp(weft_tensor_data_ptr(keep(q)), weft_tensor_data_ptr(p), 1000 * sizeof(int64_t)) == 0,
       "  the same seed gives the same permutation");
    static const weft_dtype dts[] = {WEFT_INT32, WEFT_FLOAT32, WEFT_UINT8, WEFT_FLOAT16, WEFT_INT16};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        weft_tensor *t = NULL;
        ok(weft_randperm(&t, 200, dts[d], WEFT_DEVICE_CPU, g) == 0 && is_permutation(keep(t), 200) &&
               weft_tensor_dtype(t) == dts[d],
           "randperm(200) as %s", weft_dtype_name(dts[d]));
    }
    ok(weft_randperm(&p, 0, WEFT_INT64, WEFT_DEVICE_CPU, g) == 0 && weft_tensor_numel(keep(p)) == 0,
       "randperm(0) is empty");
    ok(weft_randperm(&p, 1, WEFT_INT64, WEFT_DEVICE_CPU, g) == 0 && is_permutation(keep(p), 1),
       "randperm(1) is [0]");
    /* every permutation of 3 about equally often */
    int counts[6] = {0};
    for (int trial = 0; trial < 6000; trial++) {
        weft_tensor *t = NULL;
        weft_randperm(&t, 3, WEFT_INT64, WEFT_DEVICE_CPU, g);
        const int64_t *v = weft_tensor_data_ptr(t);
        counts[v[0] * 2 + (v[1] > v[2])]++;
        weft_tensor_release(t);
    }
    int worst = 0;
    for (int k = 0; k < 6; k++)
        worst = abs(counts[k] - 1000) > worst ? abs(counts[k] - 1000) : worst;
    ok(worst < 150, "the 6 permutations of 3 are equally likely (worst off by %d of 1000)", worst);
    /* randperm_out resizes an empty out, refuses a wrong shape */
    weft_tensor *o = empty_of(WEFT_INT64, INTS(0), 1);
    ok(weft_randperm_out_ex(o, 5, g) == 0 && is_permutation(o, 5), "randperm_out resizes an empty out");
    weft_tensor *o2 = empty_of(WEFT_INT64, INTS(4), 1);
    ok(weft_randperm_out_ex(o2, 5, g) == WEFT_ESHAPE, "randperm_out into a [4] out fails");
    ok(weft_randperm(&p, -1, WEFT_INT64, WEFT_DEVICE_CPU, g) == WEFT_EINVAL, "randperm(-1) fails");
    ok(weft_randperm(&p, 300, WEFT_UINT8, WEFT_DEVICE_CPU, g) == WEFT_EINVAL && p == NULL,
       "randperm(300) as uint8 fails");
    like(weft_last_error(), "too large for uint8", "  the message says why");
    ok(weft_randperm(&p, 3, WEFT_BOOL, WEFT_DEVICE_CPU, g) == WEFT_EDTYPE, "randperm as bool fails");
    weft_generator_destroy(g);
    drop_all();
}

/* ---------------------------------------------------------- multinomial */

static void test_multinomial(void)
{
    weft_generator *g = seeded(5);
    weft_tensor *probs = from_doubles(INTS(4), 1, (double[]){0.1, 0, 0.6, 0.3});
    weft_tensor *s = NULL;
    const int64_t n = 100000;
    ok(weft_multinomial_ex(&s, probs, n, true, g) == 0 && weft_tensor_dtype(keep(s)) == WEFT_INT64 &&
           weft_tensor_ndim(s) == 1 && weft_tensor_size(s, 0) == n,
       "multinomial(1-D, 100000, replacement): int64 [100000]");
    const int64_t *v = weft_tensor_data_ptr(s);
    int64_t counts[4] = {0}, outside = 0;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] > 3)
            outside++;
        else
            counts[v[i]]++;
    }
    ok(outside == 0 && counts[1] == 0, "  the zero-probability class is never drawn");
    ok(fabs(counts[0] / (double)n - 0.1) < 0.01 && fabs(counts[2] / (double)n - 0.6) < 0.01 &&
           fabs(counts[3] / (double)n - 0.3) < 0.01,
       "  frequencies match p (%.3f %.3f %.3f)", counts[0] / (double)n, counts[2] / (double)n,
       counts[3] / (double)n);
    /* no rows: any sample count gives an empty result (the work per row
     * was K + samples, which overflowed int64 here) */
    weft_tensor *none = NULL;
    weft_empty(&none, INTS(0, 3), 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(none);
    ok(weft_multinomial_ex(&s, none, INT64_MAX, true, g) == 0 && weft_tensor_ndim(keep(s)) == 2 &&
           weft_tensor_size(s, 0) == 0 && weft_tensor_size(s, 1) == INT64_MAX,
       "multinomial of 0 rows, 2^63-1 samples: an empty [0, 2^63-1] result");
    /* unnormalised weights, float32, non-contiguous rows */
    weft_tensor *w = from_doubles(INTS(3, 2), 2, (double[]){1, 0, 3, 0, 0, 4}), *wt = NULL, *w32 = NULL;
    weft_to_dtype(&w32, w, WEFT_FLOAT32);
    weft_transpose(&wt, keep(w32), 0, 1); /* [2, 3]: rows {1, 3, 0} and {0, 0, 4} */
    keep(wt);
    ok(weft_multinomial_ex(&s, wt, 3000, true, g) == 0 && weft_tensor_size(keep(s), 0) == 2,
       "multinomial of a transposed float32 [2, 3]: weights need not add up to 1");
    v = weft_tensor_data_ptr(s);
    int64_t c0 = 0, row1_bad = 0, zero_drawn = 0;
    for (int i = 0; i < 3000; i++) {
        c0 += v[i] == 0;
        zero_drawn += v[i] == 2;
        row1_bad += v[3000 + i] != 2;
    }
    ok(zero_drawn == 0 && row1_bad == 0, "  rows keep to their own non-zero classes");
    is_double(c0 / 3000.0, 0.25, 0.15, "  class 0 of row 0 has frequency 1/4");

    /* without replacement */
    weft_tensor *pr = from_doubles(INTS(3, 5), 2,
                                   (double[]){0.2, 0.2, 0.2, 0.2, 0.2, 0, 1, 0, 2, 3, 5, 0, 1, 0, 0});
    ok(weft_multinomial_ex(&s, pr, 2, false, g) == 0 && weft_tensor_size(keep(s), 1) == 2,
       "multinomial([3, 5], 2) without replacement");
    v = weft_tensor_data_ptr(s);
    ok(v[0] != v[1] && v[2] != v[3] && v[4] != v[5], "  no repeats within a row");
    ok((v[4] == 0 && v[5] == 2) || (v[4] == 2 && v[5] == 0),
       "  a row with exactly 2 non-zero classes gives those two");
    ok(v[2] != 0 && v[2] != 2 && v[3] != 0 && v[3] != 2, "  zero-probability classes are skipped");
    ok(weft_multinomial_ex(&s, pr, 3, false, g) == WEFT_EINVAL,
       "3 samples without replacement from a row with 2 non-zero classes fails");
    like(weft_last_error(), "not enough non-negative category", "  the message says so");
    /* all five of a uniform row: a permutation */
    weft_tensor *unif = from_doubles(INTS(5), 1, (double[]){1, 1, 1, 1, 1});
    ok(weft_multinomial_ex(&s, unif, 5, false, g) == 0 && is_permutation(keep(s), 5),
       "all 5 of 5 without replacement: a permutation");
    /* the first draw without replacement follows p: 20000 rows of one sample */
    weft_tensor *rowp = from_doubles(INTS(1, 3), 2, (double[]){0.5, 0.25, 0.25}), *many = NULL;
    weft_expand(&many, rowp, INTS(20000, 3), 2);
    keep(many);
    ok(weft_multinomial_ex(&s, many, 1, false, g) == 0, "20000 rows (expanded), one sample each");
    v = weft_tensor_data_ptr(keep(s));
    int64_t first = 0;
    for (int i = 0; i < 20000; i++)
        first += v[i] == 0;
    is_double(first / 20000.0, 0.5, 0.05, "  class 0 first half of the time");

    /* bad input */
    weft_tensor *bad = (weft_tensor *)&n;
    static const struct {
        double p[3];
        const char *why, *needle;
    } bads[] = {{{0.5, -0.1, 0.6}, "a negative probability", "element < 0"},
                {{0.5, NAN, 0.6}, "a NaN probability", "nan"},
                {{0.5, INFINITY, 0.6}, "an infinite probability", "inf"},
                {{0, 0, 0}, "all zero", "sum of probabilities <= 0"}};
    for (size_t b = 0; b < sizeof bads / sizeof *bads; b++) {
        weft_tensor *t = from_doubles(INTS(3), 1, bads[b].p);
        ok(weft_multinomial_ex(&bad, t, 1, true, g) == WEFT_EINVAL && bad == NULL,
           "multinomial with %s fails, out NULL", bads[b].why);
        like(weft_last_error(), bads[b].needle, "  the message says '%s'", bads[b].needle);
    }
    ok(weft_multinomial(&bad, probs, 5, false) == WEFT_EINVAL, "5 of 4 without replacement fails");
    like(weft_last_error(), "n_sample > prob_dist.size(-1)", "  the message says so");
    ok(weft_multinomial(&bad, probs, 0, false) == WEFT_EINVAL, "0 samples fails");
    weft_tensor *cube = empty_of(WEFT_FLOAT32, INTS(2, 2, 2), 3);
    ok(weft_multinomial(&bad, cube, 1, false) == WEFT_ESHAPE, "a 3-D distribution fails");
    weft_tensor *ints = empty_of(WEFT_INT64, INTS(3), 1);
    ok(weft_multinomial(&bad, ints, 1, false) == WEFT_EDTYPE, "an int64 distribution fails");
    weft_generator_destroy(g);
    drop_all();
}

/* ------------------------------------------------- thread-count invariance */

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_tensor(uint64_t h, const weft_tensor *t)
{
    return fnv(h, weft_tensor_data_ptr(t), (size_t)weft_tensor_numel(t) * weft_dtype_size(weft_tensor_dtype(t)));
}

/* Large enough draws that the pool splits them (more than one grain). */
static uint64_t digest(void)
{
    weft_generator *g = seeded(2024);
    uint64_t h = 14695981039346656037ULL;
    weft_tensor *t = empty_of(WEFT_FLOAT32, INTS(200003), 1);
    weft_bernoulli_ex_(t, 0.4, g);
    h = hash_tensor(h, t);
    weft_tensor *r = NULL;
    weft_randint(&r, -1000, 1000, INTS(150001), 1, WEFT_INT32, WEFT_DEVICE_CPU, g);
    h = hash_tensor(h, keep(r));
    weft_tensor *p = NULL, *s = NULL;
    weft_rand(&p, INTS(5000, 40), 2, WEFT_FLOAT64, WEFT_DEVICE_CPU, g);
    weft_multinomial_ex(&s, keep(p), 30, true, g);
    h = hash_tensor(h, keep(s));
    weft_multinomial_ex(&s, p, 30, false, g);
    h = hash_tensor(h, keep(s));
    weft_randperm(&s, 70000, WEFT_INT64, WEFT_DEVICE_CPU, g);
    h = hash_tensor(h, keep(s));
    weft_generator_destroy(g);
    drop_all();
    return h;
}

/* The digest of a run with `threads` threads, in this run's CPU variant. */
static bool digest_with_threads(int threads, uint64_t *out)
{
    char cmd[4400], env[64];
    snprintf(env, sizeof env, "WEFT_NUM_THREADS=%d", threads);
    if (!rerun_command(cmd, sizeof cmd, env, "--digest"))
        return false;
    FILE *f = popen(cmd, "r");
    if (!f)
        return false;
    unsigned long long d = 0;
    bool got = fscanf(f, "%llx", &d) == 1;
    got &= pclose(f) == 0;
    *out = d;
    return got;
}

static void test_threads(void)
{
    uint64_t here = digest(), one = 0, two = 0;
    bool a = digest_with_threads(1, &one), b = digest_with_threads(2, &two);
    ok(a && b, "the program ran itself with WEFT_NUM_THREADS=1 and 2");
    ok(one == two && one == here,
       "bernoulli_, randint, multinomial (both kinds), randperm: the same numbers with 1 and 2 "
       "threads (%016llx %016llx, here %016llx)",
       (unsigned long long)one, (unsigned long long)two, (unsigned long long)here);
}

int main(int argc, char **argv)
{
    int loaded = weft_load_default_plugins();
    if (argc > 1 && !strcmp(argv[1], "--digest")) {
        if (loaded < 1)
            return 1;
        printf("%016llx\n", (unsigned long long)digest());
        return 0;
    }
    if (!ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return done_testing();
    test_bernoulli();
    test_randint();
    test_randperm();
    test_multinomial();
    test_threads();
    return done_testing();
}
