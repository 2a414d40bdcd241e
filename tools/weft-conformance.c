/* tools/weft-conformance.c — checks a device's operators against the CPU:
 * every case of the table below runs once on host tensors and once on the
 * same values copied to the device, and the device's results must match
 * the CPU's (shape, dtype, values within a tolerance per dtype) or both must
 * refuse with the same error code.  Prints TAP; exits 1 if a case fails.
 *
 * Uses the public API only, like any program: a plugin author runs
 *   weft-conformance --plugin ./libweft-mydev.so mydev
 * Adding an operator is one line in CASES. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

/* ------------------------------------------------------------ inputs */

/* Input kinds, one letter each in a case's input string:
 *   x y  random normal tensors of the case's shape and dtype
 *   p    positive (|normal| + 0.5), for log, sqrt, division
 *   u    in (0.05, 0.95), for probabilities
 *   m    a bool mask of the shape
 *   r    a row: the shape's last dimension only (broadcasting)
 *   w    a matrix [last dim, 5] (the right operand of mm)
 *   b    a batch [first dim, last dim, 3] (the right operand of bmm)
 *   v    a vector [5] (bias of linear, [5]-shaped)
 *   L    a matrix [5, last dim] (weight of linear)
 *   t    int64 class targets [first dim] in [0, last dim)
 *   k    int64 indices [4] in [0, first dim)
 *   g    int64 indices of the shape, each in [0, last dim) (gather) */
#define MAX_INPUTS 4

/* Shape classes: which shapes a case runs on.  "T" shapes are transposed
 * views (not contiguous), so strided inputs are checked too. */
enum shape_class { ANY, ND, TWO, THREE };
typedef struct shape {
    int ndim;
    int64_t sizes[3];
    bool transposed;
} shape;
static const shape shapes_any[] = {{2, {5, 7}}, {3, {2, 3, 4}}, {1, {7}}, {0, {0}},
                                   {2, {0, 3}}, {2, {4, 6}, true}};
static const shape shapes_nd[] = {{2, {5, 7}}, {3, {2, 3, 4}}, {2, {4, 6}, true}, {2, {1, 9}}};
static const shape shapes_two[] = {{2, {5, 7}}, {2, {1, 3}}, {2, {4, 6}, true}};
static const shape shapes_three[] = {{3, {2, 3, 4}}, {3, {1, 2, 5}}};

/* Dtype classes. */
static const weft_dtype dt_float[] = {WEFT_FLOAT32, WEFT_FLOAT64};
static const weft_dtype dt_real[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_INT64, WEFT_INT32};
static const weft_dtype dt_f32[] = {WEFT_FLOAT32};
enum dtype_class { FLOAT, REAL, F32 };

/* ------------------------------------------------------------ cases */

typedef int (*case_fn)(weft_tensor **out, weft_tensor *const *in);

/* The body of a functional case: `expr` computes out[0] (and out[1]) from
 * in[]. */
#define FN(expr) return (expr);
/* The body of an in-place or out= case: `expr` writes into t, which starts
 * as a copy of `init` (an input) and is the result. */
#define INTO(init, expr)                                                \
    weft_tensor *t = NULL;                                              \
    int rc = weft_empty_like(&t, (init));                               \
    if (rc == 0)                                                        \
        rc = weft_copy_(t, (init));                                     \
    if (rc == 0)                                                        \
        rc = (expr);                                                    \
    if (rc < 0)                                                         \
        weft_tensor_release(t);                                         \
    else                                                                \
        out[0] = t;                                                     \
    return rc;
/* An out= case whose out starts empty ([0]), so the operator resizes it. */
#define INTO_EMPTY(like, expr)                                                           \
    weft_tensor *t = NULL;                                                               \
    int64_t zero = 0;                                                                    \
    int rc = weft_empty(&t, &zero, 1, weft_tensor_dtype(like), weft_tensor_device(like)); \
    if (rc == 0)                                                                         \
        rc = (expr);                                                                     \
    if (rc < 0)                                                                          \
        weft_tensor_release(t);                                                          \
    else                                                                                 \
        out[0] = t;                                                                      \
    return rc;

