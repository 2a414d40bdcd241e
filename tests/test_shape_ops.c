/* tests/test_shape_ops.c — the shape and indexing operators of the CPU
 * plugin (issue 3, part 3) against hand-computed results and references
 * written here with plain loops, their bad inputs (indices out of range,
 * wrong ranks, index dtypes: a clear error and nothing written), and every
 * derivative against finite differences (weft_gradcheck). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t lcg = 777;
static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* a kept tensor of dtype holding values (given as doubles) */
static weft_tensor *make(weft_dtype dtype, const int64_t *sizes, int nd, const double *values)
{
    weft_tensor *f = NULL, *t = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(f), values, (size_t)weft_tensor_numel(f) * sizeof(double));
    if (dtype == WEFT_FLOAT64)
        return keep(f);
    weft_to_dtype(&t, f, dtype);
    weft_tensor_release(f);
    return keep(t);
}

/* float64 0, 1, 2, ... (kept) */
static weft_tensor *iota(weft_dtype dtype, const int64_t *sizes, int nd)
{
    weft_tensor *t = NULL;
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= sizes[d];
    if (weft_arange(&t, 0, (double)n, 1, dtype, WEFT_DEVICE_CPU) != 0)
        return NULL;
    weft_tensor *r = NULL;
    weft_reshape(&r, t, sizes, nd);
    weft_tensor_release(t);
    return keep(r);
}

static weft_tensor *rnd(const int64_t *sizes, int nd, double lo, double hi)
{
    weft_tensor *f = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    double *p = weft_tensor_data_ptr(f);
    for (int64_t i = 0; i < weft_tensor_numel(f); i++)
        p[i] = uniform(lo, hi);
    return keep(f);
}

/* t has the given shape and exactly the values ref[] (NaN matches NaN) */
static void check(const weft_tensor *t, const int64_t *sizes, int nd, const double *ref,
                  const char *what)
{
    bool shape = t && weft_tensor_ndim(t) == nd &&
                 (nd == 0 || !memcmp(weft_tensor_sizes(t), sizes, (size_t)nd * sizeof(int64_t)));
    if (!ok(shape, "%s: the shape", what)) {
        diag("%s", t ? "wrong shape" : weft_last_error());
        return;
    }
    const double *v = values_of(t);
    int64_t n = weft_tensor_numel(t), bad = -1;
    for (int64_t i = 0; v && i < n && bad < 0; i++)
        if (!(v[i] == ref[i] || (isnan(v[i]) && isnan(ref[i]))))
            bad = i;
    if (!ok(v && bad < 0, "%s: the values", what) && v)
        diag("element %lld: got %g, expected %g", (long long)bad, v[bad], ref[bad]);
}

static void error_says(int rc, int want, const char *needle, const char *what)
{
    error_is(rc, want, NULL, what);
    like(weft_last_error(), needle, "%s: the message names it", what);
}

#define SIZES(...) ((const int64_t[]){__VA_ARGS__})
#define VALUES(...) ((const double[]){__VA_ARGS__})
#define INTS(...) ((const int64_t[]){__VA_ARGS__})

/* ------------------------------------------------------------ cat, stack */

