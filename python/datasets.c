/* datasets.c — the C helper of weft.datasets (python/weft/datasets.py):
 * _read_idx, the IDX reader that weft-train uses too (libweft's
 * weft_read_idx), so Python and C decode Fashion-MNIST the same way. */
#include "weftpy.h"

#include <weft/nn.h>

/* _read_idx(path): a new uint8 CPU tensor with the file's sizes.  Errors
 * are weft_read_idx's, raised as wpy_raise maps them (the message names
 * the path and what is wrong); the GIL is released while the file is
 * read and decompressed. */
PyObject *wpy_read_idx(PyObject *module, PyObject *arg)
{
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    weft_tensor *t = NULL;
    int rc;
    const char *path = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    rc = weft_read_idx(&t, path);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    return wpy_wrap_rc(rc, &t);
}
