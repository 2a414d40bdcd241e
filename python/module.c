/* module.c — `weft._C`, the extension inside the `weft` package (whose
 * python/weft/__init__.py re-exports its public names): errors, dtypes,
 * devices, factories, grad mode and plugins.  The operators are bound in ops.c from the
 * operator table; Tensor is tensor.c; DLPack is dlpack.c. */
#include "weftpy.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

/* PyTorch raises RuntimeError for nearly every check its C++ code makes
 * (shape, dtype, device, autograd), IndexError for an index or dimension out
 * of range, NotImplementedError when no kernel exists for the backend, and
 * MemoryError when an allocation fails.  Errors found while reading Python
 * arguments are TypeError (wrong kind of object) or ValueError (a value no
 * call could accept), raised by the module itself. */
static PyObject *exception_for(int rc)
{
    switch (rc) {
    case WEFT_ERANGE:
        return PyExc_IndexError;
    case WEFT_ENOMEM:
        return PyExc_MemoryError;
    case WEFT_ENOKERNEL:
        return PyExc_NotImplementedError;
    case WEFT_EIO:
        return PyExc_OSError;
    default:
        return PyExc_RuntimeError;
    }
}

PyObject *wpy_raise(int rc)
{
    const char *msg = weft_last_error();
    if (!msg || !*msg)
        msg = weft_strerror(rc);
    PyErr_SetString(exception_for(rc), msg);
    return NULL;
}

int wpy_raise_int(int rc)
{
    wpy_raise(rc);
    return -1;
}

/* ------------------------------------------------------------------ dtypes */

static PyObject *dtype_objects[WEFT_NUM_DTYPES];

static PyObject *dtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat("weft.%s", weft_dtype_name(((wpy_dtype *)self)->dtype));
}

static PyObject *dtype_is_floating(PyObject *self, void *unused)
{
    return PyBool_FromLong(weft_dtype_is_floating(((wpy_dtype *)self)->dtype));
}

static PyObject *dtype_is_complex(PyObject *self, void *unused)
{
    return PyBool_FromLong(weft_dtype_is_complex(((wpy_dtype *)self)->dtype));
}

static PyObject *dtype_itemsize(PyObject *self, void *unused)
{
    return PyLong_FromSize_t(weft_dtype_size(((wpy_dtype *)self)->dtype));
}

static PyObject *dtype_name(PyObject *self, void *unused)
{
    return PyUnicode_FromString(weft_dtype_name(((wpy_dtype *)self)->dtype));
}

static PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating, NULL, NULL, NULL},
    {"is_complex", dtype_is_complex, NULL, NULL, NULL},
    {"itemsize", dtype_itemsize, NULL, NULL, NULL},
    {"name", dtype_name, NULL, NULL, NULL},
    {NULL},
};

PyTypeObject wpy_dtype_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "weft.dtype",
    .tp_basicsize = sizeof(wpy_dtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = dtype_repr,
    .tp_getset = dtype_getset,
    .tp_doc = "A weft dtype: weft.float32, weft.int64, ...",
};

PyObject *wpy_dtype_object(weft_dtype d)
{
    if (d < 0 || d >= WEFT_NUM_DTYPES)
        return PyErr_Format(PyExc_RuntimeError, "invalid dtype %d", (int)d);
    Py_INCREF(dtype_objects[d]);
    return dtype_objects[d];
}

int wpy_parse_dtype(PyObject *o, weft_dtype *out)
{
    if (!o || o == Py_None) {
        *out = WEFT_DTYPE_UNSET;
        return 0;
    }
    if (PyObject_TypeCheck(o, &wpy_dtype_type)) {
        *out = ((wpy_dtype *)o)->dtype;
        return 0;
    }
    if (PyUnicode_Check(o)) {
        const char *name = PyUnicode_AsUTF8(o);
        if (!name)
            return -1;
        *out = weft_dtype_from_name(name);
        if (*out != WEFT_DTYPE_UNSET)
            return 0;
    }
    PyErr_Format(PyExc_TypeError, "dtype must be a weft.dtype (such as weft.float32), not %R", o);
    return -1;
}

