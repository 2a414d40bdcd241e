/* tests/test_cpu_fastpaths.c — the CPU backend's fast paths against plain
 * references written here: max_pool2d with every window inside the plane
 * (2x2 stride 2, 3x3 strides 1 and 2, odd sizes, NaN, -inf and ties, and
 * the clipped general path beside it), large contiguous add_/add/mul_ with
 * alpha (over the pool) next to non-contiguous operands, products split
 * over the pool (mm, conv2d and its two gradients), threshold_backward
 * (relu's one-pass backward: values, broadcasting, promotion, errors,
 * gradcheck and gradgradcheck through relu), conv2d's tiles, channel
 * blocks and runs of images on shapes that cut them unevenly, and the
 * same bits with 1, 2 and 3 threads (the program runs itself with
 * WEFT_NUM_THREADS=1, 2 and 3, in its own CPU variant, and compares digests
 * of every result). */
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

static uint64_t lcg_state;

static double next_uniform(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* A float32 tensor of values in [-1, 1); a few values repeat (ties), when
 * asked. */
static weft_tensor *filled(const int64_t *sizes, int nd, uint64_t seed, bool ties)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_FLOAT32, WEFT_DEVICE_CPU) < 0)
        return NULL;
    lcg_state = seed;
    float *p = weft_tensor_data_ptr(t);
    int64_t n = weft_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        p[i] = ties ? (float)((int)(next_uniform() * 4)) / 4 : (float)next_uniform();
    return keep(t);
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_tensor(uint64_t h, const weft_tensor *t)
{
    if (!t)
        return h ^ 0xdeadULL;
    weft_tensor *c = NULL;
    if (weft_contiguous(&c, t) < 0)
        return h ^ 0xbeefULL;
    h = hash_bytes(h, weft_tensor_data_ptr(c),
                   (size_t)weft_tensor_numel(c) * weft_dtype_size(weft_tensor_dtype(c)));
    weft_tensor_release(c);
    return h;
}

/* ------------------------------------------------------------ max_pool2d */

/* The reference: PyTorch's rule (the first maximum, a NaN replaces
 * anything, so the last NaN wins), clipping padded windows. */
static bool pool_matches(const weft_tensor *x, const weft_tensor *y, const weft_tensor *ind,
                         int64_t k, int64_t s, int64_t pad)
{
    int nd = weft_tensor_ndim(x);
    int64_t H = weft_tensor_size(x, nd - 2), W = weft_tensor_size(x, nd - 1);
    int64_t OH = weft_tensor_size(y, nd - 2), OW = weft_tensor_size(y, nd - 1);
    int64_t planes = weft_tensor_numel(x) / (H * W);
    const float *xp = weft_tensor_data_ptr(x), *yp = weft_tensor_data_ptr(y);
    const int64_t *ip = weft_tensor_data_ptr(ind);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float best = -INFINITY;
                int64_t at = -1;
                for (int64_t ih = oh * s - pad; ih < oh * s - pad + k; ih++)
                    for (int64_t iw = ow * s - pad; iw < ow * s - pad + k; iw++) {
                        if (ih < 0 || iw < 0 || ih >= H || iw >= W)
                            continue;
                        float v = xp[p * H * W + ih * W + iw];
                        if (at < 0 || v > best || isnan(v)) {
                            best = v;
                            at = ih * W + iw;
                        }
                    }
                int64_t o = p * OH * OW + oh * OW + ow;
                bool same = isnan(best) ? isnan(yp[o]) : yp[o] == best;
                if (!same || ip[o] != at) {
                    diag("plane %lld (%lld, %lld): got %g at %lld, expected %g at %lld",
                         (long long)p, (long long)oh, (long long)ow, yp[o], (long long)ip[o],
                         best, (long long)at);
                    return false;
                }
            }
    return true;
}

/* 2x2 stride 2 max_pool2d of a random [sizes] input, then its backward
 * with index number `at` set to `bad`: whether the backward refuses it
 * with WEFT_ERANGE naming that index, and makes no gradient. */
static bool backward_refuses(const int64_t *sizes, bool ceil_mode, int64_t at, int64_t bad)
{
    weft_tensor *x = filled(sizes, 4, 9, false), *y = NULL, *ind = NULL, *gi = NULL;
    int rc = weft_max_pool2d_with_indices(&y, &ind, x, INTS(2, 2), 2, INTS(2, 2), 2, INTS(0, 0),
                                          2, INTS(1, 1), 2, ceil_mode);
    keep(y);
    keep(ind);
    if (rc == 0)
        ((int64_t *)weft_tensor_data_ptr(ind))[at] = bad;
    rc = rc == 0 ? weft_max_pool2d_with_indices_backward(&gi, y, x, ind) : rc;
    char want[64];
    snprintf(want, sizeof want, "index %lld ", (long long)bad);
    return rc == WEFT_ERANGE && gi == NULL && strstr(weft_last_error(), want);
}

