/* autograd/engine.c — runs a backward pass: counts each node's incoming
 * edges from the roots, sums the gradients meeting at a node's output in a
 * buffer, and runs ready nodes newest first (highest sequence number).
 * Runs on the calling thread.  Without retain_graph a node frees its saved
 * tensors right after it runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "dispatch/dispatcher.h"

static atomic_uint_fast64_t next_task_id = 1;

typedef struct task {
    uint64_t id;
    wf_node **nodes; /* every node reachable from the roots */
    int n_nodes, cap_nodes;
    wf_node **heap;  /* ready nodes, max-heap on sequence_nr */
    int n_heap;
    /* torch.autograd.grad: capture the gradients arriving at these edges
     * instead of accumulating into leaves */
    int n_capture;
    wf_edge *capture;
    weft_tensor **captured;
} task;

static int add_node(task *t, wf_node *n)
{
    if (t->n_nodes == t->cap_nodes) {
        int cap = t->cap_nodes ? 2 * t->cap_nodes : 64;
        wf_node **g = wf__realloc(t->nodes, (size_t)cap * sizeof *g);
        if (!g)
            return wf__errorf(WEFT_ENOMEM, "backward: out of memory");
        t->nodes = g;
        t->cap_nodes = cap;
    }
    /* The buffer first: cleanup() reads the buffer of every linked node,
     * so a node must never be linked without one. */
    weft_tensor **buf = wf__calloc((size_t)(n->n_outputs > 0 ? n->n_outputs : 1), sizeof *buf);
    if (!buf)
        return wf__errorf(WEFT_ENOMEM, "backward: out of memory");
    n->buffer = buf;
    t->nodes[t->n_nodes++] = n;
    n->task_id = t->id;
    n->dependencies = 0;
    return 0;
}

/* Visits everything reachable from the roots and counts dependencies. */
static int discover(task *t, wf_node *const *roots, int n_roots)
{
    for (int i = 0; i < n_roots; i++)
        if (roots[i] && roots[i]->task_id != t->id) {
            int rc = add_node(t, roots[i]);
            if (rc < 0)
                return rc;
        }
    for (int k = 0; k < t->n_nodes; k++) { /* the list grows as we go: a BFS */
        wf_node *n = t->nodes[k];
        for (int e = 0; e < n->n_edges; e++) {
            wf_node *child = n->edges[e].node;
            if (!child)
                continue;
            if (child->task_id != t->id) {
                int rc = add_node(t, child);
                if (rc < 0)
                    return rc;
            }
            child->dependencies++;
        }
    }
    return 0;
}

static void heap_push(task *t, wf_node *n)
{
    int i = t->n_heap++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (t->heap[parent]->sequence_nr >= n->sequence_nr)
            break;
        t->heap[i] = t->heap[parent];
        i = parent;
    }
    t->heap[i] = n;
}

static wf_node *heap_pop(task *t)
{
    wf_node *top = t->heap[0], *last = t->heap[--t->n_heap];
    int i = 0;
    for (;;) {
        int child = 2 * i + 1;
        if (child >= t->n_heap)
            break;
        if (child + 1 < t->n_heap && t->heap[child + 1]->sequence_nr > t->heap[child]->sequence_nr)
            child++;
        if (t->heap[child]->sequence_nr <= last->sequence_nr)
            break;
        t->heap[i] = t->heap[child];
        i = child;
    }
    if (t->n_heap)
        t->heap[i] = last;
    return top;
}

/* Adds g (a reference this call consumes) into *slot. */
static int accumulate_into(weft_tensor **slot, weft_tensor *g)
{
    if (!g)
        return 0;
    if (!*slot) {
        *slot = g;
        return 0;
    }
    weft_tensor *sum;
    int rc = weft_add(&sum, *slot, g);
    weft_tensor_release(g);
    if (rc < 0)
        return rc;
    weft_tensor_release(*slot);
    *slot = sum;
    return 0;
}