/* ----------------------------------------------------------------- devices */

/* weft.device, the Python class of python/weft/_device.py, registered by
 * the package at import (_set_device_class); its str() is "cuda:0". */
static PyObject *device_class;

static PyObject *py_set_device_class(PyObject *m, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "_set_device_class() takes a class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(device_class, cls);
    wpy_device_cache_clear(); /* objects of the class before */
    Py_RETURN_NONE;
}

PyObject *wpy_device_class(void)
{
    return device_class;
}

PyObject *wpy_slot_get(const wpy_named_slot *slot, const char *name)
{
    return slot->obj && strcmp(slot->name, name) == 0 ? Py_NewRef(slot->obj) : NULL;
}

PyObject *wpy_slot_make(wpy_named_slot *slot, const char *name, PyObject *cls, const char *arg)
{
    PyObject *obj = PyObject_CallFunction(cls, "s", arg);
    char *copy = obj ? strdup(name) : NULL;
    if (!copy) {
        Py_XDECREF(obj);
        return obj ? PyErr_NoMemory() : NULL;
    }
    wpy_slot_clear(slot);
    slot->obj = Py_NewRef(obj);
    slot->name = copy;
    return obj;
}

void wpy_slot_clear(wpy_named_slot *slot)
{
    Py_CLEAR(slot->obj);
    free(slot->name);
    slot->name = NULL;
}

/* _parse_device(str) -> (type id, index): the core's parse of a device
 * string, RuntimeError naming the known types for an unknown one. */
static PyObject *py_parse_device(PyObject *m, PyObject *arg)
{
    const char *text = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!text) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "a device string is needed, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    weft_device d;
    int rc = weft_device_from_string(&d, text);
    if (rc < 0)
        return wpy_raise(rc);
    return Py_BuildValue("(ii)", d.type, d.index);
}

int wpy_parse_device(PyObject *o, weft_device *out)
{
    if (!o || o == Py_None) {
        *out = WEFT_DEVICE_CPU;
        return 0;
    }
    PyObject *text_o = NULL;
    if (PyUnicode_Check(o)) {
        text_o = Py_NewRef(o);
    } else if (device_class && PyObject_TypeCheck(o, (PyTypeObject *)device_class)) {
        if (!(text_o = PyObject_Str(o)))
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "device must be a weft.device or a string such as 'cpu', not %R", o);
        return -1;
    }
    const char *text = PyUnicode_AsUTF8(text_o);
    int rc = text ? weft_device_from_string(out, text) : 0;
    Py_DECREF(text_o);
    if (!text)
        return -1;
    return rc < 0 ? wpy_raise_int(rc) : 0;
}

/* -------------------------------------------------------------- factories */

