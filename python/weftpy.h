/* weftpy.h — what the files of the Python module share.  The module is a
 * client of libweft's public API only (<weft/weft.h>, <weft/dlpack.h>);
 * internal functions of the module carry the wpy_ prefix. */
#ifndef WEFT_PYTHON_WEFTPY_H
#define WEFT_PYTHON_WEFTPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <weft/dlpack.h>
#include <weft/weft.h>

/* weft.Tensor: one reference to a weft tensor, never replaced. */
typedef struct {
    PyObject_HEAD
    weft_tensor *t;
    PyObject *weakrefs;
} wpy_tensor;

/* weft.dtype: the singletons weft.float32, weft.int64, ... */
typedef struct {
    PyObject_HEAD
    weft_dtype dtype;
} wpy_dtype;

extern PyTypeObject *wpy_tensor_type; /* a heap type: operators are added as methods */
extern PyTypeObject wpy_dtype_type;

#define wpy_tensor_check(o) PyObject_TypeCheck((o), wpy_tensor_type)
#define WPY_T(o) (((wpy_tensor *)(o))->t)

/* profiler.c (issue 19) */
PyObject *wpy_profiler_create(PyObject *module, PyObject *args);
PyObject *wpy_profiler_start(PyObject *module, PyObject *cap);
PyObject *wpy_profiler_stop(PyObject *module, PyObject *cap);
PyObject *wpy_profiler_export(PyObject *module, PyObject *args);
PyObject *wpy_profiler_key_averages(PyObject *module, PyObject *args);
PyObject *wpy_profiler_table(PyObject *module, PyObject *args);
PyObject *wpy_range_push(PyObject *module, PyObject *name);
PyObject *wpy_range_pop(PyObject *module, PyObject *unused);
/* layout.c */
PyObject *wpy_layout_of(PyObject *module, PyObject *arg);
PyObject *wpy_layouts(PyObject *module, PyObject *unused);
PyObject *wpy_to_layout(PyObject *module, PyObject *args);
PyObject *wpy_to_strided(PyObject *module, PyObject *arg);
/* _C._set_layout_class(cls): the class Tensor.layout's objects are made by
 * (weft._layout.layout); Tensor.layout is the getter */
PyObject *wpy_set_layout_class(PyObject *module, PyObject *cls);
PyObject *wpy_tensor_layout(PyObject *self, void *unused);
/* 1 when t's layout is called name ("strided" for strided), else 0 */
int wpy_layout_is(const weft_tensor *t, const char *name);
/* _C._set_layout_to_dtype(name, fn or None): fn(tensor, dtype) converts a
 * tensor of that layout for to() and the converters; the hook for t's
 * layout (borrowed), or NULL for strided and layouts without one */
PyObject *wpy_set_layout_to_dtype(PyObject *module, PyObject *args);
PyObject *wpy_layout_to_dtype_hook(const weft_tensor *t);

/* module.c */
/* Sets the Python exception for weft error code rc, carrying
 * weft_last_error(), and returns NULL.  The mapping is PyTorch's: see
 * docs/design.md. */

PyObject *wpy_raise(int rc);
/* The same, for functions returning int: returns -1. */
int wpy_raise_int(int rc);
/* A new reference to the dtype singleton of d. */
PyObject *wpy_dtype_object(weft_dtype d);
/* None -> WEFT_DTYPE_UNSET; a weft.dtype; a torch-style name ("float32").
 * Returns -1 with TypeError set otherwise. */
int wpy_parse_dtype(PyObject *o, weft_dtype *out);
/* weft.device (borrowed), or NULL before the package has set it */
PyObject *wpy_device_class(void);
/* A Python object made once per id (a layout's, a device's) and kept with
 * a copy of the name it was made for, since an unloaded plugin's id can
 * come back under another name.  Under the GIL.  get: a new reference when
 * the slot holds name's object, else NULL (no exception); make: cls(arg),
 * stored for name, a new reference (NULL with an exception); clear: empty. */
typedef struct wpy_named_slot {
    PyObject *obj;
    char *name;
} wpy_named_slot;
PyObject *wpy_slot_get(const wpy_named_slot *slot, const char *name);
PyObject *wpy_slot_make(wpy_named_slot *slot, const char *name, PyObject *cls, const char *arg);
void wpy_slot_clear(wpy_named_slot *slot);
/* None -> cpu; "cpu", "cuda:1"; a (DLPack code, id) pair is not a device. */
int wpy_parse_device(PyObject *o, weft_device *out);

