/* tests/test_vec_math.c — the vectorised float32 paths of the CPU plugin
 * (backends/cpu/vec_math.h and its users): exp, sigmoid and gelu on long
 * contiguous tensors whose values span the polynomials' range and beyond,
 * with NaN, infinities, overflow and underflow placed inside vector blocks
 * and in the tail; dense ordered sweeps (whole blocks inside gelu's
 * cheaper |x| <= 3 path, beyond it, exp's whole range); softmax,
 * log_softmax and cross_entropy rows; and sum over the last dim — each
 * against a float64 reference written here. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

enum { N = 1003 }; /* not a multiple of 8: a scalar tail */

static uint64_t lcg = 777;
static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

static weft_tensor *f32(const int64_t *sizes, int nd, float *v)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_FLOAT32, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), v, (size_t)weft_tensor_numel(t) * sizeof(float));
    return keep(t);
}

static double ref_exp(double x) { return exp(x); }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_erfc(double x) { return erfc(x); }

/* relative error against the float64 value, with float32's own limits:
 * results below the smallest normal are compared absolutely */
static bool close32(double got, double want, double rel)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= rel * fabs(want) + 1e-37;
}

static void test_unary(void)
{
    static float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)uniform(-100, 100);
    for (int i = 0; i < 300; i++) /* most values where the polynomials work */
        x[i] = (float)uniform(-9, 9);
    x[17] = NAN, x[40] = INFINITY, x[41] = -INFINITY, x[100] = 88.5f, x[101] = -90.0f;
    x[N - 1] = NAN, x[N - 2] = -0.0f, x[N - 3] = 1e-30f;
    int64_t n = N;
    weft_tensor *t = f32(&n, 1, x);
    struct {
        const char *name;
        int (*fn)(weft_tensor **, const weft_tensor *);
        double (*ref)(double);
        double rel;
    } cases[] = {{"exp", weft_exp, ref_exp, 4e-7},
                 {"sigmoid", weft_sigmoid, ref_sigmoid, 6e-7},
                 /* for x < 0, gelu ~ erfc(|x|/sqrt 2), whose relative
                  * sensitivity to x is ~x: float32's rounding of x/sqrt 2
                  * alone costs ~x^2 ulp (scaled below) */
                 {"gelu", weft_gelu, ref_gelu, 4e-7}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        weft_tensor *y = NULL;
        int rc = cases[c].fn(&y, t);
        keep(y);
        int bad = rc != 0, at = -1;
        const float *p = rc == 0 ? weft_tensor_data_ptr(y) : NULL;
        for (int i = 0; p && i < N; i++) {
            double rel = cases[c].rel * (cases[c].fn == weft_gelu ? 1 + (double)x[i] * x[i] : 1);
            if (!close32(p[i], (float)cases[c].ref((double)x[i]), rel)) {
                bad++;
                at = at < 0 ? i : at;
            }
        }
        if (!ok(bad == 0, "float32 %s of %d values (NaN, inf, overflow, underflow inside "
                "vector blocks) matches float64 within %g", cases[c].name, N, cases[c].rel))
            diag("%d wrong, first at %d: %s(%.9g) = %.9g, expected %.9g", bad, at,
                 cases[c].name, x[at], p ? p[at] : 0.0, cases[c].ref((double)x[at]));
        if (p)
            ok(!!signbit(p[N - 2]) == (cases[c].fn == weft_gelu),
               "  the sign of %s(-0) is kept where it should be", cases[c].name);
    }
}

/* -0 inside a block the polynomials take (every |x| <= 3, 64 values, so
 * gelu's group path runs): gelu(-0) is -0, as x Phi(x) and PyTorch give. */
static void test_negative_zero_in_vector_block(void)
{
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i - 32) / 16.0f;
    x[5] = -0.0f;
    int64_t n = 64;
    weft_tensor *y = NULL;
    int rc = weft_gelu(&y, f32(&n, 1, x));
    keep(y);
    const float *p = rc == 0 ? weft_tensor_data_ptr(y) : NULL;
    ok(p && p[5] == 0.0f && signbit(p[5]) && !signbit(p[32]),
       "gelu(-0) in a vector block is -0 (and gelu(+0) is +0)");
}

/* Dense sweeps, in order, so that whole vector blocks fall in one range:
 * gelu's |x| <= 3 blocks (the division-free erfc), the blocks beyond
 * (Numerical Recipes' erfc) down to -9 where the result is ~1e-19 (the
 * relative error stays bounded for negative inputs, where x Phi(x) is
 * tiny), and exp over its whole vector range (n rounded to nearest). */