static void test_max_pool(void)
{
    static const struct {
        int64_t n, c, h, w, k, s, pad;
        bool ceil, ties;
    } cases[] = {
        {4, 3, 28, 28, 2, 2, 0, false, false}, /* the CNN's: windows inside */
        {3, 5, 14, 14, 2, 2, 0, false, true},  /* the CNN's second: 7 outputs a row */
        {1, 1, 16, 16, 2, 2, 0, false, true},  /* 8 outputs a row: one whole block */
        {2, 1, 6, 34, 2, 2, 0, false, false},  /* 17: two whole blocks and one more */
        {1, 1, 2, 2, 2, 2, 0, false, false},   /* one window */
        {2, 5, 15, 13, 2, 2, 0, false, true},  /* odd sizes drop a row and column */
        {2, 3, 11, 9, 3, 1, 0, false, true},   /* 3x3 stride 1 */
        {2, 3, 12, 10, 3, 2, 0, false, false}, /* 3x3 stride 2 */
        {1, 2, 15, 13, 2, 2, 0, true, true},   /* ceil_mode: the last window is clipped */
        {1, 2, 10, 10, 3, 2, 1, false, false}, /* padded: clipped borders, inside middle */
        {2, 3, 13, 12, 3, 2, 1, false, true},  /* odd and even sizes, padded */
        {2, 3, 9, 11, 3, 1, 1, false, true},   /* 3x3 stride 1 padded */
        {2, 3, 9, 11, 2, 2, 1, false, false},  /* 2x2 stride 2 padded */
        {1, 2, 13, 12, 3, 2, 1, true, false},  /* ceil_mode and padding */
        {1, 1, 2, 3, 3, 2, 1, false, false},   /* no window inside at all */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        weft_tensor *x = filled(INTS(cases[i].n, cases[i].c, cases[i].h, cases[i].w), 4,
                                100 + i, cases[i].ties);
        float *xp = weft_tensor_data_ptr(x);
        xp[5] = NAN; /* NaN, -inf and +inf somewhere in the first planes */
        xp[7] = NAN;
        xp[cases[i].w + 1] = -INFINITY;
        xp[2 * cases[i].w + 3] = INFINITY;
        int64_t k = cases[i].k, s = cases[i].s, pad = cases[i].pad;
        weft_tensor *y = NULL, *ind = NULL;
        int rc = weft_max_pool2d_with_indices(&y, &ind, x, INTS(k, k), 2, INTS(s, s), 2,
                                              INTS(pad, pad), 2, INTS(1, 1), 2, cases[i].ceil);
        keep(y);
        keep(ind);
        ok(rc == 0 && pool_matches(x, y, ind, k, s, pad),
           "max_pool2d %lldx%lld stride %lld pad %lld%s on %lldx%lld: values and indices as "
           "the reference", (long long)k, (long long)k, (long long)s, (long long)pad,
           cases[i].ceil ? " ceil_mode" : "", (long long)cases[i].h, (long long)cases[i].w);
    }
    /* NaN at every position of a small plane in turn: the reference's pick */
    bool all_nan_ok = true;
    for (int at = 0; at < 7 * 6 && all_nan_ok; at++) {
        weft_tensor *x = filled(INTS(1, 1, 7, 6), 4, 200 + at, true);
        ((float *)weft_tensor_data_ptr(x))[at] = NAN;
        for (int pad = 0; pad < 2 && all_nan_ok; pad++) {
            weft_tensor *y = NULL, *ind = NULL;
            int rc = weft_max_pool2d_with_indices(&y, &ind, x, INTS(3, 3), 2, INTS(2, 2), 2,
                                                  INTS(pad, pad), 2, INTS(1, 1), 2, false);
            all_nan_ok = rc == 0 && pool_matches(x, keep(y), keep(ind), 3, 2, pad);
        }
    }
    ok(all_nan_ok, "max_pool2d 3x3 stride 2: a NaN anywhere, padded or not, as the reference");
    /* the backward refuses indices outside the plane, naming the index */
    ok(backward_refuses(INTS(1, 1, 4, 4), false, 2, 16),
       "max_pool2d backward refuses an index past the plane: %s", weft_last_error());
    ok(backward_refuses(INTS(1, 1, 4, 4), false, 2, -1),
       "max_pool2d backward refuses a negative index: %s", weft_last_error());
    /* the 2x2 path's offset from its block is computed unsigned: INT64_MIN
     * minus the block's start overflowed int64 (UBSan) */
    ok(backward_refuses(INTS(1, 1, 4, 4), false, 2, INT64_MIN),
       "max_pool2d backward refuses index INT64_MIN: %s", weft_last_error());
    /* the planes check their indices on the pool, each before its stores:
     * a bad one in the last row of the last of many planes, far past the
     * plane (a store there would land outside the output), or just past it */
    const int64_t last_row = 64 * 16 * 14 * 14 - 3;
    ok(backward_refuses(INTS(64, 16, 28, 28), false, last_row, 28 * 28),
       "max_pool2d backward refuses index 784 in the last plane of 1024: %s", weft_last_error());
    ok(backward_refuses(INTS(64, 16, 28, 28), false, last_row, (int64_t)1 << 40),
       "max_pool2d backward refuses index 2^40 in the last plane of 1024: %s", weft_last_error());
    /* ceil_mode with an odd height: the last row of blocks is one row high,
     * and an index one row below it lies past the plane (here in the next
     * plane's memory, or past the last plane's); output [1, 2, 2, 2], each
     * plane's element 2 the first window of its last row */
    for (int64_t plane = 0; plane < 2; plane++)
        ok(backward_refuses(INTS(1, 2, 3, 4), true, plane * 4 + 2, 3 * 4),
           "max_pool2d backward ceil_mode refuses an index below a one-row block (plane %lld): "
           "%s", (long long)plane, weft_last_error());
    /* a plane of -inf only: the window's first element is the index */
    weft_tensor *x = filled(INTS(1, 1, 4, 4), 4, 7, false);
    float *xp = weft_tensor_data_ptr(x);
    for (int i = 0; i < 16; i++)
        xp[i] = -INFINITY;
    weft_tensor *y = NULL, *ind = NULL;
    int rc = weft_max_pool2d_with_indices(&y, &ind, x, INTS(2, 2), 2, INTS(2, 2), 2, INTS(0, 0),
                                          2, INTS(1, 1), 2, false);
    keep(y);
    keep(ind);
    ok(rc == 0 && pool_matches(x, y, ind, 2, 2, 0) &&
           ((const int64_t *)weft_tensor_data_ptr(ind))[3] == 10,
       "max_pool2d over -inf only picks each window's first element");
    drop_all();
}

/* max_pool2d's backward against the plain scatter (zero the planes, add
 * each gradient at its index): 2x2 stride 2 windows write their disjoint
 * blocks directly; overlapping windows and indices given by hand (outside
 * their block, repeated) take the scatter.  Bits compared, gradients with
 * NaN, -0 (the scatter makes it +0) and ties in the input. */
