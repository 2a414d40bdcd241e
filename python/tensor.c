/* tensor.c — weft.Tensor: attributes, views through indexing, Python
 * operators, autograd, the buffer protocol (numpy()) and printing.  The
 * operators of the operator table are added to the type as methods by
 * ops.c, which is why Tensor is a heap type. */
#include "weftpy.h"

#include <stdlib.h>
#include <string.h>

PyTypeObject *wpy_tensor_type;

PyObject *wpy_wrap(weft_tensor *t)
{
    if (!t)
        return NULL;
    wpy_tensor *o = PyObject_GC_New(wpy_tensor, wpy_tensor_type);
    if (!o) {
        weft_tensor_release(t);
        return NULL;
    }
    o->t = t;
    o->weakrefs = NULL;
    PyObject_GC_Track(o);
    return (PyObject *)o;
}

PyObject *wpy_wrap_rc(int rc, weft_tensor **t)
{
    if (rc < 0)
        return wpy_raise(rc);
    return wpy_wrap(*t);
}

static void tensor_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (((wpy_tensor *)self)->weakrefs)
        PyObject_ClearWeakRefs(self);
    weft_tensor_release(WPY_T(self));
    type->tp_free(self);
    Py_DECREF(type);
}

static int tensor_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* An instance of type (weft.Tensor or a Python subclass such as
 * nn.Parameter) holding a new reference to t; t's reference is taken on
 * success and on failure. */
static PyObject *wrap_as(PyTypeObject *type, weft_tensor *t)
{
    if (type == wpy_tensor_type)
        return wpy_wrap(t);
    /* a subclass: its own allocator, which makes room for its __dict__
     * and tracks the object for the garbage collector */
    wpy_tensor *o = (wpy_tensor *)type->tp_alloc(type, 0);
    if (!o) {
        weft_tensor_release(t);
        return NULL;
    }
    o->t = t;
    o->weakrefs = NULL;
    return (PyObject *)o;
}

static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    /* weft.Tensor(data) is weft.tensor(data); a subclass gets the same
     * tensor as an instance of itself */
    PyObject *base = wpy_tensor_from_data(NULL, args, kwargs);
    if (!base || type == wpy_tensor_type)
        return base;
    PyObject *r = wrap_as(type, weft_tensor_retain(WPY_T(base)));
    Py_DECREF(base);
    return r;
}

/* Tensor._make_subclass(cls, data, requires_grad=False): an instance of
 * cls (a subclass of weft.Tensor) sharing data's memory, detached from
 * data's history, a leaf that requires grad as asked: nn.Parameter's
 * constructor, as torch's. */
static PyObject *m_make_subclass(PyObject *unused, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"cls", "data", "requires_grad", NULL};
    PyObject *cls, *data;
    int requires_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|p:_make_subclass", kw, &cls, &data,
                                     &requires_grad))
        return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, wpy_tensor_type))
        return PyErr_Format(PyExc_TypeError, "_make_subclass: cls must be a subclass of "
                                             "weft.Tensor, not %R", cls);
    if (!PyObject_TypeCheck(data, wpy_tensor_type))
        return PyErr_Format(PyExc_TypeError, "_make_subclass: data must be a weft.Tensor, not %s",
                            Py_TYPE(data)->tp_name);
    weft_tensor *t = NULL;
    int rc = weft_detach(&t, WPY_T(data));
    if (rc == 0 && (rc = weft_tensor_set_requires_grad(t, requires_grad != 0)) < 0)
        weft_tensor_release(t);
    if (rc < 0)
        return wpy_raise(rc);
    return wrap_as((PyTypeObject *)cls, t);
}

/* -------------------------------------------------------------- attributes */

static PyObject *sizes_tuple(const int64_t *v, int n)
{
    PyObject *tuple = PyTuple_New(n);
    for (int i = 0; tuple && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, i, x);
    }
    return tuple;
}

static PyObject *get_shape(PyObject *self, void *unused)
{
    return sizes_tuple(weft_tensor_sizes(WPY_T(self)), weft_tensor_ndim(WPY_T(self)));
}

static PyObject *get_dtype(PyObject *self, void *unused)
{
    return wpy_dtype_object(weft_tensor_dtype(WPY_T(self)));
}

/* Tensor.device: a weft.device, made once per device by the class the
 * package hands over (module.c) and cached here by type and index, with a
 * copy of the type's name, since an unloaded plugin's type id can come back
 * under another name; the string before the package has set the class.
 * Read per step by training code (zeros(..., device=x.device)), so C. */
enum { CACHED_INDICES = 16 };
static wpy_named_slot device_cache[WEFT_MAX_DEVICE_TYPES][CACHED_INDICES];

void wpy_device_cache_clear(void)
{
    for (int t = 0; t < WEFT_MAX_DEVICE_TYPES; t++)
        for (int i = 0; i < CACHED_INDICES; i++)
            wpy_slot_clear(&device_cache[t][i]);
}

static PyObject *get_device(PyObject *self, void *unused)
{
    weft_device d = weft_tensor_device(WPY_T(self));
    const char *type_name = weft_device_type_name(d.type);
    bool cacheable = type_name && d.type >= 0 && d.type < WEFT_MAX_DEVICE_TYPES && d.index >= 0 &&
                     d.index < CACHED_INDICES;
    PyObject *o = cacheable ? wpy_slot_get(&device_cache[d.type][d.index], type_name) : NULL;
    if (o)
        return o;
    char name[80];
    weft_device_to_string(d, name, sizeof name);
    PyObject *cls = wpy_device_class();
    if (!cls)
        return PyUnicode_FromString(name);
    return cacheable ? wpy_slot_make(&device_cache[d.type][d.index], type_name, cls, name)
                     : PyObject_CallFunction(cls, "s", name);
}

static PyObject *get_is_cuda(PyObject *self, void *unused)
{
    return PyBool_FromLong(weft_tensor_device(WPY_T(self)).type == WEFT_DEVICE_TYPE_CUDA);
}

static PyObject *get_is_cpu(PyObject *self, void *unused)
{
    return PyBool_FromLong(weft_tensor_device(WPY_T(self)).type == WEFT_DEVICE_TYPE_CPU);
}

