/* backends/cpu/blas.c — matrix products: mm and bmm (and their out= forms),
 * baddbmm and addbmm (beta * self + alpha * products), mv (gemv), dot and
 * vdot.
 * float32 and float64 go through OpenBLAS, called from the calling thread so
 * our pool never competes with OpenBLAS's threads; the other dtypes through
 * plain kernels of our own, which may use our pool. */
#include <complex.h>
#include <limits.h>

#include <cblas.h>

#include "cpu.h"

/* Weak, so that the plugin still links and runs against a BLAS that is not
 * OpenBLAS (the call is then skipped). */
extern void openblas_set_num_threads(int num_threads) __attribute__((weak));

/* OpenBLAS runs single-threaded: its own thread server spins and
 * sched_yield()s between calls, which on a machine with as many busy
 * threads as cores took the core our pool's workers (and the caller)
 * needed — a 2-thread training epoch ran slower than a 1-thread one.
 * Large products are split over our pool instead (cpu__gemm), whose
 * workers sleep while idle.  nthreads is our pool's size, kept for the
 * callers that resize it. */
void cpu__blas_init(int nthreads)
{
    (void)nthreads;
    if (openblas_set_num_threads)
        openblas_set_num_threads(1);
}

/* A product is cut into pieces by the problem's shape alone: OpenBLAS may
 * sum a piece in another order than the whole (its kernels depend on the
 * sizes), so a cut that followed the thread count would make results
 * depend on it.  One piece below GEMM_GRAIN multiply-adds (waking a worker
 * for less costs more than it saves), two below GEMM_GRAIN_FOUR, four
 * above: every piece packs the whole of the operand it shares with the
 * others again, which cost a 256 x 256 x 256 product cut in four 8% of
 * its speed on one thread (two pieces: 3%), while from about 400^3 up the
 * packing is lost in the product. */
#define GEMM_GRAIN ((int64_t)1 << 21)
#define GEMM_GRAIN_FOUR ((int64_t)1 << 26)
#define GEMM_MAX_PIECES 4

typedef struct gemm_job {
    weft_dtype dtype;
    bool ta, tb, by_rows;
    int64_t n, m, k, lda, ldb, ldc, block;
    double alpha, beta;
    const char *a, *b;
    char *c;
} gemm_job;

/* Pieces [begin, end): each a block of rows of C (by_rows) or of columns. */
static void gemm_pieces(int64_t begin, int64_t end, void *ctx)
{
    const gemm_job *j = ctx;
    size_t es = j->dtype == WEFT_FLOAT32 ? sizeof(float) : sizeof(double);
    int64_t along = j->by_rows ? j->n : j->m;
    for (int64_t piece = begin; piece < end; piece++) {
        int64_t first = piece * j->block;
        int64_t count = along - first < j->block ? along - first : j->block;
        const char *a = j->a, *b = j->b;
        char *c = j->c;
        int64_t n = j->n, m = j->m;
        if (j->by_rows) { /* op(A)'s rows: A's rows, or A's columns when transposed */
            a += (size_t)(j->ta ? first : first * j->lda) * es;
            c += (size_t)(first * j->ldc) * es;
            n = count;
        } else { /* op(B)'s columns: B's columns, or B's rows when transposed */
            b += (size_t)(j->tb ? first * j->ldb : first) * es;
            c += (size_t)first * es;
            m = count;
        }
        cpu__gemm_serial(j->dtype, j->ta, j->tb, n, m, j->k, j->alpha, a, j->lda, b, j->ldb,
                         j->beta, c, j->ldc);
    }
}

