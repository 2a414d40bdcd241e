/* tests/test_autograd_custom.c — custom differentiable functions from C:
 * a one-output and a two-output function checked once and twice against
 * finite differences, NULL and materialized grad_outputs, non-differentiable
 * outputs, in-place (dirty) inputs, errors from the callbacks, the version
 * check of saved tensors, and the user's destroy called exactly once. */
#include <stdint.h>
#include <stdlib.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

static double at(const weft_tensor *t, int64_t i)
{
    const double *v = values_of(t);
    return v ? v[i] : NAN;
}

static weft_tensor *leaf(const int64_t *sizes, int ndim, double start, double step)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = start + step * (double)i + 0.1 * (double)((i * 7) % 3);
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

static weft_tensor *grad_of(weft_tensor *t)
{
    weft_tensor *g = NULL;
    weft_tensor_grad(&g, t);
    return keep(g);
}

/* What the callbacks saw, per test. */
typedef struct seen {
    int destroyed;
    int backward_calls;
    int null_grads;      /* grad_outputs that were NULL */
    int zero_grads;      /* materialized ones */
    bool needs[2];       /* needs_input_grad in forward */
    bool fail;           /* backward returns an error */
} seen;

static void destroy_seen(void *user)
{
    ((seen *)user)->destroyed++;
}

/* ---------------------------------------------------- x * exp(x) */

static int mulexp_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                          weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    seen *s = weft_function_user(ctx);
    if (s) {
        s->needs[0] = weft_function_needs_input_grad(ctx, 0);
        if (weft_tensor_requires_grad(in[0]) && weft_is_grad_enabled())
            return weft_set_error(WEFT_EINTERNAL, "forward runs with grad mode on");
    }
    weft_tensor *e = NULL;
    int rc = weft_exp(&e, in[0]);
    if (rc == 0)
        rc = weft_mul(&out[0], in[0], e);
    weft_tensor_release(e);
    if (rc == 0)
        rc = weft_function_save_for_backward(ctx, in, 1);
    return rc;
}

/* d/dx x e^x = e^x (1 + x), written with weft operators so that it can be
 * differentiated again */
static int mulexp_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                           weft_tensor **gi, int nin)
{
    (void)nout;
    (void)nin;
    seen *s = weft_function_user(ctx);
    if (s) {
        s->backward_calls++;
        if (s->fail)
            return weft_set_error(WEFT_ERANGE, "the callback gave up");
    }
    weft_tensor *x = NULL, *e = NULL, *x1 = NULL, *d = NULL;
    int rc = weft_function_saved(&x, ctx, 0);
    if (rc == 0)
        rc = weft_exp(&e, x);
    if (rc == 0)
        rc = weft_add_scalar(&x1, x, 1.0);
    if (rc == 0)
        rc = weft_mul(&d, e, x1);
    if (rc == 0)
        rc = weft_mul(&gi[0], go[0], d);
    weft_tensor_release(x);
    weft_tensor_release(e);
    weft_tensor_release(x1);
    weft_tensor_release(d);
    return rc;
}

static const weft_function mulexp = {"MulExpBackward", mulexp_forward, mulexp_backward, false};

static int apply_mulexp(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    return weft_function_apply(out, 1, &mulexp, ctx, NULL, in, 1);
}

/* ---------------------------------------------------- exp, saving its output */

static int exp_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin, weft_tensor **out,
                       int nout)
{
    (void)nin;
    (void)nout;
    int rc = weft_exp(&out[0], in[0]);
    if (rc == 0)
        rc = weft_function_save_for_backward(ctx, out, 1);
    return rc;
}

/* g * y: under create_graph the saved output comes back attached to this
 * node, so the second derivative reaches x through y */
static int exp_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                        weft_tensor **gi, int nin)
{
    (void)nout;
    (void)nin;
    weft_tensor *y = NULL;
    int rc = weft_function_saved(&y, ctx, 0);
    if (rc == 0)
        rc = weft_mul(&gi[0], go[0], y);
    weft_tensor_release(y);
    return rc;
}

static const weft_function my_exp = {"MyExpBackward", exp_forward, exp_backward, false};

static int apply_exp_squared(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_tensor *y = NULL;
    int rc = weft_function_apply(&y, 1, &my_exp, NULL, NULL, in, 1);
    if (rc == 0)
        rc = weft_mul(out, y, in[0]);
    weft_tensor_release(y);
    return rc;
}