static PyObject *get_ndim(PyObject *self, void *unused)
{
    return PyLong_FromLong(weft_tensor_ndim(WPY_T(self)));
}

static PyObject *get_requires_grad(PyObject *self, void *unused)
{
    return PyBool_FromLong(weft_tensor_requires_grad(WPY_T(self)));
}

static int set_requires_grad(PyObject *self, PyObject *value, void *unused)
{
    int on = value ? PyObject_IsTrue(value) : 0;
    if (on < 0)
        return -1;
    int rc = weft_tensor_set_requires_grad(WPY_T(self), on);
    return rc < 0 ? wpy_raise_int(rc) : 0;
}

static PyObject *get_grad(PyObject *self, void *unused)
{
    weft_tensor *g = NULL;
    int rc = weft_tensor_grad(&g, WPY_T(self));
    if (rc < 0)
        return wpy_raise(rc);
    if (!g)
        Py_RETURN_NONE;
    return wpy_wrap(g);
}

static int set_grad(PyObject *self, PyObject *value, void *unused)
{
    if (value && value != Py_None && !wpy_tensor_check(value)) {
        PyErr_SetString(PyExc_TypeError, "grad must be a Tensor or None");
        return -1;
    }
    int rc = weft_tensor_set_grad(WPY_T(self),
                                  value && value != Py_None ? WPY_T(value) : NULL);
    return rc < 0 ? wpy_raise_int(rc) : 0;
}

static PyObject *get_is_leaf(PyObject *self, void *unused)
{
    return PyBool_FromLong(weft_tensor_is_leaf(WPY_T(self)));
}

/* The name of the node that made this tensor ("MulBackward"), or None. */
static PyObject *get_grad_fn(PyObject *self, void *unused)
{
    const char *name = weft_tensor_grad_fn_name(WPY_T(self));
    if (!name)
        Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyObject *get_T(PyObject *self, void *unused)
{
    int n = weft_tensor_ndim(WPY_T(self));
    int64_t dims[WEFT_MAX_DIMS];
    for (int i = 0; i < n; i++)
        dims[i] = n - 1 - i;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_permute(&out, WPY_T(self), dims, n), &out);
}

static PyObject *get_is_sparse(PyObject *self, void *unused)
{
    return PyBool_FromLong(wpy_layout_is(WPY_T(self), "sparse_coo"));
}

static PyObject *get_is_sparse_csr(PyObject *self, void *unused)
{
    return PyBool_FromLong(wpy_layout_is(WPY_T(self), "sparse_csr"));
}

static PyObject *get_is_quantized(PyObject *self, void *unused)
{
    return PyBool_FromLong(wpy_layout_is(WPY_T(self), "quantized"));
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "the sizes, a tuple", NULL},
    {"dtype", get_dtype, NULL, "the dtype", NULL},
    {"device", get_device, NULL, "the device, a weft.device (device.type, device.index)", NULL},
    {"is_cuda", get_is_cuda, NULL, "whether the tensor is on a CUDA device", NULL},
    {"is_cpu", get_is_cpu, NULL, "whether the tensor is on the CPU", NULL},
    {"ndim", get_ndim, NULL, "the number of dimensions", NULL},
    {"requires_grad", get_requires_grad, set_requires_grad, "whether autograd records it", NULL},
    {"grad", get_grad, set_grad, "the accumulated gradient, or None", NULL},
    {"is_leaf", get_is_leaf, NULL, "whether no recorded operation made it", NULL},
    {"grad_fn", get_grad_fn, NULL, "the name of the backward node that made it, or None", NULL},
    {"T", get_T, NULL, "the dimensions reversed (a view)", NULL},
    {"layout", wpy_tensor_layout, NULL, "the tensor's layout (weft.strided, or a plugin's)", NULL},
    {"is_sparse", get_is_sparse, NULL, "True for a sparse COO tensor, as torch's", NULL},
    {"is_sparse_csr", get_is_sparse_csr, NULL, "True for a sparse CSR tensor, as torch's", NULL},
    {"is_quantized", get_is_quantized, NULL, "whether the tensor is of the quantized layout",
     NULL},
    {NULL},
};

/* ----------------------------------------------------------------- methods */

static PyObject *m_size(PyObject *self, PyObject *args)
{
    PyObject *dim = NULL;
    if (!PyArg_ParseTuple(args, "|O", &dim))
        return NULL;
    if (!dim || dim == Py_None)
        return get_shape(self, NULL);
    long d = PyLong_AsLong(dim);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    int n = weft_tensor_ndim(WPY_T(self));
    if (d < -n || d >= n || n == 0)
        return PyErr_Format(PyExc_IndexError,
                            "Dimension out of range (expected to be in range of [%d, %d], but got "
                            "%ld)", -n, n - 1, d);
    return PyLong_FromLongLong(weft_tensor_size(WPY_T(self), (int)d));
}

static PyObject *m_stride(PyObject *self, PyObject *args)
{
    PyObject *dim = NULL;
    if (!PyArg_ParseTuple(args, "|O", &dim))
        return NULL;
    /* a plugin layout has no strides (weft_tensor_strides is NULL: the
     * tuple read it and crashed, s.stride() of a sparse tensor) */
    int layout = weft_tensor_layout(WPY_T(self));
    if (layout != WEFT_LAYOUT_STRIDED)
        return PyErr_Format(PyExc_RuntimeError,
                            "stride: a tensor of layout '%s' has no strides (convert it with "
                            "to_dense() first)",
                            weft_layout_name(layout));
    if (!dim || dim == Py_None)
        return sizes_tuple(weft_tensor_strides(WPY_T(self)), weft_tensor_ndim(WPY_T(self)));
    long d = PyLong_AsLong(dim);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    int n = weft_tensor_ndim(WPY_T(self));
    if (d < -n || d >= n || n == 0)
        return PyErr_Format(PyExc_IndexError, "Dimension out of range (got %ld)", d);
    return PyLong_FromLongLong(weft_tensor_stride(WPY_T(self), (int)d));
}

static PyObject *m_dim(PyObject *self, PyObject *unused)
{
    return get_ndim(self, NULL);
}

