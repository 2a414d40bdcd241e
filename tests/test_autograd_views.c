/* tests/test_autograd_views.c — in-place operators on views of tensors that
 * take part in autograd (PyTorch's CopySlices): the base's and the view's
 * gradients after a write through the view, compared with out-of-place
 * equivalents and checked with gradcheck and gradgradcheck; views made
 * stale by a write to their base; and what stays refused (a view of a leaf
 * that requires grad, a view taken in no-grad mode). */
#include <stdint.h>
#include <stdlib.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

static weft_tensor *filled(const int64_t *sizes, int ndim, double start, double step, bool grad)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = start + step * (double)i + 0.1 * (double)((i * 7) % 3);
    if (grad)
        weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

static weft_tensor *grad_of(weft_tensor *t)
{
    weft_tensor *g = NULL;
    weft_tensor_grad(&g, t);
    return keep(g);
}

/* got (may be NULL) equals the n values want */
static void same(weft_tensor *got, const double *want, int64_t n, const char *what)
{
    const double *v = got && want ? values_of(got) : NULL;
    bool equal = v && weft_tensor_numel(got) == n;
    int64_t bad = -1;
    for (int64_t i = 0; equal && i < n; i++)
        if (fabs(v[i] - want[i]) > 1e-12 * (1 + fabs(want[i]))) {
            equal = false;
            bad = i;
        }
    if (!ok(equal, "%s", what)) {
        if (bad >= 0)
            diag("element %lld: got %.17g, expected %.17g", (long long)bad, v[bad], want[bad]);
        else
            diag("no gradient, or %lld elements", got ? (long long)weft_tensor_numel(got) : -1LL);
    }
}

static void backward_sum_of_product(weft_tensor *t, weft_tensor *w)
{
    weft_tensor *p = NULL, *s = NULL;
    weft_mul(&p, t, w);
    weft_sum(&s, p, NULL, 0, false);
    int rc = weft_backward(&s, 1, NULL, false, false);
    if (!ok(rc == 0, "backward"))
        diag("%s", weft_last_error());
    weft_tensor_release(p);
    weft_tensor_release(s);
}

static void test_slice_mul(void)
{
    int64_t s4[1] = {4};
    weft_tensor *x = filled(s4, 1, 1.0, 1.0, true), *w = filled(s4, 1, 1.0, 1.0, false);
    weft_tensor *a = NULL, *b = NULL;
    weft_mul_scalar(&a, x, 1.0);
    keep(a);
    weft_slice(&b, a, 0, 1, 3, 1);
    keep(b);
    is_int(weft_mul_scalar_(b, 2.0), 0, "b = a[1:3]; b.mul_(2) on a non-leaf a");
    is_str(weft_tensor_grad_fn_name(a), "CopySlices", "the base's history is CopySlices");
    is_str(weft_tensor_grad_fn_name(b), "AsStridedBackward", "the view's is a view of the base's");
    const double *av = values_of(a), *xv = values_of(x);
    ok(av[1] == 2 * xv[1] && av[0] == xv[0], "the write went through to the base");
    backward_sum_of_product(a, w);
    const double *wv = values_of(w);
    double want[4] = {wv[0], 2 * wv[1], 2 * wv[2], wv[3]};
    same(grad_of(x), want, 4, "d sum(a w)/dx: the written slice scaled by 2");

    /* the view's own gradient flows to the same place */
    weft_tensor_set_grad(x, NULL);
    weft_mul_scalar(&a, x, 1.0);
    keep(a);
    weft_slice(&b, a, 0, 1, 3, 1);
    keep(b);
    weft_mul_scalar_(b, 2.0);
    weft_tensor *s = NULL;
    weft_sum(&s, b, NULL, 0, false);
    weft_backward(&s, 1, NULL, false, false);
    weft_tensor_release(s);
    double want_b[4] = {0, 2, 2, 0};
    same(grad_of(x), want_b, 4, "d sum(b)/dx through the view after the write");

    /* a write that saved something (mul_ by a tensor): a second backward
     * without retain_graph is refused, naming the operator */
    weft_tensor *y = filled(s4 + 0, 1, 0.5, 0.5, true), *c = NULL, *cv = NULL, *y2 = NULL;
    weft_mul_scalar(&c, x, 1.0);
    keep(c);
    weft_slice(&cv, c, 0, 0, 2, 1);
    keep(cv);
    weft_slice(&y2, y, 0, 0, 2, 1);
    keep(y2);
    weft_mul_(cv, y2);
    weft_sum(&s, c, NULL, 0, false);
    keep(s);
    is_int(weft_backward(&s, 1, NULL, false, false), 0, "backward through a CopySlices that saved");
    is_int(weft_backward(&s, 1, NULL, false, false), WEFT_EINVAL, "a second backward");
    like(weft_last_error(), "MulBackward", "names the operator inside CopySlices");
    drop_all();
}