int cpu__gemm(const char *op, weft_dtype dtype, bool ta, bool tb, int64_t n, int64_t m,
              int64_t k, double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
              double beta, void *c, int64_t ldc)
{
    int rc = cpu__gemm_library_ready(op);
    if (rc < 0)
        return rc;
    gemm_job j = {dtype, ta, tb, n >= m, n, m, k, lda, ldb, ldc, 0, alpha, beta, a, b, c};
    int64_t along = j.by_rows ? n : m;
    double work = (double)n * (double)m * (double)(k > 0 ? k : 1);
    int64_t pieces = work < (double)GEMM_GRAIN        ? 1
                     : work < (double)GEMM_GRAIN_FOUR ? 2
                                                      : GEMM_MAX_PIECES;
    pieces = pieces > along ? along : pieces;
    /* blocks of a multiple of 8 rows or columns where there are enough:
     * whole register tiles of the BLAS kernels */
    int64_t block = (along + pieces - 1) / pieces;
    if (along >= 8 * pieces)
        block = (block + 7) / 8 * 8;
    j.block = block > 0 ? block : 1;
    pieces = (along + j.block - 1) / j.block;
    if (pieces <= 1)
        gemm_pieces(0, pieces, &j);
    else
        cpu__parallel_for(0, pieces, 1, gemm_pieces, &j);
    return 0;
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

/* c = alpha a @ b + beta c for float32/float64, one gemm per batch; c's
 * rows are contiguous.  A batch stride of 0 in c sums the batches' products
 * into one matrix (addbmm): every batch after the first adds with beta 1.
 * beta 0 never reads c, so NaN there is ignored (BLAS's rule, and torch's). */
static int blas_product(weft_dtype dtype, const weft_tensor *a, const weft_tensor *b, product *p,
                        double alpha, double beta)
{
    weft_tensor *ca = NULL, *cb = NULL;
    bool ta = false, tb = false;
    int64_t lda = 0, ldb = 0;
    int rc = blas_operand(a, p->n, p->k, &p->a, &ta, &lda, &ca);
    if (rc == 0)
        rc = blas_operand(b, p->k, p->m, &p->b, &tb, &ldb, &cb);
    if (rc == 0) {
        int64_t ldc = p->c.rs > 1 ? p->c.rs : 1;
        ldc = ldc < p->m ? p->m : ldc;
        size_t es = weft_dtype_size(dtype);
        for (int64_t i = 0; rc == 0 && i < p->batch; i++) {
            double bi = p->c.bs == 0 && i > 0 ? 1.0 : beta;
            rc = cpu__gemm("mm", dtype, ta, tb, p->n, p->m, p->k, alpha,
                           p->a.data + (size_t)(i * p->a.bs) * es, lda,
                           p->b.data + (size_t)(i * p->b.bs) * es, ldb, bi,
                           p->c.data + (size_t)(i * p->c.bs) * es, ldc);
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
        return blas_product(dtype, a, b, p, 1.0, 0.0);
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
                              "(%s and %s)", op, weft_format_shape(ba, sizeof ba, sa, 3),
                              weft_format_shape(bb, sizeof bb, sb, 3));
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

/* ------------------------------------------- baddbmm, addbmm (and mv) */

/* dest = beta * dest + alpha * (a @ b), batch by batch, or summed over the
 * batches when dest is 2-D (addbmm).  dest is contiguous, fresh, and holds
 * self's values unless beta is 0, when it is never read. */
static int scaled_product(weft_dtype dtype, const weft_tensor *a, const weft_tensor *b,
                          weft_tensor *dest, product *p, double alpha, double beta)
{
    if (p->n == 0 || p->m == 0)
        return 0;
    if (p->batch == 0 || p->k == 0) /* the products are empty sums */
        return beta == 0 ? weft_fill_(dest, 0.0) : (beta == 1 ? 0 : weft_mul_scalar_(dest, beta));
    p->c = matrix_of(dest);
    bool fits = p->n <= INT_MAX && p->k <= INT_MAX && p->m <= INT_MAX;
    if ((dtype == WEFT_FLOAT32 || dtype == WEFT_FLOAT64) && fits)
        return blas_product(dtype, a, b, p, alpha, beta);
    /* the own kernel writes whole results: products first, then the sums */
    weft_tensor *prod = NULL, *summed = NULL;
    int rc = weft_bmm(&prod, a, b);
    if (rc == 0 && weft_tensor_ndim(dest) == 2) {
        static const int64_t batch_dim[1] = {0};
        rc = weft_sum_ex(&summed, prod, batch_dim, 1, false, dtype);
        weft_tensor_release(prod);
        prod = summed;
    }
    if (rc == 0 && alpha != 1)
        rc = weft_mul_scalar_(prod, alpha);
    if (rc == 0 && beta == 0)
        rc = weft_copy_(dest, prod);
    else if (rc == 0 && (beta == 1 || (rc = weft_mul_scalar_(dest, beta)) == 0))
        rc = weft_add_(dest, prod);
    weft_tensor_release(prod);
    return rc;
}

typedef struct addbmm_form {
    bool sum_batches; /* addbmm: one [n, m] result */
    cpu_mode mode;
} addbmm_form;

/* baddbmm, addbmm and their in-place and out= forms:
 * (out,) self, batch1, batch2, *, beta, alpha */
static int addbmm_kernel(weft_call *call, void *ctx)
{
    const addbmm_form *form = ctx;
    const char *op = weft_op_name(call->op);
    int first = form->mode == CPU_OUT ? 1 : 0;
    weft_tensor *target = form->mode == CPU_FUNCTIONAL ? NULL : call->args[0].u.tensor;
    const weft_value *args = call->args + first;
    const weft_tensor *self = args[0].u.tensor, *a = args[1].u.tensor, *b = args[2].u.tensor;
    double beta = weft_value_double(&args[3]), alpha = weft_value_double(&args[4]);
    static const product_form batched = {true, false};
    product p;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0 && form->mode == CPU_OUT)
        rc = cpu__check_cpu(op, "out", target);
    if (rc == 0)
        rc = check_product(op, &batched, a, b, NULL, &p);
    if (rc < 0)
        return rc;
    weft_dtype dtype = weft_tensor_dtype(a);
    if (weft_tensor_dtype(self) != dtype || (target && weft_tensor_dtype(target) != dtype))
        return weft_set_error(WEFT_EDTYPE, "%s: self%s must have the dtype of batch1 and batch2 "
                              "(%s), got %s", op, form->mode == CPU_OUT ? " and out" : "",
                              weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(weft_tensor_dtype(self) != dtype
                                                                    ? self : target)));
    if (cpu_integral_or_bool(dtype) && (!cpu_is_whole(beta) || !cpu_is_whole(alpha)))
        return weft_set_error(WEFT_EINVAL, "%s: for integer inputs beta and alpha must be "
                              "integers, got beta=%g and alpha=%g", op, beta, alpha);
    int64_t shape[3] = {p.batch, p.n, p.m};
    const int64_t *sizes = form->sum_batches ? shape + 1 : shape;
    int ndim = form->sum_batches ? 2 : 3;
    if (target && (rc = cpu__prepare_target(op, target, form->mode == CPU_OUT, sizes, ndim,
                                            "expected")) < 0)
        return rc;
    weft_tensor *expanded = NULL, *dest = NULL;
    if (weft_expand(&expanded, self, sizes, ndim) < 0) {
        char bs[128], bt[128];
        return weft_set_error(WEFT_ESHAPE, "%s: self of shape %s cannot be broadcast to the "
                              "product's shape %s", op,
                              weft_format_shape(bs, sizeof bs, weft_tensor_sizes(self),
                                             weft_tensor_ndim(self)),
                              weft_format_shape(bt, sizeof bt, sizes, ndim));
    }
    rc = weft_empty(&dest, sizes, ndim, dtype, WEFT_DEVICE_CPU);
    if (rc == 0 && beta != 0)
        rc = weft_copy_(dest, expanded);
    weft_tensor_release(expanded);
    if (rc == 0)
        rc = scaled_product(dtype, a, b, dest, &p, alpha, beta);
    return cpu__deliver(call, target, dest, rc);
}

/* One gemv's pieces: blocks of y's entries, each a gemv of its own over
 * A's rows (row-major A) or A^T's columns (a transposed operand), so each
 * piece reads its own part of A once. */
typedef struct gemv_job {
    weft_dtype dtype;
    bool trans;
    int64_t rows, cols, ld, incx, block; /* rows x cols: the matrix BLAS is given */
    const char *a;
    const void *x;
    char *y;
} gemv_job;

static void gemv_pieces(int64_t begin, int64_t end, void *arg)
{
    const gemv_job *j = arg;
    size_t es = weft_dtype_size(j->dtype);
    int64_t outs = j->trans ? j->cols : j->rows;
    for (int64_t piece = begin; piece < end; piece++) {
        int64_t first = piece * j->block;
        int64_t count = outs - first < j->block ? outs - first : j->block;
        /* NoTrans: rows [first, first + count); Trans: those columns of A^T */
        const char *a = j->a + (size_t)(j->trans ? first : first * j->ld) * es;
        int rows = (int)(j->trans ? j->rows : count), cols = (int)(j->trans ? count : j->cols);
        enum CBLAS_TRANSPOSE op = j->trans ? CblasTrans : CblasNoTrans;
        if (j->dtype == WEFT_FLOAT32)
            cblas_sgemv(CblasRowMajor, op, rows, cols, 1.0f, (const float *)a, (int)j->ld, j->x,
                        (int)j->incx, 0.0f, (float *)j->y + first, 1);
        else
            cblas_dgemv(CblasRowMajor, op, rows, cols, 1.0, (const double *)a, (int)j->ld, j->x,
                        (int)j->incx, 0.0, (double *)j->y + first, 1);
    }
}

/* y = A x for float32/float64 through gemv; A is read in place when BLAS
 * can (row-major or transposed), else from a contiguous copy.  A product
 * of at least GEMV_SPLIT multiply-adds is cut into blocks of y's entries
 * on the pool: BLAS runs single-threaded under weft (its threads would be
 * a second pool), and one thread reads memory at a fraction of what the
 * cores together do (a 4096 x 4096 float32 matrix-vector product at 14%
 * of STREAM on a 16-core Xeon, docs/benchmarks.md). */
enum { GEMV_SPLIT = 1 << 18, GEMV_MIN_OUTS = 64 };
static int blas_matrix_vector(weft_dtype dtype, const weft_tensor *a, const weft_tensor *x,
                              weft_tensor *y, product *p)
{
    weft_tensor *copy = NULL;
    bool trans = false;
    int64_t ld = 0;
    int rc = blas_operand(a, p->n, p->k, &p->a, &trans, &ld, &copy);
    if (rc < 0)
        return rc;
    /* a transposed operand is the row-major [k, n] matrix A^T */
    gemv_job j = {dtype, trans, trans ? p->k : p->n, trans ? p->n : p->k, ld,
                  weft_tensor_stride(x, 0), 0, p->a.data, weft_tensor_data_ptr(x),
                  weft_tensor_data_ptr(y)};
    int64_t outs = p->n, pieces = 1;
    if ((double)p->n * (double)p->k >= (double)GEMV_SPLIT && outs >= 2 * GEMV_MIN_OUTS) {
        pieces = weft_get_num_threads();
        if (pieces > outs / GEMV_MIN_OUTS)
            pieces = outs / GEMV_MIN_OUTS;
    }
    /* blocks of a multiple of 16 entries: whole vectors of the kernels */
    int64_t block = (outs + pieces - 1) / pieces;
    j.block = pieces > 1 ? (block + 15) / 16 * 16 : outs;
    pieces = (outs + j.block - 1) / j.block;
    if (pieces <= 1)
        gemv_pieces(0, 1, &j);
    else
        cpu__parallel_for(0, pieces, 1, gemv_pieces, &j);
    weft_tensor_release(copy);
    return 0;
}

/* mv, mv_out: (out,) self [n, k], vec [k] -> [n]: gemv, or a product with
 * m = 1 for the other dtypes */
static int mv_kernel(weft_call *call, void *ctx)
{
    bool out_form = ctx != NULL;
    const char *op = weft_op_name(call->op);
    weft_tensor *out = out_form ? call->args[0].u.tensor : NULL;
    const weft_tensor *self = call->args[out_form].u.tensor, *vec = call->args[out_form + 1].u.tensor;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = cpu__check_cpu(op, "vec", vec);
    if (rc == 0 && out)
        rc = cpu__check_cpu(op, "out", out);
    if (rc < 0)
        return rc;
    char bs[128], bv[128];
    if (weft_tensor_ndim(self) != 2 || weft_tensor_ndim(vec) != 1 ||
        weft_tensor_size(self, 1) != weft_tensor_size(vec, 0))
        return weft_set_error(WEFT_ESHAPE, "%s: expected a matrix [n, k] and a vector [k], got "
                              "self %s and vec %s", op,
                              weft_format_shape(bs, sizeof bs, weft_tensor_sizes(self),
                                             weft_tensor_ndim(self)),
                              weft_format_shape(bv, sizeof bv, weft_tensor_sizes(vec),
                                             weft_tensor_ndim(vec)));
    weft_dtype dtype = weft_tensor_dtype(self);
    if (weft_tensor_dtype(vec) != dtype || (out && weft_tensor_dtype(out) != dtype))
        return weft_set_error(WEFT_EDTYPE, "%s: self, vec%s must have one dtype, got %s and %s",
                              op, out ? " and out" : "", weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(weft_tensor_dtype(vec) != dtype
                                                                    ? vec : out)));
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES || !gemm_kernels[dtype])
        return cpu__unsupported_dtype(op, dtype);
    int64_t n = weft_tensor_size(self, 0);
    if (out && (rc = cpu__prepare_target(op, out, true, &n, 1, "expected")) < 0)
        return rc;
    product p = {.batch = 1, .n = n, .k = weft_tensor_size(self, 1), .m = 1};
    weft_tensor *dest = NULL, *column = NULL, *dest_column = NULL;
    rc = weft_empty(&dest, &n, 1, dtype, WEFT_DEVICE_CPU);
    int64_t incx = weft_tensor_stride(vec, 0);
    bool gemv = (dtype == WEFT_FLOAT32 || dtype == WEFT_FLOAT64) && n <= INT_MAX &&
                p.k <= INT_MAX && incx >= 1 && incx <= INT_MAX && n > 0 && p.k > 0;
    if (rc == 0 && gemv) /* gemm with one column is several times slower */
        rc = blas_matrix_vector(dtype, self, vec, dest, &p);
    else if (rc == 0 && (rc = weft_unsqueeze(&column, vec, 1)) == 0 &&
             (rc = weft_unsqueeze(&dest_column, dest, 1)) == 0)
        rc = run_product(dtype, self, column, dest_column, &p);
    weft_tensor_release(column);
    weft_tensor_release(dest_column);
    return cpu__deliver(call, out, dest, rc);
}