/* The sizes of a factory: f(2, 3), f((2, 3)), f([2, 3]) or f(size=(2, 3)). */
static int parse_sizes(PyObject *args, PyObject *size_kw, int64_t *sizes, int *ndim)
{
    PyObject *seq = args;
    if (size_kw) {
        if (PyTuple_GET_SIZE(args) > 0) {
            PyErr_SetString(PyExc_TypeError, "size given both by position and by keyword");
            return -1;
        }
        seq = size_kw;
    }
    if (PyTuple_Check(seq) && PyTuple_GET_SIZE(seq) == 1 &&
        !PyLong_Check(PyTuple_GET_ITEM(seq, 0)))
        seq = PyTuple_GET_ITEM(seq, 0);
    if (PyLong_Check(seq)) {
        sizes[0] = PyLong_AsLongLong(seq);
        *ndim = 1;
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *fast = PySequence_Fast(seq, "size must be a sequence of ints");
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > WEFT_MAX_DIMS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "too many dimensions: %zd (at most %d)", n, WEFT_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyIndex_Check(item) || PyBool_Check(item)) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_TypeError, "size must be a sequence of ints, not %R", seq);
            return -1;
        }
        sizes[i] = PyLong_AsLongLong(item);
        if (sizes[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    *ndim = (int)n;
    Py_DECREF(fast);
    return 0;
}

PyObject *wpy_factory_result(int rc, weft_tensor *t, int requires_grad)
{
    if (rc < 0)
        return wpy_raise(rc);
    if (requires_grad && (rc = weft_tensor_set_requires_grad(t, true)) < 0) {
        weft_tensor_release(t);
        return wpy_raise(rc);
    }
    return wpy_wrap(t);
}

enum { F_EMPTY, F_ZEROS, F_ONES, F_RAND, F_RANDN };

static PyObject *sized_factory(int kind, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"size", "dtype", "device", "requires_grad", NULL};
    PyObject *size = NULL, *dtype_o = NULL, *device_o = NULL;
    int requires_grad = 0;
    PyObject *empty = PyTuple_New(0);
    int ok = PyArg_ParseTupleAndKeywords(empty, kwargs, "|$OOOp", kwlist, &size, &dtype_o,
                                         &device_o, &requires_grad);
    Py_DECREF(empty);
    if (!ok)
        return NULL;
    int64_t sizes[WEFT_MAX_DIMS];
    int ndim;
    weft_dtype dtype;
    weft_device device;
    if (parse_sizes(args, size, sizes, &ndim) < 0 || wpy_parse_dtype(dtype_o, &dtype) < 0 ||
        wpy_parse_device(device_o, &device) < 0)
        return NULL;
    if (dtype == WEFT_DTYPE_UNSET)
        dtype = WEFT_FLOAT32;
    weft_tensor *t = NULL;
    int rc;
    switch (kind) {
    case F_EMPTY:
        rc = weft_empty(&t, sizes, ndim, dtype, device);
        break;
    case F_ZEROS:
        rc = weft_zeros(&t, sizes, ndim, dtype, device);
        break;
    case F_ONES:
        rc = weft_ones(&t, sizes, ndim, dtype, device);
        break;
    case F_RAND:
        rc = weft_rand(&t, sizes, ndim, dtype, device, NULL);
        break;
    default:
        rc = weft_randn(&t, sizes, ndim, dtype, device, NULL);
        break;
    }
    return wpy_factory_result(rc, t, requires_grad);
}

static PyObject *py_empty(PyObject *m, PyObject *a, PyObject *k) { return sized_factory(F_EMPTY, a, k); }
static PyObject *py_zeros(PyObject *m, PyObject *a, PyObject *k) { return sized_factory(F_ZEROS, a, k); }
static PyObject *py_ones(PyObject *m, PyObject *a, PyObject *k) { return sized_factory(F_ONES, a, k); }
static PyObject *py_rand(PyObject *m, PyObject *a, PyObject *k) { return sized_factory(F_RAND, a, k); }
static PyObject *py_randn(PyObject *m, PyObject *a, PyObject *k) { return sized_factory(F_RANDN, a, k); }

/* randint(high, size) or randint(low, high, size), as torch.randint; int64
 * unless dtype says otherwise; from the default generator. */
static PyObject *py_randint(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"low", "high", "size", "dtype", "device", "requires_grad", NULL};
    long long low = 0, high = 0;
    PyObject *high_o = Py_None, *size = Py_None, *dtype_o = NULL, *device_o = NULL;
    int requires_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "L|OO$OOp", kwlist, &low, &high_o, &size,
                                     &dtype_o, &device_o, &requires_grad))
        return NULL;
    if (size == Py_None) { /* randint(high, size) */
        size = high_o;
        high = low;
        low = 0;
    } else {
        high = PyLong_AsLongLong(high_o);
        if (high == -1 && PyErr_Occurred())
            return NULL;
    }
    if (size == Py_None) {
        PyErr_SetString(PyExc_TypeError, "randint() needs high and size");
        return NULL;
    }
    int64_t sizes[WEFT_MAX_DIMS];
    int ndim;
    weft_dtype dtype;
    weft_device device;
    PyObject *none = PyTuple_New(0);
    int rc = none ? parse_sizes(none, size, sizes, &ndim) : -1;
    Py_XDECREF(none);
    if (rc < 0 || wpy_parse_dtype(dtype_o, &dtype) < 0 || wpy_parse_device(device_o, &device) < 0)
        return NULL;
    weft_tensor *t = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_randint(&t, low, high, sizes, ndim, dtype == WEFT_DTYPE_UNSET ? WEFT_INT64 : dtype,
                      device, NULL);
    Py_END_ALLOW_THREADS
    return wpy_factory_result(rc, t, requires_grad);
}

