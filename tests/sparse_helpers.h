/* tests/sparse_helpers.h — what the sparse plugins' test programs
 * (test_sparse.c, test_sparse_cuda.c) share: boxed argument constructors
 * and calling the plugins' operators by name through weft_call_boxed, as
 * an application that does not link the plugins reaches them. */
#ifndef WEFT_TESTS_SPARSE_HELPERS_H
#define WEFT_TESTS_SPARSE_HELPERS_H

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tap.h"

#define TV(x) ((weft_value){.tag = WEFT_VALUE_TENSOR, .u.tensor = (x)})
#define IV(x) ((weft_value){.tag = WEFT_VALUE_INT, .u.i = (x)})
#define BV(x) ((weft_value){.tag = WEFT_VALUE_BOOL, .u.b = (x)})
#define DV(x) ((weft_value){.tag = WEFT_VALUE_DOUBLE, .u.d = (x)})
#define LV(p, n) ((weft_value){.tag = WEFT_VALUE_INT_LIST, .len = (n), .u.ints = (p)})

/* the operator `name` on args[0..n): its one result in *out */
static inline int callop(weft_tensor **out, const char *name, const weft_value *args, int n)
{
    const weft_op *op;
    int rc = weft_op_find(&op, name);
    if (rc < 0)
        return rc;
    weft_value ret = {0};
    rc = weft_call_boxed(op, args, n, &ret, 1);
    if (rc == 0)
        *out = ret.u.tensor;
    return rc;
}

/* name(t), or NULL with the error in the log */
static inline weft_tensor *call1(const char *name, weft_tensor *t)
{
    weft_tensor *out = NULL;
    weft_value a[] = {TV(t)};
    if (callop(&out, name, a, 1) < 0)
        diag("%s: %s", name, weft_last_error());
    return out;
}

#endif /* WEFT_TESTS_SPARSE_HELPERS_H */
