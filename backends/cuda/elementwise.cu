/* backends/cuda/elementwise.cu — the elementwise engine: one grid-stride
 * kernel body per family (unary, binary, compare, where, fill, converting
 * copy), templated on the element type and the operator, reached through
 * tables indexed by dtype (a NULL entry is "not supported for dtype X").
 * Operands are strided, in the collapsed geometry of plan.c: a contiguous
 * launch indexes linearly, the others turn the linear index into
 * per-operand offsets with one division per collapsed dim.  Half and
 * bfloat16 compute in float, integers in int64. */
#include "gpu.h"

#include <type_traits>

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

constexpr unsigned THREADS = 256;
constexpr unsigned MAX_BLOCKS = 8192;

/* ------------------------------------------------------------ operators */

template <typename A> __device__ inline bool isnan_(A a) { return a != a; }

__device__ inline float exp_(float a) { return expf(a); }
__device__ inline double exp_(double a) { return exp(a); }
__device__ inline int64_t exp_(int64_t a) { return a; }
__device__ inline float log_(float a) { return logf(a); }
__device__ inline double log_(double a) { return log(a); }
__device__ inline int64_t log_(int64_t a) { return a; }
__device__ inline float sqrt_(float a) { return sqrtf(a); }
__device__ inline double sqrt_(double a) { return sqrt(a); }
__device__ inline int64_t sqrt_(int64_t a) { return a; }
__device__ inline float tanh_(float a) { return tanhf(a); }
__device__ inline double tanh_(double a) { return tanh(a); }
__device__ inline int64_t tanh_(int64_t a) { return a; }
/* The float-only functions: an int64 overload only so every instantiation
 * compiles (integers never reach them: served() in kernels.c). */
#define MATH1(name, f32, f64)                                                                  \
    __device__ inline float name(float a) { return f32(a); }                                   \
    __device__ inline double name(double a) { return f64(a); }                                 \
    __device__ inline int64_t name(int64_t a) { return a; }
MATH1(rsqrt_, rsqrtf, rsqrt)
MATH1(sin_, sinf, sin)
MATH1(cos_, cosf, cos)
MATH1(log1p_, log1pf, log1p)
MATH1(expm1_, expm1f, expm1)
MATH1(erf_, erff, erf)
MATH1(floor_, floorf, floor)
MATH1(ceil_, ceilf, ceil)
MATH1(round_, rintf, rint)
__device__ inline float atan2_(float a, float b) { return atan2f(a, b); }
__device__ inline double atan2_(double a, double b) { return atan2(a, b); }
__device__ inline int64_t atan2_(int64_t a, int64_t) { return a; }
__device__ inline float fmod_(float a, float b) { return fmodf(a, b); }
__device__ inline double fmod_(double a, double b) { return fmod(a, b); }
/* The integers as the CPU's loops (backends/cpu/binary.c): a zero divisor
 * never reaches the kernel (kernels.c checks first), -1 gives 0 (a % -1
 * of the most negative value would trap); the operands of every integer
 * dtype held in int64, so results agree modulo the dtype's width. */
