/* dlpack.c — the DLPack protocol of the Python array API standard:
 * Tensor.__dlpack__, Tensor.__dlpack_device__ and weft.from_dlpack.  The
 * C side (interop/dlpack/) does the describing and the checking; this file
 * handles capsules, keywords and the interpreter. */
#include "weftpy.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char LEGACY[] = "dltensor", USED_LEGACY[] = "used_dltensor";
static const char VERSIONED[] = "dltensor_versioned", USED_VERSIONED[] = "used_dltensor_versioned";

/* ------------------------------------------------------------------ export */

/* A capsule that was never consumed gives its tensor back.  The deleter is
 * weft's own (pure C); an exception in flight is kept all the same. */
static void legacy_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, USED_LEGACY))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY);
    if (m) {
        if (m->deleter)
            m->deleter(m);
    } else {
        PyErr_WriteUnraisable(capsule);
    }
    PyErr_Restore(type, value, tb);
}

static void versioned_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, USED_VERSIONED))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED);
    if (m) {
        if (m->deleter)
            m->deleter(m);
    } else {
        PyErr_WriteUnraisable(capsule);
    }
    PyErr_Restore(type, value, tb);
}

/* Reads a (int, int) pair; returns -1 with an exception otherwise. */
static int int_pair(PyObject *o, const char *what, long *a, long *b)
{
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of two ints, not %R", what, o);
        return -1;
    }
    *a = PyLong_AsLong(PyTuple_GET_ITEM(o, 0));
    *b = PyLong_AsLong(PyTuple_GET_ITEM(o, 1));
    return PyErr_Occurred() ? -1 : 0;
}

PyObject *wpy_dlpack_device(PyObject *self, PyObject *unused)
{
    int32_t type, id;
    int rc = weft_tensor_dlpack_device(WPY_T(self), &type, &id);
    if (rc < 0) {
        PyErr_SetString(PyExc_BufferError, weft_last_error());
        return NULL;
    }
    return Py_BuildValue("(ii)", (int)type, (int)id);
}

/* Waits until the work queued so far on the calling thread's current
 * stream of t's device has finished (an event recorded there). */
static int order_before_consumer(const weft_tensor *t)
{
    weft_event *ev = NULL;
    int rc = weft_event_create(&ev, weft_tensor_device(t));
    if (rc == 0)
        rc = weft_event_record(ev, NULL);
    if (rc == 0)
        rc = weft_event_synchronize(ev);
    weft_event_destroy(ev);
    return rc;
}

