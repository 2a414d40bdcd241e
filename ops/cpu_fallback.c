/* ops/cpu_fallback.c — the boxed CPU fallback: an operator that a
 * device lacks runs on the CPU backend.  Tensor arguments on the device are
 * staged to host memory through the device interface's copies, the operator
 * is called again with host tensors, written storages are copied back and
 * new results are copied to the device.  Every device type gets it, at the
 * lowest priority, when it is registered (dispatch/registrar.c), so a
 * plugin with only an allocator and copies can run every operator.
 *
 * Staging works per *storage*, not per tensor: all arguments that view one
 * device storage become views of one host copy of the bytes they span, so
 * aliasing between arguments (add_(x, x), out= over an input) means on the
 * host exactly what it means on the device, and strided and expanded views
 * need no copy kernel on the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* -1 until the first read: then WEFT_CPU_FALLBACK decides, unless the API
 * set a mode first. */
static atomic_int fallback_mode = -1;
static atomic_ullong fallback_calls;

static int mode_from_env(void)
{
    const char *v = getenv("WEFT_CPU_FALLBACK");
    if (!v || !*v || strcmp(v, "warn") == 0)
        return WEFT_CPU_FALLBACK_WARN;
    if (strcmp(v, "silent") == 0)
        return WEFT_CPU_FALLBACK_SILENT;
    if (strcmp(v, "error") == 0)
        return WEFT_CPU_FALLBACK_ERROR;
    fprintf(stderr,
            "weft: warning: WEFT_CPU_FALLBACK='%s' is not one of warn, silent, error; using warn\n",
            v);
    return WEFT_CPU_FALLBACK_WARN;
}

static int current_mode(void)
{
    int m = atomic_load_explicit(&fallback_mode, memory_order_acquire);
    if (m >= 0)
        return m;
    int expected = -1, from_env = mode_from_env();
    /* a racing setter wins: the environment is only the default */
    if (atomic_compare_exchange_strong(&fallback_mode, &expected, from_env))
        return from_env;
    return expected;
}

WEFT_API int weft_cpu_fallback_set_mode(weft_cpu_fallback_mode mode)
{
    if (mode != WEFT_CPU_FALLBACK_WARN && mode != WEFT_CPU_FALLBACK_SILENT &&
        mode != WEFT_CPU_FALLBACK_ERROR)
        return wf__errorf(WEFT_EINVAL, "cpu_fallback_set_mode: unknown mode %d", (int)mode);
    int previous = current_mode();
    atomic_store_explicit(&fallback_mode, (int)mode, memory_order_release);
    return previous;
}

WEFT_API weft_cpu_fallback_mode weft_cpu_fallback_get_mode(void)
{
    return (weft_cpu_fallback_mode)current_mode();
}

WEFT_API uint64_t weft_cpu_fallback_calls(void)
{
    return atomic_load_explicit(&fallback_calls, memory_order_relaxed);
}

/* ------------------------------------------------------------ staging */

/* One device storage and its host copy of the bytes [lo, hi). */
typedef struct staged {
    wf_storage *device;
    wf_storage *host; /* one reference, dropped when the call ends */
    size_t lo, hi;
    unsigned version; /* the host storage's version after staging */
} staged;

typedef struct staging {
    weft_device device; /* the device the operator was dispatched for */
    const char *op_name;
    staged *entries;
    int n, cap;
} staging;

/* The byte range a tensor's elements occupy in its storage. */
static void tensor_span(const weft_tensor *t, size_t *lo, size_t *hi)
{
    size_t item = weft_dtype_size(t->dtype);
    int64_t first = t->storage_offset, last = t->storage_offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t reach = (t->sizes[d] - 1) * t->strides[d];
        if (reach < 0)
            first += reach;
        else
            last += reach;
    }
    *lo = (size_t)first * item;
    *hi = ((size_t)last + 1) * item;
}