static void test_view_add(void)
{
    int64_t s23[2] = {2, 3}, s6[1] = {6};
    weft_tensor *x = filled(s23, 2, 0.5, 0.25, true), *y = filled(s6, 1, -1.0, 0.5, true);
    weft_tensor *a = NULL, *v = NULL;
    weft_mul_scalar(&a, x, 2.0);
    keep(a);
    weft_view(&v, a, s6, 1);
    keep(v);
    is_int(weft_add_(v, y), 0, "x.view(6).add_(y)");
    /* loss = sum(a * a), a = 2x + y.view(2, 3) */
    weft_tensor *sq = NULL, *l = NULL;
    weft_mul(&sq, a, a);
    weft_sum(&l, sq, NULL, 0, false);
    is_int(weft_backward(&l, 1, NULL, false, false), 0, "backward");
    weft_tensor_release(sq);
    weft_tensor_release(l);
    const double *xv = values_of(x), *yv = values_of(y);
    double gx[6], gy[6];
    for (int i = 0; i < 6; i++) {
        double ai = 2 * xv[i] + yv[i];
        gx[i] = 4 * ai;
        gy[i] = 2 * ai;
    }
    same(grad_of(x), gx, 6, "x's gradient through the base");
    same(grad_of(y), gy, 6, "y's gradient through the written view");
    drop_all();
}