PyObject *wpy_dlpack(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kwlist, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    weft_tensor *t = WPY_T(self);
    if (weft_tensor_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Can't export tensors that require gradient, use tensor.detach()");
        return NULL;
    }
    int32_t dev_type, dev_id;
    if (weft_tensor_dlpack_device(t, &dev_type, &dev_id) < 0) {
        PyErr_SetString(PyExc_BufferError, weft_last_error());
        return NULL;
    }
    if (stream != Py_None) {
        long s = PyLong_AsLong(stream);
        if (s == -1 && PyErr_Occurred())
            return NULL;
        /* a CPU has no streams: only "no synchronisation" (-1) is tolerated */
        if (dev_type == kDLCPU && s != -1) {
            PyErr_Format(PyExc_BufferError, "stream must be None for a cpu tensor (got %ld)", s);
            return NULL;
        }
        /* the array API: 0 is ambiguous on CUDA and must be refused */
        if (dev_type == kDLCUDA && s == 0) {
            PyErr_SetString(PyExc_BufferError, "stream 0 is not allowed for a CUDA tensor (1 is "
                                               "the legacy default stream, 2 the per-thread one)");
            return NULL;
        }
        /* The consumer will use the memory on its stream s: the work queued
         * on the producer's current stream must come first.  The core has
         * no way to wrap the consumer's foreign stream handle, so instead
         * of making s wait for an event, the host waits for it here —
         * ordered all the same, at the cost of a host wait. */
        if (dev_type != kDLCPU && s != -1 && order_before_consumer(t) < 0) {
            PyErr_SetString(PyExc_BufferError, weft_last_error());
            return NULL;
        }
    }
    if (dl_device != Py_None) {
        long type, id;
        if (int_pair(dl_device, "dl_device", &type, &id) < 0)
            return NULL;
        if (type != dev_type || id != dev_id) {
            PyErr_Format(PyExc_BufferError,
                         "cannot export to DLPack device (%ld, %ld): the tensor is on (%d, %d) "
                         "and __dlpack__ does not copy across devices",
                         type, id, (int)dev_type, (int)dev_id);
            return NULL;
        }
    }
    int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
    if (want_copy < 0)
        return NULL;
    long major = 0, minor = 0;
    if (max_version != Py_None && int_pair(max_version, "max_version", &major, &minor) < 0)
        return NULL;

    weft_tensor *src = weft_tensor_retain(t);
    int rc = 0;
    if (want_copy) {
        weft_tensor *copied = NULL;
        rc = weft_to_dtype(&copied, t, weft_tensor_dtype(t));
        weft_tensor_release(src);
        src = copied;
        if (rc < 0)
            return wpy_raise(rc);
    }
    PyObject *capsule = NULL;
    if (major >= 1) {
        DLManagedTensorVersioned *m = NULL;
        rc = weft_to_dlpack_versioned(&m, src, want_copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
        if (rc == 0 && !(capsule = PyCapsule_New(m, VERSIONED, versioned_capsule_destructor)))
            m->deleter(m);
    } else {
        DLManagedTensor *m = NULL;
        rc = weft_to_dlpack(&m, src);
        if (rc == 0 && !(capsule = PyCapsule_New(m, LEGACY, legacy_capsule_destructor)))
            m->deleter(m);
    }
    weft_tensor_release(src);
    if (rc < 0) {
        /* what DLPack cannot describe is a BufferError, as the standard says */
        PyErr_SetString(rc == WEFT_ENOMEM ? PyExc_MemoryError : PyExc_BufferError,
                        weft_last_error());
        return NULL;
    }
    return capsule;
}

/* ------------------------------------------------------------------ import */

/* Memory weft imports from a Python producer is given back through a shim
 * whose deleter may run on any thread, holding the GIL or not, even after
 * the interpreter has finalized: the producer's deleter may be Python code
 * (or, as NumPy 1.24's, C that touches reference counts without taking the
 * GIL), so the shim takes the GIL first, and leaks rather than crashes once
 * the interpreter is gone. */
static atomic_long deleter_calls;

typedef struct {
    DLManagedTensor outer;
    DLManagedTensor *inner;
} legacy_shim;

typedef struct {
    DLManagedTensorVersioned outer;
    DLManagedTensorVersioned *inner;
} versioned_shim;

static bool interpreter_alive(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsInitialized() && !Py_IsFinalizing();
#else
    return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

static void legacy_shim_deleter(DLManagedTensor *self)
{
    legacy_shim *s = (legacy_shim *)self;
    DLManagedTensor *inner = s->inner;
    free(s);
    atomic_fetch_add(&deleter_calls, 1);
    if (!inner->deleter || !interpreter_alive())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    inner->deleter(inner);
    PyGILState_Release(g);
}

static void versioned_shim_deleter(DLManagedTensorVersioned *self)
{
    versioned_shim *s = (versioned_shim *)self;
    DLManagedTensorVersioned *inner = s->inner;
    free(s);
    atomic_fetch_add(&deleter_calls, 1);
    if (!inner->deleter || !interpreter_alive())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    inner->deleter(inner);
    PyGILState_Release(g);
}

PyObject *wpy_dlpack_deleter_calls(PyObject *module, PyObject *unused)
{
    return PyLong_FromLong(atomic_load(&deleter_calls));
}

/* Takes a capsule's tensor: renames the capsule used_* before anything that
 * can fail, then hands the struct (wrapped in a shim) to weft, which calls
 * its deleter exactly once, on failure too. */
static PyObject *consume_capsule(PyObject *capsule)
{
    weft_tensor *t = NULL;
    int rc;
    if (PyCapsule_IsValid(capsule, VERSIONED)) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED);
        if (PyCapsule_SetName(capsule, USED_VERSIONED) < 0)
            return NULL;
        if (m->version.major != WEFT_DLPACK_MAJOR_VERSION) {
            unsigned major = m->version.major;
            if (m->deleter)
                m->deleter(m);
            return PyErr_Format(PyExc_BufferError,
                                "from_dlpack: DLPack version %u is not supported (weft reads "
                                "major version %d)", major, WEFT_DLPACK_MAJOR_VERSION);
        }
        versioned_shim *s = malloc(sizeof *s);
        if (!s) {
            if (m->deleter)
                m->deleter(m);
            return PyErr_NoMemory();
        }
        s->outer = *m;
        s->outer.manager_ctx = NULL;
        s->outer.deleter = versioned_shim_deleter;
        s->inner = m;
        rc = weft_from_dlpack_versioned(&t, &s->outer);
    } else if (PyCapsule_IsValid(capsule, LEGACY)) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY);
        if (PyCapsule_SetName(capsule, USED_LEGACY) < 0)
            return NULL;
        legacy_shim *s = malloc(sizeof *s);
        if (!s) {
            if (m->deleter)
                m->deleter(m);
            return PyErr_NoMemory();
        }
        s->outer = *m;
        s->outer.manager_ctx = NULL;
        s->outer.deleter = legacy_shim_deleter;
        s->inner = m;
        rc = weft_from_dlpack(&t, &s->outer);
    } else {
        const char *name = PyCapsule_GetName(capsule);
        PyErr_Clear();
        /* PyTorch's type for a capsule consumed twice */
        return PyErr_Format(PyExc_RuntimeError,
                            "from_dlpack: the capsule is named '%s'%s: it must be a DLPack "
                            "capsule ('dltensor' or 'dltensor_versioned') that was never consumed",
                            name ? name : "(null)",
                            name && !strncmp(name, "used_", 5) ? " (already consumed)" : "");
    }
    if (rc < 0) {
        PyErr_SetString(rc == WEFT_ENOMEM ? PyExc_MemoryError : PyExc_BufferError,
                        weft_last_error());
        return NULL;
    }
    return wpy_wrap(t);
}

