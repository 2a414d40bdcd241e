/* function.c — the C half of weft.autograd: Function.apply over the C
 * custom-function API (weft_function_apply), autograd.grad
 * (weft_autograd_grad) and Tensor.register_hook.  python/weft/autograd.py holds the Python half.
 *
 * The Python forward has already run (under no_grad, in autograd.py) when
 * _function_apply is called: only then is the number of outputs known,
 * which weft_function_apply needs up front.  The C forward callback hands
 * those outputs over and records what the Python ctx asked for
 * (save_for_backward, mark_non_differentiable, mark_dirty). */
#include "weftpy.h"

#include <weft/plugin.h> /* weft_set_error: a callback's error as a weft error */

/* What the recorded node keeps: the Python callable that runs the user's
 * backward.  The tuples are borrowed, and used only during apply. */
typedef struct {
    PyObject *backward; /* backward(grads: tuple, saved: tuple) -> tuple of Tensor/None */
    PyObject *outputs, *saved, *non_differentiable, *dirty;
    int nsaved; /* how many tensors forward saved */
} function_state;

static bool interpreter_alive(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsInitialized() && !Py_IsFinalizing();
#else
    return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/* The node is freed when its last output and graph go, possibly on another
 * thread or after the interpreter has finalized (then the reference is
 * left: there is nobody to give it back to). */
static void state_destroy(void *user)
{
    function_state *s = user;
    if (s->backward && interpreter_alive()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_DECREF(s->backward);
        PyGILState_Release(g);
    }
    weft_free(s);
}

/* The tensors of a tuple, borrowed; -1 with TypeError for anything else. */
static int tensors_of(PyObject *tuple, weft_tensor **out, Py_ssize_t n, const char *what)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(tuple, i);
        if (!wpy_tensor_check(o)) {
            PyErr_Format(PyExc_TypeError, "%s must be Tensors, not %.100s", what, Py_TYPE(o)->tp_name);
            return -1;
        }
        out[i] = WPY_T(o);
    }
    return 0;
}

/* A Python error inside a callback becomes a weft error: the message is the
 * exception's type and text, and the exception is cleared (the callback may
 * run on the backward pass's thread, far from any Python frame). */
static int error_from_python(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    int rc = weft_set_error(WEFT_EINVAL, "%s: %s", type ? ((PyTypeObject *)type)->tp_name : "error",
                            msg ? msg : "(no message)");
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return rc;
}

static int forward_cb(weft_function_ctx *ctx, weft_tensor *const *inputs, int ninputs,
                      weft_tensor **outputs, int noutputs)
{
    function_state *s = weft_function_user(ctx);
    for (int i = 0; i < noutputs; i++)
        outputs[i] = weft_tensor_retain(WPY_T(PyTuple_GET_ITEM(s->outputs, i)));
    Py_ssize_t nsaved = PyTuple_GET_SIZE(s->saved);
    if (nsaved > 0) {
        weft_tensor *saved[nsaved];
        for (Py_ssize_t i = 0; i < nsaved; i++)
            saved[i] = WPY_T(PyTuple_GET_ITEM(s->saved, i));
        int rc = weft_function_save_for_backward(ctx, saved, (int)nsaved);
        if (rc < 0)
            return rc;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->non_differentiable); i++) {
        int rc = weft_function_mark_non_differentiable(ctx, WPY_T(PyTuple_GET_ITEM(s->non_differentiable, i)));
        if (rc < 0)
            return rc;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->dirty); i++) {
        int rc = weft_function_mark_dirty(ctx, WPY_T(PyTuple_GET_ITEM(s->dirty, i)));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Calls the Python backward with the gradients (None where none arrived)
 * and the saved tensors, then takes one Tensor or None per input. */
static int backward_cb(weft_function_ctx *ctx, weft_tensor *const *grad_outputs, int noutputs,
                       weft_tensor **grad_inputs, int ninputs)
{
    function_state *s = weft_function_user(ctx);
    if (!interpreter_alive())
        return weft_set_error(WEFT_EINVAL, "the Python interpreter is shutting down");
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 0;
    PyObject *grads = PyTuple_New(noutputs), *saved = NULL, *result = NULL;
    for (int i = 0; grads && i < noutputs; i++) {
        PyObject *o = grad_outputs[i] ? wpy_wrap(weft_tensor_retain(grad_outputs[i])) : Py_NewRef(Py_None);
        if (!o)
            goto python_error;
        PyTuple_SET_ITEM(grads, i, o);
    }
    if (!grads)
        goto python_error;
    /* the saved tensors, checked against in-place writes since forward */
    int nsaved = s->nsaved;
    weft_tensor *t = NULL;
    saved = PyTuple_New(nsaved);
    for (int i = 0; saved && i < nsaved; i++) {
        if ((rc = weft_function_saved(&t, ctx, i)) < 0)
            goto done;
        PyObject *o = wpy_wrap(t);
        if (!o)
            goto python_error;
        PyTuple_SET_ITEM(saved, i, o);
    }
    if (!saved)
        goto python_error;
    result = PyObject_CallFunctionObjArgs(s->backward, grads, saved, NULL);
    if (!result)
        goto python_error;
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != ninputs) {
        rc = weft_set_error(WEFT_EINVAL, "backward gave %zd gradients for %d tensor inputs",
                            PyTuple_Check(result) ? PyTuple_GET_SIZE(result) : (Py_ssize_t)-1, ninputs);
        goto done;
    }
    for (int i = 0; i < ninputs; i++) {
        PyObject *o = PyTuple_GET_ITEM(result, i);
        if (o == Py_None)
            continue;
        if (!wpy_tensor_check(o)) {
            rc = weft_set_error(WEFT_EINVAL, "backward must return Tensors or None, not %.100s",
                                Py_TYPE(o)->tp_name);
            goto done;
        }
        grad_inputs[i] = weft_tensor_retain(WPY_T(o));
    }
    goto done;
python_error:
    rc = error_from_python();
done:
    if (rc < 0)
        for (int i = 0; i < ninputs; i++) {
            weft_tensor_release(grad_inputs[i]);
            grad_inputs[i] = NULL;
        }
    Py_XDECREF(grads);
    Py_XDECREF(saved);
    Py_XDECREF(result);
    PyGILState_Release(g);
    return rc;
}

