/* tests/test_cuda_index.c — the CUDA plugin's writes through indices
 * (scatter, scatter_add, scatter_reduce, index_add), sort/argsort/topk and
 * bernoulli with a tensor p against the CPU backend: every dtype they
 * serve, duplicates, 0-d, empty and transposed operands, ties and NaN,
 * rows long and short; an index out of range is an error naming it and
 * leaves the target untouched; none of these calls reaches the CPU
 * fallback.  Everywhere: the sort keys' order and the key widths (plan.h).
 * Without a GPU the comparisons say SKIP and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/gpu_type.h"
#include "tests/keep.h"
#include "backends/cuda/plan.h"

static const weft_device CUDA0 = {.type = TEST_GPU_TYPE, .index = 0};

/* ------------------------------------------------------ the host plan */

static void plan_checks(void)
{
    /* ascending order of the CPU backend: NaN last, -0 equal to 0 */
    const double v[] = {-INFINITY, -1e300, -1.5, -1e-300, -0.0, 0.0, 1e-300, 2.0, 1e300, INFINITY};
    bool ascending = true, descending = true;
    for (size_t i = 1; i < sizeof v / sizeof *v; i++) {
        bool equal = v[i] == v[i - 1];
        uint64_t a = wfc_sort_key_double(v[i - 1], false), b = wfc_sort_key_double(v[i], false);
        ascending = ascending && (equal ? a == b : a < b);
        a = wfc_sort_key_double(v[i - 1], true), b = wfc_sort_key_double(v[i], true);
        descending = descending && (equal ? a == b : a > b);
    }
    ok(ascending, "sort keys ascend with the values, -0.0 equal to 0.0");
    ok(descending, "descending keys reverse that order");
    double nan1 = NAN, nan2 = -nan1;
    ok(wfc_sort_key_double(nan1, false) == wfc_sort_key_double(nan2, false) &&
           wfc_sort_key_double(nan1, false) > wfc_sort_key_double(INFINITY, false),
       "every NaN has one key, above +inf");
    ok(wfc_sort_key_double(nan1, true) < wfc_sort_key_double(INFINITY, true),
       "descending, NaN comes first (as the CPU's sort puts it)");
    const int64_t iv[] = {INT64_MIN, -5, -1, 0, 1, 7, INT64_MAX};
    bool ints = true;
    for (size_t i = 1; i < sizeof iv / sizeof *iv; i++)
        ints = ints && wfc_sort_key_int64(iv[i - 1], false) < wfc_sort_key_int64(iv[i], false) &&
               wfc_sort_key_int64(iv[i - 1], true) > wfc_sort_key_int64(iv[i], true);
    ok(ints, "integer keys keep the order of int64, from INT64_MIN to INT64_MAX");
    is_int(wfc_plan_key_bits(0), 1, "key bits of 0");
    is_int(wfc_plan_key_bits(1), 1, "key bits of 1");
    is_int(wfc_plan_key_bits(2), 2, "key bits of 2");
    is_int(wfc_plan_key_bits(255), 8, "key bits of 255");
    is_int(wfc_plan_key_bits(256), 9, "key bits of 256");
    is_int(wfc_plan_key_bits(UINT64_MAX), 64, "key bits of the largest key");
}

/* index_put's layout: which dims are indexed, where the index shape
 * stands in the indexed result, and the CPU's refusals. */
