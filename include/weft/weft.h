/* weft.h — the public C API of libweft: tensors, dtypes, devices, errors,
 * generators, the dispatcher's call interface and the plugin loader.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *  - Fallible functions return 0 or a negative WEFT_E* code.  On error the
 *    calling thread's message (weft_last_error) says what went wrong, and
 *    every out-pointer is left NULL: nothing is leaked, nothing is half-made.
 *  - "Returns a new reference" means the caller owns one reference and must
 *    drop it with weft_tensor_release.  Input tensors are borrowed.
 *  - Every function is thread-safe: distinct threads may use distinct or
 *    shared tensors at once, except that writing a tensor's elements while
 *    another thread reads them is a data race, as with any array.
 *
 * The operators themselves (weft_add, weft_matmul, ...) are generated from
 * the operator table and declared in <weft/ops.h>, included at the end.
 * DLPack lives in <weft/dlpack.h>; plugin authors add <weft/plugin.h>.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

/* ---------------------------------------------------------------- errors */

/* One table gives the codes, their names and their messages, so the three
 * cannot drift apart. */
#define WEFT_ERROR_TABLE(X)                                                   \
    X(WEFT_OK, 0, "success")                                                  \
    X(WEFT_EINVAL, -1, "invalid argument")                                    \
    X(WEFT_ENOMEM, -2, "out of memory")                                       \
    X(WEFT_ESHAPE, -3, "shape mismatch")                                      \
    X(WEFT_EDTYPE, -4, "unsupported or mismatched dtype")                     \
    X(WEFT_EDEVICE, -5, "unknown device or device mismatch")                  \
    X(WEFT_ERANGE, -6, "index or dimension out of range")                     \
    X(WEFT_EOVERFLOW, -7, "size overflows int64")                             \
    X(WEFT_ENOKERNEL, -8, "no kernel registered for this operator and keys")  \
    X(WEFT_ENOTFOUND, -9, "not found")                                        \
    X(WEFT_EPLUGIN, -10, "plugin failed to load")                             \
    X(WEFT_EABI, -11, "plugin ABI version mismatch")                          \
    X(WEFT_EEXIST, -12, "already exists")                                     \
    X(WEFT_EBUSY, -13, "resource is still in use")                            \
    X(WEFT_ENOTSUP, -14, "operation not supported")                           \
    X(WEFT_EIO, -15, "input/output error")                                    \
    X(WEFT_EINTERNAL, -16, "internal error")

typedef enum weft_error {
#define WEFT_X_(name, code, text) name = code,
    WEFT_ERROR_TABLE(WEFT_X_)
#undef WEFT_X_
} weft_error;

/* The calling thread's message for its most recent error: never NULL, valid
 * until the thread's next weft call.  Thread-safe (thread-local). */
WEFT_API const char *weft_last_error(void);
/* The fixed text of an error code ("unknown error" for anything else).
 * The string is static.  Thread-safe. */
WEFT_API const char *weft_strerror(int code);
/* The symbolic name of an error code ("WEFT_EINVAL"), static. */
WEFT_API const char *weft_error_name(int code);
/* Clears the calling thread's message. */
WEFT_API void weft_clear_error(void);

/* Formats sizes as "[2, 3]" ("[]" for a 0-d tensor) into buf, truncated to
 * size bytes (NUL-terminated when size > 0); returns buf.  For messages
 * that name a shape the way the core's own do.  Thread-safe. */
WEFT_API const char *weft_format_shape(char *buf, size_t size, const int64_t *sizes, int ndim);

/* --------------------------------------------------------------- memory */

/* malloc, calloc, realloc and strdup as weft makes its own allocations:
 * the same memory as the C library's (free it with free() or weft_free),
 * but subject to weft_fault_inject_alloc, so a plugin or an application
 * that allocates through them takes part in allocation-failure tests.
 * Thread-safe. */
WEFT_API void *weft_malloc(size_t n);
WEFT_API void *weft_calloc(size_t n, size_t size);
WEFT_API void *weft_realloc(void *p, size_t n);
WEFT_API char *weft_strdup(const char *s);
WEFT_API void weft_free(void *p);
/* Allocation fault injection, for tests (SQLite's test malloc): after n more
 * allocations through weft's own paths (the core's tables, tensors and their
 * storage from the host allocator, the autograd graph, the loader, nn, and
 * weft_malloc & co.) succeed, the next one fails; with keep_failing every
 * later one fails too.  n < 0 disarms.  Returns how many allocations were
 * made to fail since the previous call, so a sweep knows when a program ran
 * to its end without reaching the n-th allocation.  Process-wide: meant for
 * single-threaded tests; allocations on other threads count too. */
WEFT_API long weft_fault_inject_alloc(long n, int keep_failing);

/* ---------------------------------------------------------------- dtypes */

typedef enum weft_dtype {
    WEFT_BOOL = 0,
    WEFT_UINT8,
    WEFT_INT8,
    WEFT_INT16,
    WEFT_INT32,
    WEFT_INT64,
    WEFT_FLOAT16,
    WEFT_BFLOAT16,
    WEFT_FLOAT32,
    WEFT_FLOAT64,
    WEFT_COMPLEX64,
    WEFT_COMPLEX128,
    WEFT_NUM_DTYPES,
    /* "no dtype given": optional dtype arguments take this */
    WEFT_DTYPE_UNSET = -1
} weft_dtype;

/* Name as PyTorch prints it without the "torch." prefix ("float32"), or
 * "invalid".  Static string; thread-safe. */
WEFT_API const char *weft_dtype_name(weft_dtype dtype);
/* Parses "float32", "float", "int64", "long", ... Returns WEFT_DTYPE_UNSET if
 * the name is unknown. */
WEFT_API weft_dtype weft_dtype_from_name(const char *name);
/* Bytes per element, or 0 for an invalid dtype. */
WEFT_API size_t weft_dtype_size(weft_dtype dtype);
WEFT_API bool weft_dtype_is_floating(weft_dtype dtype); /* f16, bf16, f32, f64 */
WEFT_API bool weft_dtype_is_complex(weft_dtype dtype);
WEFT_API bool weft_dtype_is_integral(weft_dtype dtype, bool include_bool);
/* PyTorch's promote_types: the smallest dtype both values fit in
 * (int64 + float16 -> float16, uint8 + int8 -> int16, bool + x -> x,
 * float16 + bfloat16 -> float32, ...).  WEFT_DTYPE_UNSET for invalid input. */
WEFT_API weft_dtype weft_promote_types(weft_dtype a, weft_dtype b);
/* PyTorch's can_cast: whether an operator may write a result of dtype `from`
 * into an output of dtype `to` (no float -> integral, complex -> real or
 * non-bool -> bool). */
WEFT_API bool weft_can_cast(weft_dtype from, weft_dtype to);

/* --------------------------------------------------------------- devices */

/* Device types: CPU is built in, CUDA and HIP have reserved ids so DLPack and
 * serialised data stay stable; every other type is registered at run time by
 * a plugin and gets an id from WEFT_DEVICE_TYPE_FIRST_DYNAMIC up. */
