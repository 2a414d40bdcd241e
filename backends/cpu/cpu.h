/* backends/cpu/cpu.h — what the CPU plugin's files share: the dtype list that
 * instantiates every kernel, element conversions (float16/bfloat16 included),
 * the thread pool and the elementwise iterator.  Like any out-of-tree plugin
 * it sees only the installed SDK headers, never c10/ or dispatch/. */
#ifndef WEFT_BACKENDS_CPU_H
#define WEFT_BACKENDS_CPU_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

/* ------------------------------------------------------------ dtype lists */

/* Every kernel body is written once and instantiated per dtype by applying a
 * macro X to one of these lists.  X(NAME, DTYPE, T, C, U):
 *   NAME   token used to build function names (add_float32); bool is
 *          spelled "boolean" because <stdbool.h> makes "bool" a macro
 *   DTYPE  the weft_dtype the instance serves (its index in a kernel table)
 *   T      how an element is stored
 *   C      the type arithmetic is done in (float for float16/bfloat16)
 *   U      the type add/sub/mul are done in: unsigned for the integers, so
 *          overflow wraps as in PyTorch instead of being undefined in C. */
#define CPU_DTYPES_BOOL(X) X(boolean, WEFT_BOOL, bool, bool, uint32_t)
#define CPU_DTYPES_UNSIGNED(X) X(uint8, WEFT_UINT8, uint8_t, uint8_t, uint32_t)
#define CPU_DTYPES_SIGNED(X)                                \
    X(int8, WEFT_INT8, int8_t, int8_t, uint32_t)            \
    X(int16, WEFT_INT16, int16_t, int16_t, uint32_t)        \
    X(int32, WEFT_INT32, int32_t, int32_t, uint32_t)        \
    X(int64, WEFT_INT64, int64_t, int64_t, uint64_t)
#define CPU_DTYPES_INTEGRAL(X) CPU_DTYPES_UNSIGNED(X) CPU_DTYPES_SIGNED(X)
#define CPU_DTYPES_REDUCED(X)                               \
    X(float16, WEFT_FLOAT16, uint16_t, float, float)        \
    X(bfloat16, WEFT_BFLOAT16, uint16_t, float, float)
#define CPU_DTYPES_FLOAT(X)                                 \
    X(float32, WEFT_FLOAT32, float, float, float)           \
    X(float64, WEFT_FLOAT64, double, double, double)
#define CPU_DTYPES_FLOATING(X) CPU_DTYPES_REDUCED(X) CPU_DTYPES_FLOAT(X)
#define CPU_DTYPES_COMPLEX(X)                                                       \
    X(complex64, WEFT_COMPLEX64, float _Complex, float _Complex, float _Complex)    \
    X(complex128, WEFT_COMPLEX128, double _Complex, double _Complex, double _Complex)
/* Every dtype but bool. */
#define CPU_DTYPES_NUMERIC(X) CPU_DTYPES_INTEGRAL(X) CPU_DTYPES_FLOATING(X) CPU_DTYPES_COMPLEX(X)
#define CPU_DTYPES_ALL(X) CPU_DTYPES_BOOL(X) CPU_DTYPES_NUMERIC(X)

/* Designated initializers of a kernel table indexed by dtype, for kernels
 * named OP_NAME (exp_float32, ...):
 *   static const cpu_loop_fn exp_loops[WEFT_NUM_DTYPES] = {
 *       CPU_ENTRIES_FLOATING(exp) CPU_ENTRIES_COMPLEX(exp)}; */
#define CPU_ENTRIES_BOOL(OP) [WEFT_BOOL] = OP##_boolean,
#define CPU_ENTRIES_INTEGRAL(OP)                                                  \
    [WEFT_UINT8] = OP##_uint8, [WEFT_INT8] = OP##_int8, [WEFT_INT16] = OP##_int16, \
    [WEFT_INT32] = OP##_int32, [WEFT_INT64] = OP##_int64,
#define CPU_ENTRIES_FLOATING(OP)                                                  \
    [WEFT_FLOAT16] = OP##_float16, [WEFT_BFLOAT16] = OP##_bfloat16,               \
    [WEFT_FLOAT32] = OP##_float32, [WEFT_FLOAT64] = OP##_float64,
