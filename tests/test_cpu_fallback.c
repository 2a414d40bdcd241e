/* tests/test_cpu_fallback.c — the CPU fallback on a device that has only an
 * allocator and copies: operators of every kind (elementwise, reductions,
 * matmul, in-place, out=, several results, tensor lists, strided and
 * aliasing arguments) give the CPU's results on the device; the warning is
 * printed once per operator; the error and silent modes; a kernel of the
 * plugin's own wins; autograd runs through it; failures are clean.
 *
 * The fake device keeps its memory scrambled (every byte XOR 0xA5) so that
 * a kernel that read device memory directly, not through the copies, would
 * compute garbage. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/host_device.h"
#include "tests/keep.h"
#include "tests/tap.h"

#define CPU WEFT_DEVICE_CPU

static weft_device dev0, dev1;
static int fail_copies; /* when set, copies to the host fail */
static long copies_in, copies_out;

static void scramble(unsigned char *dst, const unsigned char *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i] ^ 0xA5;
}

static int scrambled_from_host(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    copies_in++;
    scramble(dst, src, n);
    return 0;
}

static int scrambled_to_host(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    if (fail_copies)
        return weft_set_error(WEFT_EIO, "fbdev: the copy to the host failed (as the test asked)");
    copies_out++;
    scramble(dst, src, n);
    return 0;
}

/* ------------------------------------------------------------ helpers */

static weft_tensor *on_dev(const weft_tensor *t)
{
    weft_tensor *d = NULL;
    if (weft_to_device(&d, t, dev0) != 0)
        diag("to_device: %s", weft_last_error());
    return keep(d);
}

static weft_tensor *randn(int ndim, int64_t a, int64_t b, int64_t c)
{
    int64_t sizes[3] = {a, b, c};
    weft_tensor *t = NULL;
    weft_randn(&t, sizes, ndim, WEFT_FLOAT32, CPU, NULL);
    return keep(t);
}

/* Whether device tensor d holds the values of host tensor want. */
static int same(const weft_tensor *d, const weft_tensor *want, double tol)
{
    if (!d || !want)
        return 0;
    if (!weft_device_equal(weft_tensor_device(d), dev0)) {
        diag("result is not on fbdev:0");
        return 0;
    }
    if (weft_tensor_dtype(d) != weft_tensor_dtype(want)) {
        diag("dtype %s, expected %s", weft_dtype_name(weft_tensor_dtype(d)),
             weft_dtype_name(weft_tensor_dtype(want)));
        return 0;
    }
    if (weft_tensor_ndim(d) != weft_tensor_ndim(want) ||
        memcmp(weft_tensor_sizes(d), weft_tensor_sizes(want),
               (size_t)weft_tensor_ndim(d) * sizeof(int64_t)) != 0) {
        diag("shapes differ");
        return 0;
    }
    weft_tensor *h = NULL;
    if (weft_to_device(&h, d, CPU) != 0)
        return 0;
    keep(h);
    const double *a = values_of(h), *b = values_of(want);
    for (int64_t i = 0; a && b && i < weft_tensor_numel(want); i++)
        if (!(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i])) || (isnan(a[i]) && isnan(b[i])))) {
            diag("element %lld: %g, expected %g", (long long)i, a[i], b[i]);
            return 0;
        }
    return a && b;
}

/* stderr goes to a file while the warnings are checked */
static int saved_stderr = -1;
static char stderr_path[] = "/tmp/weft-fallback-XXXXXX";

static void capture_stderr(void)
{
    fflush(stderr);
    int fd = mkstemp(stderr_path);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Stops capturing; returns how many captured lines contain both needles. */
static int captured_lines(const char *a, const char *b)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    FILE *f = fopen(stderr_path, "r");
    int n = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, a) && strstr(line, b))
            n++;
    if (f)
        fclose(f);
    unlink(stderr_path);
    strcpy(stderr_path, "/tmp/weft-fallback-XXXXXX");
    return n;
}

/* ------------------------------------------------------------ cases */

