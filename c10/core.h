/* c10/core.h — internal declarations shared by the core's layers: the
 * tensor and storage structs, the device registry and error helpers.
 * Nothing outside libweft includes this file; plugins see only the public
 * headers. */
#ifndef WF_C10_CORE_H
#define WF_C10_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

/* Allocation fault injection (c10/fault.c).  Every allocation of weft's
 * own goes through these; wf__fault_alloc is true when it must fail. */
extern atomic_bool wf__fault_armed;
bool wf__fault_hit(void);
static inline bool wf__fault_alloc(void)
{
    return __builtin_expect(atomic_load_explicit(&wf__fault_armed, memory_order_relaxed), 0) &&
           wf__fault_hit();
}
/* inline: these sit on the tensor-creation path, where a call more costs */
static inline void *wf__malloc(size_t n)
{
    return wf__fault_alloc() ? NULL : malloc(n);
}
static inline void *wf__calloc(size_t n, size_t size)
{
    return wf__fault_alloc() ? NULL : calloc(n, size);
}
static inline void *wf__realloc(void *p, size_t n)
{
    return wf__fault_alloc() ? NULL : realloc(p, n);
}
static inline char *wf__strdup(const char *s)
{
    return wf__fault_alloc() ? NULL : strdup(s);
}

#define WF_INLINE_DIMS 5

/* The Autograd functionality bit of a key set (every backend's shares it). */
#define WF_AUTOGRAD_KEYS (WEFT_KEYSET_BIT(WEFT_KEY_AUTOGRAD))

/* How a view was made from its source; autograd derives the gradient's
 * path from it. */
typedef enum wf_view_kind {
    WF_VIEW_RESHAPE, /* same elements in the same order: view, squeeze, unsqueeze, flatten, alias */
    WF_VIEW_PERMUTE, /* dims holds the permutation */
    WF_VIEW_EXPAND,
    WF_VIEW_STRIDED, /* narrow, slice, select, as_strided: a subset of src */
} wf_view_kind;

struct weft_registrar;

/* ----- owners of memory and streams (c10/owner.c) */
/* What keeps a plugin loaded: storages from its allocators, streams and
 * events on its device types.  c10 owns the record and its counters; a
 * registrar (dispatch/registrar.c) embeds one, so c10 counts holds without
 * knowing what a registrar is.  try_hold fails while an unload decides. */
enum { WF_HOLD_STORAGE, WF_HOLD_STREAM, WF_HOLD_LAYOUT };
typedef struct wf_owner {
    char name[48];            /* the plugin's name, for messages */
    atomic_long live;         /* storages made by its allocators */
    atomic_long live_streams; /* streams and events on its device types */
    atomic_long live_layout;  /* tensors of the layouts it registered */
    atomic_bool closing;      /* an unload is deciding: refuse new holds */
} wf_owner;
void wf__owner_drop(wf_owner *o);
bool wf__owner_try_hold(wf_owner *o, int kind);
void wf__owner_drop_kind(wf_owner *o, int kind);
long wf__owner_live_kind(wf_owner *o, int kind);
void wf__owner_set_closing(wf_owner *o, bool closing);

/* The owner of a block of memory.  Knows nothing of dtype or shape. */
typedef struct wf_storage {
    atomic_int refcount;
    atomic_uint version; /* bumped by in-place writes through any view */
    bool read_only;
    /* born while its thread profiled memory: its free is reported to the
     * profiler too (wf__storage_hooks), whenever it happens */
    bool profiled;
    weft_device device;
    size_t nbytes;
    weft_data_ptr data;
    /* The owner record of the plugin whose allocator made this memory, or
     * NULL for the core's own: a plugin is not unloaded while it lives. */
    struct wf_owner *owner;
    /* Nonzero: the storage and its data are one block of the caching host
     * allocator, of this size (c10/host_alloc.c). */
    size_t host_block_size;
} wf_storage;

