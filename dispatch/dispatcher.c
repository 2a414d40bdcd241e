/* dispatch/dispatcher.c — the operator table and the call path.  A call
 * computes its key set from its tensor arguments and the thread's
 * include/exclude sets, picks one slot of the operator's flat table with a
 * few bit operations, and calls the kernel found there: no hashing, no
 * locks, no allocation. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatcher.h"

/* The loader sits above the dispatcher; the composition root installs its
 * summary here for the "no kernel" message. */
void (*wd__loader_summary_hook)(char *buf, size_t size);
#include "c10/quiesce.h"

_Thread_local weft_keyset wd__tls_included WF_TLS_FAST;
_Thread_local weft_keyset wd__tls_excluded WF_TLS_FAST;

static weft_op builtin_ops[WF_OP_COUNT];
/* operators defined by plugins; guarded by the registry lock */
static weft_op **extra_ops;
static int n_extra_ops, cap_extra_ops;

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;

void wd__registry_lock(void)
{
    pthread_mutex_lock(&registry_mutex);
}

void wd__registry_unlock(void)
{
    pthread_mutex_unlock(&registry_mutex);
}

static const char *const functionality_names[] = {
    [WEFT_KEY_DENSE - WEFT_KEY_DENSE] = "Dense",
    [WEFT_KEY_QUANTIZED - WEFT_KEY_DENSE] = "Quantized",
    [WEFT_KEY_SPARSE - WEFT_KEY_DENSE] = "Sparse",
    [WEFT_KEY_BACKEND_SELECT - WEFT_KEY_DENSE] = "BackendSelect",
    [WEFT_KEY_ADINPLACE_OR_VIEW - WEFT_KEY_DENSE] = "ADInplaceOrView",
    [WEFT_KEY_AUTOGRAD - WEFT_KEY_DENSE] = "Autograd",
    [WEFT_KEY_AUTOCAST - WEFT_KEY_DENSE] = "Autocast",
    [WEFT_KEY_TRACER - WEFT_KEY_DENSE] = "Tracer",
    [WEFT_KEY_PROFILER - WEFT_KEY_DENSE] = "Profiler",
    [WEFT_KEY_PYTHON - WEFT_KEY_DENSE] = "Python",
    [WEFT_KEY_USER1 - WEFT_KEY_DENSE] = "User1",
    [WEFT_KEY_USER2 - WEFT_KEY_DENSE] = "User2",
    [WEFT_KEY_USER3 - WEFT_KEY_DENSE] = "User3",
    [WEFT_KEY_USER4 - WEFT_KEY_DENSE] = "User4",
};

WEFT_API const char *weft_dispatch_key_name(int key)
{
    if (key >= 0 && key < WEFT_MAX_DEVICE_TYPES) {
        const char *n = weft_device_type_name(key);
        return n ? n : "UnknownBackend";
    }
    if (key >= WEFT_KEY_DENSE && key < WEFT_KEY_END)
        return functionality_names[key - WEFT_KEY_DENSE];
    if (key >= WEFT_KEY_LAYOUT_FIRST && key <= WEFT_KEY_LAYOUT_LAST) {
        /* a layout's key is called by its layout's name */
        static const char *const unused[] = {"Layout1", "Layout2", "Layout3", "Layout4",
                                             "Layout5", "Layout6", "Layout7", "Layout8"};
        const char *name = weft_layout_name(key - WEFT_KEY_LAYOUT_FIRST + 1);
        return name ? name : unused[key - WEFT_KEY_LAYOUT_FIRST];
    }
    if (key == WEFT_KEY_COMPOSITE)
        return "Composite";
    return "Invalid";
}

WEFT_API int weft_keyset_to_string(weft_keyset ks, char *buf, size_t size)
{
    size_t n = 0;
    int total = snprintf(buf, size, "{");
    n = total > 0 ? (size_t)total : 0;
    bool first = true;
    for (int k = 63; k >= 0; k--) {
        if (!(ks & WEFT_KEYSET_BIT(k)))
            continue;
        int w = snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, "%s%s",
                         first ? "" : ", ", weft_dispatch_key_name(k));
        n += (size_t)w;
        first = false;
    }
    int w = snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, "}");
    return (int)(n + (size_t)w);
}

