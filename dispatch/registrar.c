/* dispatch/registrar.c — registrations and the tables they compute.  Each
 * registration is recorded under its registrar (one per plugin), so a failed
 * or unloaded plugin is rolled back completely.  The hot tables are
 * recomputed under the registry lock and published with atomic stores;
 * kernel records are retired, never freed, so a reader racing a release still
 * calls valid code for as long as its plugin stays mapped. */
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/dispatcher.h"


typedef enum reg_kind {
    REG_KERNEL,
    REG_FALLBACK,
    REG_OP,
    REG_DEVICE,
    REG_ALLOCATOR,
    REG_LAYOUT,
    REG_PARALLEL
} reg_kind;

struct weft_registration {
    reg_kind kind;
    weft_registrar *registrar;
    weft_registration *reg_next, *reg_prev; /* in the registrar's list */
    weft_registration *op_next;             /* in op->regs, newest first */
    weft_registration *all_next, *all_prev; /* fallbacks and allocators, newest first */
    weft_op *op;
    int slot;          /* -1 for composite and all-backend registrations */
    int all_backends_key; /* the per-backend key of a WEFT_ALL_BACKENDS registration, or 0 */
    bool lowest;       /* a fallback below every other one (the core's CPU fallback) */
    wf_kernel *kernel; /* REG_KERNEL / REG_FALLBACK */
    int device_type;   /* REG_DEVICE / REG_ALLOCATOR */
    int layout;        /* REG_LAYOUT */
    weft_allocator *allocator;
    weft_device_interface *iface;
};

struct weft_registrar {
    /* first: c10's record of the plugin's live storages and streams, its
     * closing flag and its name (c10/core.h); c10 holds &reg->owner */
    wf_owner owner;
    weft_registration *regs; /* newest first */
    /* A plugin's registrar is not ready while its init runs.  Until then,
     * and once it is closing, the CPU fallback of its device types stays
     * out of the tables: a call that meets a kernel the plugin has not
     * registered yet (or has already released) must find nothing, not the
     * CPU kernel in its place (tests/test_stress.c). */
    atomic_bool initializing;
};

static weft_registration *global_regs; /* fallbacks and allocators */
static weft_registrar *parallel_holder; /* the intra-op pool's registrar, under the registry lock */
static weft_registrar core_registrar_storage = {.owner = {.name = "core"}};
weft_registrar *wd__core_registrar = &core_registrar_storage;
weft_kernel_fn wd__device_fallback_kernel;

/* The loader's view of the holds (c10/owner.c keeps the counters). */
long wd__registrar_live_kind(weft_registrar *reg, int kind)
{
    return wf__owner_live_kind(&reg->owner, kind);
}

void wd__registrar_set_closing(weft_registrar *reg, bool closing)
{
    wf__owner_set_closing(&reg->owner, closing);
}

static void recompute_all_ops(void);

void wd__registrar_set_initializing(weft_registrar *reg, bool initializing)
{
    wd__registry_lock();
    atomic_store(&reg->initializing, initializing);
    if (!initializing)
        recompute_all_ops();
    wd__registry_unlock();
}

/* Whether a lowest-priority fallback may serve: its plugin is complete. */
static bool fallback_live(const weft_registration *r)
{
    return !atomic_load_explicit(&r->registrar->initializing, memory_order_relaxed) &&
           !atomic_load_explicit(&r->registrar->owner.closing, memory_order_relaxed);
}

const char *wd__registrar_name(const weft_registrar *reg)
{
    return reg->owner.name;
}

/* ------------------------------------------------------ table compute */

/* The per-backend key whose block holds slot (a plugin layout's key for
 * the layout slots), or 0. */
static int block_key(int slot)
{
    static const int keys[WF_PER_BACKEND_FUNCS] = {WEFT_KEY_DENSE, WEFT_KEY_QUANTIZED,
                                                   WEFT_KEY_SPARSE, WEFT_KEY_AUTOGRAD};
    if (slot >= WF_NUM_SLOTS)
        return WEFT_KEY_LAYOUT_FIRST + (slot - WF_NUM_SLOTS) / WEFT_MAX_DEVICE_TYPES;
    int block = slot / WEFT_MAX_DEVICE_TYPES;
    return block < WF_PER_BACKEND_FUNCS ? keys[block] : 0;
}

static bool is_layout_key(int key)
{
    return key >= WEFT_KEY_LAYOUT_FIRST && key <= WEFT_KEY_LAYOUT_LAST;
}

/* Plugin layouts' fallbacks, the same for every operator (read by the
 * dispatcher when an op has no kernel of its own for a layout slot). */