static bool pool_backward_matches(const weft_tensor *gi, const weft_tensor *go,
                                  const weft_tensor *ind, int64_t H, int64_t W)
{
    const int64_t n = weft_tensor_numel(go), OHW = weft_tensor_numel(go) /
                      (weft_tensor_numel(gi) / (H * W));
    float *want = calloc((size_t)weft_tensor_numel(gi), sizeof *want);
    const float *g = weft_tensor_data_ptr(go);
    const int64_t *ip = weft_tensor_data_ptr(ind);
    for (int64_t o = 0; o < n; o++)
        want[o / OHW * H * W + ip[o]] += g[o];
    bool same = memcmp(want, weft_tensor_data_ptr(gi),
                       (size_t)weft_tensor_numel(gi) * sizeof *want) == 0;
    free(want);
    return same;
}

static void test_max_pool_backward(void)
{
    static const struct {
        int64_t n, c, h, w, k, s, pad;
        bool ceil;
    } cases[] = {
        {4, 3, 28, 28, 2, 2, 0, false}, /* the CNN's */
        {0, 3, 14, 14, 2, 2, 0, false}, /* n 0: a 3-D input, [C, H, W] */
        {1, 2, 15, 13, 2, 2, 0, false}, /* batch 1, odd sizes drop a row and column */
        {2, 2, 15, 13, 2, 2, 0, true},  /* ceil_mode: clipped last blocks */
        {1, 2, 14, 13, 2, 2, 0, true},  /* ceil_mode, only the columns clipped */
        {1, 1, 1, 5, 2, 2, 0, true},    /* one row */
        {2, 3, 12, 10, 3, 2, 0, false}, /* 3x3 stride 2: the output size of 2x2 tiles */
        {2, 3, 9, 11, 2, 2, 1, false},  /* padded */
        {2, 3, 11, 9, 3, 1, 0, false},  /* overlapping, stride 1 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t *shape = cases[i].n ? INTS(cases[i].n, cases[i].c, cases[i].h, cases[i].w)
                                          : INTS(cases[i].c, cases[i].h, cases[i].w);
        const int nd = cases[i].n ? 4 : 3;
        weft_tensor *x = filled(shape, nd, 300 + i, true);
        float *xp = weft_tensor_data_ptr(x);
        xp[3] = NAN;
        xp[cases[i].w] = NAN;
        int64_t k = cases[i].k, s = cases[i].s, pad = cases[i].pad;
        weft_tensor *y = NULL, *ind = NULL, *gi = NULL;
        int rc = weft_max_pool2d_with_indices(&y, &ind, x, INTS(k, k), 2, INTS(s, s), 2,
                                              INTS(pad, pad), 2, INTS(1, 1), 2, cases[i].ceil);
        keep(y);
        keep(ind);
        weft_tensor *go = rc == 0 ? filled(weft_tensor_sizes(y), nd, 400 + i, false) : NULL;
        if (go) {
            float *gp = weft_tensor_data_ptr(go);
            gp[0] = -0.0f;
            gp[weft_tensor_numel(go) - 1] = -0.0f;
            gp[weft_tensor_numel(go) / 2] = NAN;
        }
        rc = rc == 0 ? weft_max_pool2d_with_indices_backward(&gi, go, x, ind) : rc;
        keep(gi);
        ok(rc == 0 && pool_backward_matches(gi, go, ind, cases[i].h, cases[i].w),
           "max_pool2d backward %lldx%lld stride %lld pad %lld%s on %s%lldx%lld: the scatter's "
           "bits", (long long)k, (long long)k, (long long)s, (long long)pad,
           cases[i].ceil ? " ceil_mode" : "", cases[i].n ? "" : "3-D ", (long long)cases[i].h,
           (long long)cases[i].w);
        if (rc != 0 || k != 2 || s != 2 || pad != 0)
            continue;
        /* the same windows' indices moved by hand: the last one to element
         * 0, outside its block, then all of them there (gradients summed) */
        int64_t *ip = weft_tensor_data_ptr(ind);
        const int64_t last = weft_tensor_numel(ind) - 1;
        ip[last] = 0;
        weft_tensor *gi2 = NULL;
        rc = weft_max_pool2d_with_indices_backward(&gi2, go, x, ind);
        keep(gi2);
        bool moved_ok = rc == 0 && pool_backward_matches(gi2, go, ind, cases[i].h, cases[i].w);
        for (int64_t o = 0; o <= last; o++)
            ip[o] = 0;
        weft_tensor *gi3 = NULL;
        rc = weft_max_pool2d_with_indices_backward(&gi3, go, x, ind);
        keep(gi3);
        ok(moved_ok && rc == 0 && pool_backward_matches(gi3, go, ind, cases[i].h, cases[i].w),
           "max_pool2d backward with indices outside their 2x2 block on %lldx%lld: the scatter's",
           (long long)cases[i].h, (long long)cases[i].w);
    }
    drop_all();
}

/* ----------------------------------------------------- large elementwise */

static bool close_to(const float *got, const double *want, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
            diag("element %lld: got %.9g, expected %.9g", (long long)i, got[i], want[i]);
            return false;
        }
    return true;
}

/* n above the parallel grain and not a multiple of anything; at 12000001
 * float32 (48 MB) the pieces' outputs are large enough to be written with
 * streaming stores through a chunk buffer (backends/cpu/elementwise.c) */