static PyObject *m_numel(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(weft_tensor_numel(WPY_T(self)));
}

static PyObject *m_data_ptr(PyObject *self, PyObject *unused)
{
    return PyLong_FromVoidPtr(weft_tensor_data_ptr(WPY_T(self)));
}

static PyObject *m_storage_offset(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(weft_tensor_storage_offset(WPY_T(self)));
}

static PyObject *m_is_contiguous(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(weft_tensor_is_contiguous(WPY_T(self)));
}

static PyObject *m_is_read_only(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(weft_tensor_is_read_only(WPY_T(self)));
}

static PyObject *m_element_size(PyObject *self, PyObject *unused)
{
    return PyLong_FromSize_t(weft_dtype_size(weft_tensor_dtype(WPY_T(self))));
}

static PyObject *m_is_floating_point(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(weft_dtype_is_floating(weft_tensor_dtype(WPY_T(self))));
}

static PyObject *m_contiguous(PyObject *self, PyObject *unused)
{
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_contiguous(&out, WPY_T(self)), &out);
}

static PyObject *m_detach(PyObject *self, PyObject *unused)
{
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_detach(&out, WPY_T(self)), &out);
}

/* zero_(): fill_(0), returning self (torch's habit; in C since optimizers'
 * zero_grad calls it per parameter) */
static PyObject *m_zero_(PyObject *self, PyObject *unused)
{
    weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = WPY_T(self)},
                          {.tag = WEFT_VALUE_INT, .u.i = 0}};
    PyObject *r = wpy_call_op("fill_", args, 2);
    if (!r)
        return NULL;
    Py_DECREF(r);
    return Py_NewRef(self);
}

static PyObject *m_clone(PyObject *self, PyObject *unused)
{
    /* a plugin layout's tensor through the clone operator, whose kernel for
     * the layout keeps it (empty_like below would make a strided tensor) */
    if (weft_tensor_layout(WPY_T(self))) {
        weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = WPY_T(self)};
        return wpy_call_op("clone", &arg, 1);
    }
    /* a copy that autograd sees: empty_like + copy_ records CopyBackwards */
    weft_tensor *out = NULL;
    int rc = weft_empty_like(&out, WPY_T(self));
    if (rc < 0)
        return wpy_raise(rc);
    PyObject *result = wpy_wrap(out);
    if (!result)
        return NULL;
    weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = out},
                          {.tag = WEFT_VALUE_TENSOR, .u.tensor = WPY_T(self)}};
    PyObject *r = wpy_call_op("copy_", args, 2);
    if (!r) {
        Py_DECREF(result);
        return NULL;
    }
    Py_DECREF(r);
    return result;
}

static PyObject *m_retain_grad(PyObject *self, PyObject *unused)
{
    int rc = weft_tensor_retain_grad(WPY_T(self));
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *m_requires_grad_(PyObject *self, PyObject *args)
{
    int on = 1;
    if (!PyArg_ParseTuple(args, "|p", &on))
        return NULL;
    int rc = weft_tensor_set_requires_grad(WPY_T(self), on);
    if (rc < 0)
        return wpy_raise(rc);
    Py_INCREF(self);
    return self;
}

static PyObject *m_backward(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"gradient", "retain_graph", "create_graph", NULL};
    PyObject *gradient = Py_None, *retain = Py_None;
    int create = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOp", kwlist, &gradient, &retain, &create))
        return NULL;
    if (gradient != Py_None && !wpy_tensor_check(gradient)) {
        PyErr_SetString(PyExc_TypeError, "gradient must be a Tensor or None");
        return NULL;
    }
    int retain_graph = retain == Py_None ? create : PyObject_IsTrue(retain);
    if (retain_graph < 0)
        return NULL;
    weft_tensor *out = WPY_T(self);
    weft_tensor *grad = gradient == Py_None ? NULL : WPY_T(gradient);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_backward(&out, 1, grad ? &grad : NULL, retain_graph, create);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

/* to()'s conversion, and the converters' (float(), ...): self itself when
 * nothing changes and no copy is asked for, as torch's.  device NULL keeps
 * the device; dtype WEFT_DTYPE_UNSET keeps the dtype.  A plugin layout's
 * tensor converts its dtype through the hook its module registered
 * (layout.c), where there is one. */
static PyObject *convert_to(PyObject *self, weft_dtype dtype, const weft_device *device, bool copy)
{
    weft_tensor *t = WPY_T(self);
    if ((!device || weft_device_equal(*device, weft_tensor_device(t))) &&
        (dtype == WEFT_DTYPE_UNSET || dtype == weft_tensor_dtype(t))) {
        if (copy)
            return m_clone(self, NULL);
        Py_INCREF(self);
        return self;
    }
    PyObject *cur = self;
    Py_INCREF(cur);
    if (device && !weft_device_equal(*device, weft_tensor_device(t))) {
        weft_tensor *moved = NULL;
        int rc = weft_to_device(&moved, t, *device);
        Py_DECREF(cur);
        if (!(cur = wpy_wrap_rc(rc, &moved)))
            return NULL;
    }
    if (dtype == WEFT_DTYPE_UNSET || dtype == weft_tensor_dtype(WPY_T(cur)))
        return cur;
    PyObject *hook = wpy_layout_to_dtype_hook(WPY_T(cur)), *r;
    if (hook) {
        PyObject *d = wpy_dtype_object(dtype);
        r = d ? PyObject_CallFunctionObjArgs(hook, cur, d, NULL) : NULL;
        Py_XDECREF(d);
    } else {
        weft_tensor *converted = NULL;
        r = wpy_wrap_rc(weft_to_dtype(&converted, WPY_T(cur), dtype), &converted);
    }
    Py_DECREF(cur);
    return r;
}

/* torch's memory_format argument: weft tensors have one memory format (the
 * strides a result is given), so only the default is taken. */
static int check_memory_format(PyObject *memory_format, const char *fn)
{
    if (!memory_format || memory_format == Py_None)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: memory_format is not supported (weft has one memory "
                 "format); pass None, got %.100s", fn, Py_TYPE(memory_format)->tp_name);
    return -1;
}

/* to(device), to(dtype), to(device, dtype), to(other), to(dtype=..., device=...),
 * with torch's non_blocking, copy and memory_format (None) */
static PyObject *m_to(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"a", "b", "dtype", "device", "non_blocking", "copy",
                             "memory_format", NULL};
    PyObject *a = NULL, *b = NULL, *dtype_o = NULL, *device_o = NULL, *memory_format = NULL;
    int copy = 0, non_blocking = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO$OOppO", kwlist, &a, &b, &dtype_o,
                                     &device_o, &non_blocking, &copy, &memory_format))
        return NULL;
    /* non_blocking is taken and ignored: weft's copies between devices
     * return when done, which a non-blocking copy's user may wait for */
    (void)non_blocking;
    if (check_memory_format(memory_format, "to") < 0)
        return NULL;
    PyObject *pos[2] = {a, b}, *other = NULL;
    for (int i = 0; i < 2; i++) {
        if (!pos[i])
            continue;
        if (PyObject_TypeCheck(pos[i], &wpy_dtype_type))
            dtype_o = pos[i];
        else if (wpy_tensor_check(pos[i]))
            other = pos[i]; /* to(other): other's dtype and device, as torch */
        else if (pos[i] == Py_None)
            continue;
        else
            device_o = pos[i];
    }
    weft_dtype dtype;
    weft_device device = weft_tensor_device(WPY_T(self));
    if (wpy_parse_dtype(dtype_o, &dtype) < 0 || (device_o && wpy_parse_device(device_o, &device) < 0))
        return NULL;
    if (other) {
        dtype = weft_tensor_dtype(WPY_T(other));
        device = weft_tensor_device(WPY_T(other));
    }
    return convert_to(self, dtype, &device, copy);
}

