/* autograd/autograd.h — internal: graph nodes, saved tensors, per-tensor
 * autograd metadata, and the hooks the core calls (views, release).
 * Only tensors that require grad or have a grad_fn carry the Autograd key,
 * so nothing here runs for inference. */
#ifndef WF_AUTOGRAD_H
#define WF_AUTOGRAD_H

#include <stdatomic.h>

#include "c10/core.h"

typedef struct wf_node wf_node;

/* An edge of the graph: the gradient for input `input_nr` of `node`. */
typedef struct wf_edge {
    wf_node *node; /* strong reference, or NULL: that input needs no gradient */
    int input_nr;
} wf_edge;

/* A tensor saved for backward, with the version it had when saved. */
typedef struct wf_saved {
    weft_tensor *tensor; /* an input itself, or a detached alias of the node's output */
    uint32_t version;
    bool was_output;
    bool after_write;       /* an in-place operator's result, saved after its write */
    int output_nr;          /* which output of the node, when was_output */
    weft_tensor *unpacked;  /* create_graph: the output re-attached to the node
                             * (a cycle through the node, broken when it has run) */
} wf_saved;

/* Computes gradients of the node's inputs (grads_in, n_edges of them, NULL
 * meaning zero/none) from the gradients of its outputs (grads_out,
 * n_outputs of them; NULL meaning zero).  Returns 0 or a WEFT_E* code. */
typedef int (*wf_backward_fn)(wf_node *node, weft_tensor **grads_out, weft_tensor **grads_in);

/* A hook on the gradient of one output of a node: a tensor hook, or the
 * retain_grad of a non-leaf (retain_target, cleared when that tensor dies). */
typedef struct wf_hook {
    weft_grad_hook_fn fn;
    void *ctx;
    void (*destroy)(void *ctx); /* called with ctx when the hook is freed (NULL: none) */
    int output_nr;
    weft_tensor *retain_target;
    struct wf_hook *next;
} wf_hook;

struct wf_node {
    atomic_int refcount;
    const char *name;       /* "MulBackward": names the operator in errors */
    wf_backward_fn backward;
    uint64_t sequence_nr;   /* creation order: later nodes run first */
    int n_outputs;
    int n_edges;
    wf_edge *edges;         /* one per differentiable input */
    int n_saved;
    wf_saved *saved;
    bool released;          /* saved tensors freed after a backward */
    /* what the formula needs of the call: a scalar argument, a flag, and
     * integers (input shapes, dims) packed by the formula that recorded it */
    double scalar;
    bool flag;
    int n_info;
    int64_t *info;
    struct weft_tensor *leaf; /* AccumulateGrad: the leaf (weak, cleared when it dies) */
    wf_hook *pre_hooks;       /* on the gradients of the node's outputs */
    struct wf_node_hook *node_pre_hooks;  /* weft_node_register_pre_hook */
    struct wf_node_hook *post_hooks;      /* weft_node_register_post_hook */
    void *ctx;                /* what the backward function needs beyond the
                               * fields above (custom functions), freed with the node */
    void (*ctx_free)(void *ctx);
    /* frees what ctx keeps for backward, when a backward without
     * retain_graph has run the node (CopySlices: its operator's saved tensors) */
    void (*ctx_release_saved)(void *ctx);
    wf_node *next_dead;       /* work list while being freed */
    /* engine state during one backward pass */
    int dependencies;
    uint64_t task_id;         /* which backward pass last visited it */
    weft_tensor **buffer;     /* n_outputs gradients being summed */
};

typedef struct wf_autograd_meta {
    bool requires_grad; /* a leaf that wants a gradient */
    bool retains_grad;
    weft_tensor *grad;
    wf_node *grad_fn;   /* strong: the node that produced this tensor */
    int output_nr;
    wf_node *accumulator; /* a leaf's AccumulateGrad node (strong; its leaf pointer is weak) */
    /* views: the version at which grad_fn was last set, so that a write to
     * the base (or another view of it) since is seen and grad_fn taken again
     * from the base; and whether the view was taken in no-grad mode from a
     * tensor that requires grad (an in-place write to it is then refused) */
    uint32_t attr_version;
    bool no_grad_view;
} wf_autograd_meta;