static void test_elementwise(void)
{
    weft_tensor *a = randn(2, 3, 4, 0), *b = randn(2, 3, 4, 0), *row = randn(1, 4, 0, 0);
    weft_tensor *da = on_dev(a), *db = on_dev(b), *drow = on_dev(row);
    weft_tensor *r = NULL, *w = NULL;
    weft_add(&r, da, db);
    weft_add(&w, a, b);
    ok(same(keep(r), keep(w), 0), "add");
    weft_add_ex(&r, da, drow, 2.5);
    weft_add_ex(&w, a, row, 2.5);
    ok(same(keep(r), keep(w), 0), "add with broadcasting and alpha");
    weft_mul(&r, da, db);
    weft_mul(&w, a, b);
    ok(same(keep(r), keep(w), 0), "mul");
    weft_exp(&r, da);
    weft_exp(&w, a);
    ok(same(keep(r), keep(w), 0), "exp");
    weft_sigmoid(&r, da);
    weft_sigmoid(&w, a);
    ok(same(keep(r), keep(w), 0), "sigmoid");
    weft_pow_scalar(&r, da, 2);
    weft_pow_scalar(&w, a, 2);
    ok(same(keep(r), keep(w), 0), "pow with a scalar");
    weft_tensor *mask = NULL, *dmask = NULL;
    weft_gt_scalar(&mask, a, 0);
    keep(mask);
    weft_gt_scalar(&dmask, da, 0);
    ok(same(keep(dmask), mask, 0), "gt gives bool on the device");
    weft_where(&r, dmask, da, db);
    weft_where(&w, mask, a, b);
    ok(same(keep(r), keep(w), 0), "where with three device tensors");
    /* integers: a dtype other than float32 */
    weft_tensor *ia = NULL, *ir = NULL, *iw = NULL;
    weft_arange(&ia, 0, 12, 1, WEFT_INT64, CPU);
    keep(ia);
    weft_tensor *dia = on_dev(ia);
    weft_mul(&ir, dia, dia);
    weft_mul(&iw, ia, ia);
    ok(same(keep(ir), keep(iw), 0), "int64 mul");
    /* a host scalar tensor mixed in stays on the host */
    weft_tensor *two = NULL;
    weft_full(&two, NULL, 0, 2.0, WEFT_FLOAT32, CPU);
    keep(two);
    weft_mul(&r, da, two);
    weft_mul(&w, a, two);
    ok(same(keep(r), keep(w), 0), "mul by a 0-d host tensor");
    /* strided and expanded arguments: views the device could not copy */
    weft_tensor *dt = NULL, *t = NULL, *de = NULL, *e = NULL;
    weft_t(&dt, da);
    weft_t(&t, a);
    keep(dt), keep(t);
    weft_exp(&r, dt);
    weft_exp(&w, t);
    ok(same(keep(r), keep(w), 0), "exp of a transposed view");
    int64_t ex[2] = {5, 4};
    weft_expand(&de, drow, ex, 2);
    weft_expand(&e, row, ex, 2);
    keep(de), keep(e);
    weft_neg(&r, de);
    weft_neg(&w, e);
    ok(same(keep(r), keep(w), 0), "neg of an expanded view (stride 0)");
    weft_tensor *s1 = NULL, *s2 = NULL, *h1 = NULL, *h2 = NULL;
    weft_slice(&s1, da, 0, 0, 2, 1);
    weft_slice(&s2, da, 0, 1, 3, 1);
    weft_slice(&h1, a, 0, 0, 2, 1);
    weft_slice(&h2, a, 0, 1, 3, 1);
    keep(s1), keep(s2), keep(h1), keep(h2);
    weft_sub(&r, s1, s2);
    weft_sub(&w, h1, h2);
    ok(same(keep(r), keep(w), 0), "sub of two overlapping slices of one storage");
    drop_all();
}