/* float(), double(), ...: to(dtype), in C since they are called as often as
 * to() */
#define CONVERTER(fn, dtype)                                                               \
    static PyObject *m_##fn(PyObject *self, PyObject *args, PyObject *kwargs)              \
    {                                                                                      \
        static char *kwlist[] = {"memory_format", NULL};                                   \
        PyObject *memory_format = NULL;                                                    \
        if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", kwlist, &memory_format) ||    \
            check_memory_format(memory_format, #fn) < 0)                                   \
            return NULL;                                                                   \
        return convert_to(self, dtype, NULL, false);                                       \
    }
CONVERTER(float, WEFT_FLOAT32)
CONVERTER(double, WEFT_FLOAT64)
CONVERTER(half, WEFT_FLOAT16)
CONVERTER(bfloat16, WEFT_BFLOAT16)
CONVERTER(long, WEFT_INT64)
CONVERTER(int, WEFT_INT32)
CONVERTER(short, WEFT_INT16)
CONVERTER(char, WEFT_INT8)
CONVERTER(byte, WEFT_UINT8)
CONVERTER(bool, WEFT_BOOL)
CONVERTER(cfloat, WEFT_COMPLEX64)
CONVERTER(cdouble, WEFT_COMPLEX128)
#undef CONVERTER

/* The shape arguments of view methods: f(2, 3) or f((2, 3)). */
static int shape_args(PyObject *args, int64_t *v, int *n)
{
    PyObject *seq = args;
    if (PyTuple_GET_SIZE(args) == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0)))
        seq = PyTuple_GET_ITEM(args, 0);
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if (len > WEFT_MAX_DIMS) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many dimensions");
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        v[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    *n = (int)len;
    Py_DECREF(fast);
    return 0;
}

typedef int (*shape_view_fn)(weft_tensor **, const weft_tensor *, const int64_t *, int);

static PyObject *shape_view(PyObject *self, PyObject *args, shape_view_fn fn)
{
    int64_t v[WEFT_MAX_DIMS];
    int n;
    if (shape_args(args, v, &n) < 0)
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(fn(&out, WPY_T(self), v, n), &out);
}

static PyObject *m_view(PyObject *self, PyObject *args) { return shape_view(self, args, weft_view); }
static PyObject *m_reshape(PyObject *self, PyObject *args) { return shape_view(self, args, weft_reshape); }
static PyObject *m_permute(PyObject *self, PyObject *args) { return shape_view(self, args, weft_permute); }
static PyObject *m_expand(PyObject *self, PyObject *args) { return shape_view(self, args, weft_expand); }

static PyObject *m_transpose(PyObject *self, PyObject *args)
{
    int d0, d1;
    if (!PyArg_ParseTuple(args, "ii", &d0, &d1))
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_transpose(&out, WPY_T(self), d0, d1), &out);
}

static PyObject *m_t(PyObject *self, PyObject *unused)
{
    weft_tensor *out = NULL;
    const weft_tensor *t = WPY_T(self);
    return wpy_wrap_rc(weft_t(&out, t), &out);
}

static PyObject *m_squeeze(PyObject *self, PyObject *args)
{
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &dim))
        return NULL;
    int d = WEFT_ALL_DIMS;
    if (dim != Py_None) {
        d = (int)PyLong_AsLong(dim);
        if (d == -1 && PyErr_Occurred())
            return NULL;
    }
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_squeeze(&out, WPY_T(self), d), &out);
}

static PyObject *m_unsqueeze(PyObject *self, PyObject *args)
{
    int d;
    if (!PyArg_ParseTuple(args, "i", &d))
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_unsqueeze(&out, WPY_T(self), d), &out);
}

static PyObject *m_flatten(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"start_dim", "end_dim", NULL};
    int s = 0, e = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ii", kwlist, &s, &e))
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_flatten(&out, WPY_T(self), s, e), &out);
}

static PyObject *m_narrow(PyObject *self, PyObject *args)
{
    int dim;
    long long start, length;
    if (!PyArg_ParseTuple(args, "iLL", &dim, &start, &length))
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_narrow(&out, WPY_T(self), dim, start, length), &out);
}

static PyObject *m_select(PyObject *self, PyObject *args)
{
    int dim;
    long long index;
    if (!PyArg_ParseTuple(args, "iL", &dim, &index))
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_select(&out, WPY_T(self), dim, index), &out);
}

