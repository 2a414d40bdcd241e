/* layout.c — layouts from Python: the name of a tensor's layout, the
 * registered layouts, and the differentiable conversions (weft._C._layout,
 * _layouts, _to_layout, _to_strided; weft/_layout.py builds Tensor.layout,
 * weft.strided and Tensor.to_layout on them). */
#include "weftpy.h"

static int tensor_arg(PyObject *o, const char *what)
{
    if (wpy_tensor_check(o))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected a weft.Tensor, got %.100s", what,
                 Py_TYPE(o)->tp_name);
    return -1;
}

PyObject *wpy_layout_of(PyObject *module, PyObject *arg)
{
    (void)module;
    if (tensor_arg(arg, "layout") < 0)
        return NULL;
    const char *name = weft_layout_name(weft_tensor_layout(WPY_T(arg)));
    return PyUnicode_FromString(name ? name : "?");
}

PyObject *wpy_layouts(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *list = PyList_New(0);
    for (int id = 0; list && id <= WEFT_MAX_LAYOUTS; id++) {
        const char *name = weft_layout_name(id);
        if (!name)
            continue;
        PyObject *item = Py_BuildValue("(iss)", id, name, weft_layout_plugin(id));
        if (!item || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(item);
    }
    return list;
}

PyObject *wpy_to_layout(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *t;
    const char *name;
    if (!PyArg_ParseTuple(args, "Os", &t, &name) || tensor_arg(t, "to_layout") < 0)
        return NULL;
    int id = weft_layout_lookup(name);
    if (id < 0)
        return wpy_raise(id);
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_to_layout(&out, WPY_T(t), id), &out);
}

PyObject *wpy_to_strided(PyObject *module, PyObject *arg)
{
    (void)module;
    if (tensor_arg(arg, "to_strided") < 0)
        return NULL;
    weft_tensor *out = NULL;
    return wpy_wrap_rc(weft_to_strided(&out, WPY_T(arg)), &out);
}
