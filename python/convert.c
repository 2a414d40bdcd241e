/* convert.c — Python numbers and nested lists to tensors and back:
 * weft.tensor(), Tensor.tolist(), Tensor.item(), and the scalars of the
 * Python operators. */
#include "weftpy.h"

#include <complex.h>
#include <string.h>

int wpy_scalar_value(PyObject *o, weft_value *v)
{
    v->len = 0;
    if (PyBool_Check(o)) {
        v->tag = WEFT_VALUE_BOOL;
        v->u.b = o == Py_True;
        return 0;
    }
    if (PyLong_Check(o)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            v->tag = WEFT_VALUE_DOUBLE;
            v->u.d = PyLong_AsDouble(o);
            PyErr_Clear();
            return 0;
        }
        v->tag = WEFT_VALUE_INT;
        v->u.i = x;
        return 0;
    }
    if (PyFloat_Check(o)) {
        v->tag = WEFT_VALUE_DOUBLE;
        v->u.d = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    return -1;
}

weft_tensor *wpy_scalar_tensor_like(PyObject *o, const weft_tensor *t)
{
    weft_dtype td = weft_tensor_dtype(t), d = td;
    bool integral = weft_dtype_is_integral(td, true);
    if (PyFloat_Check(o) && integral)
        d = WEFT_FLOAT32;
    else if (PyLong_Check(o) && !PyBool_Check(o) && td == WEFT_BOOL)
        d = WEFT_INT64;
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    weft_tensor *out = NULL;
    int rc = weft_full(&out, NULL, 0, v, d, weft_tensor_device(t));
    if (rc < 0)
        wpy_raise(rc);
    return out;
}

/* ------------------------------------------------------------ weft.tensor */

enum kind { K_NONE, K_BOOL, K_INT, K_FLOAT, K_COMPLEX };

typedef struct {
    int ndim;
    int64_t sizes[WEFT_MAX_DIMS];
    enum kind kind;
    int64_t count;
} data_shape;

static bool is_number(PyObject *o)
{
    return PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o) ||
           (wpy_tensor_check(o) && weft_tensor_ndim(WPY_T(o)) == 0);
}

static enum kind kind_of(PyObject *o)
{
    if (wpy_tensor_check(o)) {
        weft_dtype d = weft_tensor_dtype(WPY_T(o));
        return d == WEFT_BOOL                    ? K_BOOL
               : weft_dtype_is_integral(d, false) ? K_INT
               : weft_dtype_is_complex(d)         ? K_COMPLEX
                                                  : K_FLOAT;
    }
    return PyBool_Check(o)    ? K_BOOL
           : PyLong_Check(o)  ? K_INT
           : PyFloat_Check(o) ? K_FLOAT
                              : K_COMPLEX;
}

/* Finds the shape from the first element at each depth, then checks every
 * sequence against it while finding the widest kind of number. */
static int scan(PyObject *o, int depth, data_shape *s)
{
    if (is_number(o)) {
        if (depth != s->ndim) {
            PyErr_Format(PyExc_ValueError, "expected sequence of length %lld at dim %d (got a "
                         "number)", (long long)s->sizes[depth], depth);
            return -1;
        }
        enum kind k = kind_of(o);
        if (k > s->kind)
            s->kind = k;
        return 0;
    }
    if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "Could not infer dtype of %.200s", Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Size(o);
    if (n < 0)
        return -1;
    if (depth == s->ndim) {
        if (depth == WEFT_MAX_DIMS) {
            PyErr_SetString(PyExc_ValueError, "too many dimensions");
            return -1;
        }
        s->sizes[s->ndim++] = n;
    } else if (depth > s->ndim || s->sizes[depth] != n) {
        PyErr_Format(PyExc_ValueError, "expected sequence of length %lld at dim %d (got %zd)",
                     depth < s->ndim ? (long long)s->sizes[depth] : 0LL, depth, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(o, i);
        if (!item)
            return -1;
        int rc = scan(item, depth + 1, s);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The number o as the buffer's element type (int64, float64 or complex128;
 * bool as one byte). */
static int store(PyObject *o, enum kind k, char **p)
{
    PyObject *owned = NULL;
    if (wpy_tensor_check(o)) {
        owned = wpy_tensor_item(o, NULL);
        if (!owned)
            return -1;
        o = owned;
    }
    int rc = 0;
    switch (k) {
    case K_BOOL:
        **p = (char)(o == Py_True);
        *p += 1;
        break;
    case K_INT: {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred())
            rc = -1;
        memcpy(*p, &(int64_t){v}, 8);
        *p += 8;
        break;
    }
    case K_FLOAT: {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred())
            rc = -1;
        memcpy(*p, &v, 8);
        *p += 8;
        break;
    }
    default: {
        Py_complex c = PyComplex_AsCComplex(o);
        if (c.real == -1.0 && PyErr_Occurred())
            rc = -1;
        double v[2] = {c.real, c.imag};
        memcpy(*p, v, 16);
        *p += 16;
        break;
    }
    }
    Py_XDECREF(owned);
    return rc;
}

