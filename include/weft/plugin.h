/* plugin.h — the SDK for weft plugins: the entry descriptor, the registrar,
 * the kernel calling convention, device and allocator interfaces.
 *
 * In-tree backends include only this header and <weft/weft.h>, exactly as an
 * out-of-tree plugin does.  Every struct that crosses the boundary starts with
 * its size and version and only ever grows at its end; a NULL function
 * pointer means "not provided".  Memory is freed on the side that allocated
 * it.
 */
#ifndef WEFT_PLUGIN_H
#define WEFT_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The plugin ABI.  The major changes only when a struct below changes
 * incompatibly; the core refuses a plugin with another major.  The minor
 * grows when something is appended: a plugin built against an older minor
 * keeps working. */
#define WEFT_PLUGIN_ABI_MAJOR 1
/* 1: streams and events in weft_device_interface; 2: its device kind, and
 * layouts (weft_register_layout, weft_layout_interface) */
#define WEFT_PLUGIN_ABI_MINOR 2

/* The one symbol a plugin exports: a data object, so the loader can read the
 * ABI and the score function without running any code compiled for an ISA
 * the machine may lack.  Define it with WEFT_PLUGIN_DEFINE. */
#define WEFT_PLUGIN_ENTRY_SYMBOL "weft_plugin_entry"

typedef struct weft_registrar weft_registrar;

typedef struct weft_plugin_descriptor {
    uint32_t struct_size; /* sizeof(weft_plugin_descriptor) as compiled */
    uint32_t abi_major;   /* WEFT_PLUGIN_ABI_MAJOR */
    uint32_t abi_minor;   /* WEFT_PLUGIN_ABI_MINOR */
    uint32_t reserved;
    const char *name;     /* plugin name, e.g. "cpu"; variants share it */
    const char *variant;  /* "baseline", "avx2", ...; may be NULL */
    const char *version;  /* the plugin's own version text; may be NULL */
    /* Optional: how well this build suits the machine; < 0 means it cannot
     * run here.  Must be compiled for the baseline ISA.  NULL means 0. */
    int (*score)(void);
    /* Registers everything.  Returns 0 or a negative WEFT_E* code, after
     * which the core rolls back all it registered. */
    int (*init)(weft_registrar *reg);
    /* Optional: called before the plugin is closed. */
    void (*fini)(void);
} weft_plugin_descriptor;

#if defined(__GNUC__)
#define WEFT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
#define WEFT_PLUGIN_DEFINE_LINKAGE_ extern "C"
#else
#define WEFT_PLUGIN_DEFINE_LINKAGE_
#endif

/* Defines the entry descriptor of a plugin. */
#define WEFT_PLUGIN_DEFINE(name_, variant_, version_, score_, init_, fini_)   \
    WEFT_PLUGIN_DEFINE_LINKAGE_ WEFT_PLUGIN_EXPORT const weft_plugin_descriptor \
        weft_plugin_entry = {sizeof(weft_plugin_descriptor),                  \
                             WEFT_PLUGIN_ABI_MAJOR,                           \
                             WEFT_PLUGIN_ABI_MINOR,                           \
                             0,                                               \
                             (name_),                                         \
                             (variant_),                                      \
                             (version_),                                      \
                             (score_),                                        \
                             (init_),                                         \
                             (fini_)}

/* --------------------------------------------------------------- kernels */

/* One call of an operator, as a kernel sees it.  args are borrowed; a kernel
 * puts new references into rets (nrets of them, as the schema says; none for
 * in-place and out= operators, which write into their first argument). */
typedef struct weft_call {
    const weft_op *op;
    weft_keyset keys;        /* the call's key set, for redispatch */
    const weft_value *args;
    int nargs;
    weft_value *rets;
    int nrets;
} weft_call;

/* A kernel of an operator whose schema returns Tensor[] puts one list into
 * rets[0]: tag WEFT_VALUE_TENSOR_LIST, len the count, u.tensors an array
 * from weft_tensor_list_new holding a new reference per entry.  The array is
 * core memory, so whoever receives it (the C entry point's caller, a boxed
 * caller) frees it with weft_tensor_list_free, whatever plugin made it.  On
 * error a kernel frees its list itself and leaves rets[0] untouched. */
/* Allocates a zeroed array of len tensor pointers for such a result (len
 * may be 0: the array is then still a valid, freeable pointer).  Errors:
 * WEFT_EINVAL (negative len), WEFT_ENOMEM.  Thread-safe. */
WEFT_API int weft_tensor_list_new(weft_tensor ***out, int len);

/* Reading a call's arguments and delivering its result.  The dispatcher has
 * already checked every argument against the schema (count, tags, NULL
 * tensors), so these only convert: argument i is the i-th of the schema.
 * Inline, so they add nothing to the ABI.  Borrowed pointers live as long
 * as the call. */

