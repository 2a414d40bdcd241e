/* backends/cpu/blas.c — matrix products mm and bmm (and their out= forms):
 * float32 and float64 through OpenBLAS, called from the calling thread so
 * our pool never competes with OpenBLAS's threads; the other dtypes through
 * a plain kernel of our own, which may use our pool. */
#include <limits.h>

#include <cblas.h>

#include "cpu.h"

/* Weak, so that the plugin still links and runs against a BLAS that is not
 * OpenBLAS (the call is then skipped). */
extern void openblas_set_num_threads(int num_threads) __attribute__((weak));

void cpu__blas_init(int nthreads)
{
    if (openblas_set_num_threads)
        openblas_set_num_threads(nthreads);
}

/* One operand of a (batched) product: element (b, i, j) is at
 * data + b*bs + i*rs + j*cs, in elements. */
typedef struct matrix {
    char *data;
    int64_t bs, rs, cs;
} matrix;

static matrix matrix_of(const weft_tensor *t)
{
    const int64_t *st = weft_tensor_strides(t);
    int nd = weft_tensor_ndim(t);
    matrix m = {weft_tensor_data_ptr(t), nd == 3 ? st[0] : 0, st[nd - 2], st[nd - 1]};
    return m;
}

typedef struct product {
    matrix a, b, c;
    int64_t batch, n, k, m; /* c[n, m] = a[n, k] @ b[k, m], batch times */
} product;

/* -------------------------------------------------------- the own kernel */

/* Rows [begin, end) of all batches' results, for dtype NAME.  Integers
 * accumulate in U so that overflow wraps; float16 and bfloat16 in float. */
#define DEFINE_GEMM(NAME, DTYPE, T, C, U)                                             \
    static void gemm_rows_##NAME(int64_t begin, int64_t end, void *ctx)                \
    {                                                                                  \
        const product *p = ctx;                                                        \
        for (int64_t r = begin; r < end; r++) {                                        \
            int64_t batch = r / p->n, i = r % p->n;                                    \
            const T *a = (const T *)p->a.data + batch * p->a.bs + i * p->a.rs;         \
            const T *b = (const T *)p->b.data + batch * p->b.bs;                       \
            T *c = (T *)p->c.data + batch * p->c.bs + i * p->c.rs;                     \
            for (int64_t j = 0; j < p->m; j++) {                                       \
                U sum = 0;                                                             \
                for (int64_t q = 0; q < p->k; q++)                                     \
                    sum += (U)cpu_load_##NAME(a[q * p->a.cs]) *                        \
                           (U)cpu_load_##NAME(b[q * p->b.rs + j * p->b.cs]);           \
                c[j * p->c.cs] = cpu_store_##NAME((C)sum);                             \
            }                                                                          \
        }                                                                              \
    }
CPU_DTYPES_INTEGRAL(DEFINE_GEMM)
CPU_DTYPES_FLOATING(DEFINE_GEMM)
CPU_DTYPES_COMPLEX(DEFINE_GEMM)

typedef void (*gemm_fn)(int64_t begin, int64_t end, void *ctx);
#define GEMM_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = gemm_rows_##NAME,
/* bool has no entry: PyTorch has no boolean matrix product either */
static const gemm_fn gemm_kernels[WEFT_NUM_DTYPES] = {
    CPU_DTYPES_INTEGRAL(GEMM_ENTRY) CPU_DTYPES_FLOATING(GEMM_ENTRY) CPU_DTYPES_COMPLEX(GEMM_ENTRY)};

/* ------------------------------------------------------------- OpenBLAS */