static void test_dense(void)
{
    enum { M = 60000 };
    static float x[M];
    struct {
        const char *name;
        int (*fn)(weft_tensor **, const weft_tensor *);
        double (*ref)(double);
        double lo, hi, rel; /* gelu's and erfc's bound is rel (1 + x^2), as above */
    } sweeps[] = {{"gelu on [-3, 3]", weft_gelu, ref_gelu, -3, 3, 2.5e-7},
                  {"gelu on [-9, -3]", weft_gelu, ref_gelu, -9, -3, 4e-7},
                  {"gelu on [3, 9]", weft_gelu, ref_gelu, 3, 9, 4e-7},
                  {"exp on [-87, 88]", weft_exp, ref_exp, -87, 88, 2.5e-7},
                  /* erfc's error grows as a^2 too (exp of a rounded a^2) */
                  {"erfc on [-2.125, 2.125]", weft_erfc, ref_erfc, -2.125, 2.125, 2e-7},
                  {"erfc on [-6, -2.125]", weft_erfc, ref_erfc, -6, -2.125, 2e-7},
                  {"sigmoid on [-20, 20]", weft_sigmoid, ref_sigmoid, -20, 20, 4e-7}};
    for (size_t c = 0; c < sizeof sweeps / sizeof *sweeps; c++) {
        for (int i = 0; i < M; i++)
            x[i] = (float)(sweeps[c].lo + (sweeps[c].hi - sweeps[c].lo) * i / (M - 1));
        int64_t n = M;
        weft_tensor *t = f32(&n, 1, x), *y = NULL;
        int rc = sweeps[c].fn(&y, t);
        keep(y);
        const float *p = rc == 0 ? weft_tensor_data_ptr(y) : NULL;
        double worst = 0;
        int at = 0;
        for (int i = 0; p && i < M; i++) {
            double want = sweeps[c].ref((double)x[i]);
            double scale = sweeps[c].fn == weft_gelu || sweeps[c].fn == weft_erfc
                               ? 1 + (double)x[i] * x[i]
                               : 1;
            double err = fabs(p[i] - want) / (fabs(want) + 1e-300) / scale;
            if (err > worst)
                worst = err, at = i;
        }
        if (!ok(p && worst <= sweeps[c].rel, "float32 %s (%d values in order): relative error "
                "%.3g within %g", sweeps[c].name, M, worst, sweeps[c].rel) && p)
            diag("worst at x = %.9g: %.9g, expected %.9g", x[at], p[at],
                 sweeps[c].ref((double)x[at]));
    }
}

static void test_rows(void)
{
    enum { ROWS = 6, D = 1001 };
    static float x[ROWS * D];
    for (int i = 0; i < ROWS * D; i++)
        x[i] = (float)uniform(-30, 30);
    x[1 * D + 5] = -1000; /* exp underflows to 0 */
    x[2 * D + 999] = NAN; /* a NaN row: all NaN */
    for (int i = 0; i < D; i++)
        x[3 * D + i] = -INFINITY; /* an all -inf row: NaN, as in PyTorch */
    x[4 * D + 3] = INFINITY;
    int64_t sizes[2] = {ROWS, D};
    weft_tensor *t = f32(sizes, 2, x), *y = NULL, *ly = NULL, *s = NULL;
    int rc = weft_softmax(&y, t, -1);
    rc |= weft_log_softmax(&ly, t, -1);
    rc |= weft_sum(&s, t, (const int64_t[]){-1}, 1, false);
    keep(y), keep(ly), keep(s);
    is_int(rc, 0, "softmax, log_softmax and sum of [%d, %d] float32 run", ROWS, D);
    if (rc != 0)
        return;
    const float *py = weft_tensor_data_ptr(y), *pl = weft_tensor_data_ptr(ly);
    const float *ps = weft_tensor_data_ptr(s);
    int bad_soft = 0, bad_log = 0, bad_sum = 0;
    for (int r = 0; r < ROWS; r++) {
        const float *row = x + r * D;
        double mx = -INFINITY, sum = 0, plain = 0;
        bool nan = false;
        for (int i = 0; i < D; i++) {
            nan |= isnan(row[i]);
            mx = row[i] > mx ? row[i] : mx;
            plain += row[i];
        }
        for (int i = 0; i < D; i++)
            sum += exp(row[i] - mx);
        for (int i = 0; i < D; i++) {
            double want = nan || isinf(mx) ? NAN : exp(row[i] - mx) / sum;
            double lwant = nan || isinf(mx) ? NAN : row[i] - mx - log(sum);
            if (r == 4) /* +inf in the row: PyTorch gives NaN there and 0 elsewhere */
                continue;
            /* x - max rounds in float32 in both libraries: relative error
             * up to |x - max| ulp in exp, absolute in log_softmax */
            double tol = 2e-7 * (1 + fabs(row[i] - mx));
            bad_soft += !close32(py[r * D + i], want, tol) && !(fabs(py[r * D + i] - want) < 1e-30);
            bool lbad = !(fabs(pl[r * D + i] - lwant) <= tol * (1 + fabs(lwant))) &&
                        !(isnan(lwant) && isnan(pl[r * D + i]));
            if (lbad && bad_log++ == 0)
                diag("log_softmax row %d element %d: got %.9g, expected %.9g", r, i,
                     pl[r * D + i], lwant);
        }
        bad_sum += !close32(ps[r], plain, 1e-6) && !(isnan(plain) && isnan(ps[r]));
    }
    is_int(bad_soft, 0, "softmax rows (with underflow, NaN, all -inf) match float64");
    is_int(bad_log, 0, "log_softmax rows match float64");
    is_int(bad_sum, 0, "sum over the last dim matches float64");
    /* cross_entropy of finite rows against log-sum-exp in float64 */
    weft_tensor *fin = NULL, *loss = NULL;
    int64_t two[2] = {2, D};
    fin = f32(two, 2, x); /* rows 0 and 1: finite */
    int64_t tv[2] = {7, 5};
    weft_tensor *target = keep_int64((const int64_t[]){2}, 1, tv);
    rc = weft_cross_entropy(&loss, fin, target, NULL, "none", -100, 0.0);
    keep(loss);
    double want[2];
    for (int r = 0; r < 2; r++) {
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < D; i++)
            mx = x[r * D + i] > mx ? x[r * D + i] : mx;
        for (int i = 0; i < D; i++)
            sum += exp(x[r * D + i] - mx);
        want[r] = mx + log(sum) - x[r * D + tv[r]];
    }
    ok(rc == 0 && close32(((float *)weft_tensor_data_ptr(loss))[0], want[0], 2e-6) &&
           close32(((float *)weft_tensor_data_ptr(loss))[1], want[1], 2e-6),
       "cross_entropy of float32 rows matches float64 log-sum-exp");
}