static PyObject *m_numpy(PyObject *self, PyObject *unused);
static PyObject *m_array(PyObject *self, PyObject *args, PyObject *kwargs);

static PyMethodDef tensor_methods[] = {
    {"size", m_size, METH_VARARGS, "size(dim=None)"},
    {"stride", m_stride, METH_VARARGS, "stride(dim=None), in elements"},
    {"dim", m_dim, METH_NOARGS, NULL},
    {"numel", m_numel, METH_NOARGS, NULL},
    {"data_ptr", m_data_ptr, METH_NOARGS, "the address of the first element"},
    {"storage_offset", m_storage_offset, METH_NOARGS, NULL},
    {"element_size", m_element_size, METH_NOARGS, NULL},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, NULL},
    {"is_floating_point", m_is_floating_point, METH_NOARGS, NULL},
    {"is_read_only", m_is_read_only, METH_NOARGS,
     "whether the memory may not be written (a read-only DLPack import)"},
    {"item", wpy_tensor_item, METH_NOARGS, "the one element as a Python number"},
    {"tolist", wpy_tensor_tolist, METH_NOARGS, "the elements as nested lists"},
    {"numpy", m_numpy, METH_NOARGS, "a NumPy array sharing this tensor's memory"},
    {"__array__", (PyCFunction)(void (*)(void))m_array, METH_VARARGS | METH_KEYWORDS, NULL},
    {"contiguous", m_contiguous, METH_NOARGS, NULL},
    {"detach", m_detach, METH_NOARGS, "a view that does not require grad"},
    {"clone", m_clone, METH_NOARGS, NULL},
    {"zero_", m_zero_, METH_NOARGS, "fills self with zeros in place; returns self"},
    {"retain_grad", m_retain_grad, METH_NOARGS, NULL},
    {"requires_grad_", m_requires_grad_, METH_VARARGS, NULL},
    {"backward", (PyCFunction)(void (*)(void))m_backward, METH_VARARGS | METH_KEYWORDS,
     "backward(gradient=None, retain_graph=None, create_graph=False)"},
    {"to", (PyCFunction)(void (*)(void))m_to, METH_VARARGS | METH_KEYWORDS,
     "to(device or dtype or other, *, dtype=None, device=None, non_blocking=False, "
     "copy=False, memory_format=None)"},
    {"float", (PyCFunction)(void (*)(void))m_float, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.float32): self when it already is float32"},
    {"double", (PyCFunction)(void (*)(void))m_double, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.float64): self when it already is float64"},
    {"half", (PyCFunction)(void (*)(void))m_half, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.float16): self when it already is float16"},
    {"bfloat16", (PyCFunction)(void (*)(void))m_bfloat16, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.bfloat16): self when it already is bfloat16"},
    {"long", (PyCFunction)(void (*)(void))m_long, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.int64): self when it already is int64"},
    {"int", (PyCFunction)(void (*)(void))m_int, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.int32): self when it already is int32"},
    {"short", (PyCFunction)(void (*)(void))m_short, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.int16): self when it already is int16"},
    {"char", (PyCFunction)(void (*)(void))m_char, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.int8): self when it already is int8"},
    {"byte", (PyCFunction)(void (*)(void))m_byte, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.uint8): self when it already is uint8"},
    {"bool", (PyCFunction)(void (*)(void))m_bool, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.bool): self when it already is bool"},
    {"cfloat", (PyCFunction)(void (*)(void))m_cfloat, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.complex64): self when it already is complex64"},
    {"cdouble", (PyCFunction)(void (*)(void))m_cdouble, METH_VARARGS | METH_KEYWORDS,
     "self.to(weft.complex128): self when it already is complex128"},
    {"view", m_view, METH_VARARGS, NULL},
    {"reshape", m_reshape, METH_VARARGS, NULL},
    {"_make_subclass", (PyCFunction)(void (*)(void))m_make_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC, NULL},
    {"permute", m_permute, METH_VARARGS, NULL},
    {"expand", m_expand, METH_VARARGS, NULL},
    {"transpose", m_transpose, METH_VARARGS, NULL},
    {"t", m_t, METH_NOARGS, NULL},
    {"squeeze", m_squeeze, METH_VARARGS, NULL},
    {"unsqueeze", m_unsqueeze, METH_VARARGS, NULL},
    {"flatten", (PyCFunction)(void (*)(void))m_flatten, METH_VARARGS | METH_KEYWORDS, NULL},
    {"narrow", m_narrow, METH_VARARGS, NULL},
    {"select", m_select, METH_VARARGS, NULL},
    {"unique", (PyCFunction)(void (*)(void))wpy_tensor_unique, METH_VARARGS | METH_KEYWORDS,
     "unique(sorted=True, return_inverse=False, return_counts=False, dim=None), as torch"},
    {"__dlpack__", (PyCFunction)(void (*)(void))wpy_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)"},
    {"__dlpack_device__", wpy_dlpack_device, METH_NOARGS, NULL},
    {NULL},
};

/* ---------------------------------------------------------------- indexing */

/* t[key] and t[key] = value are python/indexing.c */

static Py_ssize_t tensor_len(PyObject *self)
{
    if (weft_tensor_ndim(WPY_T(self)) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)weft_tensor_size(WPY_T(self), 0);
}

static PyObject *tensor_iter(PyObject *self)
{
    Py_ssize_t n = tensor_len(self);
    if (n < 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
        return NULL;
    }
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        weft_tensor *row = NULL;
        int rc = weft_select(&row, WPY_T(self), 0, i);
        PyObject *o = wpy_wrap_rc(rc, &row);
        if (!o) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, o);
    }
    if (!list)
        return NULL;
    PyObject *it = PyObject_GetIter(list);
    Py_DECREF(list);
    return it;
}

/* --------------------------------------------------------------- operators */

/* The value of a Python operand: a tensor or a number.  Returns 1 for a
 * tensor, 0 for a number (in *v), -1 for anything else. */
static int operand(PyObject *o, weft_value *v)
{
    if (wpy_tensor_check(o)) {
        v->tag = WEFT_VALUE_TENSOR;
        v->len = 0;
        v->u.tensor = WPY_T(o);
        return 1;
    }
    return wpy_scalar_value(o, v) == 0 ? 0 : -1;
}

