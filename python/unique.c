/* unique.c — weft.unique and Tensor.unique return what torch.unique
 * returns: the values alone, or a tuple of the values and the inverse
 * and/or the counts, in that order, as asked.  The operator always returns
 * all three (as ATen's _unique2 does), the ones not asked for empty; the
 * generic binding of ops.c would hand back that triple. */
#include "weftpy.h"

static PyObject *unique(PyObject *input, PyObject *args, PyObject *kwargs, char **kwlist,
                        const char *format)
{
    int sorted = 1, inverse = 0, counts = 0;
    PyObject *dim = Py_None;
    int ok = input ? PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, &sorted, &inverse,
                                                 &counts, &dim)
                   : PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, wpy_tensor_type,
                                                 &input, &sorted, &inverse, &counts, &dim);
    if (!ok)
        return NULL;
    weft_value boxed[5] = {
        {.tag = WEFT_VALUE_TENSOR, .u.tensor = WPY_T(input)},
        {.tag = WEFT_VALUE_BOOL, .u.b = sorted},
        {.tag = WEFT_VALUE_BOOL, .u.b = inverse},
        {.tag = WEFT_VALUE_BOOL, .u.b = counts},
        {.tag = WEFT_VALUE_NONE},
    };
    if (dim != Py_None) {
        long long d = PyLong_AsLongLong(dim);
        if (d == -1 && PyErr_Occurred())
            return NULL;
        boxed[4].tag = WEFT_VALUE_INT;
        boxed[4].u.i = d;
    }
    PyObject *all = wpy_call_op("unique", boxed, 5);
    if (!all)
        return NULL;
    PyObject *r;
    if (!inverse && !counts) {
        r = PyTuple_GET_ITEM(all, 0);
        Py_INCREF(r);
    } else if (inverse && counts) {
        r = all;
        Py_INCREF(r);
    } else {
        r = PyTuple_Pack(2, PyTuple_GET_ITEM(all, 0), PyTuple_GET_ITEM(all, inverse ? 1 : 2));
    }
    Py_DECREF(all);
    return r;
}

PyObject *wpy_unique(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"input", "sorted", "return_inverse", "return_counts", "dim", NULL};
    (void)module;
    return unique(NULL, args, kwargs, kwlist, "O!|pppO");
}

PyObject *wpy_tensor_unique(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"sorted", "return_inverse", "return_counts", "dim", NULL};
    return unique(self, args, kwargs, kwlist, "|pppO");
}
