/* distributed/collectives.c — the public collectives: check the arguments,
 * stage what is not contiguous, describe the transfer for the backend and
 * hand the work to work.c.  A rank whose arguments are wrong still takes
 * part in the agreement step (with its refusal), so the other ranks fail
 * with it instead of waiting for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/work.h"

/* The first error of a call's own checks; later ones are ignored. */
static int refuse(weft_work *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(weft_work *w, int code, const char *fmt, ...)
{
    if (w->refuse)
        return w->refuse;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->message, sizeof w->message, fmt, ap);
    va_end(ap);
    snprintf(w->mine.reason, sizeof w->mine.reason, "%.199s", w->message);
    w->mine.status = code;
    w->refuse = code;
    return code;
}

static const char *what(const weft_work *w)
{
    return wdist__kind_name(w->desc.kind);
}

/* A tensor a collective may take: strided, on the CPU, of the call's dtype
 * (the first tensor checked sets it). */
static int check_tensor(weft_work *w, const weft_tensor *t, const char *role)
{
    if (!t)
        return refuse(w, WEFT_EINVAL, "%s: NULL %s", what(w), role);
    if (weft_tensor_layout(t) != WEFT_LAYOUT_STRIDED)
        return refuse(w, WEFT_EINVAL, "%s: %s is a %s tensor; collectives take strided tensors",
                      what(w), role, weft_layout_name(weft_tensor_layout(t)));
    /* one device per call; a device other than the host's is staged
     * through host memory when the backend moves host buffers, while a
     * device backend (nccl) takes its own device's tensors and no other */
    weft_device dev = weft_tensor_device(t);
    int backend_type = wdist__backend_device_type();
    if (backend_type != WEFT_DEVICE_TYPE_CPU && dev.type != backend_type) {
        char a[32];
        weft_device_to_string(dev, a, sizeof a);
        return refuse(w, WEFT_EDEVICE,
                      "%s: %s is on %s, but backend %s moves only %s tensors (move it with "
                      "weft_to_device first)",
                      what(w), role, a, wdist__state.backend->name,
                      weft_device_type_name(backend_type));
    }
    if (w->device.type < 0) {
        w->device = dev;
    } else if (!weft_device_equal(dev, w->device)) {
        char a[32], b[32];
        weft_device_to_string(dev, a, sizeof a);
        weft_device_to_string(w->device, b, sizeof b);
        return refuse(w, WEFT_EDEVICE, "%s: %s is on %s but the call's tensors are on %s", what(w),
                      role, a, b);
    }
    weft_dtype dt = weft_tensor_dtype(t);
    if (w->mine.dtype < 0)
        w->mine.dtype = dt;
    else if (dt != w->mine.dtype)
        return refuse(w, WEFT_EDTYPE, "%s: %s is %s but the call's tensors are %s", what(w), role,
                      weft_dtype_name(dt), weft_dtype_name((weft_dtype)w->mine.dtype));
    return 0;
}

static int check_list(weft_work *w, weft_tensor *const *list, int64_t count, const char *role)
{
    if (!list)
        return refuse(w, WEFT_EINVAL, "%s: NULL %s list", what(w), role);
    for (int i = 0; i < w->group->size; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s[%d]", role, i);
        int rc = check_tensor(w, list[i], name);
        if (rc < 0)
            return rc;
        if (weft_tensor_numel(list[i]) != count)
            return refuse(w, WEFT_ESHAPE, "%s: %s has %lld elements, expected %lld", what(w), name,
                          (long long)weft_tensor_numel(list[i]), (long long)count);
    }
    return 0;
}

static int check_reduction(weft_work *w, weft_reduce_op op)
{
    if ((int)op < 0 || op >= WEFT_REDUCE_NUM_OPS)
        return refuse(w, WEFT_EINVAL, "%s: unknown reduction %d", what(w), (int)op);
    w->mine.op = op;
    if (w->mine.dtype < 0)
        return 0;
    weft_dtype dt = (weft_dtype)w->mine.dtype;
    if ((op == WEFT_REDUCE_MAX || op == WEFT_REDUCE_MIN) && weft_dtype_is_complex(dt))
        return refuse(w, WEFT_EDTYPE, "%s: %s is not defined for %s (complex numbers have no order)",
                      what(w), weft_reduce_op_name(op), weft_dtype_name(dt));
    if (op == WEFT_REDUCE_AVG && !weft_dtype_is_floating(dt) && !weft_dtype_is_complex(dt))
        return refuse(w, WEFT_EDTYPE, "%s: avg needs a floating or complex dtype, not %s "
                                      "(sum, then divide as your integers need)",
                      what(w), weft_dtype_name(dt));
    return 0;
}