/* One Python binary operator.  tensor_op takes (Tensor, Tensor), scalar_op
 * (Tensor, Scalar); mode is the rounding_mode argument of the div forms, or
 * NULL.  A number on the left is made a 0-d tensor of the dtype the result
 * would have, and the tensor form is used. */
static PyObject *binary(PyObject *a, PyObject *b, const char *tensor_op, const char *scalar_op,
                        const char *mode)
{
    weft_value va, vb;
    int ka = operand(a, &va), kb = operand(b, &vb);
    if (ka < 0 || kb < 0 || (ka == 0 && kb == 0))
        Py_RETURN_NOTIMPLEMENTED;
    weft_value args[3];
    int nargs = 2;
    weft_tensor *tmp = NULL;
    const char *op = tensor_op;
    if (ka == 1 && kb == 0 && scalar_op) {
        op = scalar_op;
        args[0] = va;
        args[1] = vb;
    } else {
        if (ka == 0 || kb == 0) {
            tmp = wpy_scalar_tensor_like(ka == 0 ? a : b, ka == 0 ? vb.u.tensor : va.u.tensor);
            if (!tmp)
                return NULL;
            (ka == 0 ? &va : &vb)->tag = WEFT_VALUE_TENSOR;
            (ka == 0 ? &va : &vb)->u.tensor = tmp;
        }
        args[0] = va;
        args[1] = vb;
    }
    if (mode) {
        args[2].tag = WEFT_VALUE_STRING;
        args[2].u.string = mode;
        nargs = 3;
    }
    PyObject *r = wpy_call_op(op, args, nargs);
    weft_tensor_release(tmp);
    return r;
}

/* The in-place form: self op= other, returning self. */
static PyObject *inplace(PyObject *a, PyObject *b, const char *tensor_op, const char *scalar_op,
                         const char *mode)
{
    weft_value vb;
    int kb = operand(b, &vb);
    if (!wpy_tensor_check(a) || kb < 0)
        Py_RETURN_NOTIMPLEMENTED;
    weft_value args[3] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = WPY_T(a)}, vb};
    int nargs = 2;
    if (mode) {
        args[2].tag = WEFT_VALUE_STRING;
        args[2].u.string = mode;
        nargs = 3;
    }
    PyObject *r = wpy_call_op(kb == 1 ? tensor_op : scalar_op, args, nargs);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_INCREF(a);
    return a;
}

static PyObject *nb_add(PyObject *a, PyObject *b) { return binary(a, b, "add", "add_scalar", NULL); }
static PyObject *nb_sub(PyObject *a, PyObject *b) { return binary(a, b, "sub", "sub_scalar", NULL); }
static PyObject *nb_mul(PyObject *a, PyObject *b) { return binary(a, b, "mul", "mul_scalar", NULL); }
static PyObject *nb_truediv(PyObject *a, PyObject *b) { return binary(a, b, "div", "div_scalar", NULL); }
static PyObject *nb_floordiv(PyObject *a, PyObject *b)
{
    return binary(a, b, "div_mode", "div_scalar_mode", "floor");
}
static PyObject *nb_mod(PyObject *a, PyObject *b) { return binary(a, b, "remainder", "remainder_scalar", NULL); }
static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod)
{
    if (mod != Py_None)
        Py_RETURN_NOTIMPLEMENTED;
    return binary(a, b, "pow", "pow_scalar", NULL);
}
static PyObject *nb_matmul(PyObject *a, PyObject *b)
{
    if (!wpy_tensor_check(a) || !wpy_tensor_check(b))
        Py_RETURN_NOTIMPLEMENTED;
    return binary(a, b, "matmul", NULL, NULL);
}
static PyObject *nb_and(PyObject *a, PyObject *b) { return binary(a, b, "bitwise_and", "bitwise_and_scalar", NULL); }
static PyObject *nb_or(PyObject *a, PyObject *b) { return binary(a, b, "bitwise_or", "bitwise_or_scalar", NULL); }
static PyObject *nb_xor(PyObject *a, PyObject *b) { return binary(a, b, "bitwise_xor", "bitwise_xor_scalar", NULL); }

static PyObject *nb_iadd(PyObject *a, PyObject *b) { return inplace(a, b, "add_", "add_scalar_", NULL); }
static PyObject *nb_isub(PyObject *a, PyObject *b) { return inplace(a, b, "sub_", "sub_scalar_", NULL); }
static PyObject *nb_imul(PyObject *a, PyObject *b) { return inplace(a, b, "mul_", "mul_scalar_", NULL); }
static PyObject *nb_itruediv(PyObject *a, PyObject *b) { return inplace(a, b, "div_", "div_scalar_", NULL); }
static PyObject *nb_ifloordiv(PyObject *a, PyObject *b)
{
    return inplace(a, b, "div_mode_", "div_scalar_mode_", "floor");
}
static PyObject *nb_imod(PyObject *a, PyObject *b) { return inplace(a, b, "remainder_", "remainder_scalar_", NULL); }
static PyObject *nb_ipow(PyObject *a, PyObject *b, PyObject *mod) { return inplace(a, b, "pow_", "pow_scalar_", NULL); }
static PyObject *nb_iand(PyObject *a, PyObject *b) { return inplace(a, b, "bitwise_and_", "bitwise_and_scalar_", NULL); }
static PyObject *nb_ior(PyObject *a, PyObject *b) { return inplace(a, b, "bitwise_or_", "bitwise_or_scalar_", NULL); }
static PyObject *nb_ixor(PyObject *a, PyObject *b) { return inplace(a, b, "bitwise_xor_", "bitwise_xor_scalar_", NULL); }

static PyObject *nb_imatmul(PyObject *a, PyObject *b)
{
    PyErr_SetString(PyExc_RuntimeError, "In-place matmul is not supported. Use 'a = a @ b' instead");
    return NULL;
}

static PyObject *unary(PyObject *a, const char *op)
{
    weft_value v = {.tag = WEFT_VALUE_TENSOR, .u.tensor = WPY_T(a)};
    return wpy_call_op(op, &v, 1);
}

