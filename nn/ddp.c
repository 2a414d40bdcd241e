/* nn/ddp.c — data-parallel training (torch's DistributedDataParallel) on
 * the public API: process groups from <weft/distributed.h>, gradient hooks
 * from autograd, modules from <weft/nn.h>.  Gradients are bucketed and
 * all-reduced from the hooks while backward goes on. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/distributed.h>
#include <weft/nn.h>
#include <weft/plugin.h>

#define DEFAULT_BUCKET_BYTES (25 << 20)

/* What a parameter's hook holds: shared by the hook and the weft_ddp, so
 * that either may go first (a hook outlives the ddp when the module does;
 * the ddp then clears `ddp` and the hook does nothing). */
typedef struct hook_slot {
    _Atomic int refs;
    weft_ddp *ddp;
    int index;
} hook_slot;

typedef struct bucket {
    weft_tensor *flat; /* the gradients of its parameters, end to end */
    int n_params, n_ready;
    weft_work *work; /* the all_reduce in flight */
    bool done;       /* a test saw it end (or fail): no more tests */
} bucket;

struct weft_ddp {
    weft_process_group *group;
    int n;
    weft_tensor **params; /* borrowed from the module */
    const char **names;
    hook_slot **slots;
    int *bucket_of;
    int64_t *offset; /* element offset in the bucket */
    char *ready;     /* got its gradient in this backward */
    bucket *buckets;
    int n_buckets;
    bool sync;
    int hook_error;
};