static int check_rank(weft_work *w, int rank, const char *role)
{
    if (rank < 0 || rank >= w->group->size)
        return refuse(w, WEFT_EINVAL, "%s: %s rank %d is outside %s (ranks 0..%d)", what(w), role,
                      rank, w->group->name, w->group->size - 1);
    return 0;
}

static int staging_failed(weft_work *w, int rc)
{
    return refuse(w, rc, "%s: staging the tensors: %s", what(w), weft_last_error());
}

/* Where the backend's buffers live: the call's device when the backend
 * moves that device's memory itself, else host memory. */
static weft_device stage_device(const weft_work *w)
{
    if (w->device.type >= 0 && w->device.type != WEFT_DEVICE_TYPE_CPU &&
        w->device.type == wdist__backend_device_type())
        return w->device;
    return WEFT_DEVICE_CPU;
}

/* result = t when it is contiguous (the backend writes it directly), else
 * a contiguous tensor of its shape, copied back into t at the end; with
 * copy_in its elements are copied first (in-place collectives). */
static int stage_result(weft_work *w, weft_tensor *t, bool copy_in, bool copy_back)
{
    int rc;
    weft_device at = stage_device(w);
    if (!weft_device_equal(weft_tensor_device(t), at)) {
        rc = copy_in ? weft_to_device(&w->result, t, at)
                     : weft_empty(&w->result, weft_tensor_sizes(t), weft_tensor_ndim(t),
                                  weft_tensor_dtype(t), at);
        if (rc == 0 && !weft_tensor_is_contiguous(w->result)) {
            weft_tensor *c = NULL;
            rc = weft_contiguous(&c, w->result);
            weft_tensor_release(w->result);
            w->result = c;
        }
        if (rc < 0)
            return staging_failed(w, rc);
        if (copy_back)
            w->dest = weft_tensor_retain(t);
    } else if (weft_tensor_is_contiguous(t)) {
        w->result = weft_tensor_retain(t);
    } else {
        rc = copy_in ? weft_contiguous(&w->result, t) : weft_empty_like(&w->result, t);
        if (rc < 0)
            return staging_failed(w, rc);
        if (copy_back)
            w->dest = weft_tensor_retain(t);
    }
    w->desc.recv = weft_tensor_data_ptr(w->result);
    return 0;
}

/* send = t's elements, contiguous. */
static int stage_send(weft_work *w, const weft_tensor *t)
{
    weft_device at = stage_device(w);
    int rc = weft_contiguous(&w->send_stage, t);
    if (rc == 0 && !weft_device_equal(weft_tensor_device(t), at)) {
        weft_tensor *host = NULL;
        rc = weft_to_device(&host, w->send_stage, at);
        weft_tensor_release(w->send_stage);
        w->send_stage = host;
        if (rc == 0 && !weft_tensor_is_contiguous(host)) {
            rc = weft_contiguous(&w->send_stage, host);
            weft_tensor_release(host);
        }
    }
    if (rc < 0)
        return staging_failed(w, rc);
    w->desc.send = weft_tensor_data_ptr(w->send_stage);
    return 0;
}

/* A flat tensor of size * count elements; with list, filled from it. */
static int stage_flat(weft_tensor **out, weft_work *w, weft_tensor *const *list)
{
    int64_t n = (int64_t)w->group->size * w->mine.count;
    int rc = weft_empty(out, &n, 1, (weft_dtype)w->mine.dtype, stage_device(w));
    bool grad = weft_set_grad_enabled(false);
    for (int i = 0; rc == 0 && list && i < w->group->size; i++) {
        weft_tensor *chunk = NULL, *shaped = NULL;
        rc = weft_narrow(&chunk, *out, 0, i * w->mine.count, w->mine.count);
        if (rc == 0)
            rc = weft_view(&shaped, chunk, weft_tensor_sizes(list[i]), weft_tensor_ndim(list[i]));
        if (rc == 0)
            rc = wdist__copy_into(shaped, list[i]);
        weft_tensor_release(shaped);
        weft_tensor_release(chunk);
    }
    weft_set_grad_enabled(grad);
    return rc < 0 ? staging_failed(w, rc) : 0;
}