static bool same_ints(const int64_t *a, const int64_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static void index_put_plan_checks(void)
{
    char err[256];
    wfc_index_put_plan p;
    wfc_index_shape s;
    /* x[i] = v on [5, 6, 7], i of [3, 4]: the index shape first */
    const int64_t x3[3] = {5, 6, 7}, i34[2] = {3, 4};
    const int64_t *one[1] = {i34};
    int rc = wfc_plan_index_put(&p, 3, (const int[]){2}, NULL, 1, err, sizeof err);
    ok(rc == 0 && p.count == 1 && p.lead == 0 && same_ints(p.order, (const int64_t[]){0, 1, 2}, 3),
       "x[i]: one indexed dim, self's order");
    rc = wfc_plan_index_shape(&s, &p, x3, 3, one, (const int[]){2}, err, sizeof err);
    ok(rc == 0 && s.shape_nd == 2 && s.result_nd == 4 &&
           same_ints(s.result, (const int64_t[]){3, 4, 6, 7}, 4) &&
           same_ints(s.result_order, (const int64_t[]){0, 1, 2, 3}, 4),
       "x[i]: values broadcast to [3, 4, 6, 7], read in that order");
    /* x[:, i, j] with i [4, 1] and j [3]: adjacent, the index shape where
     * dims 1 and 2 were, after the whole dim 0 */
    const int64_t i41[2] = {4, 1}, j3[1] = {3};
    rc = wfc_plan_index_put(&p, 3, (const int[]){-1, 2, 1}, NULL, 3, err, sizeof err);
    ok(rc == 0 && p.count == 2 && p.lead == 1 && p.entry[0] == 1 && p.entry[1] == 2 &&
           same_ints(p.order, (const int64_t[]){1, 2, 0}, 3),
       "x[:, i, j]: dims 1 and 2 indexed, moved first; one whole dim leads");
    const int64_t permuted[3] = {6, 7, 5};
    rc = wfc_plan_index_shape(&s, &p, permuted, 3, (const int64_t *const[]){i41, j3},
                              (const int[]){2, 1}, err, sizeof err);
    ok(rc == 0 && s.shape_nd == 2 && same_ints(s.shape, (const int64_t[]){4, 3}, 2) &&
           s.result_nd == 3 && same_ints(s.result, (const int64_t[]){5, 4, 3}, 3) &&
           same_ints(s.result_order, (const int64_t[]){1, 2, 0}, 3),
       "x[:, i, j]: indices broadcast to [4, 3], values to [5, 4, 3], read index shape first");
    /* x[i, :, j]: a None between the index tensors puts the index shape first */
    rc = wfc_plan_index_put(&p, 3, (const int[]){1, -1, 1}, NULL, 3, err, sizeof err);
    ok(rc == 0 && p.count == 2 && p.lead == 0 && same_ints(p.order, (const int64_t[]){0, 2, 1}, 3),
       "x[i, :, j]: dims 0 and 2 first, the index shape leads the result");
    rc = wfc_plan_index_shape(&s, &p, (const int64_t[]){5, 7, 6}, 3,
                              (const int64_t *const[]){j3, j3}, (const int[]){1, 1}, err, sizeof err);
    ok(rc == 0 && s.result_nd == 2 && same_ints(s.result, (const int64_t[]){3, 6}, 2),
       "x[i, :, j]: values broadcast to [3, 6]");
    /* a 0-d index: no index dims in the result */
    rc = wfc_plan_index_put(&p, 2, (const int[]){0}, NULL, 1, err, sizeof err);
    if (rc == 0)
        rc = wfc_plan_index_shape(&s, &p, (const int64_t[]){5, 6}, 2, (const int64_t *const[]){NULL},
                                  (const int[]){0}, err, sizeof err);
    ok(rc == 0 && s.shape_nd == 0 && s.result_nd == 1 && s.result[0] == 6,
       "x[k] with a 0-d k: values broadcast to [6]");
    /* masks: one column per dim they cover */
    rc = wfc_plan_index_put(&p, 3, (const int[]){2}, (const bool[]){true}, 1, err, sizeof err);
    ok(rc == 0 && p.count == 2 && p.entry[0] == 0 && p.entry[1] == 0 && p.mask_dim[0] == 0 &&
           p.mask_dim[1] == 1 && p.lead == 0 && same_ints(p.order, (const int64_t[]){0, 1, 2}, 3),
       "x[mask] with a 2-d mask: two columns of one entry");
    rc = wfc_plan_index_put(&p, 3, (const int[]){-1, 2}, (const bool[]){false, true}, 2, err,
                            sizeof err);
    ok(rc == 0 && p.count == 2 && p.lead == 1 && p.mask_dim[1] == 1 &&
           same_ints(p.order, (const int64_t[]){1, 2, 0}, 3),
       "x[:, mask]: dims 1 and 2 first, one whole dim leads");
    rc = wfc_plan_index_put(&p, 3, (const int[]){1, 2}, (const bool[]){false, true}, 2, err,
                            sizeof err);
    ok(rc == 0 && p.count == 3 && p.mask_dim[0] == -1 && p.entry[2] == 1,
       "x[i, mask]: an index column, then the mask's two");
    rc = wfc_plan_index_put(&p, 2, (const int[]){3}, (const bool[]){true}, 1, err, sizeof err);
    ok(rc == -2 && strcmp(err, "too many indices for a tensor of dimension 2") == 0,
       "a 3-d mask on a 2-d self: %s", err);
    /* the CPU's refusals, word for word */
    rc = wfc_plan_index_put(&p, 3, NULL, NULL, 0, err, sizeof err);
    ok(rc == -1 && strcmp(err, "indices is empty") == 0, "no entry: %s", err);
    rc = wfc_plan_index_put(&p, 2, (const int[]){-1, -1}, NULL, 2, err, sizeof err);
    ok(rc == -1 && strstr(err, "only None"), "only None: %s", err);
    rc = wfc_plan_index_put(&p, 2, (const int[]){1, 1, 1}, NULL, 3, err, sizeof err);
    ok(rc == -2 && strcmp(err, "too many indices for a tensor of dimension 2") == 0,
       "three entries for two dims: %s", err);
    rc = wfc_plan_index_put(&p, 0, (const int[]){0}, NULL, 1, err, sizeof err);
    ok(rc == -2, "any entry for a 0-d self: %s", err);
    const int64_t i3[1] = {3}, i4[1] = {4};
    rc = wfc_plan_index_put(&p, 2, (const int[]){1, 1}, NULL, 2, err, sizeof err);
    if (rc == 0)
        rc = wfc_plan_index_shape(&s, &p, (const int64_t[]){5, 6}, 2,
                                  (const int64_t *const[]){i3, i4}, (const int[]){1, 1}, err,
                                  sizeof err);
    ok(rc == -2 && strcmp(err, "shape mismatch: indexing tensors could not be broadcast together "
                               "(index 1 has shape [4])") == 0,
       "indices of [3] and [4]: %s", err);
}

/* ------------------------------------------------------------ helpers */

static weft_tensor *to(const weft_tensor *t, weft_device d)
{
    weft_tensor *r = NULL;
    return t && weft_to_device(&r, t, d) == 0 ? keep(r) : NULL;
}

/* A CPU tensor of dtype with values in [lo, hi) (integers: whole). */
static weft_tensor *rand_of(const int64_t *sizes, int nd, weft_dtype dt, double lo, double hi,
                            weft_generator *g)
{
    weft_tensor *f = NULL, *r = NULL, *fl = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0 ||
        weft_uniform_ex_(f, lo, hi, g) != 0)
        return NULL;
    keep(f);
    if (weft_dtype_is_floating(dt))
        return weft_to_dtype(&r, f, dt) == 0 ? keep(r) : NULL;
    if (weft_floor(&fl, f) != 0)
        return NULL;
    keep(fl);
    return weft_to_dtype(&r, fl, dt) == 0 ? keep(r) : NULL;
}

/* Element flat of a contiguous CPU tensor of int64 or float64, set. */
static void set_at(weft_tensor *t, int64_t flat, double v)
{
    if (weft_tensor_dtype(t) == WEFT_INT64)
        ((int64_t *)weft_tensor_data_ptr(t))[flat] = (int64_t)v;
    else
        ((double *)weft_tensor_data_ptr(t))[flat] = v;
}

static weft_tensor *indices(const int64_t *sizes, int nd, int64_t below, weft_generator *g)
{
    weft_tensor *t = NULL;
    return weft_randint(&t, 0, below, sizes, nd, WEFT_INT64, WEFT_DEVICE_CPU, g) == 0 ? keep(t)
                                                                                      : NULL;
}

/* Whether the GPU's a equals the CPU's b: same shape; values within a
 * relative tol (0: equal, and zeros of the same sign: which of -0.0 and
 * 0.0 unique or sort keeps is part of the result), NaN where b has NaN. */