static void test_large_binary(int64_t n)
{
    weft_tensor *a = filled(INTS(n), 1, 1, false), *b = filled(INTS(n), 1, 2, false);
    double *want = malloc((size_t)n * sizeof *want);
    const float *ap = weft_tensor_data_ptr(a), *bp = weft_tensor_data_ptr(b);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)ap[i] + -0.01 * (double)bp[i];
    weft_tensor *sum = NULL;
    ok(weft_add_ex(&sum, a, b, -0.01) == 0 && close_to(weft_tensor_data_ptr(keep(sum)), want, n, 1e-6),
       "add with alpha over %lld contiguous elements", (long long)n);
    ok(weft_add_ex_(a, b, -0.01) == 0 && close_to(ap, want, n, 1e-6),
       "add_ with alpha (SGD's update) over %lld contiguous elements", (long long)n);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)ap[i] * (double)bp[i];
    ok(weft_mul_(a, b) == 0 && close_to(ap, want, n, 1e-6), "mul_ over %lld elements",
       (long long)n);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)bp[i] + 0.9 * (double)ap[i];
    ok(weft_add_out_ex(a, b, a, 0.9) == 0 && close_to(ap, want, n, 1e-6),
       "add out= into its own second operand (momentum's update) over %lld elements",
       (long long)n);
    /* a self-add reads and writes the same elements */
    for (int64_t i = 0; i < n; i++)
        want[i] = 3.0 * (double)ap[i];
    ok(weft_add_ex_(a, a, 2.0) == 0 && close_to(ap, want, n, 1e-6), "add_ of a tensor to itself");
    /* out= into a window one element into a bigger buffer: the output is
     * not 16-byte aligned (the streamed chunks start with plain stores) */
    weft_tensor *big = NULL, *window = NULL;
    weft_empty(&big, INTS(n + 1), 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(big);
    float *bigp = weft_tensor_data_ptr(big);
    bigp[0] = 7.0f;
    weft_slice(&window, big, 0, 1, n + 1, 1);
    keep(window);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)ap[i] * (double)bp[i];
    ok(weft_mul_out(window, a, b) == 0 && close_to(bigp + 1, want, n, 1e-6) && bigp[0] == 7.0f,
       "mul out= into an unaligned window over %lld elements, the element before untouched",
       (long long)n);
    free(want);

    /* a transposed operand leaves the fast path: same numbers */
    weft_tensor *m = filled(INTS(300, 400), 2, 3, false), *q = filled(INTS(400, 300), 2, 4, false);
    weft_tensor *qt = NULL, *r = NULL;
    weft_t(&qt, q);
    keep(qt);
    int rc = weft_add_ex(&r, m, qt, 2.0);
    keep(r);
    bool good = rc == 0;
    const float *mp = weft_tensor_data_ptr(m), *qp = weft_tensor_data_ptr(q);
    for (int64_t i = 0; good && i < 300; i++)
        for (int64_t j = 0; good && j < 400; j++) {
            float got = ((const float *)weft_tensor_data_ptr(r))[i * 400 + j];
            double w = (double)mp[i * 400 + j] + 2.0 * (double)qp[j * 300 + i];
            good = fabs(got - w) <= 1e-6 * (1 + fabs(w));
        }
    ok(good, "add with alpha of a transposed operand over 120000 elements");
    drop_all();
}

/* ---------------------------------------------------------- products */

static void test_products(void)
{
    /* mm large enough to be split over the pool, by rows and by columns,
     * in two pieces and (above 2^26 multiply-adds) in four */
    static const int64_t shapes[][3] = {
        {300, 200, 150}, {20, 300, 900}, {257, 1, 3}, {420, 410, 403}, {67, 1030, 1001}};
    for (int c = 0; c < 5; c++) {
        int64_t n = shapes[c][0], k = shapes[c][1], m = shapes[c][2];
        weft_tensor *a = filled(INTS(n, k), 2, 10 + c, false);
        weft_tensor *b0 = filled(INTS(m, k), 2, 20 + c, false), *b = NULL, *y = NULL;
        weft_t(&b, b0); /* a transposed operand: BLAS reads it as such */
        keep(b);
        int rc = weft_mm(&y, a, b);
        keep(y);
        bool good = rc == 0;
        const float *ap = weft_tensor_data_ptr(a), *bp = weft_tensor_data_ptr(b0);
        const float *yp = good ? weft_tensor_data_ptr(y) : NULL;
        for (int64_t i = 0; good && i < n; i++)
            for (int64_t j = 0; good && j < m; j++) {
                double s = 0;
                for (int64_t q = 0; q < k; q++)
                    s += (double)ap[i * k + q] * (double)bp[j * k + q];
                good = fabs(yp[i * m + j] - s) <= 1e-4 * (1 + fabs(s));
            }
        ok(good, "mm %lldx%lld @ (%lldx%lld)^T as the reference", (long long)n, (long long)k,
           (long long)m, (long long)k);
    }

    /* conv2d 3x3 padding 1, and its two gradients, against direct sums */
    const int64_t N = 5, C = 3, H = 9, W = 8, OC = 4;
    weft_tensor *x = filled(INTS(N, C, H, W), 4, 31, false);
    weft_tensor *w = filled(INTS(OC, C, 3, 3), 4, 32, false);
    weft_tensor *go = filled(INTS(N, OC, H, W), 4, 33, false);
    weft_tensor *bias = filled(INTS(OC), 1, 34, false);
    weft_tensor *y = NULL, *gi = NULL, *gw = NULL;
    int rc = weft_conv2d(&y, x, w, bias, INTS(1, 1), 2, INTS(1, 1), 2, INTS(1, 1), 2, 1);
    if (rc == 0)
        rc = weft_convolution_backward_input(&gi, go, w, INTS(N, C, H, W), 4, INTS(1, 1), 2,
                                             INTS(1, 1), 2, INTS(1, 1), 2, 1);
    if (rc == 0)
        rc = weft_convolution_backward_weight(&gw, go, x, INTS(OC, C, 3, 3), 4, INTS(1, 1), 2,
                                              INTS(1, 1), 2, INTS(1, 1), 2, 1);
    keep(y);
    keep(gi);
    keep(gw);
    bool good = rc == 0;
    if (good) {
        const float *xp = weft_tensor_data_ptr(x), *wp = weft_tensor_data_ptr(w);
        const float *gop = weft_tensor_data_ptr(go);
        double *ry = calloc((size_t)(N * OC * H * W), sizeof(double));
        double *rgi = calloc((size_t)(N * C * H * W), sizeof(double));
        double *rgw = calloc((size_t)(OC * C * 9), sizeof(double));
        for (int64_t i = 0; i < N * OC * H * W; i++)
            ry[i] = ((const float *)weft_tensor_data_ptr(bias))[(i / (H * W)) % OC];
        for (int64_t b = 0; b < N; b++)
            for (int64_t o = 0; o < OC; o++)
                for (int64_t oh = 0; oh < H; oh++)
                    for (int64_t ow = 0; ow < W; ow++)
                        for (int64_t c = 0; c < C; c++)
                            for (int64_t kh = 0; kh < 3; kh++)
                                for (int64_t kw = 0; kw < 3; kw++) {
                                    int64_t ih = oh - 1 + kh, iw = ow - 1 + kw;
                                    if (ih < 0 || iw < 0 || ih >= H || iw >= W)
                                        continue;
                                    int64_t xi = ((b * C + c) * H + ih) * W + iw;
                                    int64_t wi = ((o * C + c) * 3 + kh) * 3 + kw;
                                    int64_t yi = ((b * OC + o) * H + oh) * W + ow;
                                    ry[yi] += (double)xp[xi] * wp[wi];
                                    rgi[xi] += (double)gop[yi] * wp[wi];
                                    rgw[wi] += (double)gop[yi] * xp[xi];
                                }
        good = close_to(weft_tensor_data_ptr(y), ry, N * OC * H * W, 1e-5) &&
               close_to(weft_tensor_data_ptr(gi), rgi, N * C * H * W, 1e-5) &&
               close_to(weft_tensor_data_ptr(gw), rgw, OC * C * 9, 1e-4);
        free(ry);
        free(rgi);
        free(rgw);
    }
    ok(good, "conv2d 3x3 padding 1 with a bias, its input and weight gradients as direct sums");
    drop_all();

    /* a weight gradient of several runs of images (one image each here),
     * each of several tiles: the sum of the images' gradients taken alone */
    weft_tensor *bx = filled(INTS(6, 64, 56, 56), 4, 61, false);
    weft_tensor *bg = filled(INTS(6, 8, 56, 56), 4, 62, false), *all = NULL;
    rc = weft_convolution_backward_weight(&all, bg, bx, INTS(8, 64, 3, 3), 4, INTS(1, 1), 2,
                                          INTS(1, 1), 2, INTS(1, 1), 2, 1);
    keep(all);
    double *sum = calloc(8 * 64 * 9, sizeof *sum);
    for (int64_t i = 0; rc == 0 && i < 6; i++) {
        weft_tensor *xi = NULL, *gi1 = NULL, *one = NULL;
        rc = weft_narrow(&xi, bx, 0, i, 1);
        if (rc == 0)
            rc = weft_narrow(&gi1, bg, 0, i, 1);
        if (rc == 0)
            rc = weft_convolution_backward_weight(&one, keep(gi1), keep(xi), INTS(8, 64, 3, 3), 4,
                                                  INTS(1, 1), 2, INTS(1, 1), 2, INTS(1, 1), 2, 1);
        keep(one);
        for (int64_t k = 0; rc == 0 && k < 8 * 64 * 9; k++)
            sum[k] += ((const float *)weft_tensor_data_ptr(one))[k];
    }
    ok(rc == 0 && close_to(weft_tensor_data_ptr(all), sum, 8 * 64 * 9, 1e-4),
       "convolution_backward_weight of 6 images, one run each: the images' sum");
    free(sum);
    drop_all();
}