static PyObject *nb_neg(PyObject *a) { return unary(a, "neg"); }
static PyObject *nb_abs(PyObject *a) { return unary(a, "abs"); }
static PyObject *nb_invert(PyObject *a)
{
    return unary(a, weft_tensor_dtype(WPY_T(a)) == WEFT_BOOL ? "logical_not" : "bitwise_not");
}
static PyObject *nb_pos(PyObject *a)
{
    Py_INCREF(a);
    return a;
}

/* float(t) and int(t) take item()'s single element (and its ValueError,
 * as torch 1.13); bool(t) keeps torch's RuntimeError (nb_bool). */
static int nb_bool(PyObject *a)
{
    if (weft_tensor_numel(WPY_T(a)) != 1) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Boolean value of Tensor with more than one value is ambiguous");
        return -1;
    }
    PyObject *v = wpy_tensor_item(a, NULL);
    if (!v)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static PyObject *nb_float(PyObject *a)
{
    PyObject *v = wpy_tensor_item(a, NULL);
    if (!v)
        return NULL;
    PyObject *r = PyNumber_Float(v);
    Py_DECREF(v);
    return r;
}

static PyObject *nb_int(PyObject *a)
{
    PyObject *v = wpy_tensor_item(a, NULL);
    if (!v)
        return NULL;
    PyObject *r = PyNumber_Long(v);
    Py_DECREF(v);
    return r;
}

static PyObject *nb_index(PyObject *a)
{
    if (!weft_dtype_is_integral(weft_tensor_dtype(WPY_T(a)), false) ||
        weft_tensor_numel(WPY_T(a)) != 1) {
        PyErr_SetString(PyExc_TypeError,
                        "only integer tensors of a single element can be converted to an index");
        return NULL;
    }
    return wpy_tensor_item(a, NULL);
}

static PyObject *tensor_richcompare(PyObject *a, PyObject *b, int op)
{
    static const char *names[][2] = {
        [Py_LT] = {"lt", "lt_scalar"}, [Py_LE] = {"le", "le_scalar"},
        [Py_EQ] = {"eq", "eq_scalar"}, [Py_NE] = {"ne", "ne_scalar"},
        [Py_GT] = {"gt", "gt_scalar"}, [Py_GE] = {"ge", "ge_scalar"},
    };
    /* a number on the left: Python calls b.__gt__(a) for a < b, so a is
     * always the tensor here unless both are tensors */
    return binary(a, b, names[op][0], names[op][1], NULL);
}

/* ---------------------------------------------------------- printing, hash */

static PyObject *tensor_repr(PyObject *self)
{
    char *text = NULL;
    int rc = weft_tensor_to_string(&text, WPY_T(self));
    if (rc < 0)
        return wpy_raise(rc);
    /* the C printer writes PyTorch's "dtype=torch.float64" */
    for (char *p = strstr(text, "dtype=torch."); p; p = strstr(p, "dtype=torch.")) {
        memcpy(p, "dtype= weft.", 12);
        memmove(p + 6, p + 7, strlen(p + 7) + 1);
    }
    size_t len = strlen(text);
    PyObject *r;
    const char *fn = weft_tensor_grad_fn_name(WPY_T(self));
    if (len > 0 && text[len - 1] == ')' && (fn || weft_tensor_requires_grad(WPY_T(self)))) {
        text[len - 1] = '\0';
        if (fn)
            r = PyUnicode_FromFormat("%s, grad_fn=<%s>)", text, fn);
        else
            r = PyUnicode_FromFormat("%s, requires_grad=True)", text);
    } else {
        r = PyUnicode_FromString(text);
    }
    free(text);
    return r;
}

static Py_hash_t tensor_hash(PyObject *self)
{
    return _Py_HashPointer(self);
}

/* ------------------------------------------------------- buffer protocol */

/* The struct-module format of each dtype; NULL where there is none. */
static const char *buffer_format(weft_dtype d)
{
    switch (d) {
    case WEFT_BOOL: return "?";
    case WEFT_UINT8: return "B";
    case WEFT_INT8: return "b";
    case WEFT_INT16: return "h";
    case WEFT_INT32: return "i";
    case WEFT_INT64: return "q";
    case WEFT_FLOAT16: return "e";
    case WEFT_FLOAT32: return "f";
    case WEFT_FLOAT64: return "d";
    case WEFT_COMPLEX64: return "Zf";
    case WEFT_COMPLEX128: return "Zd";
    default: return NULL;
    }
}

/* Shares the tensor's memory, strides included; the view holds the Tensor
 * (and so its storage) until it is released. */
static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    weft_tensor *t = WPY_T(self);
    weft_dtype d = weft_tensor_dtype(t);
    const char *format = buffer_format(d);
    /* a plugin layout's elements are not strided memory (memoryview of a
     * sparse tensor read its NULL strides and crashed) */
    if (weft_tensor_layout(t) != WEFT_LAYOUT_STRIDED) {
        PyErr_Format(PyExc_BufferError,
                     "a tensor of layout '%s' has no strided memory to expose as a buffer "
                     "(convert it with to_dense() first)",
                     weft_layout_name(weft_tensor_layout(t)));
        return -1;
    }
    if (weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU) {
        PyErr_SetString(PyExc_BufferError, "only cpu tensors expose their memory as a buffer");
        return -1;
    }
    if (!format) {
        PyErr_Format(PyExc_BufferError, "the buffer protocol has no format for %s",
                     weft_dtype_name(d));
        return -1;
    }
    bool read_only = weft_tensor_is_read_only(t);
    if ((flags & PyBUF_WRITABLE) && read_only) {
        PyErr_SetString(PyExc_BufferError, "the tensor is read-only");
        return -1;
    }
    int n = weft_tensor_ndim(t);
    Py_ssize_t *shape = PyMem_Malloc(sizeof(Py_ssize_t) * (2 * (size_t)n + 1));
    if (!shape) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t itemsize = (Py_ssize_t)weft_dtype_size(d);
    Py_ssize_t *strides = shape + n;
    for (int i = 0; i < n; i++) {
        shape[i] = (Py_ssize_t)weft_tensor_sizes(t)[i];
        strides[i] = (Py_ssize_t)weft_tensor_strides(t)[i] * itemsize;
    }
    view->buf = weft_tensor_data_ptr(t);
    view->obj = self;
    Py_INCREF(self);
    view->len = (Py_ssize_t)weft_tensor_numel(t) * itemsize;
    view->readonly = read_only;
    view->itemsize = itemsize;
    view->format = (flags & PyBUF_FORMAT) ? (char *)format : NULL;
    view->ndim = n;
    view->shape = shape;
    view->strides = strides;
    view->suboffsets = NULL;
    view->internal = shape;
    if (!(flags & PyBUF_STRIDES) && !weft_tensor_is_contiguous(t)) {
        Py_CLEAR(view->obj);
        PyMem_Free(shape);
        PyErr_SetString(PyExc_BufferError, "the tensor is not contiguous");
        return -1;
    }
    return 0;
}

