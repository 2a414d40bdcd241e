/* autograd/graph.c — the pieces of the graph: per-tensor autograd metadata,
 * nodes, edges, saved tensors with their versions, grad mode, and the public
 * calls that read or change them. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "dispatch/dispatcher.h"

static atomic_uint_fast64_t next_sequence_nr;
_Atomic(const wa_profiler_hooks *) wa__profiler_hooks;

/* ------------------------------------------------------------ grad mode */

/* Grad mode off is the Autograd key in the thread's exclude set: operators
 * then skip the layer entirely, exactly as for tensors without the key. */
bool wa__grad_enabled(void)
{
    return !(wd__tls_excluded & WF_AUTOGRAD_KEYS);
}

WEFT_API bool weft_is_grad_enabled(void)
{
    return wa__grad_enabled();
}

WEFT_API bool weft_set_grad_enabled(bool enabled)
{
    bool previous = wa__grad_enabled();
    /* no-grad mode has no view history to join either: views then take
     * the dense fast path with no ADInplaceOrView stop */
    const weft_keyset keys = WF_AUTOGRAD_KEYS | WEFT_KEYSET_BIT(WEFT_KEY_ADINPLACE_OR_VIEW);
    if (enabled)
        wd__tls_excluded &= ~keys;
    else
        wd__tls_excluded |= keys;
    return previous;
}

/* ------------------------------------------------------------ nodes */

wf_node *wa__node_new(const char *name, wf_backward_fn backward, int n_edges, int n_outputs)
{
    wf_node *n = wf__calloc(1, sizeof *n);
    if (!n)
        return NULL;
    if (n_edges > 0 && !(n->edges = wf__calloc((size_t)n_edges, sizeof *n->edges))) {
        free(n);
        return NULL;
    }
    atomic_init(&n->refcount, 1);
    n->name = name;
    n->backward = backward;
    n->n_edges = n_edges;
    n->n_outputs = n_outputs;
    n->sequence_nr = atomic_fetch_add(&next_sequence_nr, 1);
    const wa_profiler_hooks *ph = atomic_load_explicit(&wa__profiler_hooks, memory_order_relaxed);
    if (__builtin_expect(ph != NULL, 0))
        ph->node_made(n);
    return n;
}

