/* python/distributed.c — weft._C's side of weft.distributed (issue 18):
 * process groups and works as capsules, one function per collective.  The
 * GIL is released while a call may wait for other ranks.  The Python API
 * (torch's names) is python/weft/distributed.py. */
#include "weftpy.h"

#include <weft/distributed.h>

#define GROUP_CAPSULE "weft.ProcessGroup"
#define WORK_CAPSULE "weft.Work"

static void work_destructor(PyObject *capsule)
{
    weft_work *w = PyCapsule_GetPointer(capsule, WORK_CAPSULE);
    if (w) {
        Py_BEGIN_ALLOW_THREADS
        weft_work_free(w);
        Py_END_ALLOW_THREADS
    }
}

static weft_process_group *group_of(PyObject *o)
{
    return PyCapsule_GetPointer(o, GROUP_CAPSULE);
}

/* The result of a collective: None when blocking, a work when async. */
static PyObject *finish(int rc, weft_work *work)
{
    if (rc < 0)
        return wpy_raise(rc);
    if (!work)
        Py_RETURN_NONE;
    return PyCapsule_New(work, WORK_CAPSULE, work_destructor);
}

/* A list of tensors, borrowed from the list; NULL with an exception set. */
static weft_tensor **tensor_list(PyObject *list, int *n)
{
    if (!PyList_Check(list) && !PyTuple_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "expected a list of tensors");
        return NULL;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(list);
    weft_tensor **t = PyMem_Calloc((size_t)(len ? len : 1), sizeof *t);
    if (!t)
        return (weft_tensor **)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(list, i);
        if (!wpy_tensor_check(o)) {
            PyMem_Free(t);
            PyErr_Format(PyExc_TypeError, "element %zd of the list is not a weft tensor", i);
            return NULL;
        }
        t[i] = WPY_T(o);
    }
    *n = (int)len;
    return t;
}

static PyObject *py_init(PyObject *m, PyObject *args)
{
    const char *backend;
    int rank, size;
    long long timeout;
    if (!PyArg_ParseTuple(args, "siiL", &backend, &rank, &size, &timeout))
        return NULL;
    weft_dist_options o = {sizeof o, backend, rank, size, timeout};
    weft_process_group *world = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_init(&world, &o);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return wpy_raise(rc);
    /* the world is freed by _finalize, not by the capsule */
    return PyCapsule_New(world, GROUP_CAPSULE, NULL);
}

