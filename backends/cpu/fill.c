/* backends/cpu/fill.c — kernels that write values rather than compute them
 * from inputs: fill_, uniform_ and normal_ (from the core's counter-based
 * Philox generator, so the numbers never depend on the thread count),
 * arange_out and linspace_out. */
#include <math.h>

#include "cpu.h"

#define STORE_CASE(NAME, DTYPE, T, C, U)                               \
    case DTYPE:                                                        \
        *(T *)p = cpu_store_##NAME(cpu_from_double_##NAME(value));     \
        break;
void cpu__store_double(void *p, weft_dtype dtype, double value)
{
    switch (dtype) {
        CPU_DTYPES_ALL(STORE_CASE)
    default:
        break;
    }
}

/* --------------------------------------------------------------- fill_ */

#define DEFINE_FILL_LOOP(NAME, DTYPE, T, C, U)                                       \
    static void fill_##NAME(char **ptrs, const int64_t *st, int64_t n, const void *params) \
    {                                                                                \
        const T v = *(const T *)params;                                              \
        if (st[0] == (int64_t)sizeof(T)) {                                           \
            T *o = (T *)ptrs[0];                                                     \
            for (int64_t i = 0; i < n; i++)                                          \
                o[i] = v;                                                            \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++)                                          \
                *(T *)(ptrs[0] + i * st[0]) = v;                                     \
        }                                                                            \
    }
CPU_DTYPES_ALL(DEFINE_FILL_LOOP)
#define FILL_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = fill_##NAME,
static const cpu_loop_fn fill_loops[WEFT_NUM_DTYPES] = {CPU_DTYPES_ALL(FILL_ENTRY)};

/* PyTorch refuses a fill value the dtype cannot hold: out of an integer
 * type's range, or a finite value beyond a floating type's largest. */
static int check_fill_range(const char *op, weft_dtype dtype, double value)
{
    static const double largest[WEFT_NUM_DTYPES] = {
        [WEFT_FLOAT16] = 65504.0, [WEFT_BFLOAT16] = 0x1.fep127, [WEFT_FLOAT32] = 0x1.fffffep127,
        [WEFT_COMPLEX64] = 0x1.fffffep127};
    if (largest[dtype] > 0 && isfinite(value) && fabs(value) > largest[dtype])
        return weft_set_error(WEFT_EINVAL, "%s: value %g cannot be converted to type %s without "
                              "overflow", op, value, weft_dtype_name(dtype));
    static const double lo[WEFT_NUM_DTYPES] = {[WEFT_UINT8] = 0, [WEFT_INT8] = -128,
                                               [WEFT_INT16] = -32768, [WEFT_INT32] = -2147483648.0,
                                               [WEFT_INT64] = -9223372036854775808.0};
    static const double hi[WEFT_NUM_DTYPES] = {[WEFT_UINT8] = 255, [WEFT_INT8] = 127,
                                               [WEFT_INT16] = 32767, [WEFT_INT32] = 2147483647.0,
                                               [WEFT_INT64] = 9223372036854775807.0};
    if (!weft_dtype_is_integral(dtype, false))
        return 0;
    if (value != value || value < lo[dtype] || value >= hi[dtype] + 1)
        return weft_set_error(WEFT_EINVAL, "%s: value %g cannot be converted to type %s without "
                              "overflow", op, value, weft_dtype_name(dtype));
    return 0;
}

static int fill_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dtype = weft_tensor_dtype(self);
    double value = weft_value_double(&call->args[1]);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0 && (dtype < 0 || dtype >= WEFT_NUM_DTYPES || !fill_loops[dtype]))
        rc = cpu__unsupported_dtype(op, dtype);
    if (rc == 0)
        rc = check_fill_range(op, dtype, value);
    if (rc < 0)
        return rc;
    _Alignas(16) unsigned char element[16];
    cpu__store_double(element, dtype, value);
    return cpu__elementwise(op, self, NULL, 0, fill_loops[dtype], element);
}

/* ------------------------------------------- values indexed by position */

/* Kernels below compute element i of a contiguous buffer from i alone; a
 * strided target gets the values through a contiguous temporary. */