_Atomic(const wf_kernel *) wd__layout_fallbacks[WF_LAYOUT_SLOTS];

/* The fallback that serves slot when an operator has nothing of its own:
 * the same for every operator, so recomputing all tables finds it once per
 * slot rather than once per operator and slot. */
static const wf_kernel *fallback_for_slot(int slot)
{
    int key = block_key(slot);
    for (weft_registration *r = global_regs; r; r = r->all_next)
        if (r->kind == REG_FALLBACK && !r->lowest && r->slot == slot)
            return r->kernel;
    for (weft_registration *r = global_regs; key && r; r = r->all_next)
        if (r->kind == REG_FALLBACK && !r->lowest && r->all_backends_key == key)
            return r->kernel;
    /* last of all, so any kernel or fallback a plugin registers wins */
    for (weft_registration *r = global_regs; r; r = r->all_next)
        if (r->kind == REG_FALLBACK && r->lowest && r->slot == slot && fallback_live(r))
            return r->kernel;
    return NULL;
}

/* The kernel of op for slot: its own, else its composite, else fallback.
 * Inlined into the table loop, which runs for every operator at start-up. */
static inline __attribute__((always_inline)) const wf_kernel *compute_slot(const weft_op *op, int slot, const wf_kernel *fallback)
{
    for (weft_registration *r = op->regs; r; r = r->op_next)
        if (r->slot == slot)
            return r->kernel;
    int key = block_key(slot);
    for (weft_registration *r = op->regs; key && r; r = r->op_next)
        if (r->all_backends_key == key)
            return r->kernel;
    /* a composite serves every backend's Dense slot, and Autograd slots too:
     * it is written with other operators, whose own autograd kernels record
     * the graph */
    if (key == WEFT_KEY_DENSE || key == WEFT_KEY_AUTOGRAD)
        for (weft_registration *r = op->regs; r; r = r->op_next)
            if (r->slot == -1 && !r->all_backends_key)
                return r->kernel;
    return fallback;
}

static void recompute_with(weft_op *op, const wf_kernel *const *fallbacks)
{
    for (int slot = 0; slot < WF_NUM_SLOTS; slot++)
        atomic_store_explicit(&op->table[slot], compute_slot(op, slot, fallbacks[slot]),
                              memory_order_release);
    /* the layout table holds the op's own kernels only: its fallbacks are
     * global (wd__layout_fallbacks) */
    _Atomic(const wf_kernel *) *lt = atomic_load_explicit(&op->layout_table, memory_order_relaxed);
    for (int i = 0; lt && i < WF_LAYOUT_SLOTS; i++)
        atomic_store_explicit(&lt[i], compute_slot(op, WF_NUM_SLOTS + i, NULL),
                              memory_order_release);
}

static void fallbacks_now(const wf_kernel **fallbacks)
{
    for (int slot = 0; slot < WF_NUM_SLOTS; slot++)
        fallbacks[slot] = fallback_for_slot(slot);
}

/* Gives op its layout table (registry lock held).  Errors: WEFT_ENOMEM. */
static int ensure_layout_table(weft_op *op)
{
    if (atomic_load_explicit(&op->layout_table, memory_order_relaxed))
        return 0;
    _Atomic(const wf_kernel *) *lt = wf__calloc(WF_LAYOUT_SLOTS, sizeof *lt);
    if (!lt)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory for its layout kernel table",
                          op->schema.name);
    atomic_store_explicit(&op->layout_table, lt, memory_order_release);
    return 0;
}

void wd__op_recompute(weft_op *op)
{
    const wf_kernel *fallbacks[WF_NUM_SLOTS];
    fallbacks_now(fallbacks);
    recompute_with(op, fallbacks);
}

static bool layout_fallbacks_set; /* the layout fallback slots may hold entries */

static void recompute_all_ops(void)
{
    const wf_kernel *fallbacks[WF_NUM_SLOTS];
    fallbacks_now(fallbacks);
    bool layouts = false;
    for (int i = 1; i <= WEFT_MAX_LAYOUTS; i++)
        layouts |= atomic_load(&wf__layouts[i].registered);
    /* without a plugin layout no layout fallback can exist (registering one
     * needs its layout), and the slots were cleared when the last went */
    for (int i = 0; i < WF_LAYOUT_SLOTS && (layouts || layout_fallbacks_set); i++)
        atomic_store_explicit(&wd__layout_fallbacks[i], fallback_for_slot(WF_NUM_SLOTS + i),
                              memory_order_release);
    layout_fallbacks_set = layouts;
    for (int i = 0; i < WF_OP_COUNT; i++)
        recompute_with(wd__op_by_id(i), fallbacks);
    int n = wd__op_total_locked();
    for (int i = WF_OP_COUNT; i < n; i++)
        recompute_with(wd__op_at_locked(i), fallbacks);
}

