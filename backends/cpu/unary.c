/* backends/cpu/unary.c — the unary elementwise operators (neg, abs, exp, log,
 * sqrt, relu, sigmoid, tanh) and their in-place and out= forms, on the
 * elementwise iterator of elementwise.c.  Integer inputs of the
 * floating-point functions give float32, as in PyTorch. */
#include <math.h>
#include <tgmath.h> /* exp, log, ... pick the float, double or complex version */

#include "cpu.h"

/* One unary loop: reads IN (stored TI, computed CI), writes OUT (stored TO);
 * EXPR maps `a` to the result. */
#define DEFINE_UNARY_LOOP(FN, IN, TI, CI, OUT, TO, EXPR)                         \
    static void FN(char **ptrs, const int64_t *st, int64_t n, const void *params) \
    {                                                                             \
        (void)params;                                                             \
        TO *o = (TO *)ptrs[0];                                                    \
        const TI *x = (const TI *)ptrs[1];                                        \
        if (n == 1) { /* one element: no strides, no vector loop set-up */        \
            const CI a = cpu_load_##IN(*x);                                       \
            *o = cpu_store_##OUT(EXPR);                                           \
        } else if (st[0] == (int64_t)sizeof(TO) && st[1] == (int64_t)sizeof(TI)) { \
            _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                \
                const CI a = cpu_load_##IN(x[i]);                                 \
                o[i] = cpu_store_##OUT(EXPR);                                     \
            }                                                                     \
        } else {                                                                  \
            for (int64_t i = 0; i < n; i++) {                                     \
                const CI a = cpu_load_##IN(*(const TI *)(ptrs[1] + i * st[1]));   \
                *(TO *)(ptrs[0] + i * st[0]) = cpu_store_##OUT(EXPR);             \
            }                                                                     \
        }                                                                         \
    }

/* Loops whose result has the input's dtype: OP_NAME for dtype NAME. */
#define SAME_TYPE_LOOP(OP, NAME, T, C, EXPR) DEFINE_UNARY_LOOP(OP##_##NAME, NAME, T, C, NAME, T, EXPR)

/* neg: integers wrap through U (so -INT_MIN is INT_MIN, not undefined) */
#define NEG_WRAP(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(neg, NAME, T, C, (C)((U)0 - (U)a))
#define NEG_PLAIN(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(neg, NAME, T, C, -a)
CPU_DTYPES_INTEGRAL(NEG_WRAP)
CPU_DTYPES_FLOATING(NEG_PLAIN)
CPU_DTYPES_COMPLEX(NEG_PLAIN)

/* abs: unsigned values are their own; complex gives its real type; bool
 * has none (as in PyTorch) */
#define ABS_IDENTITY(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(abs, NAME, T, C, a)
#define ABS_SIGNED(NAME, DTYPE, T, C, U) \
    SAME_TYPE_LOOP(abs, NAME, T, C, (C)(a < 0 ? (U)0 - (U)a : (U)a))
#define ABS_FLOATING(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(abs, NAME, T, C, fabs(a))
CPU_DTYPES_UNSIGNED(ABS_IDENTITY)
CPU_DTYPES_SIGNED(ABS_SIGNED)
CPU_DTYPES_FLOATING(ABS_FLOATING)
DEFINE_UNARY_LOOP(abs_complex64, complex64, float _Complex, float _Complex, float32, float, fabs(a))
DEFINE_UNARY_LOOP(abs_complex128, complex128, double _Complex, double _Complex, float64, double,
                  fabs(a))

/* the floating-point functions */
#define FLOAT_FUNCTIONS(NAME, DTYPE, T, C, U)                           \
    SAME_TYPE_LOOP(exp, NAME, T, C, exp(a))                             \
    SAME_TYPE_LOOP(log, NAME, T, C, log(a))                             \
    SAME_TYPE_LOOP(sqrt, NAME, T, C, sqrt(a))                           \
    SAME_TYPE_LOOP(tanh, NAME, T, C, tanh(a))                           \
    SAME_TYPE_LOOP(sigmoid, NAME, T, C, (C)1 / ((C)1 + exp(-a)))
CPU_DTYPES_FLOATING(FLOAT_FUNCTIONS)
CPU_DTYPES_COMPLEX(FLOAT_FUNCTIONS)

/* relu keeps NaN and -0.0, as PyTorch's does */
#define RELU_INTEGRAL(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(relu, NAME, T, C, a > 0 ? a : 0)
#define RELU_FLOATING(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(relu, NAME, T, C, a < 0 ? 0 : a)
CPU_DTYPES_INTEGRAL(RELU_INTEGRAL)
CPU_DTYPES_FLOATING(RELU_FLOATING)

#define ENTRY(OP, NAME, DTYPE) [DTYPE] = OP##_##NAME,
#define NEG_ENTRY(NAME, DTYPE, T, C, U) ENTRY(neg, NAME, DTYPE)
#define ABS_ENTRY(NAME, DTYPE, T, C, U) ENTRY(abs, NAME, DTYPE)
#define EXP_ENTRY(NAME, DTYPE, T, C, U) ENTRY(exp, NAME, DTYPE)
#define LOG_ENTRY(NAME, DTYPE, T, C, U) ENTRY(log, NAME, DTYPE)
#define SQRT_ENTRY(NAME, DTYPE, T, C, U) ENTRY(sqrt, NAME, DTYPE)
#define TANH_ENTRY(NAME, DTYPE, T, C, U) ENTRY(tanh, NAME, DTYPE)
#define SIGMOID_ENTRY(NAME, DTYPE, T, C, U) ENTRY(sigmoid, NAME, DTYPE)
#define RELU_ENTRY(NAME, DTYPE, T, C, U) ENTRY(relu, NAME, DTYPE)
#define FLOATING_TABLE(E) {CPU_DTYPES_FLOATING(E) CPU_DTYPES_COMPLEX(E)}