/* ----------------------------------------------------------- dot, vdot */

/* The sum of a[i] * b[i] (conjugating a when asked: vdot), accumulated
 * as the matrix products do; the result is written to *out. */
typedef void (*dot_fn)(const void *a, int64_t sa, const void *b, int64_t sb, int64_t n,
                       bool conjugate, void *out);
#define DOT_KEEP(x) (x)
#define DEFINE_DOT_(NAME, T, C, U, CONJ)                                                   \
    static void dot_##NAME(const void *pa, int64_t sa, const void *pb, int64_t sb, int64_t n,  \
                           bool conjugate, void *out)                                      \
    {                                                                                      \
        const T *a = pa, *b = pb;                                                          \
        U sum = 0;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                  \
            U x = (U)cpu_load_##NAME(a[i * sa]);                                           \
            sum += (conjugate ? CONJ(x) : x) * (U)cpu_load_##NAME(b[i * sb]);              \
        }                                                                                  \
        *(T *)out = cpu_store_##NAME((C)sum);                                              \
    }
#define DEFINE_DOT_REAL(NAME, DTYPE, T, C, U) DEFINE_DOT_(NAME, T, C, U, DOT_KEEP)
CPU_DTYPES_INTEGRAL(DEFINE_DOT_REAL)
CPU_DTYPES_FLOATING(DEFINE_DOT_REAL)
DEFINE_DOT_(complex64, float _Complex, float _Complex, float _Complex, conjf)
DEFINE_DOT_(complex128, double _Complex, double _Complex, double _Complex, conj)