/* ------------------------------------------------------ bookkeeping */

static bool reserve_retired(size_t need);
static size_t n_regs_live; /* registrations made and not yet released */

/* A registration retires at most two records when released (a device's
 * interface and allocator), and retiring must not fail — a record that
 * cannot be retired is leaked — so room for them is made here, where an
 * out-of-memory is still a clean error (registry lock held). */
static weft_registration *new_registration(weft_registrar *reg, reg_kind kind)
{
    if (!reserve_retired(2 * (n_regs_live + 1)))
        return NULL;
    weft_registration *r = wf__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    n_regs_live++;
    r->kind = kind;
    r->registrar = reg;
    r->slot = -1;
    r->reg_next = reg->regs;
    if (reg->regs)
        reg->regs->reg_prev = r;
    reg->regs = r;
    return r;
}

static void link_global(weft_registration *r)
{
    r->all_next = global_regs;
    if (global_regs)
        global_regs->all_prev = r;
    global_regs = r;
}

static void unlink_global(weft_registration *r)
{
    if (r->all_prev)
        r->all_prev->all_next = r->all_next;
    else if (global_regs == r)
        global_regs = r->all_next;
    if (r->all_next)
        r->all_next->all_prev = r->all_prev;
}

static wf_kernel *new_kernel(weft_registrar *reg, weft_kernel_fn fn, void *ctx, wf_kernel_kind kind)
{
    wf_kernel *k = wf__calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->fn = fn;
    k->ctx = ctx;
    k->kind = (uint8_t)kind;
    snprintf(k->owner, sizeof k->owner, "%s", reg->owner.name);
    return k;
}

/* Records that were published (kernels, device interfaces, allocators) are
 * kept for the life of the process, see the file comment. */
static void **retired;
static size_t n_retired, cap_retired;

/* Room for `more` records beyond those retired already. */
static bool reserve_retired(size_t more)
{
    if (cap_retired - n_retired >= more)
        return true;
    size_t cap = cap_retired ? 2 * cap_retired : 64;
    while (cap - n_retired < more)
        cap *= 2;
    void **g = wf__realloc(retired, cap * sizeof *g);
    if (!g)
        return false;
    retired = g;
    cap_retired = cap;
    return true;
}

/* Never fails: new_registration reserved the room. */
static void retire(void *k)
{
    if (n_retired == cap_retired && !reserve_retired(1))
        return; /* not reached; leaking beats risking a reader's use */
    retired[n_retired++] = k;
}

static void refresh_allocator(int type);

/* Undoes r (registry lock held). */
static void release_locked(weft_registration *r)
{
    weft_registrar *reg = r->registrar;
    if (r->reg_prev)
        r->reg_prev->reg_next = r->reg_next;
    else
        reg->regs = r->reg_next;
    if (r->reg_next)
        r->reg_next->reg_prev = r->reg_prev;
    switch (r->kind) {
    case REG_KERNEL: {
        weft_registration **pp = &r->op->regs;
        while (*pp && *pp != r)
            pp = &(*pp)->op_next;
        if (*pp)
            *pp = r->op_next;
        wd__op_recompute(r->op);
        retire(r->kernel);
        break;
    }
    case REG_FALLBACK:
        unlink_global(r);
        recompute_all_ops();
        retire(r->kernel);
        break;
    case REG_OP:
        /* the handle stays valid (callers may hold it) but the name is gone */
        r->op->defined = false;
        for (int s = 0; s < WF_NUM_SLOTS; s++)
            atomic_store(&r->op->table[s], NULL);
        if (atomic_load(&r->op->layout_table))
            for (int s = 0; s < WF_LAYOUT_SLOTS; s++)
                atomic_store(&atomic_load(&r->op->layout_table)[s], NULL);
        break;
    case REG_LAYOUT:
        wf__layout_remove(r->layout);
        break;
    case REG_DEVICE:
        wf__device_type_unregister(r->device_type);
        /* the interface and allocator copies may still be read by a racing
         * caller */
        retire(r->iface);
        retire(r->allocator);
        break;
    case REG_ALLOCATOR:
        unlink_global(r);
        refresh_allocator(r->device_type);
        retire(r->allocator);
        break;
    case REG_PARALLEL:
        /* a loop that loaded the pointer just before still runs on it: the
         * pool's own unload guard (the CPU plugin runs it on the caller once
         * shut down) covers that window, as for its kernels */
        atomic_store(&wd__parallel_for, NULL);
        parallel_holder = NULL;
        break;
    }
    n_regs_live--;
    free(r);
}