static void test_cat_stack(void)
{
    weft_tensor *a = iota(WEFT_FLOAT32, SIZES(2, 3), 2);
    weft_tensor *b = make(WEFT_INT64, SIZES(1, 3), 2, VALUES(7, 8, 9));
    weft_tensor *empty = NULL, *r = NULL;
    weft_empty(&empty, SIZES(0), 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(empty);
    weft_tensor *ab[] = {a, b}, *a_empty_b[] = {a, empty, b};
    ok(weft_cat(&r, ab, 2, 0) == 0 && weft_tensor_dtype(keep(r)) == WEFT_FLOAT32,
       "cat promotes float32 and int64 to float32");
    check(r, SIZES(3, 3), 2, VALUES(0, 1, 2, 3, 4, 5, 7, 8, 9), "cat along dim 0");
    ok(weft_cat(&r, a_empty_b, 3, -2) == 0 && weft_tensor_dtype(keep(r)) == WEFT_FLOAT64,
       "cat skips a 1-d empty tensor but promotes with it");
    check(r, SIZES(3, 3), 2, VALUES(0, 1, 2, 3, 4, 5, 7, 8, 9), "cat with a skipped empty");
    weft_tensor *at = NULL, *c = iota(WEFT_FLOAT32, SIZES(3, 1), 2);
    weft_transpose(&at, a, 0, 1); /* [3, 2], not contiguous */
    keep(at);
    weft_tensor *tc[] = {at, c};
    ok(weft_cat(&r, tc, 2, 1) == 0, "cat along dim 1 of a transposed tensor");
    check(keep(r), SIZES(3, 3), 2, VALUES(0, 3, 0, 1, 4, 1, 2, 5, 2), "cat along dim 1");
    error_says(weft_cat(&r, tc, 2, 0), WEFT_ESHAPE, "dimension 0", "cat of mismatched sizes");
    error_is(weft_cat(&r, ab, 2, 2), WEFT_ERANGE, NULL, "cat along dim 2 of 2-d tensors");
    /* no tensor to dispatch on: said so, not "no kernel for dispatch keys {}" */
    error_says(weft_cat(&r, NULL, 0, 0), WEFT_EINVAL, "cat: no tensor among the arguments",
               "cat of an empty list");
    ok(r == NULL, "and no result");
    error_says(weft_stack(&r, NULL, 0, 0), WEFT_EINVAL, "stack: no tensor among the arguments",
               "stack of an empty list");
    weft_tensor *scalar = make(WEFT_FLOAT32, NULL, 0, VALUES(1)), *with_scalar[] = {a, scalar};
    error_is(weft_cat(&r, with_scalar, 2, 0), WEFT_ESHAPE, NULL, "cat of a 0-d tensor");

    weft_tensor *a2 = make(WEFT_FLOAT32, SIZES(2, 3), 2, VALUES(10, 11, 12, 13, 14, 15));
    weft_tensor *aa[] = {a, a2};
    ok(weft_stack(&r, aa, 2, 1) == 0, "stack along dim 1");
    check(keep(r), SIZES(2, 2, 3), 3, VALUES(0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15),
          "stack along dim 1");
    ok(weft_stack(&r, aa, 2, -1) == 0, "stack along dim -1");
    check(keep(r), SIZES(2, 3, 2), 3, VALUES(0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15),
          "stack along the last dim");
    error_says(weft_stack(&r, ab, 2, 0), WEFT_ESHAPE, "[2, 3] at entry 0 and [1, 3]",
               "stack of different shapes");
    drop_all();
}

/* ------------------------------------------------------------ indexing */

static void test_index_select_gather(void)
{
    weft_tensor *x = iota(WEFT_FLOAT64, SIZES(3, 4), 2), *r = NULL;
    ok(weft_index_select(&r, x, 1, keep_int64(SIZES(3), 1, INTS(3, 0, 3))) == 0, "index_select dim 1");
    check(keep(r), SIZES(3, 3), 2, VALUES(3, 0, 3, 7, 4, 7, 11, 8, 11), "index_select dim 1");
    weft_tensor *i32 = NULL;
    weft_to_dtype(&i32, keep_int64(SIZES(2), 1, INTS(2, 0)), WEFT_INT32);
    keep(i32);
    ok(weft_index_select(&r, x, -2, i32) == 0, "index_select with int32 indices");
    check(keep(r), SIZES(2, 4), 2, VALUES(8, 9, 10, 11, 0, 1, 2, 3), "index_select dim 0");
    error_says(weft_index_select(&r, x, 1, keep_int64(SIZES(2), 1, INTS(1, 4))), WEFT_ERANGE,
               "index 4 is out of range for dimension 1 with size 4", "index_select index 4 of 4");
    like(weft_last_error(), "index_select", "the message names the operator");
    error_is(weft_index_select(&r, x, 0, keep_int64(SIZES(1), 1, INTS(-1))), WEFT_ERANGE, NULL,
             "index_select with a negative index");
    error_is(weft_index_select(&r, x, 0, make(WEFT_FLOAT32, SIZES(1), 1, VALUES(0))), WEFT_EDTYPE, NULL,
             "index_select with float indices");
    error_is(weft_index_select(&r, x, 0, keep_int64(SIZES(1, 1), 2, INTS(0))), WEFT_ESHAPE, NULL,
             "index_select with 2-d indices");
    error_is(weft_index_select(&r, x, 2, keep_int64(SIZES(1), 1, INTS(0))), WEFT_ERANGE, NULL,
             "index_select along dim 2 of a 2-d tensor");

    weft_tensor *index = keep_int64(SIZES(2, 2), 2, INTS(2, 0, 1, 1));
    ok(weft_gather(&r, x, 1, index) == 0, "gather dim 1");
    check(keep(r), SIZES(2, 2), 2, VALUES(2, 0, 5, 5), "gather dim 1");
    ok(weft_gather(&r, x, 0, index) == 0, "gather dim 0");
    check(keep(r), SIZES(2, 2), 2, VALUES(8, 1, 4, 5), "gather dim 0");
    weft_tensor *xt = NULL;
    weft_transpose(&xt, x, 0, 1); /* [4, 3]: xt[i][j] = 4 j + i */
    keep(xt);
    ok(weft_gather(&r, xt, 1, index) == 0, "gather from a transposed tensor");
    check(keep(r), SIZES(2, 2), 2, VALUES(8, 0, 5, 5), "gather from a transposed tensor");
    error_says(weft_gather(&r, x, 0, keep_int64(SIZES(1, 1), 2, INTS(3))), WEFT_ERANGE,
               "index 3 is out of range for dimension 0 with size 3", "gather index 3 of 3");
    error_is(weft_gather(&r, x, 0, keep_int64(SIZES(4), 1, INTS(0, 0, 0, 0))), WEFT_ESHAPE, NULL,
             "gather with an index of another rank");
    error_is(weft_gather(&r, x, 0, keep_int64(SIZES(1, 5), 2, INTS(0, 0, 0, 0, 0))), WEFT_ESHAPE, NULL,
             "gather with an index larger than self");

    weft_tensor *weight = iota(WEFT_FLOAT32, SIZES(5, 3), 2);
    ok(weft_embedding(&r, weight, keep_int64(SIZES(2, 2), 2, INTS(0, 4, 2, 2)), -1) == 0, "embedding");
    check(keep(r), SIZES(2, 2, 3), 3, VALUES(0, 1, 2, 12, 13, 14, 6, 7, 8, 6, 7, 8), "embedding");
    error_says(weft_embedding(&r, weight, keep_int64(SIZES(2), 1, INTS(1, 5)), -1), WEFT_ERANGE,
               "embedding: index 5 is out of range for dimension 0 with size 5",
               "embedding index 5 of 5 rows");
    error_is(weft_embedding(&r, x, make(WEFT_FLOAT64, SIZES(1), 1, VALUES(0)), -1), WEFT_EDTYPE, NULL,
             "embedding with float indices");
    error_is(weft_embedding(&r, iota(WEFT_FLOAT32, SIZES(5), 1), keep_int64(SIZES(1), 1, INTS(0)), -1),
             WEFT_ESHAPE, NULL, "embedding with a 1-d weight");
    drop_all();
}

static void test_scatter_index_add(void)
{
    weft_tensor *zeros = NULL, *r = NULL;
    weft_zeros(&zeros, SIZES(3, 4), 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(zeros);
    weft_tensor *index = keep_int64(SIZES(2, 4), 2, INTS(0, 1, 2, 0, 2, 0, 0, 0));
    weft_tensor *src = iota(WEFT_FLOAT32, SIZES(2, 5), 2); /* larger than index */
    ok(weft_scatter_add(&r, zeros, 0, index, src) == 0, "scatter_add dim 0");
    check(keep(r), SIZES(3, 4), 2, VALUES(0, 6, 7, 11, 0, 1, 0, 0, 5, 0, 2, 0),
          "scatter_add dim 0");
    ok(weft_scatter(&r, zeros, 1, keep_int64(SIZES(1, 2), 2, INTS(3, 1)), src) == 0, "scatter dim 1");
    check(keep(r), SIZES(3, 4), 2, VALUES(0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "scatter dim 1");

    weft_tensor *target = NULL;
    weft_zeros(&target, SIZES(2, 3), 2, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(target);
    weft_tensor *isrc = keep_int64(SIZES(2, 3), 2, INTS(1, 2, 3, 4, 5, 6));
    ok(weft_scatter_add_(target, 1, keep_int64(SIZES(2, 3), 2, INTS(0, 0, 2, 1, 1, 1)), isrc) == 0,
       "scatter_add_ in place on int64");
    check(target, SIZES(2, 3), 2, VALUES(3, 0, 3, 0, 15, 0), "scatter_add_ in place");
    /* a bad index anywhere: an error, and nothing was written */
    error_says(weft_scatter_(target, 1, keep_int64(SIZES(2, 3), 2, INTS(0, 1, 2, 0, 1, 3)), isrc),
               WEFT_ERANGE, "index 3 is out of range for dimension 1 with size 3",
               "scatter_ with index 3 of 3");
    check(target, SIZES(2, 3), 2, VALUES(3, 0, 3, 0, 15, 0), "scatter_ wrote nothing");
    error_is(weft_scatter_add(&r, zeros, 0, index, isrc), WEFT_EDTYPE, NULL,
             "scatter_add of int64 into float32");
    error_is(weft_scatter(&r, zeros, 0, make(WEFT_FLOAT32, SIZES(2, 4), 2,
                                             VALUES(0, 0, 0, 0, 0, 0, 0, 0)), src),
             WEFT_EDTYPE, NULL, "scatter with float indices");

    weft_tensor *base = NULL;
    weft_zeros(&base, SIZES(4, 2), 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(base);
    weft_tensor *source = make(WEFT_FLOAT64, SIZES(3, 2), 2, VALUES(1, 2, 3, 4, 5, 6));
    weft_tensor *rows = keep_int64(SIZES(3), 1, INTS(0, 2, 0));
    ok(weft_index_add_ex(&r, base, 0, rows, source, 2.0) == 0, "index_add with alpha 2");
    check(keep(r), SIZES(4, 2), 2, VALUES(12, 16, 0, 0, 6, 8, 0, 0), "index_add with alpha 2");
    ok(weft_index_add_(base, 1, keep_int64(SIZES(1), 1, INTS(1)), iota(WEFT_FLOAT64, SIZES(4, 1), 2)) == 0,
       "index_add_ in place along dim 1");
    check(base, SIZES(4, 2), 2, VALUES(0, 0, 0, 1, 0, 2, 0, 3), "index_add_ in place");
    error_says(weft_index_add_(base, 0, keep_int64(SIZES(3), 1, INTS(0, 4, 1)), source), WEFT_ERANGE,
               "index 4 is out of range for dimension 0 with size 4", "index_add_ with index 4 of 4");
    check(base, SIZES(4, 2), 2, VALUES(0, 0, 0, 1, 0, 2, 0, 3), "index_add_ wrote nothing");
    error_is(weft_index_add(&r, base, 0, keep_int64(SIZES(2), 1, INTS(0, 1)), source), WEFT_ESHAPE, NULL,
             "index_add with one index too few");
    drop_all();
}

static void test_one_hot_masks(void)
{
    weft_tensor *r = NULL, *labels = keep_int64(SIZES(3), 1, INTS(2, 0, 1));
    ok(weft_one_hot(&r, labels, -1) == 0, "one_hot infers 3 classes");
    check(keep(r), SIZES(3, 3), 2, VALUES(0, 0, 1, 1, 0, 0, 0, 1, 0), "one_hot");
    ok(weft_one_hot(&r, labels, 4) == 0 && weft_tensor_dtype(keep(r)) == WEFT_INT64,
       "one_hot with 4 classes is int64");
    check(r, SIZES(3, 4), 2, VALUES(0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0), "one_hot, 4 classes");
    error_says(weft_one_hot(&r, labels, 2), WEFT_ERANGE, "class 2", "one_hot class 2 of 2");
    error_is(weft_one_hot(&r, keep_int64(SIZES(1), 1, INTS(-1)), -1), WEFT_ERANGE, NULL, "one_hot of -1");
    error_is(weft_one_hot(&r, make(WEFT_FLOAT32, SIZES(1), 1, VALUES(0)), -1), WEFT_EDTYPE, NULL,
             "one_hot of floats");

    weft_tensor *x = iota(WEFT_FLOAT32, SIZES(2, 3), 2);
    weft_tensor *mask = make(WEFT_BOOL, SIZES(3), 1, VALUES(1, 0, 1));
    ok(weft_masked_select(&r, x, mask) == 0, "masked_select with a broadcast mask");
    check(keep(r), SIZES(4), 1, VALUES(0, 2, 3, 5), "masked_select");
    error_is(weft_masked_select(&r, x, make(WEFT_UINT8, SIZES(3), 1, VALUES(1, 0, 1))),
             WEFT_EDTYPE, NULL, "masked_select with a uint8 mask");
    error_is(weft_masked_select(&r, x, make(WEFT_BOOL, SIZES(2), 1, VALUES(1, 0))), WEFT_ESHAPE, NULL,
             "masked_select with a mask that does not broadcast");

    weft_tensor *y = make(WEFT_FLOAT32, SIZES(2, 3), 2, VALUES(0, 1, -0.0, 2, 0, NAN));
    ok(weft_nonzero(&r, y) == 0, "nonzero");
    check(keep(r), SIZES(3, 2), 2, VALUES(0, 1, 1, 0, 1, 2), "nonzero: -0 is zero, NaN is not");
    ok(weft_nonzero(&r, make(WEFT_INT32, NULL, 0, VALUES(5))) == 0, "nonzero of a 0-d tensor");
    check(keep(r), SIZES(1, 0), 2, VALUES(0), "nonzero of a 0-d tensor");
    drop_all();
}

/* ------------------------------------------------------------ rearranging */

static void test_rearranging(void)
{
    weft_tensor *x = iota(WEFT_INT16, SIZES(2, 3), 2), *r = NULL, *xt = NULL;
    ok(weft_flip(&r, x, INTS(0, -1), 2) == 0, "flip both dims");
    check(keep(r), SIZES(2, 3), 2, VALUES(5, 4, 3, 2, 1, 0), "flip both dims");
    weft_transpose(&xt, x, 0, 1); /* [3, 2] */
    keep(xt);
    ok(weft_flip(&r, xt, INTS(1), 1) == 0, "flip a transposed tensor");
    check(keep(r), SIZES(3, 2), 2, VALUES(3, 0, 4, 1, 5, 2), "flip a transposed tensor");
    error_is(weft_flip(&r, x, INTS(0, 0), 2), WEFT_EINVAL, NULL, "flip with a repeated dim");

    weft_tensor *v = iota(WEFT_FLOAT32, SIZES(5), 1);
    ok(weft_roll(&r, v, INTS(2), 1, NULL, 0) == 0, "roll by 2");
    check(keep(r), SIZES(5), 1, VALUES(3, 4, 0, 1, 2), "roll by 2");
    ok(weft_roll(&r, x, INTS(-1, 4), 2, INTS(0, 1), 2) == 0, "roll two dims");
    check(keep(r), SIZES(2, 3), 2, VALUES(5, 3, 4, 2, 0, 1), "roll two dims");
    ok(weft_roll(&r, x, INTS(1), 1, NULL, 0) == 0, "roll without dims flattens");
    check(keep(r), SIZES(2, 3), 2, VALUES(5, 0, 1, 2, 3, 4), "roll without dims");
    error_is(weft_roll(&r, x, INTS(1, 2), 2, INTS(0), 1), WEFT_EINVAL, NULL, "roll with 2 shifts, 1 dim");

    weft_tensor *m = iota(WEFT_FLOAT64, SIZES(2, 2), 2);
    ok(weft_repeat(&r, m, INTS(2, 1, 3), 3) == 0, "repeat [2, 1, 3]");
    keep(r);
    double ref[24];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 6; c++)
                ref[(a * 2 + b) * 6 + c] = b * 2 + c % 2;
    check(r, SIZES(2, 2, 6), 3, ref, "repeat [2, 1, 3]");
    error_is(weft_repeat(&r, m, INTS(2), 1), WEFT_EINVAL, NULL, "repeat with fewer repeats than dims");
    /* a zero repeat gives an empty result, as torch's repeat does, even
     * when the [repeat, size] pairs it views through would have strides
     * overflowing int64 (2 * 2^62) */
    weft_tensor *wide = NULL;
    weft_zeros(&wide, INTS(0, INT64_C(1) << 62), 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(wide);
    int rc = weft_repeat(&r, wide, INTS(2, 0), 2);
    keep(r);
    ok(rc == 0 && weft_tensor_ndim(r) == 2 && weft_tensor_size(r, 0) == 0 &&
           weft_tensor_size(r, 1) == 0,
       "repeat [2, 0] of [0, 2^62]: an empty [0, 0]");
    if (rc < 0)
        diag("repeat: %s", weft_last_error());
    error_is(weft_repeat(&r, m, INTS(0, 2, INT64_C(1) << 61, 1), 4), WEFT_EOVERFLOW,
             "[0, 2, 4611686018427387904, 2] overflows", "repeat to [0, 2, 2^62, 2]");
    error_is(weft_repeat(&r, m, INTS(1, INT64_C(1) << 62), 2), WEFT_EOVERFLOW,
             "4611686018427387904 times 2", "repeat [1, 2^62] of [2, 2]");

    weft_tensor *sq = iota(WEFT_FLOAT32, SIZES(3, 4), 2);
    ok(weft_tril(&r, sq, 0) == 0, "tril");
    check(keep(r), SIZES(3, 4), 2, VALUES(0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0), "tril");
    ok(weft_triu(&r, sq, 1) == 0, "triu diagonal 1");
    check(keep(r), SIZES(3, 4), 2, VALUES(0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11), "triu diagonal 1");
    ok(weft_tril(&r, sq, -1) == 0, "tril diagonal -1");
    check(keep(r), SIZES(3, 4), 2, VALUES(0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0), "tril diagonal -1");
    weft_tensor *sqt = NULL;
    weft_transpose(&sqt, sq, 0, 1); /* [4, 3], not contiguous: in place through a copy */
    keep(sqt);
    ok(weft_triu_(sqt, 0) == 0, "triu_ in place on a transposed tensor");
    check(sq, SIZES(3, 4), 2, VALUES(0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0),
          "triu_ of the transpose is tril of the source");
    ok(weft_triu(&r, sq, INT64_MAX) == 0, "triu with a huge diagonal");
    check(keep(r), SIZES(3, 4), 2, VALUES(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "triu, huge diagonal");
    error_is(weft_tril(&r, v, 0), WEFT_ESHAPE, NULL, "tril of a 1-d tensor");

    double nine = 9;
    ok(weft_pad(&r, m, INTS(1, 2), 2, "constant", &nine) == 0, "pad the last dim with 9");
    check(keep(r), SIZES(2, 5), 2, VALUES(9, 0, 1, 9, 9, 9, 2, 3, 9, 9), "pad constant");
    ok(weft_pad(&r, m, INTS(0, -1, 1, 0), 4, "constant", NULL) == 0, "pad with a negative pad");
    check(keep(r), SIZES(3, 1), 2, VALUES(0, 0, 2), "pad crops with a negative pad");
    weft_tensor *row = iota(WEFT_FLOAT32, SIZES(1, 4), 2);
    ok(weft_pad(&r, row, INTS(2, 1), 2, "reflect", NULL) == 0, "pad reflect");
    check(keep(r), SIZES(1, 7), 2, VALUES(2, 1, 0, 1, 2, 3, 2), "pad reflect");
    ok(weft_pad(&r, row, INTS(2, 1), 2, "replicate", NULL) == 0, "pad replicate");
    check(keep(r), SIZES(1, 7), 2, VALUES(0, 0, 0, 1, 2, 3, 3), "pad replicate");
    error_is(weft_pad(&r, row, INTS(4, 0), 2, "reflect", NULL), WEFT_EINVAL, NULL,
             "pad reflect by the whole size");
    error_is(weft_pad(&r, row, INTS(1, 1), 2, "circular", NULL), WEFT_EINVAL, NULL, "pad mode circular");
    error_is(weft_pad(&r, row, INTS(1), 1, "constant", NULL), WEFT_EINVAL, NULL, "pad of odd length");
    error_is(weft_pad(&r, row, INTS(0, -3, 0, -3), 4, "constant", NULL), WEFT_ESHAPE, NULL,
             "pad to a negative size");
    /* an empty tensor padded to dimensions of 2^31: nothing to copy, and
     * the copy's stride arithmetic (stride x size x element size, past
     * int64 here) must not run (fuzz_call_boxed's UBSan finding; checked
     * under tests/sanitizers.sh) */
    weft_tensor *none = NULL;
    ok(weft_empty(&none, SIZES(0, 3, 1), 3, WEFT_FLOAT64, WEFT_DEVICE_CPU) == 0, "an empty [0, 3, 1]");
    keep(none);
    ok(weft_pad(&r, none, INTS(1073741824, 1073741829, 1073741823, 1073741824), 4, "constant",
                NULL) == 0,
       "pad of an empty tensor to [0, 2147483650, 2147483654]");
    ok(r && weft_tensor_ndim(r) == 3 && weft_tensor_size(r, 0) == 0 &&
           weft_tensor_size(r, 1) == 2147483650 && weft_tensor_size(r, 2) == 2147483654,
       "pad of an empty tensor has the padded shape");
    keep(r);
    /* views far into it: their storage offsets (2^62 elements, 2^65 bytes)
     * pass int64's range, and address nothing */
    weft_tensor *far = NULL;
    ok(weft_select(&far, r, 1, 2147483649) == 0 && weft_tensor_ndim(far) == 2 &&
           weft_tensor_size(far, 1) == 2147483654,
       "select of the last row of an empty [0, 2147483650, 2147483654]");
    weft_tensor_release(far);
    far = NULL;
    ok(weft_narrow(&far, r, 2, 2147483650, 4) == 0 && weft_tensor_size(far, 2) == 4,
       "narrow at the end of the same");
    weft_tensor_release(far);

    ok(weft_clone(&r, xt) == 0 && weft_tensor_is_contiguous(keep(r)) &&
       !weft_tensor_shares_storage(r, xt), "clone is a contiguous copy");
    check(r, SIZES(3, 2), 2, VALUES(0, 3, 1, 4, 2, 5), "clone");
    drop_all();
}

/* ------------------------------------------------------------ sorting */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_sorting(void)
{
    weft_tensor *x = make(WEFT_FLOAT32, SIZES(5), 1, VALUES(3, NAN, 1, 3, -INFINITY));
    weft_tensor *values = NULL, *indices = NULL;
    ok(weft_sort(&values, &indices, x, -1, false) == 0, "sort ascending");
    check(keep(values), SIZES(5), 1, VALUES(-INFINITY, 1, 3, 3, NAN), "sort: NaN last");
    check(keep(indices), SIZES(5), 1, VALUES(4, 2, 0, 3, 1), "sort is stable");
    ok(weft_sort(&values, &indices, x, 0, true) == 0, "sort descending");
    check(keep(values), SIZES(5), 1, VALUES(NAN, 3, 3, 1, -INFINITY), "sort descending: NaN first");
    check(keep(indices), SIZES(5), 1, VALUES(1, 0, 3, 2, 4), "sort descending is stable");
    ok(weft_argsort(&indices, keep_int64(SIZES(2, 3), 2, INTS(5, -2, 5, 0, 9, -7)), 0, false) == 0,
       "argsort along dim 0");
    check(keep(indices), SIZES(2, 3), 2, VALUES(1, 0, 1, 0, 1, 0), "argsort along dim 0");

    weft_tensor *y = make(WEFT_FLOAT64, SIZES(5), 1, VALUES(1, 5, 3, 5, 2));
    ok(weft_topk(&values, &indices, y, 2, -1, true, true) == 0, "topk largest");
    check(keep(values), SIZES(2), 1, VALUES(5, 5), "topk largest values");
    check(keep(indices), SIZES(2), 1, VALUES(1, 3), "topk largest indices");
    ok(weft_topk(&values, &indices, y, 2, 0, false, true) == 0, "topk smallest");
    check(keep(values), SIZES(2), 1, VALUES(1, 2), "topk smallest values");
    check(keep(indices), SIZES(2), 1, VALUES(0, 4), "topk smallest indices");
    error_says(weft_topk(&values, &indices, y, 6, -1, true, true), WEFT_ERANGE, "k (6)",
               "topk with k larger than the dim");
    error_is(weft_sort(&values, &indices, y, 1, false), WEFT_ERANGE, NULL, "sort along dim 1 of 1-d");

    /* random rows against qsort, along a middle dim */
    weft_tensor *z = rnd(SIZES(3, 40, 2), 3, -5, 5);
    ok(weft_sort(&values, &indices, z, 1, false) == 0, "sort a random [3, 40, 2] along dim 1");
    keep(values);
    keep(indices);
    const double *zv = weft_tensor_data_ptr(z), *sv = values_of(values), *iv = values_of(indices);
    bool sorted = sv && iv;
    for (int a = 0; sorted && a < 3; a++)
        for (int c = 0; c < 2; c++) {
            double col[40];
            for (int b = 0; b < 40; b++)
                col[b] = zv[(a * 40 + b) * 2 + c];
            qsort(col, 40, sizeof *col, compare_doubles);
            for (int b = 0; b < 40; b++) {
                int64_t at = (a * 40 + b) * 2 + c;
                sorted &= sv[at] == col[b] && zv[(a * 40 + (int64_t)iv[at]) * 2 + c] == sv[at];
            }
        }
    ok(sorted, "sort matches qsort, and the indices point at the values");
    drop_all();
}

/* ------------------------------------------------------------ gradients */

enum grad_op {
    G_CAT, G_STACK, G_INDEX_SELECT, G_GATHER, G_EMBEDDING, G_FLIP, G_TRIL, G_TRIU, G_SORT,
    G_TOPK, G_SCATTER_ADD, G_SCATTER, G_INDEX_ADD, G_ROLL, G_ROLL_MIN, G_ROLL_FLAT_MIN, G_REPEAT,
    G_PAD, G_PAD_MIN, G_PAD_REFLECT, G_PAD_REPLICATE, G_CLONE, G_MASKED_SELECT, G_COUNT
};
static const char *const grad_names[] = {
    "cat", "stack", "index_select", "gather", "embedding", "flip", "tril", "triu", "sort",
    "topk", "scatter_add", "scatter", "index_add", "roll",
    /* a shift of INT64_MIN: its negation, the backward's shift, does not
     * exist in int64 (fuzz_call_boxed's UBSan finding) */
    "roll by INT64_MIN along dim 1", "roll by INT64_MIN flattened", "repeat", "pad constant",
    "pad constant by (INT64_MIN, INT64_MAX): all padding, no gradient",
    "pad reflect", "pad replicate", "clone", "masked_select"};

static weft_tensor *grad_index, *grad_index2d, *grad_mask;

/* the operator under test, applied to gradcheck's inputs */
static int apply_grad_op(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    weft_tensor *dummy = NULL;
    int rc;
    switch ((enum grad_op)(intptr_t)ctx) {
    case G_CAT:
        return weft_cat(out, in, 2, 1);
    case G_STACK:
        return weft_stack(out, in, 2, 1);
    case G_INDEX_SELECT:
        return weft_index_select(out, in[0], 1, grad_index);
    case G_GATHER:
        return weft_gather(out, in[0], 1, grad_index2d);
    case G_EMBEDDING:
        return weft_embedding(out, in[0], grad_index2d, -1);
    case G_FLIP:
        return weft_flip(out, in[0], INTS(0, 2), 2);
    case G_TRIL:
        return weft_tril(out, in[0], 0);
    case G_TRIU:
        return weft_triu(out, in[0], -1);
    case G_SORT:
        rc = weft_sort(out, &dummy, in[0], 1, true);
        weft_tensor_release(dummy);
        return rc;
    case G_TOPK:
        rc = weft_topk(out, &dummy, in[0], 2, 0, true, true);
        weft_tensor_release(dummy);
        return rc;
    case G_SCATTER_ADD:
        return weft_scatter_add(out, in[0], 1, grad_index2d, in[1]);
    case G_SCATTER:
        return weft_scatter(out, in[0], 1, grad_index2d, in[1]);
    case G_INDEX_ADD:
        return weft_index_add_ex(out, in[0], 1, grad_index, in[1], -1.5);
    case G_ROLL:
        return weft_roll(out, in[0], INTS(1, -2), 2, INTS(0, 1), 2);
    case G_ROLL_MIN:
        return weft_roll(out, in[0], INTS(INT64_MIN), 1, INTS(1), 1);
    case G_ROLL_FLAT_MIN:
        return weft_roll(out, in[0], INTS(INT64_MIN), 1, NULL, 0);
    case G_REPEAT:
        return weft_repeat(out, in[0], INTS(2, 1, 3), 3);
    case G_PAD:
        return weft_pad(out, in[0], INTS(1, -1, 0, 2), 4, "constant", NULL);
    case G_PAD_MIN:
        return weft_pad(out, in[0], INTS(INT64_MIN, INT64_MAX), 2, "constant", NULL);
    case G_PAD_REFLECT:
        return weft_pad(out, in[0], INTS(2, 1, 1, 0), 4, "reflect", NULL);
    case G_PAD_REPLICATE:
        return weft_pad(out, in[0], INTS(2, 1, 1, 2), 4, "replicate", NULL);
    case G_CLONE:
        return weft_clone(out, in[0]);
    case G_MASKED_SELECT:
        return weft_masked_select(out, in[0], grad_mask);
    default:
        return WEFT_EINVAL;
    }
}

static weft_tensor *grad_input(const int64_t *sizes, int nd, bool requires)
{
    weft_tensor *t = rnd(sizes, nd, -1, 1);
    if (t && requires)
        weft_tensor_set_requires_grad(t, true);
    return t;
}

static void test_gradients(void)
{
    for (int op = 0; op < G_COUNT; op++) {
        grad_index = keep_int64(SIZES(4), 1, INTS(2, 0, 2, 1));
        grad_index2d = keep_int64(SIZES(2, 2), 2, INTS(2, 0, 1, 2)); /* distinct per row for scatter */
        grad_mask = make(WEFT_BOOL, SIZES(4), 1, VALUES(1, 0, 1, 1));
        weft_tensor *in[2] = {NULL, NULL};
        int n = 1;
        switch ((enum grad_op)op) {
        case G_CAT:
            in[0] = grad_input(SIZES(2, 3), 2, true);
            in[1] = grad_input(SIZES(2, 2), 2, true);
            n = 2;
            break;
        case G_STACK:
            in[0] = grad_input(SIZES(2, 3), 2, true);
            in[1] = grad_input(SIZES(2, 3), 2, true);
            n = 2;
            break;
        case G_EMBEDDING:
            in[0] = grad_input(SIZES(3, 2), 2, true);
            break;
        case G_SCATTER_ADD:
        case G_SCATTER:
            in[0] = grad_input(SIZES(3, 3), 2, true);
            in[1] = grad_input(SIZES(2, 3), 2, true);
            n = 2;
            break;
        case G_INDEX_ADD:
            in[0] = grad_input(SIZES(2, 3), 2, true);
            in[1] = grad_input(SIZES(2, 4), 2, true);
            n = 2;
            break;
        case G_FLIP:
            in[0] = grad_input(SIZES(2, 1, 3), 3, true);
            break;
        case G_REPEAT:
            in[0] = grad_input(SIZES(2, 3), 2, true);
            break;
        case G_SORT:
        case G_TOPK: /* distinct values: no ties for finite differences */
            in[0] = grad_input(SIZES(3, 4), 2, true);
            break;
        case G_MASKED_SELECT:
            in[0] = grad_input(SIZES(2, 1), 2, true);
            break;
        case G_ROLL_MIN: /* INT64_MIN is 1 modulo 3: a roll by one, not by 0 */
            in[0] = grad_input(SIZES(4, 3), 2, true);
            break;
        default:
            in[0] = grad_input(SIZES(3, 4), 2, true);
            break;
        }
        int rc = weft_gradcheck(apply_grad_op, (void *)(intptr_t)op, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", grad_names[op]))
            diag("%s", weft_last_error());
        drop_all();
    }

    /* embedding's padding row gets no gradient */
    weft_tensor *weight = grad_input(SIZES(3, 2), 2, true), *emb = NULL, *total = NULL, *g = NULL;
    ok(weft_embedding(&emb, weight, keep_int64(SIZES(3), 1, INTS(2, 0, 2)), 2) == 0 &&
       weft_sum(&total, keep(emb), NULL, 0, false) == 0 &&
       weft_backward(&total, 1, NULL, false, false) == 0 && weft_tensor_grad(&g, weight) == 0,
       "embedding backward with padding_idx 2");
    keep(total);
    check(keep(g), SIZES(3, 2), 2, VALUES(1, 1, 0, 0, 0, 0), "embedding: no gradient for the padding row");

    /* results with no gradient: indices and classes */
    weft_tensor *x = grad_input(SIZES(4), 1, true), *r = NULL, *values = NULL;
    ok(weft_argsort(&r, x, 0, false) == 0 && !weft_tensor_requires_grad(keep(r)),
       "argsort of a tensor that requires grad gives indices without grad");
    ok(weft_nonzero(&r, x) == 0 && !weft_tensor_requires_grad(keep(r)),
       "nonzero gives indices without grad");
    ok(weft_sort(&values, &r, x, 0, false) == 0 && weft_tensor_requires_grad(keep(values)) &&
       !weft_tensor_requires_grad(keep(r)), "sort: the values require grad, the indices do not");
    drop_all();
}

/* A gather large enough for the pool, with several blocks (outer > 1):
 * the pool's pieces start in the middle of a block, and each must find its
 * block and row from where it starts (the row copy steps its counters
 * rather than dividing per row) */
static void test_index_select_pieces(void)
{
    enum { OUTER = 3, ROWS = 2000, WIDTH = 2, N = 5000 };
    weft_tensor *x = iota(WEFT_FLOAT64, SIZES(OUTER, ROWS, WIDTH), 3), *idx = NULL;
    weft_empty(&idx, SIZES(N), 1, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(idx);
    int64_t *ix = weft_tensor_data_ptr(idx);
    for (int64_t j = 0; j < N; j++)
        ix[j] = j % 11 == 0 ? (j % 2 ? ROWS - 1 : 0) : (j * 7919) % ROWS;
    int saved = weft_get_num_threads();
    int threads[] = {1, 3};
    for (int t = 0; t < 2; t++) {
        weft_set_num_threads(threads[t]);
        weft_tensor *r = NULL;
        int rc = weft_index_select(&r, x, 1, idx);
        weft_set_num_threads(saved);
        ok(rc == 0, "index_select of %d rows from each of %d blocks, %d threads", N, OUTER,
           threads[t]);
        if (rc < 0)
            continue;
        keep(r);
        const double *p = weft_tensor_data_ptr(r);
        int64_t bad = 0;
        for (int64_t o = 0; o < OUTER; o++)
            for (int64_t j = 0; j < N; j++)
                for (int64_t k = 0; k < WIDTH; k++)
                    bad += p[(o * N + j) * WIDTH + k] != (double)((o * ROWS + ix[j]) * WIDTH + k);
        ok(bad == 0, "every row from its own block (%lld wrong elements)", (long long)bad);
    }
    drop_all();
}

/* Gathers large enough, from sources larger still, that the CPU plugin
 * writes the rows with streaming stores (backends/cpu/index.c: an output of
 * 8 MiB or more from a source four times larger, rows of whole 16-byte
 * units): index_select across two blocks and embedding, at 1 and 2
 * threads, every element checked; rows of 60 bytes take plain stores and
 * are checked alike. */
static void test_gather_streamed(void)
{
    enum { OUTER = 2, ROWS = 131072, N = 32768 };
    const int widths[] = {64, 15}; /* 256-byte rows (streamed), 60-byte */
    int saved = weft_get_num_threads();
    for (int w = 0; w < 2; w++) {
        const int64_t width = widths[w];
        weft_tensor *idx = NULL;
        weft_empty(&idx, SIZES(N), 1, WEFT_INT64, WEFT_DEVICE_CPU);
        keep(idx);
        int64_t *ix = weft_tensor_data_ptr(idx);
        for (int64_t j = 0; j < N; j++)
            ix[j] = (j * 40503 + 17) % ROWS;
        ix[N - 1] = ROWS - 1;
        weft_tensor *x = iota(WEFT_FLOAT32, SIZES(OUTER, ROWS, width), 3), *flat = NULL;
        weft_reshape(&flat, x, SIZES(OUTER * ROWS, width), 2);
        keep(flat);
        for (int threads = 1; threads <= 2; threads++) {
            weft_set_num_threads(threads);
            weft_tensor *r = NULL, *e = NULL;
            int rc = weft_index_select(&r, x, 1, idx);
            int rc2 = weft_embedding(&e, flat, idx, -1);
            weft_set_num_threads(saved);
            ok(rc == 0 && rc2 == 0, "index_select and embedding of %d rows of %lld floats, %d thread(s)",
               N, (long long)width, threads);
            if (rc < 0 || rc2 < 0)
                continue;
            keep(r);
            keep(e);
            const float *p = weft_tensor_data_ptr(r), *q = weft_tensor_data_ptr(e);
            int64_t bad = 0, bad2 = 0;
            for (int64_t o = 0; o < OUTER; o++)
                for (int64_t j = 0; j < N; j++)
                    for (int64_t k = 0; k < width; k++)
                        bad += p[(o * N + j) * width + k] != (float)((o * ROWS + ix[j]) * width + k);
            for (int64_t j = 0; j < N; j++)
                for (int64_t k = 0; k < width; k++)
                    bad2 += q[j * width + k] != (float)(ix[j] * width + k);
            ok(bad == 0 && bad2 == 0, "every element in place (%lld and %lld wrong)", (long long)bad,
               (long long)bad2);
        }
        drop_all();
    }
}

int main(void)
{
    if (!default_plugins_loaded())
        return done_testing();
    test_cat_stack();
    test_index_select_gather();
    test_index_select_pieces();
    test_gather_streamed();
    test_scatter_index_add();
    test_one_hot_masks();
    test_rearranging();
    test_sorting();
    test_gradients();
    return done_testing();
}