/* cross_entropy_backward's float32 rows (mean reduction): p_c - [c == t]
 * over the batch, against float64, for class counts below, at and off the
 * vector width, with a row that underflows, a -inf logit and a NaN row. */
static void test_cross_entropy_backward(void)
{
    const int counts[] = {3, 8, 10, 17};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        enum { B = 5 };
        int C = counts[k];
        float x[B * 17];
        int64_t tv[B];
        for (int i = 0; i < B * C; i++)
            x[i] = (float)uniform(-20, 20);
        for (int r = 0; r < B; r++)
            tv[r] = r % C;
        x[1 * C + C - 1] = -200; /* exp underflows to 0 */
        x[2 * C + 1] = -INFINITY;
        x[4 * C + 0] = NAN; /* a NaN row: NaN gradients */
        int64_t sizes[2] = {B, C};
        weft_tensor *logits = f32(sizes, 2, x), *grad = NULL, *one = NULL;
        weft_tensor *target = keep_int64((const int64_t[]){B}, 1, tv);
        weft_ones(&one, NULL, 0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        keep(one);
        int rc = weft_cross_entropy_backward(&grad, one, logits, target, NULL, "mean", -100, 0.0);
        keep(grad);
        int bad = 0;
        for (int r = 0; rc == 0 && r < B; r++) {
            const float *row = x + r * C;
            double mx = -INFINITY, sum = 0;
            bool nan = false;
            for (int c = 0; c < C; c++)
                nan |= isnan(row[c]), mx = row[c] > mx ? row[c] : mx;
            for (int c = 0; c < C; c++)
                sum += exp((double)row[c] - mx);
            for (int c = 0; c < C; c++) {
                double want = nan ? NAN : (exp((double)row[c] - mx) / sum - (c == tv[r])) / B;
                float got = ((const float *)weft_tensor_data_ptr(grad))[r * C + c];
                bool fine = nan ? isnan(got) : fabs(got - want) <= 1e-6 * (1 + fabs(want));
                if (!fine && bad++ == 0)
                    diag("C %d row %d class %d: got %.9g, expected %.9g", C, r, c, got, want);
            }
        }
        ok(rc == 0 && bad == 0, "cross_entropy_backward of float32 rows of %d classes matches "
           "float64 (underflow, -inf, NaN rows)", C);
    }
}

int main(void)
{
    if (weft_load_default_plugins() <= 0)
        skip_all("no CPU plugin: %s", weft_last_error());
    test_unary();
    test_negative_zero_in_vector_block();
    test_dense();
    test_rows();
    test_cross_entropy_backward();
    drop_all();
    return done_testing();
}