static const int64_t dim0[1] = {0}, dimlast[1] = {-1};
static const double two = 2.0, lo = -0.5, hi = 0.5;

/* X(name, inputs, shape class, dtype class, body) */
#define CASES(X)                                                                            \
    X(neg, "x", ANY, REAL, FN(weft_neg(out, in[0])))                                        \
    X(abs, "x", ANY, REAL, FN(weft_abs(out, in[0])))                                        \
    X(exp, "x", ANY, FLOAT, FN(weft_exp(out, in[0])))                                       \
    X(log, "p", ANY, FLOAT, FN(weft_log(out, in[0])))                                       \
    X(sqrt, "p", ANY, FLOAT, FN(weft_sqrt(out, in[0])))                                     \
    X(rsqrt, "p", ANY, FLOAT, FN(weft_rsqrt(out, in[0])))                                   \
    X(reciprocal, "p", ANY, FLOAT, FN(weft_reciprocal(out, in[0])))                         \
    X(relu, "x", ANY, REAL, FN(weft_relu(out, in[0])))                                      \
    X(sigmoid, "x", ANY, FLOAT, FN(weft_sigmoid(out, in[0])))                               \
    X(tanh, "x", ANY, FLOAT, FN(weft_tanh(out, in[0])))                                     \
    X(sin, "x", ANY, FLOAT, FN(weft_sin(out, in[0])))                                       \
    X(cos, "x", ANY, FLOAT, FN(weft_cos(out, in[0])))                                       \
    X(floor, "x", ANY, FLOAT, FN(weft_floor(out, in[0])))                                   \
    X(round, "x", ANY, FLOAT, FN(weft_round(out, in[0])))                                   \
    X(expm1, "x", ANY, FLOAT, FN(weft_expm1(out, in[0])))                                   \
    X(log1p, "p", ANY, FLOAT, FN(weft_log1p(out, in[0])))                                   \
    X(sign, "x", ANY, REAL, FN(weft_sign(out, in[0])))                                      \
    X(silu, "x", ANY, FLOAT, FN(weft_silu(out, in[0])))                                     \
    X(gelu, "x", ANY, FLOAT, FN(weft_gelu(out, in[0])))                                     \
    X(leaky_relu, "x", ANY, FLOAT, FN(weft_leaky_relu(out, in[0], 0.1)))                    \
    X(elu, "x", ANY, FLOAT, FN(weft_elu(out, in[0], 1.0, 1.0, 1.0)))                        \
    X(softplus, "x", ANY, FLOAT, FN(weft_softplus(out, in[0], 1.0, 20.0)))                  \
    X(hardtanh, "x", ANY, FLOAT, FN(weft_hardtanh(out, in[0], -0.5, 0.5)))                  \
    X(clamp, "x", ANY, REAL, FN(weft_clamp(out, in[0], &lo, &hi)))                          \
    X(add, "xy", ANY, REAL, FN(weft_add(out, in[0], in[1])))                                \
    X(add_alpha, "xy", ANY, FLOAT, FN(weft_add_ex(out, in[0], in[1], 2.5)))                 \
    X(sub, "xy", ANY, REAL, FN(weft_sub(out, in[0], in[1])))                                \
    X(mul, "xy", ANY, REAL, FN(weft_mul(out, in[0], in[1])))                                \
    X(div, "xp", ANY, FLOAT, FN(weft_div(out, in[0], in[1])))                               \
    X(maximum, "xy", ANY, REAL, FN(weft_maximum(out, in[0], in[1])))                        \
    X(minimum, "xy", ANY, REAL, FN(weft_minimum(out, in[0], in[1])))                        \
    X(pow, "px", ANY, FLOAT, FN(weft_pow(out, in[0], in[1])))                               \
    X(atan2, "xy", ANY, FLOAT, FN(weft_atan2(out, in[0], in[1])))                           \
    X(fmod, "xp", ANY, FLOAT, FN(weft_fmod(out, in[0], in[1])))                             \
    X(add_row, "xr", ND, REAL, FN(weft_add(out, in[0], in[1])))                             \
    X(mul_row, "xr", ND, REAL, FN(weft_mul(out, in[0], in[1])))                             \
    X(sub_row_left, "rx", ND, FLOAT, FN(weft_sub(out, in[0], in[1])))                       \
    X(add_scalar, "x", ANY, REAL, FN(weft_add_scalar(out, in[0], 3)))                       \
    X(mul_scalar, "x", ANY, REAL, FN(weft_mul_scalar(out, in[0], -2)))                      \
    X(pow_scalar, "x", ANY, FLOAT, FN(weft_pow_scalar(out, in[0], 2)))                      \
    X(eq, "xy", ANY, REAL, FN(weft_eq(out, in[0], in[0])))                                  \
    X(lt, "xy", ANY, REAL, FN(weft_lt(out, in[0], in[1])))                                  \
    X(ge, "xy", ANY, REAL, FN(weft_ge(out, in[0], in[1])))                                  \
    X(gt_scalar, "x", ANY, REAL, FN(weft_gt_scalar(out, in[0], 0)))                         \
    X(logical_and, "mm", ANY, F32, FN(weft_logical_and(out, in[0], in[1])))                 \
    X(where, "mxy", ANY, REAL, FN(weft_where(out, in[0], in[1], in[2])))                    \
    X(masked_fill, "xm", ANY, FLOAT, FN(weft_masked_fill(out, in[0], in[1], 7)))            \
    X(lerp, "xyu", ANY, FLOAT, FN(weft_lerp(out, in[0], in[1], in[2])))                     \
    X(addcmul, "xyp", ANY, FLOAT, FN(weft_addcmul(out, in[0], in[1], in[2])))               \
    X(sum_all, "x", ANY, REAL, FN(weft_sum(out, in[0], NULL, 0, false)))                    \
    X(sum_dim, "x", ND, REAL, FN(weft_sum(out, in[0], dimlast, 1, false)))                  \
    X(mean_dim, "x", ND, FLOAT, FN(weft_mean(out, in[0], dim0, 1, true)))                   \
    X(prod_dim, "u", ND, FLOAT, FN(weft_prod(out, in[0], dimlast, 1, false)))               \
    X(amax, "x", ND, REAL, FN(weft_amax(out, in[0], dimlast, 1, false)))                    \
    X(max_all, "x", ND, REAL, FN(weft_max(out, in[0])))                                     \
    X(argmax, "x", ND, REAL, FN(weft_argmax(out, in[0], dimlast, false)))                   \
    X(argmin, "x", ND, FLOAT, FN(weft_argmin(out, in[0], dim0, true)))                      \
    X(max_dim, "x", ND, REAL, FN(weft_max_dim(&out[0], &out[1], in[0], -1, false)))         \
    X(min_dim, "x", ND, FLOAT, FN(weft_min_dim(&out[0], &out[1], in[0], 0, true)))          \
    X(var, "x", ND, FLOAT, FN(weft_var(out, in[0], dimlast, 1)))                            \
    X(std, "x", ND, FLOAT, FN(weft_std(out, in[0], NULL, 0)))                               \
    X(norm, "x", ND, FLOAT, FN(weft_norm(out, in[0], &two, dimlast, 1, false)))             \
    X(logsumexp, "x", ND, FLOAT, FN(weft_logsumexp(out, in[0], dimlast, 1, false)))         \
    X(any, "m", ND, F32, FN(weft_any(out, in[0], dimlast, 1, false)))                       \
    X(cumsum, "x", ND, REAL, FN(weft_cumsum(out, in[0], -1)))                               \
    X(cumprod, "u", ND, FLOAT, FN(weft_cumprod(out, in[0], 0)))                             \
    X(sort, "x", ND, REAL, FN(weft_sort(&out[0], &out[1], in[0], -1, false)))               \
    X(topk, "x", ND, FLOAT, FN(weft_topk(&out[0], &out[1], in[0], 1, -1, true, true)))      \
    X(mm, "xw", TWO, REAL, FN(weft_mm(out, in[0], in[1])))                                  \
    X(bmm, "xb", THREE, FLOAT, FN(weft_bmm(out, in[0], in[1])))                             \
    X(matmul, "xw", ND, FLOAT, FN(weft_matmul(out, in[0], in[1])))                          \
    X(linear, "xLv", ND, FLOAT, FN(weft_linear(out, in[0], in[1], in[2])))                  \
    X(softmax, "x", ND, FLOAT, FN(weft_softmax(out, in[0], -1)))                            \
    X(log_softmax, "x", ND, FLOAT, FN(weft_log_softmax(out, in[0], 1)))                     \
    X(cross_entropy, "xt", TWO, FLOAT,                                                      \
      FN(weft_cross_entropy(out, in[0], in[1], NULL, "mean", -100, 0.0)))                   \
    X(nll_loss, "xt", TWO, FLOAT,                                                           \
      FN(weft_nll_loss(out, in[0], in[1], NULL, "sum", -100)))                              \
    X(mse_loss, "xy", ANY, FLOAT, FN(weft_mse_loss(out, in[0], in[1], "mean")))             \
    X(l1_loss, "xy", ND, FLOAT, FN(weft_l1_loss(out, in[0], in[1], "none")))                \
    X(smooth_l1_loss, "xy", ND, FLOAT,                                                      \
      FN(weft_smooth_l1_loss(out, in[0], in[1], "sum", 1.0)))                               \
    X(binary_cross_entropy, "uu", ND, FLOAT,                                                \
      FN(weft_binary_cross_entropy(out, in[0], in[1], NULL, "mean")))                       \
    X(bce_with_logits, "xu", ND, FLOAT,                                                     \
      FN(                                                                                   \
         weft_binary_cross_entropy_with_logits(out, in[0], in[1], NULL, NULL, "mean")))     \
    X(clone, "x", ANY, REAL, FN(weft_clone(out, in[0])))                                    \
    X(cat, "xy", ND, REAL, FN(weft_cat(out, (weft_tensor *const[]){in[0], in[1]}, 2, 0)))   \
    X(stack, "xy", ANY, REAL, FN(weft_stack(out, (weft_tensor *const[]){in[0], in[1]}, 2, 0))) \
    X(flip, "x", ND, REAL, FN(weft_flip(out, in[0], dimlast, 1)))                           \
    X(roll, "x", ND, FLOAT, FN(weft_roll(out, in[0], (int64_t[]){2}, 1, dim0, 1)))          \
    X(repeat, "x", TWO, FLOAT, FN(weft_repeat(out, in[0], (int64_t[]){2, 3}, 2)))           \
    X(tril, "x", TWO, REAL, FN(weft_tril(out, in[0], 0)))                                   \
    X(pad, "x", ND, FLOAT, FN(weft_pad(out, in[0], (int64_t[]){1, 2}, 2, "constant", &two))) \
    X(index_select, "xk", ND, REAL, FN(weft_index_select(out, in[0], 0, in[1])))            \
    X(gather, "xg", ND, FLOAT, FN(weft_gather(out, in[0], -1, in[1])))                      \
    X(embedding, "Lk", TWO, FLOAT, FN(weft_embedding(out, in[0], in[1], -1)))               \
    X(add_, "xy", ANY, REAL, INTO(in[0], weft_add_(t, in[1])))                              \
    X(mul_row_, "xr", ND, FLOAT, INTO(in[0], weft_mul_(t, in[1])))                          \
    X(relu_, "x", ANY, FLOAT, INTO(in[0], weft_relu_(t)))                                   \
    X(exp_, "x", ANY, FLOAT, INTO(in[0], weft_exp_(t)))                                     \
    X(clamp_, "x", ANY, FLOAT, INTO(in[0], weft_clamp_(t, &lo, NULL)))                      \
    X(fill_, "x", ANY, REAL, INTO(in[0], weft_fill_(t, 3)))                                 \
    X(add_out, "xy", ANY, REAL, INTO(in[1], weft_add_out(t, in[0], in[1])))                 \
    X(exp_out, "xy", ANY, FLOAT, INTO(in[1], weft_exp_out(t, in[0])))                       \
    X(sum_out, "x", ND, FLOAT, INTO_EMPTY(in[0], weft_sum_out(t, in[0], dim0, 1, false)))   \
    X(mm_out, "xw", TWO, FLOAT, INTO_EMPTY(in[0], weft_mm_out(t, in[0], in[1])))