static PyObject *py_finalize(PyObject *m, PyObject *g)
{
    weft_process_group *world = group_of(g);
    if (!world)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_finalize(world);
    Py_END_ALLOW_THREADS
    return rc < 0 ? wpy_raise(rc) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *py_group_new(PyObject *m, PyObject *args)
{
    PyObject *parent, *ranks;
    if (!PyArg_ParseTuple(args, "OO", &parent, &ranks))
        return NULL;
    weft_process_group *p = group_of(parent), *g = NULL;
    if (!p)
        return NULL;
    PyObject *seq = PySequence_Fast(ranks, "ranks must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *r = PyMem_Calloc((size_t)(n ? n : 1), sizeof *r);
    for (Py_ssize_t i = 0; r && i < n; i++)
        r[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (!r)
        return PyErr_NoMemory();
    if (PyErr_Occurred()) {
        PyMem_Free(r);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_group_new(&g, p, r, (int)n);
    Py_END_ALLOW_THREADS
    PyMem_Free(r);
    if (rc < 0)
        return wpy_raise(rc);
    /* sub-groups live until finalize frees them with the world */
    return PyCapsule_New(g, GROUP_CAPSULE, NULL);
}

static PyObject *py_rank_size(PyObject *m, PyObject *g)
{
    weft_process_group *p = group_of(g);
    if (!p)
        return NULL;
    return Py_BuildValue("(ii)", weft_dist_rank(p), weft_dist_size(p));
}

#define GROUP_AND_TENSOR(fmt, ...)                                                        \
    PyObject *g_, *t_;                                                                    \
    int async_;                                                                           \
    if (!PyArg_ParseTuple(args, "OO!" fmt "p", &g_, wpy_tensor_type, &t_, __VA_ARGS__, &async_)) \
        return NULL;                                                                      \
    weft_process_group *g = group_of(g_);                                                 \
    if (!g)                                                                               \
        return NULL;                                                                      \
    weft_work *work = NULL;                                                               \
    int rc

static PyObject *py_all_reduce(PyObject *m, PyObject *args)
{
    int op;
    GROUP_AND_TENSOR("i", &op);
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_all_reduce(g, WPY_T(t_), (weft_reduce_op)op, async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    return finish(rc, work);
}

static PyObject *py_broadcast(PyObject *m, PyObject *args)
{
    int root;
    GROUP_AND_TENSOR("i", &root);
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_broadcast(g, WPY_T(t_), root, async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    return finish(rc, work);
}

static PyObject *py_reduce(PyObject *m, PyObject *args)
{
    int root, op;
    GROUP_AND_TENSOR("ii", &root, &op);
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_reduce(g, WPY_T(t_), root, (weft_reduce_op)op, async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    return finish(rc, work);
}

static PyObject *py_send_recv(PyObject *m, PyObject *args, int send)
{
    int peer, tag;
    GROUP_AND_TENSOR("ii", &peer, &tag);
    Py_BEGIN_ALLOW_THREADS
    rc = send ? weft_dist_send(g, WPY_T(t_), peer, tag, async_ ? &work : NULL)
              : weft_dist_recv(g, WPY_T(t_), peer, tag, async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    return finish(rc, work);
}

static PyObject *py_send(PyObject *m, PyObject *args)
{
    return py_send_recv(m, args, 1);
}

static PyObject *py_recv(PyObject *m, PyObject *args)
{
    return py_send_recv(m, args, 0);
}

/* all_gather(g, outputs, input), reduce_scatter(g, output, inputs, op):
 * one tensor and one list */
static PyObject *py_all_gather(PyObject *m, PyObject *args)
{
    PyObject *g_, *list, *t_;
    int async_, n = 0;
    if (!PyArg_ParseTuple(args, "OOO!p", &g_, &list, wpy_tensor_type, &t_, &async_))
        return NULL;
    weft_process_group *g = group_of(g_);
    weft_tensor **outs = g ? tensor_list(list, &n) : NULL;
    if (!outs)
        return NULL;
    if (n != weft_dist_size(g)) {
        PyMem_Free(outs);
        return PyErr_Format(PyExc_ValueError, "all_gather: %d output tensors for a group of %d", n,
                            weft_dist_size(g));
    }
    weft_work *work = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_all_gather(g, outs, WPY_T(t_), async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    PyMem_Free(outs);
    return finish(rc, work);
}

static PyObject *py_reduce_scatter(PyObject *m, PyObject *args)
{
    PyObject *g_, *list, *t_;
    int async_, op, n = 0;
    if (!PyArg_ParseTuple(args, "OO!Oip", &g_, wpy_tensor_type, &t_, &list, &op, &async_))
        return NULL;
    weft_process_group *g = group_of(g_);
    weft_tensor **ins = g ? tensor_list(list, &n) : NULL;
    if (!ins)
        return NULL;
    if (n != weft_dist_size(g)) {
        PyMem_Free(ins);
        return PyErr_Format(PyExc_ValueError, "reduce_scatter: %d input tensors for a group of %d",
                            n, weft_dist_size(g));
    }
    weft_work *work = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_reduce_scatter(g, WPY_T(t_), ins, (weft_reduce_op)op, async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    PyMem_Free(ins);
    return finish(rc, work);
}

/* all_gather_into(g, output, input), reduce_scatter_into(g, output, input, op) */
static PyObject *py_all_gather_into(PyObject *m, PyObject *args)
{
    PyObject *g_, *out, *in;
    int async_;
    if (!PyArg_ParseTuple(args, "OO!O!p", &g_, wpy_tensor_type, &out, wpy_tensor_type, &in, &async_))
        return NULL;
    weft_process_group *g = group_of(g_);
    if (!g)
        return NULL;
    weft_work *work = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_all_gather_into(g, WPY_T(out), WPY_T(in), async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    return finish(rc, work);
}

static PyObject *py_barrier(PyObject *m, PyObject *args)
{
    PyObject *g_;
    int async_;
    if (!PyArg_ParseTuple(args, "Op", &g_, &async_))
        return NULL;
    weft_process_group *g = group_of(g_);
    if (!g)
        return NULL;
    weft_work *work = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_dist_barrier(g, async_ ? &work : NULL);
    Py_END_ALLOW_THREADS
    return finish(rc, work);
}

static PyObject *py_work_wait(PyObject *m, PyObject *w_)
{
    weft_work *w = PyCapsule_GetPointer(w_, WORK_CAPSULE);
    if (!w)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_work_wait(w);
    Py_END_ALLOW_THREADS
    return rc < 0 ? wpy_raise(rc) : (Py_INCREF(Py_True), Py_True);
}

static PyObject *py_work_test(PyObject *m, PyObject *w_)
{
    weft_work *w = PyCapsule_GetPointer(w_, WORK_CAPSULE);
    if (!w)
        return NULL;
    int rc = weft_work_test(w);
    return rc < 0 ? wpy_raise(rc) : PyBool_FromLong(rc);
}

PyMethodDef wpy_dist_methods[] = {
    {"_dist_init", py_init, METH_VARARGS, "_dist_init(backend, rank, world_size, timeout_ms): the world"},
    {"_dist_finalize", py_finalize, METH_O, "_dist_finalize(world)"},
    {"_dist_group_new", py_group_new, METH_VARARGS, "_dist_group_new(parent, ranks): a sub-group"},
    {"_dist_rank_size", py_rank_size, METH_O, "_dist_rank_size(group): (rank or -1, size)"},
    {"_dist_all_reduce", py_all_reduce, METH_VARARGS, "_dist_all_reduce(group, t, op, async)"},
    {"_dist_broadcast", py_broadcast, METH_VARARGS, "_dist_broadcast(group, t, root, async)"},
    {"_dist_reduce", py_reduce, METH_VARARGS, "_dist_reduce(group, t, root, op, async)"},
    {"_dist_all_gather", py_all_gather, METH_VARARGS, "_dist_all_gather(group, outputs, t, async)"},
    {"_dist_all_gather_into", py_all_gather_into, METH_VARARGS,
     "_dist_all_gather_into(group, output, input, async)"},
    {"_dist_reduce_scatter", py_reduce_scatter, METH_VARARGS,
     "_dist_reduce_scatter(group, output, inputs, op, async)"},
    {"_dist_barrier", py_barrier, METH_VARARGS, "_dist_barrier(group, async)"},
    {"_dist_send", py_send, METH_VARARGS, "_dist_send(group, t, dst, tag, async)"},
    {"_dist_recv", py_recv, METH_VARARGS, "_dist_recv(group, t, src, tag, async)"},
    {"_work_wait", py_work_wait, METH_O, "_work_wait(work): waits; raises the work's error"},
    {"_work_test", py_work_test, METH_O, "_work_test(work): whether it is done"},
    {NULL},
};