enum {
    WEFT_DEVICE_TYPE_CPU = 0,
    WEFT_DEVICE_TYPE_CUDA = 1,
    WEFT_DEVICE_TYPE_HIP = 2,
    WEFT_DEVICE_TYPE_FIRST_DYNAMIC = 3,
    /* One dispatch-key backend bit per type: see weft_keyset below. */
    WEFT_MAX_DEVICE_TYPES = 40
};

typedef struct weft_device {
    int16_t type;  /* a WEFT_DEVICE_TYPE_* id */
    int16_t index; /* which device of that type; 0 for the host */
} weft_device;

#ifdef __cplusplus
#define WEFT_DEVICE_CPU (weft_device{WEFT_DEVICE_TYPE_CPU, 0})
#else
#define WEFT_DEVICE_CPU ((weft_device){WEFT_DEVICE_TYPE_CPU, 0})
#endif

static inline bool weft_device_equal(weft_device a, weft_device b)
{
    return a.type == b.type && a.index == b.index;
}

/* The name of a registered device type ("cpu", "cuda", "mydev"), or NULL if
 * the id is not registered.  The string lives as long as the type. */
WEFT_API const char *weft_device_type_name(int type);
/* Looks a device type up by name.  Returns its id or WEFT_ENOTFOUND. */
WEFT_API int weft_device_type_from_name(const char *name);
/* Number of devices of a type (1 for the CPU; whatever the plugin reports
 * for others; 0 for a reserved type no plugin provides). */
WEFT_API int weft_device_count(int type);
/* What a device type is, as its plugin says (weft_device_interface.kind,
 * plugin ABI 1.2): an accelerator has a processor and memory of its own (a
 * GPU); an emulated device runs its work on the host CPU (a test device, a
 * simulator, an OpenCL driver on the CPU); the host is the CPU itself.
 * Unknown: the plugin does not say (it was built before ABI 1.2). */
typedef enum weft_device_kind {
    WEFT_DEVICE_KIND_UNKNOWN = 0,
    WEFT_DEVICE_KIND_HOST = 1,
    WEFT_DEVICE_KIND_ACCELERATOR = 2,
    WEFT_DEVICE_KIND_EMULATED = 3
} weft_device_kind;
/* The kind of a device type (>= 0), or WEFT_EDEVICE when no plugin provides
 * the type: an id that is not registered, or a reserved name ("cuda",
 * "hip") whose plugin is not loaded.  So it also says whether a type can be
 * used at all.  A kind outside the enum (from a newer plugin) reads as
 * WEFT_DEVICE_KIND_UNKNOWN.  Thread-safe. */
WEFT_API int weft_device_type_kind(int type);
/* Parses "cpu", "cuda", "cuda:1", "mydev:3".  Errors: WEFT_EINVAL for a
 * malformed string, WEFT_EDEVICE for an unknown type. */
WEFT_API int weft_device_from_string(weft_device *out, const char *text);
/* Writes "cpu" or "cuda:1" into buf (always NUL-terminated); returns the
 * length the full text needs, like snprintf. */
WEFT_API int weft_device_to_string(weft_device device, char *buf, size_t size);

/* Streams and events (issue 7): queues of device work and markers in them,
 * for devices whose plugin provides them (weft_device_interface, ABI 1.1).
 * A live stream or event keeps its plugin loaded (weft_unload_plugin says
 * WEFT_EBUSY).  Errors of every call below: WEFT_EINVAL (NULL argument),
 * WEFT_EDEVICE (unknown or absent device, or two objects of different
 * devices), WEFT_ENOTSUP (the plugin does not provide that function),
 * WEFT_EBUSY (the plugin is being unloaded), or the plugin's own code.
 * Thread-safe: a stream may be used from several threads at once as far as
 * its plugin allows. */
typedef struct weft_stream weft_stream;
typedef struct weft_event weft_event;
/* A new stream on device; *out gets the caller's reference. */
WEFT_API int weft_stream_create(weft_stream **out, weft_device device);
/* Drops the caller's reference; the plugin's stream is destroyed when no
 * thread has it as its current stream either.  NULL is a no-op. */
WEFT_API void weft_stream_destroy(weft_stream *stream);
/* Waits until everything queued on the stream has finished. */
WEFT_API int weft_stream_synchronize(weft_stream *stream);
/* 1 if everything queued has finished, 0 if not, or a negative code. */
WEFT_API int weft_stream_query(weft_stream *stream);
WEFT_API weft_device weft_stream_device(const weft_stream *stream);
/* The plugin's handle of the stream (NULL for NULL: the default stream). */
WEFT_API void *weft_stream_handle(const weft_stream *stream);
/* Makes stream the calling thread's current stream for device (holding a
 * reference to it until replaced, or until the thread exits); NULL goes
 * back to the default stream.  The stream must be on device. */
WEFT_API int weft_set_current_stream(weft_device device, weft_stream *stream);
/* The calling thread's current stream for device (borrowed), or NULL for
 * the device's default stream. */
WEFT_API weft_stream *weft_current_stream(weft_device device);
/* A new event on device; *out is owned by the caller. */
WEFT_API int weft_event_create(weft_event **out, weft_device device);
/* Destroys an event.  NULL is a no-op. */
WEFT_API void weft_event_destroy(weft_event *event);
/* Records event on stream (NULL: the thread's current stream of the
 * event's device). */
WEFT_API int weft_event_record(weft_event *event, weft_stream *stream);
/* Makes work queued later on stream (NULL: current) wait for event. */
WEFT_API int weft_stream_wait_event(weft_stream *stream, weft_event *event);
/* 1 if the event has completed, 0 if not, or a negative code. */
WEFT_API int weft_event_query(weft_event *event);
WEFT_API int weft_event_synchronize(weft_event *event);
/* Milliseconds from start to end, two recorded events of one device. */
WEFT_API int weft_event_elapsed_ms(float *ms, const weft_event *start, const weft_event *end);

/* --------------------------------------------------------------- tensors */

/* A strided view of a storage: sizes, strides (in elements), offset, dtype,
 * device.  Opaque and reference counted with atomics; views share storage. */
typedef struct weft_tensor weft_tensor;

/* The most dimensions a tensor may have. */
#define WEFT_MAX_DIMS 64

/* Adds a reference; returns t.  NULL is a no-op returning NULL. */
WEFT_API weft_tensor *weft_tensor_retain(const weft_tensor *t);
/* Drops a reference; the last one frees the tensor (and its storage when no
 * other view holds it).  NULL is a no-op. */
WEFT_API void weft_tensor_release(weft_tensor *t);
/* Gives back a list that an operator returning Tensor[] put into its out
 * pointer (weft_split, weft_unbind, ...): releases each of the len tensors
 * (NULL entries are skipped) and frees the array, which the core allocated.
 * NULL is a no-op.  Thread-safe for distinct lists. */
WEFT_API void weft_tensor_list_free(weft_tensor **list, int len);

/* Allocates an uninitialised contiguous tensor.  sizes may be NULL when
 * ndim == 0 (a 0-d tensor holding one element).  Returns a new reference.
 * Errors: WEFT_EINVAL (NULL out, negative ndim or size, bad dtype),
 * WEFT_EOVERFLOW (the byte size overflows), WEFT_EDEVICE (unknown device or
 * no allocator for it), WEFT_ENOMEM. */