/* _function_apply(name, inputs, outputs, saved, non_differentiable, dirty,
 * backward) -> tuple of the recorded outputs. */
PyObject *wpy_function_apply(PyObject *module, PyObject *args)
{
    const char *name;
    PyObject *inputs, *outputs, *saved, *nondiff, *dirty, *backward;
    if (!PyArg_ParseTuple(args, "sO!O!O!O!O!O:_function_apply", &name, &PyTuple_Type, &inputs,
                          &PyTuple_Type, &outputs, &PyTuple_Type, &saved, &PyTuple_Type, &nondiff,
                          &PyTuple_Type, &dirty, &backward))
        return NULL;
    Py_ssize_t nin = PyTuple_GET_SIZE(inputs), nout = PyTuple_GET_SIZE(outputs);
    if (nout < 1 || nout > 4096 || nin > 4096) {
        PyErr_Format(PyExc_RuntimeError, "a Function needs 1 to 4096 outputs and at most 4096 tensor "
                                         "inputs (got %zd outputs, %zd inputs)", nout, nin);
        return NULL;
    }
    weft_tensor *in[nin > 0 ? nin : 1], *out[nout];
    weft_tensor *check[PyTuple_GET_SIZE(saved) + PyTuple_GET_SIZE(nondiff) + PyTuple_GET_SIZE(dirty) + 1];
    if (tensors_of(inputs, in, nin, "inputs") < 0 || tensors_of(outputs, out, nout, "forward's outputs") < 0 ||
        tensors_of(saved, check, PyTuple_GET_SIZE(saved), "save_for_backward's arguments") < 0 ||
        tensors_of(nondiff, check, PyTuple_GET_SIZE(nondiff), "mark_non_differentiable's arguments") < 0 ||
        tensors_of(dirty, check, PyTuple_GET_SIZE(dirty), "mark_dirty's arguments") < 0)
        return NULL;
    if (!PyCallable_Check(backward)) {
        PyErr_SetString(PyExc_TypeError, "backward must be callable");
        return NULL;
    }
    function_state *s = weft_malloc(sizeof *s);
    if (!s)
        return PyErr_NoMemory();
    *s = (function_state){Py_NewRef(backward), outputs, saved, nondiff, dirty,
                          (int)PyTuple_GET_SIZE(saved)};
    const weft_function fn = {name, forward_cb, backward_cb, true};
    weft_tensor *results[nout];
    /* with the GIL held: forward_cb reads Python tuples; it is quick */
    int rc = weft_function_apply(results, (int)nout, &fn, s, state_destroy, in, (int)nin);
    if (rc < 0)
        return wpy_raise(rc);
    PyObject *tuple = PyTuple_New(nout);
    for (Py_ssize_t i = 0; i < nout; i++) {
        PyObject *o = tuple ? wpy_wrap(results[i]) : NULL;
        if (!o) {
            for (Py_ssize_t j = tuple ? i + 1 : i; j < nout; j++)
                weft_tensor_release(results[j]);
            Py_XDECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, o);
    }
    return tuple;
}