/* ---------------------------------------------------- two outputs */

/* (x * y, x + y^2) */
static int two_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin, weft_tensor **out,
                       int nout)
{
    (void)nin;
    (void)nout;
    seen *s = weft_function_user(ctx);
    if (s) {
        s->needs[0] = weft_function_needs_input_grad(ctx, 0);
        s->needs[1] = weft_function_needs_input_grad(ctx, 1);
    }
    weft_tensor *yy = NULL;
    int rc = weft_mul(&out[0], in[0], in[1]);
    if (rc == 0)
        rc = weft_mul(&yy, in[1], in[1]);
    if (rc == 0)
        rc = weft_add(&out[1], in[0], yy);
    weft_tensor_release(yy);
    if (rc == 0)
        rc = weft_function_save_for_backward(ctx, in, 2);
    return rc;
}

/* dx = g0 y + g1; dy = g0 x + 2 g1 y; a NULL gradient counts as zero */
static int two_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                        weft_tensor **gi, int nin)
{
    (void)nout;
    (void)nin;
    seen *s = weft_function_user(ctx);
    weft_tensor *x = NULL, *y = NULL;
    int rc = weft_function_saved(&x, ctx, 0);
    if (rc == 0)
        rc = weft_function_saved(&y, ctx, 1);
    if (s) {
        s->backward_calls++;
        for (int o = 0; o < 2; o++) {
            s->null_grads += go[o] == NULL;
            if (go[o] && o == 1) {
                weft_tensor *m = NULL;
                weft_abs(&m, go[o]);
                weft_tensor *mx = NULL;
                weft_amax(&mx, m, NULL, 0, false);
                s->zero_grads += mx && at(mx, 0) == 0.0;
                weft_tensor_release(m);
                weft_tensor_release(mx);
            }
        }
    }
    for (int i = 0; rc == 0 && i < 2; i++) {
        if (!weft_function_needs_input_grad(ctx, i))
            continue;
        weft_tensor *a = NULL, *b = NULL;
        if (go[0])
            rc = weft_mul(&a, go[0], i == 0 ? y : x);
        if (rc == 0 && go[1]) {
            if (i == 0) {
                b = weft_tensor_retain(go[1]);
            } else {
                weft_tensor *t = NULL;
                rc = weft_mul(&t, go[1], y);
                if (rc == 0)
                    rc = weft_mul_scalar(&b, t, 2.0);
                weft_tensor_release(t);
            }
        }
        if (rc == 0 && a && b)
            rc = weft_add(&gi[i], a, b);
        else if (rc == 0)
            gi[i] = weft_tensor_retain(a ? a : b);
        weft_tensor_release(a);
        weft_tensor_release(b);
    }
    weft_tensor_release(x);
    weft_tensor_release(y);
    return rc;
}

static const weft_function two = {"TwoBackward", two_forward, two_backward, false};
static const weft_function two_materialized = {"TwoBackward", two_forward, two_backward, true};

/* a function of both outputs: sum(o0 * o1) + sum(o1) */
static int apply_two(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_tensor *o[2] = {NULL, NULL}, *p = NULL;
    int rc = weft_function_apply(o, 2, &two, NULL, NULL, in, 2);
    if (rc == 0)
        rc = weft_mul(&p, o[0], o[1]);
    if (rc == 0)
        rc = weft_add(out, p, o[1]);
    weft_tensor_release(o[0]);
    weft_tensor_release(o[1]);
    weft_tensor_release(p);
    return rc;
}