/* Retains list as the destinations of result's blocks. */
static int keep_dests(weft_work *w, weft_tensor *const *list)
{
    w->dests = calloc((size_t)w->group->size, sizeof *w->dests);
    if (!w->dests)
        return refuse(w, WEFT_ENOMEM, "%s: out of memory", what(w));
    for (int i = 0; i < w->group->size; i++)
        w->dests[i] = weft_tensor_retain(list[i]);
    w->n_dests = w->group->size;
    return 0;
}

/* Opens a call: the lock is taken and the group checked; what cannot be
 * agreed on (no group, not a member, a broken group) fails here, on this
 * rank only.  Returns a new work or NULL with the error set. */
static weft_work *begin(weft_process_group *g, int kind, int *rc)
{
    if (!g) {
        *rc = weft_set_error(WEFT_EINVAL, "%s: NULL group", wdist__kind_name(kind));
        return NULL;
    }
    pthread_mutex_lock(&wdist__state.lock);
    if (g->rank < 0) {
        *rc = weft_set_error(WEFT_EINVAL, "%s: this process (world rank %d) is not a member of %s",
                             wdist__kind_name(kind),
                             wdist__state.world ? wdist__state.world->rank : -1, g->name);
        goto fail;
    }
    if (g->broken[0]) {
        *rc = weft_set_error(WEFT_EIO, "%s: %s", wdist__kind_name(kind), g->broken);
        goto fail;
    }
    weft_work *w = calloc(1, sizeof *w);
    if (!w) {
        *rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", wdist__kind_name(kind));
        goto fail;
    }
    w->group = g;
    w->start_ms = wdist__now_ms();
    w->desc.struct_size = sizeof w->desc;
    w->desc.kind = kind;
    w->desc.root = -1;
    w->mine.kind = kind;
    w->mine.dtype = -1;
    w->mine.op = -1;
    w->device.type = -1;
    w->mine.root = -1;
    return w;
fail:
    pthread_mutex_unlock(&wdist__state.lock);
    return NULL;
}

/* Closes a call: queues the work (after the agreement for a collective),
 * waits for it when the caller asked for no handle or when this rank
 * refused, and drops the lock. */
static int submit(weft_work *w, weft_work **out)
{
    weft_process_group *g = w->group;
    int p2p = w->desc.kind == WEFT_DIST_SEND || w->desc.kind == WEFT_DIST_RECV;
    int rc = 0;
    if (out)
        *out = NULL;
    w->desc.dtype = (int)(w->mine.dtype < 0 ? WEFT_UINT8 : w->mine.dtype);
    w->desc.op = w->mine.op == WEFT_REDUCE_AVG ? WEFT_REDUCE_SUM : (int)(w->mine.op < 0 ? 0 : w->mine.op);
    w->desc.count = w->mine.count;
    if (w->mine.op == WEFT_REDUCE_AVG && (wdist__backend_caps() & WEFT_DIST_CAP_AVG)) {
        w->desc.op = WEFT_REDUCE_AVG; /* the backend divides (ncclAvg) */
        w->avg_divisor = 0;
    }
    w->desc.device = w->device.type < 0 ? w->device : stage_device(w);
    if (w->desc.device.type > WEFT_DEVICE_TYPE_CPU)
        w->desc.stream = weft_stream_handle(weft_current_stream(w->desc.device));
    if (!p2p)
        w->desc.root = (int)w->mine.root;
    if (p2p && w->refuse) {
        rc = weft_set_error(w->refuse, "%s", w->message);
        goto done;
    }
    if (p2p) {
        w->phase = WDIST_READY;
    } else {
        w->mine.seq = (int64_t)g->seq++;
        if ((rc = wdist__agree_start(w)) < 0)
            goto done;
    }
    if (g->queue_tail)
        g->queue_tail->next = w;
    else
        g->queue_head = w;
    g->queue_tail = w;
    w->queued = 1;
    if (out && !w->refuse) {
        wdist__progress(g);
        *out = w;
        pthread_mutex_unlock(&wdist__state.lock);
        return 0;
    }
    rc = wdist__wait_locked(w);
done:
    wdist__work_destroy(w);
    pthread_mutex_unlock(&wdist__state.lock);
    return rc;
}