/* Checks t and widens the entry of its storage (first pass). */
static int note_tensor(staging *st, const weft_tensor *t)
{
    if (t->device.type == WEFT_DEVICE_TYPE_CPU)
        return 0;
    if (!weft_device_equal(t->device, st->device)) {
        char want[48], got[48];
        weft_device_to_string(st->device, want, sizeof want);
        weft_device_to_string(t->device, got, sizeof got);
        return wf__errorf(WEFT_EDEVICE,
                          "%s: expected every tensor on %s (or the host), but one is on %s",
                          st->op_name, want, got);
    }
    if (t->numel == 0)
        return 0;
    size_t lo, hi;
    tensor_span(t, &lo, &hi);
    /* element sizes divide 16, so every view keeps a whole element offset */
    lo &= ~(size_t)15;
    if (hi > t->storage->nbytes)
        hi = t->storage->nbytes;
    for (int i = 0; i < st->n; i++)
        if (st->entries[i].device == t->storage) {
            if (lo < st->entries[i].lo)
                st->entries[i].lo = lo;
            if (hi > st->entries[i].hi)
                st->entries[i].hi = hi;
            return 0;
        }
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 8;
        staged *g = wf__realloc(st->entries, (size_t)cap * sizeof *g);
        if (!g)
            return wf__errorf(WEFT_ENOMEM, "%s: out of memory staging arguments", st->op_name);
        st->entries = g;
        st->cap = cap;
    }
    st->entries[st->n++] = (staged){t->storage, NULL, lo, hi, 0};
    return 0;
}