WEFT_API void weft_dispatch_tls_get(weft_keyset *included, weft_keyset *excluded)
{
    if (included)
        *included = wd__tls_included;
    if (excluded)
        *excluded = wd__tls_excluded;
}

WEFT_API void weft_dispatch_tls_set(weft_keyset included, weft_keyset excluded)
{
    wd__tls_included = included;
    wd__tls_excluded = excluded;
}

int wd__slot_for(int key, int device_type)
{
    if (device_type < 0 || device_type >= WEFT_MAX_DEVICE_TYPES)
        return -1;
    /* a layout key is valid while its layout is registered */
    if (key >= WEFT_KEY_LAYOUT_FIRST && key <= WEFT_KEY_LAYOUT_LAST)
        return weft_layout_name(key - WEFT_KEY_LAYOUT_FIRST + 1)
                   ? wd__layout_slot(WEFT_KEYSET_BIT(device_type), key)
                   : -1;
    if (key < WEFT_KEY_DENSE || key >= WEFT_KEY_END)
        return -1;
    int func;
    return wd__slot_of(WEFT_KEYSET_BIT(key) | WEFT_KEYSET_BIT(device_type), &func);
}

weft_op *wd__op_by_id(int id)
{
    return &builtin_ops[id];
}

static void op_init(weft_op *op, int id, const char *schema_text)
{
    op->id = id;
    op->defined = true;
    op->schema_text = schema_text;
    op->tensor_arg_mask = 0;
    for (int i = 0; i < op->schema.nargs; i++) {
        int t = op->schema.args[i].type;
        if (t == WF_ARG_TENSOR || t == WF_ARG_TENSOR_OPT || t == WF_ARG_TENSOR_MUT ||
            t == WF_ARG_TENSOR_LIST || t == WF_ARG_TENSOR_LIST_OPT)
            op->tensor_arg_mask |= 1u << i;
    }
}

void wd__dispatch_init(void)
{
    for (int i = 0; i < WF_OP_COUNT; i++) {
        weft_op *op = &builtin_ops[i];
        if (wd__schema_parse(&op->schema, wd__op_schemas[i]) < 0) {
            /* the table is generated and checked at build time: this cannot
             * happen unless the two parsers disagree */
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
            op->defined = false;
            continue;
        }
        op_init(op, i, wd__op_schemas[i]);
    }
}

/* ------------------------------------------------------------ lookup */

/* Operators that a rolled-back or unloaded plugin defined stay allocated
 * (handles live for the process) but are not listed. */
WEFT_API int weft_op_count(void)
{
    wd__registry_lock();
    int n = WF_OP_COUNT;
    for (int i = 0; i < n_extra_ops; i++)
        n += extra_ops[i]->defined;
    wd__registry_unlock();
    return n;
}

WEFT_API const weft_op *weft_op_at(int i)
{
    if (i < 0)
        return NULL;
    if (i < WF_OP_COUNT)
        return &builtin_ops[i];
    const weft_op *op = NULL;
    wd__registry_lock();
    int k = i - WF_OP_COUNT;
    for (int j = 0; j < n_extra_ops && !op; j++)
        if (extra_ops[j]->defined && k-- == 0)
            op = extra_ops[j];
    wd__registry_unlock();
    return op;
}

static weft_op *find_locked(const char *name)
{
    for (int i = 0; i < WF_OP_COUNT; i++)
        if (strcmp(builtin_ops[i].schema.name, name) == 0)
            return &builtin_ops[i];
    for (int i = 0; i < n_extra_ops; i++)
        if (extra_ops[i]->defined && strcmp(extra_ops[i]->schema.name, name) == 0)
            return extra_ops[i];
    return NULL;
}

weft_op *wd__op_find_locked(const char *name)
{
    return find_locked(name);
}

WEFT_API int weft_op_find(const weft_op **out, const char *name)
{
    if (!out || !name)
        return wf__errorf(WEFT_EINVAL, "op_find: NULL argument");
    wd__registry_lock();
    const weft_op *op = find_locked(name);
    wd__registry_unlock();
    *out = op;
    if (!op)
        return wf__errorf(WEFT_ENOTFOUND, "no operator named '%s'", name);
    return 0;
}

WEFT_API const char *weft_op_name(const weft_op *op)
{
    return op ? op->schema.name : NULL;
}