/* randperm(n): a random permutation of 0..n-1, int64 unless dtype says */
static PyObject *py_randperm(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"n", "dtype", "device", NULL};
    long long n = 0;
    PyObject *dtype_o = NULL, *device_o = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "L|$OO", kwlist, &n, &dtype_o, &device_o))
        return NULL;
    weft_dtype dtype;
    weft_device device;
    if (wpy_parse_dtype(dtype_o, &dtype) < 0 || wpy_parse_device(device_o, &device) < 0)
        return NULL;
    weft_tensor *t = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_randperm(&t, n, dtype == WEFT_DTYPE_UNSET ? WEFT_INT64 : dtype, device, NULL);
    Py_END_ALLOW_THREADS
    return wpy_factory_result(rc, t, 0);
}

/* The dtype a Python number gives a new tensor, as torch.full and
 * torch.arange choose it: bool, int64, float32 (the default dtype). */
static weft_dtype dtype_of_number(PyObject *o)
{
    if (PyBool_Check(o))
        return WEFT_BOOL;
    if (PyLong_Check(o))
        return WEFT_INT64;
    return WEFT_FLOAT32;
}

static PyObject *py_full(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"size", "fill_value", "dtype", "device", "requires_grad", NULL};
    PyObject *size, *value, *dtype_o = NULL, *device_o = NULL;
    int requires_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOp", kwlist, &size, &value, &dtype_o,
                                     &device_o, &requires_grad))
        return NULL;
    int64_t sizes[WEFT_MAX_DIMS];
    int ndim;
    weft_dtype dtype;
    weft_device device;
    PyObject *tuple = PyTuple_Pack(1, size);
    int bad = !tuple || parse_sizes(tuple, NULL, sizes, &ndim) < 0;
    Py_XDECREF(tuple);
    if (bad || wpy_parse_dtype(dtype_o, &dtype) < 0 || wpy_parse_device(device_o, &device) < 0)
        return NULL;
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    if (dtype == WEFT_DTYPE_UNSET)
        dtype = dtype_of_number(value);
    weft_tensor *t = NULL;
    int rc = weft_full(&t, sizes, ndim, v, dtype, device);
    return wpy_factory_result(rc, t, requires_grad);
}

static PyObject *py_arange(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"start", "end", "step", "dtype", "device", "requires_grad", NULL};
    PyObject *start = NULL, *end = Py_None, *step = NULL, *dtype_o = NULL, *device_o = NULL;
    int requires_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO$OOp", kwlist, &start, &end, &step,
                                     &dtype_o, &device_o, &requires_grad))
        return NULL;
    PyObject *zero = PyLong_FromLong(0), *one = PyLong_FromLong(1);
    if (end == Py_None) {
        end = start;
        start = zero;
    }
    if (!step)
        step = one;
    double s = PyFloat_AsDouble(start), e = PyFloat_AsDouble(end), st = PyFloat_AsDouble(step);
    weft_dtype dtype = WEFT_INT64;
    if (!PyLong_Check(start) || !PyLong_Check(end) || !PyLong_Check(step))
        dtype = WEFT_FLOAT32;
    Py_DECREF(zero);
    Py_DECREF(one);
    if (PyErr_Occurred())
        return NULL;
    weft_dtype given;
    weft_device device;
    if (wpy_parse_dtype(dtype_o, &given) < 0 || wpy_parse_device(device_o, &device) < 0)
        return NULL;
    if (given != WEFT_DTYPE_UNSET)
        dtype = given;
    weft_tensor *t = NULL;
    int rc = weft_arange(&t, s, e, st, dtype, device);
    return wpy_factory_result(rc, t, requires_grad);
}