/* A Tensor or Tensor? argument; NULL for None. */
static inline weft_tensor *weft_arg_tensor(const weft_call *call, int i)
{
    return call->args[i].tag == WEFT_VALUE_TENSOR ? call->args[i].u.tensor : NULL;
}

/* Whether an optional argument (Tensor?, int?, float?, Scalar?, ...) is None. */
static inline bool weft_arg_is_none(const weft_call *call, int i)
{
    return call->args[i].tag == WEFT_VALUE_NONE;
}

/* A boxed number (int, float, bool or Scalar) as a double; 0 for anything
 * else. */
static inline double weft_value_double(const weft_value *v)
{
    return v->tag == WEFT_VALUE_DOUBLE ? v->u.d
           : v->tag == WEFT_VALUE_INT  ? (double)v->u.i
           : v->tag == WEFT_VALUE_BOOL ? (v->u.b ? 1.0 : 0.0)
                                       : 0.0;
}

/* A number (int, float, bool or Scalar argument) as a double. */
static inline double weft_arg_double(const weft_call *call, int i)
{
    return weft_value_double(&call->args[i]);
}

/* An int (or bool) argument. */
static inline int64_t weft_arg_int(const weft_call *call, int i)
{
    const weft_value *v = &call->args[i];
    return v->tag == WEFT_VALUE_INT ? v->u.i : v->tag == WEFT_VALUE_BOOL ? (int64_t)v->u.b : 0;
}

static inline bool weft_arg_bool(const weft_call *call, int i)
{
    const weft_value *v = &call->args[i];
    return v->tag == WEFT_VALUE_BOOL ? v->u.b : v->tag == WEFT_VALUE_INT ? v->u.i != 0 : false;
}

/* An int[] argument: its entries, and their count in *len (NULL and 0 for
 * None or an empty list). */
static inline const int64_t *weft_arg_ints(const weft_call *call, int i, int *len)
{
    const weft_value *v = &call->args[i];
    bool list = v->tag == WEFT_VALUE_INT_LIST;
    *len = list ? v->len : 0;
    return list && v->len ? v->u.ints : NULL;
}

/* A float[] argument: its entries, and their count in *len (NULL and 0 for
 * None or an empty list). */
static inline const double *weft_arg_doubles(const weft_call *call, int i, int *len)
{
    const weft_value *v = &call->args[i];
    bool list = v->tag == WEFT_VALUE_DOUBLE_LIST;
    *len = list ? v->len : 0;
    return list && v->len ? v->u.doubles : NULL;
}

/* A Tensor[] or Tensor?[] argument (entries of a Tensor?[] may be NULL). */
static inline weft_tensor *const *weft_arg_tensors(const weft_call *call, int i, int *len)
{
    const weft_value *v = &call->args[i];
    bool list = v->tag == WEFT_VALUE_TENSOR_LIST;
    *len = list ? v->len : 0;
    return list ? v->u.tensors : NULL;
}

/* A str argument; NULL for None. */
static inline const char *weft_arg_string(const weft_call *call, int i)
{
    return call->args[i].tag == WEFT_VALUE_STRING ? call->args[i].u.string : NULL;
}

/* Allocates an uninitialised result on the device of `like` (the usual
 * choice: the first tensor argument).  Same errors as weft_empty. */
static inline int weft_new_output(weft_tensor **out, const weft_tensor *like,
                                  const int64_t *sizes, int ndim, weft_dtype dtype)
{
    return weft_empty(out, sizes, ndim, dtype, weft_tensor_device(like));
}

/* Delivers result i of a functional operator: the call takes t's
 * reference.  Returns 0, so a kernel can end with
 * `return weft_return_tensor(call, 0, out);`. */
static inline int weft_return_tensor(weft_call *call, int i, weft_tensor *t)
{
    call->rets[i].tag = WEFT_VALUE_TENSOR;
    call->rets[i].u.tensor = t;
    return 0;
}

/* The number of pooling windows along one dimension, as PyTorch's
 * pooling_output_shape: (in + 2 pad - dilation (kernel - 1) - 1, plus
 * stride - 1 with ceil_mode) / stride rounded toward minus infinity, plus 1;
 * with ceil_mode one less where the last window would start past the input
 * and its left padding.  So with ceil_mode a window larger than the input
 * still gives one output (torch's max_pool2d of a 1 x 1 plane, kernel 3,
 * stride 3).  Below 1 no window fits: returns 0 then, for the caller's
 * error.  In 128 bits, so that sizes near 2^63 give 0 or a saturated
 * INT64_MAX, never an overflow.  stride must be >= 1.  Every pooling
 * kernel (the CPU, CUDA and HIP plugins, the quantized layout, plugins out
 * of tree) uses this one rule.  Pure; thread-safe. */