/* ---------------------------------------------------- conv2d's tiles */

/* conv2d cuts each image's output rows into tiles of unfolded columns,
 * the backward input into blocks of channels, the weight gradient into
 * runs of images (8 at most): shapes with several tiles, batches not a
 * multiple of the runs, one image with many channels, groups, stride,
 * dilation, padding, a non-square kernel, the direct 1x1 path and a
 * non-contiguous input, each against direct sums in float64. */
typedef struct conv_case {
    int64_t N, C, H, W, OC, KH, KW, s[2], p[2], d[2], groups;
    bool bias, strided_input;
} conv_case;

static const conv_case conv_cases[] = {
    /* 72 unfolded rows of 40 columns: 3 tiles per image; 11 images */
    {11, 8, 40, 40, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {3, 4, 17, 15, 6, 3, 3, {2, 2}, {2, 2}, {2, 2}, 2, false, true},
    {5, 6, 9, 7, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 2, true, false}, /* direct, groups */
    {1, 32, 12, 12, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, false}, /* channel blocks */
    {2, 3, 10, 23, 5, 2, 5, {3, 1}, {0, 2}, {1, 2}, 1, true, true},
    {9, 3, 64, 64, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false}, /* the benchmark's */
    /* 36 unfolded rows and 40 output channels: products through OpenBLAS */
    {2, 4, 9, 11, 40, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
};
enum { NCONV = sizeof conv_cases / sizeof *conv_cases };

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d)
{
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* y, gi and gw of case c (rc < 0 on failure; the tensors are kept) */
static int conv_run(const conv_case *c, weft_tensor **x, weft_tensor **y, weft_tensor **gi,
                    weft_tensor **gw, weft_tensor **w, weft_tensor **b, weft_tensor **go)
{
    int64_t OH = conv_out(c->H, c->KH, c->s[0], c->p[0], c->d[0]);
    int64_t OW = conv_out(c->W, c->KW, c->s[1], c->p[1], c->d[1]);
    weft_tensor *xv = NULL;
    if (c->strided_input) { /* every other column of a wider input */
        weft_tensor *wide = filled(INTS(c->N, c->C, c->H, 2 * c->W), 4, 71, false);
        int rc = weft_slice(&xv, wide, 3, 0, 2 * c->W, 2);
        if (rc < 0)
            return rc;
        keep(xv);
    } else {
        xv = filled(INTS(c->N, c->C, c->H, c->W), 4, 71, false);
    }
    *x = xv;
    *w = filled(INTS(c->OC, c->C / c->groups, c->KH, c->KW), 4, 72, false);
    *b = c->bias ? filled(INTS(c->OC), 1, 73, false) : NULL;
    *go = filled(INTS(c->N, c->OC, OH, OW), 4, 74, false);
    int rc = weft_conv2d(y, xv, *w, *b, c->s, 2, c->p, 2, c->d, 2, c->groups);
    keep(*y);
    if (rc == 0)
        rc = weft_convolution_backward_input(gi, *go, *w, INTS(c->N, c->C, c->H, c->W), 4, c->s,
                                             2, c->p, 2, c->d, 2, c->groups);
    keep(*gi);
    if (rc == 0)
        rc = weft_convolution_backward_weight(gw, *go, xv, INTS(c->OC, c->C / c->groups, c->KH,
                                                                c->KW),
                                              4, c->s, 2, c->p, 2, c->d, 2, c->groups);
    keep(*gw);
    return rc;
}

static double at4(const weft_tensor *t, int64_t i, int64_t j, int64_t k, int64_t l)
{
    const float *p = weft_tensor_data_ptr(t);
    const int64_t *st = weft_tensor_strides(t);
    return p[i * st[0] + j * st[1] + k * st[2] + l * st[3]];
}

static void test_conv_tiles(void)
{
    for (int ci = 0; ci < NCONV; ci++) {
        const conv_case *c = &conv_cases[ci];
        weft_tensor *x, *y = NULL, *gi = NULL, *gw = NULL, *w, *b, *go;
        int rc = conv_run(c, &x, &y, &gi, &gw, &w, &b, &go);
        if (!ok(rc == 0, "conv2d case %d and its gradients run", ci)) {
            diag("%s", weft_last_error());
            drop_all();
            continue;
        }
        int64_t OH = weft_tensor_size(y, 2), OW = weft_tensor_size(y, 3);
        int64_t Cg = c->C / c->groups, OCg = c->OC / c->groups;
        double *ry = calloc((size_t)(c->N * c->OC * OH * OW), sizeof(double));
        double *rgi = calloc((size_t)(c->N * c->C * c->H * c->W), sizeof(double));
        double *rgw = calloc((size_t)(c->OC * Cg * c->KH * c->KW), sizeof(double));
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t o = 0; o < c->OC; o++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t yi = ((n * c->OC + o) * OH + oh) * OW + ow;
                        double gov = at4(go, n, o, oh, ow);
                        if (b)
                            ry[yi] = ((const float *)weft_tensor_data_ptr(b))[o];
                        for (int64_t q = 0; q < Cg; q++)
                            for (int64_t kh = 0; kh < c->KH; kh++)
                                for (int64_t kw = 0; kw < c->KW; kw++) {
                                    int64_t ih = oh * c->s[0] - c->p[0] + kh * c->d[0];
                                    int64_t iw = ow * c->s[1] - c->p[1] + kw * c->d[1];
                                    if (ih < 0 || iw < 0 || ih >= c->H || iw >= c->W)
                                        continue;
                                    int64_t ch = o / OCg * Cg + q;
                                    double xv = at4(x, n, ch, ih, iw), wv = at4(w, o, q, kh, kw);
                                    ry[yi] += xv * wv;
                                    rgi[((n * c->C + ch) * c->H + ih) * c->W + iw] += gov * wv;
                                    rgw[((o * Cg + q) * c->KH + kh) * c->KW + kw] += gov * xv;
                                }
                    }
        bool good_y = close_to(weft_tensor_data_ptr(y), ry, c->N * c->OC * OH * OW, 1e-5);
        bool good_gi = close_to(weft_tensor_data_ptr(gi), rgi, c->N * c->C * c->H * c->W, 1e-5);
        bool good_gw = close_to(weft_tensor_data_ptr(gw), rgw, c->OC * Cg * c->KH * c->KW,
                                2e-4);
        ok(good_y && good_gi && good_gw,
           "conv2d case %d (N %lld, C %lld, %lldx%lld, OC %lld, kernel %lldx%lld, stride %lld,%lld "
           "pad %lld,%lld dilation %lld,%lld groups %lld%s%s): output, input and weight gradients "
           "as direct sums (%d %d %d)",
           ci, (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W,
           (long long)c->OC, (long long)c->KH, (long long)c->KW, (long long)c->s[0],
           (long long)c->s[1], (long long)c->p[0], (long long)c->p[1], (long long)c->d[0],
           (long long)c->d[1], (long long)c->groups, c->bias ? ", bias" : "",
           c->strided_input ? ", strided input" : "", good_y, good_gi, good_gw);
        free(ry);
        free(rgi);
        free(rgw);
        drop_all();
    }
}

/* ---------------------------------------------------- threshold_backward */

static weft_tensor *doubles(const int64_t *sizes, int nd, const double *v, weft_dtype dt)
{
    weft_tensor *t = NULL, *c = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) < 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), v, (size_t)weft_tensor_numel(t) * sizeof(double));
    if (dt == WEFT_FLOAT64)
        return keep(t);
    weft_to_dtype(&c, t, dt);
    weft_tensor_release(t);
    return keep(c);
}

