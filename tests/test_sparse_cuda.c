/* tests/test_sparse_cuda.c — COO and CSR tensors on CUDA
 * (libweft-sparse_cuda.so, issue 16).  Everywhere: the plugin loads after
 * the sparse plugin, its kernels sit on the sparse layouts' cuda slots, and
 * moving a sparse tensor to a device that is absent is a clear error.  With
 * a GPU: construction (and its checks, from one host copy of the indices),
 * .to() both ways, to_dense, coalesce, COO<->CSR, mm/mv/matmul/addmm
 * through cuSPARSE, each against the CPU sparse plugin on random patterns
 * (nnz 0, duplicates, int32 and int64 CSR indices, float32 and float64),
 * and an operator without a CUDA kernel refused by name.  Without a GPU
 * that part says SKIP and why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "sparse_helpers.h"

static const weft_device CUDA0 = {.type = WEFT_DEVICE_TYPE_CUDA, .index = 0};

static weft_tensor *to(weft_tensor *t, weft_device d)
{
    weft_tensor *r = NULL;
    if (!t || weft_to_device(&r, t, d) < 0) {
        diag("to_device: %s", t ? weft_last_error() : "NULL input");
        return NULL;
    }
    return r;
}

/* max |a - b| of two strided tensors, a possibly on the GPU; INFINITY when
 * either is missing or shapes differ */
static double max_diff(weft_tensor *a, weft_tensor *b)
{
    if (!a || !b || weft_tensor_numel(a) != weft_tensor_numel(b))
        return INFINITY;
    weft_tensor *ha = to(a, WEFT_DEVICE_CPU), *fa = NULL, *fb = NULL;
    double m = INFINITY;
    if (ha && weft_to_dtype(&fa, ha, WEFT_FLOAT64) == 0 && weft_to_dtype(&fb, b, WEFT_FLOAT64) == 0) {
        m = 0;
        const double *x = weft_tensor_data_ptr(fa), *y = weft_tensor_data_ptr(fb);
        for (int64_t i = 0; i < weft_tensor_numel(a); i++)
            m = fmax(m, fabs(x[i] - y[i]));
    }
    weft_tensor_release(ha);
    weft_tensor_release(fa);
    weft_tensor_release(fb);
    return m;
}

static weft_tensor *ints(const int64_t *v, int64_t r, int64_t c, weft_dtype dt)
{
    weft_tensor *b = NULL, *t = NULL;
    /* always [r, c]: an nnz-0 pattern's indices are [2, 0], not 1-D (the
     * 1-D form made both devices refuse the empty case, seen on an H200) */
    weft_from_blob(&b, (void *)v, (int64_t[]){r, c}, NULL, 2, WEFT_INT64, WEFT_DEVICE_CPU, NULL,
                   NULL);
    if (b)
        weft_to_dtype(&t, b, dt);
    weft_tensor_release(b);
    return t;
}

static weft_tensor *randn(const int64_t *sizes, int nd, weft_dtype dt, weft_generator *g)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, dt, WEFT_DEVICE_CPU) == 0)
        weft_uniform_ex_(t, -2, 2, g);
    return t;
}

static weft_tensor *coo(weft_tensor *ix, weft_tensor *v, const int64_t *sizes, int nd, bool check)
{
    weft_tensor *out = NULL;
    weft_value a[] = {TV(ix), TV(v), LV(sizes, nd), BV(check)};
    if (callop(&out, "sparse_coo_tensor", a, 4) < 0)
        diag("sparse_coo_tensor: %s", weft_last_error());
    return out;
}

static weft_tensor *csr(weft_tensor *cr, weft_tensor *cl, weft_tensor *v, const int64_t *sizes)
{
    weft_tensor *out = NULL;
    weft_value a[] = {TV(cr), TV(cl), TV(v), LV(sizes, 2), BV(true)};
    if (callop(&out, "sparse_csr_tensor", a, 5) < 0)
        diag("sparse_csr_tensor: %s", weft_last_error());
    return out;
}

static weft_tensor *call2(const char *name, weft_tensor *a, weft_tensor *b)
{
    weft_tensor *out = NULL;
    weft_value v[] = {TV(a), TV(b)};
    if (callop(&out, name, v, 2) < 0)
        diag("%s: %s", name, weft_last_error());
    return out;
}

