/* autograd/layout.c — conversions between layouts, differentiable.  The
 * conversions themselves are the layout plugin's (c10's layout record);
 * this file only records them in the graph, through the custom-function
 * machinery, so that a plugin layout gets autograd without writing any. */
#include <stdio.h>

#include "autograd/autograd.h"

/* t in `layout`, without autograd (a new reference). */
static int convert(weft_tensor **out, const weft_tensor *t, int layout)
{
    return wf__layout_from_strided(out, t, layout,
                                   layout == WEFT_LAYOUT_STRIDED ? "to_strided" : "to_layout");
}

/* The user pointer of both functions: the layout to reach in forward
 * (backward goes back to the input's, which it reads from the input). */
typedef struct conversion {
    int to, from;
} conversion;

static int conversion_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                              weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    return convert(&out[0], in[0], ((conversion *)weft_function_user(ctx))->to);
}

static int conversion_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                               weft_tensor **gin, int nin)
{
    (void)nout;
    (void)nin;
    const conversion *c = weft_function_user(ctx);
    if (!gout[0])
        return 0;
    /* the gradient of the input has the input's layout */
    if (c->from != WEFT_LAYOUT_STRIDED && !atomic_load(&wf__layouts[c->from].registered))
        return wf__errorf(WEFT_EINVAL, "the input's layout was unregistered before backward");
    return convert(&gin[0], gout[0], c->from);
}

static int apply(weft_tensor **out, const weft_tensor *t, int layout, const char *name)
{
    if (!wa__requires_grad(t) || !wa__grad_enabled())
        return convert(out, t, layout);
    conversion *c = wf__malloc(sizeof *c);
    if (!c)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory", name);
    c->to = layout;
    c->from = t->layout;
    const weft_function fn = {.name = layout ? "ToLayoutBackward" : "ToStridedBackward",
                              .forward = conversion_forward,
                              .backward = conversion_backward};
    weft_tensor *in = (weft_tensor *)t;
    return weft_function_apply(out, 1, &fn, c, free, &in, 1);
}

WEFT_API int weft_to_strided(weft_tensor **out, const weft_tensor *t)
{
    if (out)
        *out = NULL;
    if (!out || !t)
        return wf__errorf(WEFT_EINVAL, "to_strided: %s is NULL", !out ? "out" : "the tensor");
    if (t->layout == WEFT_LAYOUT_STRIDED) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    return apply(out, t, WEFT_LAYOUT_STRIDED, "to_strided");
}

WEFT_API int weft_to_layout(weft_tensor **out, const weft_tensor *t, int layout)
{
    if (out)
        *out = NULL;
    if (!out || !t)
        return wf__errorf(WEFT_EINVAL, "to_layout: %s is NULL", !out ? "out" : "the tensor");
    if (!weft_layout_name(layout))
        return wf__errorf(WEFT_EINVAL, "to_layout: %d is not a registered layout", layout);
    if (t->layout == layout) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    return apply(out, t, layout, "to_layout");
}