static bool matches(const weft_tensor *gpu, const weft_tensor *cpu, double tol)
{
    weft_tensor *h = gpu ? to(gpu, WEFT_DEVICE_CPU) : NULL;
    if (!h || !cpu || weft_tensor_ndim(h) != weft_tensor_ndim(cpu) ||
        weft_tensor_dtype(h) != weft_tensor_dtype(cpu))
        return false;
    for (int d = 0; d < weft_tensor_ndim(h); d++)
        if (weft_tensor_size(h, d) != weft_tensor_size(cpu, d))
            return false;
    const double *x = values_of(h), *y = values_of(cpu);
    for (int64_t i = 0; i < weft_tensor_numel(h); i++) {
        if (isnan(x[i]) || isnan(y[i])) {
            if (isnan(x[i]) != isnan(y[i]))
                return false;
        } else if (!(fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i]))) ||
                   (tol == 0 && signbit(x[i]) != signbit(y[i]))) {
            diag("element %lld: GPU %.17g, CPU %.17g", (long long)i, x[i], y[i]);
            return false;
        }
    }
    return true;
}

static double tol_of(weft_dtype dt)
{
    return dt == WEFT_FLOAT16 ? 1e-3 : dt == WEFT_BFLOAT16 ? 1e-2 : dt == WEFT_FLOAT32 ? 1e-6
           : dt == WEFT_FLOAT64                               ? 1e-14
                                                              : 0;
}

/* ------------------------------------------------------------ scatter */

typedef int (*scatter_fn)(weft_tensor **, const weft_tensor *, int64_t, const weft_tensor *,
                          const weft_tensor *);