static void tensor_releasebuffer(PyObject *self, Py_buffer *view)
{
    PyMem_Free(view->internal);
}

/* numpy(): an array sharing the memory (through a memoryview, which keeps
 * this Tensor alive as long as the array lives). */
static PyObject *m_numpy(PyObject *self, PyObject *unused)
{
    if (weft_tensor_requires_grad(WPY_T(self))) {
        PyErr_SetString(PyExc_RuntimeError, "Can't call numpy() on Tensor that requires grad. "
                                            "Use tensor.detach().numpy() instead.");
        return NULL;
    }
    if (weft_tensor_device(WPY_T(self)).type != WEFT_DEVICE_TYPE_CPU) {
        PyErr_SetString(PyExc_TypeError, "can't convert a non-cpu tensor to numpy: use "
                                         "Tensor.to('cpu') first");
        return NULL;
    }
    if (!buffer_format(weft_tensor_dtype(WPY_T(self)))) {
        PyErr_Format(PyExc_TypeError, "Got unsupported ScalarType %s",
                     weft_dtype_name(weft_tensor_dtype(WPY_T(self))));
        return NULL;
    }
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np)
        return NULL;
    PyObject *mv = PyMemoryView_FromObject(self);
    PyObject *r = mv ? PyObject_CallMethod(np, "asarray", "O", mv) : NULL;
    Py_XDECREF(mv);
    Py_DECREF(np);
    return r;
}

static PyObject *m_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *dtype = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &dtype))
        return NULL;
    PyObject *a = m_numpy(self, NULL);
    if (!a || dtype == Py_None)
        return a;
    PyObject *r = PyObject_CallMethod(a, "astype", "O", dtype);
    Py_DECREF(a);
    return r;
}

/* ------------------------------------------------------------------- type */

static PyType_Slot tensor_slots[] = {
    {Py_tp_doc, "weft.Tensor: a strided view of memory on a device, with autograd."},
    {Py_tp_dealloc, tensor_dealloc},
    {Py_tp_traverse, tensor_traverse},
    {Py_tp_new, tensor_new},
    {Py_tp_getset, tensor_getset},
    {Py_tp_methods, tensor_methods},
    {Py_tp_repr, tensor_repr},
    {Py_tp_hash, tensor_hash},
    {Py_tp_richcompare, tensor_richcompare},
    {Py_tp_iter, tensor_iter},
    {Py_mp_subscript, wpy_tensor_getitem},
    {Py_mp_ass_subscript, wpy_tensor_setitem},
    {Py_mp_length, tensor_len},
    {Py_nb_add, nb_add},
    {Py_nb_subtract, nb_sub},
    {Py_nb_multiply, nb_mul},
    {Py_nb_true_divide, nb_truediv},
    {Py_nb_floor_divide, nb_floordiv},
    {Py_nb_remainder, nb_mod},
    {Py_nb_power, nb_pow},
    {Py_nb_matrix_multiply, nb_matmul},
    {Py_nb_and, nb_and},
    {Py_nb_or, nb_or},
    {Py_nb_xor, nb_xor},
    {Py_nb_inplace_add, nb_iadd},
    {Py_nb_inplace_subtract, nb_isub},
    {Py_nb_inplace_multiply, nb_imul},
    {Py_nb_inplace_true_divide, nb_itruediv},
    {Py_nb_inplace_floor_divide, nb_ifloordiv},
    {Py_nb_inplace_remainder, nb_imod},
    {Py_nb_inplace_power, nb_ipow},
    {Py_nb_inplace_matrix_multiply, nb_imatmul},
    {Py_nb_inplace_and, nb_iand},
    {Py_nb_inplace_or, nb_ior},
    {Py_nb_inplace_xor, nb_ixor},
    {Py_nb_negative, nb_neg},
    {Py_nb_positive, nb_pos},
    {Py_nb_absolute, nb_abs},
    {Py_nb_invert, nb_invert},
    {Py_nb_bool, nb_bool},
    {Py_nb_float, nb_float},
    {Py_nb_int, nb_int},
    {Py_nb_index, nb_index},
    {Py_bf_getbuffer, tensor_getbuffer},
    {Py_bf_releasebuffer, tensor_releasebuffer},
    {0, NULL},
};

static PyMemberDef tensor_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(wpy_tensor, weakrefs), READONLY},
    {NULL},
};

int wpy_tensor_init_type(PyObject *module)
{
    PyType_Slot slots[sizeof tensor_slots / sizeof *tensor_slots + 1];
    memcpy(slots, tensor_slots, sizeof tensor_slots);
    size_t n = sizeof tensor_slots / sizeof *tensor_slots - 1;
    slots[n].slot = Py_tp_members;
    slots[n].pfunc = tensor_members;
    slots[n + 1].slot = 0;
    slots[n + 1].pfunc = NULL;
    PyType_Spec spec = {
        .name = "weft.Tensor",
        .basicsize = sizeof(wpy_tensor),
        /* BASETYPE: nn.Parameter is a Python subclass, as torch's */
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
        .slots = slots,
    };
    wpy_tensor_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &spec, NULL);
    if (!wpy_tensor_type)
        return -1;
    Py_INCREF(wpy_tensor_type);
    return PyModule_AddObject(module, "Tensor", (PyObject *)wpy_tensor_type);
}