WEFT_API const char *weft_op_schema(const weft_op *op)
{
    return op ? op->schema_text : NULL;
}

/* Adds an operator defined at run time (registry lock held). */
int wd__op_add_locked(weft_op **out, const char *schema_text, struct weft_registrar *definer)
{
    /* An operator that an unloaded plugin defined comes back as the same
     * handle when it is defined again with the same schema (a reload): a
     * new handle per load would grow the table without end in a process
     * that loads and unloads a plugin repeatedly, and every registration
     * change recomputes every handle's kernel table. */
    for (int i = 0; i < n_extra_ops; i++) {
        weft_op *old = extra_ops[i];
        if (!old->defined && strcmp(old->schema_text, schema_text) == 0 &&
            !find_locked(old->schema.name)) {
            old->defined = true;
            old->definer = definer;
            *out = old;
            return 0;
        }
    }
    weft_op *op = wf__calloc(1, sizeof *op);
    char *text = wf__strdup(schema_text);
    if (!op || !text) {
        free(op);
        free(text);
        return wf__errorf(WEFT_ENOMEM, "out of memory defining an operator");
    }
    int rc = wd__schema_parse(&op->schema, text);
    if (rc < 0) {
        free(op);
        free(text);
        return rc;
    }
    if (find_locked(op->schema.name)) {
        rc = wf__errorf(WEFT_EEXIST, "operator '%s' is already defined", op->schema.name);
        free(op);
        free(text);
        return rc;
    }
    if (n_extra_ops == cap_extra_ops) {
        int cap = cap_extra_ops ? 2 * cap_extra_ops : 16;
        weft_op **grown = wf__realloc(extra_ops, (size_t)cap * sizeof *grown);
        if (!grown) {
            free(op);
            free(text);
            return wf__errorf(WEFT_ENOMEM, "out of memory defining an operator");
        }
        extra_ops = grown;
        cap_extra_ops = cap;
    }
    op_init(op, WF_OP_COUNT + n_extra_ops, text);
    op->definer = definer;
    extra_ops[n_extra_ops++] = op;
    *out = op;
    return 0;
}

/* ---------------------------------------------------------- the call */

int wd__missing_kernel(const weft_op *op, weft_keyset ks)
{
    /* no key at all: no tensor reached the call (cat of an empty list), so
     * no kernel could be chosen whatever is loaded; say that, not which
     * kernels exist */
    if (ks == 0)
        return wf__errorf(WEFT_EINVAL, "%s: no tensor among the arguments to choose a kernel by "
                                       "(an empty tensor list?)",
                          op->schema.name);
    char keys[256], have[512];
    weft_keyset_to_string(ks, keys, sizeof keys);
    size_t n = 0;
    have[0] = '\0';
    for (int key = WEFT_KEY_DENSE; key < WEFT_KEY_END; key++) {
        bool per_backend = key <= WEFT_KEY_SPARSE || key == WEFT_KEY_AUTOGRAD;
        for (int b = 0; b < (per_backend ? WEFT_MAX_DEVICE_TYPES : 1) && n < sizeof have; b++) {
            const wf_kernel *k = atomic_load(&op->table[wd__slot_for(key, b)]);
            /* the CPU fallback fills every device's Dense slot: listing it
             * would hide which backends really have a kernel */
            if (!k || k->kind == WF_KERNEL_FALLTHROUGH || k->fn == wd__device_fallback_kernel ||
                (per_backend && !weft_device_type_name(b)))
                continue;
            if (per_backend)
                n += (size_t)snprintf(have + n, sizeof have - n, "%s%s[%s] (%s)", n ? ", " : "",
                                      weft_dispatch_key_name(key), weft_dispatch_key_name(b), k->owner);
            else
                n += (size_t)snprintf(have + n, sizeof have - n, "%s%s (%s)", n ? ", " : "",
                                      weft_dispatch_key_name(key), k->owner);
        }
    }
    char plugins[512] = "";
    if (wd__loader_summary_hook)
        wd__loader_summary_hook(plugins, sizeof plugins);
    return wf__errorf(WEFT_ENOKERNEL,
                      "%s: no kernel for dispatch keys %s; kernels exist for: %s; %s",
                      op->schema.name, keys, n ? have : "none", plugins);
}

/* No kernel of op for a plugin layout's key: the layout is not read as
 * strided by anything else, so this is the end. */