static void gpu_scatter(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16,
                                     WEFT_INT64,   WEFT_INT32,   WEFT_UINT8,   WEFT_BOOL};
    static const struct {
        const char *name;
        scatter_fn fn;
    } fns[] = {{"scatter", weft_scatter}, {"scatter_add", weft_scatter_add}};
    /* self, index (few distinct values: many duplicates), src, dim */
    static const struct {
        int nd;
        int64_t self[3], index[3], src[3];
        int dim;
    } cases[] = {{2, {7, 9}, {5, 9}, {6, 10}, 0},     {2, {7, 9}, {7, 4}, {7, 5}, 1},
                 {3, {4, 5, 6}, {4, 3, 6}, {4, 3, 6}, 1}, {2, {7, 9}, {0, 9}, {6, 10}, 0},
                 {1, {300}, {5000}, {5000}, 0},      {3, {3, 4, 5}, {2, 4, 5}, {3, 4, 5}, -1}};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (size_t f = 0; f < 2; f++) {
                weft_dtype dt = dts[di];
                int dim = cases[c].dim < 0 ? cases[c].nd + cases[c].dim : cases[c].dim;
                weft_tensor *self = rand_of(cases[c].self, cases[c].nd, dt, -3, 3, g);
                weft_tensor *src = rand_of(cases[c].src, cases[c].nd, dt, -3, 3, g);
                weft_tensor *idx = indices(cases[c].index, cases[c].nd, cases[c].self[dim], g);
                weft_tensor *want = NULL, *got = NULL;
                int rc_c = fns[f].fn(&want, self, cases[c].dim, idx, src);
                keep(want);
                int rc_g = fns[f].fn(&got, to(self, CUDA0), cases[c].dim, to(idx, CUDA0),
                                     to(src, CUDA0));
                keep(got);
                /* bit for bit: each target's values are combined in the
                 * CPU's order with its rounding (an unstable sort or a
                 * wrong run order shows as a few ulps, which a tolerance
                 * would hide) */
                ok(rc_c == 0 && rc_g == 0 && matches(got, want, 0),
                   "%s %s case %zu matches the CPU bit for bit%s%s", fns[f].name, weft_dtype_name(dt), c,
                   rc_g ? ": " : "", rc_g ? weft_last_error() : "");
                drop_all();
            }
    is_int((long long)(weft_cpu_fallback_calls() - fallbacks), 0,
           "scatter and scatter_add ran on the GPU (no fallback call)");

    /* scatter_reduce: every reduction, with and without self's values */
    static const char *const reductions[] = {"sum", "prod", "mean", "amax", "amin"};
    for (size_t di = 0; di < 7; di++) /* bool is not reduced, on the CPU either */
        for (size_t r = 0; r < 5; r++)
            for (int include = 0; include < 2; include++) {
                weft_dtype dt = dts[di];
                const int64_t ss[2] = {6, 8}, is[2] = {9, 8};
                weft_tensor *self = rand_of(ss, 2, dt, -2, 2, g), *src = NULL;
                weft_tensor *src64 = rand_of(is, 2, WEFT_FLOAT64, -2, 2, g);
                if (r >= 3) /* a NaN that amax and amin must keep */
                    set_at(src64, 4 * 8 + 3, NAN);
                if (!weft_dtype_is_floating(dt)) {
                    weft_tensor *fl = NULL;
                    weft_floor(&fl, src64), keep(fl);
                    src64 = fl;
                }
                weft_to_dtype(&src, src64, dt), keep(src);
                weft_tensor *idx = indices(is, 2, 6, g), *want = NULL, *got = NULL;
                int rc_c = weft_scatter_reduce_ex(&want, self, 0, idx, src, reductions[r], include);
                keep(want);
                int rc_g = weft_scatter_reduce_ex(&got, to(self, CUDA0), 0, to(idx, CUDA0),
                                                  to(src, CUDA0), reductions[r], include);
                keep(got);
                /* bit for bit, as scatter_add above */
                ok(rc_c == 0 && rc_g == 0 && matches(got, want, 0),
                   "scatter_reduce %s %s include_self=%d matches the CPU bit for bit%s%s", reductions[r],
                   weft_dtype_name(dt), include, rc_g ? ": " : "", rc_g ? weft_last_error() : "");
                drop_all();
            }

    /* index_add with alpha, along each dim, and in place on a transposed view */
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (int dim = 0; dim < 2; dim++) {
            weft_dtype dt = dts[di];
            const int64_t ss[2] = {5, 6};
            int64_t sz[2] = {5, 6};
            sz[dim] = 11;
            weft_tensor *self = rand_of(ss, 2, dt, -2, 2, g), *src = rand_of(sz, 2, dt, -2, 2, g);
            weft_tensor *idx = indices((const int64_t[]){11}, 1, ss[dim], g), *want = NULL, *got = NULL;
            double alpha = dt == WEFT_BOOL ? 1 : weft_dtype_is_floating(dt) ? 0.1 : 2;
            int rc_c = weft_index_add_ex(&want, self, dim, idx, src, alpha);
            keep(want);
            int rc_g = weft_index_add_ex(&got, to(self, CUDA0), dim, to(idx, CUDA0), to(src, CUDA0),
                                      alpha);
            keep(got);
            /* not bit for bit: cur + alpha * v may be one fused
             * multiply-add on either side (nvcc fuses by default, GCC in
             * the FMA variants of the CPU plugin) */
            ok(rc_c == 0 && rc_g == 0 && matches(got, want, tol_of(dt)),
               "index_add %s dim %d alpha %g matches the CPU%s%s", weft_dtype_name(dt), dim, alpha,
               rc_g ? ": " : "", rc_g ? weft_last_error() : "");
            drop_all();
        }
    {
        const int64_t ss[2] = {6, 5};
        weft_tensor *base = rand_of(ss, 2, WEFT_FLOAT32, -1, 1, g), *src = rand_of(ss, 2, WEFT_FLOAT32, -1, 1, g);
        weft_tensor *idx = indices(ss, 2, 5, g), *cview = NULL, *gview = NULL;
        weft_tensor *gbase = to(base, CUDA0);
        weft_t(&cview, base), keep(cview);
        weft_t(&gview, gbase), keep(gview);
        weft_tensor *idx_t = indices((const int64_t[]){5, 6}, 2, 5, g), *src_t = NULL;
        weft_t(&src_t, src), keep(src_t);
        int rc_c = weft_scatter_add_(cview, 1, idx_t, src_t);
        int rc_g = weft_scatter_add_(gview, 1, to(idx_t, CUDA0), to(src_t, CUDA0));
        ok(rc_c == 0 && rc_g == 0 && matches(gbase, base, 0),
           "scatter_add_ in place into a transposed view writes through its strides");
        (void)idx;
        drop_all();
    }
    {
        weft_tensor *self = rand_of(NULL, 0, WEFT_FLOAT64, -1, 1, g), *src = rand_of(NULL, 0, WEFT_FLOAT64, -1, 1, g);
        weft_tensor *idx = NULL, *want = NULL, *got = NULL;
        weft_zeros(&idx, NULL, 0, WEFT_INT64, WEFT_DEVICE_CPU), keep(idx);
        weft_scatter_add(&want, self, 0, idx, src), keep(want);
        int rc = weft_scatter_add(&got, to(self, CUDA0), 0, to(idx, CUDA0), to(src, CUDA0));
        keep(got);
        ok(rc == 0 && weft_tensor_ndim(got) == 0 && matches(got, want, 0),
           "scatter_add of 0-d tensors stays 0-d and matches the CPU");
        drop_all();
    }

    /* an index out of range: named, and nothing written */
    const int64_t ss[2] = {4, 5};
    weft_tensor *self = rand_of(ss, 2, WEFT_FLOAT32, -1, 1, g), *src = rand_of(ss, 2, WEFT_FLOAT32, -1, 1, g);
    weft_tensor *idx = NULL;
    weft_zeros(&idx, ss, 2, WEFT_INT64, WEFT_DEVICE_CPU), keep(idx);
    set_at(idx, 2 * 5 + 3, 9);
    set_at(idx, 3 * 5 + 1, -1);
    weft_tensor *gself = to(self, CUDA0);
    int rc = weft_scatter_add_(gself, 0, to(idx, CUDA0), to(src, CUDA0));
    ok(rc == WEFT_ERANGE && strstr(weft_last_error(), "index 9 is out of range for dimension 0 "
                                   "with size 4"),
       "scatter_add_ with index 9 of 4 rows is refused, the first bad index named: %s",
       weft_last_error());
    ok(matches(gself, self, 0), "and self is untouched");
    rc = weft_index_add_(gself, 1, to(idx, CUDA0), to(src, CUDA0));
    ok(rc < 0, "index_add_ with a 2-d index is refused: %s", weft_last_error());
    weft_tensor *row = NULL;
    weft_full(&row, (const int64_t[]){5}, 1, 5, WEFT_INT64, WEFT_DEVICE_CPU), keep(row);
    rc = weft_index_add_(gself, 1, to(row, CUDA0), to(src, CUDA0));
    ok(rc == WEFT_ERANGE && strstr(weft_last_error(), "index 5 is out of range"),
       "index_add_ with index 5 of 5 columns is refused: %s", weft_last_error());
    ok(matches(gself, self, 0), "and self is untouched");
    weft_tensor *out = (weft_tensor *)1;
    rc = weft_scatter_reduce(&out, gself, 0, to(idx, CUDA0), to(src, CUDA0), "median");
    ok(rc == WEFT_EINVAL && out == NULL, "scatter_reduce 'median' is refused: %s", weft_last_error());
    drop_all();
}

/* ------------------------------------------------------------ sorting */

/* A CPU tensor with many ties (values on a grid of 7) and some NaN. */
static weft_tensor *ties(const int64_t *sizes, int nd, weft_dtype dt, bool nans, weft_generator *g)
{
    weft_tensor *t = rand_of(sizes, nd, WEFT_FLOAT64, -3, 4, g), *fl = NULL, *r = NULL;
    weft_floor(&fl, t), keep(fl);
    if (nans && weft_dtype_is_floating(dt)) {
        int64_t n = weft_tensor_numel(fl);
        double *v = weft_tensor_data_ptr(fl);
        for (int64_t i = 0; i < n; i += 13)
            v[i] = NAN;
        for (int64_t i = 5; i < n; i += 17)
            v[i] = -0.0;
    }
    return weft_to_dtype(&r, fl, dt) == 0 ? keep(r) : NULL;
}