static void slot_release(void *p)
{
    hook_slot *s = p;
    if (atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

/* The bucket's view of parameter i, shaped like it. */
static int slot_view(weft_tensor **out, weft_ddp *d, int i)
{
    weft_tensor *chunk = NULL;
    const weft_tensor *p = d->params[i];
    int rc = weft_narrow(&chunk, d->buckets[d->bucket_of[i]].flat, 0, d->offset[i],
                         weft_tensor_numel(p));
    if (rc == 0)
        rc = weft_view(out, chunk, weft_tensor_sizes(p), weft_tensor_ndim(p));
    weft_tensor_release(chunk);
    return rc;
}

/* Moves the buckets in flight on: a backend that advances its transfers
 * only when asked (the MPI plugin's shared-memory path between the ranks of
 * one node) would otherwise do all of a pass's communication in
 * reset_pass's waits, after backward, instead of between its kernels.  A
 * test is cheap (a lock and a poll); its error, if any, is the one the
 * wait reports. */
static void advance_buckets(weft_ddp *d)
{
    for (int b = 0; b < d->n_buckets; b++)
        if (d->buckets[b].work && !d->buckets[b].done)
            d->buckets[b].done = weft_work_test(d->buckets[b].work) != 0;
}

/* Backward reached parameter i with grad (before it is accumulated into
 * .grad): the bucket gets grad plus what .grad already holds (so gradients
 * accumulated under no_sync are reduced too); a full bucket starts. */
static int on_grad(const weft_tensor *grad, weft_tensor **replace, void *ctx)
{
    hook_slot *s = ctx;
    weft_ddp *d = s->ddp;
    if (!d || !d->sync)
        return 0;
    int i = s->index;
    if (d->ready[i])
        return 0; /* a second gradient in one pass (a parameter used twice): it accumulated */
    advance_buckets(d);
    bool grad_mode = weft_set_grad_enabled(false);
    weft_tensor *view = NULL, *acc = NULL;
    int rc = slot_view(&view, d, i);
    if (rc == 0)
        rc = weft_copy_(view, grad);
    if (rc == 0)
        rc = weft_tensor_grad(&acc, d->params[i]);
    if (rc == 0 && acc)
        rc = weft_add_(view, acc);
    weft_tensor_release(acc);
    weft_tensor_release(view);
    weft_set_grad_enabled(grad_mode);
    if (rc < 0) {
        d->hook_error = rc;
        return rc;
    }
    d->ready[i] = 1;
    bucket *b = &d->buckets[d->bucket_of[i]];
    if (++b->n_ready == b->n_params) {
        rc = weft_dist_all_reduce(d->group, b->flat, WEFT_REDUCE_AVG, &b->work);
        if (rc < 0)
            d->hook_error = rc;
    }
    return rc;
}

static void ddp_free(weft_ddp *d)
{
    for (int i = 0; d->slots && i < d->n; i++)
        if (d->slots[i]) {
            d->slots[i]->ddp = NULL;
            slot_release(d->slots[i]);
        }
    for (int b = 0; d->buckets && b < d->n_buckets; b++) {
        weft_work_free(d->buckets[b].work);
        weft_tensor_release(d->buckets[b].flat);
    }
    free(d->buckets);
    free(d->slots);
    free(d->bucket_of);
    free(d->offset);
    free(d->ready);
    free(d->params);
    free(d->names);
    free(d);
}

/* Rank 0's parameters and buffers everywhere, so that replicas start equal. */
static int broadcast_state(weft_module *m, weft_process_group *g)
{
    int n = weft_module_state(m, NULL, NULL, 0);
    if (n < 0)
        return n;
    weft_tensor **t = calloc((size_t)(n ? n : 1), sizeof *t);
    const char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    if (!t || !names) {
        free(t);
        free(names);
        return weft_set_error(WEFT_ENOMEM, "ddp_new: out of memory");
    }
    int rc = weft_module_state(m, t, names, n);
    bool grad_mode = weft_set_grad_enabled(false);
    for (int i = 0; rc >= 0 && i < n; i++)
        rc = weft_dist_broadcast(g, t[i], 0, NULL);
    weft_set_grad_enabled(grad_mode);
    free(t);
    free(names);
    return rc < 0 ? rc : 0;
}

int weft_ddp_new(weft_ddp **out, weft_module *module, weft_process_group *group, int64_t bucket_bytes)
{
    if (!out || !module || !group)
        return weft_set_error(WEFT_EINVAL, "ddp_new: NULL argument");
    *out = NULL;
    if (weft_dist_rank(group) < 0)
        return weft_set_error(WEFT_EINVAL, "ddp_new: this process is not a member of %s",
                              weft_dist_group_name(group));
    if (bucket_bytes <= 0)
        bucket_bytes = DEFAULT_BUCKET_BYTES;
    int n = weft_module_parameters(module, NULL, NULL, 0);
    if (n < 0)
        return n;
    if (n == 0)
        return weft_set_error(WEFT_EINVAL, "ddp_new: the module has no parameters");
    weft_ddp *d = calloc(1, sizeof *d);
    if (!d)
        return weft_set_error(WEFT_ENOMEM, "ddp_new: out of memory");
    d->group = group;
    d->n = n;
    d->sync = true;
    d->params = calloc((size_t)n, sizeof *d->params);
    d->names = calloc((size_t)n, sizeof *d->names);
    d->slots = calloc((size_t)n, sizeof *d->slots);
    d->bucket_of = calloc((size_t)n, sizeof *d->bucket_of);
    d->offset = calloc((size_t)n, sizeof *d->offset);
    d->ready = calloc((size_t)n, 1);
    d->buckets = calloc((size_t)n, sizeof *d->buckets);
    int rc;
    if (!d->params || !d->names || !d->slots || !d->bucket_of || !d->offset || !d->ready ||
        !d->buckets) {
        rc = weft_set_error(WEFT_ENOMEM, "ddp_new: out of memory");
        goto fail;
    }
    if ((rc = weft_module_parameters(module, d->params, d->names, n)) < 0)
        goto fail;
    /* buckets in reverse registration order: backward meets the last
     * layer's parameters first, so the first bucket fills first */
    int64_t bytes = 0, elems = 0;
    weft_dtype dtype = WEFT_DTYPE_UNSET;
    for (int i = n - 1; i >= 0; i--) {
        weft_tensor *p = d->params[i];
        if (!weft_tensor_requires_grad(p)) {
            rc = weft_set_error(WEFT_EINVAL, "ddp_new: parameter %s does not require grad",
                                d->names[i]);
            goto fail;
        }
        /* one device: a bucket lives on it, and the collectives stage it */
        if (!weft_device_equal(weft_tensor_device(p), weft_tensor_device(d->params[n - 1]))) {
            rc = weft_set_error(WEFT_EDEVICE, "ddp_new: parameter %s is on another device than %s",
                                d->names[i], d->names[n - 1]);
            goto fail;
        }
        int64_t pb = weft_tensor_numel(p) * (int64_t)weft_dtype_size(weft_tensor_dtype(p));
        if (d->n_buckets == 0 || weft_tensor_dtype(p) != dtype || (bytes + pb > bucket_bytes && bytes > 0)) {
            d->n_buckets++;
            bytes = elems = 0;
            dtype = weft_tensor_dtype(p);
        }
        d->bucket_of[i] = d->n_buckets - 1;
        d->buckets[d->n_buckets - 1].n_params++;
        bytes += pb;
        elems += weft_tensor_numel(p);
        d->offset[i] = elems - weft_tensor_numel(p);
    }
    for (int b = 0; b < d->n_buckets; b++) {
        int64_t count = 0;
        for (int i = 0; i < n; i++)
            if (d->bucket_of[i] == b && d->offset[i] + weft_tensor_numel(d->params[i]) > count)
                count = d->offset[i] + weft_tensor_numel(d->params[i]);
        int first = -1;
        for (int i = 0; i < n && first < 0; i++)
            if (d->bucket_of[i] == b)
                first = i;
        if ((rc = weft_zeros(&d->buckets[b].flat, &count, 1, weft_tensor_dtype(d->params[first]),
                             weft_tensor_device(d->params[first]))) < 0)
            goto fail;
    }
    if ((rc = broadcast_state(module, group)) < 0)
        goto fail;
    for (int i = 0; i < n; i++) {
        hook_slot *s = calloc(1, sizeof *s);
        if (!s) {
            rc = weft_set_error(WEFT_ENOMEM, "ddp_new: out of memory");
            goto fail;
        }
        s->ddp = d;
        s->index = i;
        atomic_store(&s->refs, 2); /* the hook's and the ddp's */
        if ((rc = weft_tensor_register_hook_ex(d->params[i], on_grad, s, slot_release)) < 0) {
            free(s);
            goto fail;
        }
        d->slots[i] = s;
    }
    *out = d;
    return 0;
fail:
    ddp_free(d);
    return rc;
}

bool weft_ddp_set_sync(weft_ddp *ddp, bool sync)
{
    if (!ddp)
        return false;
    bool old = ddp->sync;
    ddp->sync = sync;
    return old;
}

int weft_ddp_num_buckets(const weft_ddp *ddp)
{
    return ddp ? ddp->n_buckets : 0;
}

/* Clears the pass: waits for buckets in flight (their tensors must not be
 * written under a later pass) and marks everything not ready. */
static int reset_pass(weft_ddp *d)
{
    int rc = 0;
    for (int b = 0; b < d->n_buckets; b++) {
        if (d->buckets[b].work) {
            int w = weft_work_wait(d->buckets[b].work);
            if (w < 0 && rc == 0)
                rc = w;
            weft_work_free(d->buckets[b].work);
            d->buckets[b].work = NULL;
            d->buckets[b].done = false;
        }
        d->buckets[b].n_ready = 0;
    }
    memset(d->ready, 0, (size_t)d->n);
    d->hook_error = 0;
    return rc;
}

int weft_ddp_finish(weft_ddp *d)
{
    if (!d)
        return weft_set_error(WEFT_EINVAL, "ddp_finish: NULL ddp");
    if (!d->sync)
        return 0;
    for (int i = 0; i < d->n; i++)
        if (!d->ready[i]) {
            int any = 0;
            for (int k = 0; k < d->n; k++)
                any |= d->ready[k];
            reset_pass(d);
            if (!any)
                return weft_set_error(WEFT_EINVAL, "ddp_finish: no parameter received a gradient: "
                                                   "call it after backward");
            return weft_set_error(WEFT_EINVAL,
                                  "ddp_finish: parameter %s received no gradient in this backward; "
                                  "every parameter must take part in the loss on every rank (or "
                                  "leave it out of the module)",
                                  d->names[i]);
        }
    int rc = reset_pass(d);
    if (rc < 0)
        return rc;
    bool grad_mode = weft_set_grad_enabled(false);
    for (int i = 0; rc == 0 && i < d->n; i++) {
        weft_tensor *view = NULL, *g = NULL;
        rc = slot_view(&view, d, i);
        if (rc == 0)
            rc = weft_tensor_grad(&g, d->params[i]);
        if (rc == 0 && g)
            rc = weft_copy_(g, view);
        weft_tensor_release(g);
        weft_tensor_release(view);
    }
    weft_set_grad_enabled(grad_mode);
    return rc;
}

void weft_ddp_destroy(weft_ddp *d)
{
    if (d)
        ddp_free(d);
}