/* One random M x K pattern with nnz entries (duplicates likely when nnz is
 * near M*K), the same on both devices: every operation compared. */
static void compare_pattern(int64_t m, int64_t k, int64_t nnz, weft_dtype dt, weft_generator *g)
{
    const char *dn = weft_dtype_name(dt);
    double tol = dt == WEFT_FLOAT32 ? 1e-4 : 1e-10;
    int64_t *iv = malloc((size_t)(2 * nnz + 1) * sizeof *iv);
    for (int64_t e = 0; e < nnz; e++) {
        iv[e] = rand() % m;
        iv[nnz + e] = rand() % k;
    }
    weft_tensor *ix = ints(iv, 2, nnz, WEFT_INT64);
    free(iv);
    weft_tensor *val = randn((int64_t[]){nnz}, 1, dt, g);
    int64_t sizes[] = {m, k};
    weft_tensor *gix = to(ix, CUDA0), *gval = to(val, CUDA0);
    weft_tensor *c = coo(ix, val, sizes, 2, true), *gc = coo(gix, gval, sizes, 2, true);
    ok(gc && weft_tensor_device(gc).type == WEFT_DEVICE_TYPE_CUDA &&
           weft_tensor_layout(gc) == weft_tensor_layout(c),
       "%s %lldx%lld nnz %lld: COO from CUDA components is a sparse_coo tensor on cuda", dn,
       (long long)m, (long long)k, (long long)nnz);
    weft_tensor *d = call1("to_dense", c), *gd = gc ? call1("to_dense", gc) : NULL;
    ok(max_diff(gd, d) <= tol, "  to_dense (duplicates summed) matches the CPU's: %g",
       max_diff(gd, d));
    weft_tensor *gco = gc ? call1("coalesce", gc) : NULL, *gcod = gco ? call1("to_dense", gco) : NULL;
    weft_tensor *cc = call1("coalesce", c);
    ok(gco && cc && weft_tensor_size(call1("indices", gco), 1) ==
                        weft_tensor_size(call1("indices", cc), 1),
       "  coalesce keeps as many entries as the CPU's");
    ok(max_diff(gcod, d) <= tol, "  coalesce then to_dense matches: %g", max_diff(gcod, d));
    weft_tensor *gi = gco ? call1("indices", gco) : NULL, *ci = cc ? call1("indices", cc) : NULL;
    ok(max_diff(gi, ci) == 0, "  coalesced indices equal the CPU's");
    weft_tensor *back = gc ? to(gc, WEFT_DEVICE_CPU) : NULL, *backd = back ? call1("to_dense", back) : NULL;
    ok(back && weft_tensor_device(back).type == WEFT_DEVICE_TYPE_CPU && max_diff(backd, d) == 0,
       "  .to(cpu) of the CUDA tensor gives the same sparse tensor");
    weft_tensor *gcsr = gc ? call1("to_sparse_csr", gc) : NULL, *ccsr = call1("to_sparse_csr", c);
    weft_tensor *gcr = gcsr ? call1("crow_indices", gcsr) : NULL,
                *ccr = ccsr ? call1("crow_indices", ccsr) : NULL;
    ok(max_diff(gcr, ccr) == 0, "  to_sparse_csr: crow_indices equal the CPU's");
    weft_tensor *gcsrd = gcsr ? call1("to_dense", gcsr) : NULL;
    ok(max_diff(gcsrd, d) <= tol, "  CSR to_dense matches: %g", max_diff(gcsrd, d));
    /* to_sparse's sparse_dim (-1: every dim, the default in Python and the
     * schema) is given: a C call passes every argument */
    weft_tensor *gback = NULL;
    if (gcsr && callop(&gback, "to_sparse", (weft_value[]){TV(gcsr), IV(-1)}, 2) < 0)
        diag("to_sparse: %s", weft_last_error());
    weft_tensor *gbackd = gback ? call1("to_dense", gback) : NULL;
    ok(max_diff(gbackd, d) <= tol, "  CSR -> COO on CUDA round-trips");
    /* int32 CSR built directly on the device */
    weft_tensor *cr32 = NULL, *cl32 = NULL, *cv = NULL, *gcsr32 = NULL;
    if (ccsr) {
        weft_to_dtype(&cr32, call1("crow_indices", ccsr), WEFT_INT32);
        weft_to_dtype(&cl32, call1("col_indices", ccsr), WEFT_INT32);
        cv = call1("values", ccsr);
    }
    weft_tensor *g32a = to(cr32, CUDA0), *g32b = to(cl32, CUDA0), *g32v = to(cv, CUDA0);
    gcsr32 = g32a && g32b && g32v ? csr(g32a, g32b, g32v, sizes) : NULL;
    ok(gcsr32 != NULL, "  int32 CSR from CUDA components");
    /* products */
    int64_t n = 5;
    weft_tensor *b = randn((int64_t[]){k, n}, 2, dt, g), *gb = to(b, CUDA0);
    weft_tensor *x = randn((int64_t[]){k}, 1, dt, g), *gx = to(x, CUDA0);
    weft_tensor *ref = call2("mm", c, b), *refv = call2("mv", c, x);
    weft_tensor *sp[] = {gc, gcsr, gcsr32};
    const char *names[] = {"COO", "CSR int64", "CSR int32"};
    for (int i = 0; i < 3; i++) {
        weft_tensor *r = sp[i] ? call2("mm", sp[i], gb) : NULL;
        ok(max_diff(r, ref) <= tol * (double)k, "  mm %s x dense (cusparseSpMM) matches: %g",
           names[i], max_diff(r, ref));
        weft_tensor *rv = sp[i] ? call2("mv", sp[i], gx) : NULL;
        ok(max_diff(rv, refv) <= tol * (double)k, "  mv %s (cusparseSpMV) matches: %g", names[i],
           max_diff(rv, refv));
        weft_tensor *rm = sp[i] ? call2("matmul", sp[i], gb) : NULL;
        ok(max_diff(rm, ref) <= tol * (double)k, "  matmul %s matches", names[i]);
        weft_tensor_release(r);
        weft_tensor_release(rv);
        weft_tensor_release(rm);
    }
    weft_tensor *self = randn((int64_t[]){m, n}, 2, dt, g), *gself = to(self, CUDA0);
    weft_tensor *ra = NULL, *ga = NULL;
    weft_value aa[] = {TV(self), TV(c), TV(b), DV(0.5), DV(2.0)};
    callop(&ra, "addmm", aa, 5);
    weft_value ag[] = {TV(gself), TV(gcsr), TV(gb), DV(0.5), DV(2.0)};
    if (gcsr && callop(&ga, "addmm", ag, 5) < 0)
        diag("addmm: %s", weft_last_error());
    ok(max_diff(ga, ra) <= 4 * tol * (double)k, "  addmm(0.5, self, 2.0, CSR, dense) matches: %g",
       max_diff(ga, ra));
    weft_tensor *all[] = {ix, val, gix, gval, c, gc, d, gd, gco, gcod, cc, back, backd, gcsr,
                          ccsr, gcsrd, gback, gbackd, cr32, cl32, g32a, g32b, g32v,
                          gcsr32, b, gb, x, gx, ref, refv, self, gself, ra, ga};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

static void gpu_checks(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 16);
    srand(16);
    weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64};
    for (int i = 0; i < 2; i++) {
        compare_pattern(7, 6, 0, dts[i], g);   /* empty */
        compare_pattern(7, 6, 30, dts[i], g);  /* many duplicates */
        compare_pattern(64, 48, 200, dts[i], g);
    }
    /* bad input: a column out of range, found from the host copy */
    int64_t bad[] = {0, 1, 0, 9};
    weft_tensor *ix = ints(bad, 2, 2, WEFT_INT64), *gix = to(ix, CUDA0);
    weft_tensor *v = randn((int64_t[]){2}, 1, WEFT_FLOAT32, g), *gv = to(v, CUDA0);
    weft_tensor *out = NULL;
    weft_value a[] = {TV(gix), TV(gv), LV(((int64_t[]){3, 4}), 2), BV(true)};
    int rc = callop(&out, "sparse_coo_tensor", a, 4);
    ok(rc == WEFT_ERANGE, "an index out of range on CUDA is refused (rc %d)", rc);
    like(weft_last_error(), "indices[1][1] is 9", "  naming the entry as the CPU does");
    /* components on two devices */
    weft_value a2[] = {TV(ix), TV(gv), LV(((int64_t[]){3, 10}), 2), BV(true)};
    rc = callop(&out, "sparse_coo_tensor", a2, 4);
    ok(rc < 0, "indices on the CPU and values on CUDA are refused: %s", weft_last_error());
    /* unchecked pattern: the check runs at first use */
    weft_value a3[] = {TV(gix), TV(gv), LV(((int64_t[]){3, 4}), 2), BV(false)};
    rc = callop(&out, "sparse_coo_tensor", a3, 4);
    weft_tensor *dd = NULL;
    int rc2 = rc == 0 ? callop(&dd, "to_dense", (weft_value[]){TV(out)}, 1) : rc;
    ok(rc == 0 && rc2 == WEFT_ERANGE, "check_invariants=False: to_dense refuses the bad index "
                                      "later (rc %d): %s",
       rc2, weft_last_error());
    weft_tensor_release(out);
    out = NULL;
    /* an operator without a CUDA kernel: named with the layout and device */
    weft_value a4[] = {TV(gix), TV(gv), LV(((int64_t[]){3, 10}), 2), BV(true)};
    callop(&out, "sparse_coo_tensor", a4, 4);
    weft_tensor *r = NULL;
    rc = out ? callop(&r, "sparse_transpose", (weft_value[]){TV(out), IV(0), IV(1)}, 3) : -1;
    ok(rc == WEFT_ENOKERNEL, "sparse_transpose on a CUDA COO tensor is refused");
    like(weft_last_error(), "sparse_transpose", "  naming the operator");
    like(weft_last_error(), "sparse_coo", "  and the layout");
    like(weft_last_error(), "on cuda", "  and the device");
    weft_tensor *all[] = {ix, gix, v, gv, out, r, dd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    weft_generator_destroy(g);
}