static int fill(PyObject *o, enum kind k, char **p)
{
    if (is_number(o))
        return store(o, k, p);
    Py_ssize_t n = PySequence_Size(o);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(o, i);
        if (!item)
            return -1;
        int rc = fill(item, k, p);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static const weft_dtype buffer_dtype[] = {[K_NONE] = WEFT_FLOAT32, [K_BOOL] = WEFT_BOOL,
                                          [K_INT] = WEFT_INT64, [K_FLOAT] = WEFT_FLOAT64,
                                          [K_COMPLEX] = WEFT_COMPLEX128};
static const weft_dtype default_dtype[] = {[K_NONE] = WEFT_FLOAT32, [K_BOOL] = WEFT_BOOL,
                                           [K_INT] = WEFT_INT64, [K_FLOAT] = WEFT_FLOAT32,
                                           [K_COMPLEX] = WEFT_COMPLEX64};

/* A copy of an object with __dlpack__ (or the buffer protocol through
 * NumPy-like producers) converted to dtype. */
static int from_exchange(weft_tensor **out, PyObject *data, weft_dtype dtype)
{
    PyObject *args = PyTuple_Pack(1, data);
    if (!args)
        return -1;
    PyObject *shared = wpy_from_dlpack(NULL, args, NULL);
    Py_DECREF(args);
    if (!shared)
        return -1;
    weft_tensor *t = WPY_T(shared);
    int rc = weft_to_dtype(out, t, dtype == WEFT_DTYPE_UNSET ? weft_tensor_dtype(t) : dtype);
    Py_DECREF(shared);
    return rc < 0 ? wpy_raise_int(rc) : 0;
}

PyObject *wpy_tensor_from_data(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "dtype", "device", "requires_grad", NULL};
    PyObject *data, *dtype_o = NULL, *device_o = NULL;
    int requires_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOp", kwlist, &data, &dtype_o, &device_o,
                                     &requires_grad))
        return NULL;
    weft_dtype dtype;
    weft_device device;
    if (wpy_parse_dtype(dtype_o, &dtype) < 0 || wpy_parse_device(device_o, &device) < 0)
        return NULL;
    weft_tensor *t = NULL, *host = NULL;
    int rc = 0;
    if (wpy_tensor_check(data) && weft_tensor_ndim(WPY_T(data)) > 0) {
        weft_tensor *src = WPY_T(data);
        rc = weft_to_dtype(&host, src, dtype == WEFT_DTYPE_UNSET ? weft_tensor_dtype(src) : dtype);
        if (rc < 0)
            return wpy_raise(rc);
    } else if (!is_number(data) && PyObject_HasAttrString(data, "__dlpack__")) {
        if (from_exchange(&host, data, dtype) < 0)
            return NULL;
    } else {
        data_shape s = {0};
        if (scan(data, 0, &s) < 0)
            return NULL;
        weft_dtype bd = buffer_dtype[s.kind];
        rc = weft_empty(&t, s.sizes, s.ndim, bd, WEFT_DEVICE_CPU);
        if (rc < 0)
            return wpy_raise(rc);
        char *p = weft_tensor_data_ptr(t);
        if (weft_tensor_numel(t) > 0 && fill(data, s.kind, &p) < 0) {
            weft_tensor_release(t);
            return NULL;
        }
        rc = weft_to_dtype(&host, t, dtype == WEFT_DTYPE_UNSET ? default_dtype[s.kind] : dtype);
        weft_tensor_release(t);
        if (rc < 0)
            return wpy_raise(rc);
    }
    rc = weft_to_device(&t, host, device);
    weft_tensor_release(host);
    return wpy_factory_result(rc, t, requires_grad);
}