typedef struct sequence {
    enum { SEQ_ARANGE, SEQ_LINSPACE, SEQ_UNIFORM, SEQ_NORMAL } kind;
    double a, b;       /* arange: start, step; linspace: start, end;
                          uniform: from, to; normal: mean, std */
    int64_t n;         /* number of values */
    bool integral;     /* arange into an integer dtype: int64 start and step,
                          as PyTorch computes it */
    int uniform_bits;  /* uniform: random bits per value (the dtype's precision) */
    double uniform_scale; /* 2^-uniform_bits */
    uint64_t seed, offset;
} sequence;

static inline double linspace_value(const sequence *s, int64_t i)
{
    if (s->n == 1)
        return s->a;
    double step = (s->b - s->a) / (double)(s->n - 1);
    /* from the nearer end, so both ends come out exact (as PyTorch does) */
    return i < s->n / 2 ? s->a + step * (double)i : s->b - step * (double)(s->n - 1 - i);
}

/* Random value i: Philox block offset + i/4, word i%4.  uniform uses the
 * top `uniform_bits` bits of the word, u = (w >> (32 - bits)) * 2^-bits in
 * [0, 1), so the value is from + (to - from) * u.  normal pairs words
 * (0,1) and (2,3) of the block through Box-Muller: the even element takes
 * the cosine, the odd one the sine. */
static inline double random_value(const sequence *s, int64_t i, const uint32_t w[4])
{
    if (s->kind == SEQ_UNIFORM) {
        double u = (double)(w[i & 3] >> (32 - s->uniform_bits)) * s->uniform_scale;
        return s->a + (s->b - s->a) * u;
    }
    int pair = (int)(i & 2);
    double u1 = ((double)w[pair] + 1.0) * 0x1p-32; /* (0, 1]: log is finite */
    double u2 = (double)w[pair + 1] * 0x1p-32;
    double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586 * u2;
    return s->a + s->b * r * ((i & 1) ? sin(theta) : cos(theta));
}

/* Fills o[begin, end) (o of dtype NAME) with the sequence's values. */
#define DEFINE_SEQUENCE_LOOP(NAME, DTYPE, T, C, U)                                       \
    static void sequence_##NAME(void *base, int64_t begin, int64_t end, const sequence *s) \
    {                                                                                    \
        T *o = base;                                                                     \
        if (s->kind == SEQ_ARANGE && s->integral) {                                      \
            const uint64_t start = (uint64_t)cpu_double_to_int64(s->a);                  \
            const uint64_t step = (uint64_t)cpu_double_to_int64(s->b);                   \
            for (int64_t i = begin; i < end; i++)                                        \
                o[i] = (T)(int64_t)(start + (uint64_t)i * step);                         \
        } else if (s->kind == SEQ_ARANGE) {                                              \
            for (int64_t i = begin; i < end; i++)                                        \
                o[i] = cpu_store_##NAME(cpu_from_double_##NAME(s->a + (double)i * s->b)); \
        } else if (s->kind == SEQ_LINSPACE) {                                            \
            for (int64_t i = begin; i < end; i++)                                        \
                o[i] = cpu_store_##NAME(cpu_from_double_##NAME(linspace_value(s, i)));   \
        } else {                                                                         \
            uint32_t w[4];                                                               \
            for (int64_t i = begin; i < end; i++) {                                      \
                if (i == begin || (i & 3) == 0)                                          \
                    weft_philox(s->seed, s->offset + (uint64_t)(i >> 2), w);             \
                o[i] = cpu_store_##NAME(cpu_from_double_##NAME(random_value(s, i, w)));  \
            }                                                                            \
        }                                                                                \
    }
CPU_DTYPES_INTEGRAL(DEFINE_SEQUENCE_LOOP)
CPU_DTYPES_FLOATING(DEFINE_SEQUENCE_LOOP)

typedef void (*sequence_fn)(void *base, int64_t begin, int64_t end, const sequence *s);
#define SEQUENCE_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = sequence_##NAME,
static const sequence_fn sequence_loops[WEFT_NUM_DTYPES] = {
    CPU_DTYPES_INTEGRAL(SEQUENCE_ENTRY) CPU_DTYPES_FLOATING(SEQUENCE_ENTRY)};

typedef struct sequence_job {
    sequence_fn fn;
    void *base;
    const sequence *s;
} sequence_job;

static void sequence_range(int64_t begin, int64_t end, void *ctx)
{
    const sequence_job *job = ctx;
    job->fn(job->base, begin, end, job->s);
}

/* Writes the sequence into t; `real` is the dtype of one value (a complex
 * tensor takes 2n real values: its real and imaginary parts). */