static void test_reductions_and_matmul(void)
{
    weft_tensor *a = randn(3, 2, 3, 4), *da = on_dev(a);
    weft_tensor *r = NULL, *w = NULL;
    int64_t dim1 = 1;
    weft_sum(&r, da, &dim1, 1, true);
    weft_sum(&w, a, &dim1, 1, true);
    ok(same(keep(r), keep(w), 1e-6), "sum over a dim, keepdim");
    weft_mean(&r, da, NULL, 0, false);
    weft_mean(&w, a, NULL, 0, false);
    ok(same(keep(r), keep(w), 1e-6), "mean of everything");
    int64_t d2 = 2;
    weft_argmax(&r, da, &d2, false);
    weft_argmax(&w, a, &d2, false);
    ok(same(keep(r), keep(w), 0), "argmax gives int64 on the device");
    weft_var(&r, da, &d2, 1);
    weft_var(&w, a, &d2, 1);
    ok(same(keep(r), keep(w), 1e-6), "var");
    weft_tensor *rv = NULL, *ri = NULL, *wv = NULL, *wi = NULL;
    is_int(weft_max_dim(&rv, &ri, da, 1, false), 0, "max over a dim: two results");
    weft_max_dim(&wv, &wi, a, 1, false);
    keep(rv), keep(ri), keep(wv), keep(wi);
    ok(same(rv, wv, 0), "max_dim values");
    ok(same(ri, wi, 0), "max_dim indices");
    weft_tensor *m = randn(2, 4, 5, 0), *dm = on_dev(m), *x = randn(2, 3, 4, 0), *dx = on_dev(x);
    weft_mm(&r, dx, dm);
    weft_mm(&w, x, m);
    ok(same(keep(r), keep(w), 1e-5), "mm");
    weft_matmul(&r, da, dm);
    weft_matmul(&w, a, m);
    ok(same(keep(r), keep(w), 1e-5), "matmul (the composite over mm) of a batch");
    weft_tensor *logits = randn(2, 4, 6, 0), *dl = on_dev(logits);
    int64_t tsz = 4, tv[4] = {0, 5, 2, 3};
    weft_tensor *target = keep_int64(&tsz, 1, tv), *dtarget = on_dev(target);
    weft_softmax(&r, dl, 1);
    weft_softmax(&w, logits, 1);
    ok(same(keep(r), keep(w), 1e-6), "softmax");
    weft_cross_entropy(&r, dl, dtarget, NULL, "mean", -100, 0.0);
    weft_cross_entropy(&w, logits, target, NULL, "mean", -100, 0.0);
    ok(same(keep(r), keep(w), 1e-6), "cross_entropy with an int64 target on the device");
    drop_all();
}

static void test_inplace_out_and_lists(void)
{
    weft_tensor *a = randn(2, 3, 4, 0), *b = randn(2, 3, 4, 0);
    weft_tensor *da = on_dev(a), *db = on_dev(b), *w = NULL;
    uint32_t v0 = weft_tensor_version(da);
    is_int(weft_add_(da, db), 0, "add_ on the device");
    weft_add(&w, a, b);
    keep(w);
    ok(same(da, w, 0), "add_ wrote into the device tensor");
    ok(weft_tensor_version(da) == v0 + 1, "and bumped its version once");
    /* in place on a strided view: only its elements change */
    weft_tensor *a2 = NULL, *da2 = NULL, *col = NULL, *dcol = NULL;
    weft_clone(&a2, w);
    keep(a2);
    da2 = on_dev(a2);
    weft_select(&col, a2, 1, 2);
    weft_select(&dcol, da2, 1, 2);
    keep(col), keep(dcol);
    is_int(weft_relu_(dcol), 0, "relu_ on a column (a strided view)");
    weft_relu_(col);
    ok(same(da2, a2, 0), "the column changed and nothing else");
    /* aliasing arguments */
    weft_tensor *c = NULL, *dc = NULL;
    weft_clone(&c, a);
    keep(c);
    dc = on_dev(c);
    weft_add_(dc, dc);
    weft_add_(c, c);
    ok(same(dc, c, 0), "add_(x, x) doubles x");
    weft_mul_out(dc, dc, db);
    weft_mul_out(c, c, b);
    ok(same(dc, c, 0), "mul_out(out=x, x, y)");
    /* out= into a fresh tensor and into an empty one that must grow */
    weft_tensor *o = NULL, *wo = NULL;
    int64_t sz[2] = {3, 4}, zero = 0;
    weft_empty(&o, sz, 2, WEFT_FLOAT32, dev0);
    keep(o);
    is_int(weft_sub_out(o, da, db), 0, "sub_out into a device tensor");
    weft_sub(&wo, w, b);
    ok(same(o, keep(wo), 0), "has the values");
    weft_tensor *e = NULL;
    weft_empty(&e, &zero, 1, WEFT_FLOAT32, dev0);
    keep(e);
    is_int(weft_exp_out(e, db), 0, "exp_out into an empty device tensor");
    weft_exp(&wo, b);
    ok(same(e, keep(wo), 0), "it was resized on the device and filled");
    /* a list of tensors, one of them strided */
    weft_tensor *dt = NULL, *t = NULL;
    weft_t(&dt, da);
    weft_t(&t, w);
    keep(dt), keep(t);
    weft_tensor *dsq = NULL, *sq = NULL;
    weft_tensor *dsrc = NULL, *src = NULL;
    is_int(weft_reshape(&dsq, dt, (int64_t[]){3, 4}, 2), 0,
           "reshape of a transposed device view copies (copy_ stages strided views)");
    weft_reshape(&sq, t, (int64_t[]){3, 4}, 2);
    keep(dsq), keep(sq);
    ok(same(dsq, sq, 0), "with the right values");
    weft_tensor *wide = randn(2, 3, 8, 0), *dwide = on_dev(wide);
    weft_slice(&dsrc, dwide, 1, 0, 8, 2);
    weft_slice(&src, wide, 1, 0, 8, 2);
    keep(dsrc), keep(src);
    weft_tensor *dlist[3] = {da, db, dsrc}, *hlist[3] = {w, b, src};
    weft_tensor *r = NULL;
    is_int(weft_cat(&r, dlist, 3, 0), 0, "cat of three device tensors");
    weft_tensor *wc = NULL;
    weft_cat(&wc, hlist, 3, 0);
    ok(same(keep(r), keep(wc), 0), "cat's values, the strided one included");
    weft_stack(&r, dlist, 2, 1);
    weft_stack(&wc, hlist, 2, 1);
    ok(same(keep(r), keep(wc), 0), "stack along dim 1");
    /* filling: zeros on the device goes through fill_ */
    weft_tensor *z = NULL;
    is_int(weft_zeros(&z, sz, 2, WEFT_FLOAT64, dev0), 0, "zeros on the device (fill_ falls back)");
    keep(z);
    weft_tensor *hz = NULL;
    weft_zeros(&hz, sz, 2, WEFT_FLOAT64, CPU);
    ok(same(z, keep(hz), 0), "all zero");
    drop_all();
}