WEFT_API int weft_empty(weft_tensor **out, const int64_t *sizes, int ndim,
                        weft_dtype dtype, weft_device device);
/* Like weft_empty, filled with 0 or 1 (through the fill_ operator, so the
 * device's plugin must be loaded). */
WEFT_API int weft_zeros(weft_tensor **out, const int64_t *sizes, int ndim,
                        weft_dtype dtype, weft_device device);
WEFT_API int weft_ones(weft_tensor **out, const int64_t *sizes, int ndim,
                       weft_dtype dtype, weft_device device);
/* Filled with value (converted to dtype). */
WEFT_API int weft_full(weft_tensor **out, const int64_t *sizes, int ndim,
                       double value, weft_dtype dtype, weft_device device);
/* A tensor of the same sizes, dtype and device as t. */
WEFT_API int weft_empty_like(weft_tensor **out, const weft_tensor *t);

/* Wraps memory the caller owns.  strides (in elements) may be NULL for
 * contiguous.  deleter(deleter_ctx), if not NULL, is called exactly once when
 * the last view of the memory dies — also when this call fails, so the caller
 * never has to clean up after an error.  Returns a new reference. */
WEFT_API int weft_from_blob(weft_tensor **out, void *data, const int64_t *sizes,
                            const int64_t *strides, int ndim, weft_dtype dtype,
                            weft_device device, void (*deleter)(void *ctx),
                            void *deleter_ctx);

/* Metadata.  The arrays stay valid while t lives and its metadata is not
 * changed (views never change their source's metadata). */
WEFT_API int weft_tensor_ndim(const weft_tensor *t);
WEFT_API const int64_t *weft_tensor_sizes(const weft_tensor *t);
WEFT_API const int64_t *weft_tensor_strides(const weft_tensor *t);
WEFT_API int64_t weft_tensor_size(const weft_tensor *t, int dim);   /* dim may be negative; -1 if out of range */
WEFT_API int64_t weft_tensor_stride(const weft_tensor *t, int dim); /* likewise */
WEFT_API int64_t weft_tensor_numel(const weft_tensor *t);
WEFT_API weft_dtype weft_tensor_dtype(const weft_tensor *t);
/* PyTorch's result_type over the tensors `ts[0..n)` (NULL entries skipped):
 * the dtype an operator computes in.  Tensors with dimensions promote among
 * themselves, zero-dim tensors among themselves, and a zero-dim tensor
 * raises the result only when its category (bool < integer < floating <
 * complex) is higher, then as weft_promote_types: float32 (2, 3) with a
 * float64 0-d tensor computes in float32, int8 (2, 3) with an int64 0-d one
 * in int8, int32 (2, 3) with a float64 0-d one in float64.  A float result
 * meeting a 0-d complex
 * one gives the complex dtype of the float's precision (complex128 for
 * float64, else complex64: weft has no complex32).  WEFT_DTYPE_UNSET when
 * no tensor is given or a dtype is invalid.  Reads only the tensors'
 * metadata; thread-safe as any reader of them. */
WEFT_API weft_dtype weft_result_type(const weft_tensor *const *ts, int n);
WEFT_API weft_device weft_tensor_device(const weft_tensor *t);
WEFT_API int64_t weft_tensor_storage_offset(const weft_tensor *t);
/* Address of the first element (storage offset applied). */
WEFT_API void *weft_tensor_data_ptr(const weft_tensor *t);
WEFT_API bool weft_tensor_is_contiguous(const weft_tensor *t);
/* Whether a and b view the same storage. */
WEFT_API bool weft_tensor_shares_storage(const weft_tensor *a, const weft_tensor *b);
/* The version of t's storage: bumped by every in-place write through any of
 * its views. */
WEFT_API uint32_t weft_tensor_version(const weft_tensor *t);
WEFT_API bool weft_tensor_is_read_only(const weft_tensor *t);

/* Reads one element of a host tensor as double (real part for complex).
 * index has ndim entries.  Errors: WEFT_ERANGE, WEFT_EDEVICE (not on host). */
WEFT_API int weft_tensor_get(const weft_tensor *t, const int64_t *index, double *value);
/* The single element of a one-element tensor of any shape, as double. */
WEFT_API int weft_tensor_item(const weft_tensor *t, double *value);

/* ----------------------------------------------------------------- views */

/* Every view returns a new reference that shares t's storage and version.
 * Dimensions may be negative (counted from the end).  Errors: WEFT_ERANGE for
 * a dimension or index out of range, WEFT_ESHAPE for sizes that do not fit,
 * WEFT_EINVAL for NULL arguments. */
/* view: sizes may hold one -1 that is inferred.  Fails with WEFT_ESHAPE when
 * t's strides cannot express the new shape without a copy. */
WEFT_API int weft_view(weft_tensor **out, const weft_tensor *t, const int64_t *sizes, int ndim);
/* reshape: a view when possible, else a contiguous copy. */
WEFT_API int weft_reshape(weft_tensor **out, const weft_tensor *t, const int64_t *sizes, int ndim);
WEFT_API int weft_permute(weft_tensor **out, const weft_tensor *t, const int64_t *dims, int ndim);
WEFT_API int weft_transpose(weft_tensor **out, const weft_tensor *t, int dim0, int dim1);
/* t(): transpose of a tensor with at most 2 dims. */
WEFT_API int weft_t(weft_tensor **out, const weft_tensor *t);
WEFT_API int weft_narrow(weft_tensor **out, const weft_tensor *t, int dim, int64_t start, int64_t length);
/* slice: Python's t[start:end:step] along dim; start and end are clamped as
 * Python does (negative counts from the end); step must be positive. */
