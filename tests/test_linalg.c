/* tests/test_linalg.c — the vector and batched products of issue 3, part B
 * (dot, vdot, outer, mv, baddbmm, addbmm) and einsum, against float64
 * references computed here with naive loops; every dtype family, strided
 * and transposed operands, empty and size-1 shapes, bad input (with the
 * shapes named in the message), and derivatives against finite
 * differences (weft_gradcheck, and weft_gradgradcheck for the products). */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t lcg = 4242;
static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* a kept tensor of dtype holding random values in [lo, hi) (whole numbers
 * when whole is set, so integer dtypes are exact) */
static weft_tensor *rnd(weft_dtype dtype, const int64_t *sizes, int nd, double lo, double hi,
                        bool whole)
{
    weft_tensor *f = NULL, *t = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    double *p = weft_tensor_data_ptr(f);
    for (int64_t i = 0; i < weft_tensor_numel(f); i++)
        p[i] = whole ? floor(uniform(lo, hi)) : uniform(lo, hi);
    if (dtype == WEFT_FLOAT64)
        return keep(f);
    weft_to_dtype(&t, f, dtype);
    weft_tensor_release(f);
    return keep(t);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* element (i, j, k) of a float64 copy, through strides (so views work) */
static double at3(const weft_tensor *t, int64_t i, int64_t j, int64_t k)
{
    weft_tensor *d = NULL;
    weft_to_dtype(&d, t, WEFT_FLOAT64);
    keep(d);
    const double *p = weft_tensor_data_ptr(d);
    int nd = weft_tensor_ndim(d);
    int64_t idx[3] = {i, j, k}, off = 0;
    for (int q = 0; q < nd; q++)
        off += idx[3 - nd + q] * weft_tensor_stride(d, q);
    return p[off];
}

static double tol_of(weft_dtype dt)
{
    return dt == WEFT_FLOAT64 ? 1e-12 : dt == WEFT_FLOAT32 ? 1e-5 : dt == WEFT_FLOAT16 ? 2e-2
           : dt == WEFT_BFLOAT16 ? 6e-2 : 0;
}

/* ------------------------------------------------------------ references */

/* c[b][i][j] = beta * self[i][j] (broadcast, read through at3) + alpha *
 * sum_k a[b][i][k] bm[b][k][j]; summed over b when sum_batches */
static void ref_baddbmm(const weft_tensor *self, const weft_tensor *a, const weft_tensor *bm,
                        double beta, double alpha, bool sum_batches, double *out)
{
    int64_t B = weft_tensor_size(a, 0), n = weft_tensor_size(a, 1), k = weft_tensor_size(a, 2);
    int64_t m = weft_tensor_size(bm, 2);
    weft_tensor *se = NULL;
    int64_t full[3] = {B, n, m};
    weft_expand(&se, self, sum_batches ? full + 1 : full, sum_batches ? 2 : 3);
    keep(se);
    for (int64_t b = 0; b < (sum_batches ? 1 : B); b++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double acc = 0;
                for (int64_t bb = sum_batches ? 0 : b; bb < (sum_batches ? B : b + 1); bb++)
                    for (int64_t q = 0; q < k; q++)
                        acc += at3(a, bb, i, q) * at3(bm, bb, q, j);
                double s = beta == 0 ? 0 : beta * (sum_batches ? at3(se, 0, i, j) : at3(se, b, i, j));
                out[(b * n + i) * m + j] = s + alpha * acc;
            }
}

/* ------------------------------------------------------------ dot, vdot */

static void test_dot(void)
{
    const weft_dtype dtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16,
                                 WEFT_INT32, WEFT_INT64, WEFT_UINT8, WEFT_INT8, WEFT_INT16};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        weft_dtype dt = dtypes[d];
        bool integral = dt <= WEFT_INT64;
        /* a strided self (every second element) and a contiguous tensor */
        weft_tensor *big = rnd(dt, SHAPE(14), integral ? 0 : -2, integral ? 5 : 2, integral);
        weft_tensor *b = rnd(dt, SHAPE(7), integral ? 0 : -2, integral ? 5 : 2, integral);
        weft_tensor *a = NULL, *r = NULL, *rv = NULL;
        weft_slice(&a, big, 0, 0, 14, 2);
        keep(a);
        double ref = 0;
        for (int i = 0; i < 7; i++)
            ref += at3(a, 0, 0, i) * at3(b, 0, 0, i);
        int rc = weft_dot(&r, a, b);
        keep(r);
        if (!ok(rc == 0 && weft_tensor_ndim(r) == 0 && weft_tensor_dtype(r) == dt,
                "dot %s: a 0-d %s", weft_dtype_name(dt), weft_dtype_name(dt)))
            diag("%s", weft_last_error());
        else
            check_close(r, &ref, 1, dt == WEFT_UINT8 || dt == WEFT_INT8 ? 0 : tol_of(dt) * 7,
                        weft_dtype_name(dt));
        rc = weft_vdot(&rv, a, b);
        keep(rv);
        if (ok(rc == 0, "vdot %s of real vectors", weft_dtype_name(dt)))
            check_close(rv, &ref, 1, tol_of(dt) * 7, "vdot equals dot for real vectors");
    }
    /* int32 wraps on overflow, as in PyTorch: 2 * (65536 * 65536) = 2^33 = 0 mod 2^32 */
    weft_tensor *x = NULL, *r = NULL;
    weft_full(&x, SHAPE(2), 65536, WEFT_INT32, WEFT_DEVICE_CPU);
    keep(x);
    if (ok(weft_dot(&r, x, x) == 0, "int32 dot that overflows"))
        is_int(((int32_t *)weft_tensor_data_ptr(keep(r)))[0], 0, "int32 dot wraps modulo 2^32");
    /* complex: dot does not conjugate, vdot conjugates self */
    weft_tensor *ca = NULL, *cb = NULL, *cd = NULL, *cv = NULL;
    weft_empty(&ca, SHAPE(2), WEFT_COMPLEX128, WEFT_DEVICE_CPU);
    weft_empty(&cb, SHAPE(2), WEFT_COMPLEX128, WEFT_DEVICE_CPU);
    keep(ca);
    keep(cb);
    double _Complex *pa = weft_tensor_data_ptr(ca), *pb = weft_tensor_data_ptr(cb);
    pa[0] = 1 + 2 * I, pa[1] = 3 - 1 * I, pb[0] = 2 - 1 * I, pb[1] = 1 + 1 * I;
    if (ok(weft_dot(&cd, ca, cb) == 0 && weft_vdot(&cv, ca, cb) == 0, "complex128 dot and vdot")) {
        double _Complex d = *(double _Complex *)weft_tensor_data_ptr(keep(cd));
        double _Complex v = *(double _Complex *)weft_tensor_data_ptr(keep(cv));
        ok(creal(d) == 8 && cimag(d) == 5, "dot = 8+5i (got %g%+gi)", creal(d), cimag(d));
        ok(creal(v) == 2 && cimag(v) == -1, "vdot = 2-1i (got %g%+gi)", creal(v), cimag(v));
    }
    weft_tensor *fa = NULL, *fb = NULL, *fv = NULL;
    weft_to_dtype(&fa, ca, WEFT_COMPLEX64);
    weft_to_dtype(&fb, cb, WEFT_COMPLEX64);
    keep(fa);
    keep(fb);
    if (ok(weft_vdot(&fv, fa, fb) == 0, "complex64 vdot")) {
        float _Complex v = *(float _Complex *)weft_tensor_data_ptr(keep(fv));
        ok(crealf(v) == 2 && cimagf(v) == -1, "complex64 vdot = 2-1i");
    }
    /* empty vectors give 0; out= writes a 0-d tensor */
    weft_tensor *e = NULL, *z = NULL, *out = NULL;
    weft_empty(&e, SHAPE(0), WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(e);
    if (ok(weft_dot(&z, e, e) == 0, "dot of empty vectors"))
        is_double(values_of(keep(z))[0], 0, 0, "is 0");
    weft_empty(&out, NULL, 0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(out);
    weft_tensor *u = rnd(WEFT_FLOAT64, SHAPE(3), -1, 1, false), *v = rnd(WEFT_FLOAT64, SHAPE(3), -1, 1, false);
    double ref = at3(u, 0, 0, 0) * at3(v, 0, 0, 0) + at3(u, 0, 0, 1) * at3(v, 0, 0, 1) +
                 at3(u, 0, 0, 2) * at3(v, 0, 0, 2);
    if (ok(weft_dot_out(out, u, v) == 0, "dot_out"))
        check_close(out, &ref, 1, 1e-12, "dot_out");
    /* bad input */
    weft_tensor *m = rnd(WEFT_FLOAT64, SHAPE(2, 3), 0, 1, false), *w = rnd(WEFT_FLOAT64, SHAPE(4), 0, 1, false);
    weft_tensor *f32 = rnd(WEFT_FLOAT32, SHAPE(3), 0, 1, false), *bo = NULL, *res = NULL;
    error_is(weft_dot(&res, m, u), WEFT_ESHAPE, "[2, 3]", "dot of a matrix");
    ok(res == NULL, "a failed call leaves the result NULL");
    error_is(weft_dot(&res, u, w), WEFT_ESHAPE, "[4]", "dot of sizes 3 and 4");
    error_is(weft_vdot(&res, u, f32), WEFT_EDTYPE, "float32", "vdot of float64 and float32");
    weft_empty(&bo, SHAPE(3), WEFT_BOOL, WEFT_DEVICE_CPU);
    keep(bo);
    error_is(weft_dot(&res, bo, bo), WEFT_EDTYPE, "bool", "dot of bool");
    drop_all();
}

/* ------------------------------------------------------------ mv, outer */

static void test_mv_outer(void)
{
    const weft_dtype dtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_INT64,
                                 WEFT_INT16, WEFT_COMPLEX64};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        weft_dtype dt = dtypes[d];
        bool integral = dt <= WEFT_INT64;
        for (int transposed = 0; transposed < 2; transposed++) {
            const int64_t shape[2] = {transposed ? 4 : 5, transposed ? 5 : 4};
            weft_tensor *m0 = rnd(dt, shape, 2, -3, 3, integral);
            weft_tensor *m = m0, *mt = NULL, *v = rnd(dt, SHAPE(4), -3, 3, integral), *r = NULL;
            if (transposed) {
                weft_t(&mt, m0);
                m = keep(mt);
            }
            double ref[5];
            for (int i = 0; i < 5; i++) {
                ref[i] = 0;
                for (int k = 0; k < 4; k++)
                    ref[i] += at3(m, 0, i, k) * at3(v, 0, 0, k);
            }
            char what[96];
            snprintf(what, sizeof what, "mv %s%s", weft_dtype_name(dt),
                     transposed ? " (transposed matrix)" : "");
            if (ok(weft_mv(&r, m, v) == 0 && weft_tensor_dtype(keep(r)) == dt, "%s runs", what))
                check_close(r, ref, 5, dt == WEFT_COMPLEX64 ? 1e-5 : tol_of(dt) * 8, what);
            else
                diag("%s", weft_last_error());
        }
    }
    /* a strided vector, out=, an empty matrix, and a size-1 case */
    weft_tensor *m = rnd(WEFT_FLOAT32, SHAPE(3, 2), -1, 1, false), *big = rnd(WEFT_FLOAT32, SHAPE(4), -1, 1, false);
    weft_tensor *v = NULL, *out = NULL, *r = NULL;
    weft_slice(&v, big, 0, 0, 4, 2);
    keep(v);
    double ref[3];
    for (int i = 0; i < 3; i++)
        ref[i] = at3(m, 0, i, 0) * at3(v, 0, 0, 0) + at3(m, 0, i, 1) * at3(v, 0, 0, 1);
    weft_empty(&out, SHAPE(0), WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(out);
    if (ok(weft_mv_out(out, m, v) == 0, "mv_out resizes an empty out and reads a strided vec"))
        check_close(out, ref, 3, 1e-6, "mv_out");
    weft_tensor *e = rnd(WEFT_FLOAT64, SHAPE(3, 0), 0, 1, false), *ev = rnd(WEFT_FLOAT64, SHAPE(0), 0, 1, false);
    const double zeros[3] = {0, 0, 0};
    if (ok(weft_mv(&r, e, ev) == 0, "mv with k = 0"))
        check_close(keep(r), zeros, 3, 0, "mv with k = 0 gives zeros");
    weft_tensor *res = NULL;
    error_is(weft_mv(&res, m, big), WEFT_ESHAPE, "vec [4]", "mv of [3, 2] and [4]");
    error_is(weft_mv(&res, big, big), WEFT_ESHAPE, "self [4]", "mv of a vector");

    /* large enough to be cut into blocks of rows (or of the transposed
     * matrix's columns) on the pool, at 3 threads: 1003 x 611 and its
     * transposed view, float32 and float64, a strided vector; every entry
     * against the double-precision sum */
    weft_set_num_threads(3);
    for (int d = 0; d < 2; d++) {
        weft_dtype dt = d ? WEFT_FLOAT32 : WEFT_FLOAT64;
        for (int transposed = 0; transposed < 2; transposed++) {
            const int64_t shp[2] = {transposed ? 611 : 1003, transposed ? 1003 : 611};
            weft_tensor *m0 = rnd(dt, shp, 2, -1, 1, false);
            weft_tensor *mm = m0, *mt = NULL, *wide = rnd(dt, SHAPE(1222), -1, 1, false),
                        *vv = NULL, *rr = NULL;
            if (transposed) {
                weft_t(&mt, m0);
                mm = keep(mt);
            }
            weft_slice(&vv, wide, 0, 1, 1222, 2); /* 611 entries, stride 2 */
            keep(vv);
            /* float64 contiguous copies (a copy made per element, as at3
             * does, would take gigabytes here) */
            weft_tensor *md = NULL, *mc = NULL, *vd = NULL, *vc = NULL;
            weft_to_dtype(&md, mm, WEFT_FLOAT64);
            weft_contiguous(&mc, keep(md));
            weft_to_dtype(&vd, vv, WEFT_FLOAT64);
            weft_contiguous(&vc, keep(vd));
            keep(mc), keep(vc);
            const double *mp = weft_tensor_data_ptr(mc), *vp = weft_tensor_data_ptr(vc);
            double *want = malloc(sizeof *want * 1003);
            for (int64_t i = 0; want && i < 1003; i++) {
                want[i] = 0;
                for (int64_t k = 0; k < 611; k++)
                    want[i] += mp[i * 611 + k] * vp[k];
            }
            char what[96];
            snprintf(what, sizeof what, "mv %s 1003 x 611%s, strided vec, 3 threads",
                     weft_dtype_name(dt), transposed ? " (transposed)" : "");
            if (ok(want && weft_mv(&rr, mm, vv) == 0, "%s runs", what))
                check_close(keep(rr), want, 1003, d ? 2e-4 : 1e-12, what);
            free(want);
        }
    }
    weft_set_num_threads(2);

    /* outer promotes as mul does */
    weft_tensor *a = rnd(WEFT_INT32, SHAPE(3), -4, 4, true), *b = rnd(WEFT_FLOAT64, SHAPE(2), -1, 1, false);
    double oref[6];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            oref[i * 2 + j] = at3(a, 0, 0, i) * at3(b, 0, 0, j);
    r = NULL;
    if (ok(weft_outer(&r, a, b) == 0 && weft_tensor_dtype(keep(r)) == WEFT_FLOAT64 &&
               weft_tensor_size(r, 0) == 3 && weft_tensor_size(r, 1) == 2,
           "outer of int32 [3] and float64 [2] is float64 [3, 2]"))
        check_close(r, oref, 6, 1e-12, "outer");
    weft_tensor *o = NULL;
    weft_empty(&o, SHAPE(3, 2), WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(o);
    if (ok(weft_outer_out(o, a, b) == 0, "outer_out"))
        check_close(o, oref, 6, 1e-12, "outer_out");
    error_is(weft_outer(&res, m, b), WEFT_ESHAPE, "[3, 2]", "outer of a matrix");
    drop_all();
}

/* ------------------------------------------------------ baddbmm, addbmm */

static void test_baddbmm(void)
{
    const weft_dtype dtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_INT32,
                                 WEFT_INT64};
    for (int summed = 0; summed < 2; summed++)
        for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
            weft_dtype dt = dtypes[d];
            bool integral = dt <= WEFT_INT64;
            double beta = integral ? 2 : 0.5, alpha = integral ? -3 : 1.5;
            /* batch1 transposed from [B, k, n], self broadcast from [n, 1] */
            weft_tensor *a0 = rnd(dt, SHAPE(3, 5, 4), -2, 2, integral), *a = NULL;
            weft_transpose(&a, a0, 1, 2);
            keep(a);
            weft_tensor *b = rnd(dt, SHAPE(3, 5, 2), -2, 2, integral);
            weft_tensor *self = rnd(dt, SHAPE(4, 1), -2, 2, integral), *r = NULL;
            double ref[24];
            ref_baddbmm(self, a, b, beta, alpha, summed, ref);
            int64_t count = summed ? 8 : 24;
            int rc = summed ? weft_addbmm_ex(&r, self, a, b, beta, alpha)
                            : weft_baddbmm_ex(&r, self, a, b, beta, alpha);
            keep(r);
            char what[96];
            snprintf(what, sizeof what, "%s %s", summed ? "addbmm" : "baddbmm", weft_dtype_name(dt));
            if (ok(rc == 0 && weft_tensor_dtype(r) == dt &&
                       weft_tensor_ndim(r) == (summed ? 2 : 3), "%s runs", what))
                check_close(r, ref, count, tol_of(dt) * 30, what);
            else
                diag("%s", weft_last_error());
        }
    /* beta = 0 ignores self, NaN included; in-place and out= forms */
    for (int summed = 0; summed < 2; summed++) {
        weft_tensor *a = rnd(WEFT_FLOAT32, SHAPE(2, 3, 4), -1, 1, false);
        weft_tensor *b = rnd(WEFT_FLOAT32, SHAPE(2, 4, 3), -1, 1, false), *nan = NULL, *r = NULL;
        const int64_t full[3] = {2, 3, 3};
        weft_full(&nan, full + summed, 3 - summed, NAN, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        keep(nan);
        double ref[18];
        ref_baddbmm(nan, a, b, 0, 2, summed, ref);
        int rc = summed ? weft_addbmm_ex(&r, nan, a, b, 0, 2) : weft_baddbmm_ex(&r, nan, a, b, 0, 2);
        if (ok(rc == 0, "%s with beta 0 and a NaN self", summed ? "addbmm" : "baddbmm"))
            check_close(keep(r), ref, summed ? 9 : 18, 1e-5, "beta 0: no NaN");
        weft_tensor *self = rnd(WEFT_FLOAT32, full + summed, 3 - summed, -1, 1, false);
        ref_baddbmm(self, a, b, 1, 1, summed, ref);
        rc = summed ? weft_addbmm_(self, a, b) : weft_baddbmm_(self, a, b);
        if (ok(rc == 0, "%s_ in place", summed ? "addbmm" : "baddbmm"))
            check_close(self, ref, summed ? 9 : 18, 1e-5, "in-place result");
        weft_tensor *out = NULL, *s2 = rnd(WEFT_FLOAT32, SHAPE(3), -1, 1, false);
        weft_empty(&out, SHAPE(0), WEFT_FLOAT32, WEFT_DEVICE_CPU);
        keep(out);
        ref_baddbmm(s2, a, b, 0.25, -1, summed, ref);
        rc = summed ? weft_addbmm_out_ex(out, s2, a, b, 0.25, -1)
                    : weft_baddbmm_out_ex(out, s2, a, b, 0.25, -1);
        if (ok(rc == 0, "%s_out into an empty out", summed ? "addbmm" : "baddbmm"))
            check_close(out, ref, summed ? 9 : 18, 1e-5, "out= result");
    }
    /* k = 0 and zero batches: the products are empty sums */
    weft_tensor *a = rnd(WEFT_FLOAT64, SHAPE(2, 3, 0), 0, 1, false), *b = rnd(WEFT_FLOAT64, SHAPE(2, 0, 2), 0, 1, false);
    weft_tensor *self = rnd(WEFT_FLOAT64, SHAPE(3, 2), -1, 1, false), *r = NULL;
    double ref[12];
    ref_baddbmm(self, a, b, 3, 1, false, ref);
    if (ok(weft_baddbmm_ex(&r, self, a, b, 3, 1) == 0, "baddbmm with k = 0"))
        check_close(keep(r), ref, 12, 1e-12, "baddbmm with k = 0 is beta * self");
    weft_tensor *a0 = rnd(WEFT_FLOAT64, SHAPE(0, 3, 4), 0, 1, false), *b0 = rnd(WEFT_FLOAT64, SHAPE(0, 4, 2), 0, 1, false);
    r = NULL;
    ref_baddbmm(self, a0, b0, 3, 1, true, ref);
    if (ok(weft_addbmm_ex(&r, self, a0, b0, 3, 1) == 0, "addbmm of zero batches"))
        check_close(keep(r), ref, 6, 1e-12, "addbmm of zero batches is beta * self");
    /* bad input */
    weft_tensor *x = rnd(WEFT_FLOAT64, SHAPE(2, 3, 4), 0, 1, false), *y = rnd(WEFT_FLOAT64, SHAPE(2, 5, 2), 0, 1, false);
    weft_tensor *y3 = rnd(WEFT_FLOAT64, SHAPE(3, 4, 2), 0, 1, false), *res = NULL;
    weft_tensor *s = rnd(WEFT_FLOAT64, SHAPE(3, 2), 0, 1, false), *bad = rnd(WEFT_FLOAT64, SHAPE(4), 0, 1, false);
    error_is(weft_baddbmm(&res, s, x, y), WEFT_ESHAPE, "[2, 3, 4] and [2, 5, 2]", "baddbmm, k mismatch");
    error_is(weft_addbmm(&res, s, x, y3), WEFT_ESHAPE, "2 and 3", "addbmm, batch mismatch");
    weft_tensor *y4 = rnd(WEFT_FLOAT64, SHAPE(2, 4, 2), 0, 1, false);
    error_is(weft_baddbmm(&res, bad, x, y4), WEFT_ESHAPE, "[4]", "baddbmm, self not broadcastable");
    error_is(weft_addbmm(&res, s, s, y4), WEFT_ESHAPE, "3-D", "addbmm of a matrix");
    weft_tensor *sf = rnd(WEFT_FLOAT32, SHAPE(3, 2), 0, 1, false);
    error_is(weft_baddbmm(&res, sf, x, y4), WEFT_EDTYPE, "float32", "baddbmm with a float32 self");
    weft_tensor *xi = rnd(WEFT_INT64, SHAPE(2, 3, 4), 0, 3, true), *yi = rnd(WEFT_INT64, SHAPE(2, 4, 2), 0, 3, true);
    weft_tensor *si = rnd(WEFT_INT64, SHAPE(3, 2), 0, 3, true);
    error_is(weft_baddbmm_ex(&res, si, xi, yi, 1, 0.5), WEFT_EINVAL, "alpha=0.5", "int64 baddbmm with alpha 0.5");
    weft_tensor *small = rnd(WEFT_FLOAT64, SHAPE(2, 3, 1), 0, 1, false);
    error_is(weft_baddbmm_(small, x, y4), WEFT_ESHAPE, "[2, 3, 1]", "baddbmm_ into a self that would broadcast");
    ok(res == NULL, "no result is left behind by the failures");
    drop_all();
}