static int run_hooks(wf_node *n)
{
    for (wf_hook *h = n->pre_hooks; h; h = h->next) {
        weft_tensor *g = n->buffer[h->output_nr];
        if (!g)
            continue;
        if (h->retain_target) {
            wf_autograd_meta *m = h->retain_target->autograd_meta;
            weft_tensor *copy;
            int rc = weft_detach(&copy, g);
            if (rc < 0)
                return rc;
            rc = accumulate_into(&m->grad, copy);
            if (rc < 0)
                return rc;
            continue;
        }
        weft_tensor *replace = NULL;
        int rc = h->fn(g, &replace, h->ctx);
        if (rc < 0)
            return rc;
        if (replace) {
            weft_tensor_release(n->buffer[h->output_nr]);
            n->buffer[h->output_nr] = replace;
        }
    }
    return 0;
}

/* A hook's error, with the node's name in front. */
static int hook_failed(const wf_node *n, int rc, const char *kind)
{
    char why[768];
    snprintf(why, sizeof why, "%s", weft_last_error());
    return wf__errorf(rc, "%s: %s hook failed: %s", n->name, kind, why);
}

/* Checks a hook's replacement against the gradient it replaces, then puts
 * it in *slot (consuming it). */
static int replace_grad(const wf_node *n, weft_tensor **slot, weft_tensor *r, const char *kind, int i)
{
    const weft_tensor *old = *slot;
    if (old && (old->ndim != r->ndim ||
                memcmp(old->sizes, r->sizes, (size_t)r->ndim * sizeof(int64_t)) != 0)) {
        char a[128], b[128];
        int rc = wf__errorf(WEFT_ESHAPE, "%s: %s hook replaced gradient %d of shape %s by one of shape %s",
                            n->name, kind, i, wf__shape_str(a, sizeof a, old->sizes, old->ndim),
                            wf__shape_str(b, sizeof b, r->sizes, r->ndim));
        weft_tensor_release(r);
        return rc;
    }
    weft_tensor_release(*slot);
    *slot = r;
    return 0;
}

/* Runs the hooks registered with weft_node_register_pre_hook (pre) or
 * _post_hook (grads_in non-NULL): each may replace gradients. */