struct weft_tensor {
    atomic_int refcount;
    int32_t ndim;
    int8_t dtype;         /* weft_dtype */
    bool is_contiguous;   /* cached; recomputed whenever metadata changes */
    bool is_view;         /* made by a view function from another tensor */
    uint8_t layout;       /* WEFT_LAYOUT_STRIDED, or a plugin layout (c10/layout.c) */
    weft_device device;
    weft_keyset keys;     /* cached dispatch keys */
    int64_t numel;        /* cached */
    int64_t storage_offset; /* in elements */
    wf_storage *storage;
    char *data;           /* cached: storage data + offset, for kernels' hot path */
    void *autograd_meta;  /* created lazily by autograd */
    struct weft_tensor *view_base; /* a view's root (strong): the non-view tensor its
                                    * source chain starts at, whose history an
                                    * in-place write through the view rebases */
    int64_t *sizes;       /* point at the inline arrays for ndim <= 5 */
    int64_t *strides;
    int64_t inline_sizes[WF_INLINE_DIMS];
    int64_t inline_strides[WF_INLINE_DIMS];
};

/* ----- layouts (c10/layout.c)
 * Layout 0 is strided and built in; plugins register up to
 * WEFT_MAX_LAYOUTS others, ids 1..WEFT_MAX_LAYOUTS.  A layout tensor has a
 * zero-byte storage of its own whose data pointer is the plugin's payload
 * (indices and values, scales...) and whose deleter gives it to the
 * layout's release: releasing a tensor costs nothing more for layouts,
 * and code that bumps versions or compares storages needs no special case.
 * Its keys are the layout's and its device's backend bit, no Dense bit: no
 * dense kernel is ever chosen for it. */
typedef struct wf_layout {
    char name[32];             /* written before registered is set, kept after */
    atomic_bool registered;
    weft_layout_interface iface; /* core-owned copy, zero-extended */
    wf_owner *owner;
} wf_layout;
extern wf_layout wf__layouts[WEFT_MAX_LAYOUTS + 1];
/* The dispatch key of plugin layout id (1..WEFT_MAX_LAYOUTS). */
static inline int wf__layout_key(int layout)
{
    return WEFT_KEY_LAYOUT_FIRST + layout - 1;
}
/* Installs iface as a new layout owned by owner (registry lock held by the
 * caller).  Errors: WEFT_EINVAL (bad interface), WEFT_EEXIST, WEFT_ENOMEM
 * (all ids in use). */
int wf__layout_install(wf_owner *owner, const weft_layout_interface *iface, int *id_out);
/* Unpublishes a layout (its owner has no live tensors of it). */
void wf__layout_remove(int id);
/* WEFT_EINVAL naming op and t's layout when t is not strided, else 0:
 * every path that reads sizes, strides or storage as strided asks first. */
int wf__layout_refuse(const weft_tensor *t, const char *op);
static inline int wf__require_strided(const weft_tensor *t, const char *op)
{
    return __builtin_expect(t->layout == WEFT_LAYOUT_STRIDED, 1) ? 0 : wf__layout_refuse(t, op);
}
/* Whether t is strided or of a layout whose plugin gave a view hook: the
 * view functions (c10/view.c, ops/copy.c) take both. */
static inline bool wf__viewable(const weft_tensor *t)
{
    return __builtin_expect(t->layout == WEFT_LAYOUT_STRIDED, 1) ||
           wf__layouts[t->layout].iface.view != NULL;
}
/* The view v of t, a tensor of a plugin layout with a view hook: the
 * hook's result, checked (t's layout, dtype and device, v's shape). */
int wf__layout_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v);
/* t itself (a new reference) when strided, else a new strided tensor made
 * by its layout's to_strided (no autograd: printing and item). */
int wf__layout_strided(weft_tensor **out, const weft_tensor *t, const char *op);
/* t in the registered layout `layout` (a new reference): t itself when it
 * is in it already, else through strided and the layout's from_strided (no
 * autograd).  The plugin's result is checked (layout, shape, dtype,
 * device); ENOTSUP when the layout has no from_strided. */
/* weft_to_device of a plugin layout's tensor: t itself when already on
 * device, else its layout's to_device (checked like the conversions);
 * WEFT_ENOTSUP naming the layout when it has none. */
int wf__layout_to_device(weft_tensor **out, const weft_tensor *t, weft_device device);
int wf__layout_from_strided(weft_tensor **out, const weft_tensor *t, int layout, const char *op);

/* ----- the layer above (c10/hooks.c)
 * c10 knows nothing of autograd; the autograd layer installs these once, at
 * library load (the composition root, init/init.c), before any tensor
 * exists.  A NULL hook means "no autograd" and costs one predictable branch,
 * as c10's SetAutogradMetaFactory does in PyTorch. */