__extension__ typedef __int128 weft_int128_; /* GCC and Clang; quiet under -pedantic */
static inline int64_t weft_pool_output_size(int64_t in, int64_t kernel, int64_t pad,
                                            int64_t stride, int64_t dilation, bool ceil_mode)
{
    weft_int128_ num = (weft_int128_)in + 2 * (weft_int128_)pad -
                       (weft_int128_)dilation * ((weft_int128_)kernel - 1) - 1 +
                       (ceil_mode ? (weft_int128_)stride - 1 : 0);
    weft_int128_ q = num / stride;
    if (num % stride != 0 && num < 0)
        q--; /* toward minus infinity */
    weft_int128_ out = q + 1;
    if (ceil_mode && (out - 1) * stride >= (weft_int128_)in + pad)
        out--;
    return out < 1 ? 0 : out > INT64_MAX ? INT64_MAX : (int64_t)out;
}

/* A boxed kernel.  ctx is what was given at registration.  Returns 0 or a
 * negative code after setting a message with weft_set_error. */
typedef int (*weft_kernel_fn)(weft_call *call, void *ctx);

/* Calls the kernel below the highest key of call->keys that is in `done`:
 * the keys in `done` and everything above them are removed.  Wrapper layers
 * (autograd, profilers) use this after their own part. */
WEFT_API int weft_redispatch(weft_call *call, weft_keyset done);

/* Sets the calling thread's error message (printf format) and returns code,
 * so a kernel can write `return weft_set_error(WEFT_ESHAPE, "...", ...);`. */
WEFT_API int weft_set_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ------------------------------------------------------------ registrar */

/* A registration: releasing it restores whatever the slot held before. */
typedef struct weft_registration weft_registration;

/* Registers fn for op_name under dispatch key `key` and device type
 * `device_type` (ignored for keys that are not per-backend, and for
 * WEFT_KEY_COMPOSITE, which applies to every backend without a kernel of its
 * own).  For a per-backend key, WEFT_ALL_BACKENDS registers one kernel for
 * every device type that has none of its own (how the autograd layer is
 * registered).  handle may be NULL; the registration then lives until the
 * plugin is unloaded.  Errors: WEFT_ENOTFOUND (unknown operator),
 * WEFT_EINVAL.  Thread-safe: dispatch may run in other threads meanwhile. */
#define WEFT_ALL_BACKENDS (-1)
WEFT_API int weft_register_kernel(weft_registrar *reg, const char *op_name, int key,
                                  int device_type, weft_kernel_fn fn, void *ctx,
                                  weft_registration **handle);
/* One row of a plugin's kernel table: an operator name, its boxed kernel
 * and the kernel's ctx. */
typedef struct weft_kernel_entry {
    const char *op;
    weft_kernel_fn fn;
    const void *ctx;
} weft_kernel_entry;
/* Registers n kernels under key for device_type, stopping at the first
 * error (the loader then rolls back everything the plugin registered, so
 * a half-registered table never stays).  Inline: adds nothing to the ABI. */
static inline int weft_register_kernel_table(weft_registrar *reg, int key, int device_type,
                                             const weft_kernel_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = weft_register_kernel(reg, entries[i].op, key, device_type, entries[i].fn,
                                      (void *)entries[i].ctx, NULL);
        if (rc < 0)
            return rc;
    }
    return 0;
}
/* Marks key as nothing-to-do for op_name: the dispatcher skips it. */
WEFT_API int weft_register_fallthrough(weft_registrar *reg, const char *op_name, int key,
                                       int device_type, weft_registration **handle);
/* A boxed fallback for every operator under key (and device type, for
 * per-backend keys) that has no kernel of its own. */
WEFT_API int weft_register_fallback(weft_registrar *reg, int key, int device_type,
                                    weft_kernel_fn fn, void *ctx, weft_registration **handle);
/* Defines a new operator from a schema ("myop(Tensor self, int n) -> Tensor").
 * Errors: WEFT_EEXIST if the name is taken, WEFT_EINVAL for a bad schema. */
WEFT_API int weft_register_op(weft_registrar *reg, const char *schema, const weft_op **out);
/* Undoes one registration now.  NULL is a no-op.  Thread-safe. */
WEFT_API void weft_registration_release(weft_registration *handle);
/* A registrar not tied to a plugin, for applications and tests that register
 * kernels themselves.  Destroying it releases all its registrations. */
WEFT_API int weft_registrar_create(weft_registrar **out, const char *owner_name);
WEFT_API void weft_registrar_destroy(weft_registrar *reg);

/* ---------------------------------------------------- memory and devices */

/* Memory as a storage owns it: deleter(data, ctx) frees it. */
typedef struct weft_data_ptr {
    void *data;
    void *ctx;
    void (*deleter)(void *data, void *ctx);
} weft_data_ptr;

