/* backends/cpu/binary.c — the elementwise operators of two and three
 * tensors beyond add/sub/mul/div (which keep their fast path in
 * elementwise.c): division with a rounding mode, remainder, fmod, pow,
 * atan2, maximum/minimum, comparisons, logical and bitwise operators, where,
 * masked_fill, lerp, addcmul and addcdiv.  Broadcasting, type promotion,
 * strided and aliased operands come from cpu__map; each loop body is
 * written once and instantiated per dtype. */
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include "cpu.h"

/* --------------------------------------------------------------- loops */

/* A loop over inputs a, b (and c for the ternary ones) of stored type TI,
 * computed as CI, writing OUT (stored TO).  p0 is the first double of
 * params, converted to CI (addcmul's value, masked_fill's value). */
#define DEFINE_NARY_LOOP(FN, IN, TI, CI, OUT, TO, NIN, EXPR)                            \
    static void FN(char **ptrs, const int64_t *st, int64_t n, const void *params)        \
    {                                                                                    \
        const CI p0 = params ? cpu_from_double_##IN(*(const double *)params) : (CI)0;    \
        (void)p0;                                                                        \
        const int64_t ei = (int64_t)sizeof(TI);                                          \
        if (st[0] == (int64_t)sizeof(TO) && st[1] == ei && st[2] == ei &&                 \
            (NIN < 3 || st[3] == ei)) {                                                  \
            TO *o = (TO *)ptrs[0];                                                       \
            const TI *x = (const TI *)ptrs[1], *y = (const TI *)ptrs[2];                 \
            const TI *z = NIN < 3 ? x : (const TI *)ptrs[3];                             \
            _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                       \
                const CI a = cpu_load_##IN(x[i]), b = cpu_load_##IN(y[i]);               \
                const CI c = cpu_load_##IN(z[i]);                                        \
                (void)c;                                                                 \
                o[i] = cpu_store_##OUT(EXPR);                                            \
            }                                                                            \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) {                                            \
                const CI a = cpu_load_##IN(*(const TI *)(ptrs[1] + i * st[1]));          \
                const CI b = cpu_load_##IN(*(const TI *)(ptrs[2] + i * st[2]));          \
                const CI c = NIN < 3 ? a : cpu_load_##IN(*(const TI *)(ptrs[3] + i * st[3])); \
                (void)c;                                                                 \
                *(TO *)(ptrs[0] + i * st[0]) = cpu_store_##OUT(EXPR);                    \
            }                                                                            \
        }                                                                                \
    }