void wa__node_retain(wf_node *n)
{
    if (n)
        atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

static void free_hooks(wf_hook *h)
{
    while (h) {
        wf_hook *next = h->next;
        if (h->destroy)
            h->destroy(h->ctx);
        free(h);
        h = next;
    }
}

static void free_node_hooks(wf_node_hook *h)
{
    while (h) {
        wf_node_hook *next = h->next;
        free(h);
        h = next;
    }
}

static void release_saved(wf_node *n)
{
    for (int i = 0; i < n->n_saved; i++) {
        weft_tensor_release(n->saved[i].tensor);
        weft_tensor_release(n->saved[i].unpacked);
        n->saved[i].tensor = NULL;
        n->saved[i].unpacked = NULL;
    }
}

void wa__node_drop_unpacked(wf_node *n)
{
    for (int i = 0; i < n->n_saved; i++) {
        weft_tensor *u = n->saved[i].unpacked;
        n->saved[i].unpacked = NULL;
        weft_tensor_release(u); /* may release the last outside reference to n: not here */
    }
}

/* Releasing a long chain recursively could overflow the stack: nodes whose
 * last reference goes are put on a work list instead. */
void wa__node_release(wf_node *n)
{
    if (!n || atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1)
        return;
    wf_node *dead = n;
    n->next_dead = NULL;
    while (dead) {
        wf_node *d = dead;
        dead = d->next_dead;
        release_saved(d);
        free(d->saved);
        free(d->info);
        free_hooks(d->pre_hooks);
        free_node_hooks(d->node_pre_hooks);
        free_node_hooks(d->post_hooks);
        if (d->ctx_free)
            d->ctx_free(d->ctx);
        for (int i = 0; i < d->n_edges; i++) {
            wf_node *child = d->edges[i].node;
            if (child && atomic_fetch_sub_explicit(&child->refcount, 1, memory_order_acq_rel) == 1) {
                child->next_dead = dead;
                dead = child;
            }
        }
        free(d->edges);
        free(d);
    }
}

int wa__node_set_info(wf_node *n, const int64_t *info, int count)
{
    int64_t *copy = wf__malloc((size_t)count * sizeof *copy);
    if (!copy)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a node");
    memcpy(copy, info, (size_t)count * sizeof *copy);
    free(n->info);
    n->info = copy;
    n->n_info = count;
    return 0;
}

int wa__node_save(wf_node *n, int slot, const weft_tensor *t, const weft_tensor *output)
{
    if (slot >= n->n_saved) {
        wf_saved *grown = wf__realloc(n->saved, (size_t)(slot + 1) * sizeof *grown);
        if (!grown)
            return wf__errorf(WEFT_ENOMEM, "out of memory saving a tensor for backward");
        memset(grown + n->n_saved, 0, (size_t)(slot + 1 - n->n_saved) * sizeof *grown);
        n->saved = grown;
        n->n_saved = slot + 1;
    }
    if (!t)
        return 0;
    /* An input is kept with its history, so that a backward formula that
     * reads it can itself be differentiated (create_graph).  The node's own
     * output is kept as a detached alias: it holds the node, and the node
     * holding it would be a reference cycle. */
    weft_tensor *keep;
    if (t == output) {
        int rc = weft_detach(&keep, t);
        if (rc < 0)
            return rc;
    } else if (t->is_view && t->view_base) {
        /* a view holds its root, whose history a later in-place write may
         * point at this node: kept as an alias with the view's history but
         * without the root, that would be a reference cycle */
        int rc = weft_detach(&keep, t);
        const wf_autograd_meta *m = t->autograd_meta;
        if (rc == 0 && m && m->grad_fn && wa__requires_grad(t) &&
            (rc = wa__set_history(keep, m->grad_fn, m->output_nr)) < 0)
            weft_tensor_release(keep);
        if (rc < 0)
            return rc;
    } else {
        keep = weft_tensor_retain(t);
    }
    weft_tensor_release(n->saved[slot].tensor);
    weft_tensor_release(n->saved[slot].unpacked);
    n->saved[slot].tensor = keep;
    n->saved[slot].unpacked = NULL;
    n->saved[slot].version = weft_tensor_version(t);
    n->saved[slot].was_output = t == output;
    n->saved[slot].after_write = false;
    n->saved[slot].output_nr = 0;
    return 0;
}

int wa__node_save_output(wf_node *n, int slot, const weft_tensor *t, int output_nr)
{
    int rc = wa__node_save(n, slot, t, t);
    if (rc == 0 && t)
        n->saved[slot].output_nr = output_nr;
    return rc;
}

weft_tensor *wa__node_saved(wf_node *n, int slot)
{
    if (n->released) {
        wf__errorf(WEFT_EINVAL,
                   "%s: trying to backward through the graph a second time (or to use saved "
                   "tensors after they were freed); pass retain_graph=true to the first backward",
                   n->name);
        return NULL;
    }
    if (slot >= n->n_saved || !n->saved[slot].tensor) {
        wf__errorf(WEFT_EINVAL, "%s: the tensor saved for backward is missing", n->name);
        return NULL;
    }
    weft_tensor *t = n->saved[slot].tensor;
    uint32_t now = weft_tensor_version(t);
    if (now != n->saved[slot].version) {
        char shape[128];
        wf__errorf(WEFT_EINVAL,
                   "one of the tensors needed for gradient computation has been modified by an "
                   "in-place operation: the %s tensor of shape %s saved by %s is at version %u; "
                   "expected version %u instead",
                   weft_dtype_name(t->dtype), wf__shape_str(shape, sizeof shape, t->sizes, t->ndim),
                   n->name, now, n->saved[slot].version);
        return NULL;
    }
    if (n->saved[slot].was_output && wa__grad_enabled()) {
        /* create_graph: the output's value depends on the node's inputs, so
         * the formula must see it with its history, as the output itself */
        if (!n->saved[slot].unpacked) {
            weft_tensor *alias;
            if (weft_detach(&alias, t) < 0)
                return NULL;
            if (wa__set_history(alias, n, n->saved[slot].output_nr) < 0) {
                weft_tensor_release(alias);
                return NULL;
            }
            n->saved[slot].unpacked = alias;
        }
        return n->saved[slot].unpacked;
    }
    return t;
}

/* ------------------------------------------------------------ metadata */

static wf_autograd_meta *meta_of(weft_tensor *t, bool create)
{
    if (!t->autograd_meta && create)
        t->autograd_meta = wf__calloc(1, sizeof(wf_autograd_meta));
    return t->autograd_meta;
}

void wa__autograd_meta_free(weft_tensor *t)
{
    wf_autograd_meta *m = t->autograd_meta;
    if (!m)
        return;
    weft_tensor_release(m->grad);
    if (m->accumulator) {
        m->accumulator->leaf = NULL; /* the graph may outlive the leaf */
        wa__node_release(m->accumulator);
    }
    if (m->retains_grad && m->grad_fn) {
        /* the graph may outlive this tensor: its retain_grad hook must go */
        for (wf_hook **h = &m->grad_fn->pre_hooks; *h;) {
            if ((*h)->retain_target == t) {
                wf_hook *dead = *h;
                *h = dead->next;
                free(dead);
            } else {
                h = &(*h)->next;
            }
        }
    }
    wa__node_release(m->grad_fn);
    free(m);
    t->autograd_meta = NULL;
}

static int accumulate_backward(wf_node *node, weft_tensor **grads_out, weft_tensor **grads_in);

int wa__edge_of(wf_edge *edge, weft_tensor *t)
{
    edge->node = NULL;
    edge->input_nr = 0;
    if (t->is_view) {
        int rc = wa__view_refresh(t);
        if (rc < 0)
            return rc;
    }
    if (!wa__requires_grad(t))
        return 0;
    wf_autograd_meta *m = t->autograd_meta;
    if (m->grad_fn) {
        wa__node_retain(m->grad_fn);
        edge->node = m->grad_fn;
        edge->input_nr = m->output_nr;
        return 0;
    }
    if (!m->accumulator) {
        m->accumulator = wa__node_new("AccumulateGrad", accumulate_backward, 0, 1);
        if (!m->accumulator)
            return wf__errorf(WEFT_ENOMEM, "out of memory recording a gradient edge");
        m->accumulator->leaf = t;
    }
    wa__node_retain(m->accumulator);
    edge->node = m->accumulator;
    return 0;
}

int wa__set_history(weft_tensor *t, wf_node *node, int output_nr)
{
    wf_autograd_meta *m = meta_of(t, true);
    if (!m)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording autograd history");
    wa__node_retain(node);
    wa__node_release(m->grad_fn);
    m->grad_fn = node;
    m->output_nr = output_nr;
    m->requires_grad = false;
    t->keys |= WF_AUTOGRAD_KEYS;
    return 0;
}

/* Accumulates into the leaf's grad: the first gradient is stored (a copy
 * when it may alias something else), later ones are added. */
static int accumulate_backward(wf_node *node, weft_tensor **grads_out, weft_tensor **grads_in)
{
    (void)grads_in;
    weft_tensor *leaf = node->leaf, *g = grads_out[0];
    if (!leaf || !g)
        return 0;
    wf_autograd_meta *m = leaf->autograd_meta;
    if (!m->grad) {
        /* keep the gradient itself when nothing else holds it (or when its
         * history must be kept for create_graph); otherwise a private copy,
         * so a later in-place accumulation cannot write into another
         * tensor's storage */
        if (wa__grad_enabled() || atomic_load(&g->refcount) == 1) {
            m->grad = weft_tensor_retain(g);
            return 0;
        }
        /* a plugin layout's copy is its clone kernel's (empty_like would
         * make a strided tensor that copy_ cannot fill from it) */
        if (g->layout != WEFT_LAYOUT_STRIDED)
            return weft_clone(&m->grad, g);
        int rc = weft_empty_like(&m->grad, g);
        if (rc == 0 && (rc = weft_copy_(m->grad, g)) < 0) {
            weft_tensor_release(m->grad);
            m->grad = NULL;
        }
        return rc;
    }
    weft_tensor *sum;
    int rc = weft_add(&sum, m->grad, g);
    if (rc < 0)
        return rc;
    weft_tensor_release(m->grad);
    m->grad = sum;
    return 0;
}

/* ------------------------------------------------------------ public calls */

WEFT_API int weft_tensor_set_requires_grad(weft_tensor *t, bool requires_grad)
{
    if (!t)
        return wf__errorf(WEFT_EINVAL, "set_requires_grad: tensor is NULL");
    wf_autograd_meta *m = t->autograd_meta;
    if (m && m->grad_fn) {
        if (requires_grad)
            return 0;
        return wf__errorf(WEFT_EINVAL,
                          "set_requires_grad: you can only change requires_grad flags of leaf "
                          "tensors; use weft_detach() to get a tensor that does not require grad");
    }
    if (requires_grad && !weft_dtype_is_floating(t->dtype) && !weft_dtype_is_complex(t->dtype))
        return wf__errorf(WEFT_EDTYPE,
                          "set_requires_grad: only tensors of floating point and complex dtype can "
                          "require gradients (got %s)",
                          weft_dtype_name(t->dtype));
    if (!requires_grad && !m)
        return 0;
    if (!(m = meta_of(t, true)))
        return wf__errorf(WEFT_ENOMEM, "out of memory for autograd metadata");
    m->requires_grad = requires_grad;
    if (requires_grad)
        t->keys |= WF_AUTOGRAD_KEYS;
    else
        t->keys &= ~WF_AUTOGRAD_KEYS;
    return 0;
}

/* A view without history whose root has some: the next dispatch (or edge)
 * gives it its grad_fn from the root (wa__view_refresh), so the accessors
 * answer as if that had happened — a view taken in no-grad mode excepted. */
static bool joins_root(const weft_tensor *t)
{
    const wf_autograd_meta *m = t->autograd_meta;
    return t->is_view && !wa__requires_grad(t) && wa__requires_grad(t->view_base) &&
           !(m && m->no_grad_view);
}

WEFT_API bool weft_tensor_requires_grad(const weft_tensor *t)
{
    return wa__requires_grad(t) || (t && joins_root(t));
}

WEFT_API bool weft_tensor_is_leaf(const weft_tensor *t)
{
    const wf_autograd_meta *m = t ? t->autograd_meta : NULL;
    return (!m || !m->grad_fn) && !(t && joins_root(t));
}

WEFT_API const char *weft_tensor_grad_fn_name(const weft_tensor *t)
{
    if (t && t->is_view && wa__view_refresh((weft_tensor *)t) < 0)
        return NULL;
    const wf_autograd_meta *m = t ? t->autograd_meta : NULL;
    return m && m->grad_fn ? m->grad_fn->name : NULL;
}

WEFT_API int weft_tensor_grad(weft_tensor **out, weft_tensor *t)
{
    if (!out || !t)
        return wf__errorf(WEFT_EINVAL, "tensor_grad: NULL argument");
    wf_autograd_meta *m = t->autograd_meta;
    *out = m ? weft_tensor_retain(m->grad) : NULL;
    return 0;
}

WEFT_API int weft_tensor_set_grad(weft_tensor *t, const weft_tensor *grad)
{
    if (!t)
        return wf__errorf(WEFT_EINVAL, "set_grad: tensor is NULL");
    if (grad && (grad->ndim != t->ndim ||
                 memcmp(grad->sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t)) != 0)) {
        char a[128], b[128];
        return wf__errorf(WEFT_ESHAPE, "set_grad: assigned grad has shape %s but the tensor has %s",
                          wf__shape_str(a, sizeof a, grad->sizes, grad->ndim),
                          wf__shape_str(b, sizeof b, t->sizes, t->ndim));
    }
    wf_autograd_meta *m = meta_of(t, grad != NULL);
    if (!m)
        return grad ? wf__errorf(WEFT_ENOMEM, "out of memory for autograd metadata") : 0;
    weft_tensor_release(m->grad);
    m->grad = weft_tensor_retain(grad);
    return 0;
}