/* Whether a rows x cols operand with strides (rs, cs) is a row-major
 * matrix (trans false) or the transpose of one (trans true) that BLAS can
 * read with leading dimension *ld. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld)
{
    int64_t min_row_ld = cols > 1 ? cols : 1, min_col_ld = rows > 1 ? rows : 1;
    if (cols == 1 || cs == 1) {
        int64_t l = rows == 1 ? min_row_ld : rs;
        if (l >= min_row_ld && l <= INT_MAX) {
            *trans = false;
            *ld = l;
            return true;
        }
    }
    if (rows == 1 || rs == 1) {
        int64_t l = cols == 1 ? min_col_ld : cs;
        if (l >= min_col_ld && l <= INT_MAX) {
            *trans = true;
            *ld = l;
            return true;
        }
    }
    return false;
}

/* A BLAS-readable operand: t itself or a contiguous copy in *copy. */
static int blas_operand(const weft_tensor *t, int64_t rows, int64_t cols, matrix *mat, bool *trans,
                        int64_t *ld, weft_tensor **copy)
{
    *mat = matrix_of(t);
    if (blas_layout(rows, cols, mat->rs, mat->cs, trans, ld))
        return 0;
    int rc = weft_contiguous(copy, t);
    if (rc < 0)
        return rc;
    *mat = matrix_of(*copy);
    blas_layout(rows, cols, mat->rs, mat->cs, trans, ld); /* row-major now */
    return 0;
}

/* c (contiguous) = a @ b for float32/float64, one gemm per batch. */
static int blas_product(weft_dtype dtype, const weft_tensor *a, const weft_tensor *b, product *p)
{
    weft_tensor *ca = NULL, *cb = NULL;
    bool ta = false, tb = false;
    int64_t lda = 0, ldb = 0;
    int rc = blas_operand(a, p->n, p->k, &p->a, &ta, &lda, &ca);
    if (rc == 0)
        rc = blas_operand(b, p->k, p->m, &p->b, &tb, &ldb, &cb);
    if (rc == 0) {
        enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
        int n = (int)p->n, k = (int)p->k, m = (int)p->m;
        for (int64_t i = 0; i < p->batch; i++) {
            if (dtype == WEFT_FLOAT32) {
                cblas_sgemm(CblasRowMajor, opa, opb, n, m, k, 1.0f,
                            (const float *)p->a.data + i * p->a.bs, (int)lda,
                            (const float *)p->b.data + i * p->b.bs, (int)ldb, 0.0f,
                            (float *)p->c.data + i * p->c.bs, m);
            } else {
                cblas_dgemm(CblasRowMajor, opa, opb, n, m, k, 1.0,
                            (const double *)p->a.data + i * p->a.bs, (int)lda,
                            (const double *)p->b.data + i * p->b.bs, (int)ldb, 0.0,
                            (double *)p->c.data + i * p->c.bs, m);
            }
        }
    }
    weft_tensor_release(ca);
    weft_tensor_release(cb);
    return rc;
}

/* c = a @ b, c contiguous and sharing no memory with a or b. */
static int run_product(weft_dtype dtype, const weft_tensor *a, const weft_tensor *b,
                       weft_tensor *c, product *p)
{
    if (p->batch == 0 || p->n == 0 || p->m == 0)
        return 0;
    if (p->k == 0)
        return weft_fill_(c, 0.0); /* an empty sum */
    p->c = matrix_of(c);
    bool fits = p->n <= INT_MAX && p->k <= INT_MAX && p->m <= INT_MAX;
    if ((dtype == WEFT_FLOAT32 || dtype == WEFT_FLOAT64) && fits)
        return blas_product(dtype, a, b, p);
    p->a = matrix_of(a);
    p->b = matrix_of(b);
    int64_t work = p->k * p->m > 0 ? p->k * p->m : 1;
    cpu__parallel_for(0, p->batch * p->n, CPU_GRAIN / work + 1, gemm_kernels[dtype], p);
    return 0;
}

/* ------------------------------------------------------------- kernels */

typedef struct product_form {
    bool batched; /* bmm */
    bool out;
} product_form;

