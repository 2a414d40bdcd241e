/* optim.c — weft.optim's steps (python/weft/optim/algorithms.py): one call
 * of libweft's weft_sgd_step ... weft_adagrad_step per parameter group, so
 * the update runs in C over every parameter of the group, not as a chain
 * of operator calls per parameter from Python. */
#include "weftpy.h"

#include <weft/nn.h>

/* A Python list of n tensors as a C array of borrowed pointers (each
 * retained for the call, so a list changed by another thread while the
 * GIL is released cannot free one). */
typedef struct tensor_array {
    PyObject *list;
    weft_tensor **entries;
    Py_ssize_t n;
} tensor_array;

/* none_ok: None entries are NULL (state the C function creates); list
 * None with allow_missing: entries stay NULL (an option that is off).
 * Returns 0, or -1 with an exception (give a back with array_finish). */
static int array_from(tensor_array *a, PyObject *list, Py_ssize_t n, const char *what,
                      bool none_ok, bool allow_missing)
{
    a->list = list;
    a->entries = NULL;
    a->n = 0;
    if (list == Py_None && allow_missing)
        return 0;
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n) {
        PyErr_Format(PyExc_ValueError, "%s must be a list of %zd entries (one per parameter)",
                     what, n);
        return -1;
    }
    a->entries = PyMem_Calloc((size_t)(n ? n : 1), sizeof *a->entries);
    if (!a->entries) {
        PyErr_NoMemory();
        return -1;
    }
    a->n = n; /* from here array_finish gives back what was retained */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(list, i);
        if (o == Py_None && none_ok)
            continue;
        if (!wpy_tensor_check(o)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be a Tensor%s, not %s", what, i,
                         none_ok ? " or None" : "", Py_TYPE(o)->tp_name);
            return -1;
        }
        a->entries[i] = weft_tensor_retain(WPY_T(o));
    }
    return 0;
}

/* Gives the references back; after a successful call, first stores the
 * tensors the C function created (None entries that are set now) into
 * the Python list.  Returns 0, or -1 with an exception. */
static int array_finish(tensor_array *a, bool store_created)
{
    int rc = 0;
    for (Py_ssize_t i = 0; i < a->n; i++) {
        weft_tensor *t = a->entries[i];
        if (!t)
            continue;
        if (store_created && rc == 0 && PyList_GET_ITEM(a->list, i) == Py_None) {
            PyObject *w = wpy_wrap(weft_tensor_retain(t));
            if (!w || PyList_SetItem(a->list, i, w) < 0)
                rc = -1;
        }
        weft_tensor_release(t);
    }
    PyMem_Free(a->entries);
    a->entries = NULL;
    return rc;
}

enum { MAX_ARRAYS = 6 };

/* Fills arrays[0..count) from lists (params first, then grads, then
 * state); returns -1 with an exception (and everything given back). */
static int arrays_from(tensor_array *arrays, PyObject *const *lists, const char *const *names,
                       const bool *optional, int count, Py_ssize_t *n)
{
    if (!PyList_Check(lists[0])) {
        PyErr_SetString(PyExc_TypeError, "params must be a list of Tensors");
        return -1;
    }
    *n = PyList_GET_SIZE(lists[0]);
    if (*n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many parameters in one group");
        return -1;
    }
    for (int k = 0; k < count; k++) {
        if (array_from(&arrays[k], lists[k], *n, names[k], k >= 2, optional[k]) < 0) {
            for (int j = 0; j <= k; j++)
                array_finish(&arrays[j], false);
            return -1;
        }
    }
    return 0;
}