static int missing_layout_kernel(const weft_op *op, weft_keyset ks, int func)
{
    int layout = func - WEFT_KEY_LAYOUT_FIRST + 1;
    weft_keyset b = ks & WF_BACKEND_MASK;
    int backend = b ? 63 - __builtin_clzll(b) : 0;
    const char *plugin = weft_layout_plugin(layout);
    return wf__errorf(WEFT_ENOKERNEL,
                      "%s: no kernel for layout '%s' on %s (plugin '%s' has none for this "
                      "operator); convert the tensor with to_strided first",
                      op->schema.name, weft_dispatch_key_name(func),
                      weft_dispatch_key_name(backend), plugin ? plugin : "?");
}

/* The kernel of a layout slot: the op's own, else the layout's fallback. */
static const wf_kernel *layout_kernel(const weft_op *op, int slot)
{
    int i = slot - WF_NUM_SLOTS;
    _Atomic(const wf_kernel *) *lt = atomic_load_explicit(
        &((weft_op *)op)->layout_table, memory_order_acquire);
    const wf_kernel *k = lt ? atomic_load_explicit(&lt[i], memory_order_acquire) : NULL;
    return k ? k : atomic_load_explicit(&wd__layout_fallbacks[i], memory_order_acquire);
}

/* A plugin layout's turn: its kernel (which may redispatch), else the
 * "no kernel for layout" error.  Out of line: dense calls never come here. */
static __attribute__((noinline)) int call_layout(const weft_op *op, weft_call *call,
                                                 weft_keyset ks)
{
    int func = 63 - __builtin_clzll(ks & WF_LAYOUT_MASK);
    const wf_kernel *k = layout_kernel(op, wd__layout_slot(ks, func));
    if (!k || k->kind == WF_KERNEL_FALLTHROUGH)
        return missing_layout_kernel(op, ks, func);
    call->keys = ks;
    return k->fn(call, k->ctx);
}

static int call_table(const weft_op *op, weft_call *call, weft_keyset ks)
{
    /* The common call: Dense and backend bits only (no wrapper key, no
     * plugin layout).  Its slot is the highest backend's in the Dense block,
     * found with one shift, one compare and one bit scan; everything else
     * (autograd, wrappers, layouts, fallthroughs, misses) takes the loop. */
    _Static_assert((int)WEFT_KEY_DENSE == (int)WEFT_MAX_DEVICE_TYPES, "Dense is bit 40");
    if (__builtin_expect(ks >> WEFT_MAX_DEVICE_TYPES == 1, 1)) {
        weft_keyset b = ks & WF_BACKEND_MASK;
        const wf_kernel *k = atomic_load_explicit(&op->table[63 - __builtin_clzll(b | 1)],
                                                  memory_order_acquire);
        if (__builtin_expect(k != NULL && k->kind != WF_KERNEL_FALLTHROUGH, 1)) {
            call->keys = ks;
            return k->fn(call, k->ctx);
        }
    }
    for (;;) {
        if (wd__layout_turn(ks))
            return call_layout(op, call, ks);
        int func = 0;
        int slot = wd__slot_of(ks, &func);
        const wf_kernel *k =
            slot < 0 ? NULL : atomic_load_explicit(&op->table[slot], memory_order_acquire);
        if (!k) {
            /* a wrapper layer with nothing registered for this operator has
             * nothing to do; only the backend data keys must have a kernel */
            if (func > WEFT_KEY_SPARSE) {
                ks &= ~WEFT_KEYSET_BIT(func);
                continue;
            }
            return wd__missing_kernel(op, ks);
        }
        if (k->kind == WF_KERNEL_FALLTHROUGH) {
            ks &= ~WEFT_KEYSET_BIT(func);
            continue;
        }
        call->keys = ks;
        return k->fn(call, k->ctx);
    }
}

static const char *const arg_type_names[] = {
    "Tensor", "Tensor?", "Tensor(a!)", "Tensor[]", "Scalar", "float",
    "int", "bool", "int[]", "int[]?", "ScalarType?", "Generator?",
    "Scalar?", "float?", "int?", "str", "str?", "Tensor?[]",
    "float[]", "float[]?",
};