/* A factory's result: rc < 0 raises; otherwise sets requires_grad when asked
 * (releasing t if that fails) and wraps t. */
PyObject *wpy_factory_result(int rc, weft_tensor *t, int requires_grad);

/* tensor.c */
int wpy_tensor_init_type(PyObject *module);
/* Drops Tensor.device's cached objects (when the device class changes) */
void wpy_device_cache_clear(void);
/* Wraps a new reference (stolen).  t NULL: returns NULL (an error is
 * expected to be set already). */
PyObject *wpy_wrap(weft_tensor *t);
/* Wraps the result of a weft call: rc < 0 raises, else wraps *t.  (By
 * pointer, since wpy_wrap_rc(weft_f(&t, ...), t) would read t before the
 * call in some argument orders.) */
PyObject *wpy_wrap_rc(int rc, weft_tensor **t);

/* indexing.c: t[key] (a new reference) and t[key] = value (0 or -1), with
 * PyTorch's basic and advanced indexing */
PyObject *wpy_tensor_getitem(PyObject *self, PyObject *key);
int wpy_tensor_setitem(PyObject *self, PyObject *key, PyObject *value);

/* unique.c: weft.unique(input, ...) and Tensor.unique(...) with
 * torch.unique's results */
PyObject *wpy_unique(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *wpy_tensor_unique(PyObject *self, PyObject *args, PyObject *kwargs);

/* convert.c: Python values <-> tensors */
/* weft.tensor(data, dtype=None, device=None, requires_grad=False) */
PyObject *wpy_tensor_from_data(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *wpy_tensor_tolist(PyObject *self, PyObject *unused);
PyObject *wpy_tensor_item(PyObject *self, PyObject *unused);
/* A Python int, float or bool as a boxed Scalar; returns 0, or -1 without
 * an exception when o is not a number of those kinds. */
int wpy_scalar_value(PyObject *o, weft_value *v);
/* A 0-d tensor holding the number o, of the dtype PyTorch would give the
 * result of an operation between t and o (so that "2 - t" computes what
 * "t.sub(2)" would, with the operands swapped). */
weft_tensor *wpy_scalar_tensor_like(PyObject *o, const weft_tensor *t);

/* ops.c: the operator table, bound from its schemas */
int wpy_ops_init(PyObject *module);
/* Calls the operator `name` with boxed arguments, releasing the GIL; returns
 * None, a Tensor or a tuple of them. */
PyObject *wpy_call_op(const char *name, const weft_value *args, int nargs);

/* dlpack.c */
PyObject *wpy_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *wpy_dlpack_device(PyObject *self, PyObject *unused);
PyObject *wpy_from_dlpack(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *wpy_dlpack_deleter_calls(PyObject *module, PyObject *unused);

/* info.c: _info(op=None), the text of weft-info */
PyObject *wpy_info(PyObject *module, PyObject *args, PyObject *kwargs);

/* function.c: _function_apply (autograd.Function), _autograd_grad, _register_hook */
PyObject *wpy_function_apply(PyObject *module, PyObject *args);
PyObject *wpy_autograd_grad(PyObject *module, PyObject *args);
PyObject *wpy_register_hook(PyObject *module, PyObject *args);

/* serialize.c: _to_bytes, _from_bytes, _save_parameters, _load_parameters,
 * _save_safetensors */
PyObject *wpy_to_bytes(PyObject *module, PyObject *arg);
PyObject *wpy_from_bytes(PyObject *module, PyObject *args);
PyObject *wpy_save_parameters(PyObject *module, PyObject *args);
PyObject *wpy_load_parameters(PyObject *module, PyObject *args);
PyObject *wpy_save_safetensors(PyObject *module, PyObject *args);

/* distributed.c: weft.distributed's functions (issue 18), added to the
 * module at init */
extern PyMethodDef wpy_dist_methods[];
/* optim.c: _sgd_step, _adam_step, _rmsprop_step, _adagrad_step (weft.optim) */
PyObject *wpy_sgd_step(PyObject *module, PyObject *args);
PyObject *wpy_adam_step(PyObject *module, PyObject *args);
PyObject *wpy_rmsprop_step(PyObject *module, PyObject *args);
PyObject *wpy_adagrad_step(PyObject *module, PyObject *args);
/* datasets.c: _read_idx (weft.datasets) */
PyObject *wpy_read_idx(PyObject *module, PyObject *arg);

#endif /* WEFT_PYTHON_WEFTPY_H */