static void test_gradchecks(void)
{
    int64_t s23[2] = {2, 3};
    weft_tensor *x = leaf(s23, 2, -0.7, 0.31);
    int rc = weft_gradcheck(apply_mulexp, NULL, &x, 1, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: custom x*exp(x)"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(apply_mulexp, NULL, &x, 1, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: custom x*exp(x), its backward written with weft operators"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(apply_exp_squared, NULL, &x, 1, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: custom exp saving its output (re-attached under create_graph)"))
        diag("%s", weft_last_error());
    weft_tensor *in[2] = {x, leaf(s23, 2, 0.4, -0.17)};
    rc = weft_gradcheck(apply_two, NULL, in, 2, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: custom two-output function"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(apply_two, NULL, in, 2, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: custom two-output function"))
        diag("%s", weft_last_error());
    drop_all();
}

static void test_behaviour(void)
{
    int64_t s3[1] = {3};
    seen s = {0};
    weft_tensor *x = leaf(s3, 1, 0.5, 0.25), *y = NULL, *z = NULL;
    is_int(weft_function_apply(&y, 1, &mulexp, &s, destroy_seen, &x, 1), 0, "apply");
    ok(s.needs[0], "needs_input_grad in forward");
    is_str(weft_tensor_grad_fn_name(y), "MulExpBackward", "the node has the function's name");
    ok(weft_tensor_requires_grad(y) && !weft_tensor_is_leaf(y), "the output requires grad");
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward through the custom node");
    weft_tensor *g = grad_of(x);
    double x1 = at(x, 1);
    is_double(at(g, 1), exp(x1) * (1 + x1), 1e-12, "gradient e^x (1 + x)");
    is_int(s.backward_calls, 1, "backward called once");
    is_int(s.destroyed, 0, "destroy not yet called while the graph lives");
    is_int(weft_backward(&z, 1, NULL, false, false), WEFT_EINVAL, "a second backward");
    like(weft_last_error(), "MulExpBackward", "the freed-graph error names the function");
    weft_tensor_release(z);
    weft_tensor_release(y);
    is_int(s.destroyed, 1, "destroy called exactly once when the node dies");

    /* no graph recorded: destroy right away */
    seen s2 = {0};
    bool mode = weft_set_grad_enabled(false);
    is_int(weft_function_apply(&y, 1, &mulexp, &s2, destroy_seen, &x, 1), 0, "apply in no-grad mode");
    weft_set_grad_enabled(mode);
    ok(!weft_tensor_requires_grad(y), "no history in no-grad mode");
    ok(!s2.needs[0], "needs_input_grad false in no-grad mode");
    is_int(s2.destroyed, 1, "destroy called before apply returns when nothing is recorded");
    weft_tensor_release(y);

    /* an error from backward */
    seen s3b = {.fail = true};
    weft_function_apply(&y, 1, &mulexp, &s3b, destroy_seen, &x, 1);
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), WEFT_ERANGE, "backward's error code comes back");
    like(weft_last_error(), "MulExpBackward", "with the function's name");
    like(weft_last_error(), "the callback gave up", "and the callback's message");
    weft_tensor_release(z);
    weft_tensor_release(y);
    is_int(s3b.destroyed, 1, "destroy once after a failed backward");

    /* a saved tensor modified in place */
    seen s4 = {0};
    weft_tensor *h = NULL;
    weft_mul_scalar(&h, x, 2.0); /* a non-leaf: in place is allowed */
    weft_function_apply(&y, 1, &mulexp, &s4, destroy_seen, &h, 1);
    weft_add_scalar_(h, 1.0);
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), WEFT_EINVAL, "saved input modified in place");
    like(weft_last_error(), "MulExpBackward", "the version error names the custom node");
    like(weft_last_error(), "modified by an in-place operation", "as a version error");
    weft_tensor_release(z);
    weft_tensor_release(y);
    weft_tensor_release(h);
    is_int(s4.destroyed, 1, "destroy once");

    /* a forward error */
    seen s5 = {0};
    weft_tensor *bad[1] = {NULL};
    is_int(weft_function_apply(&y, 1, &mulexp, &s5, destroy_seen, bad, 1), WEFT_EINVAL, "NULL input");
    ok(y == NULL, "output NULL on error");
    is_int(s5.destroyed, 1, "destroy called once on an argument error");
    drop_all();
}

