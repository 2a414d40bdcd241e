/* backends/mpi/types.c — weft dtypes and reductions as MPI sees them.
 * MPI's own types and operations cover every dtype but float16 and
 * bfloat16; for those two, one reduction body per operation is
 * instantiated for each format through a table, computing in float32 and
 * rounding back once per element, as torch's CPU kernels do. */
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

/* inout[i] = in[i] (op) inout[i], in the 16-bit format FMT */
#define HALF_REDUCTION(FMT, OP)                                                             \
    static void reduce_##FMT##_##OP(void *in, void *inout, int *len, MPI_Datatype *type)  \
    {                                                                                       \
        const uint16_t *a = in;                                                             \
        uint16_t *b = inout;                                                                \
        for (int i = 0; i < *len; i++)                                                      \
            b[i] = float_to_##FMT(op_##OP(FMT##_to_float(a[i]), FMT##_to_float(b[i])));     \
    }
HALF_REDUCTION(f16, sum)
HALF_REDUCTION(f16, max)
HALF_REDUCTION(f16, min)
HALF_REDUCTION(f16, prod)
HALF_REDUCTION(bf16, sum)
HALF_REDUCTION(bf16, max)
HALF_REDUCTION(bf16, min)
HALF_REDUCTION(bf16, prod)

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
    /* index into half_ops' rows */
    int slot = op == WEFT_REDUCE_SUM ? 0 : op == WEFT_REDUCE_MAX ? 1 : op == WEFT_REDUCE_MIN ? 2
             : op == WEFT_REDUCE_PROD ? 3 : -1;
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