/* Hooks of a tensor live on the node its gradient arrives at: its grad_fn
 * (for that output), or its leaf accumulator. */
static int add_hook(weft_tensor *t, weft_grad_hook_fn fn, void *ctx, void (*destroy)(void *),
                    weft_tensor *retain_target)
{
    wf_edge edge;
    int rc = wa__edge_of(&edge, t);
    if (rc < 0)
        return rc;
    wf_hook *h = wf__malloc(sizeof *h);
    if (!h) {
        wa__node_release(edge.node);
        return wf__errorf(WEFT_ENOMEM, "out of memory registering a hook");
    }
    h->fn = fn;
    h->ctx = ctx;
    h->destroy = destroy;
    h->output_nr = edge.input_nr;
    h->retain_target = retain_target;
    h->next = NULL;
    wf_hook **tail = &edge.node->pre_hooks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    wa__node_release(edge.node); /* the tensor's metadata holds the node */
    return 0;
}

WEFT_API int weft_tensor_retain_grad(weft_tensor *t)
{
    if (!t)
        return wf__errorf(WEFT_EINVAL, "retain_grad: tensor is NULL");
    if (!wa__requires_grad(t))
        return wf__errorf(WEFT_EINVAL, "retain_grad: can't retain_grad on a tensor that has "
                                       "requires_grad=false");
    wf_autograd_meta *m = t->autograd_meta;
    if (!m->grad_fn || m->retains_grad)
        return 0; /* a leaf keeps its gradient anyway */
    int rc = add_hook(t, NULL, NULL, NULL, t);
    if (rc == 0)
        m->retains_grad = true;
    return rc;
}