static const cpu_loop_fn neg_loops[WEFT_NUM_DTYPES] = {CPU_DTYPES_NUMERIC(NEG_ENTRY)};
static const cpu_loop_fn abs_loops[WEFT_NUM_DTYPES] = {CPU_DTYPES_NUMERIC(ABS_ENTRY)};
static const cpu_loop_fn exp_loops[WEFT_NUM_DTYPES] = FLOATING_TABLE(EXP_ENTRY);
static const cpu_loop_fn log_loops[WEFT_NUM_DTYPES] = FLOATING_TABLE(LOG_ENTRY);
static const cpu_loop_fn sqrt_loops[WEFT_NUM_DTYPES] = FLOATING_TABLE(SQRT_ENTRY);
static const cpu_loop_fn tanh_loops[WEFT_NUM_DTYPES] = FLOATING_TABLE(TANH_ENTRY);
static const cpu_loop_fn sigmoid_loops[WEFT_NUM_DTYPES] = FLOATING_TABLE(SIGMOID_ENTRY);
static const cpu_loop_fn relu_loops[WEFT_NUM_DTYPES] = {
    CPU_DTYPES_INTEGRAL(RELU_ENTRY) CPU_DTYPES_FLOATING(RELU_ENTRY)};

/* ---------------------------------------------------------------- kernels */

typedef struct unary_op {
    const cpu_loop_fn *loops;
    bool float_result; /* integer and bool inputs compute in float32 */
    bool is_abs;       /* complex input gives a real result */
    bool is_neg;
} unary_op;

typedef struct unary_form {
    const unary_op *op;
    cpu_mode mode;
} unary_form;

static int unary_kernel(weft_call *call, void *ctx)
{
    const unary_form *form = ctx;
    const unary_op *u = form->op;
    weft_tensor *self = call->args[form->mode == CPU_OUT ? 1 : 0].u.tensor;
    const weft_dtype self_dtype = weft_tensor_dtype(self);
    weft_dtype in = self_dtype, result;

    if (u->is_neg && in == WEFT_BOOL)
        return weft_set_error(WEFT_EDTYPE,
                              "%s: negation, the `-` operator, on a bool tensor is not supported; "
                              "to invert a mask use logical_not() instead",
                              weft_op_name(call->op));
    /* integral (bool included) and complex by the SDK's dtype order */
    if (u->float_result && in >= WEFT_BOOL && in <= WEFT_INT64)
        in = WEFT_FLOAT32;
    result = in;
    if (u->is_abs && (in == WEFT_COMPLEX64 || in == WEFT_COMPLEX128)) {
        if (form->mode == CPU_INPLACE)
            return weft_set_error(WEFT_EDTYPE, "%s: in-place abs is not supported for complex "
                                  "tensors (the result is real)", weft_op_name(call->op));
        result = in == WEFT_COMPLEX64 ? WEFT_FLOAT32 : WEFT_FLOAT64;
    }
    if (in < 0 || in >= WEFT_NUM_DTYPES || !u->loops[in])
        return cpu__unsupported_dtype(weft_op_name(call->op), self_dtype);
    cpu_map m = {NULL, in, result, u->loops[in], NULL}; /* cpu__map names the op if need be */
    return cpu__map(call, form->mode, &m, &self, 1);
}

#define UNARY_OP(NAME, FLOAT_RESULT, IS_ABS, IS_NEG)                                    \
    static const unary_op NAME##_op = {NAME##_loops, FLOAT_RESULT, IS_ABS, IS_NEG};      \
    static const unary_form NAME##_functional = {&NAME##_op, CPU_FUNCTIONAL};            \
    static const unary_form NAME##_inplace = {&NAME##_op, CPU_INPLACE};                  \
    static const unary_form NAME##_out = {&NAME##_op, CPU_OUT};
UNARY_OP(neg, false, false, true)
UNARY_OP(abs, false, true, false)
UNARY_OP(exp, true, false, false)
UNARY_OP(log, true, false, false)
UNARY_OP(sqrt, true, false, false)
UNARY_OP(relu, false, false, false)
UNARY_OP(sigmoid, true, false, false)
UNARY_OP(tanh, true, false, false)

#define UNARY_ENTRIES(NAME)                             \
    {#NAME, unary_kernel, &NAME##_functional},          \
    {#NAME "_", unary_kernel, &NAME##_inplace},         \
    {#NAME "_out", unary_kernel, &NAME##_out}
static const cpu_kernel_entry unary_kernels[] = {
    UNARY_ENTRIES(neg),  UNARY_ENTRIES(abs),  UNARY_ENTRIES(exp),     UNARY_ENTRIES(log),
    UNARY_ENTRIES(sqrt), UNARY_ENTRIES(relu), UNARY_ENTRIES(sigmoid), UNARY_ENTRIES(tanh),
};

int cpu__register_unary(weft_registrar *reg)
{
    return cpu__register_table(reg, unary_kernels, sizeof unary_kernels / sizeof *unary_kernels);
}
