/* ops/layout_fallback.c — the strided fallback a layout plugin may
 * register for its key: an operator it has no kernel for runs on strided
 * copies of the layout's tensors.  Opt-in, because densifying a sparse
 * tensor can take far more memory than the caller expects; a layout that
 * does not register it gets the dispatcher's clear "no kernel for layout"
 * error instead. */
#include <stdio.h>
#include <string.h>

#include "ops/ops.h"

enum { MAX_CONVERTED = 64 };

/* Puts a strided version of each layout tensor of v into *conv (new
 * references, counted in *n); list arguments get a new array in *list. */
static int convert_value(weft_value *v, weft_tensor **conv, int *n, weft_tensor ***list,
                         const char *op)
{
    if (v->tag == WEFT_VALUE_TENSOR && v->u.tensor && v->u.tensor->layout) {
        if (*n == MAX_CONVERTED)
            return wf__errorf(WEFT_ENOTSUP, "%s: the strided fallback converts at most %d "
                                            "tensors", op, MAX_CONVERTED);
        int rc = wf__layout_strided(&conv[*n], v->u.tensor, op);
        if (rc < 0)
            return rc;
        v->u.tensor = conv[(*n)++];
        return 0;
    }
    if (v->tag != WEFT_VALUE_TENSOR_LIST)
        return 0;
    bool any = false;
    for (int j = 0; j < v->len; j++)
        any |= v->u.tensors[j] && v->u.tensors[j]->layout;
    if (!any)
        return 0;
    weft_tensor **copy = wf__calloc((size_t)v->len, sizeof *copy);
    if (!copy)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory in the strided fallback", op);
    *list = copy;
    for (int j = 0; j < v->len; j++) {
        copy[j] = v->u.tensors[j];
        if (!copy[j] || !copy[j]->layout)
            continue;
        if (*n == MAX_CONVERTED)
            return wf__errorf(WEFT_ENOTSUP, "%s: the strided fallback converts at most %d "
                                            "tensors", op, MAX_CONVERTED);
        int rc = wf__layout_strided(&conv[*n], copy[j], op);
        if (rc < 0)
            return rc;
        copy[j] = conv[(*n)++];
    }
    v->u.tensors = copy;
    return 0;
}

WEFT_API int weft_layout_strided_fallback(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_op *op = call->op;
    const char *name = op->schema.name;
    if (op->schema.mutating && call->args[0].u.tensor->layout)
        return wf__errorf(WEFT_ENOTSUP,
                          "%s: writes its argument '%s' of layout '%s' in place, which the "
                          "strided fallback cannot do",
                          name, op->schema.args[0].name,
                          wf__layouts[call->args[0].u.tensor->layout].name);
    if (call->nargs > WF_MAX_ARGS)
        return wf__errorf(WEFT_EINTERNAL, "%s: too many arguments", name);
    weft_value args[WF_MAX_ARGS];
    weft_tensor *conv[MAX_CONVERTED];
    weft_tensor **lists[WF_MAX_ARGS] = {0};
    int n = 0, rc = 0;
    memcpy(args, call->args, (size_t)call->nargs * sizeof *args);
    for (int i = 0; i < call->nargs && rc == 0; i++)
        rc = convert_value(&args[i], conv, &n, &lists[i], name);
    /* from the top: the strided copies carry no autograd key, so this runs
     * the dense kernels (autograd, if any, was recorded above this key) */
    if (rc == 0)
        rc = weft_call_boxed(op, args, call->nargs, call->rets, call->nrets);
    for (int i = 0; i < n; i++)
        weft_tensor_release(conv[i]);
    for (int i = 0; i < call->nargs; i++)
        free(lists[i]);
    return rc;
}