typedef struct wf_autograd_hooks {
    /* frees t->autograd_meta (only called when it is set) */
    void (*meta_free)(weft_tensor *t);
    /* out was just made as a view of src (is_view and view_base are set) */
    int (*on_view)(weft_tensor *out, const weft_tensor *src, wf_view_kind kind,
                   const int64_t *dims, int ndims);
    /* out is a converted copy of src (to_dtype, to_device) */
    int (*on_copy)(weft_tensor *out, const weft_tensor *src);
} wf_autograd_hooks;
extern wf_autograd_hooks wf__autograd_hooks;

/* ----- the profiler above (c10/hooks.c)
 * The profiler layer (profiler/) stores `alloc` while some thread profiles
 * memory and NULL otherwise, so an allocation pays one relaxed load and a
 * predicted branch when nobody profiles.  `alloc` runs after a storage from
 * an allocator (host or plugin) was made and sets s->profiled when it
 * counted it; `free` runs before a storage with `profiled` set gives its
 * memory back.  `free` is set before the first `alloc` and never cleared,
 * so a storage counted while profiling is uncounted when it dies, even
 * after profiling stopped. */
typedef struct wf_storage_hooks {
    _Atomic(void (*)(wf_storage *s)) alloc;
    _Atomic(void (*)(wf_storage *s)) free;
} wf_storage_hooks;
extern wf_storage_hooks wf__storage_hooks;

/* ----- views (c10/view.c) */
/* Clears *out, then refuses a NULL out or t, naming op. */
#define WF_CHECK_OUT_AND_TENSOR_(op, out, t)                                   \
    do {                                                                       \
        if (out)                                                               \
            *(out) = NULL;                                                     \
        if (!(out) || !(t))                                                    \
            return wf__errorf(WEFT_EINVAL, "%s: %s is NULL", op,             \
                              !(out) ? "out" : "the tensor");                  \
    } while (0)
/* The same, and refuses a t that is not strided: the start of every
 * function that reads a strided tensor. */
#define WF_CHECK_TENSOR_ARGS(op, out, t)                                       \
    do {                                                                       \
        WF_CHECK_OUT_AND_TENSOR_(op, out, t);                                  \
        if (wf__require_strided(t, op) < 0)                                    \
            return WEFT_EINVAL;                                                \
    } while (0)
/* The same for the view functions: a tensor of a plugin layout passes
 * when its layout has a view hook (the function hands it over with
 * wf__layout_view once its arguments are checked). */
#define WF_CHECK_VIEW_ARGS(op, out, t)                                         \
    do {                                                                       \
        WF_CHECK_OUT_AND_TENSOR_(op, out, t);                                  \
        if (!wf__viewable(t))                                                  \
            return wf__layout_refuse(t, op);                                   \
    } while (0)
/* Every view is made here (see c10/view.c). */
int wf__make_view(weft_tensor **out, const weft_tensor *t, const int64_t *sizes,
                  const int64_t *strides, int ndim, int64_t offset, wf_view_kind kind,
                  const int64_t *perm);
/* Resolves a -1 in sizes against numel into shape (WEFT_ESHAPE naming op). */
int wf__infer_size(int64_t *shape, const int64_t *sizes, int ndim, int64_t numel, const char *op);
/* Strides that view t's elements with shape, or false when a copy is needed. */
bool wf__view_strides(int64_t *strides, const weft_tensor *t, const int64_t *shape, int ndim);

/* ----- errors (c10/error.c) */
/* weft_set_error is the public form; these keep the hot path short. */
int wf__errorf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ----- storage (c10/storage.c) */
int wf__storage_new(wf_storage **out, size_t nbytes, weft_device device);
wf_storage *wf__storage_wrap(weft_data_ptr data, size_t nbytes, weft_device device);
void wf__storage_retain(wf_storage *s);
void wf__storage_release(wf_storage *s);

/* ----- tensors (c10/tensor.c) */
/* A tensor object over storage s (retained), with the given metadata.
 * strides NULL means contiguous.  Validates nothing: callers check. */
int wf__tensor_make(weft_tensor **out, wf_storage *s, const int64_t *sizes,
                    const int64_t *strides, int ndim, int64_t offset, weft_dtype dtype);
/* Replaces sizes/strides (ndim may change) and refreshes the caches. */
int wf__tensor_set_geometry(weft_tensor *t, const int64_t *sizes, const int64_t *strides,
                            int ndim);