static void test_autograd(void)
{
    weft_tensor *x = randn(2, 3, 4, 0), *m = randn(2, 4, 2, 0);
    weft_tensor *dx = NULL, *dm = NULL;
    weft_to_device(&dx, x, dev0);
    weft_to_device(&dm, m, dev0);
    keep(dx), keep(dm);
    weft_tensor_set_requires_grad(dx, true);
    weft_tensor_set_requires_grad(dm, true);
    weft_tensor *p = NULL, *s = NULL, *l = NULL;
    weft_mm(&p, dx, dm);
    keep(p);
    weft_tanh(&s, p);
    keep(s);
    weft_sum(&l, s, NULL, 0, false);
    keep(l);
    ok(weft_tensor_requires_grad(l), "the loss on the device requires grad");
    is_int(weft_backward(&l, 1, NULL, false, false), 0, "backward through fallen-back operators");
    weft_tensor *gx = NULL, *gm = NULL;
    weft_tensor_grad(&gx, dx);
    weft_tensor_grad(&gm, dm);
    keep(gx), keep(gm);
    /* the same on the host */
    weft_tensor *hx = NULL, *hm = NULL;
    weft_clone(&hx, x);
    weft_clone(&hm, m);
    keep(hx), keep(hm);
    weft_tensor_set_requires_grad(hx, true);
    weft_tensor_set_requires_grad(hm, true);
    weft_mm(&p, hx, hm);
    keep(p);
    weft_tanh(&s, p);
    keep(s);
    weft_sum(&l, s, NULL, 0, false);
    keep(l);
    weft_backward(&l, 1, NULL, false, false);
    weft_tensor *wx = NULL, *wm = NULL;
    weft_tensor_grad(&wx, hx);
    weft_tensor_grad(&wm, hm);
    keep(wx), keep(wm);
    ok(same(gx, wx, 1e-5), "x's gradient is on the device and equals the CPU's");
    ok(same(gm, wm, 1e-5), "so is m's");
    drop_all();
}

static int neg_calls;
static int own_neg(weft_call *call, void *ctx)
{
    (void)ctx;
    neg_calls++;
    /* scrambled memory: negate through the host like a real device would
     * compute, but counted */
    weft_tensor *h = NULL, *n = NULL;
    int rc = weft_to_device(&h, call->args[0].u.tensor, CPU);
    if (rc == 0)
        rc = weft_neg(&n, h);
    if (rc == 0)
        rc = weft_to_device(&call->rets[0].u.tensor, n, weft_tensor_device(call->args[0].u.tensor));
    if (rc == 0)
        call->rets[0].tag = WEFT_VALUE_TENSOR;
    weft_tensor_release(h);
    weft_tensor_release(n);
    return rc;
}

/* a kernel that hands every call over to the fallback, as one that handles
 * only some dtypes does for the others */
