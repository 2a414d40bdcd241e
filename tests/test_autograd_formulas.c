/* tests/test_autograd_formulas.c — the derivative formulas of the CPU
 * backend issue's operators: gradcheck and gradgradcheck of each
 * (float64, shapes drawn at random, broadcasting, a non-contiguous input),
 * the rules at kinks and ties against hand-computed values, in-place
 * forms against their functional results and gradients, dropout, the
 * non-differentiable samplers, and a completeness check: every
 * operator of the table has an Autograd kernel, is a composite, is an out=
 * form, or is listed below as not differentiable. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ------------------------------------------------------------ inputs */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static int64_t pick(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(uniform() * (double)(hi - lo + 1));
}

/* values at least 0.04 away from every kink and bound the cases use */
static double away_from_kinks(double v)
{
    static const double kinks[] = {0, 0.5, -0.5, 1, -1, 3, -3, 6, -6, 0.2, -0.3};
    for (size_t i = 0; i < sizeof kinks / sizeof *kinks; i++)
        if (fabs(v - kinks[i]) < 0.04)
            v = kinks[i] + (v >= kinks[i] ? 1 : -1) * (0.04 + 0.03 * uniform()); /* no ties made */
    return v;
}

static weft_tensor *leaf_from(const int64_t *sizes, int nd, const double *v)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(t), v, (size_t)weft_tensor_numel(t) * sizeof(double));
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

static weft_tensor *random_leaf(const int64_t *sizes, int nd, double lo, double hi)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = away_from_kinks(lo + (hi - lo) * uniform());
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

/* ------------------------------------------------------------ the cases */

/* A case calls op through the boxed interface: the template's tensor
 * slots left NULL take the inputs in order; a MASK slot gets a boolean
 * tensor shaped like input 0's last dim (it broadcasts). */
#define MASK ((weft_tensor *)1)
#define T_ {.tag = WEFT_VALUE_TENSOR, .u.tensor = NULL}
#define M_ {.tag = WEFT_VALUE_TENSOR, .u.tensor = MASK}
#define D_(x) {.tag = WEFT_VALUE_DOUBLE, .u.d = (x)}
#define I_(x) {.tag = WEFT_VALUE_INT, .u.i = (x)}
#define B_(x) {.tag = WEFT_VALUE_BOOL, .u.b = (x)}
#define S_(x) {.tag = WEFT_VALUE_STRING, .u.string = (x)}
#define N_ {.tag = WEFT_VALUE_NONE}
#define L_(...) {.tag = WEFT_VALUE_INT_LIST, .len = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), \
                 .u.ints = (const int64_t[]){__VA_ARGS__}}

typedef struct tcase {
    const char *label;
    const char *op;
    int nargs;
    weft_value args[6];
    int nin;        /* tensor inputs that require grad */
    int rank;       /* of input 0; later inputs broadcast (dim 0 of size 1) */
    double lo[3], hi[3];
    bool smooth;    /* no kinks at all */
} tcase;

