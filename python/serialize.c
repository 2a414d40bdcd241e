/* serialize.c — the C helpers of weft.save and weft.load
 * (python/weft/serialization.py): a tensor's bytes and back, and the
 * files through nn's weft_save_parameters, weft_load_parameters and
 * weft_save_safetensors, so Python writes (and, for the parameter file,
 * checks) exactly what the C library does. */
#include "weftpy.h"

#include <string.h>

#include <weft/nn.h>

/* _to_bytes(t): the elements of t, row-major, in host byte order (a host
 * copy is made for a device tensor or a strided view). */
PyObject *wpy_to_bytes(PyObject *module, PyObject *arg)
{
    if (!wpy_tensor_check(arg)) {
        PyErr_Format(PyExc_TypeError, "_to_bytes() takes a Tensor, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    weft_tensor *host = NULL, *dense = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_to_device(&host, WPY_T(arg), WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_contiguous(&dense, host);
    Py_END_ALLOW_THREADS
    weft_tensor_release(host);
    if (rc < 0)
        return wpy_raise(rc);
    size_t n = (size_t)weft_tensor_numel(dense) * weft_dtype_size(weft_tensor_dtype(dense));
    PyObject *bytes = PyBytes_FromStringAndSize(n ? weft_tensor_data_ptr(dense) : NULL, (Py_ssize_t)n);
    weft_tensor_release(dense);
    return bytes;
}

/* _from_bytes(buffer, offset, dtype, shape): a new CPU tensor holding a copy
 * of the elements at buffer[offset:]; ValueError when the buffer is short. */
PyObject *wpy_from_bytes(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset;
    PyObject *dtype_o, *shape;
    if (!PyArg_ParseTuple(args, "y*nOO!:_from_bytes", &view, &offset, &dtype_o, &PyTuple_Type, &shape))
        return NULL;
    PyObject *result = NULL;
    weft_dtype dtype;
    int64_t sizes[WEFT_MAX_DIMS];
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (wpy_parse_dtype(dtype_o, &dtype) < 0)
        goto done;
    if (dtype == WEFT_DTYPE_UNSET || ndim > WEFT_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "_from_bytes(): a dtype and at most %d dims are needed", WEFT_MAX_DIMS);
        goto done;
    }
    uint64_t count = 1;
    bool overflow = false;
    for (Py_ssize_t i = 0; i < ndim; i++) {
        sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (sizes[i] == -1 && PyErr_Occurred())
            goto done;
        if (sizes[i] < 0) {
            PyErr_Format(PyExc_ValueError, "_from_bytes(): negative size %lld", (long long)sizes[i]);
            goto done;
        }
        if (sizes[i] && count > UINT64_MAX / (uint64_t)sizes[i])
            overflow = true;
        count *= (uint64_t)sizes[i];
    }
    size_t item = weft_dtype_size(dtype);
    if (overflow || offset < 0 || offset > view.len || count > (uint64_t)(view.len - offset) / item) {
        PyErr_Format(PyExc_ValueError, "_from_bytes(): %zd bytes from offset %zd hold fewer than the "
                     "elements of the shape", view.len, offset);
        goto done;
    }
    weft_tensor *t = NULL;
    int rc = weft_empty(&t, sizes, (int)ndim, dtype, WEFT_DEVICE_CPU);
    if (rc < 0) {
        wpy_raise(rc);
        goto done;
    }
    if (count)
        memcpy(weft_tensor_data_ptr(t), (const char *)view.buf + offset, (size_t)count * item);
    result = wpy_wrap(t);
done:
    PyBuffer_Release(&view);
    return result;
}

/* The tensors and names of two equally long tuples, borrowed. */
static int named_tensors(PyObject *tensors, PyObject *names, weft_tensor **t, const char **n)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tensors); i++) {
        PyObject *o = PyTuple_GET_ITEM(tensors, i), *name = PyTuple_GET_ITEM(names, i);
        if (!wpy_tensor_check(o) || !PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "entry %zd: a str name and a Tensor are needed, not %.100s "
                         "and %.100s", i, Py_TYPE(name)->tp_name, Py_TYPE(o)->tp_name);
            return -1;
        }
        t[i] = WPY_T(o);
        if (!(n[i] = PyUnicode_AsUTF8(name)))
            return -1;
    }
    return 0;
}

/* _save_parameters(path, tensors, names), _load_parameters(path, tensors,
 * names), _save_safetensors(path, tensors, names): weft_save_parameters,
 * weft_load_parameters, weft_save_safetensors. */
enum { LOAD_PARAMETERS, SAVE_PARAMETERS, SAVE_SAFETENSORS };

static PyObject *parameters(PyObject *args, int what)
{
    PyObject *path, *tensors, *names;
    if (!PyArg_ParseTuple(args, "O&O!O!", PyUnicode_FSConverter, &path, &PyTuple_Type, &tensors,
                          &PyTuple_Type, &names))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tensors);
    if (n != PyTuple_GET_SIZE(names) || n > 1000000) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_ValueError, "as many names as tensors are needed");
        return NULL;
    }
    weft_tensor **t = weft_malloc(sizeof *t * (n ? n : 1));
    const char **nm = weft_malloc(sizeof *nm * (n ? n : 1));
    int rc = 0;
    if (!t || !nm) {
        PyErr_NoMemory();
        rc = -1;
    } else if (named_tensors(tensors, names, t, nm) < 0) {
        rc = -1;
    } else {
        const char *p = PyBytes_AS_STRING(path);
        Py_BEGIN_ALLOW_THREADS
        rc = what == SAVE_PARAMETERS   ? weft_save_parameters(p, t, nm, (int)n)
             : what == LOAD_PARAMETERS ? weft_load_parameters(p, t, nm, (int)n)
                                       : weft_save_safetensors(p, t, nm, (int)n);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            wpy_raise(rc);
    }
    weft_free(t);
    weft_free(nm);
    Py_DECREF(path);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *wpy_save_parameters(PyObject *module, PyObject *args)
{
    return parameters(args, SAVE_PARAMETERS);
}

PyObject *wpy_save_safetensors(PyObject *module, PyObject *args)
{
    return parameters(args, SAVE_SAFETENSORS);
}

PyObject *wpy_load_parameters(PyObject *module, PyObject *args)
{
    return parameters(args, LOAD_PARAMETERS);
}