static int handed_over;
static int hand_over(weft_call *call, void *ctx)
{
    (void)ctx;
    handed_over++;
    return weft_call_cpu_fallback(call);
}

static void test_modes_and_priority(weft_registrar *reg)
{
    weft_tensor *a = randn(1, 5, 0, 0), *da = on_dev(a), *r = NULL;
    /* one warning per operator and device type */
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_WARN);
    capture_stderr();
    for (int i = 0; i < 3; i++) {
        weft_cos(&r, da);
        weft_tensor_release(r);
    }
    weft_sin(&r, da);
    keep(r);
    is_int(captured_lines("'cos'", "'fbdev'"), 1, "cos warned once in three calls, naming the device");
    capture_stderr();
    weft_cos(&r, da);
    keep(r);
    weft_sin(&r, da);
    keep(r);
    is_int(captured_lines("weft: warning", "CPU"), 0, "no warning again for cos and sin");
    is_int(weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_SILENT), WEFT_CPU_FALLBACK_WARN,
           "set_mode returns the previous mode");
    capture_stderr();
    weft_tan(&r, da);
    keep(r);
    is_int(captured_lines("weft: warning", "'tan'"), 0, "silent mode: tan runs without a word");
    weft_tensor *w = NULL;
    weft_tan(&w, a);
    ok(same(r, keep(w), 0), "and gave the CPU's result on the device");

    /* the counter */
    uint64_t before = weft_cpu_fallback_calls();
    weft_cosh(&r, da);
    keep(r);
    is_int((long long)(weft_cpu_fallback_calls() - before), 1, "one more call counted");

    /* error mode */
    is_int(weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_ERROR), WEFT_CPU_FALLBACK_SILENT, "switch to error");
    is_int(weft_cpu_fallback_get_mode(), WEFT_CPU_FALLBACK_ERROR, "get_mode says error");
    r = (weft_tensor *)1;
    is_int(weft_sinh(&r, da), WEFT_ENOKERNEL, "error mode: sinh fails");
    ok(r == NULL, "and leaves no result");
    like(weft_last_error(), "sinh has no kernel for device type 'fbdev'", "the message names operator and device");
    like(weft_last_error(), "CPU fallback is off", "and says why");
    like(weft_last_error(), "Dense[cpu] (cpu)", "and where kernels exist");
    is_int(weft_cpu_fallback_set_mode((weft_cpu_fallback_mode)7), WEFT_EINVAL, "an unknown mode is refused");
    is_int(weft_cpu_fallback_get_mode(), WEFT_CPU_FALLBACK_ERROR, "and changes nothing");
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_SILENT);

    /* a kernel of the device's own always wins */
    weft_registration *h = NULL;
    is_int(weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, dev0.type, own_neg, NULL, &h), 0,
           "register the device's own neg");
    before = weft_cpu_fallback_calls();
    weft_neg(&r, da);
    keep(r);
    ok(neg_calls == 1 && weft_cpu_fallback_calls() == before, "its kernel ran, not the fallback");
    weft_neg(&w, a);
    ok(same(r, keep(w), 0), "with the right values");
    const weft_op *op = NULL;
    weft_op_find(&op, "exp");
    char *table = NULL;
    weft_op_dump_table(&table, op);
    like(table, "Dense[fbdev]", "exp's table lists the device's slot");
    like(table, "fallback    from core CPU fallback", "as the core's CPU fallback");
    free(table);
    weft_registration_release(h);
    weft_neg(&r, da);
    keep(r);
    ok(neg_calls == 1 && weft_cpu_fallback_calls() == before + 1, "released: the fallback again");
    /* a plugin's own fallback for its key also wins over the core's */
    weft_registration *fh = NULL;
    is_int(weft_register_fallback(reg, WEFT_KEY_DENSE, dev0.type, own_neg, NULL, &fh), 0,
           "register a fallback of the device's own");
    weft_neg(&r, da);
    keep(r);
    ok(neg_calls == 2 && weft_cpu_fallback_calls() == before + 1, "the device's fallback ran");
    weft_registration_release(fh);

    /* a kernel of the device's own may hand a call to the fallback */
    weft_registration *hh = NULL;
    weft_register_kernel(reg, "abs", WEFT_KEY_DENSE, dev0.type, hand_over, NULL, &hh);
    before = weft_cpu_fallback_calls();
    is_int(weft_abs(&r, da), 0, "a kernel calls weft_call_cpu_fallback");
    keep(r);
    weft_abs(&w, a);
    ok(handed_over == 1 && weft_cpu_fallback_calls() == before + 1 && same(r, keep(w), 0),
       "it ran once, through the fallback, with the CPU's values");
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_ERROR);
    is_int(weft_abs(&r, da), WEFT_ENOKERNEL, "handing over in error mode fails");
    like(weft_last_error(), "abs: the kernel of device type 'fbdev' handed this call to the CPU fallback, which is off",
         "saying that the device's kernel handed it over");
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_WARN);
    capture_stderr();
    weft_abs(&r, da);
    keep(r);
    is_int(captured_lines("'abs'", "its kernel handed the call over"), 1,
           "the warning says the kernel handed the call over");
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_SILENT);
    weft_registration_release(hh);
    weft_registration *hc = NULL;
    weft_register_kernel(reg, "abs", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, hand_over, NULL, &hc);
    is_int(weft_abs(&r, a), WEFT_EINVAL, "weft_call_cpu_fallback on a CPU call is refused");
    like(weft_last_error(), "needs a call on a device", "saying why");
    weft_registration_release(hc);
    drop_all();
}