/* A hook on a whole node (weft_node_register_pre_hook / _post_hook). */
typedef struct wf_node_hook {
    uint64_t handle;
    weft_node_pre_hook_fn pre;
    weft_node_post_hook_fn post;
    void *ctx;
    struct wf_node_hook *next;
} wf_node_hook;

/* Lifecycle: called by weft_tensor_release before freeing. */
void wa__autograd_meta_free(weft_tensor *t);

/* Nodes. */
wf_node *wa__node_new(const char *name, wf_backward_fn backward, int n_edges, int n_outputs);
void wa__node_retain(wf_node *n);
void wa__node_release(wf_node *n);
/* Copies count integers into the node's info (a record's shapes, dims,
 * flags); WEFT_ENOMEM leaves the node without info. */
int wa__node_set_info(wf_node *n, const int64_t *info, int count);
/* Saves t for backward; output is the node's output (saved detached). */
int wa__node_save(wf_node *n, int slot, const weft_tensor *t, const weft_tensor *output);
/* Saves t, output number output_nr of the node (kept detached). */
int wa__node_save_output(wf_node *n, int slot, const weft_tensor *t, int output_nr);
/* The saved tensor, checked against its version; NULL with an error set.
 * A saved output read with grad mode on (create_graph) comes back with the
 * node as its grad_fn, so the formula's own graph reaches the node's
 * inputs through it (borrowed until the node has run). */
weft_tensor *wa__node_saved(wf_node *n, int slot);
/* Drops the re-attached outputs of wa__node_saved (the engine, after the
 * node ran). */
void wa__node_drop_unpacked(wf_node *n);

/* Whether t takes part in autograd (requires grad, or has a grad_fn). */
static inline bool wa__requires_grad(const weft_tensor *t)
{
    return t && (t->keys & WF_AUTOGRAD_KEYS);
}

bool wa__grad_enabled(void);
/* The edge a gradient for t flows along: its grad_fn, or its leaf
 * accumulator, or none. */
int wa__edge_of(wf_edge *edge, weft_tensor *t);
/* Makes t an output of node (output_nr), giving it the Autograd key. */
int wa__set_history(weft_tensor *t, wf_node *node, int output_nr);

/* Views: records how out was viewed from src (c10 has set is_view and
 * view_base already).  Installed as wf__autograd_hooks.on_view. */
int wa__autograd_view(weft_tensor *out, const weft_tensor *src, wf_view_kind kind,
                      const int64_t *dims, int ndims);
/* A view whose base's history changed since its grad_fn was set (an
 * in-place write through the base or another view) takes its grad_fn again,
 * as a strided view of the base.  Called wherever grad_fn is read. */
int wa__view_refresh(weft_tensor *t);
/* Registers the ADInplaceOrView key's kernel (autograd/views.c). */
int wa__inplace_or_view_register(void);
/* The Autograd kernel's part for an in-place operator on a view: checks
 * that it may be differentiated (before the write), ... */
int wa__view_inplace_check(weft_tensor *view, const char *op);
/* ... and, after the write, gives the base the history of the write
 * (CopySlices: fn, the operator's node, applied to the view's slice of the
 * base's gradient; fn's edge 0 is the view's old value when self_edge) and
 * the view a strided view of the base's new history. */
int wa__view_rebase(weft_tensor *view, wf_node *fn, bool self_edge);

/* out is a copy of src converted to out's dtype (contiguous, to_dtype). */
int wa__autograd_copy(weft_tensor *out, const weft_tensor *src);

/* Sums grad down to sizes (reverses broadcasting); a new reference. */
int wa__sum_to(weft_tensor **out, weft_tensor *grad, const int64_t *sizes, int ndim);

void wa__autograd_register(void);

/* The profiler above (profiler/) stores this table while some thread
 * profiles and NULL otherwise, so autograd pays one relaxed load and a
 * predicted branch per node made or run when nobody profiles.
 * node_made: n was just made by the calling thread (inside the operator
 * whose Autograd kernel records it), which links n's sequence number to
 * that operator.  node_begin/node_end bracket n's backward function in the
 * engine (the token goes from one to the other). */
typedef struct wa_profiler_hooks {
    void (*node_made)(const wf_node *n);
    void *(*node_begin)(const wf_node *n);
    void (*node_end)(void *token);
} wa_profiler_hooks;
extern _Atomic(const wa_profiler_hooks *) wa__profiler_hooks;

#endif