static void test_two_outputs(void)
{
    int64_t s3[1] = {3};
    weft_tensor *x = leaf(s3, 1, 0.5, 0.25), *c = NULL, *z = NULL;
    weft_full(&c, s3, 1, 2.0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(c);
    /* only the first output is used: the second's gradient is NULL */
    seen s = {0};
    weft_tensor *in[2] = {x, c}, *o[2] = {NULL, NULL};
    is_int(weft_function_apply(o, 2, &two, &s, destroy_seen, in, 2), 0, "apply a two-output function");
    ok(s.needs[0] && !s.needs[1], "needs_input_grad: x yes, the constant no");
    weft_sum(&z, o[0], NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward through output 0 only");
    is_int(s.null_grads, 1, "the unused output's gradient is NULL");
    weft_tensor *g = grad_of(x);
    is_double(at(g, 0), 2.0, 1e-12, "dx = y");
    weft_tensor_release(z);
    weft_tensor_release(o[0]);
    weft_tensor_release(o[1]);
    is_int(s.destroyed, 1, "destroyed once");
    weft_tensor_set_grad(x, NULL);

    seen m = {0};
    weft_function_apply(o, 2, &two_materialized, &m, destroy_seen, in, 2);
    weft_sum(&z, o[0], NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward with materialize_grads");
    is_int(m.null_grads, 0, "no NULL gradients");
    is_int(m.zero_grads, 1, "zeros for the unused output");
    weft_tensor_release(z);
    weft_tensor_release(o[0]);
    weft_tensor_release(o[1]);
    drop_all();
}

/* ---------------------------------------------------- marks */

/* (2x, argmax(x), x^2 marked non-differentiable) */
static int marked_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                          weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    int rc = weft_mul_scalar(&out[0], in[0], 2.0);
    if (rc == 0)
        rc = weft_argmax(&out[1], in[0], NULL, false);
    if (rc == 0)
        rc = weft_mul(&out[2], in[0], in[0]);
    if (rc == 0)
        rc = weft_function_mark_non_differentiable(ctx, out[2]);
    return rc;
}

static int marked_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                           weft_tensor **gi, int nin)
{
    (void)ctx;
    (void)nin;
    seen *s = weft_function_user(ctx);
    for (int o = 1; o < nout; o++)
        s->null_grads += go[o] == NULL;
    return weft_mul_scalar(&gi[0], go[0], 2.0);
}

static const weft_function marked = {"MarkedBackward", marked_forward, marked_backward, false};

/* x.mul_(3) in place, returned */
static int scale_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                         weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    seen *s = weft_function_user(ctx);
    int rc = weft_mul_scalar_(in[0], 3.0);
    if (rc == 0 && !(s && s->fail))
        rc = weft_function_mark_dirty(ctx, in[0]);
    if (rc == 0) {
        if (s && s->fail) /* returns a new tensor, not the dirty input */
            rc = weft_mul_scalar(&out[0], in[0], 1.0);
        else
            out[0] = weft_tensor_retain(in[0]);
    }
    if (rc == 0 && s && s->fail)
        rc = weft_function_mark_dirty(ctx, in[0]);
    return rc;
}

static int scale_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                          weft_tensor **gi, int nin)
{
    (void)ctx;
    (void)nout;
    (void)nin;
    return weft_mul_scalar(&gi[0], go[0], 3.0);
}

static const weft_function scale = {"ScaleInPlaceBackward", scale_forward, scale_backward, false};

static int identity_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                            weft_tensor **out, int nout)
{
    (void)ctx;
    (void)nin;
    (void)nout;
    out[0] = weft_tensor_retain(in[0]);
    return 0;
}

static int identity_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                             weft_tensor **gi, int nin)
{
    (void)ctx;
    (void)nout;
    (void)nin;
    gi[0] = weft_tensor_retain(go[0]);
    return 0;
}

static const weft_function identity = {"IdentityBackward", identity_forward, identity_backward, false};

static int bad_grad_backward(weft_function_ctx *ctx, weft_tensor *const *go, int nout,
                             weft_tensor **gi, int nin)
{
    (void)ctx;
    (void)nout;
    (void)nin;
    (void)go;
    int64_t s5[1] = {5};
    return weft_zeros(&gi[0], s5, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
}

static const weft_function bad_grad = {"BadShapeBackward", identity_forward, bad_grad_backward, false};

static int misuse_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                          weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    weft_tensor *t = NULL;
    if (weft_function_saved(&t, ctx, 0) != WEFT_EINVAL || t)
        return weft_set_error(WEFT_EINTERNAL, "saved() worked in forward");
    out[0] = weft_tensor_retain(in[0]);
    return 0;
}

static const weft_function misuse = {"MisuseBackward", misuse_forward, identity_backward, false};

static int twice_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                         weft_tensor **out, int nout)
{
    (void)ctx;
    (void)nin;
    (void)nout;
    int rc = weft_mul_scalar(&out[0], in[0], 2.0);
    if (rc == 0)
        out[1] = weft_tensor_retain(out[0]);
    return rc;
}

static const weft_function twice = {"TwiceBackward", twice_forward, identity_backward, false};