static const dot_fn dot_kernels[WEFT_NUM_DTYPES] = {
    CPU_ENTRIES_INTEGRAL(dot) CPU_ENTRIES_FLOATING(dot) CPU_ENTRIES_COMPLEX(dot)};

/* dot, dot_out, vdot, vdot_out: (out,) self, other; ctx: the form */
typedef struct dot_form {
    bool conjugate;
    bool out;
} dot_form;

static int dot_kernel(weft_call *call, void *ctx)
{
    const dot_form *form = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *out = form->out ? call->args[0].u.tensor : NULL;
    const weft_tensor *a = call->args[form->out].u.tensor, *b = call->args[form->out + 1].u.tensor;
    const char *name_b = form->conjugate ? "other" : "tensor";
    int rc = cpu__check_cpu(op, "self", a);
    if (rc == 0)
        rc = cpu__check_cpu(op, name_b, b);
    if (rc == 0 && out)
        rc = cpu__check_cpu(op, "out", out);
    if (rc < 0)
        return rc;
    char ba[128], bb[128];
    if (weft_tensor_ndim(a) != 1 || weft_tensor_ndim(b) != 1 ||
        weft_tensor_size(a, 0) != weft_tensor_size(b, 0))
        return weft_set_error(WEFT_ESHAPE, "%s: expected two 1-D tensors of the same size, got "
                              "self %s and %s %s", op,
                              weft_format_shape(ba, sizeof ba, weft_tensor_sizes(a), weft_tensor_ndim(a)),
                              name_b,
                              weft_format_shape(bb, sizeof bb, weft_tensor_sizes(b), weft_tensor_ndim(b)));
    weft_dtype dtype = weft_tensor_dtype(a);
    if (weft_tensor_dtype(b) != dtype)
        return weft_set_error(WEFT_EDTYPE, "%s: expected both vectors to have the same dtype, but "
                              "found %s and %s", op, weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(b)));
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES || !dot_kernels[dtype])
        return cpu__unsupported_dtype(op, dtype);
    if (out && weft_tensor_dtype(out) != dtype)
        return weft_set_error(WEFT_EDTYPE, "%s: expected out to have dtype %s, but got %s", op,
                              weft_dtype_name(dtype), weft_dtype_name(weft_tensor_dtype(out)));
    static const int64_t no_sizes[1] = {0}; /* a 0-d result */
    if (out && (rc = cpu__prepare_target(op, out, true, no_sizes, 0, "expected")) < 0)
        return rc;
    weft_tensor *dest = NULL;
    if ((rc = weft_empty(&dest, no_sizes, 0, dtype, WEFT_DEVICE_CPU)) < 0)
        return rc;
    int64_t n = weft_tensor_size(a, 0), sa = weft_tensor_stride(a, 0), sb = weft_tensor_stride(b, 0);
    const void *pa = weft_tensor_data_ptr(a), *pb = weft_tensor_data_ptr(b);
    void *pd = weft_tensor_data_ptr(dest);
    bool blas = n <= INT_MAX && sa >= 1 && sa <= INT_MAX && sb >= 1 && sb <= INT_MAX;
    if (blas && dtype == WEFT_FLOAT32)
        *(float *)pd = cblas_sdot((int)n, pa, (int)sa, pb, (int)sb);
    else if (blas && dtype == WEFT_FLOAT64)
        *(double *)pd = cblas_ddot((int)n, pa, (int)sa, pb, (int)sb);
    else
        dot_kernels[dtype](pa, sa, pb, sb, n, form->conjugate, pd);
    return cpu__deliver(call, out, dest, 0);
}