#define DEFINE_CASE(name, inputs, shapes, dtypes, body)                                 \
    static int case_##name(weft_tensor **out, weft_tensor *const *in)                     \
    {                                                                                    \
        (void)in;                                                                        \
        body                                                                             \
    }
CASES(DEFINE_CASE)

typedef struct conformance_case {
    const char *name;
    const char *inputs;
    enum shape_class shapes;
    enum dtype_class dtypes;
    case_fn fn;
} conformance_case;

#define TABLE_ROW(name, inputs, shapes, dtypes, body) {#name, inputs, shapes, dtypes, case_##name},
static const conformance_case cases[] = {CASES(TABLE_ROW)};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ------------------------------------------------------------ running */

static weft_generator *gen;

/* A host tensor of kind `kind` for shape s and dtype dt (a new reference). */
static int make_input(weft_tensor **out, char kind, const shape *s, weft_dtype dt)
{
    *out = NULL;
    int64_t sizes[3];
    int ndim = s->ndim;
    memcpy(sizes, s->sizes, sizeof sizes);
    if (s->transposed) { /* made as [b, a], transposed below */
        sizes[0] = s->sizes[1];
        sizes[1] = s->sizes[0];
    }
    int64_t first = s->ndim ? s->sizes[0] : 1, last = s->ndim ? s->sizes[s->ndim - 1] : 1;
    bool integral = !weft_dtype_is_floating(dt);
    weft_tensor *base = NULL, *t = NULL;
    int rc = 0;
    switch (kind) {
    case 'r': ndim = 1, sizes[0] = last; break;
    case 'w': ndim = 2, sizes[0] = last, sizes[1] = 5; break;
    case 'b': ndim = 3, sizes[0] = first, sizes[1] = last, sizes[2] = 3; break;
    case 'v': ndim = 1, sizes[0] = 5; break;
    case 'L': ndim = 2, sizes[0] = 5, sizes[1] = last; break;
    case 't': ndim = 1, sizes[0] = first; break;
    case 'k': ndim = 1, sizes[0] = 4; break;
    default: break;
    }
    bool transpose = s->transposed && strchr("xypumg", kind);
    if (kind == 't' || kind == 'k' || kind == 'g') {
        /* integer indices: uniform in [0, bound) */
        int64_t bound = kind == 'k' ? first : last;
        weft_tensor *u = NULL, *scaled = NULL;
        rc = weft_rand(&u, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU, gen);
        if (rc == 0)
            rc = weft_mul_scalar(&scaled, u, (double)(bound > 0 ? bound : 1) - 1e-9);
        if (rc == 0)
            rc = weft_floor_(scaled);
        if (rc == 0)
            rc = weft_to_dtype(&base, scaled, WEFT_INT64);
        weft_tensor_release(u);
        weft_tensor_release(scaled);
    } else if (kind == 'm') {
        weft_tensor *n = NULL;
        rc = weft_randn(&n, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU, gen);
        if (rc == 0)
            rc = weft_gt_scalar(&base, n, 0);
        weft_tensor_release(n);
    } else {
        weft_tensor *n = NULL;
        rc = kind == 'u' ? weft_rand(&n, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU, gen)
                         : weft_randn(&n, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU, gen);
        if (rc == 0 && kind == 'u') /* (0.05, 0.95) */
            rc = weft_mul_scalar_(n, 0.9), rc = rc ? rc : weft_add_scalar_(n, 0.05);
        if (rc == 0 && kind == 'p')
            rc = weft_abs_(n), rc = rc ? rc : weft_add_scalar_(n, 0.5);
        if (rc == 0 && integral) /* small integers */
            rc = weft_mul_scalar_(n, 4), rc = rc ? rc : weft_round_(n);
        if (rc == 0)
            rc = weft_to_dtype(&base, n, dt);
        weft_tensor_release(n);
    }
    if (rc == 0 && transpose)
        rc = weft_transpose(&t, base, 0, 1);
    else if (rc == 0)
        t = weft_tensor_retain(base);
    weft_tensor_release(base);
    *out = t;
    return rc;
}