static bool equals_doubles(const weft_tensor *t, const double *want, int64_t n)
{
    weft_tensor *d = NULL;
    if (!t || weft_to_dtype(&d, t, WEFT_FLOAT64) < 0 || weft_tensor_numel(d) != n) {
        weft_tensor_release(d);
        return false;
    }
    const double *p = weft_tensor_data_ptr(d);
    bool same = true;
    for (int64_t i = 0; i < n; i++)
        same &= isnan(want[i]) ? isnan(p[i]) : p[i] == want[i];
    weft_tensor_release(d);
    return same;
}

static void check_ok(int rc, const char *what)
{
    if (!ok(rc == 0, "%s", what))
        diag("%s", weft_last_error());
}

static int relu_times_x(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_tensor *r = NULL;
    int rc = weft_relu(&r, in[0]);
    if (rc == 0)
        rc = weft_mul(out, r, in[0]); /* relu alone is piecewise linear */
    weft_tensor_release(r);
    return rc;
}

static int threshold_fn(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_tensor *t = NULL;
    int rc = weft_threshold_backward(&t, in[0], in[1], 0.1);
    if (rc == 0)
        rc = weft_mul(out, t, in[0]); /* quadratic in g, so gradgrad is not zero */
    weft_tensor_release(t);
    return rc;
}

