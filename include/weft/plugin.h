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

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The plugin ABI.  The major changes only when a struct below changes
 * incompatibly; the core refuses a plugin with another major.  The minor
 * grows when something is appended: a plugin built against an older minor
 * keeps working. */
#define WEFT_PLUGIN_ABI_MAJOR 1
#define WEFT_PLUGIN_ABI_MINOR 0

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
 * All of these are thread-safe. */
/* Fills *out (set out->struct_size first; a smaller, older struct gets its
 * prefix).  Errors: WEFT_EINVAL (NULL, or struct_size too small). */
WEFT_API int weft_host_allocator_stats(weft_allocator_stats *out);
/* Sets the cache limit in bytes and trims the cache down to it at once. */
WEFT_API void weft_host_cache_set_limit(size_t bytes);
WEFT_API size_t weft_host_cache_limit(void);
/* Gives every cached block back to the system (live blocks are untouched). */
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
} weft_device_interface;

/* Registers a new device type by name; *type_out receives its id.  The
 * allocator is required.  Errors: WEFT_EEXIST (name taken; the message names
 * the plugin that holds it), WEFT_ENOMEM (every id is used), WEFT_EINVAL. */
WEFT_API int weft_register_device_type(weft_registrar *reg, const char *name,
                                       const weft_device_interface *iface,
                                       const weft_allocator *alloc, int *type_out);
/* Provides the interface and allocator of a reserved type (CUDA, HIP). */
WEFT_API int weft_register_reserved_device(weft_registrar *reg, int type,
                                           const weft_device_interface *iface,
                                           const weft_allocator *alloc);
/* Replaces the allocator of a device type (e.g. a caching host allocator);
 * the previous one is restored when the registration is released. */
WEFT_API int weft_register_allocator(weft_registrar *reg, int type, const weft_allocator *alloc,
                                     weft_registration **handle);

/* ------------------------------------------------- helpers for kernels */

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