/* Whether a boxed value can be an argument of this type. */
static bool tag_fits(int type, const weft_value *v)
{
    switch (type) {
    case WF_ARG_TENSOR:
    case WF_ARG_TENSOR_MUT:
        return v->tag == WEFT_VALUE_TENSOR;
    case WF_ARG_TENSOR_OPT:
        return v->tag == WEFT_VALUE_TENSOR || v->tag == WEFT_VALUE_NONE;
    case WF_ARG_TENSOR_LIST:
    case WF_ARG_TENSOR_LIST_OPT:
        return v->tag == WEFT_VALUE_TENSOR_LIST;
    case WF_ARG_SCALAR:
        return v->tag == WEFT_VALUE_DOUBLE || v->tag == WEFT_VALUE_INT || v->tag == WEFT_VALUE_BOOL;
    case WF_ARG_FLOAT:
        return v->tag == WEFT_VALUE_DOUBLE || v->tag == WEFT_VALUE_INT;
    case WF_ARG_INT:
        return v->tag == WEFT_VALUE_INT;
    case WF_ARG_BOOL:
        return v->tag == WEFT_VALUE_BOOL;
    case WF_ARG_INT_LIST:
        return v->tag == WEFT_VALUE_INT_LIST;
    case WF_ARG_INT_LIST_OPT:
        return v->tag == WEFT_VALUE_INT_LIST || v->tag == WEFT_VALUE_NONE;
    case WF_ARG_DTYPE_OPT:
        return v->tag == WEFT_VALUE_DTYPE || v->tag == WEFT_VALUE_NONE;
    case WF_ARG_GENERATOR_OPT:
        return v->tag == WEFT_VALUE_GENERATOR || v->tag == WEFT_VALUE_NONE;
    case WF_ARG_SCALAR_OPT:
        return v->tag == WEFT_VALUE_NONE || tag_fits(WF_ARG_SCALAR, v);
    case WF_ARG_FLOAT_OPT:
        return v->tag == WEFT_VALUE_NONE || tag_fits(WF_ARG_FLOAT, v);
    case WF_ARG_INT_OPT:
        return v->tag == WEFT_VALUE_INT || v->tag == WEFT_VALUE_NONE;
    case WF_ARG_STRING:
        return v->tag == WEFT_VALUE_STRING && v->u.string;
    case WF_ARG_STRING_OPT:
        return (v->tag == WEFT_VALUE_STRING && v->u.string) || v->tag == WEFT_VALUE_NONE;
    case WF_ARG_FLOAT_LIST:
        return v->tag == WEFT_VALUE_DOUBLE_LIST;
    case WF_ARG_FLOAT_LIST_OPT:
        return v->tag == WEFT_VALUE_DOUBLE_LIST || v->tag == WEFT_VALUE_NONE;
    }
    return false;
}

/* An out= target with no elements is resized by the kernel before the
 * kernel reads its inputs (c10's resize, the CPU plugin's
 * cpu__prepare_target).  When the very same tensor is also passed as an
 * input (sum_out(x, x), cat_out(x, [x, y])), that input would change shape
 * under the kernel, which then reads uninitialised memory or indexes dims
 * it checked for the old shape (the fuzzer found sum_out so).  It has no
 * elements, so a fresh empty tensor of its shape stands in for it as an
 * input: the result is what it would be without the aliasing.  Only dense
 * tensors: another layout's empty tensor carries a payload the core cannot
 * copy, and its plugin's kernels own that case.  Returns 1 when `local`
 * (and the lists in `lists`, to free with free_stand_ins) hold the
 * substituted arguments, 0 when nothing aliases, < 0 on failure. */