static void gpu_sort(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16,
                                     WEFT_INT64,   WEFT_INT32,   WEFT_INT8,    WEFT_UINT8,
                                     WEFT_BOOL};
    static const struct {
        int nd;
        int64_t sizes[3];
        int dim;
    } cases[] = {{2, {13, 300}, 1}, {2, {13, 300}, 0}, {3, {4, 5, 6}, 1}, {1, {100003}, 0},
                 {2, {3, 0}, 1},    {2, {0, 5}, 1},    {0, {0}, 0},       {2, {2000, 3}, -1}};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (int desc = 0; desc < 2; desc++) {
                weft_dtype dt = dts[di];
                weft_tensor *x = ties(cases[c].sizes, cases[c].nd, dt, true, g);
                weft_tensor *gx = to(x, CUDA0);
                weft_tensor *cv = NULL, *ci = NULL, *gv = NULL, *gi = NULL;
                int rc_c = weft_sort(&cv, &ci, x, cases[c].dim, desc);
                keep(cv), keep(ci);
                int rc_g = weft_sort(&gv, &gi, gx, cases[c].dim, desc);
                keep(gv), keep(gi);
                ok(rc_c == 0 && rc_g == 0 && matches(gv, cv, 0) && matches(gi, ci, 0),
                   "sort %s case %zu %s: the CPU's values and (stable) indices%s%s",
                   weft_dtype_name(dt), c, desc ? "descending" : "ascending", rc_g ? ": " : "",
                   rc_g ? weft_last_error() : "");
                weft_tensor *ca = NULL, *ga = NULL;
                weft_argsort(&ca, x, cases[c].dim, desc), keep(ca);
                rc_g = weft_argsort(&ga, gx, cases[c].dim, desc);
                keep(ga);
                ok(rc_g == 0 && matches(ga, ca, 0), "argsort %s case %zu %s", weft_dtype_name(dt),
                   c, desc ? "descending" : "ascending");
                int d = cases[c].nd ? (cases[c].dim + cases[c].nd) % cases[c].nd : 0;
                int64_t len = cases[c].nd ? cases[c].sizes[d] : 1, k = len < 5 ? len : 5;
                weft_tensor *tv = NULL, *ti = NULL, *uv = NULL, *ui = NULL;
                weft_topk(&tv, &ti, x, k, cases[c].dim, desc, true), keep(tv), keep(ti);
                rc_g = weft_topk(&uv, &ui, gx, k, cases[c].dim, desc, true);
                keep(uv), keep(ui);
                ok(rc_g == 0 && matches(uv, tv, 0) && matches(ui, ti, 0), "topk %s case %zu k=%lld "
                   "%s", weft_dtype_name(dt), c, (long long)k, desc ? "largest" : "smallest");
                drop_all();
            }
    is_int((long long)(weft_cpu_fallback_calls() - fallbacks), 0,
           "sort, argsort and topk ran on the GPU (no fallback call)");

    /* a transposed input */
    weft_tensor *x = ties((const int64_t[]){40, 30}, 2, WEFT_FLOAT32, true, g), *xt = NULL, *gxt = NULL;
    weft_t(&xt, x), keep(xt);
    weft_t(&gxt, to(x, CUDA0)), keep(gxt);
    weft_tensor *cv = NULL, *ci = NULL, *gv = NULL, *gi = NULL;
    weft_sort(&cv, &ci, xt, 1, false), keep(cv), keep(ci);
    int rc = weft_sort(&gv, &gi, gxt, 1, false);
    keep(gv), keep(gi);
    ok(rc == 0 && matches(gv, cv, 0) && matches(gi, ci, 0), "sort of a transposed view");
    weft_tensor *out1 = (weft_tensor *)1, *out2 = (weft_tensor *)1;
    rc = weft_topk(&out1, &out2, gxt, 41, 1, true, true);
    ok(rc == WEFT_ERANGE && strstr(weft_last_error(), "k (41) is out of range"),
       "topk with k beyond the row is refused: %s", weft_last_error());
    rc = weft_sort(&out1, &out2, gxt, 2, false);
    ok(rc == WEFT_ERANGE, "sort along dim 2 of a 2-d tensor is refused: %s", weft_last_error());
    drop_all();
}

/* ------------------------------------------------------------ index_put */

/* A CPU int64 tensor of indices in [-below, below) (negatives wrap). */
static weft_tensor *signed_indices(const int64_t *sizes, int nd, int64_t below, weft_generator *g)
{
    weft_tensor *t = NULL;
    return weft_randint(&t, -below, below, sizes, nd, WEFT_INT64, WEFT_DEVICE_CPU, g) == 0 ? keep(t)
                                                                                          : NULL;
}

/* The same index_put on both devices: results (functional) compared, and
 * the error messages when the CPU refuses. */
static void put_compare(const char *what, const weft_tensor *self, weft_tensor *const *ix, int n,
                        const weft_tensor *values, bool accumulate, double tol)
{
    weft_tensor *gix[WEFT_MAX_DIMS], *want = NULL, *got = NULL;
    for (int i = 0; i < n; i++)
        gix[i] = ix[i] ? to(ix[i], CUDA0) : NULL;
    int rc_c = weft_index_put(&want, self, ix, n, values, accumulate);
    char cpu_error[512] = "";
    if (rc_c < 0)
        snprintf(cpu_error, sizeof cpu_error, "%s", weft_last_error());
    keep(want);
    int rc_g = weft_index_put(&got, to(self, CUDA0), gix, n, to(values, CUDA0), accumulate);
    keep(got);
    if (rc_c < 0)
        ok(rc_g == rc_c && strcmp(weft_last_error(), cpu_error) == 0,
           "index_put %s accumulate=%d: the CPU's error (%s), got %s", what, accumulate,
           cpu_error, rc_g < 0 ? weft_last_error() : "success");
    else
        ok(rc_g == 0 && matches(got, want, tol), "index_put %s %s accumulate=%d matches the CPU%s%s",
           what, weft_dtype_name(weft_tensor_dtype(self)), accumulate, rc_g ? ": " : "",
           rc_g ? weft_last_error() : "");
}