static void test_errors(void)
{
    weft_tensor *a = randn(1, 4, 0, 0), *da = on_dev(a), *r = NULL;
    weft_tensor *d1 = NULL;
    weft_to_device(&d1, a, dev1);
    keep(d1);
    r = (weft_tensor *)1;
    is_int(weft_add(&r, da, d1), WEFT_EDEVICE, "fbdev:0 with fbdev:1 is refused");
    like(weft_last_error(), "expected every tensor on fbdev:0 (or the host), but one is on fbdev:1",
         "naming both devices");
    ok(r == NULL, "no result");
    fail_copies = 1;
    is_int(weft_exp(&r, da), WEFT_EIO, "a failing copy to the host fails the call");
    like(weft_last_error(), "the copy to the host failed", "with the device's message");
    ok(r == NULL, "no result");
    weft_tensor *c = NULL;
    weft_clone(&c, a);
    weft_tensor *dc = on_dev(keep(c));
    is_int(weft_exp_(dc), WEFT_EIO, "in place too");
    fail_copies = 0;
    ok(same(dc, a, 0), "and the device tensor is unchanged");
    /* bad arguments are the CPU kernel's errors, as for host tensors */
    weft_tensor *b = randn(1, 3, 0, 0), *db = on_dev(b);
    is_int(weft_add(&r, da, db), WEFT_ESHAPE, "shapes that do not broadcast");
    like(weft_last_error(), "add", "the CPU kernel's message");
    drop_all();
}

int main(void)
{
    /* the environment is read at the first use, not at load time */
    setenv("WEFT_CPU_FALLBACK", "silent", 1);
    weft_manual_seed(1234);
    (void)fake_copy; /* the scrambling copies replace it */
    if (weft_load_default_plugins() < 1)
        skip_all("no CPU plugin: %s", weft_last_error());
    is_int(weft_cpu_fallback_get_mode(), WEFT_CPU_FALLBACK_SILENT, "WEFT_CPU_FALLBACK=silent is read");
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_WARN);

    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "test_fallback");
    /* the host device, with copies that scramble on the way (see above) */
    weft_device_interface iface = host_device_iface;
    iface.copy_to_host = scrambled_to_host;
    iface.copy_from_host = scrambled_from_host;
    int type = -1;
    is_int(weft_register_device_type(reg, "fbdev", &iface, &host_device_alloc, &type), 0,
           "a device type with only an allocator and copies");
    dev0 = (weft_device){(int16_t)type, 0};
    dev1 = (weft_device){(int16_t)type, 1};
    /* the warnings of the cases below go to a file that is thrown away */
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_SILENT);

    test_elementwise();
    test_reductions_and_matmul();
    test_inplace_out_and_lists();
    test_autograd();
    test_modes_and_priority(reg);
    test_errors();
    ok(copies_in > 0 && copies_out > 0, "every value went through the device's copies (%ld in, %ld out)",
       copies_in, copies_out);

    weft_registrar_destroy(reg);
    is_int(weft_device_type_from_name("fbdev"), WEFT_ENOTFOUND, "the device type is gone with its registrar");
    const weft_op *op = NULL;
    weft_op_find(&op, "exp");
    char *table = NULL;
    weft_op_dump_table(&table, op);
    ok(table && !strstr(table, "CPU fallback"), "and its fallback too");
    free(table);
    return done_testing();
}