int weft_dist_all_reduce(weft_process_group *group, weft_tensor *tensor, weft_reduce_op op,
                         weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_ALL_REDUCE, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, tensor, "tensor") == 0 && check_reduction(w, op) == 0 &&
        stage_result(w, tensor, true, true) == 0) {
        w->mine.count = weft_tensor_numel(tensor);
        w->desc.send = w->desc.recv;
        if (op == WEFT_REDUCE_AVG)
            w->avg_divisor = group->size;
    }
    return submit(w, work);
}

int weft_dist_broadcast(weft_process_group *group, weft_tensor *tensor, int root, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_BROADCAST, &rc);
    if (!w)
        return rc;
    w->mine.root = root;
    if (check_tensor(w, tensor, "tensor") == 0 && check_rank(w, root, "root") == 0 &&
        stage_result(w, tensor, group->rank == root, group->rank != root) == 0) {
        w->mine.count = weft_tensor_numel(tensor);
        w->desc.send = w->desc.recv;
    }
    return submit(w, work);
}

int weft_dist_reduce(weft_process_group *group, weft_tensor *tensor, int root, weft_reduce_op op,
                     weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_REDUCE, &rc);
    if (!w)
        return rc;
    w->mine.root = root;
    if (check_tensor(w, tensor, "tensor") == 0 && check_reduction(w, op) == 0 &&
        check_rank(w, root, "root") == 0 &&
        stage_result(w, tensor, true, group->rank == root) == 0) {
        w->mine.count = weft_tensor_numel(tensor);
        w->desc.send = w->desc.recv;
        if (op == WEFT_REDUCE_AVG && group->rank == root)
            w->avg_divisor = group->size;
        if (group->rank != root) {
            /* off the root the tensor is only read: nothing to divide or
             * copy back, but its bytes must live until the end */
            w->send_stage = w->result;
            w->result = NULL;
        }
    }
    return submit(w, work);
}

int weft_dist_all_gather(weft_process_group *group, weft_tensor *const *outputs,
                         const weft_tensor *input, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_ALL_GATHER, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, input, "input") == 0) {
        w->mine.count = weft_tensor_numel(input);
        if (check_list(w, outputs, w->mine.count, "outputs") == 0 && stage_send(w, input) == 0 &&
            stage_flat(&w->result, w, NULL) == 0 && keep_dests(w, outputs) == 0)
            w->desc.recv = weft_tensor_data_ptr(w->result);
    }
    return submit(w, work);
}

int weft_dist_all_gather_into(weft_process_group *group, weft_tensor *output,
                              const weft_tensor *input, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_ALL_GATHER, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, input, "input") == 0 && check_tensor(w, output, "output") == 0) {
        w->mine.count = weft_tensor_numel(input);
        if (weft_tensor_numel(output) != group->size * w->mine.count)
            refuse(w, WEFT_ESHAPE, "all_gather: output has %lld elements; %d ranks of %lld need %lld",
                   (long long)weft_tensor_numel(output), group->size, (long long)w->mine.count,
                   (long long)(group->size * w->mine.count));
        else if (stage_send(w, input) == 0)
            stage_result(w, output, false, true);
    }
    return submit(w, work);
}

int weft_dist_reduce_scatter(weft_process_group *group, weft_tensor *output,
                             weft_tensor *const *inputs, weft_reduce_op op, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_REDUCE_SCATTER, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, output, "output") == 0 && check_reduction(w, op) == 0) {
        w->mine.count = weft_tensor_numel(output);
        if (check_list(w, inputs, w->mine.count, "inputs") == 0 &&
            stage_flat(&w->send_stage, w, inputs) == 0 && stage_result(w, output, false, true) == 0) {
            w->desc.send = weft_tensor_data_ptr(w->send_stage);
            if (op == WEFT_REDUCE_AVG)
                w->avg_divisor = group->size;
        }
    }
    return submit(w, work);
}

int weft_dist_reduce_scatter_into(weft_process_group *group, weft_tensor *output,
                                  const weft_tensor *input, weft_reduce_op op, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_REDUCE_SCATTER, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, output, "output") == 0 && check_tensor(w, input, "input") == 0 &&
        check_reduction(w, op) == 0) {
        w->mine.count = weft_tensor_numel(output);
        if (weft_tensor_numel(input) != group->size * w->mine.count)
            refuse(w, WEFT_ESHAPE,
                   "reduce_scatter: input has %lld elements; %d ranks of %lld need %lld",
                   (long long)weft_tensor_numel(input), group->size, (long long)w->mine.count,
                   (long long)(group->size * w->mine.count));
        else if (stage_send(w, input) == 0 && stage_result(w, output, false, true) == 0 &&
                 op == WEFT_REDUCE_AVG)
            w->avg_divisor = group->size;
    }
    return submit(w, work);
}