static const product_form mm_form = {false, false}, mm_out_form = {false, true};
static const addbmm_form baddbmm_form = {false, CPU_FUNCTIONAL}, baddbmm_inplace_form = {false, CPU_INPLACE};
static const addbmm_form baddbmm_out_form = {false, CPU_OUT}, addbmm_plain = {true, CPU_FUNCTIONAL};
static const addbmm_form addbmm_inplace_form = {true, CPU_INPLACE}, addbmm_out_form = {true, CPU_OUT};
static const dot_form dot_plain = {false, false}, dot_out_form = {false, true};
static const dot_form vdot_plain = {true, false}, vdot_out_form = {true, true};
static const int mv_out_marker = 1;
static const product_form bmm_form = {true, false}, bmm_out_form = {true, true};
static const weft_kernel_entry blas_entries[] = {
    {"mm", product_kernel, &mm_form},
    {"mm_out", product_kernel, &mm_out_form},
    {"bmm", product_kernel, &bmm_form},
    {"bmm_out", product_kernel, &bmm_out_form},
    {"baddbmm", addbmm_kernel, &baddbmm_form},
    {"baddbmm_", addbmm_kernel, &baddbmm_inplace_form},
    {"baddbmm_out", addbmm_kernel, &baddbmm_out_form},
    {"addbmm", addbmm_kernel, &addbmm_plain},
    {"addbmm_", addbmm_kernel, &addbmm_inplace_form},
    {"addbmm_out", addbmm_kernel, &addbmm_out_form},
    {"mv", mv_kernel, NULL},
    {"mv_out", mv_kernel, &mv_out_marker},
    {"dot", dot_kernel, &dot_plain},
    {"dot_out", dot_kernel, &dot_out_form},
    {"vdot", dot_kernel, &vdot_plain},
    {"vdot_out", dot_kernel, &vdot_out_form},
};

int cpu__register_blas(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, blas_entries, sizeof blas_entries / sizeof *blas_entries);
}