void wf__tensor_refresh(weft_tensor *t);
/* numel of sizes, or WEFT_EOVERFLOW / WEFT_EINVAL with a message naming op. */
int wf__checked_numel(int64_t *numel, const int64_t *sizes, int ndim, const char *op);
/* Row-major strides of sizes (a size 0 counts as 1, as torch's do), or
 * WEFT_EOVERFLOW naming the shape when one does not fit int64: a 0-size
 * dimension makes numel 0 but does not shrink the strides beside it. */
int wf__contiguous_strides(int64_t *strides, const int64_t *sizes, int ndim);
/* Wraps a possibly negative dim for a tensor of rank ndim; WEFT_ERANGE with
 * a message naming op when out of range. */
int wf__wrap_dim(int *out, int dim, int ndim, const char *op);
/* Formats sizes as "[2, 3]" into buf. */
const char *wf__shape_str(char *buf, size_t size, const int64_t *sizes, int ndim);

/* ----- devices (c10/device.c) */
/* The core's copy of a plugin's allocator (zero-extended) and the registrar
 * that registered it, whose storages it counts. */
typedef struct wf_allocator_copy {
    weft_allocator a;
    wf_owner *owner;
} wf_allocator_copy;
/* The same for a device interface: streams and events count against it. */
typedef struct wf_iface_copy {
    weft_device_interface i;
    wf_owner *owner;
} wf_iface_copy;

/* Readers outside the registry lock (dispatch, allocation, name lookups)
 * see allocator, iface, registered and name change under them: they are
 * atomic.  name points to an interned copy that is never freed nor
 * rewritten (wf__device_name_intern), so an id can take another name — no
 * gap in the ids after a failed init — while a racing reader, or a caller
 * of weft_device_type_name, still holds the old text.  NULL: never used. */
#define WF_DEVICE_NAME_MAX 32 /* with the NUL */
typedef struct wf_device_type {
    _Atomic(const char *) name;
    _Atomic(const weft_allocator *) allocator; /* core-owned copy */
    _Atomic(const weft_device_interface *) iface; /* core-owned copy, or NULL */
    struct weft_registrar *owner;              /* NULL for built-in */
    const weft_allocator *base_allocator;      /* the device's own, before overrides */
    atomic_bool registered;
} wf_device_type;

extern wf_device_type wf__device_types[WEFT_MAX_DEVICE_TYPES];
/* A copy of name (shorter than WF_DEVICE_NAME_MAX) that lives as long as
 * the process, one per distinct name; NULL when out of memory.  Registry
 * lock held. */
const char *wf__device_name_intern(const char *name);
/* The core's host allocator: storages it serves share one block with their
 * header (c10/storage.c). */
extern const weft_allocator *const wf__host_allocator;
/* The caching host allocator's blocks: at least n bytes, the block's real
 * size in *size_out (to be given back to wf__host_block_free); NULL when
 * out of memory (no error set).  Thread-safe. */
void *wf__host_block_alloc(size_t n, size_t *size_out);
void wf__host_block_free(void *block, size_t size);
/* The size a request of n bytes is rounded to. */
size_t wf__host_block_size(size_t n);
weft_keyset wf__dense_keys(weft_device device);
int wf__check_device(weft_device device, const char *op);
/* Copies nbytes between any two devices through their interfaces. */
int wf__copy_bytes(void *dst, weft_device dst_dev, const void *src, weft_device src_dev,
                   size_t nbytes);
/* Called by the registrar on rollback / release. */
void wf__device_type_unregister(int type);
int wf__device_type_pick_free(const char *name, int fallback);
void wf__device_init(void);

/* ----- conversion (c10/convert.c) */
/* Reads element i (byte address p) of dtype as double / writes a double. */
double wf__load_double(const void *p, weft_dtype dtype);
void wf__store_double(void *p, weft_dtype dtype, double v);
/* Strided copy with dtype conversion between two host tensors of the same
 * shape (the core's copy_ kernel for CPU).  wf__host_copy_on runs a large
 * copy in pieces through `parallel` (weft_parallel_for, from the layers
 * above: c10 has no pool of its own) when the destination has no element
 * written twice; NULL runs it on the calling thread. */
int wf__host_copy(weft_tensor *dst, const weft_tensor *src);
int wf__host_copy_on(weft_tensor *dst, const weft_tensor *src, weft_parallel_for_fn parallel);

/* half-precision conversions (c10/half.c) */
float wf__half_to_float(uint16_t h);
uint16_t wf__float_to_half(float f);
float wf__bfloat16_to_float(uint16_t h);
uint16_t wf__float_to_bfloat16(float f);


#endif