WEFT_API void weft_registration_release(weft_registration *handle)
{
    if (!handle)
        return;
    wd__registry_lock();
    release_locked(handle);
    wd__registry_unlock();
}

/* Releases everything reg registered, newest first (used for rollback). */
void wd__registrar_release_all(weft_registrar *reg)
{
    wd__registry_lock();
    while (reg->regs)
        release_locked(reg->regs);
    wd__registry_unlock();
}

int wd__registrar_new(weft_registrar **out, const char *name)
{
    weft_registrar *reg = wf__calloc(1, sizeof *reg);
    if (!reg)
        return wf__errorf(WEFT_ENOMEM, "out of memory creating a registrar");
    snprintf(reg->owner.name, sizeof reg->owner.name, "%s", name ? name : "anonymous");
    atomic_init(&reg->owner.live, 0);
    *out = reg;
    return 0;
}

WEFT_API int weft_registrar_create(weft_registrar **out, const char *owner_name)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "registrar_create: out is NULL");
    *out = NULL;
    return wd__registrar_new(out, owner_name);
}

WEFT_API void weft_registrar_destroy(weft_registrar *reg)
{
    if (!reg || reg == wd__core_registrar)
        return;
    wd__registrar_release_all(reg);
    free(reg);
}

/* ------------------------------------------------------ registration */

static int register_kernel(weft_registrar *reg, const char *op_name, int key, int device_type,
                           weft_kernel_fn fn, void *ctx, wf_kernel_kind kind,
                           weft_registration **handle)
{
    if (handle)
        *handle = NULL;
    if (!reg || !op_name || (kind != WF_KERNEL_FALLTHROUGH && !fn))
        return wf__errorf(WEFT_EINVAL, "register_kernel: NULL argument");
    int slot = -1, all_backends_key = 0;
    if (key == WEFT_KEY_COMPOSITE) {
        if (kind == WF_KERNEL_FALLTHROUGH)
            return wf__errorf(WEFT_EINVAL, "%s: a composite cannot be a fallthrough", op_name);
        kind = WF_KERNEL_COMPOSITE;
    } else if (device_type == WEFT_ALL_BACKENDS) {
        if (key != WEFT_KEY_DENSE && key != WEFT_KEY_QUANTIZED && key != WEFT_KEY_SPARSE &&
            key != WEFT_KEY_AUTOGRAD && !is_layout_key(key))
            return wf__errorf(WEFT_EINVAL, "%s: WEFT_ALL_BACKENDS needs a per-backend key, not %s",
                              op_name, weft_dispatch_key_name(key));
        if (is_layout_key(key) && !weft_layout_name(key - WEFT_KEY_LAYOUT_FIRST + 1))
            return wf__errorf(WEFT_EINVAL, "%s: key %d belongs to no registered layout", op_name,
                              key);
        all_backends_key = key;
    } else {
        slot = wd__slot_for(key, device_type);
        if (slot < 0)
            return wf__errorf(WEFT_EINVAL, "%s: invalid dispatch key %d or device type %d",
                              op_name, key, device_type);
    }
    wd__registry_lock();
    weft_op *op = wd__op_find_locked(op_name);
    if (!op) {
        wd__registry_unlock();
        return wf__errorf(WEFT_ENOTFOUND, "cannot register a kernel for unknown operator '%s'",
                          op_name);
    }
    if ((slot >= WF_NUM_SLOTS || is_layout_key(all_backends_key)) &&
        ensure_layout_table(op) < 0) {
        wd__registry_unlock();
        return WEFT_ENOMEM;
    }
    wf_kernel *k = new_kernel(reg, fn, ctx, kind);
    weft_registration *r = k ? new_registration(reg, REG_KERNEL) : NULL;
    if (!r) {
        free(k);
        wd__registry_unlock();
        return wf__errorf(WEFT_ENOMEM, "out of memory registering '%s'", op_name);
    }
    r->op = op;
    r->slot = slot;
    r->all_backends_key = all_backends_key;
    r->kernel = k;
    r->op_next = op->regs;
    op->regs = r;
    /* a kernel for one slot changes that slot only: at start-up, when every
     * plugin registers its kernels one by one, this is most of the work */
    if (slot >= 0 && slot < WF_NUM_SLOTS)
        atomic_store_explicit(&op->table[slot], compute_slot(op, slot, fallback_for_slot(slot)),
                              memory_order_release);
    else
        wd__op_recompute(op);
    wd__registry_unlock();
    if (handle)
        *handle = r;
    return 0;
}

