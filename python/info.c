/* info.c — weft._C._info(op=None, ops=False): the text weft-info prints, made by the
 * same code (tools/info_report.c), for `python -m weft.info`. */
#include "weftpy.h"

#include <stdio.h>
#include <stdlib.h>

#include "../tools/info_report.h"

PyObject *wpy_info(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"op", "ops", NULL};
    const char *op = NULL;
    int ops = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|zp", kwlist, &op, &ops))
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return PyErr_NoMemory();
    int rc = info_report(f, op, ops);
    if (fclose(f) != 0) {
        free(text);
        return PyErr_NoMemory();
    }
    PyObject *result = rc < 0 ? wpy_raise(rc) : PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    free(text);
    return result;
}
