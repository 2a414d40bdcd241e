/* tests/test_shape_ops2.c — operators returning Tensor[] (split,
 * split_with_sizes, chunk, unbind: views, list ownership, the boxed form,
 * one multi-output autograd node) and the second batch of shape and
 * indexing operators (tile, take, index_put, scatter_reduce, unique),
 * against references written here with plain loops; bad inputs give a
 * clear error and write nothing; derivatives against finite differences. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

#define INTS(...) ((const int64_t[]){__VA_ARGS__})

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

/* 0, 1, 2, ... shaped (kept) */
static weft_tensor *iota(weft_dtype dtype, const int64_t *sizes, int nd)
{
    weft_tensor *t = NULL, *r = NULL, *c = NULL;
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= sizes[d];
    if (weft_arange(&t, 0, (double)n, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    weft_reshape(&r, t, sizes, nd);
    weft_to_dtype(&c, r, dtype);
    weft_tensor_release(t);
    weft_tensor_release(r);
    return keep(c);
}

static bool same_shape(const weft_tensor *t, const int64_t *sizes, int nd)
{
    if (!t || weft_tensor_ndim(t) != nd)
        return false;
    for (int d = 0; d < nd; d++)
        if (weft_tensor_size(t, d) != sizes[d])
            return false;
    return true;
}

/* every element of t equals want[] (row-major) */
static bool values_are(const weft_tensor *t, const double *want)
{
    const double *v = values_of(t);
    if (!v)
        return false;
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        if (!(v[i] == want[i] || (isnan(v[i]) && isnan(want[i]))))
            return false;
    return true;
}

/* ------------------------------------------------------ split and friends */

/* The pieces of src along dim, checked against the plain-loop meaning of
 * narrow: piece k starts at the sum of the earlier lengths. */
static bool pieces_match(weft_tensor **list, int n, const weft_tensor *src, int dim,
                         const int64_t *lengths, bool unbind)
{
    int nd = weft_tensor_ndim(src);
    const double *sv = values_of(src);
    int64_t outer = 1, inner = 1, size = weft_tensor_size(src, dim);
    for (int d = 0; d < dim; d++)
        outer *= weft_tensor_size(src, d);
    for (int d = dim + 1; d < nd; d++)
        inner *= weft_tensor_size(src, d);
    int64_t start = 0;
    for (int k = 0; k < n; k++) {
        if (!weft_tensor_shares_storage(list[k], src))
            return false;
        int64_t want_sizes[WEFT_MAX_DIMS];
        int pn = 0;
        for (int d = 0; d < nd; d++)
            if (!(unbind && d == dim))
                want_sizes[pn++] = d == dim ? lengths[k] : weft_tensor_size(src, d);
        if (!same_shape(list[k], want_sizes, pn))
            return false;
        const double *pv = values_of(list[k]);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < lengths[k]; j++)
                for (int64_t i = 0; i < inner; i++)
                    if (pv[(o * lengths[k] + j) * inner + i] !=
                        sv[(o * size + start + j) * inner + i])
                        return false;
        start += lengths[k];
    }
    return start == size;
}

static void test_split_family(void)
{
    static const weft_dtype dtypes[] = {WEFT_FLOAT32, WEFT_INT64, WEFT_BOOL, WEFT_BFLOAT16,
                                        WEFT_FLOAT16, WEFT_UINT8};
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        weft_tensor *x = iota(dtypes[di], INTS(3, 7, 2), 3);
        weft_tensor **list = NULL;
        int n = -1;
        int rc0 = weft_split(&list, &n, x, 3, 1);
        ok(rc0 == 0 && n == 3 && pieces_match(list, n, x, 1, INTS(3, 3, 1), false),
           "split(3, dim=1) of [3,7,2] %s: views of 3, 3, 1", weft_dtype_name(dtypes[di]));
        weft_tensor_list_free(list, n);
    }
    weft_tensor *x = iota(WEFT_FLOAT64, INTS(5, 4), 2);
    weft_tensor **list = NULL;
    int n = -1;
    /* negative dim, split size larger than the dim, exact multiple */
    ok(weft_split(&list, &n, x, 2, -1) == 0 && n == 2 &&
           pieces_match(list, n, x, 1, INTS(2, 2), false),
       "split(2, dim=-1): two pieces of 2");
    weft_tensor_list_free(list, n);
    ok(weft_split(&list, &n, x, 9, 0) == 0 && n == 1 && pieces_match(list, n, x, 0, INTS(5), false),
       "split larger than the dim: one piece");
    weft_tensor_list_free(list, n);
    ok(weft_split_with_sizes(&list, &n, x, INTS(1, 0, 4), 3, 0) == 0 && n == 3 &&
           pieces_match(list, n, x, 0, INTS(1, 0, 4), false),
       "split_with_sizes [1, 0, 4] (an empty piece)");
    weft_tensor_list_free(list, n);
    ok(weft_chunk(&list, &n, x, 3, 0) == 0 && n == 3 &&
           pieces_match(list, n, x, 0, INTS(2, 2, 1), false),
       "chunk(3) of 5 rows: 2, 2, 1");
    weft_tensor_list_free(list, n);
    /* torch.chunk(arange(6), 4) gives 3 pieces of 2, not 4 */
    weft_tensor *six = iota(WEFT_INT32, INTS(6), 1);
    ok(weft_chunk(&list, &n, six, 4, 0) == 0 && n == 3 &&
           pieces_match(list, n, six, 0, INTS(2, 2, 2), false),
       "chunk(4) of 6: three pieces, as torch.chunk");
    weft_tensor_list_free(list, n);
    /* split and chunk sizes near 2^63: the piece count is a ceiling
     * division that must not compute size + split_size - 1 */
    ok(weft_split(&list, &n, x, INT64_MAX, 0) == 0 && n == 1 &&
           pieces_match(list, n, x, 0, INTS(5), false),
       "split(2^63-1) of 5 rows: one piece");
    weft_tensor_list_free(list, n);
    ok(weft_split(&list, &n, x, INT64_MAX - 3, 0) == 0 && n == 1 &&
           pieces_match(list, n, x, 0, INTS(5), false),
       "split(2^63-4) of 5 rows: one piece");
    weft_tensor_list_free(list, n);
    /* torch.chunk(arange(5), 7) gives 5 pieces of 1: chunks past the size
     * give one piece per element, however large */
    ok(weft_chunk(&list, &n, x, 7, 0) == 0 && n == 5 &&
           pieces_match(list, n, x, 0, INTS(1, 1, 1, 1, 1), false),
       "chunk(7) of 5 rows: five pieces of 1 (torch)");
    weft_tensor_list_free(list, n);
    int chunk_rc = weft_chunk(&list, &n, x, INT64_MAX, 0);
    ok(chunk_rc == 0 && n == 5 && pieces_match(list, n, x, 0, INTS(1, 1, 1, 1, 1), false),
       "chunk(2^63-1) of 5 rows: five pieces of 1");
    if (chunk_rc < 0)
        diag("chunk: %s", weft_last_error());
    weft_tensor_list_free(list, n);
    weft_tensor *one_row = iota(WEFT_FLOAT64, INTS(1, 4), 2);
    ok(weft_chunk(&list, &n, one_row, INT64_MAX, 0) == 0 && n == 1 &&
           pieces_match(list, n, one_row, 0, INTS(1), false),
       "chunk(2^63-1) of 1 row: the whole tensor");
    weft_tensor_list_free(list, n);
    ok(weft_unbind(&list, &n, x, 1) == 0 && n == 4 &&
           pieces_match(list, n, x, 1, INTS(1, 1, 1, 1), true),
       "unbind(dim=1): four [5] views");
    weft_tensor_list_free(list, n);

    /* non-contiguous input: the transpose */
    weft_tensor *xt = NULL;
    weft_transpose(&xt, x, 0, 1);
    keep(xt);
    ok(weft_split(&list, &n, xt, 3, 1) == 0 && n == 2 &&
           pieces_match(list, n, xt, 1, INTS(3, 2), false),
       "split of a transposed (non-contiguous) tensor");
    weft_tensor_list_free(list, n);

    /* empty dims */
    weft_tensor *e = iota(WEFT_FLOAT32, INTS(0, 3), 2);
    ok(weft_split(&list, &n, e, 2, 0) == 0 && n == 1 && same_shape(list[0], INTS(0, 3), 2),
       "split of an empty dim: one empty piece");
    weft_tensor_list_free(list, n);
    ok(weft_split(&list, &n, e, 0, 0) == 0 && n == 1, "split_size 0 of an empty dim: one piece");
    weft_tensor_list_free(list, n);
    ok(weft_chunk(&list, &n, e, 3, 0) == 0 && n == 3 && same_shape(list[2], INTS(0, 3), 2),
       "chunk(3) of an empty dim: three empty pieces (torch)");
    weft_tensor_list_free(list, n);
    ok(weft_unbind(&list, &n, e, 0) == 0 && n == 0 && list != NULL,
       "unbind of an empty dim: an empty, freeable list");
    weft_tensor_list_free(list, n);

    /* writes through a piece reach the input: they are views */
    weft_tensor *y = NULL;
    weft_clone(&y, x);
    keep(y);
    weft_unbind(&list, &n, y, 0);
    weft_fill_(list[2], -1);
    double v = 0;
    weft_tensor_get(y, INTS(2, 3), &v);
    is_double(v, -1, 0, "a write into an unbind piece shows in the input");
    weft_tensor_list_free(list, n);

    /* bad input: clear errors, out left NULL and 0 */
    weft_tensor *scalar = NULL;
    weft_full(&scalar, NULL, 0, 1.0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(scalar);
    list = (weft_tensor **)&n; /* garbage that must be overwritten */
    n = 7;
    int rc = weft_split(&list, &n, scalar, 1, 0);
    ok(rc == WEFT_ESHAPE && list == NULL && n == 0, "split of a 0-d tensor fails, out cleared");
    like(weft_last_error(), "0-d", "  the message names the 0-d input");
    ok(weft_split(&list, &n, x, -1, 0) == WEFT_EINVAL, "negative split_size");
    like(weft_last_error(), "non-negative", "  the message says so");
    ok(weft_split(&list, &n, x, 0, 0) == WEFT_EINVAL, "split_size 0 of a non-empty dim");
    ok(weft_split(&list, &n, x, 1, 2) == WEFT_ERANGE || weft_split(&list, &n, x, 1, 2) < 0,
       "dim out of range");
    ok(weft_split_with_sizes(&list, &n, x, INTS(2, 2), 2, 0) == WEFT_ESHAPE && list == NULL,
       "split_with_sizes not adding up");
    like(weft_last_error(), "add up to 4", "  the message gives the sum");
    ok(weft_split_with_sizes(&list, &n, x, INTS(6, -1), 2, 0) == WEFT_EINVAL, "a negative size");
    ok(weft_chunk(&list, &n, x, 0, 0) == WEFT_EINVAL, "chunk(0)");
    like(weft_last_error(), "greater than 0", "  the message says chunks must be > 0");
    ok(weft_unbind(&list, &n, scalar, 0) == WEFT_ESHAPE, "unbind of a 0-d tensor");
    ok(weft_split(NULL, &n, x, 1, 0) == WEFT_EINVAL && weft_split(&list, NULL, x, 1, 0) == WEFT_EINVAL,
       "NULL result pointers");
    weft_tensor_list_free(NULL, 3); /* a no-op */

    /* the boxed form: one list value, freed by the caller */
    const weft_op *op = NULL;
    weft_op_find(&op, "split");
    weft_value args[3] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = x},
                          {.tag = WEFT_VALUE_INT, .u.i = 2},
                          {.tag = WEFT_VALUE_INT, .u.i = 0}};
    weft_value ret;
    rc = weft_call_boxed(op, args, 3, &ret, 1);
    ok(rc == 0 && ret.tag == WEFT_VALUE_TENSOR_LIST && ret.len == 3 &&
           same_shape(ret.u.tensors[2], INTS(1, 4), 2),
       "boxed split: a TENSOR_LIST of 3, the last [1, 4]");
    if (rc == 0)
        weft_tensor_list_free((weft_tensor **)ret.u.tensors, ret.len);
    ok(strstr(weft_op_schema(op), "-> Tensor[]") != NULL, "the schema says Tensor[]");
    drop_all();
}