static void test_marks(void)
{
    int64_t s3[1] = {3};
    weft_tensor *x = leaf(s3, 1, 0.5, 0.25), *o[3] = {NULL, NULL, NULL}, *z = NULL;
    seen s = {0};
    is_int(weft_function_apply(o, 3, &marked, &s, destroy_seen, &x, 1), 0, "apply with marks");
    ok(weft_tensor_requires_grad(o[0]), "output 0 differentiable");
    ok(!weft_tensor_requires_grad(o[1]), "an integer output is not differentiable");
    ok(!weft_tensor_requires_grad(o[2]), "an output marked non-differentiable");
    weft_sum(&z, o[0], NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward");
    is_int(s.null_grads, 2, "the non-differentiable outputs get NULL gradients");
    is_double(at(grad_of(x), 2), 2.0, 1e-12, "gradient 2");
    for (int i = 0; i < 3; i++)
        weft_tensor_release(o[i]);
    weft_tensor_release(z);
    is_int(s.destroyed, 1, "destroyed once");

    /* in place on a non-leaf, marked dirty */
    weft_tensor *h = NULL, *y = NULL;
    weft_mul_scalar(&h, x, 1.0);
    uint32_t v = weft_tensor_version(h);
    is_int(weft_function_apply(&y, 1, &scale, NULL, NULL, &h, 1), 0, "an in-place custom function");
    ok(y == h, "the dirty input is the output");
    ok(weft_tensor_version(h) > v, "its version moved");
    is_str(weft_tensor_grad_fn_name(h), "ScaleInPlaceBackward", "its history moved to the function");
    weft_sum(&z, h, NULL, 0, false);
    weft_tensor_set_grad(x, NULL);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward");
    is_double(at(grad_of(x), 0), 3.0, 1e-12, "through the in-place function and the old history");
    weft_tensor_release(z);
    weft_tensor_release(y);
    weft_tensor_release(h);

    is_int(weft_function_apply(&y, 1, &scale, NULL, NULL, &x, 1), WEFT_EINVAL,
           "in place on a leaf that requires grad");
    like(weft_last_error(), "leaf", "says leaf");
    ok(y == NULL, "nothing returned");
    seen f = {.fail = true};
    weft_mul_scalar(&h, x, 1.0);
    is_int(weft_function_apply(&y, 1, &scale, &f, NULL, &h, 1), WEFT_EINVAL,
           "a dirty input must be returned");
    like(weft_last_error(), "must be returned", "message");
    weft_tensor_release(h);

    /* in place on a view through a custom function: refused */
    weft_tensor *hv = NULL;
    weft_mul_scalar(&h, x, 1.0);
    weft_slice(&hv, h, 0, 0, 2, 1);
    is_int(weft_function_apply(&y, 1, &scale, NULL, NULL, &hv, 1), WEFT_ENOTSUP,
           "marking a view dirty");
    like(weft_last_error(), "view", "message");
    weft_tensor_release(hv);
    weft_tensor_release(h);

    /* an input returned as is: a new alias with the function's history */
    is_int(weft_function_apply(&y, 1, &identity, NULL, NULL, &x, 1), 0, "identity");
    ok(y != x && weft_tensor_is_leaf(x), "the output is an alias; the input stays a leaf");
    is_str(weft_tensor_grad_fn_name(y), "IdentityBackward", "the alias has the function's history");
    weft_tensor_release(y);

    /* a gradient of the wrong shape */
    weft_function_apply(&y, 1, &bad_grad, NULL, NULL, &x, 1);
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), WEFT_ESHAPE, "wrong gradient shape");
    like(weft_last_error(), "BadShapeBackward", "names the function");
    weft_tensor_release(z);
    weft_tensor_release(y);

    is_int(weft_function_apply(&y, 1, &misuse, NULL, NULL, &x, 1), 0, "saved() refused in forward");
    weft_tensor_release(y);
    is_int(weft_function_apply(&y, 0, &misuse, NULL, NULL, &x, 1), WEFT_EINVAL, "no outputs");
    weft_tensor *pair[2] = {NULL, NULL};
    is_int(weft_function_apply(pair, 2, &twice, NULL, NULL, &x, 1), WEFT_EINVAL,
           "one tensor returned as two outputs");
    ok(pair[0] == NULL && pair[1] == NULL, "both outputs NULL after the error");
    drop_all();
}

int main(void)
{
    weft_load_default_plugins();
    test_gradchecks();
    test_behaviour();
    test_two_outputs();
    test_marks();
    return done_testing();
}