static PyObject *arrays_finish(tensor_array *arrays, int count, int rc)
{
    int prc = 0;
    for (int k = 0; k < count; k++)
        if (array_finish(&arrays[k], rc == 0) < 0)
            prc = -1;
    if (rc < 0)
        return wpy_raise(rc);
    if (prc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _sgd_step(params, grads, momentum_buffers, lr, momentum, dampening,
 * weight_decay, nesterov, maximize) */
PyObject *wpy_sgd_step(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *lists[3];
    weft_sgd_options o = {0};
    int nesterov = 0, maximize = 0;
    if (!PyArg_ParseTuple(args, "OOOddddpp:_sgd_step", &lists[0], &lists[1], &lists[2], &o.lr,
                          &o.momentum, &o.dampening, &o.weight_decay, &nesterov, &maximize))
        return NULL;
    o.nesterov = nesterov;
    o.maximize = maximize;
    static const char *const names[] = {"params", "grads", "momentum_buffers"};
    static const bool optional[] = {false, false, true};
    tensor_array a[3];
    Py_ssize_t n;
    if (arrays_from(a, lists, names, optional, 3, &n) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_sgd_step(a[0].entries, a[1].entries, a[2].entries, (int)n, &o);
    Py_END_ALLOW_THREADS
    return arrays_finish(a, 3, rc);
}

/* _adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
 * lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled) */
PyObject *wpy_adam_step(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *lists[6];
    weft_adam_options o = {0};
    int amsgrad = 0, maximize = 0, decoupled = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOdddddppp:_adam_step", &lists[0], &lists[1], &lists[2],
                          &lists[3], &lists[4], &lists[5], &o.lr, &o.beta1, &o.beta2, &o.eps,
                          &o.weight_decay, &amsgrad, &maximize, &decoupled))
        return NULL;
    o.amsgrad = amsgrad;
    o.maximize = maximize;
    static const char *const names[] = {"params",          "grads", "exp_avgs", "exp_avg_sqs",
                                        "max_exp_avg_sqs", "steps"};
    static const bool optional[] = {false, false, false, false, true, false};
    tensor_array a[6];
    Py_ssize_t n;
    if (arrays_from(a, lists, names, optional, 6, &n) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = (decoupled ? weft_adamw_step : weft_adam_step)(a[0].entries, a[1].entries, a[2].entries,
                                                       a[3].entries, a[4].entries, a[5].entries,
                                                       (int)n, &o);
    Py_END_ALLOW_THREADS
    return arrays_finish(a, 6, rc);
}

/* _rmsprop_step(params, grads, square_avgs, momentum_buffers, grad_avgs,
 * steps, lr, alpha, eps, weight_decay, momentum, centered, maximize) */
PyObject *wpy_rmsprop_step(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *lists[6];
    weft_rmsprop_options o = {0};
    int centered = 0, maximize = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOdddddpp:_rmsprop_step", &lists[0], &lists[1], &lists[2],
                          &lists[3], &lists[4], &lists[5], &o.lr, &o.alpha, &o.eps,
                          &o.weight_decay, &o.momentum, &centered, &maximize))
        return NULL;
    o.centered = centered;
    o.maximize = maximize;
    static const char *const names[] = {"params",    "grads", "square_avgs", "momentum_buffers",
                                        "grad_avgs", "steps"};
    static const bool optional[] = {false, false, false, true, true, false};
    tensor_array a[6];
    Py_ssize_t n;
    if (arrays_from(a, lists, names, optional, 6, &n) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_rmsprop_step(a[0].entries, a[1].entries, a[2].entries, a[3].entries, a[4].entries,
                           a[5].entries, (int)n, &o);
    Py_END_ALLOW_THREADS
    return arrays_finish(a, 6, rc);
}

/* _adagrad_step(params, grads, state_sums, steps, lr, lr_decay,
 * weight_decay, initial_accumulator_value, eps, maximize) */
PyObject *wpy_adagrad_step(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *lists[4];
    weft_adagrad_options o = {0};
    int maximize = 0;
    if (!PyArg_ParseTuple(args, "OOOOdddddp:_adagrad_step", &lists[0], &lists[1], &lists[2],
                          &lists[3], &o.lr, &o.lr_decay, &o.weight_decay,
                          &o.initial_accumulator_value, &o.eps, &maximize))
        return NULL;
    o.maximize = maximize;
    static const char *const names[] = {"params", "grads", "state_sums", "steps"};
    static const bool optional[] = {false, false, false, false};
    tensor_array a[4];
    Py_ssize_t n;
    if (arrays_from(a, lists, names, optional, 4, &n) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_adagrad_step(a[0].entries, a[1].entries, a[2].entries, a[3].entries, (int)n, &o);
    Py_END_ALLOW_THREADS
    return arrays_finish(a, 4, rc);
}