WEFT_API int weft_tensor_register_hook(weft_tensor *t, weft_grad_hook_fn fn, void *ctx)
{
    if (!t || !fn)
        return wf__errorf(WEFT_EINVAL, "register_hook: NULL argument");
    if (!wa__requires_grad(t))
        return wf__errorf(WEFT_EINVAL, "register_hook: cannot register a hook on a tensor that "
                                       "doesn't require gradient");
    return add_hook(t, fn, ctx, NULL, NULL);
}

WEFT_API int weft_tensor_register_hook_ex(weft_tensor *t, weft_grad_hook_fn fn, void *ctx,
                                          void (*destroy)(void *ctx))
{
    if (!t || !fn)
        return wf__errorf(WEFT_EINVAL, "register_hook: NULL argument");
    if (!wa__requires_grad(t))
        return wf__errorf(WEFT_EINVAL, "register_hook: cannot register a hook on a tensor that "
                                       "doesn't require gradient");
    return add_hook(t, fn, ctx, destroy, NULL);
}

WEFT_API int weft_detach(weft_tensor **out, const weft_tensor *t)
{
    if (!out || !t) {
        if (out)
            *out = NULL;
        return wf__errorf(WEFT_EINVAL, "detach: NULL argument");
    }
    if (t->layout != WEFT_LAYOUT_STRIDED) {
        /* a layout's payload has one owner, so the detached tensor is the
         * layout's alias (a new payload sharing what the layout lets it
         * share), made with grad mode off so that nothing records it */
        if (!wf__viewable(t)) {
            *out = NULL;
            return wf__layout_refuse(t, "detach");
        }
        bool was = weft_set_grad_enabled(false);
        int rc = weft_alias(out, t);
        weft_set_grad_enabled(was);
        if (rc == 0)
            (*out)->keys &= ~WF_AUTOGRAD_KEYS;
        return rc;
    }
    int rc = wf__tensor_make(out, t->storage, t->sizes, t->strides, t->ndim, t->storage_offset,
                             (weft_dtype)t->dtype);
    if (rc == 0)
        (*out)->keys = t->keys & ~WF_AUTOGRAD_KEYS;
    return rc;
}