#define SAME_LOOP(OP, NAME, T, C, EXPR) DEFINE_NARY_LOOP(OP##_##NAME, NAME, T, C, NAME, T, 2, EXPR)
#define BOOL_LOOP(OP, NAME, T, C, EXPR) \
    DEFINE_NARY_LOOP(OP##_##NAME, NAME, T, C, boolean, bool, 2, EXPR)
#define TERNARY_LOOP(OP, NAME, T, C, EXPR) \
    DEFINE_NARY_LOOP(OP##_##NAME, NAME, T, C, NAME, T, 3, EXPR)

/* Integer division, rounded toward zero or down, and the two remainders.
 * The kernels refuse a zero divisor before the loop runs; the checks for 0
 * here only keep a racing writer from causing undefined behaviour.  b == -1
 * is done as a negation that wraps (INT_MIN / -1 is INT_MIN, as in
 * PyTorch). */
#define INTEGER_DIVISION(NAME, DTYPE, T, C, U)                                        \
    static inline C div_trunc_int_##NAME(C a, C b)                                    \
    {                                                                                 \
        return b == 0 ? (C)0 : b == (C)-1 ? (C)((U)0 - (U)a) : (C)(a / b);            \
    }                                                                                 \
    static inline C div_floor_int_##NAME(C a, C b)                                    \
    {                                                                                 \
        if (b == 0 || b == (C)-1)                                                     \
            return div_trunc_int_##NAME(a, b);                                        \
        C q = (C)(a / b), r = (C)(a % b);                                             \
        return r != 0 && ((r < 0) != (b < 0)) ? (C)(q - 1) : q;                       \
    }                                                                                 \
    static inline C fmod_int_##NAME(C a, C b)                                         \
    {                                                                                 \
        return b == 0 || b == (C)-1 ? (C)0 : (C)(a % b);                              \
    }                                                                                 \
    static inline C remainder_int_##NAME(C a, C b)                                    \
    {                                                                                 \
        C r = fmod_int_##NAME(a, b);                                                  \
        return r != 0 && ((r < 0) != (b < 0)) ? (C)(r + b) : r;                       \
    }                                                                                 \
    /* a ** b by squaring, wrapping; negative b gives 0 but for |a| == 1 */           \
    static inline C pow_int_##NAME(C a, C b)                                          \
    {                                                                                 \
        if (b < 0)                                                                    \
            return a == 1 ? (C)1 : a == (C)-1 ? (C)((b & 1) ? -1 : 1) : (C)0;         \
        return pow_unsigned_##NAME(a, b);                                             \
    }
/* unsigned: no negative operands, no overflow in a / b */
#define UNSIGNED_DIVISION(NAME, DTYPE, T, C, U)                                       \
    static inline C div_trunc_int_##NAME(C a, C b) { return b == 0 ? (C)0 : (C)(a / b); } \
    static inline C div_floor_int_##NAME(C a, C b) { return div_trunc_int_##NAME(a, b); } \
    static inline C fmod_int_##NAME(C a, C b) { return b == 0 ? (C)0 : (C)(a % b); }  \
    static inline C remainder_int_##NAME(C a, C b) { return fmod_int_##NAME(a, b); }  \
    static inline C pow_int_##NAME(C a, C b) { return pow_unsigned_##NAME(a, b); }
#define POW_UNSIGNED(NAME, DTYPE, T, C, U)                                            \
    static inline C pow_unsigned_##NAME(C a, C b)                                     \
    {                                                                                 \
        U result = 1, base = (U)a;                                                    \
        for (uint64_t e = (uint64_t)b; e; e >>= 1) {                                  \
            if (e & 1)                                                                \
                result *= base;                                                       \
            base *= base;                                                             \
        }                                                                             \
        return (C)result;                                                             \
    }
CPU_DTYPES_INTEGRAL(POW_UNSIGNED)
CPU_DTYPES_UNSIGNED(UNSIGNED_DIVISION)
CPU_DTYPES_SIGNED(INTEGER_DIVISION)


/* Floating division rounded down, and the remainder with the divisor's
 * sign, as PyTorch computes them (exact where a - fmod(a, b) is). */
#define FLOATING_DIVISION(NAME, DTYPE, T, C, U)                                       \
    static inline C div_floor_float_##NAME(C a, C b)                                  \
    {                                                                                 \
        if (b == 0)                                                                   \
            return a / b;                                                             \
        C mod = fmod(a, b), div = (a - mod) / b;                                      \
        if (mod != 0 && (b < 0) != (mod < 0))                                         \
            div -= 1;                                                                 \
        if (div == 0)                                                                 \
            return copysign((C)0, a / b);                                             \
        C floordiv = floor(div);                                                      \
        return div - floordiv > (C)0.5 ? floordiv + 1 : floordiv;                     \
    }                                                                                 \
    static inline C remainder_float_##NAME(C a, C b)                                  \
    {                                                                                 \
        C mod = fmod(a, b);                                                           \
        return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;                      \
    }
CPU_DTYPES_FLOATING(FLOATING_DIVISION)

#define DIVISION_INTEGRAL(NAME, DTYPE, T, C, U)                           \
    SAME_LOOP(div_trunc, NAME, T, C, div_trunc_int_##NAME(a, b))          \
    SAME_LOOP(div_floor, NAME, T, C, div_floor_int_##NAME(a, b))          \
    SAME_LOOP(fmod, NAME, T, C, fmod_int_##NAME(a, b))                    \
    SAME_LOOP(remainder, NAME, T, C, remainder_int_##NAME(a, b))          \
    SAME_LOOP(pow, NAME, T, C, pow_int_##NAME(a, b))
#define DIVISION_FLOATING(NAME, DTYPE, T, C, U)                           \
    SAME_LOOP(div_true, NAME, T, C, a / b)                                \
    SAME_LOOP(div_trunc, NAME, T, C, trunc(a / b))                        \
    SAME_LOOP(div_floor, NAME, T, C, div_floor_float_##NAME(a, b))        \
    SAME_LOOP(fmod, NAME, T, C, fmod(a, b))                               \
    SAME_LOOP(remainder, NAME, T, C, remainder_float_##NAME(a, b))        \
    SAME_LOOP(pow, NAME, T, C, pow(a, b))                                 \
    SAME_LOOP(atan2, NAME, T, C, atan2(a, b))
#define DIVISION_COMPLEX(NAME, DTYPE, T, C, U)                            \
    SAME_LOOP(div_true, NAME, T, C, a / b)                                \
    SAME_LOOP(pow, NAME, T, C, pow(a, b))
CPU_DTYPES_INTEGRAL(DIVISION_INTEGRAL)
CPU_DTYPES_FLOATING(DIVISION_FLOATING)
CPU_DTYPES_COMPLEX(DIVISION_COMPLEX)

/* maximum/minimum: NaN wins, as in PyTorch */
#define EXTREMES_EXACT(NAME, DTYPE, T, C, U)                              \
    SAME_LOOP(maximum, NAME, T, C, a > b ? a : b)                         \
    SAME_LOOP(minimum, NAME, T, C, a < b ? a : b)
#define EXTREMES_FLOATING(NAME, DTYPE, T, C, U)                           \
    SAME_LOOP(maximum, NAME, T, C, a != a ? a : b != b ? b : a > b ? a : b) \
    SAME_LOOP(minimum, NAME, T, C, a != a ? a : b != b ? b : a < b ? a : b)
CPU_DTYPES_BOOL(EXTREMES_EXACT)
CPU_DTYPES_INTEGRAL(EXTREMES_EXACT)
CPU_DTYPES_FLOATING(EXTREMES_FLOATING)

/* comparisons and logical operators: a bool result */
#define EQUALITY(NAME, DTYPE, T, C, U)                                    \
    BOOL_LOOP(eq, NAME, T, C, a == b)                                     \
    BOOL_LOOP(ne, NAME, T, C, a != b)                                     \
    BOOL_LOOP(logical_and, NAME, T, C, a != 0 && b != 0)                  \
    BOOL_LOOP(logical_or, NAME, T, C, a != 0 || b != 0)                   \
    BOOL_LOOP(logical_xor, NAME, T, C, (a != 0) != (b != 0))
#define ORDER(NAME, DTYPE, T, C, U)                                       \
    BOOL_LOOP(lt, NAME, T, C, a < b)                                      \
    BOOL_LOOP(le, NAME, T, C, a <= b)                                     \
    BOOL_LOOP(gt, NAME, T, C, a > b)                                      \
    BOOL_LOOP(ge, NAME, T, C, a >= b)
CPU_DTYPES_ALL(EQUALITY)
CPU_DTYPES_BOOL(ORDER)
CPU_DTYPES_INTEGRAL(ORDER)
CPU_DTYPES_FLOATING(ORDER)

#define BITWISE(NAME, DTYPE, T, C, U)                                     \
    SAME_LOOP(bitwise_and, NAME, T, C, (C)(a & b))                        \
    SAME_LOOP(bitwise_or, NAME, T, C, (C)(a | b))                         \
    SAME_LOOP(bitwise_xor, NAME, T, C, (C)(a ^ b))
CPU_DTYPES_BOOL(BITWISE)
CPU_DTYPES_INTEGRAL(BITWISE)

/* Ternaries: where's condition arrives as a (converted to the values'
 * dtype, so nonzero is true); masked_fill's mask as b. */
#define SELECTION(NAME, DTYPE, T, C, U)                                   \
    TERNARY_LOOP(where, NAME, T, C, a != 0 ? b : c)                       \
    SAME_LOOP(masked_fill, NAME, T, C, b != 0 ? p0 : a)
CPU_DTYPES_ALL(SELECTION)
/* lerp as PyTorch computes it: from the nearer end, so weight 1 gives end */
#define LERP(NAME, DTYPE, T, C, U)                                        \
    TERNARY_LOOP(lerp, NAME, T, C,                                        \
                 __real__ c * __real__ c + __imag__ c * __imag__ c < 0.25 \
                     ? a + c * (b - a)                                    \
                     : b - (b - a) * ((C)1 - c))
CPU_DTYPES_FLOATING(LERP)
CPU_DTYPES_COMPLEX(LERP)
#define ADDCMUL_WRAP(NAME, DTYPE, T, C, U) \
    TERNARY_LOOP(addcmul, NAME, T, C, (C)((U)a + (U)p0 * (U)b * (U)c))
#define ADDCMUL_PLAIN(NAME, DTYPE, T, C, U) TERNARY_LOOP(addcmul, NAME, T, C, a + p0 * b * c)
#define ADDCDIV(NAME, DTYPE, T, C, U) TERNARY_LOOP(addcdiv, NAME, T, C, a + p0 * (b / c))
CPU_DTYPES_INTEGRAL(ADDCMUL_WRAP)
CPU_DTYPES_FLOATING(ADDCMUL_PLAIN)
CPU_DTYPES_COMPLEX(ADDCMUL_PLAIN)
CPU_DTYPES_FLOATING(ADDCDIV)
CPU_DTYPES_COMPLEX(ADDCDIV)

/* relu's backward in one pass: grad_output (a) where self (b) is above the
 * threshold, else 0.  A NaN self passes the gradient, as PyTorch's. */
#define THRESHOLD_BACKWARD(NAME, DTYPE, T, C, U) \
    SAME_LOOP(threshold_backward, NAME, T, C, b <= p0 ? (C)0 : a)
CPU_DTYPES_INTEGRAL(THRESHOLD_BACKWARD)
CPU_DTYPES_FLOATING(THRESHOLD_BACKWARD)

/* --------------------------------------------------------- loop tables */

#define INTEGRAL_FLOATING(OP) CPU_ENTRIES_INTEGRAL(OP) CPU_ENTRIES_FLOATING(OP)
#define BOOL_INTEGRAL_FLOATING(OP) CPU_ENTRIES_BOOL(OP) INTEGRAL_FLOATING(OP)
#define FLOATING_COMPLEX(OP) CPU_ENTRIES_FLOATING(OP) CPU_ENTRIES_COMPLEX(OP)
#define NUMERIC(OP) INTEGRAL_FLOATING(OP) CPU_ENTRIES_COMPLEX(OP)
#define ALL(OP) CPU_ENTRIES_BOOL(OP) NUMERIC(OP)
#define BOOL_INTEGRAL(OP) CPU_ENTRIES_BOOL(OP) CPU_ENTRIES_INTEGRAL(OP)
#define TABLE(OP, ENTRIES) static const cpu_loop_fn OP##_loops[WEFT_NUM_DTYPES] = {ENTRIES(OP)};
TABLE(div_true, FLOATING_COMPLEX)
TABLE(div_trunc, INTEGRAL_FLOATING)
TABLE(div_floor, INTEGRAL_FLOATING)
TABLE(fmod, INTEGRAL_FLOATING)
TABLE(remainder, INTEGRAL_FLOATING)
TABLE(pow, NUMERIC)
TABLE(atan2, CPU_ENTRIES_FLOATING)
TABLE(maximum, BOOL_INTEGRAL_FLOATING)
TABLE(minimum, BOOL_INTEGRAL_FLOATING)
TABLE(eq, ALL)
TABLE(ne, ALL)
TABLE(lt, BOOL_INTEGRAL_FLOATING)
TABLE(le, BOOL_INTEGRAL_FLOATING)
TABLE(gt, BOOL_INTEGRAL_FLOATING)
TABLE(ge, BOOL_INTEGRAL_FLOATING)
TABLE(logical_and, ALL)
TABLE(logical_or, ALL)
TABLE(logical_xor, ALL)
TABLE(bitwise_and, BOOL_INTEGRAL)
TABLE(bitwise_or, BOOL_INTEGRAL)
TABLE(bitwise_xor, BOOL_INTEGRAL)
TABLE(where, ALL)
TABLE(masked_fill, ALL)
TABLE(lerp, FLOATING_COMPLEX)
TABLE(addcmul, NUMERIC)
TABLE(addcdiv, FLOATING_COMPLEX)
TABLE(threshold_backward, INTEGRAL_FLOATING)

/* ---------------------------------------------------- the binary kernel */

typedef enum binary_result {
    RESULT_SAME,  /* the promoted dtype */
    RESULT_FLOAT, /* integer and bool promote to float32 (true division) */
    RESULT_BOOL   /* comparisons and logical operators */
} binary_result;

typedef struct binary_op {
    const cpu_loop_fn *loops;
    binary_result result;
    bool integer_division; /* refuses an integer zero divisor */
    bool is_pow;           /* refuses a negative integer Scalar exponent */
    bool has_mode;         /* div_mode: rounding_mode picks the loops */
} binary_op;

typedef struct binary_form {
    const binary_op *op;
    cpu_mode mode;
    bool scalar; /* `other` is a Scalar */
} binary_form;

/* Whether an integer divisor has a zero: through eq_scalar and any, so
 * that the loops need no way to report it. */
static int check_divisor(const char *op, const weft_tensor *divisor)
{
    weft_tensor *zeros = NULL, *found = NULL;
    double any = 0;
    int rc = weft_eq_scalar(&zeros, divisor, 0);
    if (rc == 0)
        rc = weft_any(&found, zeros, NULL, 0, false);
    if (rc == 0)
        rc = weft_tensor_item(found, &any);
    weft_tensor_release(zeros);
    weft_tensor_release(found);
    if (rc == 0 && any != 0)
        rc = weft_set_error(WEFT_EINVAL, "%s: ZeroDivisionError: integer division by zero", op);
    return rc;
}

/* The loops of div_mode for its rounding_mode argument (NULL: true). */
static int mode_loops(const char *op, const weft_value *mode, const cpu_loop_fn **loops,
                      bool *integer_division, binary_result *result)
{
    const char *m = mode->tag == WEFT_VALUE_STRING ? mode->u.string : NULL;
    *integer_division = m != NULL;
    *result = m ? RESULT_SAME : RESULT_FLOAT;
    if (!m)
        *loops = div_true_loops;
    else if (strcmp(m, "trunc") == 0)
        *loops = div_trunc_loops;
    else if (strcmp(m, "floor") == 0)
        *loops = div_floor_loops;
    else
        return weft_set_error(WEFT_EINVAL, "%s: div expected rounding_mode to be one of None, "
                              "'trunc', or 'floor' but found '%s'", op, m);
    return 0;
}

static int binary_kernel(weft_call *call, void *ctx)
{
    const binary_form *form = ctx;
    const binary_op *b = form->op;
    const char *op = weft_op_name(call->op);
    const int first = form->mode == CPU_OUT ? 1 : 0;
    weft_tensor *self = call->args[first].u.tensor;
    const weft_value *other = &call->args[first + 1];
    const cpu_loop_fn *loops = b->loops;
    bool integer_division = b->integer_division;
    binary_result result = b->result;
    int rc = 0;
    if (b->has_mode &&
        (rc = mode_loops(op, &call->args[first + 2], &loops, &integer_division, &result)) < 0)
        return rc;

    weft_dtype st = weft_tensor_dtype(self), ct;
    double value = 0;
    if (form->scalar) {
        value = weft_value_double(other);
        ct = cpu_scalar_result_type(st, other, value);
    } else {
        /* one dtype promotes to itself: the common call skips the lookup */
        weft_dtype ot = weft_tensor_dtype(other->u.tensor);
        ct = ot == st ? st : weft_result_type((const weft_tensor *[]){self, other->u.tensor}, 2);
    }
    if (result == RESULT_FLOAT && cpu_integral_or_bool(ct))
        ct = WEFT_FLOAT32;
    if (ct < 0 || ct >= WEFT_NUM_DTYPES || !loops[ct])
        return cpu__unsupported_dtype(op, ct);
    bool integral = cpu_integral_or_bool(ct);
    if (b->is_pow && integral && form->scalar && value < 0)
        return weft_set_error(WEFT_EINVAL, "%s: integers to negative integer powers are not "
                              "allowed", op);
    /* an empty result divides nothing: torch raises only where a division
     * by zero happens (a broadcast with an empty operand is empty) */
    if (integer_division && integral && weft_tensor_numel(self) > 0 &&
        (form->scalar || weft_tensor_numel(other->u.tensor) > 0)) {
        if (form->scalar && value == 0)
            return weft_set_error(WEFT_EINVAL, "%s: ZeroDivisionError: integer division by zero",
                                  op);
        if (!form->scalar && (rc = check_divisor(op, other->u.tensor)) < 0)
            return rc;
    }
    weft_tensor *scalar = NULL;
    if (form->scalar && (rc = cpu__scalar_tensor(&scalar, value, ct)) < 0)
        return rc;
    weft_tensor *inputs[2] = {self, form->scalar ? scalar : other->u.tensor};
    cpu_map m = {op, ct, result == RESULT_BOOL ? WEFT_BOOL : ct, loops[ct], NULL};
    rc = cpu__map(call, form->mode, &m, inputs, 2);
    weft_tensor_release(scalar);
    return rc;
}

/* ------------------------------------------------ the ternary kernels */

/* Runs loops[ct] over inputs, with p0 = value. */
static int run_map(weft_call *call, cpu_mode mode, const cpu_loop_fn *loops, weft_dtype ct,
                   weft_dtype original, weft_tensor *const *inputs, int n, const double *value)
{
    const char *op = weft_op_name(call->op);
    if (ct < 0 || ct >= WEFT_NUM_DTYPES || !loops[ct])
        return cpu__unsupported_dtype(op, original);
    cpu_map m = {op, ct, ct, loops[ct], value};
    return cpu__map(call, mode, &m, inputs, n);
}

static int require_bool(const char *op, const char *what, const weft_tensor *t)
{
    if (weft_tensor_dtype(t) == WEFT_BOOL)
        return 0;
    return weft_set_error(WEFT_EDTYPE, "%s: expected %s to be a bool tensor, but got %s", op,
                          what, weft_dtype_name(weft_tensor_dtype(t)));
}

/* where(condition, self, other) and where_out(out, condition, self, other) */
static int where_kernel(weft_call *call, void *ctx)
{
    const cpu_mode *mode = ctx;
    const weft_value *args = call->args + (*mode == CPU_OUT ? 1 : 0);
    weft_tensor *inputs[3] = {args[0].u.tensor, args[1].u.tensor, args[2].u.tensor};
    int rc = require_bool(weft_op_name(call->op), "condition", inputs[0]);
    if (rc < 0)
        return rc;
    weft_dtype ct = weft_result_type((const weft_tensor *const *)inputs + 1, 2);
    return run_map(call, *mode, where_loops, ct, ct, inputs, 3, NULL);
}

/* masked_fill(self, mask, value): the result has self's shape and dtype */
static int masked_fill_kernel(weft_call *call, void *ctx)
{
    const cpu_mode *mode = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *inputs[2] = {call->args[0].u.tensor, call->args[1].u.tensor};
    double value = weft_value_double(&call->args[2]);
    int rc = require_bool(op, "mask", inputs[1]);
    if (rc < 0)
        return rc;
    int64_t shape[WEFT_MAX_DIMS];
    int nshape = 0, nd = weft_tensor_ndim(inputs[0]);
    rc = weft_broadcast_shapes(shape, &nshape, weft_tensor_sizes(inputs[0]), nd,
                               weft_tensor_sizes(inputs[1]), weft_tensor_ndim(inputs[1]));
    if (rc == 0 && (nshape != nd || memcmp(shape, weft_tensor_sizes(inputs[0]),
                                           (size_t)nd * sizeof(int64_t)) != 0)) {
        char sm[256], ss[256];
        rc = weft_set_error(WEFT_ESHAPE, "%s: the mask of shape %s does not broadcast to self's "
                            "shape %s", op,
                            weft_format_shape(sm, sizeof sm, weft_tensor_sizes(inputs[1]),
                                           weft_tensor_ndim(inputs[1])),
                            weft_format_shape(ss, sizeof ss, weft_tensor_sizes(inputs[0]), nd));
    }
    if (rc < 0)
        return rc;
    weft_dtype dt = weft_tensor_dtype(inputs[0]);
    return run_map(call, *mode, masked_fill_loops, dt, dt, inputs, 2, &value);
}

/* threshold_backward(grad_output, self, threshold): the two broadcast and
 * promote like a binary operator; bool and complex have no loop */
static int threshold_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *inputs[2] = {call->args[0].u.tensor, call->args[1].u.tensor};
    double value = weft_value_double(&call->args[2]);
    weft_dtype ct = weft_promote_types(weft_tensor_dtype(inputs[0]), weft_tensor_dtype(inputs[1]));
    return run_map(call, CPU_FUNCTIONAL, threshold_backward_loops, ct, ct, inputs, 2, &value);
}

/* lerp(self, end, weight) with a Tensor or a Scalar weight: self and end
 * must have one dtype, as in PyTorch */
typedef struct ternary_form {
    cpu_mode mode;
    bool scalar; /* the third operand is a Scalar */
} ternary_form;

static int lerp_kernel(weft_call *call, void *ctx)
{
    const ternary_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const weft_value *args = call->args + (form->mode == CPU_OUT ? 1 : 0);
    weft_tensor *self = args[0].u.tensor, *end = args[1].u.tensor;
    weft_dtype dt = weft_tensor_dtype(self);
    if (weft_tensor_dtype(end) != dt ||
        (!form->scalar && weft_tensor_dtype(args[2].u.tensor) != dt))
        return weft_set_error(WEFT_EDTYPE, "%s: expected self, end%s to have one dtype (self is "
                              "%s, end %s)", op, form->scalar ? "" : " and weight",
                              weft_dtype_name(dt), weft_dtype_name(weft_tensor_dtype(end)));
    weft_tensor *weight = NULL;
    int rc = 0;
    if (form->scalar) {
        if (dt < 0 || dt >= WEFT_NUM_DTYPES || !lerp_loops[dt])
            return cpu__unsupported_dtype(op, dt);
        if ((rc = cpu__scalar_tensor(&weight, weft_value_double(&args[2]), dt)) < 0)
            return rc;
    }
    weft_tensor *inputs[3] = {self, end, form->scalar ? weight : args[2].u.tensor};
    rc = run_map(call, form->mode, lerp_loops, dt, dt, inputs, 3, NULL);
    weft_tensor_release(weight);
    return rc;
}

/* addcmul and addcdiv(self, tensor1, tensor2, *, value) */
typedef struct addc_form {
    cpu_mode mode;
    bool divide;
} addc_form;

static int addc_kernel(weft_call *call, void *ctx)
{
    const addc_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const weft_value *args = call->args + (form->mode == CPU_OUT ? 1 : 0);
    weft_tensor *inputs[3] = {args[0].u.tensor, args[1].u.tensor, args[2].u.tensor};
    double value = weft_value_double(&args[3]);
    weft_dtype ct = weft_result_type((const weft_tensor *const *)inputs, 3);
    if (form->divide && cpu_integral_or_bool(ct))
        return weft_set_error(WEFT_EDTYPE, "%s: integer division with addcdiv is not supported; "
                              "use true division of floating-point tensors (got %s)", op,
                              weft_dtype_name(ct));
    if (cpu_integral_or_bool(ct) && !cpu_is_whole(value))
        return weft_set_error(WEFT_EINVAL, "%s: for integral input tensors, argument value must "
                              "not be a floating point number (got %g)", op, value);
    return run_map(call, form->mode, form->divide ? addcdiv_loops : addcmul_loops, ct, ct,
                   inputs, 3, &value);
}

/* -------------------------------------------------------- registration */

#define BINARY_OP(NAME, LOOPS, RESULT, INTDIV, IS_POW, HAS_MODE)                              \
    static const binary_op NAME##_op = {LOOPS, RESULT, INTDIV, IS_POW, HAS_MODE};              \
    static const binary_form NAME##_functional = {&NAME##_op, CPU_FUNCTIONAL, false};          \
    static const binary_form NAME##_inplace __attribute__((unused)) = {&NAME##_op,             \
                                                                       CPU_INPLACE, false};    \
    static const binary_form NAME##_out = {&NAME##_op, CPU_OUT, false};                        \
    static const binary_form NAME##_scalar __attribute__((unused)) = {&NAME##_op,              \
                                                                      CPU_FUNCTIONAL, true};   \
    static const binary_form NAME##_scalar_inplace __attribute__((unused)) = {                 \
        &NAME##_op, CPU_INPLACE, true};
#define SIMPLE(NAME, RESULT) BINARY_OP(NAME, NAME##_loops, RESULT, false, false, false)
BINARY_OP(div_mode, div_true_loops, RESULT_FLOAT, false, false, true)
BINARY_OP(remainder, remainder_loops, RESULT_SAME, true, false, false)
BINARY_OP(fmod, fmod_loops, RESULT_SAME, true, false, false)
BINARY_OP(pow, pow_loops, RESULT_SAME, false, true, false)
SIMPLE(atan2, RESULT_FLOAT)
SIMPLE(maximum, RESULT_SAME)
SIMPLE(minimum, RESULT_SAME)
SIMPLE(eq, RESULT_BOOL)
SIMPLE(ne, RESULT_BOOL)
SIMPLE(lt, RESULT_BOOL)
SIMPLE(le, RESULT_BOOL)
SIMPLE(gt, RESULT_BOOL)
SIMPLE(ge, RESULT_BOOL)
SIMPLE(logical_and, RESULT_BOOL)
SIMPLE(logical_or, RESULT_BOOL)
SIMPLE(logical_xor, RESULT_BOOL)
SIMPLE(bitwise_and, RESULT_SAME)
SIMPLE(bitwise_or, RESULT_SAME)
SIMPLE(bitwise_xor, RESULT_SAME)

#define TENSOR_ENTRIES(NAME)                                    \
    {#NAME, binary_kernel, &NAME##_functional},                 \
    {#NAME "_", binary_kernel, &NAME##_inplace},                \
    {#NAME "_out", binary_kernel, &NAME##_out}
#define SCALAR_ENTRIES(NAME)                                    \
    {#NAME "_scalar", binary_kernel, &NAME##_scalar},           \
    {#NAME "_scalar_", binary_kernel, &NAME##_scalar_inplace}
#define ALL_ENTRIES(NAME) TENSOR_ENTRIES(NAME), SCALAR_ENTRIES(NAME)

static const cpu_mode functional_mode = CPU_FUNCTIONAL, inplace_mode = CPU_INPLACE,
                      out_mode = CPU_OUT;
static const ternary_form lerp_forms[] = {{CPU_FUNCTIONAL, false}, {CPU_INPLACE, false},
                                          {CPU_OUT, false},        {CPU_FUNCTIONAL, true},
                                          {CPU_INPLACE, true},     {CPU_OUT, true}};
static const addc_form addc_forms[] = {{CPU_FUNCTIONAL, false}, {CPU_INPLACE, false},
                                       {CPU_OUT, false},        {CPU_FUNCTIONAL, true},
                                       {CPU_INPLACE, true},     {CPU_OUT, true}};

static const weft_kernel_entry binary_kernels[] = {
    {"div_mode", binary_kernel, &div_mode_functional},
    {"div_mode_", binary_kernel, &div_mode_inplace},
    {"div_mode_out", binary_kernel, &div_mode_out},
    {"div_scalar_mode", binary_kernel, &div_mode_scalar},
    {"div_scalar_mode_", binary_kernel, &div_mode_scalar_inplace},
    ALL_ENTRIES(remainder),
    ALL_ENTRIES(fmod),
    ALL_ENTRIES(pow),
    TENSOR_ENTRIES(atan2),
    {"maximum", binary_kernel, &maximum_functional},
    {"maximum_out", binary_kernel, &maximum_out},
    {"minimum", binary_kernel, &minimum_functional},
    {"minimum_out", binary_kernel, &minimum_out},
    ALL_ENTRIES(eq),
    ALL_ENTRIES(ne),
    ALL_ENTRIES(lt),
    ALL_ENTRIES(le),
    ALL_ENTRIES(gt),
    ALL_ENTRIES(ge),
    TENSOR_ENTRIES(logical_and),
    TENSOR_ENTRIES(logical_or),
    TENSOR_ENTRIES(logical_xor),
    ALL_ENTRIES(bitwise_and),
    ALL_ENTRIES(bitwise_or),
    ALL_ENTRIES(bitwise_xor),
    {"where", where_kernel, &functional_mode},
    {"where_out", where_kernel, &out_mode},
    {"masked_fill", masked_fill_kernel, &functional_mode},
    {"masked_fill_", masked_fill_kernel, &inplace_mode},
    {"lerp", lerp_kernel, &lerp_forms[0]},
    {"lerp_", lerp_kernel, &lerp_forms[1]},
    {"lerp_out", lerp_kernel, &lerp_forms[2]},
    {"lerp_scalar", lerp_kernel, &lerp_forms[3]},
    {"lerp_scalar_", lerp_kernel, &lerp_forms[4]},
    {"lerp_scalar_out", lerp_kernel, &lerp_forms[5]},
    {"addcmul", addc_kernel, &addc_forms[0]},
    {"addcmul_", addc_kernel, &addc_forms[1]},
    {"addcmul_out", addc_kernel, &addc_forms[2]},
    {"addcdiv", addc_kernel, &addc_forms[3]},
    {"addcdiv_", addc_kernel, &addc_forms[4]},
    {"addcdiv_out", addc_kernel, &addc_forms[5]},
    {"threshold_backward", threshold_backward_kernel, NULL},
};

int cpu__register_binary(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, binary_kernels, sizeof binary_kernels / sizeof *binary_kernels);
}