WEFT_API int weft_register_kernel(weft_registrar *reg, const char *op_name, int key,
                                  int device_type, weft_kernel_fn fn, void *ctx,
                                  weft_registration **handle)
{
    return register_kernel(reg, op_name, key, device_type, fn, ctx, WF_KERNEL_DIRECT, handle);
}

static int fallthrough_marker(weft_call *call, void *ctx)
{
    (void)call;
    (void)ctx;
    return wf__errorf(WEFT_EINTERNAL, "a fallthrough kernel was called");
}

WEFT_API int weft_register_fallthrough(weft_registrar *reg, const char *op_name, int key,
                                       int device_type, weft_registration **handle)
{
    return register_kernel(reg, op_name, key, device_type, fallthrough_marker, NULL,
                           WF_KERNEL_FALLTHROUGH, handle);
}

/* Records a fallback and recomputes every table (registry lock held). */
static int add_fallback_locked(weft_registration **out, weft_registrar *reg, int slot,
                               int all_backends_key, weft_kernel_fn fn, void *ctx, bool lowest)
{
    *out = NULL;
    wf_kernel *k = new_kernel(reg, fn, ctx, WF_KERNEL_FALLBACK);
    weft_registration *r = k ? new_registration(reg, REG_FALLBACK) : NULL;
    if (!r) {
        free(k);
        return wf__errorf(WEFT_ENOMEM, "out of memory registering a fallback");
    }
    if (lowest)
        snprintf(k->owner, sizeof k->owner, "core CPU fallback");
    r->slot = slot;
    r->all_backends_key = all_backends_key;
    r->lowest = lowest;
    r->kernel = k;
    link_global(r);
    recompute_all_ops();
    *out = r;
    return 0;
}

WEFT_API int weft_register_fallback(weft_registrar *reg, int key, int device_type,
                                    weft_kernel_fn fn, void *ctx, weft_registration **handle)
{
    if (handle)
        *handle = NULL;
    if (!reg || !fn)
        return wf__errorf(WEFT_EINVAL, "register_fallback: NULL argument");
    int slot = -1, all_backends_key = 0;
    if (device_type == WEFT_ALL_BACKENDS) {
        if (key != WEFT_KEY_DENSE && key != WEFT_KEY_QUANTIZED && key != WEFT_KEY_SPARSE &&
            key != WEFT_KEY_AUTOGRAD &&
            !(is_layout_key(key) && weft_layout_name(key - WEFT_KEY_LAYOUT_FIRST + 1)))
            return wf__errorf(WEFT_EINVAL,
                              "register_fallback: WEFT_ALL_BACKENDS needs a per-backend key, not %s",
                              weft_dispatch_key_name(key));
        all_backends_key = key;
    } else if ((slot = wd__slot_for(key, device_type)) < 0) {
        return wf__errorf(WEFT_EINVAL, "register_fallback: invalid key %d or device type %d", key,
                          device_type);
    }
    wd__registry_lock();
    weft_registration *r;
    int rc = add_fallback_locked(&r, reg, slot, all_backends_key, fn, ctx, false);
    wd__registry_unlock();
    if (rc == 0 && handle)
        *handle = r;
    return rc;
}

WEFT_API int weft_register_op(weft_registrar *reg, const char *schema, const weft_op **out)
{
    if (out)
        *out = NULL;
    if (!reg || !schema)
        return wf__errorf(WEFT_EINVAL, "register_op: NULL argument");
    wd__registry_lock();
    weft_op *op;
    int rc = wd__op_add_locked(&op, schema, reg);
    if (rc == 0) {
        weft_registration *r = new_registration(reg, REG_OP);
        if (!r) {
            op->defined = false;
            rc = wf__errorf(WEFT_ENOMEM, "out of memory defining an operator");
        } else {
            r->op = op;
        }
    }
    wd__registry_unlock();
    if (rc == 0 && out)
        *out = op;
    return rc;
}

/* ------------------------------------------------------ devices */

/* Copies a plugin's struct into core memory: a shorter (older) struct is
 * zero-extended, so unknown trailing slots read as "not provided". */
static void *copy_struct(const void *src, uint32_t src_size, size_t full_size)
{
    void *dst = wf__calloc(1, full_size);
    if (dst)
        memcpy(dst, src, src_size < full_size ? src_size : full_size);
    return dst;
}

/* The owner travels with the copy, so an allocation reads allocator and
 * owner with one atomic load and can never pair one with the other's. */