static int check_shapes(const char *op, bool batched, const weft_tensor *a, const weft_tensor *b,
                        product *p)
{
    int want = batched ? 3 : 2;
    const char *names[2] = {batched ? "batch1" : "self", batched ? "batch2" : "mat2"};
    const weft_tensor *ts[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (weft_tensor_ndim(ts[i]) != want)
            return weft_set_error(WEFT_ESHAPE, "%s: %s must be a %d-D tensor, but got a %d-D "
                                  "tensor", op, names[i], want, weft_tensor_ndim(ts[i]));
    }
    const int64_t *sa = weft_tensor_sizes(a), *sb = weft_tensor_sizes(b);
    int o = batched ? 1 : 0;
    p->batch = batched ? sa[0] : 1;
    p->n = sa[o];
    p->k = sa[o + 1];
    p->m = sb[o + 1];
    if (batched && sa[0] != sb[0])
        return weft_set_error(WEFT_ESHAPE, "%s: batch1 and batch2 must have the same number of "
                              "batches, got %lld and %lld", op, (long long)sa[0], (long long)sb[0]);
    if (p->k != sb[o]) {
        if (!batched)
            return weft_set_error(WEFT_ESHAPE, "%s: mat1 and mat2 shapes cannot be multiplied "
                                  "(%lldx%lld and %lldx%lld)", op, (long long)sa[0],
                                  (long long)sa[1], (long long)sb[0], (long long)sb[1]);
        char ba[128], bb[128];
        return weft_set_error(WEFT_ESHAPE, "%s: batch1 and batch2 shapes cannot be multiplied "
                              "(%s and %s)", op, cpu__shape_str(ba, sizeof ba, sa, 3),
                              cpu__shape_str(bb, sizeof bb, sb, 3));
    }
    return 0;
}

static int check_product(const char *op, const product_form *form, const weft_tensor *a,
                         const weft_tensor *b, const weft_tensor *out, product *p)
{
    int rc = cpu__check_cpu(op, form->batched ? "batch1" : "self", a);
    if (rc == 0)
        rc = cpu__check_cpu(op, form->batched ? "batch2" : "mat2", b);
    if (rc == 0 && out)
        rc = cpu__check_cpu(op, "out", out);
    if (rc == 0)
        rc = check_shapes(op, form->batched, a, b, p);
    if (rc < 0)
        return rc;
    weft_dtype da = weft_tensor_dtype(a), db = weft_tensor_dtype(b);
    if (da != db)
        return weft_set_error(WEFT_EDTYPE, "%s: expected m1 and m2 to have the same dtype, but "
                              "got: %s != %s", op, weft_dtype_name(da), weft_dtype_name(db));
    if (da < 0 || da >= WEFT_NUM_DTYPES || !gemm_kernels[da])
        return cpu__unsupported_dtype(op, da);
    if (out && weft_tensor_dtype(out) != da)
        return weft_set_error(WEFT_EDTYPE, "%s: expected out tensor to have dtype %s, but got %s "
                              "instead", op, weft_dtype_name(da),
                              weft_dtype_name(weft_tensor_dtype(out)));
    return 0;
}

/* mm, mm_out, bmm, bmm_out: (out,) self, mat2 */
static int product_kernel(weft_call *call, void *ctx)
{
    const product_form *form = ctx;
    const char *op = weft_op_name(call->op);
    int first = form->out ? 1 : 0;
    weft_tensor *out = form->out ? call->args[0].u.tensor : NULL;
    const weft_tensor *a = call->args[first].u.tensor, *b = call->args[first + 1].u.tensor;
    product p;
    int rc = check_product(op, form, a, b, out, &p);
    if (rc < 0)
        return rc;
    int64_t shape[3] = {p.batch, p.n, p.m};
    const int64_t *sizes = form->batched ? shape : shape + 1;
    int ndim = form->batched ? 3 : 2;
    if (out && (rc = cpu__prepare_target(op, out, true, sizes, ndim, "expected")) < 0)
        return rc;
    weft_tensor *dest = NULL;
    if (out && weft_tensor_is_contiguous(out) && !weft_tensor_shares_storage(out, a) &&
        !weft_tensor_shares_storage(out, b))
        dest = weft_tensor_retain(out);
    else
        rc = weft_empty(&dest, sizes, ndim, weft_tensor_dtype(a), WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = run_product(weft_tensor_dtype(a), a, b, dest, &p);
    return cpu__deliver(call, out, dest, rc);
}

static const product_form mm_form = {false, false}, mm_out_form = {false, true};
static const product_form bmm_form = {true, false}, bmm_out_form = {true, true};
static const cpu_kernel_entry blas_entries[] = {
    {"mm", product_kernel, &mm_form},
    {"mm_out", product_kernel, &mm_out_form},
    {"bmm", product_kernel, &bmm_form},
    {"bmm_out", product_kernel, &bmm_out_form},
};

int cpu__register_blas(weft_registrar *reg)
{
    return cpu__register_table(reg, blas_entries, sizeof blas_entries / sizeof *blas_entries);
}