static void test_threshold_backward(void)
{
    const double g[] = {1, 2, 3, 4, 5, 6, -7, 8};
    const double x[] = {-1, 0, 0.25, 0.3, NAN, 2, 3, -0.5};
    const double want[] = {0, 0, 0, 4, 5, 6, -7, 0};
    weft_tensor *y = NULL;
    int rc = weft_threshold_backward(&y, doubles(INTS(2, 4), 2, g, WEFT_FLOAT32),
                                     doubles(INTS(2, 4), 2, x, WEFT_FLOAT32), 0.25);
    keep(y);
    ok(rc == 0 && weft_tensor_dtype(y) == WEFT_FLOAT32 && equals_doubles(y, want, 8),
       "threshold_backward float32: 0 at and below the threshold, a NaN self passes g");
    const double xrow[] = {1, -1, 1, -1};
    const double want_b[] = {1, 0, 3, 0, 5, 0, -7, 0};
    y = NULL;
    rc = weft_threshold_backward(&y, doubles(INTS(2, 4), 2, g, WEFT_FLOAT64),
                                 doubles(INTS(4), 1, xrow, WEFT_FLOAT32), 0.0);
    keep(y);
    ok(rc == 0 && weft_tensor_dtype(y) == WEFT_FLOAT64 && equals_doubles(y, want_b, 8),
       "threshold_backward broadcasts self and promotes float32 with float64");
    const double want_i[] = {1, 2, 3, 4, 5, 6, -7, 0};
    y = NULL;
    rc = weft_threshold_backward(&y, doubles(INTS(2, 4), 2, g, WEFT_INT64),
                                 doubles(INTS(2, 4), 2, (const double[]){5, 6, 7, 8, 9, 10, 11, 4},
                                         WEFT_INT64), 4);
    keep(y);
    ok(rc == 0 && weft_tensor_dtype(y) == WEFT_INT64 && equals_doubles(y, want_i, 8),
       "threshold_backward on int64");
    y = NULL;
    rc = weft_threshold_backward(&y, doubles(INTS(4), 1, g, WEFT_BOOL),
                                 doubles(INTS(4), 1, g, WEFT_BOOL), 0);
    ok(rc < 0 && y == NULL && strstr(weft_last_error(), "threshold_backward"),
       "threshold_backward refuses bool, naming itself: %s", weft_last_error());
    y = NULL;
    rc = weft_threshold_backward(&y, doubles(INTS(2, 4), 2, g, WEFT_FLOAT32),
                                 doubles(INTS(3), 1, g, WEFT_FLOAT32), 0);
    ok(rc < 0 && y == NULL, "threshold_backward refuses shapes that do not broadcast: %s",
       weft_last_error());

    /* gradients: relu's through threshold_backward, twice, and
     * threshold_backward's own in g; values away from the kinks */
    const double xv[] = {-1.3, 0.7, 2.1, -0.4, 0.9, -2.2};
    weft_tensor *a = doubles(INTS(2, 3), 2, xv, WEFT_FLOAT64);
    weft_tensor_set_requires_grad(a, true);
    check_ok(weft_gradcheck(relu_times_x, NULL, &a, 1, 1e-6, 1e-6, 1e-4),
             "gradcheck of relu(x) * x");
    check_ok(weft_gradgradcheck(relu_times_x, NULL, &a, 1, 1e-6, 1e-6, 1e-4),
             "gradgradcheck of relu(x) * x");
    const double gv[] = {0.5, -1.5, 2.5, 1.2, -0.3, 0.8};
    weft_tensor *ins[2] = {doubles(INTS(2, 3), 2, gv, WEFT_FLOAT64),
                           doubles(INTS(2, 3), 2, xv, WEFT_FLOAT64)};
    weft_tensor_set_requires_grad(ins[0], true);
    check_ok(weft_gradcheck(threshold_fn, NULL, ins, 2, 1e-6, 1e-6, 1e-4),
             "gradcheck of threshold_backward(g, x, 0.1) * g in g");
    check_ok(weft_gradgradcheck(threshold_fn, NULL, ins, 2, 1e-6, 1e-6, 1e-4),
             "gradgradcheck of threshold_backward(g, x, 0.1) * g in g");
    drop_all();
}

/* ------------------------------------------------------- linear's gradient */

/* linear's weight reaches addmm as weight.t(): its gradient must come back
 * contiguous like the weight, or every optimizer step runs strided */
static void test_linear_weight_grad(void)
{
    weft_tensor *x = filled(INTS(5, 7), 2, 51, false), *w = filled(INTS(3, 7), 2, 52, false);
    weft_tensor *b = filled(INTS(3), 1, 53, false), *y = NULL, *s = NULL, *gw = NULL;
    weft_tensor_set_requires_grad(w, true);
    int rc = weft_linear(&y, x, w, b);
    if (rc == 0)
        rc = weft_sum(&s, keep(y), NULL, 0, false);
    if (rc == 0)
        rc = weft_backward(&s, 1, NULL, false, false);
    keep(s);
    if (rc == 0)
        rc = weft_tensor_grad(&gw, w);
    keep(gw);
    bool good = rc == 0 && gw && weft_tensor_is_contiguous(gw);
    const float *xp = weft_tensor_data_ptr(x);
    for (int i = 0; good && i < 3; i++)
        for (int j = 0; good && j < 7; j++) {
            double want = 0;
            for (int r = 0; r < 5; r++)
                want += xp[r * 7 + j];
            float got = ((const float *)weft_tensor_data_ptr(gw))[i * 7 + j];
            good = fabs(got - want) <= 1e-5 * (1 + fabs(want));
        }
    ok(good, "linear: the weight's gradient is contiguous and the column sums of the input");
    drop_all();
}

/* ---------------------------------------------------------- threads */

/* Every fast path on shapes large enough for the pool, each result hashed
 * bit for bit into digests[]. */
#define NDIGESTS 8
static const char *const digest_names[NDIGESTS] = {
    "conv2d", "convolution_backward_input", "convolution_backward_weight (one and six runs)",
    "max_pool2d values and indices", "mm", "add_ and mul_ over 200704 elements",
    "relu's backward", "conv2d's tiled cases and their gradients"};