static weft_allocator *copy_allocator(weft_registrar *reg, const weft_allocator *alloc)
{
    uint32_t n = alloc->struct_size < sizeof(weft_allocator) ? alloc->struct_size
                                                            : (uint32_t)sizeof(weft_allocator);
    wf_allocator_copy *c = copy_struct(alloc, n, sizeof *c);
    if (!c)
        return NULL;
    c->owner = &reg->owner;
    return &c->a;
}

static weft_device_interface *copy_iface(weft_registrar *reg, const weft_device_interface *iface)
{
    uint32_t n = iface->struct_size < sizeof(weft_device_interface)
                     ? iface->struct_size
                     : (uint32_t)sizeof(weft_device_interface);
    wf_iface_copy *c = copy_struct(iface, n, sizeof *c);
    if (!c)
        return NULL;
    c->owner = &reg->owner;
    return &c->i;
}

static void refresh_allocator(int type)
{
    wf_device_type *dt = &wf__device_types[type];
    const weft_allocator *a = dt->base_allocator;
    for (weft_registration *r = global_regs; r; r = r->all_next)
        if (r->kind == REG_ALLOCATOR && r->device_type == type) {
            a = r->allocator;
            break;
        }
    atomic_store_explicit(&dt->allocator, a, memory_order_release);
}

static int check_allocator(const weft_allocator *alloc, const char *what)
{
    if (!alloc || alloc->struct_size < offsetof(weft_allocator, allocate) + sizeof(void *) ||
        !alloc->allocate)
        return wf__errorf(WEFT_EINVAL, "%s: the allocator is missing or lacks allocate()", what);
    return 0;
}

static int check_interface(const weft_device_interface *iface, const char *what)
{
    size_t need = offsetof(weft_device_interface, synchronize) + sizeof(void *);
    if (!iface || iface->struct_size < need || !iface->device_count || !iface->copy_to_host ||
        !iface->copy_from_host || !iface->synchronize)
        return wf__errorf(WEFT_EINVAL,
                          "%s: the device interface must provide device_count, copy_to_host, "
                          "copy_from_host and synchronize",
                          what);
    return 0;
}

static int install_device(weft_registrar *reg, int type, const char *name,
                          const weft_device_interface *iface, const weft_allocator *alloc)
{
    /* names are read without the lock: a new name is a new pointer to an
     * interned copy, never a rewrite of the old text (see c10/core.h) */
    const char *old = atomic_load(&wf__device_types[type].name);
    const char *interned_name = old && strcmp(old, name) == 0 ? old : wf__device_name_intern(name);
    weft_device_interface *ic = interned_name ? copy_iface(reg, iface) : NULL;
    weft_allocator *ac = ic ? copy_allocator(reg, alloc) : NULL;
    weft_registration *r = ic && ac ? new_registration(reg, REG_DEVICE) : NULL;
    if (!r) {
        free(ic);
        free(ac);
        return wf__errorf(WEFT_ENOMEM, "out of memory registering device type '%s'", name);
    }
    r->device_type = type;
    r->iface = ic;
    r->allocator = ac;
    wf_device_type *dt = &wf__device_types[type];
    atomic_store(&dt->name, interned_name);
    dt->iface = ic;
    dt->owner = reg;
    dt->base_allocator = ac;
    dt->registered = true;
    refresh_allocator(type);
    /* Every device gets the CPU fallback for the operators it lacks, under
     * its own registrar so that it goes with the device type; newer than the
     * device record, so a rollback releases it first. */
    weft_registration *fb;
    if (!wd__device_fallback_kernel)
        return 0;
    int rc = add_fallback_locked(&fb, reg, wd__slot_for(WEFT_KEY_DENSE, type), 0,
                                 wd__device_fallback_kernel, (void *)(intptr_t)type, true);
    if (rc < 0)
        release_locked(r);
    return rc;
}

