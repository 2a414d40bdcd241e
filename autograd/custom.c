/* autograd/custom.c — custom differentiable functions from C
 * (torch.autograd.Function): forward and backward callbacks, a context per
 * call holding what forward saved and marked, and one graph node whose
 * backward calls the user's.  The context lives on the node (node->ctx) and
 * dies with it, so the user's destroy runs exactly once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"

struct weft_function_ctx {
    weft_function fn;
    char *name;           /* owned copy of fn.name: the node's name */
    void *user;
    void (*destroy)(void *user);
    wf_node *node;        /* weak (the node owns the context); NULL when nothing is recorded */
    bool in_forward, in_backward;
    int ninputs, noutputs;
    bool *needs_grad;     /* per input */
    weft_tensor **pending; /* saved during forward, stored on the node after it */
    int n_pending;
    const weft_tensor **dirty, **nondiff; /* what forward marked, by pointer */
    int n_dirty, n_nondiff;
    weft_tensor **input_meta;  /* per input: an empty tensor of its shape and dtype */
    weft_tensor **output_meta; /* per output, for materialize_grads */
};

static void release_list(weft_tensor **ts, int n)
{
    for (int i = 0; ts && i < n; i++)
        weft_tensor_release(ts[i]);
    free(ts);
}

static void ctx_free(void *p)
{
    weft_function_ctx *c = p;
    if (!c)
        return;
    if (c->destroy)
        c->destroy(c->user);
    release_list(c->pending, c->n_pending);
    release_list(c->input_meta, c->ninputs);
    release_list(c->output_meta, c->noutputs);
    free(c->needs_grad);
    free(c->dirty);
    free(c->nondiff);
    free(c->name);
    free(c);
}

/* A zero-strided tensor with t's shape, dtype and device: remembers the
 * metadata without holding t's storage. */
static int meta_of_tensor(weft_tensor **out, const weft_tensor *t)
{
    weft_tensor *scalar = NULL;
    int rc = weft_zeros(&scalar, NULL, 0, (weft_dtype)t->dtype, t->device);
    if (rc == 0)
        rc = weft_expand(out, scalar, t->sizes, t->ndim);
    weft_tensor_release(scalar);
    return rc;
}

static bool contains(const weft_tensor *const *list, int n, const weft_tensor *t)
{
    for (int i = 0; i < n; i++)
        if (list[i] == t)
            return true;
    return false;
}

/* ------------------------------------------------------------ ctx calls */

WEFT_API void *weft_function_user(const weft_function_ctx *ctx)
{
    return ctx ? ctx->user : NULL;
}

WEFT_API bool weft_function_needs_input_grad(const weft_function_ctx *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->ninputs && ctx->needs_grad[i];
}

WEFT_API int weft_function_save_for_backward(weft_function_ctx *ctx, weft_tensor *const *tensors,
                                             int n)
{
    if (!ctx || n < 0 || (n > 0 && !tensors))
        return wf__errorf(WEFT_EINVAL, "function_save_for_backward: NULL argument");
    if (!ctx->in_forward)
        return wf__errorf(WEFT_EINVAL, "%s: save_for_backward can only be called from forward",
                          ctx->name);
    for (int i = 0; i < n; i++)
        if (!tensors[i])
            return wf__errorf(WEFT_EINVAL, "%s: save_for_backward: tensor %d is NULL", ctx->name, i);
    weft_tensor **kept = n ? wf__malloc((size_t)n * sizeof *kept) : NULL;
    if (n && !kept)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory saving tensors", ctx->name);
    for (int i = 0; i < n; i++)
        kept[i] = weft_tensor_retain(tensors[i]);
    release_list(ctx->pending, ctx->n_pending);
    ctx->pending = kept;
    ctx->n_pending = n;
    return 0;
}

WEFT_API int weft_function_saved(weft_tensor **out, weft_function_ctx *ctx, int i)
{
    if (out)
        *out = NULL;
    if (!out || !ctx)
        return wf__errorf(WEFT_EINVAL, "function_saved: NULL argument");
    if (!ctx->in_backward || !ctx->node)
        return wf__errorf(WEFT_EINVAL, "%s: saved tensors can only be read in backward", ctx->name);
    if (i < 0 || i >= ctx->node->n_saved)
        return wf__errorf(WEFT_EINVAL, "%s: saved tensor %d requested, but %d were saved",
                          ctx->name, i, ctx->node->n_saved);
    weft_tensor *t = wa__node_saved(ctx->node, i);
    if (!t)
        return WEFT_EINVAL;
    *out = weft_tensor_retain(t);
    return 0;
}