/* Memory statistics of an allocator.  allocated: bytes in live blocks
 * (rounded sizes); reserved: allocated plus cached; the fields after
 * free_calls came with version 2 (struct_size tells which a caller has). */
#define WEFT_ALLOCATOR_STATS_VERSION 2
typedef struct weft_allocator_stats {
    uint32_t struct_size;
    uint32_t version;
    uint64_t allocated_bytes, peak_allocated_bytes, reserved_bytes;
    uint64_t alloc_calls, free_calls;
    /* version 2: caching allocators */
    uint64_t cached_bytes;       /* free blocks kept for reuse */
    uint64_t cache_hits;         /* allocations served from the cache */
    uint64_t system_alloc_calls, system_free_calls; /* malloc/mmap, free/munmap */
    uint64_t cache_limit_bytes;  /* the high-water mark of cached_bytes */
} weft_allocator_stats;

/* The core's caching host allocator (c10/host_alloc.c).  Freed host blocks
 * are kept, bucketed by size, and reused; past the limit they go back to
 * the system.  The limit defaults to 1 GiB (0 under valgrind and in
 * AddressSanitizer builds, so freed memory is really freed and
 * use-after-free stays visible), or
 * WEFT_HOST_CACHE_LIMIT (bytes, or with a K/M/G suffix) read at first use.
 * Each thread also keeps a few freed blocks of up to 512 bytes for itself
 * (at most about 30 KiB); the statistics count those as allocated until
 * they reach the shared cache: when the thread exits, or when it calls
 * weft_host_empty_cache or weft_host_cache_set_limit.
 * All of these are thread-safe. */
/* Fills *out (set out->struct_size first; a smaller, older struct gets its
 * prefix).  Errors: WEFT_EINVAL (NULL, or struct_size too small). */
WEFT_API int weft_host_allocator_stats(weft_allocator_stats *out);
/* Sets the cache limit in bytes and trims the cache down to it at once
 * (the calling thread's own blocks included; 0 also stops the per-thread
 * caching). */
WEFT_API void weft_host_cache_set_limit(size_t bytes);
WEFT_API size_t weft_host_cache_limit(void);
/* Gives every cached block back to the system, the calling thread's own
 * included (live blocks, and other threads' own, are untouched). */
WEFT_API void weft_host_empty_cache(void);
/* Restarts peak_allocated_bytes from the bytes allocated now. */
WEFT_API void weft_host_reset_peak(void);

#define WEFT_ALLOCATOR_VERSION 1
typedef struct weft_allocator {
    uint32_t struct_size; /* sizeof(weft_allocator) */
    uint32_t version;     /* WEFT_ALLOCATOR_VERSION */
    void *ctx;
    /* Required: nbytes may be 0 (return a NULL or dummy pointer). */
    int (*allocate)(void *ctx, size_t nbytes, int device_index, weft_data_ptr *out);
    /* Optional. */
    int (*stats)(void *ctx, int device_index, weft_allocator_stats *out);
    void (*empty_cache)(void *ctx);
} weft_allocator;

/* What a device plugin provides.  device_count, copies and synchronize are
 * required; the rest is optional. */
#define WEFT_DEVICE_INTERFACE_VERSION 1
typedef struct weft_device_interface {
    uint32_t struct_size;
    uint32_t version;
    void *ctx;
    int (*device_count)(void *ctx);
    int (*copy_to_host)(void *ctx, void *dst, const void *src, size_t nbytes, int device_index);
    int (*copy_from_host)(void *ctx, void *dst, const void *src, size_t nbytes, int device_index);
    int (*copy_device)(void *ctx, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes);
    int (*synchronize)(void *ctx, int device_index);
    int dlpack_device_code; /* DLPack's device code for this type, or 0 */

    /* ABI 1.1 — streams and events, optional: a device without them runs
     * everything in order (weft_stream_create says WEFT_ENOTSUP).  create
     * and destroy come in pairs; the others may each be NULL (the public
     * call then says WEFT_ENOTSUP).  Handles are the plugin's own; a NULL
     * stream handle means the device's default stream.  A kernel finds the
     * stream to use with weft_current_stream and weft_stream_handle.  Every
     * function returns 0 (query: 1 done, 0 not yet) or a negative WEFT_E*
     * code after weft_set_error. */
    int (*stream_create)(void *ctx, int device_index, void **stream);
    void (*stream_destroy)(void *ctx, int device_index, void *stream);
    int (*stream_synchronize)(void *ctx, int device_index, void *stream);
    int (*stream_query)(void *ctx, int device_index, void *stream);
    int (*event_create)(void *ctx, int device_index, void **event);
    void (*event_destroy)(void *ctx, int device_index, void *event);
    /* event completes when the work queued on stream so far has */
    int (*event_record)(void *ctx, int device_index, void *event, void *stream);
    /* work queued on stream later waits for event */
    int (*stream_wait_event)(void *ctx, int device_index, void *stream, void *event);
    int (*event_query)(void *ctx, int device_index, void *event);
    int (*event_synchronize)(void *ctx, int device_index, void *event);
    /* time between two recorded events of one device, in milliseconds */
    int (*event_elapsed_ms)(void *ctx, int device_index, void *start, void *end, float *ms);

    /* ABI 1.2 — what kind of device this is: a weft_device_kind (weft.h).
     * Programs choosing a device for the user read it with
     * weft_device_type_kind: weft-train --device best trains only on an
     * accelerator, never on a device whose work runs on the host CPU
     * anyway.  A plugin built before 1.2 has no such field and reads as
     * WEFT_DEVICE_KIND_UNKNOWN, as does 0. */
    int kind;
} weft_device_interface;