/* gradient of a weighted sum of some pieces: the others get none */
enum split_case { S_SPLIT, S_SIZES, S_CHUNK, S_UNBIND, S_UNUSED };
static int apply_split(weft_tensor **out, weft_tensor *const *in, int n_in, void *ctx)
{
    (void)n_in;
    weft_tensor **list = NULL;
    int n = 0, rc;
    switch ((enum split_case)(intptr_t)ctx) {
    case S_SPLIT:
        rc = weft_split(&list, &n, in[0], 2, 1);
        break;
    case S_SIZES:
        rc = weft_split_with_sizes(&list, &n, in[0], INTS(1, 3, 1), 3, -1);
        break;
    case S_CHUNK:
        rc = weft_chunk(&list, &n, in[0], 2, 0);
        break;
    default:
        rc = weft_unbind(&list, &n, in[0], 1);
        break;
    }
    if (rc < 0)
        return rc;
    /* piece 0 squared plus 3 x the last piece; S_UNUSED uses piece 1 only */
    weft_tensor *a = NULL, *b = NULL, *s = NULL;
    if ((enum split_case)(intptr_t)ctx == S_UNUSED) {
        rc = weft_mul(&a, list[1], list[1]);
        if (rc == 0)
            rc = weft_sum(out, a, NULL, 0, false);
    } else {
        rc = weft_mul(&a, list[0], list[0]);
        if (rc == 0)
            rc = weft_sum(&s, a, NULL, 0, false);
        if (rc == 0)
            rc = weft_sum(&b, list[n - 1], NULL, 0, false);
        if (rc == 0)
            rc = weft_add_ex(out, s, b, 3.0);
    }
    weft_tensor_release(a);
    weft_tensor_release(b);
    weft_tensor_release(s);
    weft_tensor_list_free(list, n);
    return rc;
}