static void test_select_copy(void)
{
    int64_t s34[2] = {3, 4}, s4[1] = {4};
    weft_tensor *src = filled(s4, 1, 0.3, 0.2, true), *w = filled(s34, 2, 1.0, 0.5, false);
    weft_tensor *t = NULL, *row = NULL;
    weft_zeros(&t, s34, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(t);
    weft_select(&row, t, 0, 1);
    keep(row);
    is_int(weft_copy_(row, src), 0, "t.select(0, 1).copy_(src) into a tensor without grad");
    ok(weft_tensor_requires_grad(t) && !weft_tensor_is_leaf(t), "t now requires grad, as a non-leaf");
    backward_sum_of_product(t, w);
    const double *wv = values_of(w);
    same(grad_of(src), wv + 4, 4, "src's gradient is w's row 1");

    /* the same into a tracked non-leaf: the overwritten row gets no gradient */
    weft_tensor *x = filled(s34, 2, -0.5, 0.1, true), *a = NULL, *r = NULL;
    weft_tensor_set_grad(src, NULL);
    weft_mul_scalar(&a, x, 3.0);
    keep(a);
    weft_select(&r, a, 0, 1);
    keep(r);
    weft_copy_(r, src);
    backward_sum_of_product(a, w);
    double gx[12];
    for (int i = 0; i < 12; i++)
        gx[i] = i / 4 == 1 ? 0.0 : 3 * wv[i];
    same(grad_of(x), gx, 12, "x's gradient: 3 w, zero on the overwritten row");
    same(grad_of(src), wv + 4, 4, "src's gradient");

    /* a column of a transposed view: strided, non-contiguous */
    weft_tensor *tt = NULL, *col = NULL, *y = filled(s34 + 0, 1, 2.0, 1.0, true); /* [3] */
    weft_tensor_set_grad(x, NULL);
    weft_mul_scalar(&a, x, 1.0);
    keep(a);
    weft_t(&tt, a); /* [4, 3] */
    keep(tt);
    weft_select(&col, tt, 0, 2); /* a's column 2, [3] */
    keep(col);
    is_int(weft_mul_(col, y), 0, "a.t()[2].mul_(y): in place through two views");
    backward_sum_of_product(a, w);
    const double *yv = values_of(y), *xv = values_of(x);
    double gx2[12], gy[3];
    for (int i = 0; i < 12; i++)
        gx2[i] = i % 4 == 2 ? wv[i] * yv[i / 4] : wv[i];
    for (int r2 = 0; r2 < 3; r2++)
        gy[r2] = wv[r2 * 4 + 2] * xv[r2 * 4 + 2];
    same(grad_of(x), gx2, 12, "x's gradient, column 2 scaled by y");
    same(grad_of(y), gy, 3, "y's gradient: the old column times w");
    drop_all();
}

static void test_stale_views(void)
{
    int64_t s4[1] = {4};
    weft_tensor *x = filled(s4, 1, 1.0, 1.0, true), *a = NULL, *v = NULL, *u = NULL;
    weft_mul_scalar(&a, x, 1.0);
    keep(a);
    weft_slice(&v, a, 0, 0, 2, 1); /* taken before the writes below */
    keep(v);
    weft_slice(&u, a, 0, 1, 4, 1);
    keep(u);
    weft_mul_scalar_(a, 2.0);  /* through the base */
    weft_mul_scalar_(u, 5.0);  /* through another view */
    weft_tensor *s = NULL;
    weft_sum(&s, v, NULL, 0, false);
    is_int(weft_backward(&s, 1, NULL, false, false), 0, "backward through a view taken before two writes");
    weft_tensor_release(s);
    double want[4] = {2, 10, 0, 0};
    same(grad_of(x), want, 4, "the view sees both writes: [2, 2*5]");
    drop_all();
}

/* Views taken while their root took no part in autograd: the root gains
 * history through a write by another view, or starts requiring grad; the
 * old views follow it (PyTorch's rule: a view requires grad when its base
 * does), out-of-place operators on them included. */
static void test_views_of_untracked_roots(void)
{
    int64_t s4[1] = {4}, s2[1] = {2};
    /* r = [1, 2, 3, 4] untracked; v2 = r[1:3] taken first; then r[0:2] *= x */
    weft_tensor *r = filled(s4, 1, 1.0, 1.0, false), *x = filled(s2, 1, 3.0, 2.0, true);
    weft_tensor *v1 = NULL, *v2 = NULL, *w = filled(s2, 1, 0.5, 1.0, false);
    weft_slice(&v2, r, 0, 1, 3, 1);
    keep(v2);
    ok(!weft_tensor_requires_grad(v2), "a view of an untracked root does not require grad");
    weft_slice(&v1, r, 0, 0, 2, 1);
    keep(v1);
    is_int(weft_mul_(v1, x), 0, "r[0:2] *= x, x requires grad");
    ok(weft_tensor_requires_grad(r), "the root gained history");
    ok(weft_tensor_requires_grad(v2), "the older view requires grad now");
    ok(!weft_tensor_is_leaf(v2), "and is no leaf");
    weft_tensor *p = NULL, *s = NULL;
    is_int(weft_mul(&p, v2, w), 0, "an out-of-place product with the older view");
    keep(p);
    ok(weft_tensor_requires_grad(p), "records history");
    weft_sum(&s, p, NULL, 0, false);
    keep(s);
    int rc = weft_backward(&s, 1, NULL, false, false);
    if (!ok(rc == 0, "backward through the older view"))
        diag("%s", weft_last_error());
    /* sum(v2 * w) = w0 * r1 * x1 + w1 * r2: d/dx = [0, w0 * r1] */
    const double *wv = values_of(w);
    double want[2] = {0, wv[0] * 2.1}; /* r1 = 2.1 (filled's pattern) */
    same(grad_of(x), want, 2, "x's gradient through a view taken before the write");
    drop_all();

    /* a view of a view, and a list operand (cat) */
    r = filled(s4, 1, 1.0, 1.0, false);
    x = filled(s2, 1, 3.0, 2.0, true);
    weft_tensor *wide = NULL, *el = NULL, *c = NULL;
    weft_slice(&wide, r, 0, 1, 4, 1);
    keep(wide);
    weft_select(&el, wide, 0, 0); /* r[1] */
    keep(el);
    weft_slice(&v1, r, 0, 0, 2, 1);
    keep(v1);
    weft_mul_(v1, x);
    int64_t s1[1] = {1};
    weft_tensor *el1 = NULL;
    weft_reshape(&el1, el, s1, 1);
    keep(el1);
    weft_tensor *parts[2] = {el1, x};
    is_int(weft_cat(&c, parts, 2, 0), 0, "cat of [a view of a view, x]");
    keep(c);
    s = NULL;
    weft_sum(&s, c, NULL, 0, false);
    keep(s);
    rc = weft_backward(&s, 1, NULL, false, false);
    if (!ok(rc == 0, "backward through cat"))
        diag("%s", weft_last_error());
    /* sum = r1 * x1 + x0 + x1: d/dx = [1, r1 + 1] */
    double want2[2] = {1, 2.1 + 1};
    same(grad_of(x), want2, 2, "x's gradient through a view of a view in a list operand");
    drop_all();

    /* the root starts requiring grad after the view was taken */
    r = filled(s4, 1, 1.0, 1.0, false);
    weft_slice(&v2, r, 0, 0, 2, 1);
    keep(v2);
    weft_tensor_set_requires_grad(r, true);
    ok(weft_tensor_requires_grad(v2), "a view requires grad once its root does");
    p = s = NULL;
    weft_mul_scalar(&p, v2, 3.0);
    keep(p);
    weft_sum(&s, p, NULL, 0, false);
    keep(s);
    rc = weft_backward(&s, 1, NULL, false, false);
    if (!ok(rc == 0, "backward into the root through the older view"))
        diag("%s", weft_last_error());
    double want3[4] = {3, 3, 0, 0};
    same(grad_of(r), want3, 4, "the root's gradient");
    is_int(weft_mul_scalar_(v2, 2.0), WEFT_EINVAL, "the view of a leaf that requires grad stays read-only for autograd");
    drop_all();

    /* with grad mode off nothing is recorded */
    r = filled(s4, 1, 1.0, 1.0, false);
    x = filled(s2, 1, 3.0, 2.0, true);
    weft_slice(&v2, r, 0, 1, 3, 1);
    keep(v2);
    weft_slice(&v1, r, 0, 0, 2, 1);
    keep(v1);
    weft_mul_(v1, x);
    bool was = weft_set_grad_enabled(false);
    p = NULL;
    weft_mul_scalar(&p, v2, 3.0);
    keep(p);
    weft_set_grad_enabled(was);
    ok(!weft_tensor_requires_grad(p), "no history recorded in no-grad mode");
    drop_all();
}

/* a function of (x, y) with in-place writes through views, for gradcheck:
 * sum(a * a) after a = x * x was written through three views */
static int inplace_views(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_tensor *a = NULL, *v = NULL, *r = NULL, *c = NULL, *sq = NULL;
    int rc = weft_mul(&a, in[0], in[0]);           /* [3, 4] */
    if (rc == 0)
        rc = weft_slice(&v, a, 1, 1, 4, 2);        /* columns 1 and 3: [3, 2] */
    if (rc == 0)
        rc = weft_mul_(v, in[1]);                  /* y [2] broadcast: needs the old values */
    if (rc == 0)
        rc = weft_select(&r, a, 0, 2);             /* row 2 */
    if (rc == 0)
        rc = weft_exp_(r);
    if (rc == 0)
        rc = weft_select(&c, v, 1, 0);             /* column 1 of a, through v */
    weft_tensor *d = NULL, *dc = NULL;
    if (rc == 0)
        rc = weft_select(&d, v, 1, 1);             /* column 3 of a */
    if (rc == 0)
        rc = weft_mul_scalar(&dc, d, 1.0);         /* a copy, with history into a */
    if (rc == 0)
        rc = weft_mul_(c, dc);                     /* column 1 *= column 3 */
    weft_tensor_release(d);
    weft_tensor_release(dc);
    if (rc == 0)
        rc = weft_mul(&sq, a, a);
    if (rc == 0)
        rc = weft_sum(out, sq, NULL, 0, false);
    weft_tensor *tmp[] = {a, v, r, c, sq};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

/* The same function written with in-place writes through views and out
 * of place (masks and broadcasting): x [3, 4], y [4]; a = x * x, then row
 * 1 of a := y, then columns 0 and 2 of a *= 3; returns sum(a * a * x). */
static int written(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    bool in_place = ctx != NULL;
    weft_tensor *a = NULL, *r = NULL, *cols = NULL, *m = NULL, *keep_rows = NULL, *yb = NULL,
                *t = NULL, *u = NULL, *p = NULL;
    int rc = weft_mul(&a, in[0], in[0]);
    if (in_place) {
        if (rc == 0)
            rc = weft_select(&r, a, 0, 1);
        if (rc == 0)
            rc = weft_copy_(r, in[1]);
        if (rc == 0)
            rc = weft_slice(&cols, a, 1, 0, 4, 2);
        if (rc == 0)
            rc = weft_mul_scalar_(cols, 3.0);
    } else {
        int64_t s31[2] = {3, 1}, s4[1] = {4}, s34[2] = {3, 4};
        double rowmask[3] = {1, 0, 1}, colscale[4] = {3, 1, 3, 1};
        weft_tensor *rm = NULL, *cs = NULL;
        weft_empty(&rm, s31, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
        weft_empty(&cs, s4, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
        memcpy(weft_tensor_data_ptr(rm), rowmask, sizeof rowmask);
        memcpy(weft_tensor_data_ptr(cs), colscale, sizeof colscale);
        weft_tensor *notrm = NULL;
        if (rc == 0)
            rc = weft_mul(&keep_rows, a, rm);             /* rows 0 and 2 of a */
        if (rc == 0)
            rc = weft_neg(&t, rm);
        if (rc == 0)
            rc = weft_add_scalar(&notrm, t, 1.0);         /* row 1 */
        if (rc == 0)
            rc = weft_expand(&yb, in[1], s34, 2);
        if (rc == 0)
            rc = weft_mul(&u, yb, notrm);
        if (rc == 0)
            rc = weft_add(&m, keep_rows, u);
        weft_tensor_release(a);
        a = NULL;
        if (rc == 0)
            rc = weft_mul(&a, m, cs);
        weft_tensor_release(rm);
        weft_tensor_release(cs);
        weft_tensor_release(notrm);
        weft_tensor_release(t);
        t = NULL;
    }
    if (rc == 0)
        rc = weft_mul(&t, a, a);
    if (rc == 0)
        rc = weft_mul(&p, t, in[0]);
    if (rc == 0)
        rc = weft_sum(out, p, NULL, 0, false);
    weft_tensor *tmp[] = {a, r, cols, m, keep_rows, yb, t, u, p};
    for (int i = 0; i < 9; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

static void test_against_out_of_place(void)
{
    int64_t s34[2] = {3, 4}, s4[1] = {4};
    weft_tensor *in[2] = {filled(s34, 2, -0.6, 0.13, true), filled(s4, 1, 0.7, -0.3, true)};
    weft_tensor *yi = NULL, *yo = NULL, *gi[2] = {NULL, NULL}, *go[2] = {NULL, NULL};
    int rc = written(&yi, in, 2, (void *)1);
    if (rc == 0)
        rc = written(&yo, in, 2, NULL);
    keep(yi);
    keep(yo);
    ok(rc == 0 && fabs(values_of(yi)[0] - values_of(yo)[0]) < 1e-12, "same value in place and out of place");
    if (rc == 0)
        rc = weft_autograd_grad(gi, &yi, 1, NULL, in, 2, false, false, false);
    if (rc == 0)
        rc = weft_autograd_grad(go, &yo, 1, NULL, in, 2, false, false, false);
    for (int i = 0; i < 2; i++) {
        keep(gi[i]);
        keep(go[i]);
    }
    if (!ok(rc == 0, "gradients of both"))
        diag("%s", weft_last_error());
    same(gi[0], go[0] ? values_of(go[0]) : NULL, 12, "x's gradient matches the out-of-place one");
    same(gi[1], go[1] ? values_of(go[1]) : NULL, 4, "y's gradient matches the out-of-place one");
    rc = weft_gradcheck(written, (void *)1, in, 2, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: copy_ into a row and mul_ of strided columns"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(written, (void *)1, in, 2, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: the same"))
        diag("%s", weft_last_error());
    drop_all();
}

static weft_tensor *index01;

/* x [3, 4], y [2, 2]: a = x * x; a[:, 1:3].index_add_(0, [0, 2], y);
 * a[1].fill_(0.5); returns sum(a * a) */
static int indexed(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    (void)ctx;
    weft_tensor *a = NULL, *v = NULL, *r = NULL, *sq = NULL;
    int rc = weft_mul(&a, in[0], in[0]);
    if (rc == 0)
        rc = weft_slice(&v, a, 1, 1, 3, 1);
    if (rc == 0)
        rc = weft_index_add_(v, 0, index01, in[1]);
    if (rc == 0)
        rc = weft_select(&r, a, 0, 1);
    if (rc == 0)
        rc = weft_fill_(r, 0.5);
    if (rc == 0)
        rc = weft_mul(&sq, a, a);
    if (rc == 0)
        rc = weft_sum(out, sq, NULL, 0, false);
    weft_tensor *tmp[] = {a, v, r, sq};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

static void test_gradchecks(void)
{
    int64_t s34[2] = {3, 4}, s2[1] = {2};
    weft_tensor *in[2] = {filled(s34, 2, -0.6, 0.13, true), filled(s2, 1, 0.7, 0.4, true)};
    int rc = weft_gradcheck(inplace_views, NULL, in, 2, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: mul_ and exp_ through slices and selects of a non-leaf"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(inplace_views, NULL, in, 2, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: the same (CopySlices under create_graph)"))
        diag("%s", weft_last_error());
    int64_t s22[2] = {2, 2};
    index01 = keep_int64(s2, 1, (const int64_t[]){0, 2});
    weft_tensor *in2[2] = {in[0], filled(s22, 2, 0.3, -0.2, true)};
    rc = weft_gradcheck(indexed, NULL, in2, 2, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: index_add_ into a column slice, fill_ of a row"))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(indexed, NULL, in2, 2, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: the same"))
        diag("%s", weft_last_error());
    drop_all();
}

static void test_refused(void)
{
    int64_t s4[1] = {4};
    weft_tensor *x = filled(s4, 1, 1.0, 1.0, true), *v = NULL, *a = NULL;
    weft_slice(&v, x, 0, 0, 2, 1);
    keep(v);
    is_int(weft_mul_scalar_(v, 2.0), WEFT_EINVAL, "in place on a view of a leaf that requires grad");
    like(weft_last_error(), "view of a leaf", "message");
    bool mode = weft_set_grad_enabled(false);
    is_int(weft_mul_scalar_(v, 1.0), 0, "allowed with grad mode off");
    weft_set_grad_enabled(mode);

    weft_mul_scalar(&a, x, 1.0);
    keep(a);
    mode = weft_set_grad_enabled(false);
    weft_tensor *nv = NULL, *nvv = NULL;
    weft_slice(&nv, a, 0, 1, 3, 1);
    keep(nv);
    ok(!weft_tensor_requires_grad(nv), "a view taken in no-grad mode does not require grad");
    weft_set_grad_enabled(mode);
    weft_unsqueeze(&nvv, nv, 0);
    keep(nvv);
    int64_t s2[1] = {2};
    weft_tensor *y = filled(s2, 1, 0.5, 0.5, true);
    is_int(weft_mul_(nv, y), WEFT_EINVAL,
           "a view taken in no-grad mode, written with grad mode on by an operand that requires grad");
    like(weft_last_error(), "no-grad mode", "message");
    is_int(weft_add_(nvv, y), WEFT_EINVAL, "and a view of it");
    mode = weft_set_grad_enabled(false);
    is_int(weft_mul_(nv, y), 0, "written with grad mode off: allowed");
    weft_set_grad_enabled(mode);

    /* a view saved for backward, then written: the version error */
    weft_tensor *b = NULL, *sv = NULL, *e = NULL, *s = NULL;
    weft_mul_scalar(&b, x, 1.0);
    keep(b);
    weft_slice(&sv, b, 0, 0, 2, 1);
    keep(sv);
    weft_exp(&e, sv); /* saves sv */
    keep(e);
    weft_mul_scalar_(sv, 3.0);
    weft_sum(&s, e, NULL, 0, false);
    keep(s);
    is_int(weft_backward(&s, 1, NULL, false, false), WEFT_EINVAL, "a saved view written since");
    like(weft_last_error(), "ExpBackward", "names the operator that saved it");

    /* an operand sharing the written storage is read before the write but
     * would be saved after it: backward reports it (as PyTorch does) */
    weft_tensor *c = NULL, *c0 = NULL, *c1 = NULL;
    weft_mul_scalar(&c, x, 1.0);
    keep(c);
    is_int(weft_mul_(c, c), 0, "c.mul_(c)");
    weft_sum(&s, c, NULL, 0, false);
    keep(s);
    is_int(weft_backward(&s, 1, NULL, false, false), WEFT_EINVAL, "backward through c.mul_(c)");
    like(weft_last_error(), "modified by an in-place operation", "is a version error, not a wrong gradient");
    weft_mul_scalar(&c, x, 1.0);
    keep(c);
    weft_slice(&c0, c, 0, 0, 2, 1);
    keep(c0);
    weft_slice(&c1, c, 0, 2, 4, 1);
    keep(c1);
    is_int(weft_mul_(c0, c1), 0, "one view of c multiplied in place by another");
    weft_sum(&s, c, NULL, 0, false);
    keep(s);
    is_int(weft_backward(&s, 1, NULL, false, false), WEFT_EINVAL, "backward");
    like(weft_last_error(), "MulBackward", "the saved operand's version moved with the write");
    drop_all();
}

int main(void)
{
    weft_load_default_plugins();
    test_slice_mul();
    test_view_add();
    test_select_copy();
    test_stale_views();
    test_views_of_untracked_roots();
    test_against_out_of_place();
    test_gradchecks();
    test_refused();
    return done_testing();
}