WEFT_API int weft_register_device_type(weft_registrar *reg, const char *name,
                                       const weft_device_interface *iface,
                                       const weft_allocator *alloc, int *type_out)
{
    if (type_out)
        *type_out = -1;
    if (!reg || !name || !type_out)
        return wf__errorf(WEFT_EINVAL, "register_device_type: NULL argument");
    size_t len = strlen(name);
    if (len == 0 || len >= WF_DEVICE_NAME_MAX || strchr(name, ':'))
        return wf__errorf(WEFT_EINVAL, "register_device_type: bad device type name '%s'", name);
    int rc = check_interface(iface, name);
    if (rc == 0)
        rc = check_allocator(alloc, name);
    if (rc < 0)
        return rc;
    wd__registry_lock();
    int free_id = -1;
    for (int i = 0; i < WEFT_MAX_DEVICE_TYPES; i++) {
        wf_device_type *dt = &wf__device_types[i];
        if (dt->registered && strcmp(dt->name, name) == 0) {
            const char *holder = dt->owner ? dt->owner->owner.name : "the core";
            wd__registry_unlock();
            return wf__errorf(WEFT_EEXIST,
                              "device type '%s' is already registered (by %s); plugin '%s' cannot "
                              "register it again",
                              name, holder, reg->owner.name);
        }
        if (free_id < 0 && i >= WEFT_DEVICE_TYPE_FIRST_DYNAMIC && !dt->registered)
            free_id = i;
    }
    free_id = wf__device_type_pick_free(name, free_id);
    if (free_id < 0) {
        wd__registry_unlock();
        return wf__errorf(WEFT_ENOMEM, "all %d device type ids are in use",
                          WEFT_MAX_DEVICE_TYPES - WEFT_DEVICE_TYPE_FIRST_DYNAMIC);
    }
    rc = install_device(reg, free_id, name, iface, alloc);
    wd__registry_unlock();
    if (rc == 0)
        *type_out = free_id;
    return rc;
}

WEFT_API int weft_register_reserved_device(weft_registrar *reg, int type,
                                           const weft_device_interface *iface,
                                           const weft_allocator *alloc)
{
    if (!reg)
        return wf__errorf(WEFT_EINVAL, "register_reserved_device: NULL registrar");
    if (type != WEFT_DEVICE_TYPE_CUDA && type != WEFT_DEVICE_TYPE_HIP)
        return wf__errorf(WEFT_EINVAL, "register_reserved_device: type %d is not a reserved type",
                          type);
    int rc = check_interface(iface, weft_device_type_name(type));
    if (rc == 0)
        rc = check_allocator(alloc, weft_device_type_name(type));
    if (rc < 0)
        return rc;
    wd__registry_lock();
    wf_device_type *dt = &wf__device_types[type];
    if (dt->owner) {
        rc = wf__errorf(WEFT_EEXIST, "device type '%s' is already provided by %s", dt->name,
                        dt->owner->owner.name);
    } else {
        char name[32];
        snprintf(name, sizeof name, "%s", dt->name);
        rc = install_device(reg, type, name, iface, alloc);
    }
    wd__registry_unlock();
    return rc;
}

WEFT_API int weft_register_allocator(weft_registrar *reg, int type, const weft_allocator *alloc,
                                     weft_registration **handle)
{
    if (handle)
        *handle = NULL;
    if (!reg)
        return wf__errorf(WEFT_EINVAL, "register_allocator: NULL registrar");
    if (type < 0 || type >= WEFT_MAX_DEVICE_TYPES || !wf__device_types[type].registered)
        return wf__errorf(WEFT_EDEVICE, "register_allocator: unknown device type %d", type);
    int rc = check_allocator(alloc, "register_allocator");
    if (rc < 0)
        return rc;
    wd__registry_lock();
    weft_allocator *ac = copy_allocator(reg, alloc);
    weft_registration *r = ac ? new_registration(reg, REG_ALLOCATOR) : NULL;
    if (!r) {
        free(ac);
        wd__registry_unlock();
        return wf__errorf(WEFT_ENOMEM, "out of memory registering an allocator");
    }
    r->device_type = type;
    r->allocator = ac;
    link_global(r);
    refresh_allocator(type);
    wd__registry_unlock();
    if (handle)
        *handle = r;
    return 0;
}

/* ------------------------------------------------------ the intra-op pool */

_Atomic(weft_parallel_for_fn) wd__parallel_for;

WEFT_API int weft_register_parallel_for(weft_registrar *reg, weft_parallel_for_fn fn,
                                        weft_registration **handle)
{
    if (handle)
        *handle = NULL;
    if (!reg || !fn)
        return wf__errorf(WEFT_EINVAL, "register_parallel_for: NULL %s",
                          !reg ? "registrar" : "function");
    wd__registry_lock();
    if (parallel_holder) {
        int rc = wf__errorf(WEFT_EEXIST,
                            "register_parallel_for: plugin '%s' cannot register a thread pool: "
                            "'%s' holds the process's pool",
                            reg->owner.name, parallel_holder->owner.name);
        wd__registry_unlock();
        return rc;
    }
    weft_registration *r = new_registration(reg, REG_PARALLEL);
    if (!r) {
        wd__registry_unlock();
        return wf__errorf(WEFT_ENOMEM, "out of memory registering a thread pool");
    }
    parallel_holder = reg;
    atomic_store(&wd__parallel_for, fn);
    wd__registry_unlock();
    if (handle)
        *handle = r;
    return 0;
}