/* The device counterpart of a host input, with the same strides. */
static int to_device(weft_tensor **out, const weft_tensor *host, weft_device device)
{
    *out = NULL;
    if (weft_tensor_is_contiguous(host))
        return weft_to_device(out, host, device);
    /* a transposed view: copy the contiguous base, transpose on the device */
    weft_tensor *base = NULL, *dbase = NULL;
    int rc = weft_transpose(&base, host, 0, 1);
    if (rc == 0)
        rc = weft_to_device(&dbase, base, device);
    if (rc == 0)
        rc = weft_transpose(out, dbase, 0, 1);
    weft_tensor_release(base);
    weft_tensor_release(dbase);
    return rc;
}

static double tolerance(weft_dtype dt)
{
    switch (dt) {
    case WEFT_FLOAT32: return 1e-4;
    case WEFT_FLOAT64: return 1e-10;
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16: return 1e-2;
    default: return 0;
    }
}

/* Compares a device result with the CPU's; on a mismatch writes why. */
static bool same_result(const weft_tensor *got, const weft_tensor *want, weft_device device,
                        char *why, size_t size)
{
    if (!weft_device_equal(weft_tensor_device(got), device)) {
        char d[48];
        weft_device_to_string(weft_tensor_device(got), d, sizeof d);
        snprintf(why, size, "the result is on %s", d);
        return false;
    }
    if (weft_tensor_dtype(got) != weft_tensor_dtype(want)) {
        snprintf(why, size, "dtype %s, the CPU gives %s", weft_dtype_name(weft_tensor_dtype(got)),
                 weft_dtype_name(weft_tensor_dtype(want)));
        return false;
    }
    int nd = weft_tensor_ndim(got);
    if (nd != weft_tensor_ndim(want) ||
        memcmp(weft_tensor_sizes(got), weft_tensor_sizes(want), (size_t)nd * sizeof(int64_t))) {
        snprintf(why, size, "shape differs from the CPU's (%d-d vs %d-d)", nd,
                 weft_tensor_ndim(want));
        return false;
    }
    weft_tensor *host = NULL, *a = NULL, *b = NULL;
    int rc = weft_to_device(&host, got, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_to_dtype(&a, host, WEFT_FLOAT64);
    if (rc == 0)
        rc = weft_to_dtype(&b, want, WEFT_FLOAT64);
    bool same = rc == 0;
    if (rc < 0)
        snprintf(why, size, "cannot read the result back: %s", weft_last_error());
    double tol = tolerance(weft_tensor_dtype(want));
    const double *pa = same ? weft_tensor_data_ptr(a) : NULL, *pb = same ? weft_tensor_data_ptr(b) : NULL;
    for (int64_t i = 0; same && i < weft_tensor_numel(b); i++) {
        bool nan_both = isnan(pa[i]) && isnan(pb[i]);
        if (!nan_both && !(fabs(pa[i] - pb[i]) <= tol * (1 + fabs(pb[i])))) {
            snprintf(why, size, "element %lld is %.9g, the CPU gives %.9g", (long long)i, pa[i],
                     pb[i]);
            same = false;
        }
    }
    weft_tensor_release(host);
    weft_tensor_release(a);
    weft_tensor_release(b);
    return same;
}

typedef struct totals {
    int run, failed, skipped, fell_back;
} totals;

static void shape_text(char *buf, size_t size, const shape *s)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->ndim; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? "," : "", (long long)s->sizes[i]);
    snprintf(buf + n, size - n, "]%s", s->transposed ? "^T" : "");
}