/* ------------------------------------------------------- tolist and item */

/* One element at p as a Python number. */
static PyObject *element(const char *p, weft_dtype d)
{
    switch (d) {
    case WEFT_BOOL: return PyBool_FromLong(*(const uint8_t *)p != 0);
    case WEFT_UINT8: return PyLong_FromLong(*(const uint8_t *)p);
    case WEFT_INT8: return PyLong_FromLong(*(const int8_t *)p);
    case WEFT_INT16: return PyLong_FromLong(*(const int16_t *)p);
    case WEFT_INT32: return PyLong_FromLong(*(const int32_t *)p);
    case WEFT_INT64: return PyLong_FromLongLong(*(const int64_t *)p);
    case WEFT_FLOAT32: return PyFloat_FromDouble(*(const float *)p);
    case WEFT_FLOAT64: return PyFloat_FromDouble(*(const double *)p);
    case WEFT_COMPLEX64: {
        const float *f = (const float *)p;
        return PyComplex_FromDoubles(f[0], f[1]);
    }
    case WEFT_COMPLEX128: {
        const double *f = (const double *)p;
        return PyComplex_FromDoubles(f[0], f[1]);
    }
    default:
        return PyErr_Format(PyExc_TypeError, "no Python number for %s", weft_dtype_name(d));
    }
}

static PyObject *nested(const weft_tensor *t, const char *p, int dim, size_t itemsize)
{
    weft_dtype d = weft_tensor_dtype(t);
    if (dim == weft_tensor_ndim(t))
        return element(p, d);
    int64_t n = weft_tensor_sizes(t)[dim], stride = weft_tensor_strides(t)[dim];
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        PyObject *item = nested(t, p + i * stride * (int64_t)itemsize, dim + 1, itemsize);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* A host tensor whose elements have a Python type: half precision is
 * widened to float32. */
static int readable(weft_tensor **out, weft_tensor *t)
{
    int rc;
    weft_tensor *host = NULL;
    if ((rc = weft_to_device(&host, t, WEFT_DEVICE_CPU)) < 0)
        return wpy_raise_int(rc);
    /* a plugin layout (sparse) moves between devices as itself: its
     * elements are read from its strided form (tolist on a sparse tensor
     * read a NULL data pointer: found by fuzz_python_ops) */
    if (weft_tensor_layout(host) != WEFT_LAYOUT_STRIDED) {
        weft_tensor *dense = NULL;
        rc = weft_to_strided(&dense, host);
        weft_tensor_release(host);
        if (rc < 0)
            return wpy_raise_int(rc);
        host = dense;
    }
    weft_dtype d = weft_tensor_dtype(host);
    if (d == WEFT_FLOAT16 || d == WEFT_BFLOAT16) {
        rc = weft_to_dtype(out, host, WEFT_FLOAT32);
        weft_tensor_release(host);
        return rc < 0 ? wpy_raise_int(rc) : 0;
    }
    *out = host;
    return 0;
}

PyObject *wpy_tensor_tolist(PyObject *self, PyObject *unused)
{
    weft_tensor *t;
    if (readable(&t, WPY_T(self)) < 0)
        return NULL;
    PyObject *r = nested(t, weft_tensor_data_ptr(t), 0, weft_dtype_size(weft_tensor_dtype(t)));
    weft_tensor_release(t);
    return r;
}

PyObject *wpy_tensor_item(PyObject *self, PyObject *unused)
{
    int64_t n = weft_tensor_numel(WPY_T(self));
    if (n != 1) /* ValueError, as torch 1.13's (a caller's except ValueError) */
        return PyErr_Format(PyExc_ValueError,
                            "only one element tensors can be converted to Python scalars (this "
                            "one has %lld)",
                            (long long)n);
    weft_tensor *t;
    if (readable(&t, WPY_T(self)) < 0)
        return NULL;
    PyObject *r = element(weft_tensor_data_ptr(t), weft_tensor_dtype(t));
    weft_tensor_release(t);
    return r;
}