static const tcase cases[] = {
    {"clamp min and max", "clamp", 3, {T_, D_(-0.5), D_(0.5)}, 1, 2, {-1}, {1}, false},
    {"clamp min only", "clamp", 3, {T_, D_(-0.5), N_}, 1, 2, {-1}, {1}, false},
    {"clamp max only", "clamp", 3, {T_, N_, D_(0.5)}, 1, 2, {-1}, {1}, false},
    {"clamp_min", "clamp_min", 2, {T_, D_(0.2)}, 1, 2, {-1}, {1}, false},
    {"clamp_max", "clamp_max", 2, {T_, D_(-0.3)}, 1, 2, {-1}, {1}, false},
    {"hardtanh", "hardtanh", 3, {T_, D_(-0.5), D_(0.5)}, 1, 2, {-1}, {1}, false},
    {"relu6", "relu6", 1, {T_}, 1, 2, {-2}, {8}, false},
    {"hardsigmoid", "hardsigmoid", 1, {T_}, 1, 2, {-4}, {4}, false},
    {"hardswish", "hardswish", 1, {T_}, 1, 2, {-4}, {4}, false},
    {"leaky_relu", "leaky_relu", 2, {T_, D_(0.05)}, 1, 2, {-1}, {1}, false},
    {"elu", "elu", 4, {T_, D_(1.3), D_(1.1), D_(0.7)}, 1, 2, {-2}, {2}, false},
    {"selu", "selu", 1, {T_}, 1, 2, {-2}, {2}, false},
    {"logsigmoid", "logsigmoid", 1, {T_}, 1, 2, {-3}, {3}, true},
    {"softplus beta 2 threshold 3", "softplus", 3, {T_, D_(2.0), D_(3.0)}, 1, 2, {-2}, {1.2}, true},
    {"mish", "mish", 1, {T_}, 1, 2, {-2}, {2}, true},
    {"nan_to_num", "nan_to_num", 4, {T_, N_, N_, N_}, 1, 2, {-2}, {2}, false},
    {"atan2", "atan2", 2, {T_, T_}, 2, 2, {-2, 0.5}, {2, 2}, true},
    {"pow tensor^tensor", "pow", 2, {T_, T_}, 2, 2, {0.5, -1.5}, {2, 1.5}, true},
    {"fmod", "fmod", 2, {T_, T_}, 2, 2, {-3, 0.7}, {3, 1.3}, false},
    {"remainder", "remainder", 2, {T_, T_}, 2, 2, {-3, 0.7}, {3, 1.3}, false},
    {"fmod_scalar", "fmod_scalar", 2, {T_, D_(0.9)}, 1, 2, {0.1}, {0.8}, false},
    {"remainder_scalar", "remainder_scalar", 2, {T_, D_(1.7)}, 1, 2, {0.1}, {1.6}, false},
    {"div_mode none", "div_mode", 3, {T_, T_, N_}, 2, 2, {-2, 0.5}, {2, 2}, true},
    {"div_mode floor", "div_mode", 3, {T_, T_, S_("floor")}, 2, 2, {-2, 0.5}, {2, 2}, false},
    {"div_scalar_mode trunc", "div_scalar_mode", 3, {T_, D_(0.7), S_("trunc")}, 1, 2, {-2}, {2}, false},
    {"div_scalar_mode none", "div_scalar_mode", 3, {T_, D_(0.7), N_}, 1, 2, {-2}, {2}, true},
    {"maximum", "maximum", 2, {T_, T_}, 2, 2, {-1, -1}, {1, 1}, false},
    {"minimum", "minimum", 2, {T_, T_}, 2, 2, {-1, -1}, {1, 1}, false},
    {"where", "where", 3, {M_, T_, T_}, 2, 2, {-1, -1}, {1, 1}, true},
    {"masked_fill", "masked_fill", 3, {T_, M_, D_(2.5)}, 1, 2, {-1}, {1}, true},
    {"lerp tensor weight", "lerp", 3, {T_, T_, T_}, 3, 2, {-1, -1, 0}, {1, 1, 1}, true},
    {"lerp scalar weight", "lerp_scalar", 3, {T_, T_, D_(0.3)}, 2, 2, {-1, -1}, {1, 1}, true},
    {"addcmul value 0.7", "addcmul", 4, {T_, T_, T_, D_(0.7)}, 3, 2, {-1, -1, -1}, {1, 1, 1}, true},
    {"addcdiv value -1.5", "addcdiv", 4, {T_, T_, T_, D_(-1.5)}, 3, 2, {-1, -1, 0.5}, {1, 1, 1.5},
     true},
    {"amax over dims 0, 2", "amax", 3, {T_, L_(0, 2), B_(false)}, 1, 3, {-1}, {1}, false},
    {"amin keepdim", "amin", 3, {T_, L_(1), B_(true)}, 1, 3, {-1}, {1}, false},
    {"max", "max", 1, {T_}, 1, 3, {-1}, {1}, false},
    {"min", "min", 1, {T_}, 1, 2, {-1}, {1}, false},
    {"max_dim", "max_dim", 3, {T_, I_(1), B_(false)}, 1, 3, {-1}, {1}, false},
    {"min_dim keepdim", "min_dim", 3, {T_, I_(-1), B_(true)}, 1, 2, {-1}, {1}, false},
    {"cummax", "cummax", 2, {T_, I_(1)}, 1, 2, {-1}, {1}, false},
    {"cummin", "cummin", 2, {T_, I_(0)}, 1, 3, {-1}, {1}, false},
    {"cumsum", "cumsum", 3, {T_, I_(1), N_}, 1, 3, {-1}, {1}, true},
    {"cumprod", "cumprod", 3, {T_, I_(-1), N_}, 1, 2, {-1.5}, {1.5}, true},
    {"logsumexp", "logsumexp", 3, {T_, L_(0, 1), B_(false)}, 1, 3, {-1}, {1}, true},
    {"norm p=2 (fro)", "norm", 5, {T_, D_(2), L_(1), B_(false), N_}, 1, 3, {-1}, {1}, true},
    {"norm p=1", "norm", 5, {T_, D_(1), N_, B_(false), N_}, 1, 2, {-1}, {1}, false},
    {"norm p=inf", "norm", 5, {T_, D_(INFINITY), L_(0), B_(true), N_}, 1, 2, {-1}, {1}, false},
    {"norm p=3", "norm", 5, {T_, D_(3), L_(-1), B_(false), N_}, 1, 2, {-1}, {1}, true},
    {"norm p=1.5", "norm", 5, {T_, D_(1.5), N_, B_(false), N_}, 1, 2, {0.1}, {1}, true},
    {"var correction 1", "var", 4, {T_, L_(1), N_, B_(false)}, 1, 3, {-1}, {1}, true},
    {"var correction 0 all dims keepdim", "var", 4, {T_, N_, D_(0), B_(true)}, 1, 2, {-1}, {1}, true},
    {"std correction 2", "std", 4, {T_, L_(0, 2), D_(2), B_(false)}, 1, 3, {-1}, {1}, true},
    {"prod over dim 1", "prod", 4, {T_, L_(1), B_(false), N_}, 1, 3, {-1.5}, {1.5}, true},
    {"prod", "prod", 4, {T_, N_, B_(false), N_}, 1, 2, {-1.5}, {1.5}, true},
    /* first-slice operators no other gradcheck reached: zero gradients
     * away from the steps, sub with a Scalar, bilinear upsampling */
    {"ceil", "ceil", 1, {T_}, 1, 2, {-0.9}, {0.9}, false},
    {"round", "round", 1, {T_}, 1, 2, {-0.9}, {0.9}, false},
    {"sign", "sign", 1, {T_}, 1, 2, {-0.9}, {0.9}, false},
    {"sub_scalar alpha 2", "sub_scalar", 3, {T_, D_(0.3), D_(2.0)}, 1, 2, {-1}, {1}, true},
    {"upsample_bilinear2d 5x7", "upsample_bilinear2d", 5, {T_, L_(5, 7), B_(false), N_, N_}, 1, 4,
     {-1}, {1}, true},
    {"upsample_bilinear2d aligned 3x4", "upsample_bilinear2d", 5, {T_, L_(3, 4), B_(true), N_, N_},
     1, 4, {-1}, {1}, true},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

typedef struct run {
    const tcase *c;
    weft_tensor *mask;
    bool transpose; /* input 0 is stored with its last two dims swapped */
} run;

static int apply(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    const run *r = ctx;
    const tcase *c = r->c;
    const weft_op *op = NULL;
    int rc = weft_op_find(&op, c->op);
    if (rc < 0)
        return rc;
    weft_tensor *t0 = NULL;
    if (r->transpose) {
        int nd = weft_tensor_ndim(in[0]);
        if ((rc = weft_transpose(&t0, in[0], nd - 2, nd - 1)) < 0)
            return rc;
    }
    weft_value args[6];
    memcpy(args, c->args, sizeof args);
    for (int i = 0, k = 0; i < c->nargs; i++) {
        if (args[i].tag != WEFT_VALUE_TENSOR)
            continue;
        if (args[i].u.tensor == MASK)
            args[i].u.tensor = r->mask;
        else if (k < n)
            args[i].u.tensor = k == 0 && t0 ? t0 : in[k], k++;
    }
    weft_value rets[2] = {{0}, {0}};
    rc = weft_call_boxed(op, args, c->nargs, rets, 2);
    weft_tensor_release(t0);
    if (rc < 0)
        return rc;
    *out = rets[0].u.tensor;
    if (rets[1].tag == WEFT_VALUE_TENSOR)
        weft_tensor_release(rets[1].u.tensor);
    return 0;
}

static void check_case(const tcase *c)
{
    int64_t sizes[3][4];
    int nds[3];
    for (int d = 0; d < c->rank; d++)
        sizes[0][d] = pick(2, 3);
    nds[0] = c->rank;
    bool transpose = c->rank >= 2;
    for (int k = 1; k < c->nin; k++) {
        memcpy(sizes[k], sizes[0], sizeof sizes[0]);
        nds[k] = c->rank;
        if (k == 1) /* broadcast along dim 0 */
            sizes[k][0] = 1;
        else /* fewer dims: broadcast in front */
            memmove(sizes[k], sizes[k] + 1, (size_t)(--nds[k]) * sizeof(int64_t));
    }
    weft_tensor *in[3];
    for (int k = 0; k < c->nin; k++) {
        int64_t stored[4];
        memcpy(stored, sizes[k], sizeof stored);
        if (k == 0 && transpose) {
            stored[c->rank - 2] = sizes[0][c->rank - 1];
            stored[c->rank - 1] = sizes[0][c->rank - 2];
        }
        in[k] = random_leaf(stored, nds[k], c->lo[k], c->hi[k]);
    }
    run r = {c, NULL, transpose};
    int64_t last = sizes[0][c->rank - 1];
    weft_tensor *mask = NULL;
    weft_empty(&mask, &last, 1, WEFT_BOOL, WEFT_DEVICE_CPU);
    for (int64_t i = 0; i < last; i++)
        ((bool *)weft_tensor_data_ptr(mask))[i] = i % 2 == 0;
    r.mask = keep(mask);
    int rc = weft_gradcheck(apply, &r, in, c->nin, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: %s", c->label))
        diag("%s", weft_last_error());
    /* every case, away from its kinks: the piecewise ones too (elu,
     * hardswish and the like have a non-zero second derivative there) */
    rc = weft_gradgradcheck(apply, &r, in, c->nin, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck%s: %s", c->smooth ? "" : " (piecewise)", c->label))
        diag("%s", weft_last_error());
}

/* ------------------------------------------------------------ hand-computed rules */

/* the gradient of sum(op(x)) with respect to the inputs */
static int grads_of_sum(weft_tensor **g, weft_tensor *y, weft_tensor *const *in, int n)
{
    weft_tensor *s = NULL;
    int rc = weft_sum(&s, y, NULL, 0, false);
    if (rc == 0)
        rc = weft_autograd_grad(g, &s, 1, NULL, in, n, false, false, true);
    weft_tensor_release(s);
    for (int i = 0; rc == 0 && i < n; i++)
        keep(g[i]);
    return rc;
}

static void expect_grad(weft_tensor *g, const double *want, int64_t n, const char *what)
{
    if (!ok(g != NULL, "%s: a gradient", what))
        return;
    check_close(g, want, n, 1e-12, what);
}

static void test_rules(void)
{
    int64_t five = 5, three = 3, four = 4;
    weft_tensor *x, *y = NULL, *g[2] = {NULL, NULL};
    double lo = -0.5, hi = 0.5;

    x = leaf_from(&five, 1, (double[]){-1, -0.5, 0, 0.5, 1});
    if (weft_clamp(&y, x, &lo, &hi) == 0 && grads_of_sum(g, keep(y), &x, 1) == 0)
        expect_grad(g[0], (double[]){0, 1, 1, 1, 0}, 5, "clamp at its bounds passes the gradient");
    y = NULL;
    if (weft_hardtanh(&y, x, -0.5, 0.5) == 0 && grads_of_sum(g, keep(y), &x, 1) == 0)
        expect_grad(g[0], (double[]){0, 0, 1, 0, 0}, 5, "hardtanh at its bounds passes none");
    y = NULL;
    if (weft_clamp_min(&y, x, 0.0) == 0 && grads_of_sum(g, keep(y), &x, 1) == 0)
        expect_grad(g[0], (double[]){0, 0, 1, 1, 1}, 5, "clamp_min at its bound");

    weft_tensor *t = leaf_from(&four, 1, (double[]){1, 3, 3, 2});
    y = NULL;
    if (weft_max(&y, t) == 0 && grads_of_sum(g, keep(y), &t, 1) == 0)
        expect_grad(g[0], (double[]){0, 0.5, 0.5, 0}, 4, "max: ties share the gradient evenly");
    y = NULL;
    int64_t d0 = 0;
    if (weft_amin(&y, t, &d0, 1, false) == 0 && grads_of_sum(g, keep(y), &t, 1) == 0)
        expect_grad(g[0], (double[]){1, 0, 0, 0}, 4, "amin: a single minimum takes it all");
    weft_tensor *t3 = leaf_from(&three, 1, (double[]){-2, 5, -2});
    y = NULL;
    if (weft_amin(&y, t3, NULL, 0, false) == 0 && grads_of_sum(g, keep(y), &t3, 1) == 0)
        expect_grad(g[0], (double[]){0.5, 0, 0.5}, 3, "amin: ties share the gradient evenly");
    y = NULL;
    double inf = INFINITY;
    weft_tensor *tn = leaf_from(&three, 1, (double[]){-2, 1, 2});
    if (weft_norm(&y, tn, &inf, NULL, 0, false) == 0 && grads_of_sum(g, keep(y), &tn, 1) == 0)
        expect_grad(g[0], (double[]){-0.5, 0, 0.5}, 3, "norm inf: ties share, with the sign");

    weft_tensor *a = leaf_from(&three, 1, (double[]){1, 2, 3});
    weft_tensor *b = leaf_from(&three, 1, (double[]){1, 3, 2});
    weft_tensor *ab[2] = {a, b};
    y = NULL;
    if (weft_maximum(&y, a, b) == 0 && grads_of_sum(g, keep(y), ab, 2) == 0) {
        expect_grad(g[0], (double[]){0.5, 0, 1}, 3, "maximum: self's share, half on a tie");
        expect_grad(g[1], (double[]){0.5, 1, 0}, 3, "maximum: other's share, half on a tie");
    }
    y = NULL;
    if (weft_minimum(&y, a, b) == 0 && grads_of_sum(g, keep(y), ab, 2) == 0) {
        expect_grad(g[0], (double[]){0.5, 1, 0}, 3, "minimum: self's share, half on a tie");
        expect_grad(g[1], (double[]){0.5, 0, 1}, 3, "minimum: other's share, half on a tie");
    }

    struct {
        const char *what;
        double x[4], want[4];
    } prods[] = {
        {"prod without zeros", {2, 3, 4, 0.5}, {6, 4, 3, 24}},
        {"prod with one zero: only the zero gets the others' product", {2, 0, 3, 4}, {0, 24, 0, 0}},
        {"prod with two zeros: nothing", {2, 0, 3, 0}, {0, 0, 0, 0}},
    };
    for (int i = 0; i < 3; i++) {
        weft_tensor *p = leaf_from(&four, 1, prods[i].x);
        y = NULL;
        if (weft_prod(&y, p, NULL, 0, false) == 0 && grads_of_sum(g, keep(y), &p, 1) == 0)
            expect_grad(g[0], prods[i].want, 4, prods[i].what);
    }
    struct {
        const char *what;
        double x[4], want[4];
    } cumprods[] = {
        {"cumprod with one zero", {2, 0, 3, 4}, {1, 32, 0, 0}},
        {"cumprod with two zeros", {2, 0, 3, 0}, {1, 8, 0, 0}},
        {"cumprod with a leading zero", {0, 2, 3, 4}, {33, 0, 0, 0}},
    };
    for (int i = 0; i < 3; i++) {
        weft_tensor *p = leaf_from(&four, 1, cumprods[i].x);
        y = NULL;
        if (weft_cumprod(&y, p, 0) == 0 && grads_of_sum(g, keep(y), &p, 1) == 0)
            expect_grad(g[0], cumprods[i].want, 4, cumprods[i].what);
    }

    weft_tensor *z = leaf_from(&three, 1, (double[]){0, 0, 0});
    double two = 2;
    y = NULL;
    if (weft_norm(&y, z, &two, NULL, 0, false) == 0 && grads_of_sum(g, keep(y), &z, 1) == 0)
        expect_grad(g[0], (double[]){0, 0, 0}, 3, "norm p=2 at 0: the subgradient 0");
    weft_tensor *c = leaf_from(&three, 1, (double[]){1.5, 1.5, 1.5});
    y = NULL;
    if (weft_std(&y, c, NULL, 0) == 0 && grads_of_sum(g, keep(y), &c, 1) == 0)
        expect_grad(g[0], (double[]){0, 0, 0}, 3, "std of a constant: 0 (PyTorch masks it)");

    /* max_dim: the values carry the gradient to their index, the indices none */
    int64_t s23[2] = {2, 3};
    weft_tensor *m = leaf_from(s23, 2, (double[]){1, 5, 2, 7, 0, 3});
    weft_tensor *vals = NULL, *idx = NULL;
    if (ok(weft_max_dim(&vals, &idx, m, 1, false) == 0, "max_dim runs on a tensor that requires grad")) {
        keep(vals);
        keep(idx);
        ok(!weft_tensor_requires_grad(idx), "max_dim: the indices do not require grad");
        if (grads_of_sum(g, vals, &m, 1) == 0)
            expect_grad(g[0], (double[]){0, 1, 0, 1, 0, 0}, 6, "max_dim: the gradient goes to the index");
    }
    /* where: the condition only selects */
    weft_tensor *cond = NULL;
    weft_empty(&cond, &three, 1, WEFT_BOOL, WEFT_DEVICE_CPU);
    keep(cond);
    bool cv[3] = {true, false, true};
    memcpy(weft_tensor_data_ptr(cond), cv, sizeof cv);
    y = NULL;
    if (weft_where(&y, cond, a, b) == 0 && grads_of_sum(g, keep(y), ab, 2) == 0) {
        expect_grad(g[0], (double[]){1, 0, 1}, 3, "where: self where the condition holds");
        expect_grad(g[1], (double[]){0, 1, 0}, 3, "where: other elsewhere");
    }
    drop_all();
}

/* ------------------------------------------------------------ in place */

typedef struct inplace_case {
    const char *op;
    int nargs;
    weft_value args[5];
    int nin;
    double lo[3], hi[3];
} inplace_case;

static const inplace_case inplace_cases[] = {
    {"clamp", 3, {T_, D_(-0.5), D_(0.5)}, 1, {-1}, {1}},
    {"clamp_min", 2, {T_, D_(0.2)}, 1, {-1}, {1}},
    {"clamp_max", 2, {T_, D_(-0.3)}, 1, {-1}, {1}},
    {"hardtanh", 3, {T_, D_(-0.5), D_(0.5)}, 1, {-1}, {1}},
    {"relu6", 1, {T_}, 1, {-2}, {8}},
    {"hardsigmoid", 1, {T_}, 1, {-4}, {4}},
    {"hardswish", 1, {T_}, 1, {-4}, {4}},
    {"leaky_relu", 2, {T_, D_(0.1)}, 1, {-1}, {1}},
    {"elu", 4, {T_, D_(1.3), D_(1.1), D_(0.7)}, 1, {-2}, {2}},
    {"selu", 1, {T_}, 1, {-2}, {2}},
    {"mish", 1, {T_}, 1, {-2}, {2}},
    {"nan_to_num", 4, {T_, N_, N_, N_}, 1, {-2}, {2}},
    {"atan2", 2, {T_, T_}, 2, {-2, 0.5}, {2, 2}},
    {"pow", 2, {T_, T_}, 2, {0.5, -1.5}, {2, 1.5}},
    {"fmod", 2, {T_, T_}, 2, {-3, 0.7}, {3, 1.3}},
    {"remainder", 2, {T_, T_}, 2, {-3, 0.7}, {3, 1.3}},
    {"fmod_scalar", 2, {T_, D_(0.9)}, 1, {0.1}, {0.8}},
    {"remainder_scalar", 2, {T_, D_(1.7)}, 1, {0.1}, {1.6}},
    {"div_mode", 3, {T_, T_, N_}, 2, {-2, 0.5}, {2, 2}},
    {"div_scalar_mode", 3, {T_, D_(0.7), S_("floor")}, 1, {-2}, {2}},
    {"masked_fill", 3, {T_, M_, D_(2.5)}, 1, {-1}, {1}},
    {"lerp", 3, {T_, T_, T_}, 3, {-1, -1, 0}, {1, 1, 1}},
    {"lerp_scalar", 3, {T_, T_, D_(0.3)}, 2, {-1, -1}, {1, 1}},
    {"addcmul", 4, {T_, T_, T_, D_(0.7)}, 3, {-1, -1, -1}, {1, 1, 1}},
    {"addcdiv", 4, {T_, T_, T_, D_(-1.5)}, 3, {-1, -1, 0.5}, {1, 1, 1.5}},
    {"cumsum", 3, {T_, I_(1), N_}, 1, {-1}, {1}},
    {"cumprod", 3, {T_, I_(1), N_}, 1, {-1.5}, {1.5}},
};

/* op(x, ...) against op_(x * 1, ...): the same values and gradients */
static void check_inplace(const inplace_case *c)
{
    int64_t sizes[2] = {2, 3};
    weft_tensor *in[3];
    for (int k = 0; k < c->nin; k++)
        in[k] = random_leaf(sizes, 2, c->lo[k], c->hi[k]);
    weft_tensor *mask = NULL;
    weft_empty(&mask, sizes, 2, WEFT_BOOL, WEFT_DEVICE_CPU);
    keep(mask);
    for (int i = 0; i < 6; i++)
        ((bool *)weft_tensor_data_ptr(mask))[i] = i % 3 == 1;
    char name[64];
    snprintf(name, sizeof name, "%s_", c->op);
    const weft_op *fn = NULL, *ip = NULL;
    if (!ok(weft_op_find(&fn, c->op) == 0 && weft_op_find(&ip, name) == 0, "%s and %s exist", c->op, name))
        return;
    weft_tensor *copy = NULL;
    weft_mul_scalar(&copy, in[0], 1.0);
    keep(copy);
    weft_value a1[5], a2[5];
    memcpy(a1, c->args, sizeof a1);
    for (int i = 0, k = 0; i < c->nargs; i++)
        if (a1[i].tag == WEFT_VALUE_TENSOR)
            a1[i].u.tensor = a1[i].u.tensor == MASK ? mask : in[k++];
    memcpy(a2, a1, sizeof a2);
    a2[0].u.tensor = copy;
    weft_value ret = {0};
    int rc = weft_call_boxed(fn, a1, c->nargs, &ret, 1);
    weft_tensor *y = rc == 0 ? keep(ret.u.tensor) : NULL;
    if (rc == 0)
        rc = weft_call_boxed(ip, a2, c->nargs, NULL, 0);
    if (!ok(rc == 0, "%s on a non-leaf records", name)) {
        diag("%s", weft_last_error());
        return;
    }
    const double *want = values_of(y);
    check_close(copy, want, 6, 1e-12, name);
    weft_tensor *g1[3] = {0}, *g2[3] = {0};
    rc = grads_of_sum(g1, y, in, c->nin);
    if (rc == 0)
        rc = grads_of_sum(g2, copy, in, c->nin);
    if (!ok(rc == 0, "%s: both backward passes run", name)) {
        diag("%s", weft_last_error());
        return;
    }
    for (int k = 0; k < c->nin; k++) {
        char what[160];
        snprintf(what, sizeof what, "%s: the gradient of input %d matches %s's", name, k, c->op);
        if (ok(g1[k] && g2[k], "%s: input %d has a gradient both ways", name, k))
            check_close(g2[k], values_of(g1[k]), 6, 1e-12, what);
    }
}

/* what is refused, and what a stale saved input says */
static void test_errors(void)
{
    int64_t sizes[2] = {2, 3};
    weft_tensor *x = random_leaf(sizes, 2, -1, 1);
    double lo = -0.5, hi = 0.5;
    error_is(weft_clamp_(x, &lo, &hi), WEFT_EINVAL, "leaf", "clamp_ on a leaf that requires grad");
    weft_tensor *o = NULL;
    weft_empty(&o, sizes, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(o);
    ok(weft_clamp_out(o, x, &lo, &hi) < 0, "clamp_out with an input that requires grad is refused");
    like(weft_last_error(), "clamp_out", "... naming the operator");

    /* the input clamp saved, written in place before backward */
    weft_tensor *c = NULL, *y = NULL, *g[1] = {NULL};
    weft_mul_scalar(&c, x, 1.0);
    keep(c);
    if (weft_clamp(&y, c, &lo, &hi) == 0) {
        keep(y);
        weft_add_scalar_(c, 1.0);
        error_is(grads_of_sum(g, y, &x, 1), WEFT_EINVAL, "ClampBackward",
                 "backward after clamp's saved input was modified in place");
    }
    /* in place through a view of a non-leaf: the base's gradient is the
     * functional one's on that slice and 1 elsewhere */
    weft_tensor *base = NULL, *row = NULL, *ref = NULL;
    weft_mul_scalar(&base, x, 1.0);
    keep(base);
    weft_select(&row, base, 0, 1);
    keep(row);
    int rc = weft_hardtanh_(row, -0.5, 0.5);
    if (ok(rc == 0, "hardtanh_ on a view of a non-leaf") && grads_of_sum(g, base, &x, 1) == 0) {
        weft_tensor *xrow = NULL, *gr[1] = {NULL};
        weft_select(&xrow, x, 0, 1);
        keep(xrow);
        double want[6] = {1, 1, 1, 0, 0, 0};
        if (weft_hardtanh(&ref, xrow, -0.5, 0.5) == 0 && grads_of_sum(gr, keep(ref), &x, 1) == 0) {
            const double *rv = values_of(gr[0]);
            for (int i = 3; i < 6; i++)
                want[i] = rv[i];
            check_close(g[0], want, 6, 1e-12, "hardtanh_ through a view: the base's gradient");
        }
    }
    drop_all();
}

/* ------------------------------------------------------------ dropout, samplers */

static int dropout_fn(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_generator *g = NULL;
    int rc = weft_generator_create(&g, 1234); /* the same mask every call */
    if (rc == 0)
        rc = weft_dropout_ex(out, in[0], 0.4, true, g);
    weft_generator_destroy(g);
    return rc;
}

static void test_dropout(void)
{
    int64_t sizes[2] = {4, 5};
    weft_tensor *x = random_leaf(sizes, 2, 0.5, 1.5);
    weft_tensor *y = NULL, *g[1] = {NULL};
    if (!ok(dropout_fn(&y, &x, 1, NULL) == 0, "dropout on a tensor that requires grad")) {
        diag("%s", weft_last_error());
        return;
    }
    keep(y);
    ok(weft_tensor_requires_grad(y), "dropout's result has a history");
    if (grads_of_sum(g, y, &x, 1) == 0) {
        const double *yv = values_of(y), *gv = values_of(g[0]);
        int kept = 0, right = 0;
        for (int i = 0; i < 20; i++) {
            kept += yv[i] != 0;
            right += fabs(gv[i] - (yv[i] != 0 ? 1 / 0.6 : 0)) < 1e-12;
        }
        ok(right == 20 && kept > 0 && kept < 20, "dropout: g * mask / (1 - p) with the forward's mask "
           "(%d kept, %d right)", kept, right);
    }
    int rc = weft_gradcheck(dropout_fn, NULL, &x, 1, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: dropout with a fixed generator"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(dropout_fn, NULL, &x, 1, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: dropout"))
        diag("%s", weft_last_error());
    /* in place on a non-leaf, with the same generator: the same values and gradient */
    weft_tensor *c = NULL, *gen_y = NULL, *g2[1] = {NULL};
    weft_generator *gen = NULL;
    weft_mul_scalar(&c, x, 1.0);
    keep(c);
    weft_generator_create(&gen, 1234);
    rc = weft_dropout_ex_(c, 0.4, true, gen);
    weft_generator_destroy(gen);
    (void)gen_y;
    if (ok(rc == 0, "dropout_ on a non-leaf") && grads_of_sum(g2, c, &x, 1) == 0) {
        check_close(c, values_of(y), 20, 1e-12, "dropout_ values");
        check_close(g2[0], values_of(g[0]), 20, 1e-12, "dropout_ gradient");
    }
    /* outside training: the identity, gradient 1 */
    weft_tensor *id = NULL;
    if (weft_dropout(&id, x, 0.4, false) == 0 && grads_of_sum(g, keep(id), &x, 1) == 0) {
        double ones[20];
        for (int i = 0; i < 20; i++)
            ones[i] = 1;
        check_close(g[0], ones, 20, 0, "dropout in eval mode passes the gradient");
    }
    drop_all();
}

static void test_samplers(void)
{
    int64_t six = 6;
    weft_tensor *p = leaf_from(&six, 1, (double[]){0.1, 0.9, 0.5, 0.3, 0.7, 0.2});
    weft_tensor *b = NULL;
    int rc = weft_bernoulli(&b, p);
    if (ok(rc == 0, "bernoulli of p that requires grad runs")) {
        keep(b);
        ok(!weft_tensor_requires_grad(b), "bernoulli's sample records no history");
    } else {
        diag("%s", weft_last_error());
    }
    weft_tensor *m = NULL;
    rc = weft_multinomial(&m, p, 3, false);
    if (ok(rc == 0, "multinomial of weights that require grad runs")) {
        keep(m);
        ok(!weft_tensor_requires_grad(m), "multinomial's indices record no history");
    }
    weft_tensor *u[3] = {NULL, NULL, NULL};
    weft_tensor *dup = leaf_from(&six, 1, (double[]){3, 1, 3, 2, 1, 3});
    rc = weft_unique(&u[0], &u[1], &u[2], dup, true, true, true, NULL);
    if (ok(rc == 0, "unique of a tensor that requires grad runs")) {
        for (int i = 0; i < 3; i++)
            keep(u[i]);
        ok(!weft_tensor_requires_grad(u[0]), "unique's values record no history");
    } else {
        diag("%s", weft_last_error());
    }
    /* bernoulli_ overwrites: on a leaf that requires grad it is refused; on
     * a non-leaf the old history no longer reaches the result */
    rc = weft_bernoulli_(p, 0.5);
    ok(rc < 0, "bernoulli_ on a leaf that requires grad is refused");
    weft_tensor *c = NULL;
    weft_mul_scalar(&c, p, 2.0);
    keep(c);
    rc = weft_bernoulli_(c, 0.5);
    ok(rc == 0, "bernoulli_ on a non-leaf runs");
    weft_tensor *g[1] = {NULL};
    rc = grads_of_sum(g, c, &p, 1);
    ok(rc == 0 && (g[0] == NULL || value_at(g[0], 0) == 0),
       "after bernoulli_, no gradient reaches the old history");
    weft_tensor *r = NULL;
    weft_mul_scalar(&r, p, 3.0);
    keep(r);
    rc = weft_random_(r, 0, NULL);
    ok(rc == 0 && weft_tensor_requires_grad(r), "random_ on a non-leaf records a new history");
    drop_all();
}

/* ------------------------------------------------------------ completeness */

/* Operators that are not differentiable and have no formula on purpose:
 * integer and boolean results, random sources, and the gradient operators
 * whose own derivatives are handled by the composite formulas above them. */
static const char *const not_differentiable[] = {
    /* bitwise operators: integer tensors only */
    "bitwise_not", "bitwise_not_", "bitwise_and", "bitwise_and_", "bitwise_and_scalar",
    "bitwise_and_scalar_", "bitwise_or", "bitwise_or_", "bitwise_or_scalar", "bitwise_or_scalar_",
    "bitwise_xor", "bitwise_xor_", "bitwise_xor_scalar", "bitwise_xor_scalar_",
    /* comparisons and logical operators written in place: a boolean/0-1 result */
    "logical_not_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_", "eq_scalar_", "ne_scalar_",
    "lt_scalar_", "le_scalar_", "gt_scalar_", "ge_scalar_", "logical_and_", "logical_or_",
    "logical_xor_",
    /* gradient operators: differentiated through the composites their
     * formulas switch to under create_graph (autograd/formulas_nn_grad.c) */
    "nll_loss_backward", "cross_entropy_backward", "_softmax_backward_data",
    "_log_softmax_backward_data", "native_batch_norm_backward", "native_layer_norm_backward",
    "avg_pool2d_backward", "adaptive_avg_pool2d_backward", "max_pool2d_with_indices_backward",
    "convolution_backward_input", "convolution_backward_weight", "upsample_nearest2d_backward",
    "upsample_bilinear2d_backward",
};

static bool listed(const char *name)
{
    for (size_t i = 0; i < sizeof not_differentiable / sizeof *not_differentiable; i++)
        if (strcmp(name, not_differentiable[i]) == 0)
            return true;
    return false;
}

static void test_completeness(void)
{
    int n = weft_op_count(), missing = 0;
    for (int i = 0; i < n; i++) {
        const weft_op *op = weft_op_at(i);
        const char *name = weft_op_name(op);
        size_t len = strlen(name);
        if (len > 4 && strcmp(name + len - 4, "_out") == 0)
            continue; /* out= is never differentiable: refused */
        char *table = NULL;
        if (weft_op_dump_table(&table, op) < 0) {
            ok(0, "the kernel table of %s", name);
            continue;
        }
        const char *line = strstr(table, "Autograd[cpu]");
        bool formula = line && strncmp(line + strcspn(line, " "), " ", 1) == 0 &&
                       strstr(line, "kernel") && strstr(line, "kernel") < strchr(line, '\n');
        bool composite = !line && strstr(table, "composite") != NULL;
        if (!formula && !composite && !listed(name)) {
            missing++;
            diag("%s has no Autograd kernel, is no composite, and is not listed as "
                 "non-differentiable:\n%s", name, table);
        }
        free(table);
    }
    ok(missing == 0, "every operator of the table (%d) has a formula, is a composite, an out= form "
       "or a listed non-differentiable operator (%d missing)", n, missing);
}

int main(void)
{
    if (!default_plugins_loaded())
        return done_testing();
    diag("random shapes from a fixed seed %#llx", (unsigned long long)rng_state);
    for (int i = 0; i < NCASES; i++) {
        check_case(&cases[i]);
        drop_all();
    }
    test_rules();
    for (size_t i = 0; i < sizeof inplace_cases / sizeof *inplace_cases; i++) {
        check_inplace(&inplace_cases[i]);
        drop_all();
    }
    test_errors();
    test_dropout();
    test_samplers();
    test_completeness();
    drop_all();
    return done_testing();
}