static int stand_in_for_out(const weft_op *op, const weft_value *args, int nargs,
                            weft_value *local, weft_tensor ***lists)
{
    const weft_tensor *target = args[0].u.tensor;
    if (!target || target->numel != 0 || target->layout != WEFT_LAYOUT_STRIDED)
        return 0;
    bool aliased = false;
    for (int i = 1; i < nargs && !aliased; i++) {
        if (!(op->tensor_arg_mask & (1u << i)))
            continue;
        if (args[i].tag == WEFT_VALUE_TENSOR)
            aliased = args[i].u.tensor == target;
        else if (args[i].tag == WEFT_VALUE_TENSOR_LIST && args[i].u.tensors)
            for (int j = 0; j < args[i].len && !aliased; j++)
                aliased = args[i].u.tensors[j] == target;
    }
    if (!aliased)
        return 0;
    weft_tensor *stand_in = NULL;
    int rc = weft_empty_like(&stand_in, target);
    if (rc < 0)
        return rc;
    memcpy(local, args, (size_t)nargs * sizeof *args);
    for (int i = 1; i < nargs && rc == 0; i++) {
        lists[i] = NULL;
        if (!(op->tensor_arg_mask & (1u << i)))
            continue;
        if (local[i].tag == WEFT_VALUE_TENSOR && local[i].u.tensor == target) {
            local[i].u.tensor = weft_tensor_retain(stand_in);
        } else if (local[i].tag == WEFT_VALUE_TENSOR_LIST && local[i].u.tensors && local[i].len) {
            /* the caller's array is const: the list is copied */
            lists[i] = malloc((size_t)local[i].len * sizeof *lists[i]);
            if (!lists[i]) {
                rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory", op->schema.name);
                break;
            }
            for (int j = 0; j < local[i].len; j++)
                lists[i][j] = local[i].u.tensors[j] == target ? stand_in : local[i].u.tensors[j];
            local[i].u.tensors = lists[i];
        }
    }
    /* the single tensors each hold a reference; the lists borrow this one */
    lists[0] = (weft_tensor **)stand_in;
    return rc < 0 ? rc : 1;
}

static void free_stand_ins(const weft_value *args, const weft_value *local, int nargs,
                           weft_tensor ***lists)
{
    for (int i = 1; i < nargs; i++) {
        if (local[i].tag == WEFT_VALUE_TENSOR && local[i].u.tensor != args[i].u.tensor)
            weft_tensor_release(local[i].u.tensor);
        free(lists[i]);
    }
    weft_tensor_release((weft_tensor *)lists[0]);
}

static int dispatch_args(const weft_op *op, const weft_value *args, int nargs,
                         weft_value *rets);

/* The generated entry points box their arguments correctly by
 * construction: they skip the tag checks and only look at tensors. */
static int dispatch_trusted(const weft_op *op, const weft_value *args, int nargs,
                            weft_value *rets)
{
    if (!op->schema.mutating || nargs < 2 || args[0].tag != WEFT_VALUE_TENSOR)
        return dispatch_args(op, args, nargs, rets);
    weft_value local[WF_MAX_ARGS];
    weft_tensor **lists[WF_MAX_ARGS] = {0};
    int rc = stand_in_for_out(op, args, nargs, local, lists);
    if (rc == 0)
        return dispatch_args(op, args, nargs, rets);
    if (rc > 0)
        rc = dispatch_args(op, local, nargs, rets);
    if (lists[0]) /* set once anything was substituted */
        free_stand_ins(args, local, nargs, lists);
    return rc;
}

static int dispatch_args(const weft_op *op, const weft_value *args, int nargs,
                         weft_value *rets)
{
    const wf_schema *s = &op->schema;
    weft_keyset ks = 0;
    for (int i = 0; i < nargs; i++) {
        if (!(op->tensor_arg_mask & (1u << i)))
            continue;
        const weft_value *v = &args[i];
        if (v->tag == WEFT_VALUE_TENSOR) {
            if (!v->u.tensor)
                return wf__errorf(WEFT_EINVAL, "%s: argument '%s' is NULL", s->name,
                                  s->args[i].name);
            ks |= v->u.tensor->keys;
        } else if (v->tag == WEFT_VALUE_TENSOR_LIST) {
            /* Tensor?[]: a NULL entry is None */
            const bool entries_optional = s->args[i].type == WF_ARG_TENSOR_LIST_OPT;
            for (int j = 0; j < v->len; j++) {
                if (v->u.tensors && !v->u.tensors[j] && entries_optional)
                    continue;
                if (!v->u.tensors || !v->u.tensors[j])
                    return wf__errorf(WEFT_EINVAL, "%s: argument '%s'[%d] is NULL", s->name,
                                      s->args[i].name, j);
                ks |= v->u.tensors[j]->keys;
            }
        }
    }
    if (s->mutating && args[0].u.tensor->storage->read_only)
        return wf__errorf(WEFT_EINVAL, "%s: argument '%s' is read-only and cannot be written",
                          s->name, s->args[0].name);
    ks = (ks | wd__tls_included) & ~wd__tls_excluded;
    for (int i = 0; i < s->nrets; i++) {
        rets[i].tag = WEFT_VALUE_NONE;
        rets[i].len = 0;
        rets[i].u.tensor = NULL;
    }
    /* the write's version is taken before the kernels run, so a layer that
     * saves the written tensor (autograd) records the version after it */
    if (s->mutating)
        weft_tensor_bump_version(args[0].u.tensor);
    weft_call call = {op, ks, args, nargs, rets, s->nrets};
    int rc = call_table(op, &call, ks);
    if (rc >= 0 && s->list_result && rets[0].tag != WEFT_VALUE_TENSOR_LIST) {
        /* callers free what they get with weft_tensor_list_free: anything
         * else would be freed wrongly */
        if (rets[0].tag == WEFT_VALUE_TENSOR)
            weft_tensor_release(rets[0].u.tensor);
        rets[0].tag = WEFT_VALUE_NONE;
        rets[0].u.tensor = NULL;
        return wf__errorf(WEFT_EINTERNAL, "%s: the kernel did not return a tensor list", s->name);
    }
    return rc > 0 ? 0 : rc;
}

