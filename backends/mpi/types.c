/* backends/mpi/types.c — weft dtypes and reductions as MPI sees them, and
 * as the shared-memory path (shm.c) computes them itself.  MPI's own types
 * and operations cover every dtype but float16 and bfloat16; for those
 * two, one reduction body per operation is instantiated for each format
 * through a table, computing in float32 and rounding back once per
 * element, as torch's CPU kernels do.  The shared-memory path's kernels
 * (out = a op b over n elements) are one body per operation too,
 * instantiated per dtype into one table, with the same results as MPI's
 * operations (integers wrap, bool is logical, NaN propagates). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mpi_backend.h"

static MPI_Datatype half_type = MPI_DATATYPE_NULL, bf16_type = MPI_DATATYPE_NULL;
static MPI_Op half_ops[2][4]; /* [format][sum, max, min, prod] */

static float f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
    if (ax >= 0x477ff000u) /* rounds past 65504 */
        return sign | 0x7c00;
    if (ax < 0x38800000u) { /* subnormal or zero in half: round to nearest even */
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f); /* a / 2^-24 */
    }
    uint32_t r = ax + 0xfff + ((ax >> 13) & 1); /* nearest, ties to even */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static float op_sum(float a, float b) { return a + b; }
static float op_max(float a, float b) { return isnan(a) || a > b ? a : b; }
static float op_min(float a, float b) { return isnan(a) || a < b ? a : b; }
static float op_prod(float a, float b) { return a * b; }

/* The shared-memory path's kernels.  out may alias a or b (a rank reduces
 * in place into its own slot).  Integers compute in an unsigned type of at
 * least int's width, so that overflow wraps as MPI's does instead of being
 * undefined; the loops are plain so that the compiler vectorises them. */
#define ELEMENTWISE(NAME, T, EXPR)                                             \
    static void NAME(void *out_, const void *a_, const void *b_, int64_t n)    \
    {                                                                          \
        T *out = out_;                                                         \
        const T *a = a_, *b = b_;                                              \
        for (int64_t i = 0; i < n; i++) {                                      \
            T x = a[i], y = b[i];                                              \
            out[i] = EXPR;                                                     \
        }                                                                      \
    }