static void gpu_index_put(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16,
                                     WEFT_INT64,   WEFT_INT32,   WEFT_INT16,   WEFT_INT8,
                                     WEFT_UINT8,   WEFT_BOOL};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (int acc = 0; acc < 2; acc++) {
            weft_dtype dt = dts[di];
            double tol = 0; /* accumulate too: the CPU's order and rounding, bit for bit */
            const int64_t s2[2] = {6, 5}, s3[3] = {5, 6, 7};
            weft_tensor *x2 = rand_of(s2, 2, dt, -3, 3, g), *x3 = rand_of(s3, 3, dt, -3, 3, g);
            /* x[i] = v, 40 indices into 6 rows: many duplicates, negatives */
            weft_tensor *i40 = signed_indices((const int64_t[]){40}, 1, 6, g);
            put_compare("x[i] (duplicates)", x2, &i40, 1,
                        rand_of((const int64_t[]){40, 5}, 2, dt, -3, 3, g), acc, tol);
            /* x[i, j] = v with i [4, 1] and j [3] broadcast, v broadcast from [3, 1]...
             * here the index shape is [4, 3] and v [4, 3, 7] */
            weft_tensor *pair[2] = {signed_indices((const int64_t[]){4, 1}, 2, 5, g),
                                    signed_indices((const int64_t[]){3}, 1, 6, g)};
            put_compare("x[i, j] broadcast", x3, pair, 2,
                        rand_of((const int64_t[]){4, 3, 7}, 3, dt, -3, 3, g), acc, tol);
            /* x[:, i, j]: the index shape where the indexed dims were */
            weft_tensor *sliced[3] = {NULL, signed_indices((const int64_t[]){4, 1}, 2, 6, g),
                                      signed_indices((const int64_t[]){3}, 1, 7, g)};
            put_compare("x[:, i, j]", x3, sliced, 3,
                        rand_of((const int64_t[]){5, 4, 3}, 3, dt, -3, 3, g), acc, tol);
            /* x[i, :, j]: a None between, the index shape first; v broadcast */
            weft_tensor *apart[3] = {signed_indices((const int64_t[]){8}, 1, 5, g), NULL,
                                     signed_indices((const int64_t[]){8}, 1, 7, g)};
            put_compare("x[i, :, j]", x3, apart, 3,
                        rand_of((const int64_t[]){6}, 1, dt, -3, 3, g), acc, tol);
            /* a 0-d index and a 0-d value; an empty index; int32 indices */
            weft_tensor *k0 = NULL, *empty = NULL, *i32 = NULL;
            weft_full(&k0, NULL, 0, -2, WEFT_INT64, WEFT_DEVICE_CPU), keep(k0);
            put_compare("x[k] = scalar", x2, &k0, 1, rand_of(NULL, 0, dt, -3, 3, g), acc, tol);
            weft_empty(&empty, (const int64_t[]){0}, 1, WEFT_INT64, WEFT_DEVICE_CPU), keep(empty);
            put_compare("x[empty]", x2, &empty, 1, rand_of(NULL, 0, dt, -3, 3, g), acc, tol);
            weft_to_dtype(&i32, i40, WEFT_INT32), keep(i32);
            put_compare("x[int32 i]", x2, &i32, 1,
                        rand_of((const int64_t[]){40, 1}, 2, dt, -3, 3, g), acc, tol);
            drop_all();
        }
    /* non-contiguous index tensors and values, a transposed target in place */
    {
        const int64_t s2[2] = {9, 8};
        weft_tensor *base = rand_of(s2, 2, WEFT_FLOAT32, -1, 1, g), *gbase = to(base, CUDA0);
        weft_tensor *cview = NULL, *gview = NULL, *it = NULL;
        weft_t(&cview, base), keep(cview);
        weft_t(&gview, gbase), keep(gview);
        weft_t(&it, signed_indices((const int64_t[]){3, 4}, 2, 8, g)), keep(it); /* [4, 3] */
        weft_tensor *vp = NULL;
        weft_permute(&vp, rand_of((const int64_t[]){3, 9, 4}, 3, WEFT_FLOAT32, -1, 1, g),
                     (const int64_t[]){2, 0, 1}, 3), keep(vp); /* [4, 3, 9] */
        weft_tensor *ci[1] = {it}, *gi[1] = {to(it, CUDA0)};
        put_compare("x[transposed i] = permuted v", cview, ci, 1, vp, true, 1e-6);
        int rc_c = weft_index_put_(cview, ci, 1, vp, true);
        int rc_g = weft_index_put_(gview, gi, 1, to(vp, CUDA0), true);
        ok(rc_c == 0 && rc_g == 0 && matches(gbase, base, 1e-6),
           "index_put_ accumulating into a transposed view writes through its strides");
        /* values that are self itself: all read before anything is written */
        weft_tensor *rows = signed_indices((const int64_t[]){9}, 1, 9, g), *grows = to(rows, CUDA0);
        rc_c = weft_index_put_(base, &rows, 1, base, false);
        rc_g = weft_index_put_(gbase, &grows, 1, gbase, false);
        ok(rc_c == 0 && rc_g == 0 && matches(gbase, base, 0),
           "index_put_ of self's rows with self as the values");
        drop_all();
    }
    is_int((long long)(weft_cpu_fallback_calls() - fallbacks), 0,
           "index_put ran on the GPU (no fallback call)");

    /* refusals: the CPU's messages, and nothing written */
    const int64_t s2[2] = {6, 5};
    weft_tensor *self = rand_of(s2, 2, WEFT_FLOAT32, -1, 1, g), *gself = to(self, CUDA0);
    weft_tensor *bad = NULL, *gbad = NULL;
    weft_zeros(&bad, (const int64_t[]){7}, 1, WEFT_INT64, WEFT_DEVICE_CPU), keep(bad);
    set_at(bad, 2, 9);
    set_at(bad, 5, -7);
    gbad = to(bad, CUDA0);
    weft_tensor *v = rand_of((const int64_t[]){7, 5}, 2, WEFT_FLOAT32, -1, 1, g);
    for (int acc = 0; acc < 2; acc++) {
        int rc = weft_index_put_(gself, &gbad, 1, to(v, CUDA0), acc);
        ok(rc == WEFT_ERANGE && strstr(weft_last_error(), "index_put_: index 9 is out of range "
                                       "for dimension 0 with size 6"),
           "index_put_ accumulate=%d with index 9 of 6 rows is refused, the first bad index "
           "named: %s", acc, weft_last_error());
        ok(matches(gself, self, 0), "and self is untouched");
    }
    set_at(bad, 2, 0);
    weft_tensor *gbad2 = to(bad, CUDA0);
    int rc = weft_index_put_(gself, &gbad2, 1, to(v, CUDA0), false);
    ok(rc == WEFT_ERANGE && strstr(weft_last_error(), "index -7 is out of range"),
       "an index of -7 for 6 rows is refused: %s", weft_last_error());
    ok(matches(gself, self, 0), "and self is untouched");
    weft_tensor *pair[2] = {signed_indices((const int64_t[]){3}, 1, 6, g),
                            signed_indices((const int64_t[]){4}, 1, 5, g)};
    put_compare("x[i[3], j[4]]", self, pair, 2, rand_of((const int64_t[]){3}, 1, WEFT_FLOAT32, 0, 1, g),
                false, 0);
    put_compare("x[i] = v of the wrong shape", self, pair, 1,
                rand_of((const int64_t[]){4, 5}, 2, WEFT_FLOAT32, 0, 1, g), false, 0);
    put_compare("x[i] = float64 v", self, pair, 1,
                rand_of((const int64_t[]){3, 5}, 2, WEFT_FLOAT64, 0, 1, g), false, 0);
    put_compare("x[i, j, k] of a 2-d x", self, (weft_tensor *[]){pair[0], pair[0], pair[0]}, 3,
                rand_of((const int64_t[]){3}, 1, WEFT_FLOAT32, 0, 1, g), false, 0);
    put_compare("x[None, None]", self, (weft_tensor *[]){NULL, NULL}, 2,
                rand_of((const int64_t[]){3}, 1, WEFT_FLOAT32, 0, 1, g), false, 0);
    weft_tensor *mask = NULL;
    weft_gt_scalar(&mask, self, 0.2), keep(mask);
    put_compare("x[mask [6, 5]] = 0-d v", self, &mask, 1,
                rand_of(NULL, 0, WEFT_FLOAT32, 0, 1, g), false, 0);
    drop_all();
}