WEFT_API int weft_slice(weft_tensor **out, const weft_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
WEFT_API int weft_select(weft_tensor **out, const weft_tensor *t, int dim, int64_t index);
/* expand: sizes may use -1 to keep a dimension; new leading dims allowed. */
WEFT_API int weft_expand(weft_tensor **out, const weft_tensor *t, const int64_t *sizes, int ndim);
/* squeeze all size-1 dims (dim == WEFT_ALL_DIMS) or the given one. */
#define WEFT_ALL_DIMS INT32_MIN
WEFT_API int weft_squeeze(weft_tensor **out, const weft_tensor *t, int dim);
WEFT_API int weft_unsqueeze(weft_tensor **out, const weft_tensor *t, int dim);
/* flatten dims start..end (inclusive) into one; a view when possible. */
WEFT_API int weft_flatten(weft_tensor **out, const weft_tensor *t, int start_dim, int end_dim);
/* as_strided: any sizes/strides/offset inside t's storage (checked). */
WEFT_API int weft_as_strided(weft_tensor **out, const weft_tensor *t, const int64_t *sizes,
                             const int64_t *strides, int ndim, int64_t storage_offset);
/* t itself (a new reference) when contiguous, else a contiguous copy. */
WEFT_API int weft_contiguous(weft_tensor **out, const weft_tensor *t);
/* A new contiguous tensor of the given dtype holding t's values (always a
 * copy, even when the dtype is unchanged). */
WEFT_API int weft_to_dtype(weft_tensor **out, const weft_tensor *t, weft_dtype dtype);
/* A copy on another device (or a new reference when already there). */
WEFT_API int weft_to_device(weft_tensor **out, const weft_tensor *t, weft_device device);
/* A new tensor that shares t's storage and version but is its own object. */
WEFT_API int weft_alias(weft_tensor **out, const weft_tensor *t);

/* ------------------------------------------------------------ broadcasting */

/* Broadcasts two shapes as NumPy and PyTorch do.  out must hold
 * max(na, nb) entries; *nout receives the result's rank.  Errors:
 * WEFT_ESHAPE naming both shapes and the first dimension that disagrees. */
WEFT_API int weft_broadcast_shapes(int64_t *out, int *nout, const int64_t *a, int na,
                                   const int64_t *b, int nb);

/* -------------------------------------------------------------- printing */

/* Formats t the way PyTorch prints it ("tensor([1., 2.])", with dtype and
 * device suffixes where PyTorch shows them, summarised with "..." beyond
 * 1000 elements).  Returns a malloc'd string the caller frees with free(),
 * through *out.  Non-host tensors are copied to the host to print. */
WEFT_API int weft_tensor_to_string(char **out, const weft_tensor *t);
/* Prints to a FILE* (as void* to keep <stdio.h> out of this header). */
WEFT_API int weft_tensor_print(const weft_tensor *t, void *file);

/* ------------------------------------------------------------- generators */

/* A counter-based random generator (Philox 4x32-10): its state is a seed and
 * an offset, so the numbers a kernel draws depend only on the seed and the
 * element index, never on the thread count.  Thread-safe: drawing advances
 * the offset atomically. */
typedef struct weft_generator weft_generator;
WEFT_API int weft_generator_create(weft_generator **out, uint64_t seed);
WEFT_API void weft_generator_destroy(weft_generator *g);
WEFT_API void weft_generator_set_seed(weft_generator *g, uint64_t seed);
WEFT_API uint64_t weft_generator_seed(const weft_generator *g);
/* The process-wide default generator (seed 0 until weft_manual_seed). */
WEFT_API weft_generator *weft_default_generator(void);
WEFT_API void weft_manual_seed(uint64_t seed);
/* Reserves `count` 128-bit Philox blocks: returns the seed in *seed and the
 * first counter in *offset.  g NULL means the default generator.  This is how
 * kernels draw numbers. */
WEFT_API void weft_generator_reserve(weft_generator *g, uint64_t count, uint64_t *seed,
                                     uint64_t *offset);
/* The Philox 4x32-10 block for (seed, counter): four uniformly random 32-bit
 * words.  Pure function. */
WEFT_API void weft_philox(uint64_t seed, uint64_t counter, uint32_t out[4]);

/* Factories drawing from g (NULL: the default generator). */
WEFT_API int weft_rand(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                       weft_device device, weft_generator *g);
WEFT_API int weft_randn(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                        weft_device device, weft_generator *g);
/* torch.randint: integers uniform in [low, high) of dtype (WEFT_INT64 is
 * torch's default), from g (NULL: the default generator) through the
 * random_ operator.  Errors: WEFT_EINVAL (low >= high, bounds the dtype
 * cannot hold), those of weft_empty.  Thread-safe. */
WEFT_API int weft_randint(weft_tensor **out, int64_t low, int64_t high, const int64_t *sizes,
                          int ndim, weft_dtype dtype, weft_device device, weft_generator *g);
/* torch.randperm: a random permutation of 0..n-1 (a uniform shuffle) of
 * dtype, through the randperm_out operator.  Errors: WEFT_EINVAL (n < 0, n
 * too large for the dtype).  Thread-safe. */
WEFT_API int weft_randperm(weft_tensor **out, int64_t n, weft_dtype dtype, weft_device device,
                           weft_generator *g);
/* arange(start, end, step) with PyTorch's length rule ceil((end-start)/step). */
WEFT_API int weft_arange(weft_tensor **out, double start, double end, double step,
                         weft_dtype dtype, weft_device device);
WEFT_API int weft_linspace(weft_tensor **out, double start, double end, int64_t steps,
                           weft_dtype dtype, weft_device device);

/* -------------------------------------------------------------- autograd */

/* Autograd is a dispatch layer: only tensors that require grad (or were
 * computed from one) carry its key, so code that never asks for gradients
 * pays nothing for it.  Grad mode is per thread. */

/* Marks a leaf tensor as wanting a gradient (floating and complex dtypes
 * only).  Errors: WEFT_EINVAL for a non-leaf (its requires_grad follows its
 * inputs), WEFT_EDTYPE for an integral dtype. */
WEFT_API int weft_tensor_set_requires_grad(weft_tensor *t, bool requires_grad);
/* Whether t requires grad: a leaf that was marked, or any tensor computed
 * from one while grad mode was on. */
WEFT_API bool weft_tensor_requires_grad(const weft_tensor *t);
/* Whether t is a leaf: not the result of a recorded operation. */
WEFT_API bool weft_tensor_is_leaf(const weft_tensor *t);
/* The accumulated gradient: a new reference, or NULL in *out when there is
 * none yet.  Errors: WEFT_EINVAL for NULL arguments. */
WEFT_API int weft_tensor_grad(weft_tensor **out, weft_tensor *t);
/* Replaces (grad non-NULL, same shape) or clears (NULL) t's gradient. */
WEFT_API int weft_tensor_set_grad(weft_tensor *t, const weft_tensor *grad);
/* Keeps the gradient of a non-leaf tensor after backward (as a leaf's). */
WEFT_API int weft_tensor_retain_grad(weft_tensor *t);
/* The name of the node that produced t ("MulBackward"), or NULL for a leaf
 * or a tensor that does not require grad. */
WEFT_API const char *weft_tensor_grad_fn_name(const weft_tensor *t);

/* Computes the gradients of outputs with respect to every leaf that
 * requires grad and accumulates them into the leaves' grad.  grad_outputs
 * may be NULL when every output has one element (the gradient 1 is used).
 * retain_graph keeps saved tensors for another backward; create_graph
 * records the backward pass itself so it can be differentiated.  Errors:
 * WEFT_EINVAL (an output that does not require grad, shapes of
 * grad_outputs, a graph already freed), and any error of a backward
 * formula, such as a saved tensor modified in place since (its message
 * names the operator and both versions).  Not thread-safe for two backward
 * passes through the same graph at once. */
WEFT_API int weft_backward(weft_tensor *const *outputs, int n, weft_tensor *const *grad_outputs,
                           bool retain_graph, bool create_graph);
/* torch.autograd.grad: returns the gradients of outputs with respect to
 * inputs in grads[0..ninputs-1] (new references; NULL for an input the
 * outputs do not depend on when allow_unused, else WEFT_EINVAL), without
 * touching any tensor's grad. */
WEFT_API int weft_autograd_grad(weft_tensor **grads, weft_tensor *const *outputs, int n,
                                weft_tensor *const *grad_outputs, weft_tensor *const *inputs,
                                int ninputs, bool retain_graph, bool create_graph,
                                bool allow_unused);
/* Sets the calling thread's grad mode; returns the previous one.  With grad
 * mode off no graph is recorded (torch.no_grad). */
WEFT_API bool weft_set_grad_enabled(bool enabled);
WEFT_API bool weft_is_grad_enabled(void);
/* A new tensor sharing t's storage and version that does not require grad
 * (*out: a new reference, NULL on error).  A tensor of a plugin layout is
 * detached as its layout's alias (the layout interface's view hook, grad
 * mode off for the call): a new payload sharing what the layout shares;
 * a layout without the hook is refused, WEFT_EINVAL naming it.  Thread
 * safety: as any view function (t may be shared; the grad mode touched is
 * the calling thread's). */
WEFT_API int weft_detach(weft_tensor **out, const weft_tensor *t);

/* A hook on the gradient of a tensor: called with the gradient when backward
 * reaches it; may put a replacement (a new reference) in *replace, or leave
 * it NULL to keep the gradient.  Returns 0 or an error code. */
typedef int (*weft_grad_hook_fn)(const weft_tensor *grad, weft_tensor **replace, void *ctx);
WEFT_API int weft_tensor_register_hook(weft_tensor *t, weft_grad_hook_fn fn, void *ctx);
/* The same, and destroy (optional) is called with ctx exactly once, when
 * the hook is freed with its node (the tensor and every graph using the
 * node are gone), on whichever thread releases the node last; so ctx can
 * own what the hook needs (Python's Tensor.register_hook keeps its callable
 * there).  On error destroy is not called and ctx stays the caller's.
 * Errors: WEFT_EINVAL (NULL t or fn, a tensor that does not require grad),
 * WEFT_ENOMEM. */
WEFT_API int weft_tensor_register_hook_ex(weft_tensor *t, weft_grad_hook_fn fn, void *ctx,
                                          void (*destroy)(void *ctx));

/* ---- graph nodes (torch's grad_fn): handles, names, edges and hooks.
 * A weft_node is a reference-counted handle to a node of the graph; every
 * function that gives one out gives a new reference, released with
 * weft_node_release.  Nodes are shared with the graph: hooks added through a
 * handle fire whenever a backward pass runs the node.  Registering or
 * removing hooks while a backward pass runs through the same node is not
 * thread-safe (and a hook must not add or remove hooks of its own node). */
typedef struct weft_node weft_node;

/* The node that produced t (its grad_fn): a new reference, or NULL in *out
 * for a leaf or a tensor that does not require grad (as torch, a leaf's
 * AccumulateGrad node is reached through the next edges of its users).
 * Errors: WEFT_EINVAL for NULL arguments. */
WEFT_API int weft_tensor_grad_fn(weft_node **out, const weft_tensor *t);
WEFT_API weft_node *weft_node_retain(weft_node *node);
WEFT_API void weft_node_release(weft_node *node);
/* "MulBackward", "AccumulateGrad", or a custom function's name; valid while
 * the node lives. */
WEFT_API const char *weft_node_name(const weft_node *node);
/* The number of outputs the node has gradients for (the number of
 * gradients its pre-hooks see) and of next edges (one per differentiable
 * input: the gradients its post-hooks see). */
WEFT_API int weft_node_num_outputs(const weft_node *node);
WEFT_API int weft_node_num_next(const weft_node *node);
/* Next edge i (torch's next_functions[i]): the node the gradient of input i
 * flows to (a new reference, or NULL for an input that needs no gradient)
 * and which of that node's outputs it feeds (input_nr may be NULL).
 * Errors: WEFT_EINVAL for NULL arguments or i out of range. */
WEFT_API int weft_node_next(weft_node **out, int *input_nr, const weft_node *node, int i);
/* The gradient of t's leaf accumulator (AccumulateGrad), created if needed:
 * a new reference.  Errors: WEFT_EINVAL for a non-leaf or a tensor that
 * does not require grad. */
WEFT_API int weft_tensor_grad_accumulator(weft_node **out, weft_tensor *t);

/* A pre-hook runs before the node, after the tensor hooks of its outputs,
 * with the summed gradients of its n outputs (NULL: none arrived); it may
 * put a replacement (a new reference, same shape) in replace[i], which
 * starts NULL, meaning keep.  A post-hook runs after the node with the
 * gradients it computed for its n_in inputs (NULL: none) and the gradients
 * of its outputs it got; it may replace grad_inputs the same way.  Both
 * return 0 or an error code, which stops the backward pass and is its
 * result (the message is prefixed with the node's name).  A node that no
 * gradient reaches in a pass does not run, nor do its hooks.  Hooks run on
 * the thread that runs the backward pass. */
typedef int (*weft_node_pre_hook_fn)(const weft_tensor *const *grad_outputs, int n,
                                     weft_tensor **replace, void *ctx);
typedef int (*weft_node_post_hook_fn)(const weft_tensor *const *grad_inputs, int n_in,
                                      const weft_tensor *const *grad_outputs, int n_out,
                                      weft_tensor **replace, void *ctx);
/* Registers a hook; *handle (optional) gets a nonzero number that removes
 * it.  Hooks run in registration order.  ctx is the caller's and must live
 * as long as the hook.  Errors: WEFT_EINVAL (NULL), WEFT_ENOMEM. */
WEFT_API int weft_node_register_pre_hook(weft_node *node, weft_node_pre_hook_fn fn, void *ctx,
                                         uint64_t *handle);
WEFT_API int weft_node_register_post_hook(weft_node *node, weft_node_post_hook_fn fn, void *ctx,
                                          uint64_t *handle);
/* Removes the hook with this handle.  Errors: WEFT_EINVAL when the node has
 * no such hook (already removed, or another node's). */
WEFT_API int weft_node_remove_hook(weft_node *node, uint64_t handle);

/* ---- custom differentiable functions (torch.autograd.Function).
 * weft_function_apply runs forward with grad mode off; when grad mode is on
 * and an input requires grad it then records one node, named fn->name, whose
 * backward calls fn->backward.  Inside the callbacks, ctx gives access to
 * the user pointer, the saved tensors and needs_input_grad.
 *
 * forward: fills outputs[0..noutputs-1] with new references (never NULL);
 * it may return an input itself (then a new alias of it is the output,
 * unless it was marked dirty).  It may save tensors for backward (inputs,
 * outputs or anything else), mark outputs non-differentiable (integer
 * outputs always are), and mark inputs it modified in place dirty (they
 * must then be returned as outputs: their history moves to the new node;
 * a leaf that requires grad is refused).
 *
 * backward: gets the gradients of the outputs — NULL for an output no
 * gradient arrived at (unused, or non-differentiable) unless
 * fn->materialize_grads, which turns those into zeros of the output's
 * shape — and fills grad_inputs[i] (they start NULL) with new references
 * shaped like input i, or leaves NULL for no gradient (a gradient for an
 * input that needs none is dropped).  A gradient of another dtype is
 * converted.  Written with weft operators, it is itself differentiable:
 * with create_graph it records its own graph (double backward).  An error
 * code it returns ends the backward pass with that code and its message
 * prefixed with the function's name.
 *
 * user and destroy: user is passed through ctx; destroy (optional) is
 * called with it exactly once: when the recorded node is freed (the last
 * output and every graph using it are released), or before
 * weft_function_apply returns when no node was recorded or on error.
 * fn is copied: it need not outlive the call.  Errors: WEFT_EINVAL for bad
 * arguments (NULL outputs, dirty input not returned, in-place on a leaf
 * that requires grad), and any error of forward (message prefixed with the
 * name); on error every outputs[i] is NULL and nothing was recorded.
 * Thread safety: forward runs on the calling thread, backward on the thread
 * running the backward pass; the ctx functions are for those callbacks only. */
typedef struct weft_function_ctx weft_function_ctx;
typedef int (*weft_function_forward_fn)(weft_function_ctx *ctx, weft_tensor *const *inputs,
                                        int ninputs, weft_tensor **outputs, int noutputs);
typedef int (*weft_function_backward_fn)(weft_function_ctx *ctx,
                                         weft_tensor *const *grad_outputs, int noutputs,
                                         weft_tensor **grad_inputs, int ninputs);
typedef struct weft_function {
    const char *name; /* the node's name in errors and weft_node_name ("MyExpBackward") */
    weft_function_forward_fn forward;
    weft_function_backward_fn backward;
    bool materialize_grads; /* zeros instead of NULL grad_outputs */
} weft_function;
WEFT_API int weft_function_apply(weft_tensor **outputs, int noutputs, const weft_function *fn,
                                 void *user, void (*destroy)(void *user),
                                 weft_tensor *const *inputs, int ninputs);
/* The user pointer given to weft_function_apply. */
WEFT_API void *weft_function_user(const weft_function_ctx *ctx);
/* forward only: keeps tensors for backward, with their version at the end of
 * forward (a later in-place write makes weft_function_saved fail, naming the
 * function).  Replaces what was saved before.  Errors: WEFT_EINVAL outside
 * forward or for a NULL tensor, WEFT_ENOMEM. */
WEFT_API int weft_function_save_for_backward(weft_function_ctx *ctx, weft_tensor *const *tensors,
                                             int n);
/* backward only: saved tensor i as a new reference.  Errors: WEFT_EINVAL for
 * an index out of range, a graph already freed, or a tensor modified in place
 * since it was saved (the message names the function and both versions). */
WEFT_API int weft_function_saved(weft_tensor **out, weft_function_ctx *ctx, int i);
/* forward only: output (one of the outputs forward returns) carries no
 * gradient.  input (one of the inputs) was modified in place. */
WEFT_API int weft_function_mark_non_differentiable(weft_function_ctx *ctx, const weft_tensor *output);
WEFT_API int weft_function_mark_dirty(weft_function_ctx *ctx, const weft_tensor *input);
/* Whether input i needs a gradient (false outside the range). */
WEFT_API bool weft_function_needs_input_grad(const weft_function_ctx *ctx, int i);

/* A function of tensors for the gradient checkers: computes one output from
 * n inputs (a new reference in *out).  Returns 0 or an error code. */
typedef int (*weft_tensor_fn)(weft_tensor **out, weft_tensor *const *inputs, int n, void *ctx);
/* Compares the gradients autograd computes for fn with central finite
 * differences (step eps) in float64: inputs must be float64 tensors; those
 * that require grad are checked, element by element (keep them small).
 * Returns 0 when every entry agrees within atol + rtol * |numeric|, else
 * WEFT_EINVAL with a message naming the input, the output and input
 * elements, and both values.  The inputs are perturbed in place and
 * restored.  gradgradcheck checks the gradients of fn's gradient (double
 * backward) the same way, with a fixed random grad_output. */
WEFT_API int weft_gradcheck(weft_tensor_fn fn, void *ctx, weft_tensor *const *inputs, int n,
                            double eps, double atol, double rtol);
WEFT_API int weft_gradgradcheck(weft_tensor_fn fn, void *ctx, weft_tensor *const *inputs, int n,
                                double eps, double atol, double rtol);

/* -------------------------------------------------------------- dispatch */

/* A dispatch key set: one 64-bit word.  Bits 0..WEFT_MAX_DEVICE_TYPES-1 are
 * backend bits (one per device type id); the bits above are functionality
 * keys in priority order, highest bit first.  The call's key set is the union
 * of its tensor arguments' sets, plus the thread's include set, minus its
 * exclude set. */
typedef uint64_t weft_keyset;

typedef enum weft_dispatch_key {
    /* Functionalities, lowest priority first.  Dense, Sparse, Quantized and
     * Autograd are per-backend: one bit each, but one kernel slot per device
     * type. */
    WEFT_KEY_DENSE = WEFT_MAX_DEVICE_TYPES, /* 40 */
    WEFT_KEY_QUANTIZED,                     /* 41 */
    WEFT_KEY_SPARSE,                        /* 42 */
    WEFT_KEY_BACKEND_SELECT,                /* 43: factories choose a backend */
    WEFT_KEY_ADINPLACE_OR_VIEW,             /* 44 */
    WEFT_KEY_AUTOGRAD,                      /* 45 */
    WEFT_KEY_AUTOCAST,                      /* 46 */
    WEFT_KEY_TRACER,                        /* 47 */
    WEFT_KEY_PROFILER,                      /* 48 */
    WEFT_KEY_PYTHON,                        /* 49 */
    WEFT_KEY_USER1,                         /* 50..53: for wrapper layers of plugins */
    WEFT_KEY_USER2,
    WEFT_KEY_USER3,
    WEFT_KEY_USER4,
    WEFT_KEY_END,
    /* 54..61: the keys of plugin layouts, one per registered layout
     * (weft_layout_key in <weft/plugin.h>), given out at registration so
     * that a third party adds a layout without a new enum value.  They rank
     * between the backend data keys (Dense, Quantized, Sparse) and the
     * wrapper keys (BackendSelect and above): Autograd sees a layout tensor
     * first, then the layout's kernel, and no dense kernel ever does. */
    WEFT_KEY_LAYOUT_FIRST = WEFT_KEY_END,
    WEFT_KEY_LAYOUT_LAST = WEFT_KEY_LAYOUT_FIRST + 7,
    /* Pseudo-keys for registration only: a kernel used for every backend
     * (an implementation written with other operators). */
    WEFT_KEY_COMPOSITE = 62,
    WEFT_KEY_INVALID = 63
} weft_dispatch_key;

#define WEFT_KEYSET_BIT(k) ((weft_keyset)1 << (k))
/* ------------------------------------------------------------- layouts */

/* How a tensor's elements are stored.  WEFT_LAYOUT_STRIDED (sizes, strides
 * and one storage) is built in; plugins add others (a sparse format, a
 * quantized one) with weft_register_layout (<weft/plugin.h>) and get ids
 * 1..WEFT_MAX_LAYOUTS.  A tensor of a plugin layout keeps its elements in
 * a payload only its plugin reads: weft_tensor_data_ptr is NULL for it and
 * every strided-only function (views, contiguous, DLPack export...)
 * refuses it with WEFT_EINVAL naming the function and the layout; convert
 * with weft_to_strided (ops.h).  All functions here are thread-safe. */
enum { WEFT_LAYOUT_STRIDED = 0, WEFT_MAX_LAYOUTS = 8 };
/* t's layout id (0 for strided; a NULL t reads as strided). */
WEFT_API int weft_tensor_layout(const weft_tensor *t);
/* A layout's name ("strided", or the name its plugin registered), or NULL
 * for an id that names no layout now.  The string lives until the layout's
 * plugin is unloaded. */
WEFT_API const char *weft_layout_name(int layout);
/* The id of the layout called name.  Errors: WEFT_EINVAL (NULL name),
 * WEFT_ENOTFOUND (no such layout is registered; the message lists those
 * that are). */
WEFT_API int weft_layout_lookup(const char *name);
/* The name of the plugin that registered layout ("core" for strided), or
 * NULL for an unknown id. */
WEFT_API const char *weft_layout_plugin(int layout);
/* Layout flags, which a plugin sets in weft_layout_interface.flags.
 * WEFT_LAYOUT_VIEWS_COPY: the layout's views (weft_select, weft_narrow,
 * weft_transpose... of its tensors) are new tensors sharing nothing
 * writable with the original (a sparse tensor's, as torch's), so a write
 * into one never reaches it; Python's t[i] = x refuses such a layout
 * instead of writing into a temporary.  Without it the views share the
 * tensor's memory, as the quantized layout's do. */
enum { WEFT_LAYOUT_VIEWS_COPY = 1 << 0 };
/* The flags layout's plugin registered (0 for strided, and for a plugin
 * that set none), or WEFT_EINVAL for an id that names no layout now. */
WEFT_API int weft_layout_flags(int layout);
/* Bytes held by t's elements: its storage's span for a strided tensor, what
 * the layout's interface reports (or 0 when it reports nothing) for others.
 * A NULL t is 0. */
WEFT_API int64_t weft_tensor_nbytes(const weft_tensor *t);

/* *out = t in the strided layout: t itself (a new reference) when it is
 * strided, else a new tensor from its layout's conversion.  Differentiable:
 * the gradient flows back converted to t's layout (its plugin's
 * from_strided; a layout without one refuses in backward, naming itself).
 * Errors: WEFT_EINVAL (NULL argument), the plugin's conversion errors.
 * Thread-safe. */
WEFT_API int weft_to_strided(weft_tensor **out, const weft_tensor *t);
/* *out = t converted to layout (an id from weft_layout_lookup): t itself
 * when already of that layout; a plugin layout is reached through strided.
 * Differentiable (the gradient flows back through to_strided).  Errors:
 * WEFT_EINVAL (NULL argument, unknown layout), WEFT_ENOTSUP (the layout has
 * no from_strided), the plugin's errors.  Thread-safe. */
WEFT_API int weft_to_layout(weft_tensor **out, const weft_tensor *t, int layout);

/* The name of a dispatch key ("Dense", "Autograd"). */
WEFT_API const char *weft_dispatch_key_name(int key);
/* Formats a key set as "{Dense, CPU}". Returns snprintf's length. */
WEFT_API int weft_keyset_to_string(weft_keyset ks, char *buf, size_t size);

/* Thread-local include and exclude sets (no-grad mode excludes Autograd).
 * set returns the previous values so that a caller can restore them. */
WEFT_API void weft_dispatch_tls_get(weft_keyset *included, weft_keyset *excluded);
WEFT_API void weft_dispatch_tls_set(weft_keyset included, weft_keyset excluded);

/* Boxed values: the one calling convention every kernel shares. */
typedef enum weft_value_tag {
    WEFT_VALUE_NONE = 0,
    WEFT_VALUE_TENSOR,
    WEFT_VALUE_INT,
    WEFT_VALUE_DOUBLE,
    WEFT_VALUE_BOOL,
    WEFT_VALUE_INT_LIST,
    WEFT_VALUE_TENSOR_LIST,
    WEFT_VALUE_DTYPE,
    WEFT_VALUE_DEVICE,
    WEFT_VALUE_GENERATOR,
    WEFT_VALUE_STRING,
    WEFT_VALUE_DOUBLE_LIST /* float[]: len entries at u.doubles */
} weft_value_tag;

typedef struct weft_value {
    int32_t tag; /* weft_value_tag */
    int32_t len; /* number of entries for the list tags */
    union {
        weft_tensor *tensor; /* borrowed in arguments; owned in results */
        int64_t i;
        double d;
        bool b;
        const int64_t *ints;
        weft_tensor *const *tensors; /* a NULL entry is None, for Tensor?[] only */
        weft_dtype dtype;
        weft_device device;
        weft_generator *generator;
        const char *string;
        const double *doubles;
    } u;
} weft_value;

/* An operator: a name and a schema, from the operator table or defined by a
 * plugin.  Handles live for the whole process. */
typedef struct weft_op weft_op;

/* Looks an operator up by its C name ("add", "add_", "add_out", "sum").
 * Thread-safe.  Errors: WEFT_ENOTFOUND. */
WEFT_API int weft_op_find(const weft_op **out, const char *name);
WEFT_API const char *weft_op_name(const weft_op *op);
/* The schema text, e.g. "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor". */
WEFT_API const char *weft_op_schema(const weft_op *op);
/* Number of operators and the i-th one (in table order). */
WEFT_API int weft_op_count(void);
WEFT_API const weft_op *weft_op_at(int i);

/* Calls op with boxed arguments.  args must match the schema (checked:
 * count, tags, NULL tensors).  rets receives the results: tensors are new
 * references.  nrets must be at least the schema's number of results
 * (0 for in-place and out= operators). */
WEFT_API int weft_call_boxed(const weft_op *op, const weft_value *args, int nargs,
                             weft_value *rets, int nrets);

/* Writes the computed kernel table of op — for every dispatch key and device
 * type that has an entry: the kernel's kind (kernel, composite, fallback,
 * fallthrough) and the plugin that registered it — as text.  Returns a
 * malloc'd string in *out (free()).  Also lists fallthrough and missing
 * keys. */
WEFT_API int weft_op_dump_table(char **out, const weft_op *op);

/* ---------------------------------------------------------- CPU fallback */

/* An operator that a device's plugin has no kernel for runs on the CPU
 * backend instead: the device tensors it reads are copied to the host
 * through the device interface, the CPU kernel runs, the tensors it wrote
 * are copied back, and new results are copied to the device (functional
 * forms return new tensors on that device; in-place and out= forms write
 * into the device tensor).  Every device type registered by a plugin gets
 * this for its Dense key at the lowest priority, so any kernel, composite or
 * fallback a plugin registers wins.  Tensors on another device (not the
 * host) than the dispatching one are an error (WEFT_EDEVICE).  It costs two
 * copies of every argument, of the bytes each view spans in its storage.
 *
 * The mode says what happens when the fallback is reached:
 *  - WARN (the default): run it, and print one line on stderr the first
 *    time each operator falls back on each device type, naming both;
 *  - SILENT: run it without a word;
 *  - ERROR: do not run it: the call fails with WEFT_ENOKERNEL naming the
 *    operator and the device type.
 * The environment variable WEFT_CPU_FALLBACK=warn|silent|error sets the
 * initial mode (read at the first use); the API overrides it. */
typedef enum weft_cpu_fallback_mode {
    WEFT_CPU_FALLBACK_WARN = 0,
    WEFT_CPU_FALLBACK_SILENT = 1,
    WEFT_CPU_FALLBACK_ERROR = 2
} weft_cpu_fallback_mode;

/* Sets the process-wide mode; returns the previous one (>= 0), or
 * WEFT_EINVAL for an unknown mode.  Thread-safe: calls running in other
 * threads see the new mode at their next fallback. */
WEFT_API int weft_cpu_fallback_set_mode(weft_cpu_fallback_mode mode);
/* The current mode.  Thread-safe. */
WEFT_API weft_cpu_fallback_mode weft_cpu_fallback_get_mode(void);
/* How many operator calls ran through the CPU fallback in this process
 * (counted in WARN and SILENT modes, also when the call then failed).  For
 * tests and profiling: a plugin author sees whether a kernel of theirs is
 * used.  Thread-safe. */
WEFT_API uint64_t weft_cpu_fallback_calls(void);

/* --------------------------------------------------------------- plugins */

/* Adds a directory searched before WEFT_PLUGIN_PATH and the installation's
 * plugin directory.  Copies the string.  Thread-safe. */
WEFT_API int weft_plugin_add_search_path(const char *dir);
/* Finds every plugin file (libweft-*.so) in the search path, chooses the best
 * variant of each plugin name, and loads them.  WEFT_NO_AUTOLOAD=1 makes it
 * load nothing; WEFT_DISABLE_PLUGINS=cpu,foo skips those names;
 * WEFT_PLUGIN_VARIANT=cpu:avx2,foo:bar loads only that variant of each
 * name listed (nothing of the name if it cannot run here).  Plugins
 * already loaded are not loaded twice.  Returns the number of plugins loaded
 * by this call (failures are in the load report), or a negative code.
 * Thread-safe. */
WEFT_API int weft_load_default_plugins(void);
/* Loads one plugin file by path (never searched for in the current
 * directory: a path without '/' is looked up in the search path).  Loading a
 * file that is already loaded returns 0 and does nothing.  Errors:
 * WEFT_ENOTFOUND, WEFT_EPLUGIN (dlopen failed, no entry symbol, init failed:
 * everything it registered is rolled back), WEFT_EABI. */
WEFT_API int weft_load_plugin(const char *path);
/* Unloads a plugin by name: releases all its registrations, waits until no
 * thread is running an operator, allocation or device call that began
 * before (so none can still be in the plugin's code), calls its fini and
 * closes it.  Loading the same path again afterwards runs a new init.
 * Errors: WEFT_ENOTFOUND; WEFT_EBUSY, with a message naming what and how
 * many, while storages its allocators made, streams or events on its
 * devices, or registrations of other registrars that depend on it (kernels,
 * fallbacks or allocators for its device types, kernels for operators it
 * defined) are alive, or when called from inside an operator.  An allocation
 * on the plugin's devices racing with the unload may fail with WEFT_EBUSY.
 * Thread-safe: other threads may dispatch meanwhile. */
WEFT_API int weft_unload_plugin(const char *name);

/* The load report: one row per candidate file considered. */
typedef enum weft_plugin_status {
    WEFT_PLUGIN_LOADED = 0,  /* chosen and initialised */
    WEFT_PLUGIN_SKIPPED,     /* a better variant was chosen, disabled, or not pinned */
    WEFT_PLUGIN_UNSUPPORTED, /* its score says this machine cannot run it */
    WEFT_PLUGIN_FAILED       /* dlopen, entry, ABI or init failed */
} weft_plugin_status;

typedef struct weft_plugin_report {
    const char *path;
    const char *name;      /* plugin name, or NULL if unknown */
    const char *variant;   /* variant label ("avx2"), or NULL */
    weft_plugin_status status;
    const char *error;     /* why it failed or was skipped, or NULL */
    uint32_t abi_major, abi_minor; /* what the plugin declared (0 if unknown) */
    int score;
} weft_plugin_report;

/* Number of rows in the load report, and row i.  The strings stay valid
 * until the next load call.  Thread-safe.  Like every loader call, from
 * inside an operator while weft_unload_plugin waits for operators to end,
 * these return WEFT_EBUSY instead of waiting for the loader. */
WEFT_API int weft_plugin_report_count(void);
WEFT_API int weft_plugin_report_get(int i, weft_plugin_report *out);
/* The report as text, malloc'd (free()). */
WEFT_API int weft_plugin_report_string(char **out);

/* Intra-op thread count (issue 3).  The core holds the number; the CPU
 * backend reads it at the start of each parallel region and grows or shrinks
 * its pool then (and keeps OpenBLAS's count equal), so a change takes effect
 * at the next operator, never in the middle of one.  The initial value is
 * WEFT_NUM_THREADS when that is a whole number >= 1 (capped at
 * WEFT_MAX_THREADS), else the number of CPUs this process may run on.
 * Results do not depend on the count (random kernels included).
 * weft_set_num_threads: n outside [1, WEFT_MAX_THREADS] is WEFT_EINVAL and
 * changes nothing.  Both are thread-safe; the count is process-wide. */
#define WEFT_MAX_THREADS 1024
WEFT_API int weft_set_num_threads(int n);
WEFT_API int weft_get_num_threads(void);

/* Where the CPU backend's pool threads run.  The calling thread is never
 * touched: it belongs to the application.
 *   WEFT_BIND_NONE    the scheduler places the workers (they inherit the
 *                     affinity of the thread that started the pool).
 *   WEFT_BIND_SPREAD  each worker is bound to one CPU of the set the process
 *                     may run on, a different one per worker, starting after
 *                     the CPU the pool's first caller ran on; wraps around
 *                     only when the pool has more workers than CPUs.
 *   WEFT_BIND_AUTO    SPREAD while the thread count is at most the number of
 *                     CPUs the process may run on, NONE beyond (binding an
 *                     oversubscribed pool only makes threads queue).
 * Why bind at all: on a machine whose CPUs are shared, a worker woken after
 * an idle spell is often placed on the CPU of the thread that woke it, and
 * the two then share one CPU for milliseconds until the load balancer moves
 * one (measured in docs/benchmarks.md: a memory-bound reduction at half
 * speed).  Applications that run several weft processes side by side, or
 * place their own threads, choose NONE.
 * The initial mode is WEFT_THREAD_BIND ("auto", "spread" or "none"; any
 * other value is ignored), else AUTO.  A change takes effect at the next
 * parallel operator, which restarts the pool's workers.
 * weft_set_thread_binding: a mode outside the enum is WEFT_EINVAL and
 * changes nothing.  Both are thread-safe; the mode is process-wide. */
typedef enum weft_thread_binding {
    WEFT_BIND_AUTO = 0,
    WEFT_BIND_NONE = 1,
    WEFT_BIND_SPREAD = 2
} weft_thread_binding;
WEFT_API int weft_set_thread_binding(weft_thread_binding mode);
WEFT_API weft_thread_binding weft_get_thread_binding(void);

/* The core's version and the plugin ABI it implements. */
WEFT_API const char *weft_version(void);
WEFT_API void weft_plugin_abi(uint32_t *major, uint32_t *minor);

#ifdef __cplusplus
}
#endif

#include <weft/ops.h>

#endif /* WEFT_WEFT_H */