/* The statistics of the allocator that serves device (allocated, peak,
 * reserved, device allocation and free calls), into *out, whose struct_size
 * the caller sets (only that many bytes are written).  Errors: WEFT_EINVAL,
 * WEFT_EDEVICE (no such device), WEFT_ENOTSUP (the allocator keeps none).
 * Thread-safe. */
WEFT_API int weft_device_memory_stats(weft_device device, weft_allocator_stats *out);
/* Gives the memory the device's allocator caches back to the device (all
 * devices of the type when the allocator does not distinguish them); a
 * no-op for an allocator that caches nothing.  Errors: WEFT_EDEVICE. */
WEFT_API int weft_device_empty_cache(weft_device device);

/* Registers a new device type by name; *type_out receives its id.  The
 * allocator is required.  The type gets the core's CPU fallback (see
 * weft_cpu_fallback_set_mode in <weft/weft.h>) for its Dense key at the
 * lowest priority: every operator without a kernel of the plugin's runs on
 * the CPU through the interface's copies, so a plugin may start with an
 * allocator and copies only and add kernels one by one.  Errors: WEFT_EEXIST (name taken; the message names
 * the plugin that holds it), WEFT_ENOMEM (every id is used), WEFT_EINVAL. */
WEFT_API int weft_register_device_type(weft_registrar *reg, const char *name,
                                       const weft_device_interface *iface,
                                       const weft_allocator *alloc, int *type_out);
/* Provides the interface and allocator of a reserved type (CUDA, HIP); it
 * gets the CPU fallback too. */
WEFT_API int weft_register_reserved_device(weft_registrar *reg, int type,
                                           const weft_device_interface *iface,
                                           const weft_allocator *alloc);
/* Replaces the allocator of a device type (e.g. a caching host allocator);
 * the previous one is restored when the registration is released. */
WEFT_API int weft_register_allocator(weft_registrar *reg, int type, const weft_allocator *alloc,
                                     weft_registration **handle);

/* ---------------------------------------------------- intra-op threads */

/* A piece [begin, end) of a parallel loop; ctx is the caller's. */
typedef void (*weft_range_fn)(int64_t begin, int64_t end, void *ctx);
/* A thread pool's parallel loop: runs fn over [begin, end) in pieces of at
 * least grain iterations, on up to weft_get_num_threads() threads (the
 * calling thread one of them), and returns when every piece has run. */
typedef int (*weft_parallel_for_fn)(int64_t begin, int64_t end, int64_t grain,
                                    weft_range_fn fn, void *ctx);

/* Makes fn the process's intra-op pool, the one weft_parallel_for hands
 * loops to: the CPU plugin registers its persistent pool, so that layout
 * and device plugins run their CPU loops on the same threads instead of
 * starting threads of their own (two pools on the same cores wait for each
 * other).  One pool at a time; released with the registrar (the plugin's
 * unload) or through *handle (may be NULL), after which loops run on the
 * calling thread.  fn must stay callable until then.
 * Errors: WEFT_EINVAL (NULL reg or fn), WEFT_EEXIST (a pool is registered;
 * the message names the plugin that holds it), WEFT_ENOMEM.
 * Thread-safe. */
WEFT_API int weft_register_parallel_for(weft_registrar *reg, weft_parallel_for_fn fn,
                                        weft_registration **handle);

/* Runs fn over [begin, end) on the registered pool (pieces of at least
 * grain iterations, possibly on several threads at once: fn must be safe
 * for that), or on the calling thread alone when no pool is registered, the
 * thread count is 1, or the call is made from inside another parallel loop.
 * Returns when every piece has run.  end <= begin runs nothing.  fn reports
 * its own failures through ctx (a piece cannot stop the others).
 * Errors: WEFT_EINVAL (NULL fn); else what the pool returns (the CPU
 * plugin's: always 0, falling back to the calling thread itself).
 * Thread-safe: concurrent loops from different threads are allowed (the
 * CPU pool runs one at a time and the others on their calling threads). */