static void release_all(weft_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        weft_tensor_release(t[i]);
        t[i] = NULL;
    }
}

static void run_one(const conformance_case *c, const shape *s, weft_dtype dt, weft_device device,
                    totals *tot)
{
    char label[160], sh[48], why[256] = "";
    shape_text(sh, sizeof sh, s);
    snprintf(label, sizeof label, "%s %s %s", c->name, weft_dtype_name(dt), sh);
    int n = (int)strlen(c->inputs);
    weft_tensor *hin[MAX_INPUTS] = {0}, *din[MAX_INPUTS] = {0};
    weft_tensor *want[2] = {0}, *got[2] = {0};
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = make_input(&hin[i], c->inputs[i], s, dt);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = to_device(&din[i], hin[i], device);
    tot->run++;
    if (rc < 0) {
        printf("not ok %d - %s: making the inputs failed: %s\n", tot->run, label, weft_last_error());
        tot->failed++;
        goto done;
    }
    int want_rc = c->fn(want, hin);
    uint64_t fallbacks = weft_cpu_fallback_calls();
    int got_rc = c->fn(got, din);
    const char *via = weft_cpu_fallback_calls() != fallbacks ? " (CPU fallback)" : "";
    if (*via)
        tot->fell_back++;
    if (want_rc < 0) {
        /* the CPU refuses this case: the device must refuse it the same way */
        if (got_rc == want_rc) {
            printf("ok %d - %s: refused like the CPU (%s)%s\n", tot->run, label,
                   weft_error_name(want_rc), via);
        } else {
            printf("not ok %d - %s: the CPU refuses it (%s) but the device %s%s\n", tot->run,
                   label, weft_error_name(want_rc),
                   got_rc == 0 ? "accepts it" : weft_error_name(got_rc), via);
            tot->failed++;
        }
        goto done;
    }
    if (got_rc == WEFT_EDTYPE || got_rc == WEFT_ENOTSUP || got_rc == WEFT_ENOKERNEL) {
        printf("ok %d - %s # SKIP the device does not support it: %s\n", tot->run, label,
               weft_last_error());
        tot->skipped++;
        goto done;
    }
    if (got_rc < 0) {
        printf("not ok %d - %s: %s: %s%s\n", tot->run, label, weft_error_name(got_rc),
               weft_last_error(), via);
        tot->failed++;
        goto done;
    }
    bool same = true;
    for (int i = 0; i < 2 && same; i++) {
        if (!want[i])
            continue;
        same = got[i] && same_result(got[i], want[i], device, why, sizeof why);
        if (!got[i])
            snprintf(why, sizeof why, "result %d is missing", i);
    }
    if (same) {
        printf("ok %d - %s%s\n", tot->run, label, via);
    } else {
        printf("not ok %d - %s%s: %s\n", tot->run, label, via, why);
        tot->failed++;
    }
done:
    release_all(hin, MAX_INPUTS);
    release_all(din, MAX_INPUTS);
    release_all(want, 2);
    release_all(got, 2);
    fflush(stdout);
}