#define CPU_ENTRIES_COMPLEX(OP) [WEFT_COMPLEX64] = OP##_complex64, [WEFT_COMPLEX128] = OP##_complex128,

/* ------------------------------------------------- element conversions */

/* IEEE binary16 -> binary32: exact. */
static inline float cpu_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13); /* inf, NaN */
    } else if (exponent == 0) {
        /* zero or subnormal: mantissa * 2^-24, exact in float */
        float f = (float)mantissa * 0x1p-24f;
        return sign ? -f : f;
    } else {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* binary32 -> binary16, rounding to nearest even; NaN stays a (quiet) NaN,
 * overflow gives infinity, tiny values become subnormals or zero. */
static inline uint16_t cpu_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or NaN */
        return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u);
    if (absx >= 0x477ff000u) /* rounds to 65536 or more */
        return sign | 0x7c00u;
    uint32_t exponent = absx >> 23;
    if (exponent < 113) {
        /* a half subnormal: count units of 2^-24; below 2^-25 rounds to 0 */
        if (exponent < 102)
            return sign;
        uint32_t mantissa = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exponent; /* 14..24 */
        uint32_t h = mantissa >> shift, rest = mantissa & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((exponent - 112) << 10) | ((absx >> 13) & 0x3ffu);
    uint32_t rest = absx & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is the correct rounding */
    return (uint16_t)(sign | h);
}

static inline float cpu_bfloat16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t cpu_float_to_bfloat16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* keep NaN a quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);      /* round to nearest even */
    return (uint16_t)(x >> 16);
}

/* double -> int64 without undefined behaviour: NaN gives 0, out-of-range
 * values saturate.  Narrower integers then wrap, as PyTorch's casts do. */