static PyObject *py_linspace(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"start", "end", "steps", "dtype", "device", "requires_grad", NULL};
    double start, end;
    long long steps;
    PyObject *dtype_o = NULL, *device_o = NULL;
    int requires_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ddL|$OOp", kwlist, &start, &end, &steps,
                                     &dtype_o, &device_o, &requires_grad))
        return NULL;
    weft_dtype dtype;
    weft_device device;
    if (wpy_parse_dtype(dtype_o, &dtype) < 0 || wpy_parse_device(device_o, &device) < 0)
        return NULL;
    if (dtype == WEFT_DTYPE_UNSET)
        dtype = WEFT_FLOAT32;
    weft_tensor *t = NULL;
    int rc = weft_linspace(&t, start, end, steps, dtype, device);
    return wpy_factory_result(rc, t, requires_grad);
}

static PyObject *py_manual_seed(PyObject *m, PyObject *seed)
{
    unsigned long long s = PyLong_AsUnsignedLongLongMask(seed);
    if (PyErr_Occurred())
        return NULL;
    weft_manual_seed(s);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ thread count */

static PyObject *py_set_num_threads(PyObject *m, PyObject *arg)
{
    int overflow = 0;
    long n = PyLong_AsLongAndOverflow(arg, &overflow);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    /* out of int's range is as wrong as 0: let the core's message say so */
    if (overflow || n > INT_MAX || n < INT_MIN)
        n = overflow < 0 || n < 0 ? 0 : INT_MAX;
    int rc = weft_set_num_threads((int)n);
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *m, PyObject *unused)
{
    return PyLong_FromLong(weft_get_num_threads());
}

/* set_thread_binding("auto" | "none" | "spread"): where the CPU pool's
 * workers run (weft_set_thread_binding); anything else is a ValueError
 * naming the three. */
static const char *const binding_names[] = {
    [WEFT_BIND_AUTO] = "auto", [WEFT_BIND_NONE] = "none", [WEFT_BIND_SPREAD] = "spread"};

static PyObject *py_set_thread_binding(PyObject *m, PyObject *arg)
{
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "set_thread_binding() takes a str, not %s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    for (int mode = 0; mode < (int)(sizeof binding_names / sizeof *binding_names); mode++)
        if (strcmp(name, binding_names[mode]) == 0) {
            int rc = weft_set_thread_binding((weft_thread_binding)mode);
            if (rc < 0)
                return wpy_raise(rc);
            Py_RETURN_NONE;
        }
    PyErr_Format(PyExc_ValueError, "set_thread_binding(): '%s' is not 'auto', 'none' or 'spread'", name);
    return NULL;
}

static PyObject *py_get_thread_binding(PyObject *m, PyObject *unused)
{
    weft_thread_binding mode = weft_get_thread_binding();
    return PyUnicode_FromString(binding_names[mode]);
}

/* ------------------------------------------------------- grad mode, plugins */

static PyObject *py_set_grad_enabled(PyObject *m, PyObject *mode)
{
    int on = PyObject_IsTrue(mode);
    if (on < 0)
        return NULL;
    return PyBool_FromLong(weft_set_grad_enabled(on));
}

static PyObject *py_is_grad_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(weft_is_grad_enabled());
}