/* A boxed call from outside: everything the generated entry points get
 * right by construction is checked first, then the call proceeds as theirs. */
static int dispatch_checked(const weft_op *op, const weft_value *args, int nargs, weft_value *rets,
                            int nrets)
{
    const wf_schema *s = &op->schema;
    if (!op->defined)
        return wf__errorf(WEFT_ENOTFOUND, "%s: the operator is no longer defined", s->name);
    if (nargs != s->nargs)
        return wf__errorf(WEFT_EINVAL, "%s: expected %d arguments, got %d", s->name, s->nargs,
                          nargs);
    if (nrets < s->nrets || (s->nrets && !rets))
        return wf__errorf(WEFT_EINVAL, "%s: room for %d results is needed, got %d", s->name,
                          s->nrets, nrets);
    if (nargs && !args)
        return wf__errorf(WEFT_EINVAL, "%s: args is NULL", s->name);
    for (int i = 0; i < nargs; i++) {
        const wf_arg *a = &s->args[i];
        if (!tag_fits(a->type, &args[i]))
            return wf__errorf(WEFT_EINVAL, "%s: argument '%s' must be %s (got value tag %d)",
                              s->name, a->name, arg_type_names[a->type], args[i].tag);
        /* every list kind: kernels index ints[0..len) and doubles[0..len)
         * as they index tensors[0..len) */
        const void *list = args[i].tag == WEFT_VALUE_TENSOR_LIST ? (const void *)args[i].u.tensors
                           : args[i].tag == WEFT_VALUE_INT_LIST  ? (const void *)args[i].u.ints
                           : args[i].tag == WEFT_VALUE_DOUBLE_LIST ? (const void *)args[i].u.doubles
                                                                   : NULL;
        bool is_list = args[i].tag == WEFT_VALUE_TENSOR_LIST || args[i].tag == WEFT_VALUE_INT_LIST ||
                       args[i].tag == WEFT_VALUE_DOUBLE_LIST;
        if (is_list && (args[i].len < 0 || (args[i].len && !list)))
            return wf__errorf(WEFT_EINVAL, "%s: argument '%s' is a NULL list or has length %d",
                              s->name, a->name, args[i].len);
    }
    return dispatch_trusted(op, args, nargs, rets);
}

/* Both entry points mark the call as a section that may run plugin code, so
 * weft_unload_plugin can wait for it (c10/quiesce.h); nested calls from
 * kernels only count the depth. */
int wd__dispatch(int op_id, const weft_value *args, int nargs, weft_value *rets, int nrets)
{
    (void)nrets;
    wf_reader_tls *rt = wf__reader_enter();
    int rc = dispatch_trusted(&builtin_ops[op_id], args, nargs, rets);
    wf__reader_exit(rt);
    return rc;
}

WEFT_API int weft_call_boxed(const weft_op *op, const weft_value *args, int nargs,
                             weft_value *rets, int nrets)
{
    if (!op)
        return wf__errorf(WEFT_EINVAL, "call_boxed: op is NULL");
    wf_reader_tls *rt = wf__reader_enter();
    int rc = dispatch_checked(op, args, nargs, rets, nrets);
    wf__reader_exit(rt);
    return rc;
}