/* man/weft-conformance.1 is checked against this text (tests/manpages.sh). */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: weft-conformance [OPTIONS] DEVICE\n"
            "Runs weft's operator conformance cases on DEVICE (\"mydev\", \"mydev:1\") and\n"
            "compares every result with the CPU's.  Prints TAP; exits 0 when every case\n"
            "passes, 1 when one fails, 2 for a usage or set-up error.\n"
            "  --plugin PATH     load this plugin file first (may be repeated)\n"
            "  --only NAME       run only the cases whose name contains NAME\n"
            "  --float32-only    run only float32 cases\n"
            "  --no-fallback     switch the CPU fallback off: operators without a kernel\n"
            "                    of the device's own are reported as skipped\n"
            "  --seed N          seed of the random inputs (default 1)\n"
            "  --list            list the cases and exit\n"
            "  --help            this text\n");
}

int main(int argc, char **argv)
{
    const char *device_text = NULL, *only = NULL;
    bool list = false, f32_only = false, no_fallback = false;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
            if (weft_load_plugin(argv[++i]) < 0) {
                fprintf(stderr, "weft-conformance: %s\n", weft_last_error());
                return 2;
            }
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--float32-only") == 0) {
            f32_only = true;
        } else if (strcmp(argv[i], "--no-fallback") == 0) {
            no_fallback = true;
        } else if (strcmp(argv[i], "--list") == 0) {
            list = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !device_text) {
            device_text = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (list) {
        for (int i = 0; i < NCASES; i++)
            printf("%-22s inputs %s\n", cases[i].name, cases[i].inputs);
        return 0;
    }
    if (!device_text) {
        usage(stderr);
        return 2;
    }
    if (weft_load_default_plugins() < 0) {
        fprintf(stderr, "weft-conformance: %s\n", weft_last_error());
        return 2;
    }
    weft_device device;
    if (weft_device_from_string(&device, device_text) < 0) {
        fprintf(stderr, "weft-conformance: %s (is its plugin loaded? see weft-info)\n",
                weft_last_error());
        return 2;
    }
    if (device.index >= weft_device_count(device.type)) {
        fprintf(stderr, "weft-conformance: %s: the device type has %d device(s)\n", device_text,
                weft_device_count(device.type));
        return 2;
    }
    if (device.type == 0) {
        fprintf(stderr, "weft-conformance: the CPU is the reference; name another device\n");
        return 2;
    }
    weft_cpu_fallback_set_mode(no_fallback ? WEFT_CPU_FALLBACK_ERROR : WEFT_CPU_FALLBACK_SILENT);
    if (weft_generator_create(&gen, seed) < 0) {
        fprintf(stderr, "weft-conformance: %s\n", weft_last_error());
        return 2;
    }
    totals tot = {0};
    for (int i = 0; i < NCASES; i++) {
        const conformance_case *c = &cases[i];
        if (only && !strstr(c->name, only))
            continue;
        const shape *sh;
        int nsh;
        switch (c->shapes) {
        case ANY: sh = shapes_any, nsh = (int)(sizeof shapes_any / sizeof *sh); break;
        case ND: sh = shapes_nd, nsh = (int)(sizeof shapes_nd / sizeof *sh); break;
        case TWO: sh = shapes_two, nsh = (int)(sizeof shapes_two / sizeof *sh); break;
        default: sh = shapes_three, nsh = (int)(sizeof shapes_three / sizeof *sh); break;
        }
        const weft_dtype *dts;
        int ndt;
        switch (c->dtypes) {
        case FLOAT: dts = dt_float, ndt = 2; break;
        case REAL: dts = dt_real, ndt = 4; break;
        default: dts = dt_f32, ndt = 1; break;
        }
        if (f32_only)
            dts = dt_f32, ndt = 1;
        for (int d = 0; d < ndt; d++)
            for (int s = 0; s < nsh; s++)
                run_one(c, &sh[s], dts[d], device, &tot);
    }
    printf("1..%d\n", tot.run);
    printf("# %s: %d cases, %d failed, %d skipped, %d ran through the CPU fallback\n",
           device_text, tot.run, tot.failed, tot.skipped, tot.fell_back);
    weft_generator_destroy(gen);
    return tot.failed ? 1 : 0;
}
