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

int main(void)
{
    int loaded = weft_load_default_plugins();
    if (!ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return done_testing();
    test_split_family();
    test_split_grad();
    test_list_schema();
    return done_testing();
}