static inline int64_t cpu_double_to_int64(double d)
{
    if (d != d)
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

/* Per dtype NAME: cpu_load_NAME (stored -> compute type), cpu_store_NAME
 * (compute -> stored), cpu_from_double_NAME (a Scalar argument -> compute
 * type) and cpu_to_double_NAME (compute type -> double, real part). */
#define CPU_IDENTITY_CONVERSIONS_(NAME, T)                                    \
    static inline T cpu_load_##NAME(T v) { return v; }                        \
    static inline T cpu_store_##NAME(T v) { return v; }
CPU_IDENTITY_CONVERSIONS_(boolean, bool)
CPU_IDENTITY_CONVERSIONS_(uint8, uint8_t)
CPU_IDENTITY_CONVERSIONS_(int8, int8_t)
CPU_IDENTITY_CONVERSIONS_(int16, int16_t)
CPU_IDENTITY_CONVERSIONS_(int32, int32_t)
CPU_IDENTITY_CONVERSIONS_(int64, int64_t)
CPU_IDENTITY_CONVERSIONS_(float32, float)
CPU_IDENTITY_CONVERSIONS_(float64, double)
CPU_IDENTITY_CONVERSIONS_(complex64, float _Complex)
CPU_IDENTITY_CONVERSIONS_(complex128, double _Complex)
#undef CPU_IDENTITY_CONVERSIONS_
static inline float cpu_load_float16(uint16_t v) { return cpu_half_to_float(v); }
static inline uint16_t cpu_store_float16(float v) { return cpu_float_to_half(v); }
static inline float cpu_load_bfloat16(uint16_t v) { return cpu_bfloat16_to_float(v); }
static inline uint16_t cpu_store_bfloat16(float v) { return cpu_float_to_bfloat16(v); }

static inline bool cpu_from_double_boolean(double d) { return d != 0; }
#define CPU_INT_FROM_DOUBLE_(NAME, DTYPE, T, C, U)                            \
    static inline T cpu_from_double_##NAME(double d) { return (T)cpu_double_to_int64(d); }
CPU_DTYPES_INTEGRAL(CPU_INT_FROM_DOUBLE_)
#undef CPU_INT_FROM_DOUBLE_
#define CPU_CAST_FROM_DOUBLE_(NAME, DTYPE, T, C, U)                           \
    static inline C cpu_from_double_##NAME(double d) { return (C)d; }
CPU_DTYPES_FLOATING(CPU_CAST_FROM_DOUBLE_)
CPU_DTYPES_COMPLEX(CPU_CAST_FROM_DOUBLE_)
#undef CPU_CAST_FROM_DOUBLE_

#define CPU_TO_DOUBLE_(NAME, DTYPE, T, C, U)                                  \
    static inline double cpu_to_double_##NAME(C v) { return (double)v; }
CPU_DTYPES_BOOL(CPU_TO_DOUBLE_)
CPU_DTYPES_INTEGRAL(CPU_TO_DOUBLE_)
CPU_DTYPES_FLOATING(CPU_TO_DOUBLE_)
#undef CPU_TO_DOUBLE_
static inline double cpu_to_double_complex64(float _Complex v) { return (double)__real__ v; }
static inline double cpu_to_double_complex128(double _Complex v) { return __real__ v; }

/* ------------------------------------------------------- type promotion */

static inline bool cpu_is_whole(double v)
{
    return isfinite(v) && v == trunc(v);
}

/* weft_dtype_is_integral(t, true), weft_dtype_is_floating(t) ||
 * weft_dtype_is_complex(t), without calls into the core: the dtype enum's
 * order is part of the SDK. */
static inline bool cpu_integral_or_bool(weft_dtype t)
{
    return t >= WEFT_BOOL && t <= WEFT_INT64;
}

static inline bool cpu_floating_or_complex(weft_dtype t)
{
    return t >= WEFT_FLOAT16 && t <= WEFT_COMPLEX128;
}

/* A Scalar operand's dtype category does not promote the tensor within it:
 * int32 + 2 stays int32, float16 + 2.5 stays float16, int + 2.5 gives the
 * default float32, and bool + 2 gives int64.  value is the Scalar's value
 * (C callers pass every Scalar as a double, so a whole double counts as an
 * integer). */
static inline weft_dtype cpu_scalar_result_type(weft_dtype t, const weft_value *scalar,
                                                double value)
{
    if (scalar->tag == WEFT_VALUE_BOOL || !cpu_integral_or_bool(t))
        return t;
    if (scalar->tag != WEFT_VALUE_INT && !cpu_is_whole(value))
        return WEFT_FLOAT32;
    return t == WEFT_BOOL ? WEFT_INT64 : t;
}

/* A 0-d CPU tensor of dtype holding value (a Scalar operand, which the
 * iterator broadcasts).  Returns a new reference. */
int cpu__scalar_tensor(weft_tensor **out, double value, weft_dtype dtype);

/* Writes value, converted to dtype, into the element at p (fill.c). */
void cpu__store_double(void *p, weft_dtype dtype, double value);

/* ------------------------------------------------------------ thread pool */

/* Elementwise work below this many elements stays on the calling thread:
 * waking workers costs more than it saves. */
#define CPU_GRAIN 32768

int cpu__parallel_init(void);
void cpu__parallel_shutdown(void);
/* Threads the pool uses (the core's weft_get_num_threads as of the last
 * resize), the caller included. */
int cpu__num_threads(void);
/* Resizes the pool (joining the old workers; the next job starts the new
 * ones) and OpenBLAS's count when weft_get_num_threads changed.  Cheap when
 * it did not; a no-op inside a parallel region. */
void cpu__parallel_sync(void);
/* Runs fn over [begin, end) split into pieces of at least `grain` indices,
 * on the pool's workers and the calling thread.  Small ranges, nested calls
 * and calls made while another thread holds the pool run fn(begin, end) on
 * the calling thread.  Returns when every piece is done; returns 0. */
int cpu__parallel_for(int64_t begin, int64_t end, int64_t grain,
                      void (*fn)(int64_t begin, int64_t end, void *ctx), void *ctx);

/* --------------------------------------------------- the elementwise iterator */

/* An inner loop over n elements: ptrs[0] is the output, ptrs[1..] the
 * inputs; strides are in bytes, one per operand (0 for a broadcast one). */
typedef void (*cpu_loop_fn)(char **ptrs, const int64_t *strides, int64_t n, const void *params);

/* How an operator's kernel was called. */
typedef enum cpu_mode {
    CPU_FUNCTIONAL, /* returns a new tensor in rets[0] */
    CPU_INPLACE,    /* writes args[0], which is also the first input */
    CPU_OUT         /* writes args[0], an out= tensor */
} cpu_mode;

/* One elementwise computation: `loop` reads inputs of `input_dtype` and
 * writes elements of `result_dtype`. */
typedef struct cpu_map {
    const char *op; /* the operator's name, for messages; NULL: call->op's */
    weft_dtype input_dtype;
    weft_dtype result_dtype;
    cpu_loop_fn loop;
    const void *params;
} cpu_map;

/* The whole of an elementwise operator after its dtypes are known: checks
 * devices, broadcasts the inputs, checks or creates the target (functional,
 * in-place or out=, resizing an empty out=), converts inputs whose dtype is
 * not m->input_dtype, runs the loop (in parallel when large) and casts into
 * a target of another dtype.  Inputs may alias the target.  Small contiguous
 * operands of one shape and of the loop's dtypes take a fast path that runs
 * the loop once over the flat buffers. */
int cpu__map(weft_call *call, cpu_mode mode, const cpu_map *m, weft_tensor *const *inputs,
             int ninputs);
/* The loop alone over `out` (already of the broadcast shape and of the
 * loop's dtype) and inputs of the loop's dtype, broadcast to out. */
int cpu__elementwise(const char *op, weft_tensor *out, weft_tensor *const *inputs, int ninputs,
                     cpu_loop_fn loop, const void *params);

/* Streaming (non-temporal) stores, for outputs far larger than the caches,
 * whose plain stores would first read each line from memory (read for
 * ownership).  cpu__stream_out copies n bytes from src to dst, the 16-byte
 * aligned middle of dst with streaming stores; they are weakly ordered, so
 * a piece that used it calls cpu__stream_fence before the pool reports it
 * done.  CPU_STREAMING is 0 where the ISA has none: then cpu__stream_out
 * is a memcpy. */
#if defined(__SSE2__)
#define CPU_STREAMING 1
#else
#define CPU_STREAMING 0
#endif
void cpu__stream_out(char *dst, const char *src, size_t n);
void cpu__stream_fence(void);

/* ------------------------------------------------------------- helpers */

/* WEFT_EDEVICE unless t lives on the CPU; names op and the argument. */
int cpu__check_cpu(const char *op, const char *arg, const weft_tensor *t);
/* WEFT_EDTYPE "op: not supported for dtype X". */
int cpu__unsupported_dtype(const char *op, weft_dtype dtype);
/* Prepares an out= or in-place target of `sizes`: when resizable (out=)
 * a tensor with no elements is resized, anything else must already have
 * that shape (else WEFT_ESHAPE "output with shape [..] doesn't match the
 * <what> shape [..]"). */
int cpu__prepare_target(const char *op, weft_tensor *target, bool resizable,
                        const int64_t *sizes, int ndim, const char *what);

/* Registration of each file's kernels (plugin.c calls these from init). */
int cpu__register_elementwise(weft_registrar *reg);
int cpu__register_unary(weft_registrar *reg);
int cpu__register_reduce(weft_registrar *reg);
int cpu__register_fill(weft_registrar *reg);
int cpu__register_blas(weft_registrar *reg);
int cpu__register_binary(weft_registrar *reg);
int cpu__register_reduce_rows(weft_registrar *reg);
int cpu__register_dropout(weft_registrar *reg);
int cpu__register_optim(weft_registrar *reg);
int cpu__register_random(weft_registrar *reg);
/* Which dims of a rank-ndim tensor a dim argument (int[]?: NONE or empty
 * means all) names, into reduce[ndim].  WEFT_ERANGE for a dim out of range,
 * WEFT_EINVAL for one named twice (reduce.c). */
int cpu__parse_dims(const char *op, const weft_value *dim, int ndim, bool *reduce);
/* Called from init (and whenever the pool is resized): OpenBLAS runs
 * single-threaded, large products are split over our pool (blas.c). */
void cpu__blas_init(int nthreads);
/* C[n x m] = alpha op(A) op(B) + beta C for float32/float64, row-major,
 * sizes and leading dimensions within int; large products are split by
 * rows or columns of C over the pool (blas.c).  Errors: those of
 * cpu__gemm_library_ready, named after op. */
int cpu__gemm(const char *op, weft_dtype dtype, bool ta, bool tb, int64_t n, int64_t m,
              int64_t k, double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
              double beta, void *c, int64_t ldc);

/* The plugin's one handle on oneDNN (onednn.c), shared by gemm_lib.c and
 * conv_lib.c.  Thread safety: cpu__onednn_open may be called from any
 * thread (it opens once, under pthread_once); the functions below it only
 * after it returned true, then from any thread; cpu__onednn_fini only
 * when no thread uses oneDNN (the plugin's fini). */
/* Whether `auto` (WEFT_CPU_GEMM, WEFT_CPU_CONV) may open oneDNN: not in a
 * build with AddressSanitizer, whose LeakSanitizer crashes in its tracer
 * at exit once oneDNN's OpenMP runtime is mapped (seen in
 * tests/sanitizers.sh), and not under valgrind, which reports oneDNN's
 * own allocations and is too slow for its JIT.  Asking for onednn by name
 * still opens it there. */
bool cpu__onednn_by_default(void);
/* Reads a library choice from environment variable `variable`: 1 for
 * first, 2 for second, 0 for unset, empty or "auto"; anything else is 0
 * with the value copied into bad_value (for the layer's error at first
 * use), which is "" otherwise. */
int cpu__library_choice(const char *variable, const char *first, const char *second,
                        char *bad_value, size_t bad_size);
/* Opens oneDNN once (WEFT_ONEDNN_LIBRARY or libdnnl.so.2) with its OpenMP
 * runtime; false, with *error (when error is non-NULL) pointing at a
 * static message naming the file and what failed, when it cannot. */
bool cpu__onednn_open(const char **error);
/* A function of the opened library by name; NULL when it lacks it or
 * the library is not open. */
void *cpu__onednn_symbol(const char *name);
/* oneDNN's OpenMP told one thread on the calling thread, for the calls
 * that follow: weft's pool does the threading.  The setting is shared
 * with every other user of oneDNN in the process (the quantized plugin's
 * int8 primitives want their threads), so the caller restores the
 * returned count with cpu__onednn_threads_restore when done.  Only after
 * cpu__onednn_open returned true. */
int cpu__onednn_one_thread(void);
void cpu__onednn_threads_restore(int before);
/* Closes the library; the plugin's fini calls it after the layers' finis
 * (nobody is inside oneDNN then: the pool is joined first). */
void cpu__onednn_fini(void);

/* The library behind float32 products (gemm_lib.c): WEFT_CPU_GEMM=
 * openblas|onednn|auto, read by cpu__gemm_library_init at plugin start. */
typedef enum cpu_gemm_library {
    CPU_GEMM_AUTO,
    CPU_GEMM_OPENBLAS,
    CPU_GEMM_ONEDNN
} cpu_gemm_library;
void cpu__gemm_library_init(void);
void cpu__gemm_library_fini(void);
/* Resolves the choice (opening oneDNN at the first call that wants it);
 * call before the first cpu__gemm_serial of a kernel.  Errors: WEFT_EINVAL
 * for an unknown WEFT_CPU_GEMM, WEFT_ENOTSUP when onednn was asked for and
 * cannot be opened. */
int cpu__gemm_library_ready(const char *op);
/* One product on the calling thread, through the chosen library (float64
 * always OpenBLAS; auto outside the AVX-512 build decides by this call's
 * n * m * k, so a piece of a cut product may take the other library than
 * the whole would); only after cpu__gemm_library_ready succeeded. */
void cpu__gemm_serial(weft_dtype dtype, bool ta, bool tb, int64_t n, int64_t m, int64_t k,
                      double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                      double beta, void *c, int64_t ldc);

/* Each file registers its table of kernels for the CPU with the SDK's
 * weft_register_kernel_table (<weft/plugin.h>). */

/* How well this build suits the machine (backends/cpu/score.c, compiled for
 * the baseline ISA in every variant): the loader keeps the highest. */
int cpu__score(void);

/* Ends a kernel that computed into dest, a fresh tensor or out itself:
 * with out= (out non-NULL) the result is copied into out when dest is a
 * temporary; otherwise dest becomes the call's result.  dest is consumed
 * either way; rc is the computation's status, returned (or the copy's). */
int cpu__deliver(weft_call *call, weft_tensor *out, weft_tensor *dest, int rc);

#endif