static void test_split_grad(void)
{
    static const char *const names[] = {"split", "split_with_sizes", "chunk", "unbind",
                                        "unbind, one piece used"};
    weft_tensor *x = make(WEFT_FLOAT64, INTS(3, 5), 2,
                          (double[]){0.5, -1, 2, 0.25, 3, 1, -2, 0.75, 1.5, -0.5, 2.5, 0.1, -0.3,
                                     0.9, 1.1});
    weft_tensor_set_requires_grad(x, true);
    for (int c = S_SPLIT; c <= S_UNUSED; c++) {
        int rc = weft_gradcheck(apply_split, (void *)(intptr_t)c, &x, 1, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", names[c]))
            diag("%s", weft_last_error());
    }
    /* the backward (cat/stack of the pieces' gradients) differentiates again */
    for (int c = S_SPLIT; c <= S_UNBIND; c += 3) {
        int rc = weft_gradgradcheck(apply_split, (void *)(intptr_t)c, &x, 1, 1e-6, 1e-5, 1e-3);
        if (!ok(rc == 0, "gradgradcheck: %s", names[c]))
            diag("%s", weft_last_error());
    }
    /* one node for all pieces, and the exact gradient of an unused piece */
    weft_tensor **list = NULL;
    int n = 0;
    weft_unbind(&list, &n, x, 0);
    is_str(weft_tensor_grad_fn_name(list[1]), "UnbindBackward", "unbind pieces share one node");
    weft_tensor *s = NULL, *g = NULL;
    weft_sum(&s, list[1], NULL, 0, false);
    weft_backward(&s, 1, NULL, false, false);
    weft_tensor_grad(&g, x);
    keep(g);
    ok(values_are(g, (double[]){0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}),
       "backward through one unbind piece: ones in its row, zeros elsewhere");
    weft_tensor_release(s);
    weft_tensor_list_free(list, n);
    drop_all();
}

/* a plugin kernel that breaks the list convention: returns one tensor */
static int wrong_tag_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = weft_tensor_retain(call->args[0].u.tensor);
    return 0;
}

/* a plugin kernel that keeps it: two aliases of self */
static int two_aliases_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor **list = NULL;
    int rc = weft_tensor_list_new(&list, 2);
    if (rc < 0)
        return rc;
    list[0] = weft_tensor_retain(call->args[0].u.tensor);
    list[1] = weft_tensor_retain(call->args[0].u.tensor);
    call->rets[0].tag = WEFT_VALUE_TENSOR_LIST;
    call->rets[0].len = 2;
    call->rets[0].u.tensors = list;
    return 0;
}

static void test_list_schema(void)
{
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "test_shape_ops2");
    const weft_op *bad = NULL, *good = NULL, *wrong = NULL;
    ok(weft_register_op(reg, "listpair(Tensor self) -> (Tensor[], Tensor)", &bad) == WEFT_EINVAL,
       "a schema with Tensor[] beside another result is refused");
    like(weft_last_error(), "only result", "  the message says why");
    ok(weft_register_op(reg, "twice(Tensor self) -> Tensor[]", &good) == 0 &&
           weft_register_op(reg, "wrongtag(Tensor self) -> Tensor[]", &wrong) == 0,
       "plugins define Tensor[] operators");
    weft_register_kernel(reg, "twice", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, two_aliases_kernel,
                         NULL, NULL);
    weft_register_kernel(reg, "wrongtag", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, wrong_tag_kernel,
                         NULL, NULL);
    weft_tensor *x = iota(WEFT_FLOAT32, INTS(2), 1);
    weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = x}, ret;
    int rc = weft_call_boxed(good, &arg, 1, &ret, 1);
    ok(rc == 0 && ret.tag == WEFT_VALUE_TENSOR_LIST && ret.len == 2 && ret.u.tensors[1] == x,
       "a plugin kernel returns a list through the boxed call");
    if (rc == 0)
        weft_tensor_list_free((weft_tensor **)ret.u.tensors, ret.len);
    rc = weft_call_boxed(wrong, &arg, 1, &ret, 1);
    ok(rc == WEFT_EINTERNAL && ret.tag == WEFT_VALUE_NONE,
       "a kernel that returns no list is an error (its tensor released, nothing leaks)");
    like(weft_last_error(), "did not return a tensor list", "  the message says so");
    weft_registrar_destroy(reg);
    drop_all();
}

/* ------------------------------------------------------------ tile, take */