/* Copies every noted span to the host (second pass). */
static int copy_spans_in(staging *st)
{
    for (int i = 0; i < st->n; i++) {
        staged *e = &st->entries[i];
        int rc = wf__storage_new(&e->host, e->hi - e->lo, WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = wf__copy_bytes(e->host->data.data, WEFT_DEVICE_CPU,
                                (char *)e->device->data.data + e->lo, st->device, e->hi - e->lo);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static staged *entry_of(staging *st, const wf_storage *device_storage)
{
    for (int i = 0; i < st->n; i++)
        if (st->entries[i].device == device_storage)
            return &st->entries[i];
    return NULL;
}

/* The host counterpart of t (third pass): a new reference. */
static int host_view(weft_tensor **out, staging *st, const weft_tensor *t)
{
    *out = NULL;
    if (t->device.type == WEFT_DEVICE_TYPE_CPU) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    if (t->numel == 0)
        return weft_empty(out, t->sizes, t->ndim, (weft_dtype)t->dtype, WEFT_DEVICE_CPU);
    staged *e = entry_of(st, t->storage);
    size_t item = weft_dtype_size(t->dtype);
    int64_t offset = (int64_t)(((size_t)t->storage_offset * item - e->lo) / item);
    return wf__tensor_make(out, e->host, t->sizes, t->strides, t->ndim, offset,
                           (weft_dtype)t->dtype);
}

static void release_host_args(weft_value *host_args, const weft_value *args, int nargs)
{
    for (int i = 0; i < nargs; i++) {
        weft_value *v = &host_args[i];
        if (v->tag == WEFT_VALUE_TENSOR) {
            weft_tensor_release(v->u.tensor);
        } else if (v->tag == WEFT_VALUE_TENSOR_LIST && v->u.tensors != args[i].u.tensors) {
            weft_tensor **list = (weft_tensor **)v->u.tensors;
            for (int j = 0; list && j < v->len; j++)
                weft_tensor_release(list[j]);
            free(list);
        }
    }
}

/* Builds the host argument array: every tensor replaced by its host view. */
static int make_host_args(weft_value *host_args, staging *st, const weft_value *args, int nargs)
{
    memcpy(host_args, args, (size_t)nargs * sizeof *args);
    /* until replaced, no entry owns anything */
    for (int i = 0; i < nargs; i++)
        if (args[i].tag == WEFT_VALUE_TENSOR)
            host_args[i].u.tensor = NULL;
        else if (args[i].tag == WEFT_VALUE_TENSOR_LIST)
            host_args[i].u.tensors = NULL, host_args[i].len = 0;
    for (int i = 0; i < nargs; i++) {
        const weft_value *v = &args[i];
        if (v->tag == WEFT_VALUE_TENSOR) {
            int rc = host_view(&host_args[i].u.tensor, st, v->u.tensor);
            if (rc < 0)
                return rc;
        } else if (v->tag == WEFT_VALUE_TENSOR_LIST && v->len > 0) {
            weft_tensor **list = wf__calloc((size_t)v->len, sizeof *list);
            if (!list)
                return wf__errorf(WEFT_ENOMEM, "%s: out of memory staging a list", st->op_name);
            host_args[i].u.tensors = list;
            host_args[i].len = v->len;
            for (int j = 0; j < v->len; j++) {
                if (!v->u.tensors[j])
                    continue; /* None in a Tensor?[] stays None */
                int rc = host_view(&list[j], st, v->u.tensors[j]);
                if (rc < 0)
                    return rc;
            }
        } else if (v->tag == WEFT_VALUE_TENSOR_LIST) {
            host_args[i].u.tensors = v->u.tensors; /* empty: nothing to stage */
        }
    }
    return 0;
}

/* An out= argument the host kernel resized: resize the device tensor the
 * same way and copy the values over. */
static int write_resized(weft_tensor *device_t, const weft_tensor *host_t)
{
    int rc = weft_tensor_resize(device_t, host_t->sizes, host_t->ndim);
    if (rc == 0 && host_t->numel > 0)
        rc = weft_copy_(device_t, host_t);
    return rc;
}

/* Copies back every span the host call wrote (its storage's version moved:
 * the dispatcher bumps it for every in-place write, also of arguments
 * other than the first, such as batch_norm's running statistics). */
static int copy_spans_out(staging *st, const weft_value *args, const weft_value *host_args,
                          int nargs, bool mutating)
{
    int rc = 0;
    if (mutating && args[0].u.tensor->device.type != WEFT_DEVICE_TYPE_CPU) {
        weft_tensor *dt = args[0].u.tensor;
        const weft_tensor *ht = host_args[0].u.tensor;
        bool same = dt->ndim == ht->ndim &&
                    memcmp(dt->sizes, ht->sizes, (size_t)dt->ndim * sizeof(int64_t)) == 0;
        if (!same || (dt->numel == 0 && ht->numel > 0))
            rc = write_resized(dt, ht);
    }
    for (int i = 0; rc == 0 && i < st->n; i++) {
        staged *e = &st->entries[i];
        if (atomic_load(&e->host->version) == e->version)
            continue;
        rc = wf__copy_bytes((char *)e->device->data.data + e->lo, st->device, e->host->data.data,
                            WEFT_DEVICE_CPU, e->hi - e->lo);
    }
    return rc;
}

/* New results go to the device; a result that already is a device tensor
 * (none of the CPU kernels make one, but a composite might) stays. */
static int results_to_device(weft_call *call, weft_value *host_rets, weft_device device)
{
    int rc = 0;
    for (int i = 0; i < call->nrets; i++) {
        weft_value *r = &host_rets[i];
        call->rets[i] = *r;
        if (r->tag != WEFT_VALUE_TENSOR || !r->u.tensor)
            continue;
        call->rets[i].u.tensor = NULL;
        if (rc == 0)
            rc = weft_to_device(&call->rets[i].u.tensor, r->u.tensor, device);
        weft_tensor_release(r->u.tensor);
        r->u.tensor = NULL;
    }
    if (rc < 0)
        for (int i = 0; i < call->nrets; i++)
            if (call->rets[i].tag == WEFT_VALUE_TENSOR) {
                weft_tensor_release(call->rets[i].u.tensor);
                call->rets[i].u.tensor = NULL;
            }
    return rc;
}

/* The device the call was dispatched for: the first tensor argument on the
 * device type whose Dense slot this fallback fills. */
static bool find_device(const weft_call *call, int type, weft_device *out)
{
    for (int i = 0; i < call->nargs; i++) {
        const weft_value *v = &call->args[i];
        if (v->tag == WEFT_VALUE_TENSOR && v->u.tensor && v->u.tensor->device.type == type) {
            *out = v->u.tensor->device;
            return true;
        }
        if (v->tag == WEFT_VALUE_TENSOR_LIST)
            for (int j = 0; j < v->len; j++)
                if (v->u.tensors[j] && v->u.tensors[j]->device.type == type) {
                    *out = v->u.tensors[j]->device;
                    return true;
                }
    }
    return false;
}

/* handed_over: a kernel of the device's own gave the call to the fallback
 * (weft_call_cpu_fallback), so the device does have a kernel, not for this */
static void warn_once(weft_op *op, weft_device device, bool handed_over)
{
    uint64_t bit = (uint64_t)1 << device.type;
    if (atomic_fetch_or_explicit(&op->fallback_warned, bit, memory_order_relaxed) & bit)
        return;
    fprintf(stderr,
            "weft: warning: operator '%s' runs on the CPU for device type '%s' (%s); its tensors "
            "are copied to the host and back (WEFT_CPU_FALLBACK=silent hides this warning, "
            "=error forbids the fallback)\n",
            op->schema.name, wf__device_types[device.type].name,
            handed_over ? "its kernel handed the call over" : "the device has no kernel for it");
}

static int refuse(const weft_call *call, int type, bool handed_over)
{
    if (handed_over)
        return wf__errorf(WEFT_ENOKERNEL,
                          "%s: the kernel of device type '%s' handed this call to the CPU "
                          "fallback, which is off (WEFT_CPU_FALLBACK=error or "
                          "weft_cpu_fallback_set_mode)",
                          call->op->schema.name, wf__device_types[type].name);
    wd__missing_kernel(call->op, call->keys);
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", weft_last_error());
    return wf__errorf(WEFT_ENOKERNEL,
                      "%s has no kernel for device type '%s' and the CPU fallback is off "
                      "(WEFT_CPU_FALLBACK=error or weft_cpu_fallback_set_mode): %s",
                      call->op->schema.name, wf__device_types[type].name, detail);
}

int wo__run_on_host(weft_call *call, weft_device device)
{
    weft_op *op = (weft_op *)call->op;
    const wf_schema *s = &op->schema;
    if (call->nargs > WF_MAX_ARGS || call->nrets > WF_MAX_ARGS)
        return wf__errorf(WEFT_EINTERNAL, "%s: too many arguments to run on the host", s->name);
    staging st = {.device = device, .op_name = s->name};
    int rc = 0;
    for (int i = 0; rc == 0 && i < call->nargs; i++) {
        const weft_value *v = &call->args[i];
        if (v->tag == WEFT_VALUE_TENSOR && v->u.tensor)
            rc = note_tensor(&st, v->u.tensor);
        else if (v->tag == WEFT_VALUE_TENSOR_LIST)
            for (int j = 0; rc == 0 && j < v->len; j++)
                if (v->u.tensors[j]) /* None in a Tensor?[] */
                    rc = note_tensor(&st, v->u.tensors[j]);
    }
    weft_value host_args[WF_MAX_ARGS], host_rets[WF_MAX_ARGS];
    memset(host_args, 0, sizeof host_args);
    memset(host_rets, 0, sizeof host_rets);
    bool made_args = false;
    if (rc == 0)
        rc = copy_spans_in(&st);
    if (rc == 0) {
        made_args = true;
        rc = make_host_args(host_args, &st, call->args, call->nargs);
    }
    for (int i = 0; rc == 0 && i < st.n; i++)
        st.entries[i].version = atomic_load(&st.entries[i].host->version);
    if (rc == 0)
        rc = weft_call_boxed(op, host_args, call->nargs, host_rets, call->nrets);
    if (rc == 0)
        rc = copy_spans_out(&st, call->args, host_args, call->nargs, s->mutating);
    if (rc == 0)
        rc = results_to_device(call, host_rets, st.device);
    for (int i = 0; i < call->nrets; i++)
        if (host_rets[i].tag == WEFT_VALUE_TENSOR)
            weft_tensor_release(host_rets[i].u.tensor);
    if (made_args)
        release_host_args(host_args, call->args, call->nargs);
    for (int i = 0; i < st.n; i++)
        wf__storage_release(st.entries[i].host);
    free(st.entries);
    return rc;
}

static int fall_back(weft_call *call, int type, bool handed_over)
{
    weft_op *op = (weft_op *)call->op;
    int mode = current_mode();
    if (mode == WEFT_CPU_FALLBACK_ERROR)
        return refuse(call, type, handed_over);
    weft_device device;
    if (!find_device(call, type, &device))
        return wf__errorf(WEFT_EINTERNAL, "%s: the CPU fallback for '%s' found no tensor on it",
                          op->schema.name, wf__device_types[type].name);
    if (mode == WEFT_CPU_FALLBACK_WARN)
        warn_once(op, device, handed_over);
    atomic_fetch_add_explicit(&fallback_calls, 1, memory_order_relaxed);
    return wo__run_on_host(call, device);
}

int wo__cpu_fallback_kernel(weft_call *call, void *ctx)
{
    return fall_back(call, (int)(intptr_t)ctx, false);
}

WEFT_API int weft_call_cpu_fallback(weft_call *call)
{
    if (!call || !call->op)
        return wf__errorf(WEFT_EINVAL, "call_cpu_fallback: call is NULL");
    weft_keyset backends = call->keys & WF_BACKEND_MASK;
    int type = backends ? 63 - __builtin_clzll(backends) : 0;
    if (type == WEFT_DEVICE_TYPE_CPU)
        return wf__errorf(WEFT_EINVAL, "%s: call_cpu_fallback needs a call on a device, not the CPU",
                          call->op->schema.name);
    return fall_back(call, type, true);
}