static PyObject *py_load_plugin(PyObject *m, PyObject *path)
{
    PyObject *bytes;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    int rc = weft_load_plugin(PyBytes_AS_STRING(bytes));
    Py_DECREF(bytes);
    if (rc < 0)
        return wpy_raise(rc);
    /* the operators the plugin defined become functions and methods */
    if (wpy_ops_init(m) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static const char *plugin_status_names[] = {"loaded", "skipped", "unsupported", "failed"};

/* The load report as a list of dicts, one per candidate file. */
static PyObject *py_plugins(PyObject *m, PyObject *unused)
{
    int n = weft_plugin_report_count();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        weft_plugin_report r;
        if (weft_plugin_report_get(i, &r) < 0)
            continue;
        const char *status = (unsigned)r.status < 4 ? plugin_status_names[r.status] : "?";
        PyObject *row = Py_BuildValue("{s:s,s:z,s:z,s:s,s:z,s:(II),s:i}", "path", r.path, "name",
                                      r.name, "variant", r.variant, "status", status, "error",
                                      r.error, "abi", r.abi_major, r.abi_minor, "score", r.score);
        if (!row || PyList_Append(list, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(row);
    }
    return list;
}

/* The devices that have a backend: ["cpu", "cuda:0", ...]. */
static PyObject *py_devices(PyObject *m, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (int type = 0; list && type < WEFT_MAX_DEVICE_TYPES; type++) {
        if (!weft_device_type_name(type))
            continue;
        int count = weft_device_count(type);
        for (int i = 0; i < count; i++) {
            char name[80];
            weft_device_to_string((weft_device){(int16_t)type, (int16_t)i}, name, sizeof name);
            PyObject *s = PyUnicode_FromString(name);
            if (!s || PyList_Append(list, s) < 0) {
                Py_XDECREF(s);
                Py_CLEAR(list);
                break;
            }
            Py_DECREF(s);
        }
    }
    return list;
}

static PyMethodDef module_methods[] = {
    {"tensor", (PyCFunction)(void (*)(void))wpy_tensor_from_data, METH_VARARGS | METH_KEYWORDS,
     "tensor(data, *, dtype=None, device=None, requires_grad=False): a new tensor holding a copy "
     "of data (nested lists of numbers, or any object with __dlpack__)."},
    {"empty", (PyCFunction)(void (*)(void))py_empty, METH_VARARGS | METH_KEYWORDS,
     "empty(*size, dtype=None, device=None, requires_grad=False)"},
    {"zeros", (PyCFunction)(void (*)(void))py_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(*size, dtype=None, device=None, requires_grad=False)"},
    {"ones", (PyCFunction)(void (*)(void))py_ones, METH_VARARGS | METH_KEYWORDS,
     "ones(*size, dtype=None, device=None, requires_grad=False)"},
    {"rand", (PyCFunction)(void (*)(void))py_rand, METH_VARARGS | METH_KEYWORDS,
     "rand(*size, dtype=None, device=None, requires_grad=False): uniform on [0, 1)"},
    {"randn", (PyCFunction)(void (*)(void))py_randn, METH_VARARGS | METH_KEYWORDS,
     "randn(*size, dtype=None, device=None, requires_grad=False): standard normal"},
    {"randint", (PyCFunction)(void (*)(void))py_randint, METH_VARARGS | METH_KEYWORDS,
     "randint(low=0, high, size, *, dtype=int64, device=None): integers uniform in [low, high)"},
    {"randperm", (PyCFunction)(void (*)(void))py_randperm, METH_VARARGS | METH_KEYWORDS,
     "randperm(n, *, dtype=int64, device=None): a random permutation of 0..n-1"},
    {"full", (PyCFunction)(void (*)(void))py_full, METH_VARARGS | METH_KEYWORDS,
     "full(size, fill_value, *, dtype=None, device=None, requires_grad=False)"},
    {"arange", (PyCFunction)(void (*)(void))py_arange, METH_VARARGS | METH_KEYWORDS,
     "arange(start=0, end, step=1, *, dtype=None, device=None, requires_grad=False)"},
    {"linspace", (PyCFunction)(void (*)(void))py_linspace, METH_VARARGS | METH_KEYWORDS,
     "linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False)"},
    {"manual_seed", py_manual_seed, METH_O, "manual_seed(seed): seeds the default generator"},
    {"set_num_threads", py_set_num_threads, METH_O,
     "set_num_threads(n): intra-op threads, from the next operator on"},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "get_num_threads()"},
    {"set_thread_binding", py_set_thread_binding, METH_O,
     "set_thread_binding(mode): 'auto', 'none' or 'spread' -- where the CPU pool's workers run"},
    {"get_thread_binding", py_get_thread_binding, METH_NOARGS, "get_thread_binding()"},
    {"from_dlpack", (PyCFunction)(void (*)(void))wpy_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(x, *, device=None, copy=None): a tensor sharing the memory of any object with "
     "__dlpack__ (or of a DLPack capsule)."},
    {"_dlpack_deleter_calls", wpy_dlpack_deleter_calls, METH_NOARGS,
     "How many times the deleter of memory imported from Python has run (for tests)."},
    {"set_grad_enabled", py_set_grad_enabled, METH_O,
     "set_grad_enabled(mode): sets this thread's grad mode; returns the previous one"},
    {"is_grad_enabled", py_is_grad_enabled, METH_NOARGS, "is_grad_enabled()"},
    {"load_plugin", py_load_plugin, METH_O, "load_plugin(path): loads one plugin file"},
    {"plugins", py_plugins, METH_NOARGS, "plugins(): the plugin load report, a list of dicts"},
    {"devices", py_devices, METH_NOARGS, "devices(): the devices with a backend"},
    {"_function_apply", wpy_function_apply, METH_VARARGS,
     "_function_apply(name, inputs, outputs, saved, non_differentiable, dirty, backward): "
     "records a custom function's node (weft.autograd.Function.apply)"},
    {"_autograd_grad", wpy_autograd_grad, METH_VARARGS,
     "_autograd_grad(outputs, grad_outputs, inputs, retain_graph, create_graph, allow_unused) "
     "(weft.autograd.grad)"},
    {"_to_bytes", wpy_to_bytes, METH_O, "_to_bytes(t): the elements, row-major (weft.save)"},
    {"_from_bytes", wpy_from_bytes, METH_VARARGS,
     "_from_bytes(buffer, offset, dtype, shape): a CPU tensor copied from buffer (weft.load)"},
    {"_save_parameters", wpy_save_parameters, METH_VARARGS,
     "_save_parameters(path, tensors, names): weft_save_parameters"},
    {"_save_safetensors", wpy_save_safetensors, METH_VARARGS,
     "_save_safetensors(path, tensors, names): weft_save_safetensors"},
    {"_load_parameters", wpy_load_parameters, METH_VARARGS,
     "_load_parameters(path, tensors, names): weft_load_parameters"},
    {"_set_device_class", py_set_device_class, METH_O,
     "_set_device_class(cls): the class device arguments may also be (weft.device)"},
    {"_parse_device", py_parse_device, METH_O, "_parse_device(str): (type id, index)"},
    {"_register_hook", wpy_register_hook, METH_VARARGS,
     "_register_hook(tensor, fn): fn(grad) runs when the gradient reaches tensor (Tensor.register_hook)"},
    {"_read_idx", wpy_read_idx, METH_O,
     "_read_idx(path): an IDX file (gzip or plain) as a uint8 tensor (weft.datasets)"},
    {"_sgd_step", wpy_sgd_step, METH_VARARGS,
     "_sgd_step(params, grads, momentum_buffers, lr, momentum, dampening, weight_decay, "
     "nesterov, maximize): weft_sgd_step over one group; None buffers are filled in"},
    {"_adam_step", wpy_adam_step, METH_VARARGS,
     "_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, "
     "beta2, eps, weight_decay, amsgrad, maximize, decoupled): weft_adam_step/weft_adamw_step"},
    {"_rmsprop_step", wpy_rmsprop_step, METH_VARARGS,
     "_rmsprop_step(params, grads, square_avgs, momentum_buffers, grad_avgs, steps, lr, alpha, "
     "eps, weight_decay, momentum, centered, maximize): weft_rmsprop_step"},
    {"_adagrad_step", wpy_adagrad_step, METH_VARARGS,
     "_adagrad_step(params, grads, state_sums, steps, lr, lr_decay, weight_decay, "
     "initial_accumulator_value, eps, maximize): weft_adagrad_step"},
    {"_layout", wpy_layout_of, METH_O, "_layout(t): the name of t's layout (Tensor.layout)"},
    {"_set_layout_class", wpy_set_layout_class, METH_O,
     "_set_layout_class(cls): the class of Tensor.layout's objects (weft._layout.layout)"},
    {"_set_layout_to_dtype", wpy_set_layout_to_dtype, METH_VARARGS,
     "_set_layout_to_dtype(name, fn): fn(tensor, dtype) converts tensors of the layout "
     "called name for Tensor.to and the converters (None removes it)"},
    {"_layouts", wpy_layouts, METH_NOARGS,
     "_layouts(): [(id, name, plugin)] of the registered layouts (weft.layouts)"},
    {"_to_layout", wpy_to_layout, METH_VARARGS,
     "_to_layout(t, name): t converted to the layout called name, differentiably"},
    {"_to_strided", wpy_to_strided, METH_O, "_to_strided(t): t in the strided layout"},
    {"_info", (PyCFunction)(void (*)(void))wpy_info, METH_VARARGS | METH_KEYWORDS,
     "_info(op=None): what weft-info prints, as a str (python -m weft.info)"},
    {"unique", (PyCFunction)(void (*)(void))wpy_unique, METH_VARARGS | METH_KEYWORDS,
     "unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None): the "
     "distinct values, sorted; with (values, inverse), (values, counts) or (values, inverse, "
     "counts) as asked, as torch.unique"},
    /* the profiler (issue 19; weft/profiler.py) */
    {"_profiler_create", wpy_profiler_create, METH_VARARGS,
     "_profiler_create(record_shapes, profile_memory, record_device_time=False): a new session "
     "(a capsule)"},
    {"_profiler_start", wpy_profiler_start, METH_O,
     "_profiler_start(session): this thread records into session"},
    {"_profiler_stop", wpy_profiler_stop, METH_O, "_profiler_stop(session): this thread stops"},
    {"_profiler_export", wpy_profiler_export, METH_VARARGS,
     "_profiler_export(session, path): writes the Chrome trace"},
    {"_profiler_key_averages", wpy_profiler_key_averages, METH_VARARGS,
     "_profiler_key_averages(session, group_by_input_shape): [(name, input_shapes, calls, "
     "total_us, self_us, memory, self_memory, device_us)]"},
    {"_profiler_table", wpy_profiler_table, METH_VARARGS,
     "_profiler_table(session, sort_by, row_limit, group_by_input_shape): the table as a str"},
    {"_range_push", wpy_range_push, METH_O, "_range_push(name): opens a profiler range"},
    {"_range_pop", wpy_range_pop, METH_NOARGS, "_range_pop(): closes the innermost range"},
    {NULL},
};

static struct PyModuleDef weft_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "weft._C",
    .m_doc = "weft: a tensor framework with a C core, plugins and autograd.",
    .m_size = -1,
    .m_methods = module_methods,
};

static int add_dtypes(PyObject *module)
{
    if (PyType_Ready(&wpy_dtype_type) < 0)
        return -1;
    Py_INCREF(&wpy_dtype_type);
    if (PyModule_AddObject(module, "dtype", (PyObject *)&wpy_dtype_type) < 0)
        return -1;
    for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
        wpy_dtype *o = PyObject_New(wpy_dtype, &wpy_dtype_type);
        if (!o)
            return -1;
        o->dtype = (weft_dtype)d;
        dtype_objects[d] = (PyObject *)o;
        Py_INCREF(o);
        if (PyModule_AddObject(module, weft_dtype_name((weft_dtype)d), (PyObject *)o) < 0)
            return -1;
    }
    /* PyTorch's other names for the same dtypes */
    static const char *aliases[] = {"float", "double", "half", "long", "int", "short", "cfloat",
                                    "cdouble", "complex32"};
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++) {
        weft_dtype d = weft_dtype_from_name(aliases[i]);
        if (d == WEFT_DTYPE_UNSET)
            continue;
        Py_INCREF(dtype_objects[d]);
        if (PyModule_AddObject(module, aliases[i], dtype_objects[d]) < 0)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__C(void)
{
    /* Plugins beside libweft (or on WEFT_PLUGIN_PATH); failures are in
     * weft.plugins(), and a missing CPU backend shows as a clear error on
     * the first operator. */
    weft_load_default_plugins();
    PyObject *module = PyModule_Create(&weft_module);
    if (!module)
        return NULL;
    if (add_dtypes(module) < 0 || wpy_tensor_init_type(module) < 0 || wpy_ops_init(module) < 0)
        goto fail;
    if (PyModule_AddFunctions(module, wpy_dist_methods) < 0) /* weft.distributed (issue 18) */
        goto fail;
    PyModule_AddStringConstant(module, "__version__", weft_version());
    return module;
fail:
    Py_DECREF(module);
    return NULL;
}