int main(void)
{
    if (weft_load_default_plugins() < 1)
        skip_all("no plugins");
    int coo_id = weft_layout_lookup("sparse_coo");
    if (coo_id < 0)
        skip_all("libweft-sparse.so is not on the plugin path");
    char *report = NULL;
    weft_plugin_report_string(&report);
    const char *row = report ? strstr(report, "name=sparse_cuda") : NULL;
    const char *eol = row ? strchr(row, '\n') : NULL, *chosen = row ? strstr(row, "chosen=yes") : NULL;
    ok(chosen && (!eol || chosen < eol), "libweft-sparse_cuda.so loaded after the sparse plugin");
    if (!(chosen && (!eol || chosen < eol)))
        diag("%s", report ? report : "(no report)");
    free(report);
    /* and its kernels, when loaded, keep the layouts' plugin loaded */
    ok(weft_unload_plugin("sparse") < 0, "the sparse plugin does not unload under it: %s",
       weft_last_error());

    /* a sparse tensor to a device that is absent: the core's error */
    weft_tensor *ix = ints((int64_t[]){0, 1}, 2, 1, WEFT_INT64), *v = NULL, *t, *moved = NULL;
    weft_ones(&v, (int64_t[]){1}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    t = coo(ix, v, (int64_t[]){2, 2}, 2, true);
    int n = weft_device_count(WEFT_DEVICE_TYPE_CUDA);
    weft_device missing = {.type = WEFT_DEVICE_TYPE_CUDA, .index = (int16_t)n};
    int rc = weft_to_device(&moved, t, missing);
    ok(rc < 0 && !moved, "a sparse tensor to cuda:%d (absent) is refused: %s", n, weft_last_error());
    ok(weft_to_device(&moved, t, WEFT_DEVICE_CPU) == 0 && moved == t,
       "to its own device: the tensor itself");
    weft_tensor_release(moved);
    weft_tensor_release(t);
    weft_tensor_release(ix);
    weft_tensor_release(v);
    if (n <= 0) {
        skip(1, "no CUDA device here (the runtime reports none): the comparisons with the CPU "
                "sparse plugin run only with a GPU");
        return done_testing();
    }
    gpu_checks();
    return done_testing();
}
