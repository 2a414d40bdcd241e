/* c10/dtype.c — the twelve dtypes: names, sizes, categories and PyTorch's
 * type promotion lattice. */
#include <string.h>

#include "c10/core.h"

static const struct {
    const char *name;
    const char *alias; /* PyTorch's other name, or NULL */
    size_t size;
} dtype_info[WEFT_NUM_DTYPES] = {
    [WEFT_BOOL] = {"bool", NULL, 1},
    [WEFT_UINT8] = {"uint8", NULL, 1},
    [WEFT_INT8] = {"int8", NULL, 1},
    [WEFT_INT16] = {"int16", "short", 2},
    [WEFT_INT32] = {"int32", "int", 4},
    [WEFT_INT64] = {"int64", "long", 8},
    [WEFT_FLOAT16] = {"float16", "half", 2},
    [WEFT_BFLOAT16] = {"bfloat16", NULL, 2},
    [WEFT_FLOAT32] = {"float32", "float", 4},
    [WEFT_FLOAT64] = {"float64", "double", 8},
    [WEFT_COMPLEX64] = {"complex64", "cfloat", 8},
    [WEFT_COMPLEX128] = {"complex128", "cdouble", 16},
};

static bool valid(weft_dtype d)
{
    return (int)d >= 0 && d < WEFT_NUM_DTYPES;
}

WEFT_API const char *weft_dtype_name(weft_dtype dtype)
{
    return valid(dtype) ? dtype_info[dtype].name : "invalid";
}

WEFT_API weft_dtype weft_dtype_from_name(const char *name)
{
    if (!name)
        return WEFT_DTYPE_UNSET;
    if (strncmp(name, "torch.", 6) == 0 || strncmp(name, "weft.", 5) == 0)
        name = strchr(name, '.') + 1;
    for (int d = 0; d < WEFT_NUM_DTYPES; d++)
        if (strcmp(name, dtype_info[d].name) == 0 ||
            (dtype_info[d].alias && strcmp(name, dtype_info[d].alias) == 0))
            return (weft_dtype)d;
    return WEFT_DTYPE_UNSET;
}

WEFT_API size_t weft_dtype_size(weft_dtype dtype)
{
    return valid(dtype) ? dtype_info[dtype].size : 0;
}

WEFT_API bool weft_dtype_is_floating(weft_dtype d)
{
    return d == WEFT_FLOAT16 || d == WEFT_BFLOAT16 || d == WEFT_FLOAT32 || d == WEFT_FLOAT64;
}

WEFT_API bool weft_dtype_is_complex(weft_dtype d)
{
    return d == WEFT_COMPLEX64 || d == WEFT_COMPLEX128;
}

WEFT_API bool weft_dtype_is_integral(weft_dtype d, bool include_bool)
{
    if (d == WEFT_BOOL)
        return include_bool;
    return d >= WEFT_UINT8 && d <= WEFT_INT64;
}

/* PyTorch's promotion table (c10/core/ScalarType.h), rows and columns in
 * weft_dtype order: b u1 i1 i2 i4 i8 f2 bf f4 f8 c4 c8. */
enum { b1 = WEFT_BOOL, u1 = WEFT_UINT8, i1 = WEFT_INT8, i2 = WEFT_INT16, i4 = WEFT_INT32,
       i8 = WEFT_INT64, f2 = WEFT_FLOAT16, bf = WEFT_BFLOAT16, f4 = WEFT_FLOAT32,
       f8 = WEFT_FLOAT64, c4 = WEFT_COMPLEX64, c8 = WEFT_COMPLEX128 };

static const signed char promotion[WEFT_NUM_DTYPES][WEFT_NUM_DTYPES] = {
    /*        b1  u1  i1  i2  i4  i8  f2  bf  f4  f8  c4  c8 */
    /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8},
    /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
    /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8},
    /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
    /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8, c4, c8},
    /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8, c4, c8},
    /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8, c4, c8},
    /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8, c4, c8},
    /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8, c4, c8},
    /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, c8, c8},
    /* c4 */ {c4, c4, c4, c4, c4, c4, c4, c4, c4, c8, c4, c8},
    /* c8 */ {c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8},
};

WEFT_API weft_dtype weft_promote_types(weft_dtype a, weft_dtype b)
{
    if (!valid(a) || !valid(b))
        return WEFT_DTYPE_UNSET;
    return (weft_dtype)promotion[a][b];
}

/* torch's combine_categories: `lower` (the zero-dim tensors' dtype) counts
 * only where its category is above `higher`'s (the dimensioned ones') */
static weft_dtype combine_categories(weft_dtype higher, weft_dtype lower)
{
    if (higher == WEFT_DTYPE_UNSET)
        return lower;
    if (lower == WEFT_DTYPE_UNSET || weft_dtype_is_complex(higher))
        return higher;
    if (weft_dtype_is_floating(higher))
        return !weft_dtype_is_complex(lower) ? higher
               : higher == WEFT_FLOAT64      ? WEFT_COMPLEX128
                                             : WEFT_COMPLEX64;
    if (higher == WEFT_BOOL || weft_dtype_is_floating(lower) || weft_dtype_is_complex(lower))
        return weft_promote_types(higher, lower);
    return higher;
}

WEFT_API weft_dtype weft_result_type(const weft_tensor *const *ts, int n)
{
    weft_dtype dim = WEFT_DTYPE_UNSET, zero = WEFT_DTYPE_UNSET;
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        weft_dtype d = weft_tensor_dtype(ts[i]);
        if (!valid(d))
            return WEFT_DTYPE_UNSET;
        weft_dtype *acc = weft_tensor_ndim(ts[i]) == 0 ? &zero : &dim;
        *acc = *acc == WEFT_DTYPE_UNSET ? d : weft_promote_types(*acc, d);
    }
    return combine_categories(dim, zero);
}

WEFT_API bool weft_can_cast(weft_dtype from, weft_dtype to)
{
    if (!valid(from) || !valid(to))
        return false;
    if (weft_dtype_is_complex(from) && !weft_dtype_is_complex(to))
        return false;
    if (weft_dtype_is_floating(from) && weft_dtype_is_integral(to, true))
        return false;
    if (from != WEFT_BOOL && to == WEFT_BOOL)
        return false;
    return true;
}