WEFT_API int weft_redispatch(weft_call *call, weft_keyset done)
{
    if (!call || !call->op)
        return wf__errorf(WEFT_EINVAL, "redispatch: call is NULL");
    weft_keyset f = done & (WF_FUNCTIONALITY_MASK | WF_LAYOUT_MASK);
    if (!f)
        return wf__errorf(WEFT_EINVAL, "redispatch: 'done' names no functionality key");
    /* what ranks below the highest key done stays: below a wrapper key,
     * the layouts too (they rank under every wrapper key) */
    weft_keyset keep;
    if (f & WF_ABOVE_LAYOUT_MASK) {
        int hi = 63 - __builtin_clzll(f & WF_ABOVE_LAYOUT_MASK);
        keep = (WEFT_KEYSET_BIT(hi) - 1) | WF_LAYOUT_MASK;
    } else if (f & WF_LAYOUT_MASK) {
        int hi = 63 - __builtin_clzll(f & WF_LAYOUT_MASK);
        keep = (WEFT_KEYSET_BIT(hi) - 1) & ~WF_ABOVE_LAYOUT_MASK;
    } else {
        keep = WEFT_KEYSET_BIT(63 - __builtin_clzll(f)) - 1;
    }
    return call_table(call->op, call, call->keys & keep);
}

/* ------------------------------------------------------------ the dump */

static const char *const kind_names[] = {"kernel", "composite", "fallback", "fallthrough"};

WEFT_API int weft_op_dump_table(char **out, const weft_op *op)
{
    if (!out || !op)
        return wf__errorf(WEFT_EINVAL, "op_dump_table: NULL argument");
    *out = NULL;
    size_t cap = 4096, n = 0;
    char *buf = wf__malloc(cap);
    if (!buf)
        return wf__errorf(WEFT_ENOMEM, "op_dump_table: out of memory");
#define APPEND(...)                                                                     \
    do {                                                                                \
        int w_ = snprintf(buf + n, cap - n, __VA_ARGS__);                               \
        if ((size_t)w_ >= cap - n) {                                                    \
            cap = 2 * cap + (size_t)w_;                                                 \
            char *g_ = wf__realloc(buf, cap);                                               \
            if (!g_) {                                                                  \
                free(buf);                                                              \
                return wf__errorf(WEFT_ENOMEM, "op_dump_table: out of memory");         \
            }                                                                           \
            buf = g_;                                                                   \
            w_ = snprintf(buf + n, cap - n, __VA_ARGS__);                               \
        }                                                                               \
        n += (size_t)w_;                                                                \
    } while (0)
    APPEND("%s\n", op->schema_text);
    int entries = 0;
    const wf_kernel *composite = NULL;
    for (int key = WEFT_KEY_DENSE; key < WEFT_KEY_END; key++) {
        bool per_backend = key <= WEFT_KEY_SPARSE || key == WEFT_KEY_AUTOGRAD;
        for (int b = 0; b < (per_backend ? WEFT_MAX_DEVICE_TYPES : 1); b++) {
            const wf_kernel *k = atomic_load(&op->table[wd__slot_for(key, b)]);
            if (!k || (per_backend && !weft_device_type_name(b)))
                continue;
            if (k->kind == WF_KERNEL_COMPOSITE) {
                /* one line for the composite, not one per backend */
                composite = k;
                continue;
            }
            char label[64];
            if (per_backend)
                snprintf(label, sizeof label, "%s[%s]", weft_dispatch_key_name(key),
                         weft_dispatch_key_name(b));
            else
                snprintf(label, sizeof label, "%s", weft_dispatch_key_name(key));
            APPEND("  %-24s %-11s from %s\n", label, kind_names[k->kind], k->owner);
            entries++;
        }
    }
    if (composite)
        APPEND("  %-24s %-11s from %s\n", "(every other backend)", "composite", composite->owner);
    else if (!entries)
        APPEND("  (no kernels: every call fails with WEFT_ENOKERNEL)\n");
#undef APPEND
    *out = buf;
    return 0;
}

int wd__op_total_locked(void)
{
    return WF_OP_COUNT + n_extra_ops;
}

weft_op *wd__op_at_locked(int i)
{
    return i < WF_OP_COUNT ? &builtin_ops[i] : extra_ops[i - WF_OP_COUNT];
}