/* x != x: NaN wins, as in op_max/op_min above */
#define PLAIN_KERNELS(TAG, T, U)                                               \
    ELEMENTWISE(sum_##TAG, T, (T)((U)x + (U)y))                                \
    ELEMENTWISE(prod_##TAG, T, (T)((U)x * (U)y))                               \
    ELEMENTWISE(max_##TAG, T, (x != x || x > y) ? x : y)                       \
    ELEMENTWISE(min_##TAG, T, (x != x || x < y) ? x : y)
PLAIN_KERNELS(u8, uint8_t, uint32_t)
PLAIN_KERNELS(i8, int8_t, uint32_t)
PLAIN_KERNELS(i16, int16_t, uint32_t)
PLAIN_KERNELS(i32, int32_t, uint32_t)
PLAIN_KERNELS(i64, int64_t, uint64_t)
PLAIN_KERNELS(f32, float, float)
PLAIN_KERNELS(f64, double, double)
/* float16 and bfloat16: in float32, rounded back once */
#define HALF_KERNEL(FMT, OP) \
    ELEMENTWISE(OP##_##FMT, uint16_t, float_to_##FMT(op_##OP(FMT##_to_float(x), FMT##_to_float(y))))
#define HALF_KERNELS(FMT) \
    HALF_KERNEL(FMT, sum) HALF_KERNEL(FMT, max) HALF_KERNEL(FMT, min) HALF_KERNEL(FMT, prod)
HALF_KERNELS(f16)
HALF_KERNELS(bf16)
/* bool: sum and max are any, prod and min all (MPI_LOR, MPI_LAND) */
ELEMENTWISE(any_bool, uint8_t, (uint8_t)((x | y) != 0))
ELEMENTWISE(all_bool, uint8_t, (uint8_t)(x != 0 && y != 0))
/* complex: the product by the formula (MPI's, without C99 Annex G's
 * NaN recovery), the sum as the real kernel over twice the elements */
#define COMPLEX_KERNELS(TAG, T, REAL)                                                 \
    static void prod_##TAG(void *out_, const void *a_, const void *b_, int64_t n) \
    {                                                                          \
        T *out = out_;                                                         \
        const T *a = a_, *b = b_;                                              \
        for (int64_t i = 0; i < n; i++) {                                      \
            T re = a[2 * i] * b[2 * i] - a[2 * i + 1] * b[2 * i + 1];          \
            T im = a[2 * i] * b[2 * i + 1] + a[2 * i + 1] * b[2 * i];          \
            out[2 * i] = re;                                                   \
            out[2 * i + 1] = im;                                               \
        }                                                                      \
    }                                                                          \
    static void sum_##TAG(void *out, const void *a, const void *b, int64_t n)  \
    {                                                                          \
        sum_##REAL(out, a, b, 2 * n);                                          \
    }
COMPLEX_KERNELS(c64, float, f32)
COMPLEX_KERNELS(c128, double, f64)

/* MPI's user reductions for float16 and bfloat16 are the same kernels:
 * inout[i] = in[i] (op) inout[i] */
#define HALF_REDUCTION(FMT, OP)                                                            \
    static void reduce_##FMT##_##OP(void *in, void *inout, int *len, MPI_Datatype *type) \
    {                                                                                      \
        OP##_##FMT(inout, in, inout, *len);                                                \
    }
#define HALF_REDUCTIONS(FMT) \
    HALF_REDUCTION(FMT, sum) HALF_REDUCTION(FMT, max) HALF_REDUCTION(FMT, min) HALF_REDUCTION(FMT, prod)
HALF_REDUCTIONS(f16)
HALF_REDUCTIONS(bf16)

static MPI_User_function *const half_functions[2][4] = {
    {reduce_f16_sum, reduce_f16_max, reduce_f16_min, reduce_f16_prod},
    {reduce_bf16_sum, reduce_bf16_max, reduce_bf16_min, reduce_bf16_prod}};

int wmpi__half_init(void)
{
    if (half_type != MPI_DATATYPE_NULL)
        return 0;
    if (MPI_Type_contiguous(1, MPI_UINT16_T, &half_type) != MPI_SUCCESS ||
        MPI_Type_commit(&half_type) != MPI_SUCCESS ||
        MPI_Type_contiguous(1, MPI_UINT16_T, &bf16_type) != MPI_SUCCESS ||
        MPI_Type_commit(&bf16_type) != MPI_SUCCESS)
        return -1;
    for (int f = 0; f < 2; f++)
        for (int o = 0; o < 4; o++)
            if (MPI_Op_create(half_functions[f][o], 1, &half_ops[f][o]) != MPI_SUCCESS)
                return -1;
    return 0;
}

void wmpi__half_fini(void)
{
    if (half_type == MPI_DATATYPE_NULL)
        return;
    for (int f = 0; f < 2; f++)
        for (int o = 0; o < 4; o++)
            MPI_Op_free(&half_ops[f][o]);
    MPI_Type_free(&half_type);
    MPI_Type_free(&bf16_type);
    half_type = bf16_type = MPI_DATATYPE_NULL;
}

/* [dtype][sum, max, min, prod]; NULL: not reduced here (complex max/min) */
static wmpi__kernel *const kernels[WEFT_NUM_DTYPES][4] = {
    [WEFT_BOOL] = {any_bool, any_bool, all_bool, all_bool},
    [WEFT_UINT8] = {sum_u8, max_u8, min_u8, prod_u8},
    [WEFT_INT8] = {sum_i8, max_i8, min_i8, prod_i8},
    [WEFT_INT16] = {sum_i16, max_i16, min_i16, prod_i16},
    [WEFT_INT32] = {sum_i32, max_i32, min_i32, prod_i32},
    [WEFT_INT64] = {sum_i64, max_i64, min_i64, prod_i64},
    [WEFT_FLOAT16] = {sum_f16, max_f16, min_f16, prod_f16},
    [WEFT_BFLOAT16] = {sum_bf16, max_bf16, min_bf16, prod_bf16},
    [WEFT_FLOAT32] = {sum_f32, max_f32, min_f32, prod_f32},
    [WEFT_FLOAT64] = {sum_f64, max_f64, min_f64, prod_f64},
    [WEFT_COMPLEX64] = {sum_c64, NULL, NULL, prod_c64},
    [WEFT_COMPLEX128] = {sum_c128, NULL, NULL, prod_c128},
};

/* sum, max, min, prod as the rows above (and half_ops) index them */
static int op_slot(int op)
{
    return op == WEFT_REDUCE_SUM ? 0 : op == WEFT_REDUCE_MAX ? 1 : op == WEFT_REDUCE_MIN ? 2
         : op == WEFT_REDUCE_PROD ? 3 : -1;
}

wmpi__kernel *wmpi__kernel_of(int op, int dtype)
{
    int slot = op_slot(op);
    if (slot < 0 || dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return NULL;
    return kernels[dtype][slot];
}

MPI_Datatype wmpi__datatype(int dtype)
{
    switch (dtype) {
    case WEFT_BOOL: return MPI_C_BOOL;
    case WEFT_UINT8: return MPI_UINT8_T;
    case WEFT_INT8: return MPI_INT8_T;
    case WEFT_INT16: return MPI_INT16_T;
    case WEFT_INT32: return MPI_INT32_T;
    case WEFT_INT64: return MPI_INT64_T;
    case WEFT_FLOAT16: return half_type;
    case WEFT_BFLOAT16: return bf16_type;
    case WEFT_FLOAT32: return MPI_FLOAT;
    case WEFT_FLOAT64: return MPI_DOUBLE;
    case WEFT_COMPLEX64: return MPI_C_FLOAT_COMPLEX;
    case WEFT_COMPLEX128: return MPI_C_DOUBLE_COMPLEX;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op wmpi__op(int op, int dtype)
{
    int slot = op_slot(op);
    if (slot < 0)
        return MPI_OP_NULL;
    if (dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16)
        return half_ops[dtype == WEFT_BFLOAT16][slot];
    if (dtype == WEFT_BOOL) /* MPI reduces C bools only logically: sum/max any, prod/min all */
        return slot == 0 || slot == 1 ? MPI_LOR : MPI_LAND;
    if ((dtype == WEFT_COMPLEX64 || dtype == WEFT_COMPLEX128) && (slot == 1 || slot == 2))
        return MPI_OP_NULL;
    static const MPI_Op plain[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
    return plain[slot];
}