/* ------------------------------------------------------------ node handles */

/* A weft_node is a wf_node: the public name is an incomplete type that
 * only this file converts. */
static wf_node *node_of(const weft_node *n)
{
    return (wf_node *)n;
}

WEFT_API int weft_tensor_grad_fn(weft_node **out, const weft_tensor *t)
{
    if (out)
        *out = NULL;
    if (!out || !t)
        return wf__errorf(WEFT_EINVAL, "tensor_grad_fn: NULL argument");
    if (t->is_view) {
        int rc = wa__view_refresh((weft_tensor *)t); /* a write through its base since */
        if (rc < 0)
            return rc;
    }
    const wf_autograd_meta *m = t->autograd_meta;
    if (m && m->grad_fn && wa__requires_grad(t)) {
        wa__node_retain(m->grad_fn);
        *out = (weft_node *)m->grad_fn;
    }
    return 0;
}

WEFT_API int weft_tensor_grad_accumulator(weft_node **out, weft_tensor *t)
{
    if (out)
        *out = NULL;
    if (!out || !t)
        return wf__errorf(WEFT_EINVAL, "tensor_grad_accumulator: NULL argument");
    if (!wa__requires_grad(t) || !weft_tensor_is_leaf(t))
        return wf__errorf(WEFT_EINVAL, "tensor_grad_accumulator: only a leaf tensor that requires "
                                       "grad has an AccumulateGrad node");
    wf_edge edge;
    int rc = wa__edge_of(&edge, t);
    if (rc == 0)
        *out = (weft_node *)edge.node;
    return rc;
}