WEFT_API int weft_parallel_for(int64_t begin, int64_t end, int64_t grain, weft_range_fn fn,
                               void *ctx);

/* ------------------------------------------------ the caching allocator */

/* The raw device memory functions a plugin gives the core's caching
 * allocator (the design of PyTorch's CUDA allocator, written once for every
 * device: see docs/design.md).  Only raw_alloc and raw_free are required;
 * without current_stream every block belongs to stream NULL, without the
 * event functions weft_record_stream falls back to synchronize. */
#define WEFT_DEVICE_MEMORY_VERSION 1
typedef struct weft_device_memory {
    uint32_t struct_size; /* sizeof(weft_device_memory) */
    uint32_t version;     /* WEFT_DEVICE_MEMORY_VERSION */
    void *ctx;
    /* Allocates nbytes (> 0) on the device: 0, WEFT_ENOMEM when the device
     * is full (the allocator then frees its cache and retries), or another
     * negative code, which is reported as it is. */
    int (*raw_alloc)(void *ctx, int device_index, size_t nbytes, void **out);
    void (*raw_free)(void *ctx, int device_index, void *ptr);
    /* The calling thread's current stream on the device. */
    void *(*current_stream)(void *ctx, int device_index);
    /* Records a new event on stream; the allocator destroys it. */
    int (*event_record)(void *ctx, int device_index, void *stream, void **event);
    /* 1 when the event has completed, 0 while pending, < 0 on error. */
    int (*event_query)(void *ctx, void *event);
    void (*event_destroy)(void *ctx, void *event);
    /* Waits for all work on the device; called before cached memory goes
     * back to the device. */
    int (*synchronize)(void *ctx, int device_index);
} weft_device_memory;

typedef struct weft_caching_allocator weft_caching_allocator;

/* Per device.  Bytes are block sizes (requests rounded up to 512). */
#define WEFT_CACHING_STATS_VERSION 1
typedef struct weft_caching_stats {
    uint32_t struct_size; /* set by the caller: sizeof(weft_caching_stats) */
    uint32_t version;
    uint64_t allocated_bytes, peak_allocated_bytes;
    uint64_t requested_bytes;         /* what callers asked for, unrounded */
    uint64_t reserved_bytes, peak_reserved_bytes; /* segments held from the device */
    uint64_t inactive_split_bytes;    /* free bytes inside split segments */
    uint64_t active_blocks, segments;
    uint64_t device_alloc_calls, device_free_calls;
    uint64_t cache_hits;              /* allocations served from the cache */
    uint64_t retries;                 /* device allocations retried after freeing the cache */
    uint64_t ooms;                    /* out-of-memory errors reported */
    uint64_t limit_bytes;             /* 0: no limit */
} weft_caching_stats;

/* Creates a caching allocator over mem (copied; zero-extended when the
 * caller's struct is older) for device indices 0..device_count-1.  name
 * ("cuda") appears in messages and picks the environment variable
 * WEFT_<NAME>_MEMORY_LIMIT (bytes, or with a K/M/G suffix), the initial
 * limit of every device.  Errors: WEFT_EINVAL, WEFT_ENOMEM.  The caller owns
 * *out and destroys it after the last block is freed. */
WEFT_API int weft_caching_allocator_create(weft_caching_allocator **out, const char *name,
                                           const weft_device_memory *mem, int device_count);
/* The weft_allocator table to register with weft_register_device_type or
 * weft_register_reserved_device; valid while the allocator lives. */
WEFT_API const weft_allocator *weft_caching_allocator_table(weft_caching_allocator *a);
/* Fills *out (out->struct_size set by the caller; only that many bytes are
 * written).  Errors: WEFT_EINVAL, WEFT_EDEVICE (index out of range). */
WEFT_API int weft_caching_allocator_stats(weft_caching_allocator *a, int device_index,
                                          weft_caching_stats *out);
/* Caps what the allocator reserves on a device (0: no cap).  Allocations
 * beyond it fail as out of memory after the cache is freed. */
WEFT_API int weft_caching_allocator_set_limit(weft_caching_allocator *a, int device_index,
                                              uint64_t bytes);
/* Gives every cached segment that holds no live block back to the device
 * (device_index -1: all devices).  Thread-safe. */
WEFT_API int weft_caching_allocator_empty_cache(weft_caching_allocator *a, int device_index);
/* Frees the allocator and its cache.  WEFT_EBUSY (nothing freed) while a
 * block is still allocated or waits for a stream; NULL is a no-op. */