static void digest(uint64_t *digests)
{
    for (int i = 0; i < NDIGESTS; i++)
        digests[i] = 14695981039346656037ULL;
    weft_tensor *x = filled(INTS(16, 16, 28, 28), 4, 41, false);
    weft_tensor *w = filled(INTS(32, 16, 3, 3), 4, 42, false);
    weft_tensor *go = filled(INTS(16, 32, 28, 28), 4, 43, false);
    weft_tensor *y = NULL, *gi = NULL, *gw = NULL, *p = NULL, *ind = NULL, *mm = NULL, *tb = NULL;
    weft_conv2d(&y, x, w, NULL, INTS(1, 1), 2, INTS(1, 1), 2, INTS(1, 1), 2, 1);
    digests[0] = hash_tensor(digests[0], keep(y));
    weft_convolution_backward_input(&gi, go, w, INTS(16, 16, 28, 28), 4, INTS(1, 1), 2,
                                    INTS(1, 1), 2, INTS(1, 1), 2, 1);
    digests[1] = hash_tensor(digests[1], keep(gi));
    weft_convolution_backward_weight(&gw, go, x, INTS(32, 16, 3, 3), 4, INTS(1, 1), 2,
                                     INTS(1, 1), 2, INTS(1, 1), 2, 1);
    digests[2] = hash_tensor(digests[2], keep(gw));
    weft_max_pool2d_with_indices(&p, &ind, x, INTS(2, 2), 2, INTS(2, 2), 2, INTS(0, 0), 2,
                                 INTS(1, 1), 2, false);
    digests[3] = hash_tensor(hash_tensor(digests[3], keep(p)), keep(ind));
    weft_tensor *a = filled(INTS(256, 784), 2, 44, false), *b = filled(INTS(784, 300), 2, 45, false);
    weft_mm(&mm, a, b);
    digests[4] = hash_tensor(digests[4], keep(mm));
    weft_tensor *big = filled(INTS(200704), 1, 46, false), *other = filled(INTS(200704), 1, 47, false);
    weft_add_ex_(big, other, -0.01);
    weft_mul_(big, other);
    digests[5] = hash_tensor(digests[5], big);
    weft_threshold_backward(&tb, go, y, 0.0);
    digests[6] = hash_tensor(digests[6], keep(tb));
    weft_tensor *bx = filled(INTS(6, 64, 56, 56), 4, 61, false);
    weft_tensor *bg = filled(INTS(6, 8, 56, 56), 4, 62, false), *all = NULL;
    weft_convolution_backward_weight(&all, bg, bx, INTS(8, 64, 3, 3), 4, INTS(1, 1), 2,
                                     INTS(1, 1), 2, INTS(1, 1), 2, 1);
    digests[2] = hash_tensor(digests[2], keep(all));
    drop_all();
    for (int ci = 0; ci < NCONV; ci++) {
        weft_tensor *cx, *cy = NULL, *cgi = NULL, *cgw = NULL, *cw, *cb, *cgo;
        if (conv_run(&conv_cases[ci], &cx, &cy, &cgi, &cgw, &cw, &cb, &cgo) < 0)
            digests[7] ^= 0xbadULL;
        digests[7] = hash_tensor(hash_tensor(hash_tensor(digests[7], cy), cgi), cgw);
        drop_all();
    }
}

/* The digests of a run with `threads` threads, in this run's CPU variant;
 * *variant_ok tells whether it loaded that variant. */
static bool digest_with_threads(int threads, uint64_t *out, bool *variant_ok)
{
    char cmd[4400], env[64], variant[64] = "";
    snprintf(env, sizeof env, "WEFT_NUM_THREADS=%d", threads);
    if (!rerun_command(cmd, sizeof cmd, env, "--digest"))
        return false;
    FILE *f = popen(cmd, "r");
    if (!f)
        return false;
    bool got = fscanf(f, "%63s", variant) == 1;
    const char *here = loaded_cpu_variant();
    *variant_ok = got && strcmp(variant, here ? here : "-") == 0;
    for (int i = 0; i < NDIGESTS; i++) {
        unsigned long long d = 0;
        got &= fscanf(f, "%llx", &d) == 1;
        out[i] = d;
    }
    got &= pclose(f) == 0;
    return got;
}

static void test_threads(void)
{
    uint64_t here[NDIGESTS], one[NDIGESTS], two[NDIGESTS], three[NDIGESTS];
    digest(here);
    bool same[3] = {false, false, false};
    bool a = digest_with_threads(1, one, &same[0]), b = digest_with_threads(2, two, &same[1]);
    bool c = digest_with_threads(3, three, &same[2]);
    ok(a && b && c, "the program ran itself with WEFT_NUM_THREADS=1, 2 and 3");
    const char *variant = loaded_cpu_variant();
    ok(same[0] && same[1] && same[2], "every run loaded this run's CPU variant (%s)",
       variant ? variant : "-");
    for (int i = 0; i < NDIGESTS; i++)
        ok(a && b && c && one[i] == two[i] && one[i] == three[i] && one[i] == here[i],
           "%s: the same bits with 1, 2 and 3 threads (%016llx %016llx %016llx, here %016llx)",
           digest_names[i], (unsigned long long)one[i], (unsigned long long)two[i],
           (unsigned long long)three[i], (unsigned long long)here[i]);
}

int main(int argc, char **argv)
{
    int loaded = weft_load_default_plugins();
    if (argc > 1 && !strcmp(argv[1], "--digest")) {
        if (loaded < 1)
            return 1;
        uint64_t d[NDIGESTS];
        digest(d);
        const char *variant = loaded_cpu_variant();
        printf("%s\n", variant ? variant : "-");
        for (int i = 0; i < NDIGESTS; i++)
            printf("%016llx\n", (unsigned long long)d[i]);
        return 0;
    }
    if (!ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return done_testing();
    test_max_pool();
    test_max_pool_backward();
    test_large_binary(100003);
    test_large_binary(12000001);
    test_products();
    test_threshold_backward();
    test_linear_weight_grad();
    test_conv_tiles();
    test_threads();
    return done_testing();
}