/* ------------------------------------------------------------ einsum */

/* The reference: every assignment of values to the labels, in float64.
 * eq uses letters only and has an explicit output. */
static int64_t naive_einsum(const char *eq, weft_tensor *const *ts, int n, double *out)
{
    const char *arrow = strstr(eq, "->");
    const char *terms[8];
    size_t lens[8];
    const char *p = eq;
    for (int i = 0; i < n; i++) {
        const char *stop = strchr(p, ',');
        if (!stop || stop > arrow)
            stop = arrow;
        terms[i] = p;
        lens[i] = (size_t)(stop - p);
        p = stop + 1;
    }
    const char *outs = arrow + 2;
    int64_t size[128] = {0};
    char labels[64];
    int nl = 0;
    const double *vals[8];
    for (int i = 0; i < n; i++) {
        vals[i] = values_of(ts[i]);
        for (size_t k = 0; k < lens[i]; k++) {
            char c = terms[i][k];
            if (!size[(int)c])
                labels[nl++] = c;
            size[(int)c] = weft_tensor_size(ts[i], (int)k);
        }
    }
    int64_t total_out = 1;
    for (const char *c = outs; *c; c++)
        total_out *= size[(int)*c];
    for (int64_t i = 0; i < total_out; i++)
        out[i] = 0;
    int64_t value[128] = {0}, combos = 1;
    for (int l = 0; l < nl; l++)
        combos *= size[(int)labels[l]];
    for (int64_t c = 0; c < combos; c++) {
        int64_t rest = c;
        for (int l = nl - 1; l >= 0; l--) {
            value[(int)labels[l]] = rest % size[(int)labels[l]];
            rest /= size[(int)labels[l]];
        }
        double prod = 1;
        for (int i = 0; i < n; i++) {
            int64_t off = 0;
            for (size_t k = 0; k < lens[i]; k++)
                off = off * size[(int)terms[i][k]] + value[(int)terms[i][k]];
            prod *= vals[i][off];
        }
        int64_t off = 0;
        for (const char *o = outs; *o; o++)
            off = off * size[(int)*o] + value[(int)*o];
        out[off] += prod;
    }
    return total_out;
}