WEFT_API int weft_caching_allocator_destroy(weft_caching_allocator *a);
/* Declares that t's memory is used by work on stream (not the stream it was
 * allocated on): when t's storage is freed, its block returns to the cache
 * only after that work completes.  A no-op for memory that no caching
 * allocator made.  Errors: WEFT_EINVAL, WEFT_ENOMEM.  Thread-safe. */
WEFT_API int weft_record_stream(const weft_tensor *t, void *stream);

/* ------------------------------------------------- helpers for kernels */

/* Runs call through the core's CPU fallback, exactly as if the device had
 * no kernel for the operator (mode, warning and count included): for a
 * kernel that handles only some cases itself (float32, contiguous) and
 * hands the rest over with `return weft_call_cpu_fallback(call);`.  The
 * device is the highest backend of call->keys.  Errors: those of the
 * fallback (WEFT_ENOKERNEL in error mode) and of the CPU kernel;
 * WEFT_EINVAL when the call is on the CPU. */
WEFT_API int weft_call_cpu_fallback(weft_call *call);

/* --------------------------------------------------------------- layouts */

/* What the core needs of a layout (see docs/writing-a-layout.md).  The
 * core copies the table at registration; fields appended in later ABI
 * versions are zero for a plugin built against an older header.  Every
 * function may be called from any thread. */
struct weft_layout_view; /* below: what a view asks of a layout */
typedef struct weft_layout_interface {
    size_t struct_size; /* sizeof(weft_layout_interface) when built */
    const char *name;   /* "rle": 1..31 characters [a-z0-9_], not "strided" */
    /* Frees a tensor's payload when the tensor dies (required). */
    void (*release)(void *payload);
    /* Converts t, a tensor of this layout, to a new strided tensor of the
     * same shape, dtype and device (required: printing, DLPack's message,
     * weft_to_strided and the strided fallback use it).  Returns 0 or an
     * error code with its message set. */
    int (*to_strided)(weft_tensor **out, const weft_tensor *t);
    /* Converts src, a strided tensor, to a new tensor of this layout
     * (optional: without it weft_to_layout refuses, naming the layout). */
    int (*from_strided)(weft_tensor **out, const weft_tensor *src);
    /* One line about t's payload for printing ("3 runs") into buf
     * (optional).  Returns snprintf's length or a negative code. */
    int (*describe)(const weft_tensor *t, char *buf, size_t size);
    /* The bytes t's payload holds (optional; 0 when NULL). */
    int64_t (*nbytes)(const weft_tensor *t);
    /* Appended for issue 16's CUDA sparse tensors: makes a new tensor of
     * this layout holding t's payload moved to device (weft_to_device of a
     * tensor of this layout calls it; device differs from t's).  Optional:
     * without it weft_to_device refuses the layout by name. */
    int (*to_device)(weft_tensor **out, const weft_tensor *t, weft_device device);
    /* Appended for issue 17's quantized tensors: makes the view (or, for
     * RESHAPE where no view can do and CONTIGUOUS, the copy) that v
     * describes of t, a tensor of this layout, as a new tensor of this
     * layout: the core's view functions (weft_view, weft_reshape,
     * weft_flatten, weft_permute, weft_transpose, weft_t, weft_slice,
     * weft_narrow, weft_select, weft_expand, weft_squeeze,
     * weft_unsqueeze, weft_alias, weft_contiguous) call it once they have
     * checked their arguments.  The result must have v->shape, t's dtype
     * and device, and this layout, except that SELECT may return a strided
     * tensor where the layout cannot hold the result (a sparse tensor's
     * only sparse dim selected); the core checks.  Optional: without it those functions
     * refuse the layout by name, as before (weft_as_strided always does:
     * a layout's strides are its own). */
    int (*view)(weft_tensor **out, const weft_tensor *t, const struct weft_layout_view *v);
    /* Appended after issue 16: WEFT_LAYOUT_* bits (weft.h) saying how the
     * layout behaves where a caller must know; weft_layout_flags reads
     * them.  0, which a plugin built against an older header reads as,
     * means none. */
    unsigned flags;
} weft_layout_interface;


/* What a view function asks of a layout's view hook.  The arguments are
 * checked and normalised: dims wrapped to [0, ndim), a -1 size inferred,
 * slice bounds clamped as Python's, a select index made non-negative. */
typedef enum weft_layout_view_kind {
    WEFT_LAYOUT_VIEW_SHAPE = 1, /* weft_view, squeeze, unsqueeze, alias: a view of shape[] */
    WEFT_LAYOUT_VIEW_RESHAPE,   /* weft_reshape, weft_flatten: a view, or a copy where none can */
    WEFT_LAYOUT_VIEW_PERMUTE,   /* weft_permute, weft_transpose, weft_t: dims[] */
    WEFT_LAYOUT_VIEW_SLICE,     /* weft_slice, weft_narrow: dim, start, end, step */
    WEFT_LAYOUT_VIEW_SELECT,    /* weft_select: dim, index */
    WEFT_LAYOUT_VIEW_EXPAND,    /* weft_expand: shape[] (new dims lead, as ever) */
    WEFT_LAYOUT_VIEW_CONTIGUOUS /* weft_contiguous: a contiguous copy, or t itself */
} weft_layout_view_kind;

