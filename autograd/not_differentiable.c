/* autograd/not_differentiable.c — the Autograd kernel plugins register for
 * operators of their own without a gradient formula (plugin.h).  Without
 * one, such an operator would run straight past autograd and return a
 * result with no history: a gradient lost without a word.  With it, an
 * input that requires grad is an error naming the operator, and every
 * other call costs one redispatch. */
#include "autograd/autograd.h"

static bool any_requires_grad(const weft_call *call)
{
    if (!weft_is_grad_enabled())
        return false;
    for (int i = 0; i < call->nargs; i++) {
        const weft_value *v = &call->args[i];
        if (v->tag == WEFT_VALUE_TENSOR && v->u.tensor && weft_tensor_requires_grad(v->u.tensor))
            return true;
        for (int k = 0; v->tag == WEFT_VALUE_TENSOR_LIST && k < v->len; k++)
            if (v->u.tensors[k] && weft_tensor_requires_grad(v->u.tensors[k]))
                return true;
    }
    return false;
}

WEFT_API int weft_not_differentiable_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    if (any_requires_grad(call))
        return wf__errorf(WEFT_ENOTSUP,
                          "%s: not differentiable, and an input requires grad (detach it, or "
                          "compute under no_grad)",
                          weft_op_name(call->op));
    return weft_redispatch(call, WEFT_KEYSET_BIT(WEFT_KEY_AUTOGRAD));
}