static void test_tile_take(void)
{
    weft_tensor *x = iota(WEFT_INT16, INTS(2, 3), 2), *r = NULL;
    ok(weft_tile(&r, x, INTS(2), 1) == 0 && same_shape(keep(r), INTS(2, 6), 2) &&
           values_are(r, (double[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}),
       "tile([2]) of [2, 3] int16: dims padded with a leading 1");
    ok(weft_tile(&r, x, INTS(2, 1, 1), 3) == 0 && same_shape(keep(r), INTS(2, 2, 3), 3),
       "tile with more dims than self adds dims");
    weft_tensor *s0 = NULL;
    weft_full(&s0, NULL, 0, 7, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    ok(weft_tile(&r, keep(s0), INTS(3), 1) == 0 && values_are(keep(r), (double[]){7, 7, 7}),
       "tile of a 0-d tensor");
    ok(weft_tile(&r, x, NULL, 0) == 0 && same_shape(keep(r), INTS(2, 3), 2), "tile with no dims");
    ok(weft_tile(&r, x, INTS(0, 2), 2) == 0 && same_shape(keep(r), INTS(0, 6), 2), "tile by 0");
    ok(weft_tile(&r, x, INTS(-1), 1) < 0 && r == NULL, "tile by -1 fails");
    like(weft_last_error(), "tile", "  the message names tile");

    weft_tensor *y = iota(WEFT_FLOAT64, INTS(3, 4), 2), *yt = NULL;
    weft_transpose(&yt, y, 0, 1); /* [4, 3], row-major order 0 4 8 1 5 9 ... */
    keep(yt);
    weft_tensor *idx = NULL;
    weft_tensor *i64 = NULL;
    weft_empty(&i64, INTS(2, 2), 2, WEFT_INT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(i64), (int64_t[]){0, 4, -1, 11}, 4 * sizeof(int64_t));
    idx = keep(i64);
    ok(weft_take(&r, yt, idx) == 0 && same_shape(keep(r), INTS(2, 2), 2) &&
           values_are(r, (double[]){0, 5, 11, 11}),
       "take from a transposed tensor, index [2, 2] with -1: shaped like index");
    weft_tensor *i32 = NULL;
    weft_to_dtype(&i32, idx, WEFT_INT32);
    ok(weft_take(&r, yt, keep(i32)) == 0 && values_are(keep(r), (double[]){0, 5, 11, 11}),
       "take with int32 indices");
    weft_tensor *oob = NULL;
    weft_empty(&oob, INTS(1), 1, WEFT_INT64, WEFT_DEVICE_CPU);
    *(int64_t *)weft_tensor_data_ptr(oob) = 12;
    ok(weft_take(&r, yt, keep(oob)) == WEFT_ERANGE && r == NULL, "take index 12 of 12 elements fails");
    like(weft_last_error(), "take", "  the message names take");
    *(int64_t *)weft_tensor_data_ptr(oob) = -13;
    ok(weft_take(&r, yt, oob) == WEFT_ERANGE, "take index -13 fails");
    ok(weft_take(&r, yt, y) == WEFT_EDTYPE, "take with a float64 index fails");
    weft_tensor *e = iota(WEFT_INT64, INTS(0), 1);
    ok(weft_take(&r, yt, e) == 0 && weft_tensor_numel(keep(r)) == 0, "take with an empty index");
    drop_all();
}

/* ------------------------------------------------------------ index_put */

static weft_tensor *ints_tensor(const int64_t *sizes, int nd, const int64_t *v)
{
    return keep_int64(sizes, nd, v);
}

static weft_tensor *bool_tensor(const int64_t *sizes, int nd, const double *v)
{
    return make(WEFT_BOOL, sizes, nd, v);
}

static void test_index_put(void)
{
    weft_tensor *x = iota(WEFT_FLOAT32, INTS(3, 4), 2), *r = NULL;
    /* x[[0, 2], [1, 3]] = [10, 20] */
    weft_tensor *ind[2] = {ints_tensor(INTS(2), 1, (int64_t[]){0, 2}),
                           ints_tensor(INTS(2), 1, (int64_t[]){1, -1})};
    weft_tensor *vals = make(WEFT_FLOAT32, INTS(2), 1, (double[]){10, 20});
    ok(weft_index_put(&r, x, ind, 2, vals, false) == 0 &&
           values_are(keep(r), (double[]){0, 10, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20}),
       "index_put with two index tensors (one negative)");
    ok(values_are(x, (double[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), "  self is unchanged");
    /* one index: whole rows, values broadcast */
    weft_tensor *rows = ints_tensor(INTS(2), 1, (int64_t[]){2, 0});
    weft_tensor *row = make(WEFT_FLOAT32, INTS(4), 1, (double[]){-1, -2, -3, -4});
    ok(weft_index_put(&r, x, &rows, 1, row, false) == 0 &&
           values_are(keep(r), (double[]){-1, -2, -3, -4, 4, 5, 6, 7, -1, -2, -3, -4}),
       "index_put of rows, values [4] broadcast to [2, 4]");
    /* accumulate with duplicates */
    weft_tensor *dup = ints_tensor(INTS(5), 1, (int64_t[]){1, 1, 0, 1, 2});
    weft_tensor *ones = make(WEFT_FLOAT32, NULL, 0, (double[]){1});
    ok(weft_index_put(&r, x, &dup, 1, ones, true) == 0 &&
           values_are(keep(r), (double[]){1, 2, 3, 4, 7, 8, 9, 10, 9, 10, 11, 12}),
       "accumulate: row 1 three times, 0-d values broadcast");
    /* boolean mask over both dims, and over the first */
    weft_tensor *mask = bool_tensor(INTS(3, 4), 2, (double[]){1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
    weft_tensor *three = make(WEFT_FLOAT32, INTS(3), 1, (double[]){100, 200, 300});
    ok(weft_index_put(&r, x, &mask, 1, three, false) == 0 &&
           values_are(keep(r), (double[]){100, 1, 2, 3, 4, 5, 200, 7, 8, 9, 10, 300}),
       "a [3, 4] bool mask selects 3 elements in order");
    weft_tensor *rmask = bool_tensor(INTS(3), 1, (double[]){0, 1, 1});
    ok(weft_index_put(&r, x, &rmask, 1, ones, true) == 0 &&
           values_are(keep(r), (double[]){0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12}),
       "a [3] row mask with accumulate");
    /* a 0-d mask (torch's new unit dim) is refused by name: the kernel
     * wrote every element for a false one, and the backward read a null
     * index (fuzz_call_boxed: UBSan) */
    for (int v = 0; v < 2; v++) {
        weft_tensor *m0 = bool_tensor(NULL, 0, (double[]){v}), *got = NULL;
        weft_tensor *vr = make(WEFT_FLOAT32, INTS(1), 1, (double[]){7});
        weft_tensor_set_requires_grad(vr, true);
        int rc = weft_index_put(&got, x, &m0, 1, vr, false);
        ok(rc == WEFT_ESHAPE && got == NULL && strstr(weft_last_error(), "0-d mask"),
           "index_put with a 0-d %s mask: refused, naming it (%s)", v ? "true" : "false",
           weft_last_error());
    } /* make() keeps what it makes: drop_all releases m0 and vr */
    /* index tensors broadcast: [2, 1] with [3] → [2, 3] positions */
    weft_tensor *bi[2] = {ints_tensor(INTS(2, 1), 2, (int64_t[]){0, 2}),
                          ints_tensor(INTS(3), 1, (int64_t[]){0, 1, 3})};
    weft_tensor *zero = make(WEFT_FLOAT32, NULL, 0, (double[]){0});
    ok(weft_index_put(&r, x, bi, 2, zero, false) == 0 &&
           values_are(keep(r), (double[]){0, 0, 2, 0, 4, 5, 6, 7, 0, 0, 10, 0}),
       "index tensors [2, 1] and [3] broadcast to 6 positions");
    /* in place, on a non-contiguous self, int64 dtype */
    weft_tensor *m = iota(WEFT_INT64, INTS(4, 3), 2), *mt = NULL;
    weft_transpose(&mt, m, 0, 1); /* [3, 4]: mt[i][j] = m[j][i] = 3j + i */
    keep(mt);
    weft_tensor *ci = ints_tensor(INTS(2), 1, (int64_t[]){1, 1});
    weft_tensor *cv = make(WEFT_INT64, INTS(2, 4), 2, (double[]){1, 1, 1, 1, 10, 10, 10, 10});
    ok(weft_index_put_(mt, &ci, 1, cv, true) == 0 &&
           values_are(m, (double[]){0, 12, 2, 3, 15, 5, 6, 18, 8, 9, 21, 11}),
       "index_put_ accumulate into a transposed int64 view: duplicates sum (11 added)");
    /* bad input: nothing written */
    weft_tensor *snap = NULL;
    weft_clone(&snap, x);
    keep(snap);
    weft_tensor *big = ints_tensor(INTS(2), 1, (int64_t[]){0, 3});
    ok(weft_index_put_(x, &big, 1, ones, false) == WEFT_ERANGE, "index 3 of 3 rows fails");
    like(weft_last_error(), "index_put_", "  the message names the operator");
    weft_tensor *badmask = bool_tensor(INTS(2), 1, (double[]){1, 0});
    ok(weft_index_put_(x, &badmask, 1, ones, false) == WEFT_ESHAPE, "a mask of the wrong shape fails");
    like(weft_last_error(), "does not match", "  the message says the shapes do not match");
    weft_tensor *two_vals = make(WEFT_FLOAT32, INTS(3), 1, (double[]){1, 2, 3});
    ok(weft_index_put_(x, &rows, 1, two_vals, false) == WEFT_ESHAPE, "values that do not broadcast");
    like(weft_last_error(), "cannot be broadcast", "  the message says so");
    weft_tensor *three_idx[3] = {rows, rows, rows};
    ok(weft_index_put_(x, three_idx, 3, ones, false) == WEFT_ESHAPE, "three indices for 2 dims");
    weft_tensor *f64 = make(WEFT_FLOAT64, NULL, 0, (double[]){1});
    ok(weft_index_put_(x, &rows, 1, f64, false) == WEFT_EDTYPE, "values of another dtype");
    weft_tensor *fidx = make(WEFT_FLOAT32, INTS(1), 1, (double[]){0});
    ok(weft_index_put_(x, &fidx, 1, ones, false) == WEFT_EDTYPE, "a float index");
    weft_tensor *nb[2] = {ints_tensor(INTS(2), 1, (int64_t[]){0, 1}),
                          ints_tensor(INTS(3), 1, (int64_t[]){0, 1, 2})};
    ok(weft_index_put_(x, nb, 2, ones, false) == WEFT_ESHAPE, "index tensors that do not broadcast");
    ok(values_are(x, values_of(snap)), "  the failed calls wrote nothing");
    drop_all();
}

/* ------------------------------------------------- index_put with None */

/* The plain-loop meaning of index_put on a 4-d float64 x, written from
 * torch's indexing rules: idx[d] is NULL for a whole dim, else nb indices
 * (the broadcast index shape, flattened); the indexed result is laid out
 * [whole dims before the indexed ones, nb, the other whole dims] when the
 * indexed dims are adjacent (adjacent = true), else [nb, whole dims]. */
static void reference_put(double *x, const int64_t *xs, const int64_t *const idx[4], int64_t nb,
                          const double *values, bool adjacent, bool accumulate)
{
    int whole[4], nw = 0, lead = 0, first = -1;
    for (int d = 0; d < 4; d++)
        if (!idx[d])
            whole[nw++] = d;
        else if (first < 0)
            first = d;
    for (int w = 0; adjacent && w < nw; w++)
        lead += whole[w] < first;
    int64_t wsize = 1;
    for (int w = 0; w < nw; w++)
        wsize *= xs[whole[w]];
    int64_t after = 1; /* elements of the whole dims after the index shape */
    for (int w = lead; w < nw; w++)
        after *= xs[whole[w]];
    for (int64_t b = 0; b < nb; b++)
        for (int64_t q = 0; q < wsize; q++) {
            int64_t c[4], rest = q;
            for (int w = nw - 1; w >= 0; w--) {
                c[whole[w]] = rest % xs[whole[w]];
                rest /= xs[whole[w]];
            }
            for (int d = 0; d < 4; d++)
                if (idx[d])
                    c[d] = (idx[d][b] + xs[d]) % xs[d];
            int64_t at = ((c[0] * xs[1] + c[1]) * xs[2] + c[2]) * xs[3] + c[3];
            /* q is row-major over the whole dims; split it at lead */
            int64_t before_part = q / after, after_part = q % after;
            int64_t v = (before_part * nb + b) * after + after_part;
            x[at] = accumulate ? x[at] + values[v] : values[v];
        }
}

static weft_tensor *numbered(const int64_t *sizes, int nd, double start)
{
    weft_tensor *t = iota(WEFT_FLOAT64, sizes, nd), *r = NULL;
    weft_add_scalar(&r, t, start);
    return keep(r);
}

/* index_put with None entries under gradcheck: in[0] is self, in[1]
 * values; the list and accumulate come from these */
static weft_tensor *g_none_list[3];
static int g_none_n;
static bool g_none_accumulate;

static int apply_put_none(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n, (void)ctx;
    return weft_index_put(out, in[0], g_none_list, g_none_n, in[1], g_none_accumulate);
}

static void test_index_put_none_grad(void)
{
    struct {
        const char *what;
        int64_t vshape[3];
        int vnd;
        int n;
        bool middle_none, accumulate;
    } cases[] = {
        {"x[:, idx] = v", {3, 2, 2}, 3, 2, false, false},
        {"x[:, idx] += v with a duplicate", {3, 3, 2}, 3, 2, false, true},
        {"x[i, :, j] = v (separated)", {2, 3}, 2, 3, true, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        weft_tensor *x = numbered(INTS(3, 3, 2), 3, 0.5), *v = numbered(cases[c].vshape, cases[c].vnd, -2);
        weft_tensor_set_requires_grad(x, true);
        weft_tensor_set_requires_grad(v, true);
        if (cases[c].middle_none) {
            g_none_list[0] = ints_tensor(INTS(2), 1, (int64_t[]){2, 0});
            g_none_list[1] = NULL;
            g_none_list[2] = ints_tensor(INTS(2), 1, (int64_t[]){1, -2});
        } else {
            g_none_list[0] = NULL;
            g_none_list[1] = cases[c].accumulate ? ints_tensor(INTS(3), 1, (int64_t[]){1, 2, 1})
                                                 : ints_tensor(INTS(2), 1, (int64_t[]){2, 0});
        }
        g_none_n = cases[c].n;
        g_none_accumulate = cases[c].accumulate;
        weft_tensor *in[2] = {x, v};
        int rc = weft_gradcheck(apply_put_none, NULL, in, 2, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: index_put %s", cases[c].what))
            diag("%s", weft_last_error());
        rc = weft_gradgradcheck(apply_put_none, NULL, in, 2, 1e-6, 1e-5, 1e-3);
        if (!ok(rc == 0, "gradgradcheck: index_put %s", cases[c].what))
            diag("%s", weft_last_error());
    }
    drop_all();
}

static void test_index_put_none(void)
{
    const int64_t xs[4] = {2, 3, 4, 5};
    weft_tensor *x = numbered(xs, 4, 0), *r = NULL;
    const double *x0 = values_of(x);
    double want[120];
    const int64_t i1[2] = {2, -3}, i2[3] = {3, 0, 1}, i3[3] = {4, 4, -1}, i0[3] = {1, 0, 1};
    weft_tensor *t1 = ints_tensor(INTS(2), 1, i1), *t2 = ints_tensor(INTS(3), 1, i2),
                *t1b = ints_tensor(INTS(3), 1, (int64_t[]){2, 0, 1}),
                *t3 = ints_tensor(INTS(3), 1, i3), *t0 = ints_tensor(INTS(3), 1, i0);
    struct {
        const char *what;
        weft_tensor *list[4];
        int n;
        const int64_t *ref[4];
        int64_t nb;
        int64_t vshape[4];
        bool adjacent, accumulate;
    } cases[] = {
        {"x[:, idx] = v (index shape in place of dim 1)", {NULL, t1}, 2, {NULL, i1}, 2,
         {2, 2, 4, 5}, true, false},
        {"x[:, i, j] = v (two adjacent index tensors after a None)", {NULL, t1b, t2}, 3,
         {NULL, (int64_t[]){2, 0, 1}, i2}, 3, {2, 3, 5, 0}, true, false},
        {"x[i, :, j] = v (separated by None: index shape first)", {t0, NULL, t2}, 3,
         {i0, NULL, i2}, 3, {3, 3, 5, 0}, false, false},
        {"x[:, :, :, k] = v (last dim)", {NULL, NULL, NULL, t3}, 4, {NULL, NULL, NULL, i3}, 3,
         {2, 3, 4, 3}, true, false},
        {"x[:, :, :, k] += v, duplicates accumulate", {NULL, NULL, NULL, t3}, 4,
         {NULL, NULL, NULL, i3}, 3, {2, 3, 4, 3}, true, true},
        {"x[i, :, :, k] += v (non-adjacent, accumulate)", {t0, NULL, NULL, t3}, 4,
         {i0, NULL, NULL, i3}, 3, {3, 3, 4, 0}, false, true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int vnd = cases[c].vshape[3] ? 4 : 3;
        int64_t vn = 1;
        for (int d = 0; d < vnd; d++)
            vn *= cases[c].vshape[d];
        weft_tensor *v = numbered(cases[c].vshape, vnd, 1000);
        memcpy(want, x0, sizeof want);
        reference_put(want, xs, cases[c].ref, cases[c].nb, values_of(v), cases[c].adjacent,
                      cases[c].accumulate);
        r = NULL;
        int rc = weft_index_put(&r, x, cases[c].list, cases[c].n, v, cases[c].accumulate);
        keep(r);
        if (!ok(rc == 0 && same_shape(r, xs, 4) && values_are(r, want), "%s", cases[c].what))
            diag("rc %d: %s (values %lld)", rc, rc ? weft_last_error() : "", (long long)vn);
    }

    /* a mask after a None: x[:, m] with m over dims 1 and 2 */
    double mv[12] = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0};
    weft_tensor *m = bool_tensor(INTS(3, 4), 2, mv);
    const int64_t rows[3] = {0, 1, 1}, cols[3] = {1, 0, 3};
    weft_tensor *mvals = numbered(INTS(2, 3, 5), 3, 500);
    memcpy(want, x0, sizeof want);
    reference_put(want, xs, (const int64_t *const[4]){NULL, rows, cols, NULL}, 3, values_of(mvals),
                  true, false);
    weft_tensor *mlist[2] = {NULL, m};
    r = NULL;
    ok(weft_index_put(&r, x, mlist, 2, mvals, false) == 0 && values_are(keep(r), want),
       "x[:, mask] = v with a [3, 4] mask (3 elements) after a None");

    /* values broadcast to the indexed shape [2, 2, 4, 5] */
    weft_tensor *row = numbered(INTS(5), 1, 7000), *list1[2] = {NULL, t1};
    weft_tensor *full = NULL;
    weft_expand(&full, row, INTS(2, 2, 4, 5), 4);
    keep(full);
    weft_tensor *contig = NULL;
    weft_contiguous(&contig, full);
    keep(contig);
    memcpy(want, x0, sizeof want);
    reference_put(want, xs, (const int64_t *const[4]){NULL, i1}, 2, values_of(contig), true, false);
    r = NULL;
    ok(weft_index_put(&r, x, list1, 2, row, false) == 0 && values_are(keep(r), want),
       "x[:, idx] = v with v [5] broadcast");

    /* in place on a transposed view writes through */
    weft_tensor *base = numbered(INTS(5, 3), 2, 0), *tv = NULL;
    weft_transpose(&tv, base, 0, 1); /* [3, 5] view */
    keep(tv);
    weft_tensor *ci = ints_tensor(INTS(2), 1, (int64_t[]){4, 0}), *cl[2] = {NULL, ci};
    weft_tensor *cv = numbered(INTS(3, 2), 2, 100);
    ok(weft_index_put_(tv, cl, 2, cv, false) == 0 && value_at(base, 4 * 3 + 0) == 100 &&
           value_at(base, 0 * 3 + 2) == 105 && value_at(base, 1 * 3 + 1) == 4,
       "index_put_ with a None on a transposed view writes the base");

    /* bad input */
    weft_tensor *nones[2] = {NULL, NULL}, *one = numbered(INTS(1), 1, 0);
    r = NULL;
    ok(weft_index_put(&r, x, nones, 2, one, false) == WEFT_EINVAL && r == NULL,
       "only None entries fail");
    like(weft_last_error(), "only None", "  the message says why");
    weft_tensor *toomany[5] = {NULL, NULL, NULL, NULL, t1};
    ok(weft_index_put(&r, x, toomany, 5, one, false) == WEFT_ESHAPE && r == NULL,
       "four Nones and an index for 4 dims fail");
    like(weft_last_error(), "too many indices", "  the message says why");
    weft_tensor *wrongv = numbered(INTS(2, 3), 2, 0);
    ok(weft_index_put(&r, x, list1, 2, wrongv, false) == WEFT_ESHAPE && r == NULL,
       "values that do not broadcast to the indexed shape fail");
    like(weft_last_error(), "[2, 2, 4, 5]", "  the message names the indexed shape in torch's layout");
    weft_tensor *far = ints_tensor(INTS(1), 1, (int64_t[]){3}), *farl[2] = {NULL, far};
    ok(weft_index_put_(x, farl, 2, one, false) == WEFT_ERANGE && values_are(x, x0),
       "an index out of range behind a None fails and writes nothing");
    /* None stays refused where the schema says Tensor[] */
    weft_tensor *catlist[2] = {x, NULL};
    ok(weft_cat(&r, catlist, 2, 0) == WEFT_EINVAL && r == NULL, "a NULL entry in cat's Tensor[] fails");
    like(weft_last_error(), "is NULL", "  the message says so");

    /* the boxed convention: a NULL entry in the list value */
    const weft_op *op = NULL;
    weft_op_find(&op, "index_put");
    weft_value args[4] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = x},
                          {.tag = WEFT_VALUE_TENSOR_LIST, .len = 2, .u.tensors = list1},
                          {.tag = WEFT_VALUE_TENSOR, .u.tensor = row},
                          {.tag = WEFT_VALUE_BOOL, .u.b = false}},
               ret = {0};
    int rc = weft_call_boxed(op, args, 4, &ret, 1);
    memcpy(want, x0, sizeof want);
    reference_put(want, xs, (const int64_t *const[4]){NULL, i1}, 2, values_of(contig), true, false);
    ok(rc == 0 && ret.tag == WEFT_VALUE_TENSOR && values_are(keep(ret.u.tensor), want),
       "weft_call_boxed with a NULL entry in a Tensor?[] list");
    ok(op && strstr(weft_op_schema(op), "Tensor?[] indices") != NULL, "index_put's schema says Tensor?[]");
    drop_all();
}

/* ------------------------------------------------------- scatter_reduce */

/* the plain-loop meaning along dim 0 of 1-d tensors */
static void reference_scatter_reduce(double *out, const double *self, int n, const int64_t *idx,
                                     const double *src, int m, const char *reduce, bool include)
{
    int count[16] = {0};
    for (int i = 0; i < n; i++)
        out[i] = self[i];
    for (int p = 0; p < m; p++) {
        int64_t t = idx[p];
        if (count[t] == 0 && !include) {
            out[t] = src[p];
            count[t] = 1;
            continue;
        }
        if (count[t] == 0)
            count[t] = 1;
        if (!strcmp(reduce, "sum") || !strcmp(reduce, "mean"))
            out[t] += src[p];
        else if (!strcmp(reduce, "prod"))
            out[t] *= src[p];
        else if (!strcmp(reduce, "amax"))
            out[t] = out[t] > src[p] ? out[t] : src[p];
        else
            out[t] = out[t] < src[p] ? out[t] : src[p];
        count[t]++;
    }
    if (!strcmp(reduce, "mean"))
        for (int i = 0; i < n; i++)
            if (count[i] > 1)
                out[i] /= count[i];
}

static void test_scatter_reduce(void)
{
    static const char *const reduces[] = {"sum", "prod", "mean", "amax", "amin"};
    const double self_v[5] = {1, 2, 3, 4, 5}, src_v[6] = {2, -3, 4, 0.5, 6, -1};
    const int64_t idx_v[6] = {0, 0, 2, 4, 2, 0};
    weft_tensor *self = make(WEFT_FLOAT64, INTS(5), 1, self_v);
    weft_tensor *src = make(WEFT_FLOAT64, INTS(6), 1, src_v);
    weft_tensor *idx = ints_tensor(INTS(6), 1, idx_v);
    for (int k = 0; k < 5; k++)
        for (int inc = 0; inc < 2; inc++) {
            double want[5];
            reference_scatter_reduce(want, self_v, 5, idx_v, src_v, 6, reduces[k], inc);
            weft_tensor *r = NULL;
            int rc = weft_scatter_reduce_ex(&r, self, 0, idx, src, reduces[k], inc);
            bool good = rc == 0 && values_of(keep(r));
            const double *v = good ? values_of(r) : NULL;
            for (int i = 0; good && i < 5; i++)
                good = fabs(v[i] - want[i]) < 1e-12;
            ok(good, "scatter_reduce %s include_self=%d matches the reference", reduces[k], inc);
        }
    /* integers: mean floors, prod wraps like torch; 2-d along dim 1 */
    weft_tensor *xi = make(WEFT_INT32, INTS(2, 3), 2, (double[]){1, 1, 1, -7, 0, 0});
    weft_tensor *si = make(WEFT_INT32, INTS(2, 2), 2, (double[]){2, 2, 0, 0});
    weft_tensor *ii = ints_tensor(INTS(2, 2), 2, (int64_t[]){0, 0, 0, 2});
    weft_tensor *r = NULL;
    ok(weft_scatter_reduce_ex(&r, xi, 1, ii, si, "mean", true) == 0 &&
           values_are(keep(r), (double[]){1, 1, 1, -4, 0, 0}),
       "int32 mean along dim 1: (1+2+2)/3 = 1, floor(-7/2) = -4");
    /* NaN propagates through amax */
    weft_tensor *fn = make(WEFT_FLOAT32, INTS(2), 1, (double[]){1, 1});
    weft_tensor *sn = make(WEFT_FLOAT32, INTS(2), 1, (double[]){NAN, 5});
    weft_tensor *in = ints_tensor(INTS(2), 1, (int64_t[]){0, 1});
    ok(weft_scatter_reduce_ex(&r, fn, 0, in, sn, "amax", true) == 0 &&
           values_are(keep(r), (double[]){NAN, 5}),
       "amax propagates NaN");
    /* in place, bfloat16 */
    weft_tensor *bf = make(WEFT_BFLOAT16, INTS(3), 1, (double[]){1, 2, 3});
    weft_tensor *sb = make(WEFT_BFLOAT16, INTS(2), 1, (double[]){4, 8});
    weft_tensor *ib = ints_tensor(INTS(2), 1, (int64_t[]){2, 2});
    ok(weft_scatter_reduce_ex_(bf, 0, ib, sb, "prod", false) == 0 &&
           values_are(bf, (double[]){1, 2, 32}),
       "scatter_reduce_ prod without self, bfloat16");
    /* bad input */
    ok(weft_scatter_reduce(&r, self, 0, idx, src, "max") == WEFT_EINVAL && r == NULL,
       "reduce 'max' is refused");
    like(weft_last_error(), "sum, prod, mean, amax, amin", "  the message lists the choices");
    weft_tensor *far = ints_tensor(INTS(1), 1, (int64_t[]){5});
    ok(weft_scatter_reduce(&r, self, 0, far, src, "sum") == WEFT_ERANGE, "index 5 of 5 fails");
    ok(weft_scatter_reduce(&r, self, 0, idx, fn, "sum") == WEFT_EDTYPE, "src of another dtype fails");
    weft_tensor *bools = make(WEFT_BOOL, INTS(2), 1, (double[]){1, 0});
    ok(weft_scatter_reduce(&r, bools, 0, in, bools, "sum") == WEFT_EDTYPE, "bool is not supported");
    weft_tensor *idx2 = ints_tensor(INTS(1, 1), 2, (int64_t[]){0});
    ok(weft_scatter_reduce(&r, self, 0, idx2, src, "sum") == WEFT_ESHAPE, "an index of another rank");
    drop_all();
}

/* --------------------------------------------------------------- unique */

static void test_unique(void)
{
    weft_tensor *x = make(WEFT_INT64, INTS(2, 4), 2, (double[]){3, 1, 3, -2, 1, 7, 3, 1});
    weft_tensor *u = NULL, *inv = NULL, *cnt = NULL;
    ok(weft_unique(&u, &inv, &cnt, x, true, true, true, NULL) == 0, "unique of int64 [2, 4]");
    keep(u), keep(inv), keep(cnt);
    ok(same_shape(u, INTS(4), 1) && values_are(u, (double[]){-2, 1, 3, 7}), "  sorted values");
    ok(same_shape(inv, INTS(2, 4), 2) && values_are(inv, (double[]){2, 1, 2, 0, 1, 3, 2, 1}),
       "  inverse shaped like the input");
    ok(values_are(cnt, (double[]){1, 3, 3, 1}), "  counts");
    ok(weft_unique(&u, &inv, &cnt, x, true, false, false, NULL) == 0 &&
           weft_tensor_numel(keep(inv)) == 0 && weft_tensor_numel(keep(cnt)) == 0,
       "inverse and counts are empty unless asked for");
    keep(u);
    /* floats with NaN and -0.0, non-contiguous */
    weft_tensor *f = make(WEFT_FLOAT32, INTS(3, 2), 2, (double[]){0.5, NAN, -0.0, 0.5, 0.0, NAN}), *ft = NULL;
    weft_transpose(&ft, f, 0, 1);
    keep(ft);
    ok(weft_unique(&u, &inv, &cnt, ft, true, true, true, NULL) == 0 &&
           values_are(keep(u), (double[]){0, 0.5, NAN, NAN}),
       "float32: -0.0 equals 0.0, each NaN is its own entry, last");
    keep(inv), keep(cnt);
    ok(values_are(cnt, (double[]){2, 2, 1, 1}), "  counts 2 2 1 1");
    /* inverse reconstructs the input: u[inv] == x */
    weft_tensor *big = NULL, *back = NULL, *eq = NULL;
    weft_randint(&big, -50, 50, INTS(1000), 1, WEFT_INT32, WEFT_DEVICE_CPU, NULL);
    keep(big);
    weft_unique(&u, &inv, &cnt, big, true, true, true, NULL);
    keep(u), keep(inv), keep(cnt);
    weft_take(&back, u, inv);
    weft_eq(&eq, keep(back), big);
    double all = 0, total = 0;
    weft_tensor *t = NULL;
    weft_all(&t, keep(eq), NULL, 0, false);
    weft_tensor_item(keep(t), &all);
    weft_sum(&t, cnt, NULL, 0, false);
    weft_tensor_item(keep(t), &total);
    const double *uv = values_of(u);
    bool increasing = true;
    for (int64_t i = 1; i < weft_tensor_numel(u); i++)
        increasing &= uv[i] > uv[i - 1];
    ok(all == 1 && total == 1000 && increasing, "random int32: strictly increasing, u[inverse] == x, "
       "counts add up");
    /* edge cases */
    weft_tensor *e = iota(WEFT_FLOAT64, INTS(0), 1);
    ok(weft_unique(&u, &inv, &cnt, e, true, true, true, NULL) == 0 && weft_tensor_numel(keep(u)) == 0,
       "unique of an empty tensor");
    keep(inv), keep(cnt);
    weft_tensor *b = make(WEFT_BOOL, INTS(3), 1, (double[]){1, 1, 1});
    ok(weft_unique(&u, &inv, &cnt, b, true, false, true, NULL) == 0 &&
           values_are(keep(u), (double[]){1}) && values_are(keep(cnt), (double[]){3}),
       "unique of bools");
    keep(inv);
    weft_tensor *z = make(WEFT_FLOAT16, NULL, 0, (double[]){2});
    ok(weft_unique(&u, &inv, &cnt, z, true, true, false, NULL) == 0 && same_shape(keep(u), INTS(1), 1) &&
           same_shape(keep(inv), NULL, 0),
       "unique of a 0-d float16: inverse is 0-d");
    keep(cnt);
    /* along a dim: distinct rows / columns, sorted lexicographically */
    weft_tensor *m = make(WEFT_INT32, INTS(4, 3), 2,
                          (double[]){2, 0, 1, 1, 5, 5, 2, 0, 1, 1, 5, 4});
    ok(weft_unique(&u, &inv, &cnt, m, true, true, true, INTS(0)) == 0 &&
           same_shape(keep(u), INTS(3, 3), 2) &&
           values_are(u, (double[]){1, 5, 4, 1, 5, 5, 2, 0, 1}),
       "unique(dim=0) of int32 [4, 3]: 3 distinct rows, sorted");
    keep(inv), keep(cnt);
    ok(values_are(inv, (double[]){2, 1, 2, 0}) && values_are(cnt, (double[]){1, 1, 2}),
       "  inverse [4] and counts");
    weft_tensor *mt = NULL;
    weft_transpose(&mt, m, 0, 1);
    keep(mt);
    ok(weft_unique(&u, &inv, &cnt, mt, true, true, false, INTS(-1)) == 0 &&
           same_shape(keep(u), INTS(3, 3), 2) && values_are(keep(inv), (double[]){2, 1, 2, 0}),
       "unique(dim=-1) of the transpose: the same, as columns");
    keep(cnt);
    weft_tensor *fr = make(WEFT_FLOAT64, INTS(3, 2), 2, (double[]){NAN, 1, NAN, 1, 0, 1});
    ok(weft_unique(&u, &inv, &cnt, fr, true, false, true, INTS(0)) == 0 &&
           weft_tensor_size(keep(u), 0) == 3 && values_are(keep(cnt), (double[]){1, 1, 1}),
       "unique(dim=0): rows holding NaN equal no other row");
    keep(inv);
    weft_tensor *s0 = make(WEFT_FLOAT32, NULL, 0, (double[]){1});
    ok(weft_unique(&u, &inv, &cnt, s0, true, false, false, INTS(0)) == WEFT_ESHAPE && u == NULL,
       "unique with a dim of a 0-d tensor fails");
    ok(weft_unique(&u, &inv, &cnt, x, true, false, false, INTS(2)) == WEFT_ERANGE,
       "unique with dim out of range fails");
    weft_tensor *c = iota(WEFT_COMPLEX64, INTS(2), 1);
    ok(weft_unique(&u, &inv, &cnt, c, true, false, false, NULL) == WEFT_EDTYPE, "complex fails");
    drop_all();
}

/* ------------------------------------------------------------ gradients */

enum grad2_case { G_TILE, G_TAKE, G_INDEX_PUT, G_INDEX_PUT_ACC, G_INDEX_PUT_INPLACE, G_SR_SUM,
                  G_SR_SUM_EX, G_SR_MEAN, G_SR_MEAN_EX, G_SR_AMAX, G_SR_AMIN_EX, G_SR_AMAX_INPLACE,
                  G2_COUNT };
static const char *const grad2_names[] = {
    "tile", "take", "index_put", "index_put accumulate", "index_put_ accumulate on a copy",
    "scatter_reduce sum", "scatter_reduce sum without self", "scatter_reduce mean",
    "scatter_reduce mean without self", "scatter_reduce amax", "scatter_reduce amin without self",
    "scatter_reduce_ amax on a copy"};

/* in place on a non-leaf copy of in[0] */
static int inplace_on_copy(weft_tensor **out, weft_tensor *const *in, enum grad2_case c);
static weft_tensor *g_sr_index;
static weft_tensor *g_take_index, *g_put_index;

static int apply_grad2(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    switch ((enum grad2_case)(intptr_t)ctx) {
    case G_TILE:
        return weft_tile(out, in[0], INTS(2, 1, 2), 3);
    case G_TAKE:
        return weft_take(out, in[0], g_take_index);
    case G_INDEX_PUT:
        return weft_index_put(out, in[0], &g_put_index, 1, in[1], false);
    case G_INDEX_PUT_ACC:
        return weft_index_put(out, in[0], &g_put_index, 1, in[1], true);
    case G_SR_SUM:
    case G_SR_SUM_EX:
        return weft_scatter_reduce_ex(out, in[0], 1, g_sr_index, in[1], "sum",
                                      (intptr_t)ctx == G_SR_SUM);
    case G_SR_MEAN:
    case G_SR_MEAN_EX:
        return weft_scatter_reduce_ex(out, in[0], -1, g_sr_index, in[1], "mean",
                                      (intptr_t)ctx == G_SR_MEAN);
    case G_SR_AMAX:
        return weft_scatter_reduce_ex(out, in[0], 1, g_sr_index, in[1], "amax", true);
    case G_INDEX_PUT_INPLACE:
    case G_SR_AMAX_INPLACE:
        return inplace_on_copy(out, in, (enum grad2_case)(intptr_t)ctx);
    default:
        return weft_scatter_reduce_ex(out, in[0], 1, g_sr_index, in[1], "amin", false);
    }
}

static int inplace_on_copy(weft_tensor **out, weft_tensor *const *in, enum grad2_case c)
{
    weft_tensor *copy = NULL;
    int rc = weft_mul_scalar(&copy, in[0], 2.0);
    if (rc == 0)
        rc = c == G_INDEX_PUT_INPLACE
                 ? weft_index_put_(copy, &g_put_index, 1, in[1], true)
                 : weft_scatter_reduce_ex_(copy, 1, g_sr_index, in[1], "amax", true);
    if (rc == 0)
        *out = copy;
    else
        weft_tensor_release(copy);
    return rc;
}

static void test_gradients2(void)
{
    weft_tensor *x = make(WEFT_FLOAT64, INTS(3, 2), 2, (double[]){0.5, -1, 2, 0.25, 3, 1});
    weft_tensor *v = make(WEFT_FLOAT64, INTS(2), 1, (double[]){1.5, -0.5});
    weft_tensor_set_requires_grad(x, true);
    weft_tensor_set_requires_grad(v, true);
    g_take_index = ints_tensor(INTS(2, 2), 2, (int64_t[]){0, 5, -1, 3});
    g_put_index = ints_tensor(INTS(3), 1, (int64_t[]){2, 0, 2});
    /* distinct values everywhere, so amax/amin have no ties */
    weft_tensor *src2 = make(WEFT_FLOAT64, INTS(3, 2), 2, (double[]){0.75, 2.5, -3, 1.25, 0.1, 4});
    weft_tensor_set_requires_grad(src2, true);
    g_sr_index = ints_tensor(INTS(3, 2), 2, (int64_t[]){0, 0, 1, 0, 1, 1});
    for (int c = 0; c < G2_COUNT; c++) {
        weft_tensor *in[2] = {x, v};
        int n = c >= G_INDEX_PUT ? 2 : 1;
        if (c == G_INDEX_PUT) /* duplicates make the plain put's gradient ill-defined */
            g_put_index = ints_tensor(INTS(2), 1, (int64_t[]){2, 0});
        if (c == G_INDEX_PUT_ACC)
            g_put_index = ints_tensor(INTS(3), 1, (int64_t[]){2, 0, 2});
        if (c == G_INDEX_PUT_INPLACE)
            g_put_index = ints_tensor(INTS(3), 1, (int64_t[]){2, 0, 2});
        if (c >= G_SR_SUM) {
            in[1] = src2;
            n = 2;
        }
        int rc = weft_gradcheck(apply_grad2, (void *)(intptr_t)c, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", grad2_names[c]))
            diag("%s", weft_last_error());
    }
    weft_tensor *r = NULL;
    ok(weft_scatter_reduce(&r, x, 1, g_sr_index, src2, "prod") == WEFT_ENOTSUP && r == NULL,
       "scatter_reduce prod with grad: refused clearly");
    like(weft_last_error(), "prod", "  the message names the reduction");
    drop_all();
}

int main(void)
{
    int loaded = weft_load_default_plugins();
    if (!ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return done_testing();
    test_split_family();
    test_split_grad();
    test_list_schema();
    test_tile_take();
    test_index_put();
    test_index_put_none();
    test_index_put_none_grad();
    test_scatter_reduce();
    test_unique();
    test_gradients2();
    return done_testing();
}