/* index_put with masks: a mask over m dims stands for the m columns of
 * its nonzero(), alone, after None, beside an index tensor, as uint8. */
static void gpu_index_put_masks(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT16, WEFT_INT64, WEFT_BOOL};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (int acc = 0; acc < 2; acc++) {
            weft_dtype dt = dts[di];
            double tol = 0; /* accumulate too: the CPU's order and rounding, bit for bit */
            const int64_t s3[3] = {5, 6, 7};
            weft_tensor *x3 = rand_of(s3, 3, dt, -3, 3, g);
            weft_tensor *m56 = NULL, *m67 = NULL, *m6 = NULL, *none = NULL, *u8 = NULL;
            weft_gt_scalar(&m56, rand_of((const int64_t[]){5, 6}, 2, WEFT_FLOAT32, 0, 1, g), 0.5);
            keep(m56);
            put_compare("x[mask [5, 6]] = 0-d v", x3, &m56, 1, rand_of(NULL, 0, dt, -3, 3, g), acc,
                        tol);
            put_compare("x[mask [5, 6]] = v [7]", x3, &m56, 1,
                        rand_of((const int64_t[]){7}, 1, dt, -3, 3, g), acc, tol);
            weft_gt_scalar(&m67, rand_of((const int64_t[]){6, 7}, 2, WEFT_FLOAT32, 0, 1, g), 0.3);
            keep(m67);
            put_compare("x[:, mask [6, 7]]", x3, (weft_tensor *[]){NULL, m67}, 2,
                        rand_of((const int64_t[]){5, 1}, 2, dt, -3, 3, g), acc, tol);
            /* three of six set, beside an index tensor of three (duplicates) */
            weft_zeros(&m6, (const int64_t[]){6}, 1, WEFT_BOOL, WEFT_DEVICE_CPU), keep(m6);
            ((bool *)weft_tensor_data_ptr(m6))[1] = true;
            ((bool *)weft_tensor_data_ptr(m6))[4] = true;
            ((bool *)weft_tensor_data_ptr(m6))[5] = true;
            weft_tensor *rows = signed_indices((const int64_t[]){3}, 1, 2, g);
            put_compare("x[i [3], mask of 3 set]", x3, (weft_tensor *[]){rows, m6}, 2,
                        rand_of((const int64_t[]){3, 7}, 2, dt, -3, 3, g), acc, tol);
            weft_to_dtype(&u8, m56, WEFT_UINT8), keep(u8);
            put_compare("x[uint8 mask [5, 6]]", x3, &u8, 1, rand_of(NULL, 0, dt, -3, 3, g), acc,
                        tol);
            weft_zeros(&none, (const int64_t[]){5}, 1, WEFT_BOOL, WEFT_DEVICE_CPU), keep(none);
            put_compare("x[mask with none set]", x3, &none, 1, rand_of(NULL, 0, dt, -3, 3, g), acc,
                        tol);
            drop_all();
        }
    is_int((long long)(weft_cpu_fallback_calls() - fallbacks), 0,
           "index_put with masks ran on the GPU (no fallback call)");
    weft_tensor *x = rand_of((const int64_t[]){5, 6}, 2, WEFT_FLOAT32, -1, 1, g), *m = NULL;
    weft_zeros(&m, (const int64_t[]){4}, 1, WEFT_BOOL, WEFT_DEVICE_CPU), keep(m);
    put_compare("x[mask of [4]] on [5, 6]", x, &m, 1, rand_of(NULL, 0, WEFT_FLOAT32, 0, 1, g),
                false, 0);
    put_compare("x[:, mask of [4]] on [5, 6]", x, (weft_tensor *[]){NULL, m}, 2,
                rand_of(NULL, 0, WEFT_FLOAT32, 0, 1, g), false, 0);
    drop_all();
}

/* ------------------------------------------------------------ unique */