WEFT_API weft_node *weft_node_retain(weft_node *node)
{
    wa__node_retain(node_of(node));
    return node;
}

WEFT_API void weft_node_release(weft_node *node)
{
    wa__node_release(node_of(node));
}

WEFT_API const char *weft_node_name(const weft_node *node)
{
    return node ? node_of(node)->name : NULL;
}

WEFT_API int weft_node_num_outputs(const weft_node *node)
{
    return node ? node_of(node)->n_outputs : 0;
}

WEFT_API int weft_node_num_next(const weft_node *node)
{
    return node ? node_of(node)->n_edges : 0;
}

WEFT_API int weft_node_next(weft_node **out, int *input_nr, const weft_node *node, int i)
{
    if (out)
        *out = NULL;
    if (input_nr)
        *input_nr = 0;
    if (!out || !node)
        return wf__errorf(WEFT_EINVAL, "node_next: NULL argument");
    const wf_node *n = node_of(node);
    if (i < 0 || i >= n->n_edges)
        return wf__errorf(WEFT_EINVAL, "node_next: %s has %d next edges; index %d is out of range",
                          n->name, n->n_edges, i);
    wa__node_retain(n->edges[i].node);
    *out = (weft_node *)n->edges[i].node;
    if (input_nr)
        *input_nr = n->edges[i].input_nr;
    return 0;
}

static atomic_uint_fast64_t next_hook_handle = 1;

static int add_node_hook(wf_node_hook **list, weft_node_pre_hook_fn pre, weft_node_post_hook_fn post,
                         void *ctx, uint64_t *handle)
{
    wf_node_hook *h = wf__malloc(sizeof *h);
    if (!h)
        return wf__errorf(WEFT_ENOMEM, "out of memory registering a node hook");
    h->handle = atomic_fetch_add(&next_hook_handle, 1);
    h->pre = pre;
    h->post = post;
    h->ctx = ctx;
    h->next = NULL;
    while (*list)
        list = &(*list)->next;
    *list = h;
    if (handle)
        *handle = h->handle;
    return 0;
}

WEFT_API int weft_node_register_pre_hook(weft_node *node, weft_node_pre_hook_fn fn, void *ctx,
                                         uint64_t *handle)
{
    if (handle)
        *handle = 0;
    if (!node || !fn)
        return wf__errorf(WEFT_EINVAL, "node_register_pre_hook: NULL argument");
    return add_node_hook(&node_of(node)->node_pre_hooks, fn, NULL, ctx, handle);
}

WEFT_API int weft_node_register_post_hook(weft_node *node, weft_node_post_hook_fn fn, void *ctx,
                                          uint64_t *handle)
{
    if (handle)
        *handle = 0;
    if (!node || !fn)
        return wf__errorf(WEFT_EINVAL, "node_register_post_hook: NULL argument");
    return add_node_hook(&node_of(node)->post_hooks, NULL, fn, ctx, handle);
}

WEFT_API int weft_node_remove_hook(weft_node *node, uint64_t handle)
{
    if (!node)
        return wf__errorf(WEFT_EINVAL, "node_remove_hook: node is NULL");
    wf_node *n = node_of(node);
    wf_node_hook **lists[2] = {&n->node_pre_hooks, &n->post_hooks};
    for (int l = 0; l < 2; l++)
        for (wf_node_hook **h = lists[l]; *h; h = &(*h)->next)
            if ((*h)->handle == handle) {
                wf_node_hook *dead = *h;
                *h = dead->next;
                free(dead);
                return 0;
            }
    return wf__errorf(WEFT_EINVAL, "node_remove_hook: %s has no hook with handle %llu", n->name,
                      (unsigned long long)handle);
}
