/* profiler.c — the profiler from Python (weft._C._profiler_*; the module
 * weft/profiler.py builds torch's shape on them: profile, record_function,
 * export_chrome_trace, key_averages().table()).  A session is a capsule
 * that destroys it when collected. */
#include <weft/profiler.h>

#include "weftpy.h"

static const char capsule_name[] = "weft.profiler";

static void capsule_free(PyObject *cap)
{
    weft_profiler *p = PyCapsule_GetPointer(cap, capsule_name);
    if (!p)
        return;
    /* collected while this thread records into it: stop first.  While
     * another thread still records it cannot be freed; it is left (a
     * leak rather than a use after free). */
    if (weft_profiler_current() == p)
        weft_profiler_stop(p);
    weft_profiler_destroy(p);
}

static weft_profiler *session(PyObject *cap)
{
    weft_profiler *p = PyCapsule_GetPointer(cap, capsule_name);
    if (!p)
        PyErr_Clear(), PyErr_SetString(PyExc_TypeError, "expected a weft profiler session");
    return p;
}

PyObject *wpy_profiler_create(PyObject *module, PyObject *args)
{
    (void)module;
    int shapes, memory, device = 0;
    if (!PyArg_ParseTuple(args, "pp|p", &shapes, &memory, &device))
        return NULL;
    weft_profiler_options o = {sizeof o, shapes != 0, memory != 0, device != 0};
    weft_profiler *p = NULL;
    int rc = weft_profiler_create(&p, &o);
    if (rc < 0)
        return wpy_raise(rc);
    PyObject *cap = PyCapsule_New(p, capsule_name, capsule_free);
    if (!cap)
        weft_profiler_destroy(p);
    return cap;
}

PyObject *wpy_profiler_start(PyObject *module, PyObject *cap)
{
    (void)module;
    weft_profiler *p = session(cap);
    if (!p)
        return NULL;
    int rc = weft_profiler_start(p);
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

PyObject *wpy_profiler_stop(PyObject *module, PyObject *cap)
{
    (void)module;
    weft_profiler *p = session(cap);
    if (!p)
        return NULL;
    int rc = weft_profiler_stop(p);
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

PyObject *wpy_profiler_export(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *cap, *path;
    if (!PyArg_ParseTuple(args, "OO&", &cap, PyUnicode_FSConverter, &path))
        return NULL;
    weft_profiler *p = session(cap);
    int rc = p ? weft_profiler_export_chrome_trace(p, PyBytes_AS_STRING(path)) : 0;
    Py_DECREF(path);
    if (!p)
        return NULL;
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

/* [(name, input_shapes, calls, total_us, self_us, memory, self_memory,
 *   device_us)] */
PyObject *wpy_profiler_key_averages(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *cap;
    int by_shape;
    if (!PyArg_ParseTuple(args, "Op", &cap, &by_shape))
        return NULL;
    weft_profiler *p = session(cap);
    if (!p)
        return NULL;
    weft_profiler_stat *st = NULL;
    int n = 0;
    int rc = weft_profiler_key_averages(&st, &n, p, by_shape != 0);
    if (rc < 0)
        return wpy_raise(rc);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *row = Py_BuildValue("(ssLddLLd)", st[i].name, st[i].input_shapes,
                                      (long long)st[i].calls, st[i].total_us, st[i].self_us,
                                      (long long)st[i].memory_bytes,
                                      (long long)st[i].self_memory_bytes, st[i].device_us);
        if (!row)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, row);
    }
    weft_profiler_stats_free(st, n);
    return list;
}

PyObject *wpy_profiler_table(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *cap;
    const char *sort_by;
    int row_limit, by_shape;
    if (!PyArg_ParseTuple(args, "Ozip", &cap, &sort_by, &row_limit, &by_shape))
        return NULL;
    weft_profiler *p = session(cap);
    if (!p)
        return NULL;
    char *text = NULL;
    int rc = weft_profiler_table(&text, p, sort_by, row_limit, by_shape != 0);
    if (rc < 0) {
        /* an unknown sort key is the caller's value: ValueError, as torch */
        if (rc == WEFT_EINVAL) {
            PyErr_SetString(PyExc_ValueError, weft_last_error());
            return NULL;
        }
        return wpy_raise(rc);
    }
    PyObject *s = PyUnicode_FromString(text);
    free(text);
    return s;
}

PyObject *wpy_range_push(PyObject *module, PyObject *name)
{
    (void)module;
    const char *s = PyUnicode_AsUTF8(name);
    if (!s)
        return NULL;
    int rc = weft_profiler_range_push(s);
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}

PyObject *wpy_range_pop(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int rc = weft_profiler_range_pop();
    if (rc < 0)
        return wpy_raise(rc);
    Py_RETURN_NONE;
}