/* What weft remembers per producer type: whether its __dlpack__ takes the
 * array API's max_version= and copy= (NumPy >= 2.1) or refuses them with a
 * TypeError (NumPy 1.x, torch 1.x).  Asking a legacy producer the new way
 * first on every import cost an exception each time (several times the
 * import itself); once a type has refused and then answered the plain call,
 * it is asked plainly from then on.  Keyed by the type object, which the
 * dict keeps alive (types are few and long-lived).  Guarded by the GIL. */
enum { ASK_UNKNOWN = 0, ASK_VERSIONED = 1, ASK_LEGACY = 2 };
static PyObject *ask_mode_by_type;
static PyObject *str_dlpack, *versioned_kwnames, *max_version_value;

static int dlpack_names_init(void)
{
    if (str_dlpack)
        return 0;
    ask_mode_by_type = PyDict_New();
    str_dlpack = PyUnicode_InternFromString("__dlpack__");
    versioned_kwnames = Py_BuildValue("(ss)", "max_version", "copy");
    max_version_value = Py_BuildValue("(ii)", WEFT_DLPACK_MAJOR_VERSION, WEFT_DLPACK_MINOR_VERSION);
    if (!ask_mode_by_type || !str_dlpack || !versioned_kwnames || !max_version_value) {
        Py_CLEAR(ask_mode_by_type);
        Py_CLEAR(str_dlpack);
        return -1;
    }
    return 0;
}

static int ask_mode(PyObject *x)
{
    PyObject *mode = PyDict_GetItemWithError(ask_mode_by_type, (PyObject *)Py_TYPE(x));
    return mode ? (int)PyLong_AsLong(mode) : ASK_UNKNOWN;
}

static void remember_mode(PyObject *x, int mode)
{
    PyObject *value = PyLong_FromLong(mode);
    if (!value || PyDict_SetItem(ask_mode_by_type, (PyObject *)Py_TYPE(x), value) < 0)
        PyErr_Clear(); /* only a missed shortcut */
    Py_XDECREF(value);
}

/* The stream a producer on CUDA device id must order its work before: our
 * current stream of that device (1, the legacy default stream, when it is
 * the default one), as the array API's stream= says. */
static PyObject *cuda_stream(long id)
{
    weft_device d = {.type = WEFT_DEVICE_TYPE_CUDA, .index = (int16_t)id};
    void *handle = weft_stream_handle(weft_current_stream(d));
    return handle ? PyLong_FromVoidPtr(handle) : PyLong_FromLong(1);
}

/* The device of an unconsumed capsule's tensor (type -1 for anything else). */
static DLDevice capsule_device(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, VERSIONED))
        return ((DLManagedTensorVersioned *)PyCapsule_GetPointer(capsule, VERSIONED))->dl_tensor.device;
    if (PyCapsule_IsValid(capsule, LEGACY))
        return ((DLManagedTensor *)PyCapsule_GetPointer(capsule, LEGACY))->dl_tensor.device;
    return (DLDevice){.device_type = (DLDeviceType)-1};
}

/* x.__dlpack__(**kw) with kw given as a dict (the CUDA path, where the
 * stream makes the keywords vary). */
static PyObject *call_with(PyObject *x, PyObject *kw)
{
    PyObject *method = PyObject_GetAttr(x, str_dlpack), *empty = PyTuple_New(0);
    PyObject *capsule = method && empty && kw ? PyObject_Call(method, empty, kw) : NULL;
    Py_XDECREF(method);
    Py_XDECREF(empty);
    return capsule;
}