static void gpu_unique(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16,
                                     WEFT_INT64,   WEFT_INT32,   WEFT_INT16,   WEFT_INT8,
                                     WEFT_UINT8,   WEFT_BOOL};
    static const struct {
        int nd;
        int64_t sizes[2];
        bool transposed;
    } cases[] = {{2, {40, 30}, false}, {2, {40, 30}, true}, {1, {100003}, false},
                 {0, {0}, false},      {1, {0}, false},     {2, {3, 0}, false}, {1, {1}, false}};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (int asked = 0; asked < 4; asked++) {
                weft_dtype dt = dts[di];
                bool inverse = asked & 1, counts = asked & 2;
                weft_tensor *x = ties(cases[c].sizes, cases[c].nd, dt, true, g), *gx = to(x, CUDA0);
                if (cases[c].transposed) {
                    weft_tensor *xt = NULL, *gxt = NULL;
                    weft_t(&xt, x), keep(xt);
                    weft_t(&gxt, gx), keep(gxt);
                    x = xt, gx = gxt;
                }
                weft_tensor *cv = NULL, *ci = NULL, *cc = NULL, *gv = NULL, *gi = NULL, *gc = NULL;
                int rc_c = weft_unique(&cv, &ci, &cc, x, true, inverse, counts, NULL);
                keep(cv), keep(ci), keep(cc);
                int rc_g = weft_unique(&gv, &gi, &gc, gx, true, inverse, counts, NULL);
                keep(gv), keep(gi), keep(gc);
                ok(rc_c == 0 && rc_g == 0 && matches(gv, cv, 0) && matches(gi, ci, 0) &&
                       matches(gc, cc, 0),
                   "unique %s case %zu inverse=%d counts=%d: the CPU's values, inverse and "
                   "counts%s%s", weft_dtype_name(dt), c, inverse, counts, rc_g ? ": " : "",
                   rc_g ? weft_last_error() : "");
                drop_all();
            }
    is_int((long long)(weft_cpu_fallback_calls() - fallbacks), 0,
           "unique ran on the GPU (no fallback call)");
    /* with a dim: the CPU fallback, the same results */
    weft_tensor *x = ties((const int64_t[]){12, 5}, 2, WEFT_INT32, false, g);
    weft_tensor *cv = NULL, *ci = NULL, *cc = NULL, *gv = NULL, *gi = NULL, *gc = NULL;
    const int64_t dim = 0;
    weft_unique(&cv, &ci, &cc, x, true, true, true, &dim), keep(cv), keep(ci), keep(cc);
    int rc = weft_unique(&gv, &gi, &gc, to(x, CUDA0), true, true, true, &dim);
    keep(gv), keep(gi), keep(gc);
    ok(rc == 0 && matches(gv, cv, 0) && matches(gi, ci, 0) && matches(gc, cc, 0),
       "unique with a dim (fallback) matches the CPU");
    drop_all();
}

/* ------------------------------------------------------------ bernoulli */

static void gpu_bernoulli(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_INT64, WEFT_BOOL};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (int broadcast = 0; broadcast < 2; broadcast++) {
            weft_dtype dt = dts[di];
            const int64_t sizes[2] = {37, 1001};
            weft_tensor *p = rand_of(broadcast ? sizes + 1 : sizes, broadcast ? 1 : 2, WEFT_FLOAT32, 0, 1, g);
            weft_tensor *c = NULL, *gt = NULL, *gself = NULL;
            weft_zeros(&c, sizes, 2, dt, WEFT_DEVICE_CPU), keep(c);
            weft_zeros(&gself, (const int64_t[]){1001, 37}, 2, dt, CUDA0), keep(gself);
            weft_t(&gt, gself), keep(gt); /* written through a transposed view */
            weft_generator *gc = NULL, *gg = NULL;
            weft_generator_create(&gc, 99);
            weft_generator_create(&gg, 99);
            int rc_c = weft_bernoulli_tensor_ex_(c, p, gc);
            int rc_g = weft_bernoulli_tensor_ex_(gt, to(p, CUDA0), gg);
            ok(rc_c == 0 && rc_g == 0 && matches(gt, c, 0),
               "bernoulli_ %s with a tensor p%s: the CPU's draws from the same seed%s%s",
               weft_dtype_name(dt), broadcast ? " (broadcast)" : "", rc_g ? ": " : "",
               rc_g ? weft_last_error() : "");
            weft_generator_destroy(gc);
            weft_generator_destroy(gg);
            drop_all();
        }
    weft_tensor *p = rand_of((const int64_t[]){1000}, 1, WEFT_FLOAT64, 0, 1, g), *c = NULL, *gr = NULL;
    weft_generator *gc = NULL, *gg = NULL;
    weft_generator_create(&gc, 5);
    weft_generator_create(&gg, 5);
    weft_bernoulli_ex(&c, p, gc), keep(c);
    int rc = weft_bernoulli_ex(&gr, to(p, CUDA0), gg);
    keep(gr);
    ok(rc == 0 && matches(gr, c, 0), "bernoulli(p) matches the CPU's draws");
    is_int((long long)(weft_cpu_fallback_calls() - fallbacks), 0,
           "bernoulli with a tensor p ran on the GPU (no fallback call)");
    set_at(p, 700, 1.5);
    set_at(p, 800, -1);
    weft_tensor *self = NULL;
    weft_zeros(&self, (const int64_t[]){1000}, 1, WEFT_FLOAT32, CUDA0), keep(self);
    rc = weft_bernoulli_tensor_ex_(self, to(p, CUDA0), gg);
    ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "found 1.5"),
       "a p of 1.5 is refused, the first bad value named: %s", weft_last_error());
    weft_generator_destroy(gc);
    weft_generator_destroy(gg);
    drop_all();
}

int main(void)
{
    plan_checks();
    index_put_plan_checks();
    weft_load_default_plugins();
    int n = weft_device_count(TEST_GPU_TYPE);
    if (n <= 0) {
        skip(1, "no " TEST_GPU_NAME " device here (the runtime reports none): the scatter, "
                "index_put, sort, unique and bernoulli comparisons run only with a GPU");
        return done_testing();
    }
    weft_generator *g = NULL;
    weft_generator_create(&g, 31);
    if (test_gpu_has_kernel("sort")) {
        gpu_scatter(g);
        gpu_sort(g);
        gpu_index_put(g);
        gpu_index_put_masks(g);
        gpu_unique(g);
    } else {
        skip(1, "the " TEST_GPU_NAME " plugin has no device radix sort (backends/cuda/gpu.h): "
                "scatter, sort, index_put and unique run on the CPU fallback");
    }
    gpu_bernoulli(g);
    weft_generator_destroy(g);
    return done_testing();
}