int weft_dist_all_to_all(weft_process_group *group, weft_tensor *output, const weft_tensor *input,
                         weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_ALL_TO_ALL, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, output, "output") == 0 && check_tensor(w, input, "input") == 0) {
        int64_t n = weft_tensor_numel(input);
        if (weft_tensor_numel(output) != n || n % group->size != 0)
            refuse(w, WEFT_ESHAPE,
                   "all_to_all: input (%lld elements) and output (%lld) must match and split "
                   "into %d equal blocks",
                   (long long)n, (long long)weft_tensor_numel(output), group->size);
        else {
            w->mine.count = n / group->size;
            if (stage_send(w, input) == 0)
                stage_result(w, output, false, true);
        }
    }
    return submit(w, work);
}

int weft_dist_gather(weft_process_group *group, weft_tensor *const *outputs,
                     const weft_tensor *input, int root, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_GATHER, &rc);
    if (!w)
        return rc;
    w->mine.root = root;
    if (check_tensor(w, input, "input") == 0 && check_rank(w, root, "root") == 0) {
        w->mine.count = weft_tensor_numel(input);
        if (stage_send(w, input) == 0 && group->rank == root &&
            check_list(w, outputs, w->mine.count, "outputs") == 0 &&
            stage_flat(&w->result, w, NULL) == 0 && keep_dests(w, outputs) == 0)
            w->desc.recv = weft_tensor_data_ptr(w->result);
    }
    return submit(w, work);
}

int weft_dist_scatter(weft_process_group *group, weft_tensor *output, weft_tensor *const *inputs,
                      int root, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_SCATTER, &rc);
    if (!w)
        return rc;
    w->mine.root = root;
    if (check_tensor(w, output, "output") == 0 && check_rank(w, root, "root") == 0) {
        w->mine.count = weft_tensor_numel(output);
        if (group->rank == root && check_list(w, inputs, w->mine.count, "inputs") == 0 &&
            stage_flat(&w->send_stage, w, inputs) == 0)
            w->desc.send = weft_tensor_data_ptr(w->send_stage);
        if (!w->refuse)
            stage_result(w, output, false, true);
    }
    return submit(w, work);
}

int weft_dist_barrier(weft_process_group *group, weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_BARRIER, &rc);
    if (!w)
        return rc;
    return submit(w, work);
}

/* Tags carry the dtype in their low bits, so that a receive of another
 * dtype never matches (it times out, naming the sender). */
enum { TAG_LIMIT = 1 << 20 };

static int check_p2p(weft_work *w, int peer, int tag, const char *role)
{
    if (check_rank(w, peer, role) < 0)
        return w->refuse;
    if (peer == w->group->rank)
        return refuse(w, WEFT_EINVAL, "%s: %s rank %d is this rank", what(w), role, peer);
    if (tag < 0 || tag >= TAG_LIMIT)
        return refuse(w, WEFT_EINVAL, "%s: tag %d is outside [0, %d)", what(w), tag, TAG_LIMIT);
    w->desc.root = peer;
    w->desc.tag = tag;
    return 0;
}

int weft_dist_send(weft_process_group *group, const weft_tensor *tensor, int dst, int tag,
                   weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_SEND, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, tensor, "tensor") == 0 && check_p2p(w, dst, tag, "destination") == 0 &&
        stage_send(w, tensor) == 0) {
        w->mine.count = weft_tensor_numel(tensor);
        w->desc.tag = tag * 16 + (int)w->mine.dtype;
    }
    return submit(w, work);
}

int weft_dist_recv(weft_process_group *group, weft_tensor *tensor, int src, int tag,
                   weft_work **work)
{
    int rc;
    weft_work *w = begin(group, WEFT_DIST_RECV, &rc);
    if (!w)
        return rc;
    if (check_tensor(w, tensor, "tensor") == 0 && check_p2p(w, src, tag, "source") == 0 &&
        stage_result(w, tensor, false, true) == 0) {
        w->mine.count = weft_tensor_numel(tensor);
        w->desc.tag = tag * 16 + (int)w->mine.dtype;
    }
    return submit(w, work);
}