/* One request: the versioned form unless *mode says the type refuses it;
 * on a TypeError from the versioned form, the plain one, and *mode learns
 * which worked.  stream (NULL: not passed) goes to both forms. */
static PyObject *request(PyObject *x, PyObject *copy, PyObject *stream, int *mode)
{
    PyObject *capsule = NULL;
    if (*mode != ASK_LEGACY) {
        if (!stream) {
            PyObject *argv[] = {x, max_version_value, copy};
            capsule = PyObject_VectorcallMethod(str_dlpack, argv, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                versioned_kwnames);
        } else {
            PyObject *kw = Py_BuildValue("{s:O,s:O,s:O}", "max_version", max_version_value, "copy",
                                         copy, "stream", stream);
            capsule = call_with(x, kw);
            Py_XDECREF(kw);
        }
        if (capsule) {
            *mode = ASK_VERSIONED;
            return capsule;
        }
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear();
    }
    if (stream) {
        /* a legacy producer (torch 1.x) knows stream= but not the rest */
        PyObject *kw = Py_BuildValue("{s:O}", "stream", stream);
        capsule = call_with(x, kw);
        Py_XDECREF(kw);
        if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            capsule = PyObject_CallMethodNoArgs(x, str_dlpack);
        }
    } else {
        capsule = PyObject_CallMethodNoArgs(x, str_dlpack);
    }
    if (capsule)
        *mode = ASK_LEGACY;
    return capsule;
}

/* Asks x for a capsule.  No stream is passed first, and __dlpack_device__
 * is not called (torch 1.13's is a Python function costing more than the
 * whole import): the capsule says where the tensor lives, and only a CUDA
 * one is dropped unconsumed and asked for again with our stream, so CUDA
 * producers still order their work before ours. */
static PyObject *ask_capsule(PyObject *x, PyObject *copy)
{
    int known = ask_mode(x);
    if (known == ASK_UNKNOWN && PyErr_Occurred())
        return NULL;
    int mode = known;
    PyObject *capsule = request(x, copy, NULL, &mode);
    if (capsule) {
        DLDevice dev = capsule_device(capsule);
        if (dev.device_type == kDLCUDA && dev.device_id >= 0 && dev.device_id < 32768) {
            Py_DECREF(capsule); /* never consumed: its destructor gives it back */
            PyObject *stream = cuda_stream(dev.device_id);
            capsule = stream ? request(x, copy, stream, &mode) : NULL;
            Py_XDECREF(stream);
        }
    }
    if (capsule && known == ASK_UNKNOWN)
        remember_mode(x, mode);
    return capsule;
}

PyObject *wpy_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"x", "device", "copy", NULL};
    PyObject *x, *device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO", kwlist, &x, &device, &copy))
        return NULL;
    if (device != Py_None) {
        bool cpu = false;
        if (PyUnicode_Check(device)) {
            cpu = PyUnicode_CompareWithASCIIString(device, "cpu") == 0;
        } else if (PyTuple_Check(device)) {
            long type, id;
            if (int_pair(device, "device", &type, &id) < 0)
                return NULL;
            cpu = type == kDLCPU && id == 0;
        }
        if (!cpu)
            return PyErr_Format(PyExc_BufferError,
                                "from_dlpack: device %R is not supported (only 'cpu')", device);
    }
    int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
    if (want_copy < 0)
        return NULL;
    if (dlpack_names_init() < 0)
        return NULL;
    PyObject *capsule;
    if (PyCapsule_CheckExact(x)) {
        capsule = x;
        Py_INCREF(capsule);
    } else if (PyObject_HasAttr(x, str_dlpack)) {
        capsule = ask_capsule(x, copy);
    } else {
        return PyErr_Format(PyExc_TypeError,
                            "from_dlpack: %.200s has no __dlpack__ method and is not a DLPack "
                            "capsule", Py_TYPE(x)->tp_name);
    }
    if (!capsule)
        return NULL;
    if (!PyCapsule_CheckExact(capsule)) {
        Py_DECREF(capsule);
        return PyErr_Format(PyExc_TypeError, "from_dlpack: __dlpack__ returned a %.200s, not a "
                            "capsule", Py_TYPE(capsule)->tp_name);
    }
    /* a producer of the legacy protocol cannot copy: weft copies */
    bool copy_here = want_copy && !PyCapsule_IsValid(capsule, VERSIONED);
    PyObject *result = consume_capsule(capsule);
    Py_DECREF(capsule);
    if (!result || !copy_here)
        return result;
    weft_tensor *copied = NULL;
    int rc = weft_to_dtype(&copied, WPY_T(result), weft_tensor_dtype(WPY_T(result)));
    Py_DECREF(result);
    return wpy_wrap_rc(rc, &copied);
}