__device__ inline int64_t fmod_(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
__device__ inline float pow_(float a, float e) { return powf(a, e); }
__device__ inline double pow_(double a, double e) { return pow(a, e); }
/* a ** e by squaring, wrapping; a negative e gives 0 but for |a| == 1 */
__device__ inline int64_t pow_(int64_t a, int64_t e)
{
    if (e < 0)
        return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t result = 1, base = (uint64_t)a;
    for (uint64_t k = (uint64_t)e; k; k >>= 1) {
        if (k & 1)
            result *= base;
        base *= base;
    }
    return (int64_t)result;
}

template <typename A> __device__ inline A apply_binary(int op, A a, A b, A s)
{
    switch (op) {
    case WFC_ADD: return a + s * b;
    case WFC_SUB: return a - s * b;
    case WFC_MUL: return a * b;
    case WFC_DIV: return a / b;
    case WFC_MAXIMUM: return isnan_(a) || a > b ? a : b;
    case WFC_MINIMUM: return isnan_(a) || a < b ? a : b;
    case WFC_LERP: return a + s * (b - a);
    case WFC_ATAN2: return atan2_(a, b);
    case WFC_FMOD: return fmod_(a, b);
    case WFC_POW_TENSOR: return pow_(a, b);
    default: /* WFC_THRESHOLD_BACKWARD: a is the gradient, b the input */
        return b <= s ? A(0) : a;
    }
}

template <typename A> __device__ inline bool apply_compare(int op, A a, A b)
{
    switch (op) {
    case WFC_EQ: return a == b;
    case WFC_NE: return a != b;
    case WFC_LT: return a < b;
    case WFC_LE: return a <= b;
    case WFC_GT: return a > b;
    case WFC_GE: return a >= b;
    case WFC_LOGICAL_AND: return a != A(0) && b != A(0);
    case WFC_LOGICAL_OR: return a != A(0) || b != A(0);
    default: /* WFC_LOGICAL_XOR */
        return (a != A(0)) != (b != A(0));
    }
}

/* The ternary operators, as the CPU's loops write them (backends/cpu/
 * binary.c): lerp from the nearer end, so a weight of 1 gives b. */
template <typename A> __device__ inline A apply_ternary(int op, A a, A b, A c, A s)
{
    switch (op) {
    case WFC_LERP_TENSOR: return c * c < A(0.25) ? a + c * (b - a) : b - (b - a) * (A(1) - c);
    case WFC_ADDCMUL: return a + s * b * c;
    default: /* WFC_ADDCDIV */
        return a + s * (b / c);
    }
}
/* Integers (addcmul only; the others refuse them) wrap through uint64, as
 * on the CPU: signed overflow would be undefined. */
template <> __device__ inline int64_t apply_ternary<int64_t>(int, int64_t a, int64_t b, int64_t c,
                                                             int64_t s)
{
    return (int64_t)((uint64_t)a + (uint64_t)s * (uint64_t)b * (uint64_t)c);
}

template <typename A> __device__ inline A gelu(A a, bool tanh_form)
{
    if (tanh_form) {
        const A k = A(0.7978845608028654), c = A(0.044715); /* sqrt(2/pi) */
        return A(0.5) * a * (A(1) + tanh_(k * (a + c * a * a * a)));
    }
    return A(0.5) * a * (A(1) + erf_(a * A(0.7071067811865476)));
}

/* s0, s1: the scalars of clamp (min, max; NaN for None) and of a fill;
 * s0..s2 the activations' parameters. */
template <typename A> __device__ inline A apply_unary(int op, A a, A s0, A s1, A s2)
{
    switch (op) {
    case WFC_NEG: return -a;
    case WFC_ABS: return a < A(0) ? -a : a;
    case WFC_RELU: return a > A(0) ? a : (isnan_(a) ? a : A(0));
    case WFC_EXP: return exp_(a);
    case WFC_LOG: return log_(a);
    case WFC_SQRT: return sqrt_(a);
    case WFC_SIGMOID: return A(1) / (A(1) + exp_(-a));
    case WFC_TANH: return tanh_(a);
    case WFC_CLAMP:
        if (isnan_(a))
            return a;
        if (!isnan_(s0) && a < s0)
            a = s0;
        if (!isnan_(s1) && a > s1)
            a = s1;
        return a;
    case WFC_AXPB: return a * s0 + s1;
    case WFC_DIV_SCALAR: return a / s0;
    case WFC_RSQRT: return rsqrt_(a);
    case WFC_RECIPROCAL: return A(1) / a;
    case WFC_SIN: return sin_(a);
    case WFC_COS: return cos_(a);
    case WFC_LOG1P: return log1p_(a);
    case WFC_EXPM1: return expm1_(a);
    case WFC_ERF: return erf_(a);
    case WFC_SILU: return a / (A(1) + exp_(-a));
    case WFC_SIGN: return a > A(0) ? A(1) : a < A(0) ? A(-1) : a; /* 0 and NaN stay */
    case WFC_FLOOR: return floor_(a);
    case WFC_CEIL: return ceil_(a);
    case WFC_ROUND: return round_(a);
    case WFC_LEAKY_RELU: return a > A(0) ? a : a * s0;
    case WFC_POW: return pow_(a, s0);
    case WFC_GELU: return gelu<A>(a, s0 != A(0));
    case WFC_SOFTPLUS: return a * s0 > s1 ? a : log1p_(exp_(a * s0)) / s0;
    case WFC_ELU: return a > A(0) ? a * s1 : expm1_(a * s2) * s0 * s1;
    default: /* WFC_IDENTITY */
        return a;
    }
}

/* -------------------------------------------------------------- kernels */

template <typename T>
__global__ void binary_kernel(int op, T *out, const T *a, const T *b, double alpha, int64_t n,
                              wfc_geometry g)
{
    typedef typename acc<T>::type A;
    A s = (A)alpha;
    GRID_STRIDE(i, n) {
        int64_t off[3];
        offsets(g, i, off);
        out[off[0]] = store<T, A>(apply_binary<A>(op, load<A, T>(a[off[1]]), load<A, T>(b[off[2]]), s));
    }
}

/* The contiguous add of one dtype, unswitched so the bandwidth-bound case
 * (and the optimizers' updates) runs the plain loop. */
template <typename T>
__global__ void add_contiguous_kernel(T *out, const T *a, const T *b, double alpha, int64_t n)
{
    typedef typename acc<T>::type A;
    A s = (A)alpha;
    GRID_STRIDE(i, n)
        out[i] = store<T, A>(load<A, T>(a[i]) + s * load<A, T>(b[i]));
}

/* The same for float32 with 16-byte loads and stores (pointers aligned to
 * 16 bytes; the caller checks): fewer, wider memory transactions are what
 * brings a bandwidth-bound add near the copy engine's rate. */
__global__ void add_float4_kernel(float4 *out, const float4 *a, const float4 *b, float s,
                                  int64_t n4)
{
    GRID_STRIDE(i, n4) {
        float4 x = a[i], y = b[i];
        out[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}

template <typename T>
__global__ void compare_kernel(int op, bool *out, const T *a, const T *b, int64_t n,
                               wfc_geometry g)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(i, n) {
        int64_t off[3];
        offsets(g, i, off);
        out[off[0]] = apply_compare<A>(op, load<A, T>(a[off[1]]), load<A, T>(b[off[2]]));
    }
}

template <typename T>
__global__ void unary_kernel(int op, T *out, const T *a, double s0, double s1, double s2,
                             int64_t n, wfc_geometry g)
{
    typedef typename acc<T>::type A;
    A c0 = (A)s0, c1 = (A)s1, c2 = (A)s2;
    GRID_STRIDE(i, n) {
        int64_t off[2];
        offsets(g, i, off);
        out[off[0]] = store<T, A>(apply_unary<A>(op, load<A, T>(a[off[1]]), c0, c1, c2));
    }
}

/* A comparison with a scalar, stored in T first: the CPU compares with
 * the scalar as a 0-d tensor of the tensor's dtype (0.1 as float16 is not
 * 0.1). */
template <typename T>
__global__ void compare_scalar_kernel(int op, bool *out, const T *a, double s, int64_t n,
                                      wfc_geometry g)
{
    typedef typename acc<T>::type A;
    A b = load<A, T>(from_double<T>(s));
    GRID_STRIDE(i, n) {
        int64_t off[2];
        offsets(g, i, off);
        out[off[0]] = apply_compare<A>(op, load<A, T>(a[off[1]]), b);
    }
}

template <typename T>
__global__ void ternary_kernel(int op, T *out, const T *a, const T *b, const T *c, double s,
                               int64_t n, wfc_geometry g)
{
    typedef typename acc<T>::type A;
    /* the value as the CPU holds it: stored in T, computed in A */
    A v = load<A, T>(from_double<T>(s));
    GRID_STRIDE(i, n) {
        int64_t off[4];
        offsets(g, i, off);
        out[off[0]] = store<T, A>(apply_ternary<A>(op, load<A, T>(a[off[1]]), load<A, T>(b[off[2]]),
                                                   load<A, T>(c[off[3]]), v));
    }
}

template <typename T>
__global__ void where_kernel(T *out, const bool *cond, const T *a, const T *b, int64_t n,
                             wfc_geometry g)
{
    GRID_STRIDE(i, n) {
        int64_t off[4];
        offsets(g, i, off);
        out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
}

template <typename T> __global__ void fill_kernel(T *out, T value, int64_t n, wfc_geometry g)
{
    GRID_STRIDE(i, n) {
        int64_t off[1];
        offsets(g, i, off);
        out[off[0]] = value;
    }
}

/* A converting copy: reads the source as its own dtype (a uniform switch),
 * goes through double, which holds every value of the dtypes it serves
 * except int64 beyond 2^53 — a same-dtype copy never converts. */
__device__ inline double load_any(const void *p, int dtype, int64_t off)
{
    switch (dtype) {
    case WEFT_BOOL: return ((const bool *)p)[off];
    case WEFT_UINT8: return ((const uint8_t *)p)[off];
    case WEFT_INT8: return ((const int8_t *)p)[off];
    case WEFT_INT16: return ((const int16_t *)p)[off];
    case WEFT_INT32: return ((const int32_t *)p)[off];
    case WEFT_INT64: return (double)((const int64_t *)p)[off];
    case WEFT_FLOAT16: return to_double(((const __half *)p)[off]);
    case WEFT_BFLOAT16: return to_double(((const __nv_bfloat16 *)p)[off]);
    case WEFT_FLOAT32: return ((const float *)p)[off];
    default: return ((const double *)p)[off];
    }
}

template <typename T>
__global__ void convert_kernel(T *out, const void *src, int src_dtype, int64_t n, wfc_geometry g)
{
    GRID_STRIDE(i, n) {
        int64_t off[2];
        offsets(g, i, off);
        out[off[0]] = from_double<T>(load_any(src, src_dtype, off[1]));
    }
}

/* A same-dtype copy moves elements as unsigned words of their size. */
template <typename W>
__global__ void move_kernel(W *out, const W *src, int64_t n, wfc_geometry g)
{
    GRID_STRIDE(i, n) {
        int64_t off[2];
        offsets(g, i, off);
        out[off[0]] = src[off[1]];
    }
}

int launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching %s: %s", what, cudaGetErrorString(e));
}

unsigned blocks(int64_t n)
{
    return wfc_plan_blocks(n, THREADS, MAX_BLOCKS);
}

/* ---------------------------------------------------- launchers by dtype */

typedef void (*binary_launch)(cudaStream_t, int, void *, const void *, const void *, double,
                              int64_t, const wfc_geometry &);
template <typename T>
void launch_binary(cudaStream_t st, int op, void *out, const void *a, const void *b, double alpha,
                   int64_t n, const wfc_geometry &g)
{
    bool aligned = ((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) % 16 == 0;
    if (op == WFC_ADD && g.contiguous && sizeof(T) == 4 && std::is_same<T, float>::value &&
        aligned && n >= 4) {
        int64_t n4 = n / 4, done = n4 * 4;
        add_float4_kernel<<<blocks(n4), THREADS, 0, st>>>((float4 *)out, (const float4 *)a,
                                                          (const float4 *)b, (float)alpha, n4);
        if (done < n) /* the last 1-3 elements */
            add_contiguous_kernel<T><<<1, THREADS, 0, st>>>((T *)out + done, (const T *)a + done,
                                                            (const T *)b + done, alpha, n - done);
    } else if (op == WFC_ADD && g.contiguous)
        add_contiguous_kernel<T><<<blocks(n), THREADS, 0, st>>>((T *)out, (const T *)a,
                                                                (const T *)b, alpha, n);
    else
        binary_kernel<T><<<blocks(n), THREADS, 0, st>>>(op, (T *)out, (const T *)a, (const T *)b,
                                                        alpha, n, g);
}

typedef void (*compare_launch)(cudaStream_t, int, void *, const void *, const void *, int64_t,
                               const wfc_geometry &);
template <typename T>
void launch_compare(cudaStream_t st, int op, void *out, const void *a, const void *b, int64_t n,
                    const wfc_geometry &g)
{
    compare_kernel<T><<<blocks(n), THREADS, 0, st>>>(op, (bool *)out, (const T *)a, (const T *)b,
                                                     n, g);
}

typedef void (*unary_launch)(cudaStream_t, int, void *, const void *, double, double, double,
                             int64_t, const wfc_geometry &);
template <typename T>
void launch_unary(cudaStream_t st, int op, void *out, const void *a, double s0, double s1,
                  double s2, int64_t n, const wfc_geometry &g)
{
    unary_kernel<T><<<blocks(n), THREADS, 0, st>>>(op, (T *)out, (const T *)a, s0, s1, s2, n, g);
}

typedef void (*compare_scalar_launch)(cudaStream_t, int, void *, const void *, double, int64_t,
                                      const wfc_geometry &);
template <typename T>
void launch_compare_scalar(cudaStream_t st, int op, void *out, const void *a, double s, int64_t n,
                           const wfc_geometry &g)
{
    compare_scalar_kernel<T><<<blocks(n), THREADS, 0, st>>>(op, (bool *)out, (const T *)a, s, n, g);
}

typedef void (*ternary_launch)(cudaStream_t, int, void *, const void *, const void *,
                               const void *, double, int64_t, const wfc_geometry &);
template <typename T>
void launch_ternary(cudaStream_t st, int op, void *out, const void *a, const void *b,
                    const void *c, double s, int64_t n, const wfc_geometry &g)
{
    ternary_kernel<T><<<blocks(n), THREADS, 0, st>>>(op, (T *)out, (const T *)a, (const T *)b,
                                                     (const T *)c, s, n, g);
}

typedef void (*where_launch)(cudaStream_t, void *, const void *, const void *, const void *,
                             int64_t, const wfc_geometry &);
template <typename T>
void launch_where(cudaStream_t st, void *out, const void *c, const void *a, const void *b,
                  int64_t n, const wfc_geometry &g)
{
    where_kernel<T><<<blocks(n), THREADS, 0, st>>>((T *)out, (const bool *)c, (const T *)a,
                                                   (const T *)b, n, g);
}

typedef void (*fill_launch)(cudaStream_t, void *, double, int64_t, const wfc_geometry &);
template <typename T>
void launch_fill(cudaStream_t st, void *out, double v, int64_t n, const wfc_geometry &g)
{
    fill_kernel<T><<<blocks(n), THREADS, 0, st>>>((T *)out, from_double<T>(v), n, g);
}

typedef void (*convert_launch)(cudaStream_t, void *, const void *, int, int64_t,
                               const wfc_geometry &);
template <typename T>
void launch_convert(cudaStream_t st, void *out, const void *src, int src_dtype, int64_t n,
                    const wfc_geometry &g)
{
    convert_kernel<T><<<blocks(n), THREADS, 0, st>>>((T *)out, src, src_dtype, n, g);
}

/* The tables: one entry per weft dtype, NULL where the family has none. */
#define FLOATS(fn) \
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, fn<__half>, fn<__nv_bfloat16>, \
        fn<float>, fn<double>, nullptr, nullptr
#define NUMBERS(fn) \
    nullptr, fn<uint8_t>, fn<int8_t>, fn<int16_t>, fn<int32_t>, fn<int64_t>, fn<__half>, \
        fn<__nv_bfloat16>, fn<float>, fn<double>, nullptr, nullptr
#define ALL(fn) \
    fn<bool>, fn<uint8_t>, fn<int8_t>, fn<int16_t>, fn<int32_t>, fn<int64_t>, fn<__half>, \
        fn<__nv_bfloat16>, fn<float>, fn<double>, nullptr, nullptr

const binary_launch binary_table[WEFT_NUM_DTYPES] = {NUMBERS(launch_binary)};
const compare_launch compare_table[WEFT_NUM_DTYPES] = {ALL(launch_compare)};
const compare_scalar_launch compare_scalar_table[WEFT_NUM_DTYPES] = {ALL(launch_compare_scalar)};
const unary_launch unary_table[WEFT_NUM_DTYPES] = {NUMBERS(launch_unary)};
const ternary_launch ternary_table[WEFT_NUM_DTYPES] = {NUMBERS(launch_ternary)};
const where_launch where_table[WEFT_NUM_DTYPES] = {ALL(launch_where)};
const fill_launch fill_table[WEFT_NUM_DTYPES] = {ALL(launch_fill)};
const convert_launch convert_table[WEFT_NUM_DTYPES] = {ALL(launch_convert)};

int unsupported(const char *what, int dtype)
{
    return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": %s has no kernel for dtype %s", what,
                          weft_dtype_name((weft_dtype)dtype));
}

bool in_range(int dtype)
{
    return dtype >= 0 && dtype < WEFT_NUM_DTYPES;
}

} // namespace

/* Integer operators that have no integer meaning here (exp, log, ...):
 * the caller promotes or hands the call to the fallback before this. */
extern "C" bool wfc_unary_is_float_only(int op)
{
    return op == WFC_EXP || op == WFC_LOG || op == WFC_SQRT || op == WFC_SIGMOID ||
           op == WFC_TANH || op == WFC_DIV_SCALAR || op == WFC_RSQRT || op == WFC_RECIPROCAL ||
           op == WFC_SIN || op == WFC_COS || op == WFC_LOG1P || op == WFC_EXPM1 ||
           op == WFC_ERF || op == WFC_SILU || op == WFC_LEAKY_RELU || op == WFC_POW ||
           op == WFC_GELU || op == WFC_SOFTPLUS || op == WFC_ELU;
}

extern "C" bool wfc_has_kernel(int family, int dtype)
{
    if (!in_range(dtype))
        return false;
    switch (family) {
    case WFC_FAMILY_BINARY: return binary_table[dtype] != nullptr;
    case WFC_FAMILY_COMPARE: return compare_table[dtype] != nullptr;
    case WFC_FAMILY_UNARY: return unary_table[dtype] != nullptr;
    case WFC_FAMILY_WHERE: return where_table[dtype] != nullptr;
    case WFC_FAMILY_FILL: return fill_table[dtype] != nullptr;
    case WFC_FAMILY_COMPARE_SCALAR: return compare_scalar_table[dtype] != nullptr;
    case WFC_FAMILY_TERNARY: return ternary_table[dtype] != nullptr;
    default: return convert_table[dtype] != nullptr;
    }
}

extern "C" int wfc_binary(void *stream, int op, int dtype, void *out, const void *a,
                          const void *b, double alpha, int64_t n, const wfc_geometry *g)
{
    if (!in_range(dtype) || !binary_table[dtype])
        return unsupported("a binary operator", dtype);
    if (n == 0)
        return 0;
    binary_table[dtype]((cudaStream_t)stream, op, out, a, b, alpha, n, *g);
    return launched("a binary kernel");
}

extern "C" int wfc_compare(void *stream, int op, int dtype, void *out, const void *a,
                           const void *b, int64_t n, const wfc_geometry *g)
{
    if (!in_range(dtype) || !compare_table[dtype])
        return unsupported("a comparison", dtype);
    if (n == 0)
        return 0;
    compare_table[dtype]((cudaStream_t)stream, op, out, a, b, n, *g);
    return launched("a comparison kernel");
}

extern "C" int wfc_unary(void *stream, int op, int dtype, void *out, const void *a, double s0,
                         double s1, double s2, int64_t n, const wfc_geometry *g)
{
    if (!in_range(dtype) || !unary_table[dtype])
        return unsupported("a unary operator", dtype);
    if (n == 0)
        return 0;
    unary_table[dtype]((cudaStream_t)stream, op, out, a, s0, s1, s2, n, *g);
    return launched("a unary kernel");
}

extern "C" int wfc_compare_scalar(void *stream, int op, int dtype, void *out, const void *a,
                                  double s, int64_t n, const wfc_geometry *g)
{
    if (!in_range(dtype) || !compare_scalar_table[dtype])
        return unsupported("a comparison with a scalar", dtype);
    if (n == 0)
        return 0;
    compare_scalar_table[dtype]((cudaStream_t)stream, op, out, a, s, n, *g);
    return launched("a comparison with a scalar");
}

extern "C" int wfc_ternary(void *stream, int op, int dtype, void *out, const void *a,
                           const void *b, const void *c, double s, int64_t n,
                           const wfc_geometry *g)
{
    if (!in_range(dtype) || !ternary_table[dtype])
        return unsupported("an operator of three tensors", dtype);
    if (n == 0)
        return 0;
    ternary_table[dtype]((cudaStream_t)stream, op, out, a, b, c, s, n, *g);
    return launched("a kernel of three tensors");
}

extern "C" int wfc_where(void *stream, int dtype, void *out, const void *cond, const void *a,
                         const void *b, int64_t n, const wfc_geometry *g)
{
    if (!in_range(dtype) || !where_table[dtype])
        return unsupported("where", dtype);
    if (n == 0)
        return 0;
    where_table[dtype]((cudaStream_t)stream, out, cond, a, b, n, *g);
    return launched("where");
}

extern "C" int wfc_fill(void *stream, int dtype, void *out, double value, int64_t n,
                        const wfc_geometry *g)
{
    if (!in_range(dtype) || !fill_table[dtype])
        return unsupported("fill_", dtype);
    if (n == 0)
        return 0;
    fill_table[dtype]((cudaStream_t)stream, out, value, n, *g);
    return launched("fill_");
}

extern "C" int wfc_copy(void *stream, int dst_dtype, void *out, int src_dtype, const void *src,
                        int64_t n, const wfc_geometry *g)
{
    if (!in_range(dst_dtype) || !convert_table[dst_dtype])
        return unsupported("copy_ (destination)", dst_dtype);
    if (!in_range(src_dtype) || !convert_table[src_dtype])
        return unsupported("copy_ (source)", src_dtype);
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (dst_dtype == src_dtype) {
        switch (weft_dtype_size((weft_dtype)dst_dtype)) {
        case 1: move_kernel<uint8_t><<<blocks(n), THREADS, 0, st>>>((uint8_t *)out, (const uint8_t *)src, n, *g); break;
        case 2: move_kernel<uint16_t><<<blocks(n), THREADS, 0, st>>>((uint16_t *)out, (const uint16_t *)src, n, *g); break;
        case 4: move_kernel<uint32_t><<<blocks(n), THREADS, 0, st>>>((uint32_t *)out, (const uint32_t *)src, n, *g); break;
        default: move_kernel<uint64_t><<<blocks(n), THREADS, 0, st>>>((uint64_t *)out, (const uint64_t *)src, n, *g); break;
        }
    } else {
        convert_table[dst_dtype](st, out, src, src_dtype, n, *g);
    }
    return launched("copy_");
}