/* ------------------------------------------------------------ tensor hooks */

/* The hook's ctx is the Python callable itself (a strong reference), given
 * back by the core when the hook's node is freed. */
static void hook_destroy(void *ctx)
{
    if (!interpreter_alive())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

/* Calls fn(grad): None keeps the gradient, a Tensor replaces it. */
static int hook_call(const weft_tensor *grad, weft_tensor **replace, void *ctx)
{
    if (!interpreter_alive())
        return weft_set_error(WEFT_EINVAL, "the Python interpreter is shutting down");
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 0;
    PyObject *arg = wpy_wrap(weft_tensor_retain(grad));
    PyObject *result = arg ? PyObject_CallOneArg((PyObject *)ctx, arg) : NULL;
    if (!result) {
        rc = error_from_python();
    } else if (result != Py_None) {
        if (wpy_tensor_check(result))
            *replace = weft_tensor_retain(WPY_T(result));
        else
            rc = weft_set_error(WEFT_EINVAL, "a tensor hook must return a Tensor or None, not %.100s",
                                Py_TYPE(result)->tp_name);
    }
    Py_XDECREF(arg);
    Py_XDECREF(result);
    PyGILState_Release(g);
    return rc;
}

/* _register_hook(tensor, fn): weft_tensor_register_hook_ex with fn kept
 * until the tensor's node is freed (python/weft/_tensor.py adds the
 * removable handle). */
PyObject *wpy_register_hook(PyObject *module, PyObject *args)
{
    PyObject *t, *fn;
    if (!PyArg_ParseTuple(args, "OO:_register_hook", &t, &fn))
        return NULL;
    if (!wpy_tensor_check(t) || !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "register_hook() takes a callable");
        return NULL;
    }
    Py_INCREF(fn);
    int rc = weft_tensor_register_hook_ex(WPY_T(t), hook_call, fn, hook_destroy);
    if (rc < 0) {
        Py_DECREF(fn);
        return wpy_raise(rc);
    }
    Py_RETURN_NONE;
}

/* _autograd_grad(outputs, grad_outputs, inputs, retain_graph, create_graph,
 * allow_unused) -> tuple (None for an unused input when allowed) */
PyObject *wpy_autograd_grad(PyObject *module, PyObject *args)
{
    PyObject *outputs, *grad_outputs, *inputs;
    int retain, create, allow_unused;
    if (!PyArg_ParseTuple(args, "O!O!O!ppp:_autograd_grad", &PyTuple_Type, &outputs, &PyTuple_Type,
                          &grad_outputs, &PyTuple_Type, &inputs, &retain, &create, &allow_unused))
        return NULL;
    Py_ssize_t nout = PyTuple_GET_SIZE(outputs), nin = PyTuple_GET_SIZE(inputs);
    if (nout < 1 || nin < 1 || nout > 4096 || nin > 4096) {
        PyErr_Format(PyExc_RuntimeError, "grad needs 1 to 4096 outputs and inputs (got %zd and %zd)",
                     nout, nin);
        return NULL;
    }
    if (PyTuple_GET_SIZE(grad_outputs) != nout) {
        PyErr_Format(PyExc_RuntimeError, "grad_outputs has %zd entries for %zd outputs",
                     PyTuple_GET_SIZE(grad_outputs), nout);
        return NULL;
    }
    weft_tensor *out[nout], *gout[nout], *in[nin], *grads[nin];
    bool any_grad = false;
    for (Py_ssize_t i = 0; i < nout; i++) {
        PyObject *g = PyTuple_GET_ITEM(grad_outputs, i);
        gout[i] = NULL;
        if (g != Py_None) {
            if (!wpy_tensor_check(g)) {
                PyErr_Format(PyExc_TypeError, "grad_outputs must be Tensors or None, not %.100s",
                             Py_TYPE(g)->tp_name);
                return NULL;
            }
            gout[i] = WPY_T(g);
            any_grad = true;
        }
    }
    if (tensors_of(outputs, out, nout, "outputs") < 0 || tensors_of(inputs, in, nin, "inputs") < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_autograd_grad(grads, out, (int)nout, any_grad ? gout : NULL, in, (int)nin, retain,
                            create, allow_unused);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return wpy_raise(rc);
    PyObject *tuple = PyTuple_New(nin);
    for (Py_ssize_t i = 0; i < nin; i++) {
        PyObject *o = !tuple ? NULL : grads[i] ? wpy_wrap(grads[i]) : Py_NewRef(Py_None);
        if (!o) {
            for (Py_ssize_t j = tuple ? i + 1 : i; j < nin; j++)
                weft_tensor_release(grads[j]);
            Py_XDECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, o);
    }
    return tuple;
}
