/* layout.c — layouts from Python: the name of a tensor's layout, the
 * registered layouts, and the differentiable conversions (weft._C._layout,
 * _layouts, _to_layout, _to_strided; weft/_layout.py builds Tensor.layout,
 * weft.strided and Tensor.to_layout on them). */
#include "weftpy.h"
#include <string.h>

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

/* ------------------------------------------------ Tensor.layout, fast */

/* Tensor.layout is read on hot paths (every optimizer step reads each
 * gradient's), so it is a C getter over a cache rather than a Python
 * property: one weft._layout.layout object per layout id, made on first
 * sight by the class _layout.py hands over, kept with a copy of the name it
 * was made for, since an unloaded plugin's id can come back under another
 * name.  All of it under the GIL. */
static PyObject *layout_class;
static wpy_named_slot seen[WEFT_MAX_LAYOUTS + 1];

PyObject *wpy_set_layout_class(PyObject *module, PyObject *cls)
{
    (void)module;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "_set_layout_class: expected a class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(layout_class, cls);
    for (int id = 0; id <= WEFT_MAX_LAYOUTS; id++) /* made by the class before */
        wpy_slot_clear(&seen[id]);
    Py_RETURN_NONE;
}

PyObject *wpy_tensor_layout(PyObject *self, void *unused)
{
    (void)unused;
    int id = weft_tensor_layout(WPY_T(self));
    const char *name = weft_layout_name(id);
    if (!name || id < 0 || id > WEFT_MAX_LAYOUTS)
        return PyErr_Format(PyExc_RuntimeError, "layout: the tensor's layout %d is no longer "
                            "registered (its plugin was unloaded)", id);
    PyObject *obj = wpy_slot_get(&seen[id], name);
    if (obj)
        return obj;
    if (!layout_class)
        return PyUnicode_FromString(name); /* before weft._layout has run */
    return wpy_slot_make(&seen[id], name, layout_class, name);
}

int wpy_layout_is(const weft_tensor *t, const char *name)
{
    int id = weft_tensor_layout(t);
    const char *own = id ? weft_layout_name(id) : "strided";
    return own && strcmp(own, name) == 0;
}

/* Tensor.to(dtype) of a plugin layout's tensor through a Python function
 * the layout's module registers (the sparse ones: their values converted,
 * the pattern kept), since the core's dtype conversion takes strided
 * tensors; by layout name, so each layout's module registers its own. */
static PyObject *to_dtype_hooks; /* {layout name: fn(tensor, dtype)} */

PyObject *wpy_set_layout_to_dtype(PyObject *module, PyObject *args)
{
    (void)module;
    const char *name;
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "sO", &name, &fn))
        return NULL;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_set_layout_to_dtype: fn must be callable or None");
        return NULL;
    }
    if (!to_dtype_hooks && !(to_dtype_hooks = PyDict_New()))
        return NULL;
    int rc = fn == Py_None ? (PyDict_GetItemString(to_dtype_hooks, name)
                                  ? PyDict_DelItemString(to_dtype_hooks, name) : 0)
                           : PyDict_SetItemString(to_dtype_hooks, name, fn);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *wpy_layout_to_dtype_hook(const weft_tensor *t)
{
    int id = weft_tensor_layout(t);
    const char *name = id && to_dtype_hooks ? weft_layout_name(id) : NULL;
    return name ? PyDict_GetItemString(to_dtype_hooks, name) : NULL;
}