typedef struct weft_layout_view {
    int kind;              /* a weft_layout_view_kind */
    const char *op;        /* the view function's name, for messages */
    const int64_t *shape;  /* the result's shape, every kind */
    int ndim;              /* shape's length */
    const int64_t *dims;   /* PERMUTE: result dim i is t's dim dims[i] */
    int dim;               /* SLICE, SELECT: the dim of t; SHAPE from weft_unsqueeze
                            * (op "unsqueeze"): the new dim's place in the result */
    int64_t start, end;    /* SLICE: 0 <= start <= end <= size */
    int64_t step;          /* SLICE: >= 1 */
    int64_t index;         /* SELECT: 0 <= index < size */
} weft_layout_view;

/* Registers a layout; *layout_out receives its id (1..WEFT_MAX_LAYOUTS),
 * whose dispatch key (weft_layout_key) is where the plugin registers its
 * kernels: weft_register_kernel(reg, "add", weft_layout_key(id),
 * WEFT_DEVICE_TYPE_CPU, ...).  An operator without a kernel for the layout
 * fails with WEFT_ENOKERNEL naming the operator and the layout, unless the
 * plugin registered weft_layout_strided_fallback for its key.  The layout
 * goes with the registrar (unload); a plugin with live tensors of its
 * layout is not unloaded (WEFT_EBUSY).  Errors: WEFT_EINVAL (NULL argument,
 * bad name, missing release or to_strided, struct_size too small),
 * WEFT_EEXIST (the name is taken; the message names the plugin holding
 * it), WEFT_ENOMEM (all WEFT_MAX_LAYOUTS ids in use).  Thread-safe. */
WEFT_API int weft_register_layout(weft_registrar *reg, const weft_layout_interface *iface,
                                  int *layout_out);
/* The dispatch key of plugin layout id, or WEFT_EINVAL for strided or an
 * unregistered id. */
WEFT_API int weft_layout_key(int layout);
/* Makes a tensor of plugin layout `layout` with logical shape sizes[ndim],
 * dtype and device, owning payload: from this call on, payload belongs to
 * the core, which gives it to the layout's release exactly once, when the
 * tensor dies, or at once when this call fails.  Errors: WEFT_EINVAL (NULL
 * out, strided or unknown layout, bad shape or dtype), WEFT_EDEVICE,
 * WEFT_EOVERFLOW, WEFT_EBUSY (the layout's plugin is being unloaded),
 * WEFT_ENOMEM.  Thread-safe. */
WEFT_API int weft_tensor_new_layout(weft_tensor **out, int layout, const int64_t *sizes, int ndim,
                                    weft_dtype dtype, weft_device device, void *payload);
/* The payload of a tensor of a plugin layout (borrowed; lives as long as
 * t), or NULL for a strided or NULL tensor. */
WEFT_API void *weft_tensor_layout_payload(const weft_tensor *t);
/* A boxed kernel a plugin registers at WEFT_KEY_AUTOGRAD (all backends) for
 * an operator of its own that has no gradient formula, so that no gradient
 * is ever dropped silently: with grad mode on and a tensor argument that
 * requires grad it fails with WEFT_ENOTSUP naming the operator; otherwise
 * the call goes on below autograd as if it were not there.  ctx is unused.
 * Thread-safe. */
WEFT_API int weft_not_differentiable_kernel(weft_call *call, void *ctx);
/* A boxed kernel a layout plugin may register as the fallback of its key
 * (weft_register_fallback(reg, weft_layout_key(id), WEFT_ALL_BACKENDS,
 * weft_layout_strided_fallback, NULL, NULL)): an operator the layout has no
 * kernel for converts the layout's tensors to strided and runs the strided
 * kernels; the results are strided.  It refuses an operator that writes a
 * tensor of the layout in place (WEFT_ENOTSUP, naming both). */
WEFT_API int weft_layout_strided_fallback(weft_call *call, void *ctx);

/* The dispatch key set of a tensor. */
WEFT_API weft_keyset weft_tensor_keys(const weft_tensor *t);
/* Marks an in-place write: bumps the storage's version.  Kernels that write
 * an argument do not call this; the dispatcher does. */
WEFT_API void weft_tensor_bump_version(const weft_tensor *t);
/* Changes t's sizes to a contiguous shape, reallocating its storage if it
 * is too small (used for out= arguments with zero elements). */
WEFT_API int weft_tensor_resize(weft_tensor *t, const int64_t *sizes, int ndim);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PLUGIN_H */