static int mark(weft_function_ctx *ctx, const weft_tensor *t, const weft_tensor ***list, int *n,
                const char *what)
{
    if (!ctx || !t)
        return wf__errorf(WEFT_EINVAL, "function_mark_%s: NULL argument", what);
    if (!ctx->in_forward)
        return wf__errorf(WEFT_EINVAL, "%s: mark_%s can only be called from forward", ctx->name, what);
    const weft_tensor **grown = wf__realloc(*list, (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory", ctx->name);
    grown[(*n)++] = t;
    *list = grown;
    return 0;
}

WEFT_API int weft_function_mark_non_differentiable(weft_function_ctx *ctx, const weft_tensor *output)
{
    return mark(ctx, output, ctx ? &ctx->nondiff : NULL, ctx ? &ctx->n_nondiff : NULL,
                "non_differentiable");
}

WEFT_API int weft_function_mark_dirty(weft_function_ctx *ctx, const weft_tensor *input)
{
    return mark(ctx, input, ctx ? &ctx->dirty : NULL, ctx ? &ctx->n_dirty : NULL, "dirty");
}

/* ------------------------------------------------------------ backward */

static int custom_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    weft_function_ctx *c = n->ctx;
    weft_tensor **grads = wf__calloc((size_t)c->noutputs, sizeof *grads);
    weft_tensor **result = wf__calloc((size_t)(c->ninputs ? c->ninputs : 1), sizeof *result);
    int rc = grads && result ? 0 : wf__errorf(WEFT_ENOMEM, "%s: out of memory", c->name);
    for (int o = 0; rc == 0 && o < c->noutputs; o++) {
        if (go[o])
            grads[o] = weft_tensor_retain(go[o]);
        else if (c->fn.materialize_grads)
            rc = weft_zeros(&grads[o], c->output_meta[o]->sizes, c->output_meta[o]->ndim,
                            (weft_dtype)c->output_meta[o]->dtype, c->output_meta[o]->device);
    }
    if (rc == 0) {
        c->in_backward = true;
        rc = c->fn.backward(c, grads, c->noutputs, result, c->ninputs);
        c->in_backward = false;
        if (rc < 0) {
            char why[768];
            snprintf(why, sizeof why, "%s", weft_last_error());
            rc = wf__errorf(rc, "%s: backward failed: %s", c->name, why);
        }
    }
    for (int i = 0; rc == 0 && i < c->ninputs; i++) {
        weft_tensor *g = result[i];
        if (!g)
            continue;
        if (!n->edges[i].node) { /* needs no gradient: dropped */
            weft_tensor_release(g);
            result[i] = NULL;
            continue;
        }
        const weft_tensor *want = c->input_meta[i];
        if (g->ndim != want->ndim ||
            memcmp(g->sizes, want->sizes, (size_t)g->ndim * sizeof(int64_t)) != 0) {
            char a[128], b[128];
            rc = wf__errorf(WEFT_ESHAPE,
                            "%s: backward returned a gradient of shape %s for input %d, which has "
                            "shape %s",
                            c->name, wf__shape_str(a, sizeof a, g->sizes, g->ndim), i,
                            wf__shape_str(b, sizeof b, want->sizes, want->ndim));
        } else if (g->dtype != want->dtype) {
            weft_tensor *converted;
            if (g->layout) { /* the dtype conversion takes strided tensors */
                weft_tensor *d = NULL, *dc = NULL;
                rc = weft_to_strided(&d, g);
                if (rc == 0)
                    rc = weft_to_dtype(&dc, d, (weft_dtype)want->dtype);
                if (rc == 0)
                    rc = weft_to_layout(&converted, dc, g->layout);
                weft_tensor_release(dc);
                weft_tensor_release(d);
            } else {
                rc = weft_to_dtype(&converted, g, (weft_dtype)want->dtype);
            }
            if (rc == 0) {
                weft_tensor_release(g);
                result[i] = converted;
            }
        }
    }
    for (int i = 0; i < c->ninputs && result; i++) {
        if (rc == 0)
            gi[i] = result[i];
        else
            weft_tensor_release(result[i]);
    }
    release_list(grads, c->noutputs);
    free(result);
    return rc;
}

/* ------------------------------------------------------------ apply */

static int check_apply(weft_tensor **outputs, int noutputs, const weft_function *fn,
                       weft_tensor *const *inputs, int ninputs)
{
    if (!outputs || noutputs <= 0)
        return wf__errorf(WEFT_EINVAL, "function_apply: at least one output is needed");
    if (!fn || !fn->forward || !fn->backward)
        return wf__errorf(WEFT_EINVAL, "function_apply: the function needs forward and backward");
    if (ninputs < 0 || (ninputs > 0 && !inputs))
        return wf__errorf(WEFT_EINVAL, "function_apply: inputs is NULL");
    for (int i = 0; i < ninputs; i++)
        if (!inputs[i])
            return wf__errorf(WEFT_EINVAL, "%s: input %d is NULL", fn->name ? fn->name : "function",
                              i);
    return 0;
}

static bool differentiable(const weft_function_ctx *c, const weft_tensor *out)
{
    return (weft_dtype_is_floating(out->dtype) || weft_dtype_is_complex(out->dtype)) &&
           !contains(c->nondiff, c->n_nondiff, out);
}

/* What forward returned and marked must make sense before anything is
 * recorded: dirty inputs returned as outputs, not leaves that require grad. */
static int check_marks(const weft_function_ctx *c, weft_tensor *const *inputs, weft_tensor **outputs,
                       bool track)
{
    for (int o = 0; o < c->noutputs; o++) {
        if (!outputs[o])
            return wf__errorf(WEFT_EINVAL, "%s: forward left output %d NULL", c->name, o);
        for (int p = 0; p < o; p++)
            if (outputs[p] == outputs[o]) /* one tensor cannot be two outputs of the node */
                return wf__errorf(WEFT_EINVAL, "%s: forward returned the same tensor as outputs %d "
                                               "and %d", c->name, p, o);
    }
    for (int d = 0; d < c->n_dirty; d++) {
        const weft_tensor *t = c->dirty[d];
        if (!contains((const weft_tensor *const *)inputs, c->ninputs, t))
            return wf__errorf(WEFT_EINVAL, "%s: mark_dirty was given a tensor that is not an input",
                              c->name);
        if (!contains((const weft_tensor *const *)outputs, c->noutputs, t))
            return wf__errorf(WEFT_EINVAL,
                              "%s: an input marked dirty (modified in place) must be returned as "
                              "an output",
                              c->name);
        if (track && t->is_view && t->view_base &&
            (wa__requires_grad(t) || wa__requires_grad(t->view_base)))
            return wf__errorf(WEFT_ENOTSUP,
                              "%s: marking a view dirty (in place through a custom function) is "
                              "not supported; modify a copy, or the base itself",
                              c->name);
        if (wa__requires_grad(t) && weft_tensor_is_leaf(t))
            return wf__errorf(WEFT_EINVAL,
                              "%s: a leaf tensor that requires grad is being used in an in-place "
                              "operation",
                              c->name);
    }
    for (int d = 0; d < c->n_nondiff; d++)
        if (!contains((const weft_tensor *const *)outputs, c->noutputs, c->nondiff[d]))
            return wf__errorf(WEFT_EINVAL,
                              "%s: mark_non_differentiable was given a tensor that is not an output",
                              c->name);
    return 0;
}

/* Gives the outputs their history and stores the saved tensors. */
static int record(weft_function_ctx *c, wf_node *node, weft_tensor *const *inputs,
                  weft_tensor **outputs)
{
    int rc = 0;
    for (int o = 0; rc == 0 && o < c->noutputs; o++) {
        weft_tensor *out = outputs[o];
        bool is_input = contains((const weft_tensor *const *)inputs, c->ninputs, out);
        bool dirty = contains(c->dirty, c->n_dirty, out);
        if (is_input && !dirty) {
            /* an input returned as it is: the output is a new alias, so the
             * input keeps its own history */
            weft_tensor *alias;
            if ((rc = weft_detach(&alias, out)) < 0)
                break;
            outputs[o] = alias;
            weft_tensor_release(out);
            out = alias;
        }
        if (differentiable(c, out))
            rc = wa__set_history(out, node, o);
        if (rc == 0)
            rc = meta_of_tensor(&c->output_meta[o], out);
    }
    for (int s = 0; rc == 0 && s < c->n_pending; s++) {
        weft_tensor *t = c->pending[s];
        int o = 0;
        while (o < c->noutputs && outputs[o] != t)
            o++;
        if (o < c->noutputs && wa__requires_grad(t))
            rc = wa__node_save_output(node, s, t, o); /* detached: the output holds the node */
        else
            rc = wa__node_save(node, s, t, NULL);
    }
    release_list(c->pending, c->n_pending);
    c->pending = NULL;
    c->n_pending = 0;
    return rc;
}

WEFT_API int weft_function_apply(weft_tensor **outputs, int noutputs, const weft_function *fn,
                                 void *user, void (*destroy)(void *user),
                                 weft_tensor *const *inputs, int ninputs)
{
    for (int o = 0; outputs && o < noutputs; o++)
        outputs[o] = NULL;
    int rc = check_apply(outputs, noutputs, fn, inputs, ninputs);
    weft_function_ctx *c = rc == 0 ? wf__calloc(1, sizeof *c) : NULL;
    if (rc == 0 && !c)
        rc = wf__errorf(WEFT_ENOMEM, "function_apply: out of memory");
    if (rc < 0) {
        if (destroy)
            destroy(user);
        return rc;
    }
    c->fn = *fn;
    c->user = user;
    c->destroy = destroy;
    c->ninputs = ninputs;
    c->noutputs = noutputs;
    c->name = wf__strdup(fn->name ? fn->name : "CustomFunctionBackward");
    c->needs_grad = wf__calloc((size_t)(ninputs ? ninputs : 1), sizeof *c->needs_grad);
    c->input_meta = wf__calloc((size_t)(ninputs ? ninputs : 1), sizeof *c->input_meta);
    c->output_meta = wf__calloc((size_t)noutputs, sizeof *c->output_meta);
    if (!c->name || !c->needs_grad || !c->input_meta || !c->output_meta) {
        ctx_free(c);
        return wf__errorf(WEFT_ENOMEM, "function_apply: out of memory");
    }
    bool track = false;
    if (wa__grad_enabled())
        for (int i = 0; i < ninputs; i++)
            track |= c->needs_grad[i] = wa__requires_grad(inputs[i]);

    bool mode = weft_set_grad_enabled(false);
    c->in_forward = true;
    rc = fn->forward(c, inputs, ninputs, outputs, noutputs);
    c->in_forward = false;
    weft_set_grad_enabled(mode);
    if (rc < 0) {
        char why[768];
        snprintf(why, sizeof why, "%s", weft_last_error());
        rc = wf__errorf(rc, "%s: forward failed: %s", c->name, why);
    }
    if (rc == 0)
        rc = check_marks(c, inputs, outputs, track);
    wf_node *node = NULL;
    if (rc == 0 && track) {
        node = wa__node_new(c->name, custom_backward, ninputs, noutputs);
        if (!node)
            rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory recording the graph", c->name);
    }
    if (node) {
        node->ctx = c;
        node->ctx_free = ctx_free;
        c->node = node;
        /* the edges first: a dirty input's history is about to move */
        for (int i = 0; rc == 0 && i < ninputs; i++) {
            rc = wa__edge_of(&node->edges[i], inputs[i]);
            if (rc == 0)
                rc = meta_of_tensor(&c->input_meta[i], inputs[i]);
        }
        if (rc == 0)
            rc = record(c, node, inputs, outputs);
    }
    if (rc < 0)
        for (int o = 0; o < noutputs; o++) {
            weft_tensor_release(outputs[o]);
            outputs[o] = NULL;
        }
    if (node)
        wa__node_release(node); /* the outputs hold it now, or it goes with c */
    else
        ctx_free(c);
    return rc;
}