/* ------------------------------------------------------ unloading */

/* The backend (device type) of a per-backend slot, or -1. */
static int slot_backend(int slot)
{
    if (slot >= WF_NUM_SLOTS)
        return (slot - WF_NUM_SLOTS) % WEFT_MAX_DEVICE_TYPES;
    return slot >= 0 && slot < WF_PER_BACKEND_FUNCS * WEFT_MAX_DEVICE_TYPES
               ? slot % WEFT_MAX_DEVICE_TYPES
               : -1;
}

/* Whether reg registered the layout whose key r's kernel or fallback is for. */
static bool owns_layout_of(const weft_registrar *reg, const weft_registration *r)
{
    int key = r->slot >= WF_NUM_SLOTS ? block_key(r->slot) : r->all_backends_key;
    if (!is_layout_key(key))
        return false;
    const wf_layout *l = &wf__layouts[key - WEFT_KEY_LAYOUT_FIRST + 1];
    return atomic_load(&l->registered) && l->owner == &reg->owner;
}

static bool owns_type(const weft_registrar *reg, int type)
{
    return type >= 0 && type < WEFT_MAX_DEVICE_TYPES && wf__device_types[type].owner == reg;
}

/* Whether r, made by another registrar, depends on reg: a kernel or fallback
 * for one of reg's device types, an allocator for one, or a kernel for an
 * operator reg defined.  Releasing reg would leave r pointing at an id that
 * the next plugin may get, or at an operator that no longer exists. */
static bool depends_on(const weft_registration *r, const weft_registrar *reg)
{
    if (r->registrar == reg)
        return false;
    switch (r->kind) {
    case REG_KERNEL:
        return (r->op && r->op->definer == reg) || owns_type(reg, slot_backend(r->slot)) ||
               owns_layout_of(reg, r);
    case REG_FALLBACK:
        return owns_type(reg, slot_backend(r->slot)) || owns_layout_of(reg, r);
    case REG_ALLOCATOR:
        return owns_type(reg, r->device_type);
    default:
        return false;
    }
}

static void note_dependent(const weft_registration *r, char *buf, size_t size, size_t *n)
{
    if (*n >= size || strstr(buf, r->registrar->owner.name))
        return;
    *n += (size_t)snprintf(buf + *n, size - *n, "%s'%s'", *n ? ", " : "", r->registrar->owner.name);
}

/* For weft_unload_plugin: if no other registrar's registration depends on
 * reg, releases everything reg registered, in the same critical section as
 * the check (so nothing can come to depend on it in between) and returns 0;
 * otherwise releases nothing, returns how many registrations depend on it
 * and names their registrars in buf. */
long wd__registrar_release_unless_depended(weft_registrar *reg, char *buf, size_t size)
{
    long count = 0;
    size_t n = 0;
    buf[0] = '\0';
    wd__registry_lock();
    int total = wd__op_total_locked();
    for (int i = 0; i < total; i++)
        for (weft_registration *r = wd__op_at_locked(i)->regs; r; r = r->op_next)
            if (depends_on(r, reg)) {
                count++;
                note_dependent(r, buf, size, &n);
            }
    for (weft_registration *r = global_regs; r; r = r->all_next)
        if (depends_on(r, reg)) {
            count++;
            note_dependent(r, buf, size, &n);
        }
    if (count == 0)
        while (reg->regs)
            release_locked(reg->regs);
    wd__registry_unlock();
    return count;
}

/* ------------------------------------------------------------- layouts */

WEFT_API int weft_register_layout(weft_registrar *reg, const weft_layout_interface *iface,
                                  int *layout_out)
{
    if (layout_out)
        *layout_out = -1;
    if (!reg || !iface || !layout_out)
        return wf__errorf(WEFT_EINVAL, "register_layout: NULL argument");
    wd__registry_lock();
    weft_registration *r = new_registration(reg, REG_LAYOUT);
    if (!r) {
        wd__registry_unlock();
        return wf__errorf(WEFT_ENOMEM, "out of memory registering layout '%s'",
                          iface->name ? iface->name : "(null)");
    }
    int id, rc = wf__layout_install(&reg->owner, iface, &id);
    if (rc < 0) {
        release_locked(r); /* kind REG_LAYOUT with layout 0: removes nothing */
        wd__registry_unlock();
        return rc;
    }
    r->layout = id;
    wd__registry_unlock();
    *layout_out = id;
    return 0;
}