static void test_einsum(void)
{
    struct {
        const char *eq, *ref; /* ref: the same contraction, explicit */
        int n;
        int64_t shapes[3][4];
        int nd[3];
        bool transpose_first;
    } cases[] = {
        {"ij,jk->ik", "ij,jk->ik", 2, {{3, 4}, {4, 5}}, {2, 2}, false},
        {"ij,jk->ik", "ij,jk->ik", 2, {{3, 4}, {4, 5}}, {2, 2}, true},
        {"bij,bjk->bik", "bij,bjk->bik", 2, {{2, 3, 4}, {2, 4, 2}}, {3, 3}, false},
        {"i,i->", "i,i->", 2, {{5}, {5}}, {1, 1}, false},
        {"i,j->ij", "i,j->ij", 2, {{3}, {4}}, {1, 1}, false},
        {"ij->ji", "ij->ji", 1, {{3, 4}}, {2}, false},
        {"ii->i", "ii->i", 1, {{4, 4}}, {2}, false},
        {"ii->i", "ii->i", 1, {{3, 3}}, {2}, true},
        {"ij->", "ij->", 1, {{3, 4}}, {2}, false},
        {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", 2, {{2, 2, 3, 4}, {2, 2, 5, 4}}, {4, 4}, false},
        {"ij,jk", "ij,jk->ik", 2, {{2, 3}, {3, 4}}, {2, 2}, false},
        {"ji", "ji->ij", 1, {{3, 2}}, {2}, false},
        {"ii", "ii->", 1, {{4, 4}}, {2}, false},
        {"...ij,...jk->...ik", "zij,zjk->zik", 2, {{3, 2, 4}, {3, 4, 2}}, {3, 3}, false},
        {"ij,ij->ij", "ij,ij->ij", 2, {{3, 4}, {3, 4}}, {2, 2}, false},
        {"ijk,jil->kl", "ijk,jil->kl", 2, {{2, 3, 4}, {3, 2, 5}}, {3, 3}, false},
        {"ij,jk,kl->il", "ij,jk,kl->il", 3, {{2, 3}, {3, 4}, {4, 2}}, {2, 2, 2}, false},
        {"i j , j k -> i k", "ij,jk->ik", 2, {{2, 3}, {3, 2}}, {2, 2}, false},
        {"bij,bkj->", "bij,bkj->", 2, {{2, 3, 2}, {2, 4, 2}}, {3, 3}, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        weft_tensor *ts[3];
        for (int i = 0; i < cases[c].n; i++) {
            ts[i] = rnd(WEFT_FLOAT64, cases[c].shapes[i], cases[c].nd[i], -1, 1, false);
            if (i == 0 && cases[c].transpose_first) { /* same shape, transposed strides */
                weft_tensor *t = NULL, *tt = NULL;
                int nd = cases[c].nd[0];
                int64_t sz[4];
                memcpy(sz, cases[c].shapes[0], sizeof sz);
                int64_t tmp = sz[nd - 1];
                sz[nd - 1] = sz[nd - 2];
                sz[nd - 2] = tmp;
                t = rnd(WEFT_FLOAT64, sz, nd, -1, 1, false);
                weft_transpose(&tt, t, nd - 2, nd - 1);
                ts[0] = keep(tt);
            }
        }
        double ref[256];
        int64_t count = naive_einsum(cases[c].ref, ts, cases[c].n, ref);
        weft_tensor *r = NULL;
        int rc = weft_einsum(&r, cases[c].eq, ts, cases[c].n);
        keep(r);
        char what[96];
        snprintf(what, sizeof what, "einsum '%s'%s", cases[c].eq,
                 cases[c].transpose_first ? " (transposed operand)" : "");
        if (ok(rc == 0, "%s runs", what))
            check_close(r, ref, count, 1e-12, what);
        else
            diag("%s", weft_last_error());
    }
    /* ellipsis with broadcasting agrees with matmul, in float32 */
    weft_tensor *a = rnd(WEFT_FLOAT32, SHAPE(2, 1, 3, 4), -1, 1, false);
    weft_tensor *b = rnd(WEFT_FLOAT32, SHAPE(5, 4, 2), -1, 1, false), *r = NULL, *m = NULL;
    weft_tensor *ab[2] = {a, b};
    if (ok(weft_einsum(&r, "...ij,...jk->...ik", ab, 2) == 0 && weft_matmul(&m, a, b) == 0,
           "broadcast '...ij,...jk->...ik'")) {
        keep(r);
        keep(m);
        ok(weft_tensor_ndim(r) == 4 && weft_tensor_size(r, 0) == 2 && weft_tensor_size(r, 1) == 5,
           "the ellipsis dims broadcast to [2, 5]");
        check_close(r, values_of(m), 60, 1e-5, "agrees with matmul");
    }
    /* integers go through the own kernels */
    weft_tensor *ia = rnd(WEFT_INT64, SHAPE(3, 4), -5, 5, true), *ib = rnd(WEFT_INT64, SHAPE(4, 2), -5, 5, true);
    weft_tensor *iab[2] = {ia, ib};
    double iref[6];
    naive_einsum("ij,jk->ik", iab, 2, iref);
    r = NULL;
    if (ok(weft_einsum(&r, "ij,jk->ik", iab, 2) == 0 && weft_tensor_dtype(keep(r)) == WEFT_INT64,
           "int64 einsum stays int64"))
        check_close(r, iref, 6, 0, "int64 einsum");
    /* bad equations */
    weft_tensor *x = rnd(WEFT_FLOAT64, SHAPE(3, 4), -1, 1, false), *y = rnd(WEFT_FLOAT64, SHAPE(3, 4), -1, 1, false);
    weft_tensor *x3 = rnd(WEFT_FLOAT64, SHAPE(2, 3, 4), -1, 1, false), *xf = rnd(WEFT_FLOAT32, SHAPE(4, 3), -1, 1, false);
    weft_tensor *xy[2] = {x, y}, *xxf[2] = {x, xf}, *res = NULL;
    error_is(weft_einsum(&res, "ij,jk->ik", &x, 1), WEFT_EINVAL, "names 2 operands but 1 tensor",
             "einsum with too few tensors");
    error_is(weft_einsum(&res, "ij,jk->ik", xy, 2), WEFT_EINVAL, "'j' has size 4 in operand 0 but 3",
             "einsum with mismatched 'j'");
    error_is(weft_einsum(&res, "ij->iz", &x, 1), WEFT_EINVAL, "'z' does not appear",
             "einsum with an output label absent from the inputs");
    error_is(weft_einsum(&res, "ij->ii", &x, 1), WEFT_EINVAL, "'i' appears more than once",
             "einsum with a repeated output label");
    error_is(weft_einsum(&res, "ij->ij", &x3, 1), WEFT_EINVAL, "[2, 3, 4]",
             "einsum with too few subscripts for a 3-D operand");
    error_is(weft_einsum(&res, "i1->i", &x, 1), WEFT_EINVAL, "'1'", "einsum with a digit");
    error_is(weft_einsum(&res, "i.j->ij", &x, 1), WEFT_EINVAL, "'...'", "einsum with a lone '.'");
    error_is(weft_einsum(&res, "...i...->i", &x, 1), WEFT_EINVAL, "more than one '...'",
             "einsum with two ellipses");
    error_is(weft_einsum(&res, "ij->i->j", &x, 1), WEFT_EINVAL, "more than one '->'",
             "einsum with two arrows");
    error_is(weft_einsum(&res, "ij,jk->ik", xxf, 2), WEFT_EDTYPE, "float32",
             "einsum of float64 and float32");
    weft_tensor *sq = rnd(WEFT_FLOAT64, SHAPE(3, 4), -1, 1, false);
    error_is(weft_einsum(&res, "ii->i", &sq, 1), WEFT_EINVAL, "sizes 3 and 4",
             "a diagonal of a non-square operand");
    ok(res == NULL, "no result after the failures");
    like(weft_last_error(), "'ii->i'", "the message quotes the equation");
    drop_all();
}

/* ------------------------------------------------------------ gradients */

enum grad_op { G_DOT, G_VDOT, G_MV, G_OUTER, G_BADDBMM, G_ADDBMM, G_BADDBMM_BETA0, G_BADDBMM_INPLACE,
               G_ADDBMM_INPLACE, G_EINSUM_BMM,
               G_EINSUM_DIAG, G_EINSUM_BROADCAST, G_COUNT };
static const char *const grad_names[G_COUNT] = {"dot", "vdot", "mv", "outer", "baddbmm",
                                                "addbmm", "baddbmm (beta 0)",
                                                "baddbmm_ (in place on a copy)",
                                                "addbmm_ (in place on a copy)",
                                                "einsum 'bij,bkj->bik'", "einsum 'ii->i'",
                                                "einsum '...ij,...jk->...ik' (broadcast)"};

static int apply_grad_op(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    switch ((enum grad_op)(intptr_t)ctx) {
    case G_DOT:
        return weft_dot(out, in[0], in[1]);
    case G_VDOT:
        return weft_vdot(out, in[0], in[1]);
    case G_MV:
        return weft_mv(out, in[0], in[1]);
    case G_OUTER:
        return weft_outer(out, in[0], in[1]);
    case G_BADDBMM:
        return weft_baddbmm_ex(out, in[0], in[1], in[2], 0.5, -2);
    case G_ADDBMM:
        return weft_addbmm_ex(out, in[0], in[1], in[2], 1.5, 0.75);
    case G_BADDBMM_BETA0:
        return weft_baddbmm_ex(out, in[0], in[1], in[2], 0, 1);
    case G_BADDBMM_INPLACE:
    case G_ADDBMM_INPLACE: { /* self is a non-leaf copy, so it may be written */
        weft_tensor *self = NULL;
        int rc = weft_clone(&self, in[0]);
        if (rc == 0)
            rc = (intptr_t)ctx == G_BADDBMM_INPLACE ? weft_baddbmm_ex_(self, in[1], in[2], 0.5, 2)
                                                    : weft_addbmm_ex_(self, in[1], in[2], -1, 0.5);
        if (rc < 0) {
            weft_tensor_release(self);
            return rc;
        }
        *out = self;
        return 0;
    }
    case G_EINSUM_BMM:
        return weft_einsum(out, "bij,bkj->bik", in, 2);
    case G_EINSUM_DIAG:
        return weft_einsum(out, "ii->i", in, 1);
    case G_EINSUM_BROADCAST:
        return weft_einsum(out, "...ij,...jk->...ik", in, 2);
    default:
        return WEFT_EINVAL;
    }
}

static weft_tensor *grad_input(const int64_t *sizes, int nd)
{
    weft_tensor *t = rnd(WEFT_FLOAT64, sizes, nd, -1, 1, false);
    weft_tensor_set_requires_grad(t, true);
    return t;
}

static void test_gradients(void)
{
    for (int op = 0; op < G_COUNT; op++) {
        weft_tensor *in[3] = {NULL, NULL, NULL};
        int n = 2;
        switch ((enum grad_op)op) {
        case G_DOT:
        case G_VDOT:
            in[0] = grad_input(SHAPE(4));
            in[1] = grad_input(SHAPE(4));
            break;
        case G_MV:
            in[0] = grad_input(SHAPE(3, 4));
            in[1] = grad_input(SHAPE(4));
            break;
        case G_OUTER:
            in[0] = grad_input(SHAPE(3));
            in[1] = grad_input(SHAPE(2));
            break;
        case G_BADDBMM:
        case G_BADDBMM_BETA0:
            in[0] = grad_input(SHAPE(3, 1)); /* broadcast over batches and columns */
            in[1] = grad_input(SHAPE(2, 3, 2));
            in[2] = grad_input(SHAPE(2, 2, 2));
            n = 3;
            break;
        case G_EINSUM_BMM:
            in[0] = grad_input(SHAPE(2, 3, 2));
            in[1] = grad_input(SHAPE(2, 2, 2));
            break;
        case G_EINSUM_DIAG:
            in[0] = grad_input(SHAPE(3, 3));
            n = 1;
            break;
        case G_EINSUM_BROADCAST:
            in[0] = grad_input(SHAPE(2, 1, 2, 3));
            in[1] = grad_input(SHAPE(2, 3, 2));
            break;
        case G_BADDBMM_INPLACE:
            in[0] = grad_input(SHAPE(2, 3, 2));
            in[1] = grad_input(SHAPE(2, 3, 2));
            in[2] = grad_input(SHAPE(2, 2, 2));
            n = 3;
            break;
        case G_ADDBMM:
        case G_ADDBMM_INPLACE:
            in[0] = grad_input(SHAPE(3, 2));
            in[1] = grad_input(SHAPE(2, 3, 2));
            in[2] = grad_input(SHAPE(2, 2, 2));
            n = 3;
            break;
        default:
            break;
        }
        int rc = weft_gradcheck(apply_grad_op, (void *)(intptr_t)op, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", grad_names[op]))
            diag("%s", weft_last_error());
        rc = weft_gradgradcheck(apply_grad_op, (void *)(intptr_t)op, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradgradcheck: %s", grad_names[op]))
            diag("%s", weft_last_error());
        drop_all();
    }
    /* out= with an input that requires grad is refused, as in PyTorch */
    weft_tensor *u = grad_input(SHAPE(3)), *v = grad_input(SHAPE(3)), *out = NULL;
    weft_empty(&out, NULL, 0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(out);
    error_is(weft_dot_out(out, u, v), WEFT_EINVAL, "out=", "dot_out with inputs that require grad");
    drop_all();
}

int main(void)
{
    int loaded = weft_load_default_plugins();
    if (!ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return done_testing();
    test_dot();
    test_mv_outer();
    test_baddbmm();
    test_einsum();
    test_gradients();
    return done_testing();
}