static int run_node_hooks(wf_node *n, wf_node_hook *hooks, weft_tensor **grads_in)
{
    int n_grads = grads_in ? n->n_edges : n->n_outputs;
    weft_tensor **target = grads_in ? grads_in : n->buffer;
    const char *kind = grads_in ? "post" : "pre";
    for (wf_node_hook *h = hooks; h; h = h->next) {
        weft_tensor *stack_replace[8];
        weft_tensor **replace = n_grads <= 8 ? stack_replace : wf__calloc((size_t)n_grads, sizeof *replace);
        if (!replace)
            return wf__errorf(WEFT_ENOMEM, "backward: out of memory");
        for (int i = 0; i < n_grads; i++)
            replace[i] = NULL;
        int rc = grads_in ? h->post((const weft_tensor *const *)grads_in, n_grads,
                                    (const weft_tensor *const *)n->buffer, n->n_outputs, replace, h->ctx)
                          : h->pre((const weft_tensor *const *)n->buffer, n_grads, replace, h->ctx);
        if (rc < 0)
            rc = hook_failed(n, rc, kind);
        for (int i = 0; i < n_grads; i++) {
            if (replace[i] && rc == 0)
                rc = replace_grad(n, &target[i], replace[i], kind, i);
            else
                weft_tensor_release(replace[i]);
        }
        if (replace != stack_replace)
            free(replace);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int capture_index(const task *t, const wf_node *n, int output_nr)
{
    for (int i = 0; i < t->n_capture; i++)
        if (t->capture[i].node == n && t->capture[i].input_nr == output_nr)
            return i;
    return -1;
}

static int run_node(task *t, wf_node *n, bool retain_graph)
{
    int rc = run_hooks(n);
    if (rc == 0 && n->node_pre_hooks)
        rc = run_node_hooks(n, n->node_pre_hooks, NULL);
    if (rc < 0)
        return rc;
    if (t->n_capture) {
        for (int o = 0; o < n->n_outputs; o++) {
            int c = capture_index(t, n, o);
            if (c >= 0 && n->buffer[o])
                t->captured[c] = weft_tensor_retain(n->buffer[o]);
        }
        if (n->backward == NULL || n->leaf || strcmp(n->name, "AccumulateGrad") == 0)
            return 0; /* grad() never touches a leaf's grad */
    }
    bool any = false;
    for (int o = 0; o < n->n_outputs; o++)
        any |= n->buffer[o] != NULL;
    weft_tensor *stack_grads[8];
    weft_tensor **grads_in = n->n_edges <= 8 ? stack_grads : wf__calloc((size_t)n->n_edges, sizeof *grads_in);
    if (!grads_in)
        return wf__errorf(WEFT_ENOMEM, "backward: out of memory");
    for (int e = 0; e < n->n_edges; e++)
        grads_in[e] = NULL;
    if (any) {
        const wa_profiler_hooks *ph =
            atomic_load_explicit(&wa__profiler_hooks, memory_order_relaxed);
        void *token = ph ? ph->node_begin(n) : NULL;
        rc = n->backward(n, n->buffer, grads_in);
        if (ph)
            ph->node_end(token);
        wa__node_drop_unpacked(n);
        if (rc == 0 && n->post_hooks)
            rc = run_node_hooks(n, n->post_hooks, grads_in);
    }
    for (int e = 0; e < n->n_edges && rc == 0; e++) {
        wf_node *child = n->edges[e].node;
        if (!child) {
            weft_tensor_release(grads_in[e]);
            grads_in[e] = NULL;
            continue;
        }
        rc = accumulate_into(&child->buffer[n->edges[e].input_nr], grads_in[e]);
        grads_in[e] = NULL;
        if (--child->dependencies == 0)
            heap_push(t, child);
    }
    for (int e = 0; e < n->n_edges; e++)
        weft_tensor_release(grads_in[e]);
    if (grads_in != stack_grads)
        free(grads_in);
    if (rc == 0 && !retain_graph) {
        for (int i = 0; i < n->n_saved; i++) {
            weft_tensor_release(n->saved[i].tensor);
            n->saved[i].tensor = NULL;
        }
        if (n->n_saved)
            n->released = true;
        if (n->ctx_release_saved)
            n->ctx_release_saved(n->ctx);
    }
    return rc;
}

static void cleanup(task *t)
{
    for (int k = 0; k < t->n_nodes; k++) {
        wf_node *n = t->nodes[k];
        for (int o = 0; o < (n->n_outputs > 0 ? n->n_outputs : 1); o++)
            weft_tensor_release(n->buffer[o]);
        free(n->buffer);
        n->buffer = NULL;
        n->dependencies = 0;
    }
    free(t->nodes);
    free(t->heap);
}

static int run_backward(weft_tensor *const *outputs, int n, weft_tensor *const *grad_outputs,
                        bool retain_graph, bool create_graph, task *t)
{
    if (!outputs || n <= 0)
        return wf__errorf(WEFT_EINVAL, "backward: no outputs given");
    wf_edge *roots = wf__calloc((size_t)n, sizeof *roots);
    wf_node **root_nodes = wf__calloc((size_t)n, sizeof *root_nodes);
    weft_tensor **root_grads = wf__calloc((size_t)n, sizeof *root_grads);
    int rc = roots && root_nodes && root_grads ? 0 : wf__errorf(WEFT_ENOMEM, "backward: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        weft_tensor *o = outputs[i];
        if (!o) {
            rc = wf__errorf(WEFT_EINVAL, "backward: output %d is NULL", i);
        } else if (!wa__requires_grad(o)) {
            rc = wf__errorf(WEFT_EINVAL,
                            "backward: element %d of tensors does not require grad and does not "
                            "have a grad_fn",
                            i);
        } else if (grad_outputs && grad_outputs[i]) {
            const weft_tensor *g = grad_outputs[i];
            if (g->ndim != o->ndim || memcmp(g->sizes, o->sizes, (size_t)o->ndim * sizeof(int64_t))) {
                char a[128], b[128];
                rc = wf__errorf(WEFT_ESHAPE,
                                "backward: mismatch in shape: grad_output[%d] has a shape of %s and "
                                "output[%d] has a shape of %s",
                                i, wf__shape_str(a, sizeof a, g->sizes, g->ndim), i,
                                wf__shape_str(b, sizeof b, o->sizes, o->ndim));
            } else {
                root_grads[i] = weft_tensor_retain(g);
            }
        } else if (o->numel != 1) {
            rc = wf__errorf(WEFT_EINVAL,
                            "backward: grad can be implicitly created only for scalar outputs "
                            "(output %d has %lld elements)",
                            i, (long long)o->numel);
        } else {
            rc = weft_ones(&root_grads[i], o->sizes, o->ndim, (weft_dtype)o->dtype, o->device);
        }
        if (rc == 0)
            rc = wa__edge_of(&roots[i], o);
        root_nodes[i] = roots[i].node;
    }
    t->id = atomic_fetch_add(&next_task_id, 1);
    if (rc == 0)
        rc = discover(t, root_nodes, n);
    if (rc == 0 && !(t->heap = wf__malloc((size_t)(t->n_nodes ? t->n_nodes : 1) * sizeof *t->heap)))
        rc = wf__errorf(WEFT_ENOMEM, "backward: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        rc = accumulate_into(&roots[i].node->buffer[roots[i].input_nr], root_grads[i]);
        root_grads[i] = NULL;
    }
    for (int k = 0; k < t->n_nodes && rc == 0; k++)
        if (t->nodes[k]->dependencies == 0)
            heap_push(t, t->nodes[k]);
    /* the backward formulas record a graph only for create_graph */
    weft_keyset excluded = wd__tls_excluded;
    if (create_graph)
        wd__tls_excluded &= ~WF_AUTOGRAD_KEYS;
    else
        wd__tls_excluded |= WF_AUTOGRAD_KEYS;
    while (rc == 0 && t->n_heap)
        rc = run_node(t, heap_pop(t), retain_graph);
    wd__tls_excluded = excluded;
    cleanup(t);
    for (int i = 0; i < n; i++) {
        if (roots)
            wa__node_release(roots[i].node);
        if (root_grads)
            weft_tensor_release(root_grads[i]);
    }
    free(roots);
    free(root_nodes);
    free(root_grads);
    return rc;
}

WEFT_API int weft_backward(weft_tensor *const *outputs, int n, weft_tensor *const *grad_outputs,
                           bool retain_graph, bool create_graph)
{
    task t = {0};
    return run_backward(outputs, n, grad_outputs, retain_graph || create_graph, create_graph, &t);
}

WEFT_API int weft_autograd_grad(weft_tensor **grads, weft_tensor *const *outputs, int n,
                                weft_tensor *const *grad_outputs, weft_tensor *const *inputs,
                                int ninputs, bool retain_graph, bool create_graph,
                                bool allow_unused)
{
    if (!grads || !inputs || ninputs <= 0)
        return wf__errorf(WEFT_EINVAL, "autograd_grad: no inputs given");
    for (int i = 0; i < ninputs; i++)
        grads[i] = NULL;
    task t = {0};
    t.n_capture = ninputs;
    t.capture = wf__calloc((size_t)ninputs, sizeof *t.capture);
    t.captured = grads;
    if (!t.capture)
        return wf__errorf(WEFT_ENOMEM, "autograd_grad: out of memory");
    int rc = 0;
    for (int i = 0; i < ninputs && rc == 0; i++) {
        if (!inputs[i] || !wa__requires_grad(inputs[i]))
            rc = wf__errorf(WEFT_EINVAL, "autograd_grad: input %d does not require grad", i);
        else
            rc = wa__edge_of(&t.capture[i], inputs[i]);
    }
    if (rc == 0)
        rc = run_backward(outputs, n, grad_outputs, retain_graph || create_graph, create_graph, &t);
    for (int i = 0; i < ninputs && rc == 0; i++)
        if (!grads[i] && !allow_unused)
            rc = wf__errorf(WEFT_EINVAL,
                            "autograd_grad: input %d is not used in the graph (pass "
                            "allow_unused=true to get NULL for it)",
                            i);
    for (int i = 0; i < ninputs; i++)
        wa__node_release(t.capture[i].node);
    free(t.capture);
    if (rc < 0)
        for (int i = 0; i < ninputs; i++) {
            weft_tensor_release(grads[i]);
            grads[i] = NULL;
        }
    return rc;
}