static int write_sequence(weft_tensor *t, weft_dtype real, const sequence *s)
{
    weft_tensor *dest = NULL;
    int rc = 0;
    if (weft_tensor_is_contiguous(t))
        dest = weft_tensor_retain(t);
    else
        rc = weft_empty(&dest, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                        WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    sequence_job job = {sequence_loops[real], weft_tensor_data_ptr(dest), s};
    cpu__parallel_for(0, s->n, CPU_GRAIN, sequence_range, &job);
    if (dest != t)
        rc = weft_copy_(t, dest);
    weft_tensor_release(dest);
    return rc;
}

/* ------------------------------------------------------- random kernels */

static weft_generator *generator_arg(const weft_call *call, int i)
{
    return i < call->nargs && call->args[i].tag == WEFT_VALUE_GENERATOR
               ? call->args[i].u.generator
               : NULL;
}

/* uniform_(self, from, to, *, generator) and normal_(self, mean, std, *,
 * generator): ctx says which. */
static int random_kernel(weft_call *call, void *ctx)
{
    const char *op = weft_op_name(call->op);
    bool normal = ctx != NULL;
    weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dtype = weft_tensor_dtype(self), real = dtype;
    double a = weft_value_double(&call->args[1]), b = weft_value_double(&call->args[2]);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (dtype == WEFT_COMPLEX64 || dtype == WEFT_COMPLEX128) {
        /* real and imaginary parts are independent draws; a complex normal's
         * variance is split between them, as in PyTorch */
        real = dtype == WEFT_COMPLEX64 ? WEFT_FLOAT32 : WEFT_FLOAT64;
        if (normal)
            b /= sqrt(2.0);
    }
    if (!weft_dtype_is_floating(real))
        return cpu__unsupported_dtype(op, dtype);
    if (!normal && !(a <= b))
        return weft_set_error(WEFT_EINVAL, "%s: expects to return a [from, to) range, but found "
                              "from=%g > to=%g", op, a, b);
    if (normal && !(b >= 0))
        return weft_set_error(WEFT_EINVAL, "%s: expects std >= 0.0, but found std %g", op, b);
    static const int bits[WEFT_NUM_DTYPES] = {[WEFT_FLOAT16] = 11, [WEFT_BFLOAT16] = 8,
                                              [WEFT_FLOAT32] = 24, [WEFT_FLOAT64] = 32};
    sequence s = {.kind = normal ? SEQ_NORMAL : SEQ_UNIFORM, .a = a, .b = b,
                  .n = weft_tensor_numel(self) * (real != dtype ? 2 : 1),
                  .uniform_bits = bits[real], .uniform_scale = ldexp(1.0, -bits[real])};
    if (s.n == 0)
        return 0;
    weft_generator_reserve(generator_arg(call, 3), ((uint64_t)s.n + 3) / 4, &s.seed, &s.offset);
    return write_sequence(self, real, &s);
}

/* arange_out(out, start, step) and linspace_out(out, start, end): out has
 * its final size already (the factories compute it). */
static int sequence_kernel(weft_call *call, void *ctx)
{
    const char *op = weft_op_name(call->op);
    weft_tensor *out = call->args[0].u.tensor;
    weft_dtype dtype = weft_tensor_dtype(out);
    int rc = cpu__check_cpu(op, "out", out);
    if (rc < 0)
        return rc;
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES || !sequence_loops[dtype])
        return cpu__unsupported_dtype(op, dtype);
    sequence s = {.kind = ctx ? SEQ_LINSPACE : SEQ_ARANGE, .a = weft_value_double(&call->args[1]),
                  .b = weft_value_double(&call->args[2]), .n = weft_tensor_numel(out),
                  .integral = weft_dtype_is_integral(dtype, false)};
    if (s.n == 0)
        return 0;
    return write_sequence(out, dtype, &s);
}

static const int normal_marker, linspace_marker; /* non-NULL ctx values */
static const weft_kernel_entry fill_kernels[] = {
    {"fill_", fill_kernel, NULL},
    {"uniform_", random_kernel, NULL},
    {"normal_", random_kernel, &normal_marker},
    {"arange_out", sequence_kernel, NULL},
    {"linspace_out", sequence_kernel, &linspace_marker},
};

int cpu__register_fill(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, fill_kernels, sizeof fill_kernels / sizeof *fill_kernels);
}
