/* layouts/sparse/cuda/plugin.c — libweft-sparse_cuda.so: COO and CSR tensors
 * whose components are CUDA tensors (issue 16).  It registers kernels for
 * the sparse layouts' keys on the cuda device type, and the constructors at
 * the cuda Dense slot (their arguments are strided CUDA tensors).  It knows
 * the sparse payloads (layouts/sparse/sparse.h) but not the sparse plugin's
 * code, and nothing of the CUDA plugin: memory comes from weft_empty on the
 * device (the caching allocator), the stream from weft_current_stream.
 * The file name sorts after libweft-sparse.so, so the loader (which goes in
 * name order) has registered the layouts before init looks them up.
 * Prefix: spc_ (all static here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include <cuda_runtime.h>
/* cusparse.h marks its legacy API deprecated; only the generic one and
 * Xcoo2csr/Xcsr2coo are used here */
#define DISABLE_CUSPARSE_DEPRECATED
#include <cusparse.h>

#include "layouts/sparse/sparse.h"

/* cuSPARSE is opened with dlopen at the first sparse operation on a GPU,
 * not linked: a machine without a GPU (CI) never maps it, as the CUDA
 * plugin does with cuBLAS and cuDNN (backends/cuda/libs.c), and valgrind
 * does not see glibc read past the end of its $ORIGIN runpath while the
 * plugin loads (tests/install.sh ran the guide's program under valgrind
 * and failed on exactly that).  The calls below keep their names: each is
 * a macro for the table's pointer, filled before the first handle. */
#define SPC_CUSPARSE_FUNCTIONS(X)                                                         \
    X(cusparseGetErrorString) X(cusparseCreate) X(cusparseSetStream) X(cusparseCreateCsr) \
    X(cusparseCreateCoo) X(cusparseCreateDnMat) X(cusparseCreateDnVec)                    \
    X(cusparseDestroySpMat) X(cusparseDestroyDnMat) X(cusparseDestroyDnVec)               \
    X(cusparseSpMM_bufferSize) X(cusparseSpMM) X(cusparseSpMV_bufferSize) X(cusparseSpMV) \
    X(cusparseXcoo2csr) X(cusparseXcsr2coo)
#define SPC_MEMBER(f) __typeof__(&f) p_##f;
static struct {
    SPC_CUSPARSE_FUNCTIONS(SPC_MEMBER)
} cs;
#define SPC_NAME(f) #f,
static const char *const cs_names[] = {SPC_CUSPARSE_FUNCTIONS(SPC_NAME)};
#define SPC_STR(x) #x
#define SPC_XSTR(x) SPC_STR(x)
#define SPC_SONAME "libcusparse.so." SPC_XSTR(CUSPARSE_VER_MAJOR)

static pthread_once_t cs_once = PTHREAD_ONCE_INIT;
static char cs_why[256]; /* empty when the table is filled */

static void cs_open(void)
{
    void *h = dlopen(SPC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cs_why, sizeof cs_why, "cannot open " SPC_SONAME ": %s", dlerror());
        return;
    }
    void **slots = (void **)&cs;
    for (size_t i = 0; i < sizeof cs_names / sizeof *cs_names; i++)
        if (!(slots[i] = dlsym(h, cs_names[i]))) {
            snprintf(cs_why, sizeof cs_why, SPC_SONAME " has no %s", cs_names[i]);
            dlclose(h);
            return;
        }
}

static int cs_load(const char *op)
{
    pthread_once(&cs_once, cs_open);
    return cs_why[0] ? weft_set_error(WEFT_ENOTSUP, "%s: %s", op, cs_why) : 0;
}

#define SPC_CALL(f) (cs.p_##f)
#define cusparseGetErrorString SPC_CALL(cusparseGetErrorString)
#define cusparseCreate SPC_CALL(cusparseCreate)
#define cusparseSetStream SPC_CALL(cusparseSetStream)
#define cusparseCreateCsr SPC_CALL(cusparseCreateCsr)
#define cusparseCreateCoo SPC_CALL(cusparseCreateCoo)
#define cusparseCreateDnMat SPC_CALL(cusparseCreateDnMat)
#define cusparseCreateDnVec SPC_CALL(cusparseCreateDnVec)
#define cusparseDestroySpMat SPC_CALL(cusparseDestroySpMat)
#define cusparseDestroyDnMat SPC_CALL(cusparseDestroyDnMat)
#define cusparseDestroyDnVec SPC_CALL(cusparseDestroyDnVec)
#define cusparseSpMM_bufferSize SPC_CALL(cusparseSpMM_bufferSize)
#define cusparseSpMM SPC_CALL(cusparseSpMM)
#define cusparseSpMV_bufferSize SPC_CALL(cusparseSpMV_bufferSize)
#define cusparseSpMV SPC_CALL(cusparseSpMV)
#define cusparseXcoo2csr SPC_CALL(cusparseXcoo2csr)
#define cusparseXcsr2coo SPC_CALL(cusparseXcsr2coo)

/* sparse.h's payload helpers compare with these ids; here they are looked
 * up by name at init (this library's own hidden copies). */
int sp__coo_layout = -1, sp__csr_layout = -1;

#define CUDA_TYPE WEFT_DEVICE_TYPE_CUDA

/* ------------------------------------------------------------- helpers */

static int cusparse_error(cusparseStatus_t s, const char *op, const char *what)
{
    return weft_set_error(WEFT_EDEVICE, "%s: cuSPARSE %s failed: %s", op, what,
                          cusparseGetErrorString(s));
}

/* One handle per thread (cuSPARSE handles are not to be shared between
 * threads), bound to the device and the thread's current stream at each
 * use.  The handle lives until the thread exits (it is small). */
static int handle_for(cusparseHandle_t *out, weft_device device, const char *op)
{
    static __thread cusparseHandle_t h[16];
    if (device.index < 0 || device.index >= 16)
        return weft_set_error(WEFT_EDEVICE, "%s: cuda:%d is beyond the 16 devices handled", op,
                              device.index);
    cudaError_t ce = cudaSetDevice(device.index);
    if (ce != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cudaSetDevice(%d): %s", op, device.index,
                              cudaGetErrorString(ce));
    int rc = cs_load(op);
    if (rc < 0)
        return rc;
    cusparseStatus_t s;
    if (!h[device.index] && (s = cusparseCreate(&h[device.index])) != CUSPARSE_STATUS_SUCCESS)
        return cusparse_error(s, op, "cusparseCreate");
    cudaStream_t stream = (cudaStream_t)weft_stream_handle(weft_current_stream(device));
    if ((s = cusparseSetStream(h[device.index], stream)) != CUSPARSE_STATUS_SUCCESS)
        return cusparse_error(s, op, "cusparseSetStream");
    *out = h[device.index];
    return 0;
}

/* Every component on one CUDA device (the one of the first). */
static int same_cuda_device(const char *op, const weft_tensor *const *ts, const char *const *names,
                            int n)
{
    weft_device d = weft_tensor_device(ts[0]);
    for (int i = 0; i < n; i++) {
        weft_device e = weft_tensor_device(ts[i]);
        if (e.type != CUDA_TYPE || e.index != d.index) {
            char a[32], b[32];
            weft_device_to_string(d, a, sizeof a);
            weft_device_to_string(e, b, sizeof b);
            return weft_set_error(WEFT_EDEVICE,
                                  "%s: %s is on %s but %s is on %s: the components of a CUDA "
                                  "sparse tensor must share one CUDA device",
                                  op, names[i], b, names[0], a);
        }
    }
    return 0;
}

/* Gradients are not carried through these kernels yet: refuse rather than
 * drop one. */
static int no_grad(const weft_tensor *t, const char *op)
{
    if (weft_is_grad_enabled() && weft_tensor_requires_grad(t))
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: no gradient through layout '%s' on CUDA yet; detach it or "
                              "compute on the CPU",
                              op, sp__layout_name(t));
    return 0;
}

/* Host copies of index tensors: the one copy a validation costs.  The
 * checks themselves are the CPU plugin's (check.c, compiled in here too),
 * so the messages are the same on both devices. */
static int to_host(weft_tensor **out, const weft_tensor *t)
{
    return weft_to_device(out, t, WEFT_DEVICE_CPU);
}

/* ------------------------------------------------------- construction */

static int coo_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "sparse_coo_tensor";
    const weft_tensor *indices = weft_arg_tensor(call, 0), *values = weft_arg_tensor(call, 1);
    int ndim;
    const int64_t *sizes = weft_arg_ints(call, 2, &ndim);
    bool check = weft_arg_bool(call, 3);
    int rc = same_cuda_device(op, (const weft_tensor *[]){values, indices},
                              (const char *[]){"values", "indices"}, 2);
    weft_tensor *host = NULL, *ix = NULL, *v = NULL, *out;
    if (rc == 0 && check)
        rc = to_host(&host, indices);
    if (rc == 0)
        rc = sp__coo_check(op, check ? host : indices, values, sizes, ndim, check);
    weft_tensor_release(host);
    if (rc == 0)
        rc = weft_contiguous(&ix, indices);
    if (rc == 0)
        rc = weft_contiguous(&v, values);
    if (rc < 0) {
        weft_tensor_release(ix);
        return rc;
    }
    rc = sp__coo_wrap(&out, sizes, ndim, ix, v, (int)weft_tensor_size(indices, 0), false);
    if (rc == 0)
        sp__coo_of(out)->valid = check;
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int csr_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "sparse_csr_tensor";
    const weft_tensor *crow = weft_arg_tensor(call, 0), *col = weft_arg_tensor(call, 1),
                      *values = weft_arg_tensor(call, 2);
    int ndim;
    const int64_t *sizes = weft_arg_ints(call, 3, &ndim);
    bool check = weft_arg_bool(call, 4);
    int rc = same_cuda_device(op, (const weft_tensor *[]){values, crow, col},
                              (const char *[]){"values", "crow_indices", "col_indices"}, 3);
    weft_tensor *hr = NULL, *hc = NULL, *c0 = NULL, *c1 = NULL, *v = NULL, *out;
    if (rc == 0 && check)
        rc = to_host(&hr, crow);
    if (rc == 0 && check)
        rc = to_host(&hc, col);
    if (rc == 0)
        rc = sp__csr_check(op, check ? hr : crow, check ? hc : col, values, sizes, ndim, check);
    weft_tensor_release(hr);
    weft_tensor_release(hc);
    if (rc == 0)
        rc = weft_contiguous(&c0, crow);
    if (rc == 0)
        rc = weft_contiguous(&c1, col);
    if (rc == 0)
        rc = weft_contiguous(&v, values);
    if (rc < 0) {
        weft_tensor_release(c0);
        weft_tensor_release(c1);
        return rc;
    }
    rc = sp__csr_wrap(&out, sizes, ndim, c0, c1, v);
    if (rc == 0)
        sp__csr_of(out)->valid = check;
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ---------------------------------------------------------- conversions */

/* int64 -> int32 index copy on the device for cuSPARSE's Xcoo2csr and
 * Xcsr2coo, which take 32-bit indices only; n is checked by the caller. */
static int as_int32(weft_tensor **out, const weft_tensor *t)
{
    if (weft_tensor_dtype(t) == WEFT_INT32)
        return weft_contiguous(out, t);
    return weft_to_dtype(out, t, WEFT_INT32);
}

static int fits_int32(const char *op, int64_t rows, int64_t nnz)
{
    if (rows >= INT32_MAX || nnz >= INT32_MAX)
        return weft_set_error(WEFT_EOVERFLOW,
                              "%s: cuSPARSE's index conversions take 32-bit indices; %lld rows "
                              "and %lld entries do not fit",
                              op, (long long)rows, (long long)nnz);
    return 0;
}

/* The row index of each entry of a 2-D CSR tensor, int64 [nnz]
 * (cusparseXcsr2coo on 32-bit copies). */
static int csr_rows(weft_tensor **out, const weft_tensor *t, const char *op)
{
    const sp__csr *p = sp__csr_of(t);
    int64_t rows = weft_tensor_size(t, 0), nnz = p->nnz;
    int rc = fits_int32(op, rows, nnz);
    weft_tensor *crow32 = NULL, *rows32 = NULL;
    cusparseHandle_t h;
    if (rc == 0)
        rc = as_int32(&crow32, p->crow);
    if (rc == 0)
        rc = weft_empty(&rows32, (int64_t[]){nnz}, 1, WEFT_INT32, weft_tensor_device(t));
    if (rc == 0 && nnz > 0)
        rc = handle_for(&h, weft_tensor_device(t), op);
    if (rc == 0 && nnz > 0) {
        cusparseStatus_t s =
            cusparseXcsr2coo(h, weft_tensor_data_ptr(crow32), (int)nnz, (int)rows,
                             weft_tensor_data_ptr(rows32), CUSPARSE_INDEX_BASE_ZERO);
        if (s != CUSPARSE_STATUS_SUCCESS)
            rc = cusparse_error(s, op, "cusparseXcsr2coo");
    }
    if (rc == 0)
        rc = weft_to_dtype(out, rows32, WEFT_INT64);
    weft_tensor_release(crow32);
    weft_tensor_release(rows32);
    return rc;
}

static int refuse_batched(const weft_tensor *t, const char *op)
{
    if (sp__is_csr(t) && sp__csr_of(t)->batch)
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: batched CSR tensors on CUDA are not supported yet; move "
                              "them to the CPU",
                              op);
    return 0;
}

/* COO [sparse_dim, nnz] int64 indices of t (COO: its own; CSR: rows from
 * crow, columns widened to int64), a new reference. */
static int coo_indices_of(weft_tensor **out, const weft_tensor *t, const char *op)
{
    if (sp__is_coo(t)) {
        *out = weft_tensor_retain(sp__coo_of(t)->indices);
        return 0;
    }
    weft_tensor *r = NULL, *c = NULL, *rr = NULL, *cc = NULL;
    int rc = csr_rows(&r, t, op);
    if (rc == 0)
        rc = weft_to_dtype(&c, sp__csr_of(t)->col, WEFT_INT64);
    if (rc == 0)
        rc = weft_unsqueeze(&rr, r, 0);
    if (rc == 0)
        rc = weft_unsqueeze(&cc, c, 0);
    if (rc == 0)
        rc = weft_cat(out, (weft_tensor *const[]){rr, cc}, 2, 0);
    weft_tensor *all[] = {r, c, rr, cc};
    sp__release_all(all, 4);
    return rc;
}

/* to_dense: zeros, then the values added at their positions by the
 * device's index_put_ with accumulate (duplicates sum, in the CPU's
 * order); hybrid COO (dense dims) comes for free. */
static int to_dense_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "to_dense";
    const weft_tensor *t = weft_arg_tensor(call, 0);
    int rc = no_grad(t, op);
    if (rc == 0)
        rc = refuse_batched(t, op);
    if (rc == 0)
        rc = sp__require_valid(t, op);
    if (rc < 0)
        return rc;
    int sd = sp__is_coo(t) ? sp__coo_of(t)->sparse_dim : 2;
    weft_tensor *ix = NULL, *d = NULL, *rows[WEFT_MAX_DIMS] = {0};
    const weft_tensor *val = sp__is_coo(t) ? sp__coo_of(t)->values : sp__csr_of(t)->values;
    rc = coo_indices_of(&ix, t, op);
    if (rc == 0)
        rc = weft_zeros(&d, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                        weft_tensor_device(t));
    for (int i = 0; rc == 0 && i < sd; i++)
        rc = weft_select(&rows[i], ix, 0, i);
    if (rc == 0 && weft_tensor_size(ix, 1) > 0)
        rc = weft_index_put_(d, rows, sd, val, true);
    sp__release_all(rows, sd);
    weft_tensor_release(ix);
    if (rc < 0) {
        weft_tensor_release(d);
        return rc;
    }
    return weft_return_tensor(call, 0, d);
}

/* coalesce: each entry's row-major position as one int64 key, the keys
 * sorted and made unique on the device (unique with the inverse), the
 * values summed per key by index_add and each key's indices put back by
 * scatter (every duplicate writes the same column). */
static int coalesce_coo(weft_tensor **out, const weft_tensor *t, const char *op)
{
    const sp__coo *p = sp__coo_of(t);
    if (p->coalesced) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    int rc = sp__require_valid(t, op);
    if (rc < 0)
        return rc;
    int sd = p->sparse_dim;
    const int64_t *sizes = weft_tensor_sizes(t);
    int64_t span = 1;
    for (int d = 0; d < sd; d++) {
        if (sizes[d] && span > INT64_MAX / sizes[d])
            return weft_set_error(WEFT_EOVERFLOW,
                                  "%s: the sparse dimensions' %s positions overflow int64", op,
                                  "row-major");
        span *= sizes[d];
    }
    weft_tensor *key = NULL, *keys = NULL, *inv = NULL, *val = NULL, *ix = NULL, *invx = NULL,
                *row = NULL, *tmp = NULL;
    rc = weft_zeros(&key, (int64_t[]){p->nnz}, 1, WEFT_INT64, weft_tensor_device(t));
    for (int d = 0; rc == 0 && d < sd; d++) {
        /* key = key * size[d] + indices[d] */
        weft_tensor *k2 = NULL;
        rc = weft_mul_scalar(&k2, key, (double)sizes[d]);
        if (rc == 0)
            rc = weft_select(&row, p->indices, 0, d);
        if (rc == 0) {
            weft_tensor_release(key);
            key = NULL;
            rc = weft_add_ex(&key, k2, row, 1.0);
        }
        weft_tensor_release(k2);
        weft_tensor_release(row);
        row = NULL;
    }
    /* every result pointer is required, counts too (seen on an H200:
     * "the result pointer 'out2' is NULL"); the empty counts go at once */
    weft_tensor *counts = NULL;
    if (rc == 0)
        rc = weft_unique(&keys, &inv, &counts, key, true, true, false, NULL);
    weft_tensor_release(counts);
    int64_t u = rc == 0 ? weft_tensor_size(keys, 0) : 0;
    int64_t vs[WEFT_MAX_DIMS];
    memcpy(vs, weft_tensor_sizes(p->values), (size_t)weft_tensor_ndim(p->values) * sizeof *vs);
    vs[0] = u;
    if (rc == 0)
        rc = weft_zeros(&tmp, vs, weft_tensor_ndim(p->values), weft_tensor_dtype(t),
                        weft_tensor_device(t));
    if (rc == 0)
        rc = weft_index_add(&val, tmp, 0, inv, p->values);
    weft_tensor_release(tmp);
    tmp = NULL;
    if (rc == 0)
        rc = weft_zeros(&tmp, (int64_t[]){sd, u}, 2, WEFT_INT64, weft_tensor_device(t));
    if (rc == 0)
        rc = weft_unsqueeze(&row, inv, 0);
    if (rc == 0)
        rc = weft_expand(&invx, row, (int64_t[]){sd, p->nnz}, 2);
    if (rc == 0)
        rc = weft_scatter(&ix, tmp, 1, invx, p->indices);
    weft_tensor *all[] = {key, keys, inv, invx, row, tmp};
    sp__release_all(all, 6);
    if (rc < 0) {
        weft_tensor_release(ix);
        weft_tensor_release(val);
        return rc;
    }
    return sp__coo_wrap(out, sizes, weft_tensor_ndim(t), ix, val, sd, true);
}

static int coalesce_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0);
    weft_tensor *out;
    int rc = no_grad(t, "coalesce");
    if (rc == 0)
        rc = coalesce_coo(&out, t, "coalesce");
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* COO (2-D, coalesced on the way) to CSR: crow by cusparseXcoo2csr on the
 * sorted rows; int64 indices as COO's. */
static int coo_to_csr(weft_tensor **out, const weft_tensor *t, const char *op)
{
    const sp__coo *p = sp__coo_of(t);
    if (weft_tensor_ndim(t) != 2 || p->sparse_dim != 2)
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: on CUDA a COO tensor converts to CSR when it is a 2-D matrix "
                              "with 2 sparse dims, got %d-D with %d",
                              op, weft_tensor_ndim(t), p->sparse_dim);
    weft_tensor *c = NULL, *r32 = NULL, *crow32 = NULL, *crow = NULL, *col = NULL, *r = NULL;
    int64_t rows = weft_tensor_size(t, 0);
    int rc = coalesce_coo(&c, t, op);
    const sp__coo *q = rc == 0 ? sp__coo_of(c) : NULL;
    if (rc == 0)
        rc = fits_int32(op, rows, q->nnz);
    if (rc == 0)
        rc = weft_select(&r, q->indices, 0, 0);
    if (rc == 0)
        rc = as_int32(&r32, r);
    if (rc == 0)
        rc = weft_zeros(&crow32, (int64_t[]){rows + 1}, 1, WEFT_INT32, weft_tensor_device(t));
    if (rc == 0 && q->nnz > 0) {
        cusparseHandle_t h;
        rc = handle_for(&h, weft_tensor_device(t), op);
        cusparseStatus_t s = rc < 0 ? CUSPARSE_STATUS_SUCCESS
                                    : cusparseXcoo2csr(h, weft_tensor_data_ptr(r32), (int)q->nnz,
                                                       (int)rows, weft_tensor_data_ptr(crow32),
                                                       CUSPARSE_INDEX_BASE_ZERO);
        if (rc == 0 && s != CUSPARSE_STATUS_SUCCESS)
            rc = cusparse_error(s, op, "cusparseXcoo2csr");
    }
    if (rc == 0)
        rc = weft_to_dtype(&crow, crow32, WEFT_INT64);
    weft_tensor_release(r);
    r = NULL;
    if (rc == 0)
        rc = weft_select(&r, q->indices, 0, 1);
    if (rc == 0)
        rc = weft_contiguous(&col, r);
    weft_tensor *vals = rc == 0 ? weft_tensor_retain(q->values) : NULL;
    weft_tensor *all[] = {r, r32, crow32, c};
    sp__release_all(all, 4);
    if (rc < 0) {
        weft_tensor_release(crow);
        weft_tensor_release(col);
        return rc;
    }
    return sp__csr_wrap(out, weft_tensor_sizes(t), 2, crow, col, vals);
}

static int to_sparse_csr_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0);
    int rc = no_grad(t, "to_sparse_csr");
    if (rc < 0)
        return rc;
    weft_tensor *out;
    if (sp__is_csr(t)) {
        out = weft_tensor_retain(t);
        rc = 0;
    } else {
        rc = coo_to_csr(&out, t, "to_sparse_csr");
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* to_sparse of CSR: the rows expanded by cusparseXcsr2coo, sorted already
 * (CSR's rows ascend, their columns too): a coalesced COO. */
static int to_sparse_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "to_sparse";
    const weft_tensor *t = weft_arg_tensor(call, 0);
    int64_t sd = weft_arg_int(call, 1);
    int rc = no_grad(t, op);
    if (rc < 0)
        return rc;
    weft_tensor *out = NULL;
    if (sp__is_coo(t)) {
        if (sd != -1 && sd != sp__coo_of(t)->sparse_dim)
            return weft_set_error(WEFT_ENOTSUP,
                                  "to_sparse: changing a COO tensor's sparse_dim (%d to %lld) is "
                                  "not supported; go through to_dense",
                                  sp__coo_of(t)->sparse_dim, (long long)sd);
        return weft_return_tensor(call, 0, weft_tensor_retain(t));
    }
    if (sd != -1 && sd != weft_tensor_ndim(t))
        return weft_set_error(WEFT_ENOTSUP,
                              "to_sparse: a CSR tensor converts to COO with sparse_dim %d, not "
                              "%lld",
                              weft_tensor_ndim(t), (long long)sd);
    if ((rc = refuse_batched(t, op)) < 0 || (rc = sp__require_valid(t, op)) < 0)
        return rc;
    weft_tensor *ix = NULL;
    rc = coo_indices_of(&ix, t, op);
    if (rc < 0)
        return rc;
    rc = sp__coo_wrap(&out, weft_tensor_sizes(t), 2, ix, weft_tensor_retain(sp__csr_of(t)->values),
                      2, true);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ---------------------------------------------------------- products */

/* out = a @ b through cuSPARSE's generic API: a 2-D CSR (int32 or int64
 * indices) or COO (coalesced first: cuSPARSE's COO wants rows sorted), b a
 * strided matrix (SpMM, row-major) or vector (SpMV) on a's device. */
static int spmm(weft_tensor **out, const weft_tensor *a, const weft_tensor *b, const char *op)
{
    if (weft_tensor_layout(b) != WEFT_LAYOUT_STRIDED)
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: on CUDA a sparse matrix multiplies a strided one, got layouts "
                              "'%s' and '%s'",
                              op, sp__layout_name(a), sp__layout_name(b));
    int bd = weft_tensor_ndim(b);
    if (weft_tensor_ndim(a) != 2 || (bd != 1 && bd != 2))
        return weft_set_error(WEFT_ESHAPE,
                              "%s: needs a 2-D sparse matrix and a %s, got %d-D and %d-D", op,
                              strcmp(op, "mv") ? "2-D matrix" : "1-D vector", weft_tensor_ndim(a),
                              bd);
    if (sp__is_coo(a) && sp__coo_of(a)->sparse_dim != 2)
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: on CUDA a COO matrix must have 2 sparse dims (no dense ones)",
                              op);
    weft_dtype dt = weft_tensor_dtype(a);
    if (dt != weft_tensor_dtype(b))
        return weft_set_error(WEFT_EDTYPE, "%s: dtypes differ: %s and %s", op,
                              weft_dtype_name(dt), weft_dtype_name(weft_tensor_dtype(b)));
    /* cuSPARSE's SpMM here is set up for real floats (the CPU plugin also
     * takes integer values) */
    if (dt != WEFT_FLOAT32 && dt != WEFT_FLOAT64)
        return weft_set_error(WEFT_EDTYPE, "%s: sparse products on CUDA take float32 or float64 "
                                           "values, got %s",
                              op, weft_dtype_name(dt));
    weft_device dev = weft_tensor_device(a);
    if (!weft_device_equal(dev, weft_tensor_device(b))) {
        char x[32], y[32];
        weft_device_to_string(dev, x, sizeof x);
        weft_device_to_string(weft_tensor_device(b), y, sizeof y);
        return weft_set_error(WEFT_EDEVICE, "%s: the sparse matrix is on %s, the dense operand on "
                                            "%s",
                              op, x, y);
    }
    int64_t m = weft_tensor_size(a, 0), k = weft_tensor_size(a, 1);
    int64_t n = bd == 2 ? weft_tensor_size(b, 1) : 1;
    if (weft_tensor_size(b, 0) != k)
        return weft_set_error(WEFT_ESHAPE, "%s: shapes [%lld, %lld] and [%lld, ...] cannot be "
                                           "multiplied",
                              op, (long long)m, (long long)k, (long long)weft_tensor_size(b, 0));
    int rc = sp__require_valid(a, op);
    if (rc < 0)
        return rc;
    cudaDataType vt = dt == WEFT_FLOAT64 ? CUDA_R_64F : CUDA_R_32F;
    weft_tensor *ac = NULL, *bc = NULL, *o = NULL, *work = NULL;
    rc = sp__is_coo(a) ? coalesce_coo(&ac, a, op) : (ac = weft_tensor_retain(a), 0);
    if (rc == 0)
        rc = weft_contiguous(&bc, b);
    if (rc == 0)
        rc = weft_zeros(&o, bd == 2 ? (int64_t[]){m, n} : (int64_t[]){m}, bd, dt, dev);
    int64_t nnz = rc < 0 ? 0 : sp__is_coo(ac) ? sp__coo_of(ac)->nnz : sp__csr_of(ac)->nnz;
    if (rc < 0 || nnz == 0 || m == 0 || n == 0 || k == 0)
        goto done; /* zeros: cuSPARSE need not see an empty operand */
    cusparseHandle_t h;
    if ((rc = handle_for(&h, dev, op)) < 0)
        goto done;
    cusparseSpMatDescr_t A = NULL;
    cusparseDnMatDescr_t B = NULL, C = NULL;
    cusparseDnVecDescr_t x = NULL, y = NULL;
    cusparseStatus_t s;
    const char *what = "cusparseCreateCsr/Coo";
    if (sp__is_csr(ac)) {
        const sp__csr *p = sp__csr_of(ac);
        cusparseIndexType_t it =
            weft_tensor_dtype(p->crow) == WEFT_INT32 ? CUSPARSE_INDEX_32I : CUSPARSE_INDEX_64I;
        s = cusparseCreateCsr(&A, m, k, nnz, weft_tensor_data_ptr(p->crow),
                              weft_tensor_data_ptr(p->col), weft_tensor_data_ptr(p->values), it, it,
                              CUSPARSE_INDEX_BASE_ZERO, vt);
    } else {
        const sp__coo *p = sp__coo_of(ac);
        int64_t *ix = weft_tensor_data_ptr(p->indices);
        s = cusparseCreateCoo(&A, m, k, nnz, ix, ix + nnz, weft_tensor_data_ptr(p->values),
                              CUSPARSE_INDEX_64I, CUSPARSE_INDEX_BASE_ZERO, vt);
    }
    double one64 = 1.0, zero64 = 0.0;
    float one32 = 1.0f, zero32 = 0.0f;
    const void *alpha = dt == WEFT_FLOAT64 ? (const void *)&one64 : (const void *)&one32;
    const void *beta = dt == WEFT_FLOAT64 ? (const void *)&zero64 : (const void *)&zero32;
    size_t bytes = 0;
    if (bd == 2) {
        if (s == CUSPARSE_STATUS_SUCCESS && (what = "cusparseCreateDnMat"))
            s = cusparseCreateDnMat(&B, k, n, n, weft_tensor_data_ptr(bc), vt, CUSPARSE_ORDER_ROW);
        if (s == CUSPARSE_STATUS_SUCCESS)
            s = cusparseCreateDnMat(&C, m, n, n, weft_tensor_data_ptr(o), vt, CUSPARSE_ORDER_ROW);
        if (s == CUSPARSE_STATUS_SUCCESS && (what = "cusparseSpMM_bufferSize"))
            s = cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                        CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, A, B, beta, C, vt,
                                        CUSPARSE_SPMM_ALG_DEFAULT, &bytes);
    } else {
        if (s == CUSPARSE_STATUS_SUCCESS && (what = "cusparseCreateDnVec"))
            s = cusparseCreateDnVec(&x, k, weft_tensor_data_ptr(bc), vt);
        if (s == CUSPARSE_STATUS_SUCCESS)
            s = cusparseCreateDnVec(&y, m, weft_tensor_data_ptr(o), vt);
        if (s == CUSPARSE_STATUS_SUCCESS && (what = "cusparseSpMV_bufferSize"))
            s = cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, A, x, beta, y,
                                        vt, CUSPARSE_SPMV_ALG_DEFAULT, &bytes);
    }
    /* the workspace from the caching allocator, stream-ordered: released
     * right after the call is queued, reused only behind it */
    if (s == CUSPARSE_STATUS_SUCCESS && bytes)
        rc = weft_empty(&work, (int64_t[]){(int64_t)bytes}, 1, WEFT_UINT8, dev);
    if (rc == 0 && s == CUSPARSE_STATUS_SUCCESS) {
        void *w = work ? weft_tensor_data_ptr(work) : NULL;
        if (bd == 2 && (what = "cusparseSpMM"))
            s = cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                             alpha, A, B, beta, C, vt, CUSPARSE_SPMM_ALG_DEFAULT, w);
        else if (bd == 1 && (what = "cusparseSpMV"))
            s = cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, A, x, beta, y, vt,
                             CUSPARSE_SPMV_ALG_DEFAULT, w);
    }
    if (rc == 0 && s != CUSPARSE_STATUS_SUCCESS)
        rc = cusparse_error(s, op, what);
    if (A)
        cusparseDestroySpMat(A);
    if (B)
        cusparseDestroyDnMat(B);
    if (C)
        cusparseDestroyDnMat(C);
    if (x)
        cusparseDestroyDnVec(x);
    if (y)
        cusparseDestroyDnVec(y);
done:
    weft_tensor_release(work);
    weft_tensor_release(ac);
    weft_tensor_release(bc);
    if (rc < 0) {
        weft_tensor_release(o);
        return rc;
    }
    *out = o;
    return 0;
}

static int mm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    const char *op = weft_op_name(call->op);
    int rc = no_grad(a, op);
    if (rc == 0)
        rc = no_grad(b, op);
    if (rc == 0 && weft_tensor_layout(b) != WEFT_LAYOUT_STRIDED)
        rc = weft_set_error(WEFT_ENOTSUP,
                            "%s: sparse x sparse (layouts '%s' and '%s') is not supported on "
                            "CUDA yet",
                            op, sp__layout_name(a), sp__layout_name(b));
    if (rc == 0 && weft_tensor_layout(a) == WEFT_LAYOUT_STRIDED)
        rc = weft_set_error(WEFT_ENOTSUP,
                            "%s: strided x sparse (layout '%s') is not supported on CUDA; the "
                            "sparse operand goes first",
                            op, sp__layout_name(b));
    weft_tensor *out;
    if (rc == 0)
        rc = spmm(&out, a, b, op);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* addmm = beta * self + alpha * mat1 @ mat2, composed as the CPU plugin
 * composes it (beta = 0 ignores self, NaN included) */
static int addmm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0), *a = weft_arg_tensor(call, 1),
                      *b = weft_arg_tensor(call, 2);
    double beta = weft_arg_double(call, 3), alpha = weft_arg_double(call, 4);
    if (weft_tensor_layout(self) != WEFT_LAYOUT_STRIDED)
        return weft_set_error(WEFT_ENOTSUP, "addmm: self must be strided, got layout '%s'",
                              sp__layout_name(self));
    int rc = no_grad(a, "addmm");
    if (rc == 0)
        rc = no_grad(self, "addmm");
    weft_tensor *p = NULL, *s = NULL, *out = NULL;
    if (rc == 0)
        rc = spmm(&p, a, b, "addmm");
    if (rc < 0)
        return rc;
    if (beta == 0) {
        rc = weft_mul_scalar(&out, p, alpha);
    } else {
        rc = weft_mul_scalar(&s, self, beta);
        if (rc == 0)
            rc = weft_add_ex(&out, s, p, alpha);
    }
    if (rc == 0 && weft_tensor_ndim(out) != 2) {
        weft_tensor_release(out);
        rc = weft_set_error(WEFT_ESHAPE, "addmm: self does not broadcast to the product's shape");
    }
    weft_tensor_release(s);
    weft_tensor_release(p);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ---------------------------------------------------------------- init */

static int init(weft_registrar *reg)
{
    sp__coo_layout = weft_layout_lookup("sparse_coo");
    sp__csr_layout = weft_layout_lookup("sparse_csr");
    if (sp__coo_layout < 0 || sp__csr_layout < 0)
        return weft_set_error(WEFT_ENOTFOUND,
                              "sparse_cuda: the sparse layouts are not registered: "
                              "libweft-sparse.so must load first");
    int coo = weft_layout_key(sp__coo_layout), csr = weft_layout_key(sp__csr_layout);
    const weft_kernel_entry ctors[] = {
        {"sparse_coo_tensor", coo_tensor_kernel, NULL},
        {"sparse_csr_tensor", csr_tensor_kernel, NULL},
    };
    const weft_kernel_entry both[] = {
        {"to_dense", to_dense_kernel, NULL}, {"to_sparse", to_sparse_kernel, NULL},
        {"to_sparse_csr", to_sparse_csr_kernel, NULL}, {"mm", mm_kernel, NULL},
        {"mv", mm_kernel, NULL}, {"matmul", mm_kernel, NULL},
        {"addmm", addmm_kernel, NULL},
    };
    const weft_kernel_entry coo_only[] = {{"coalesce", coalesce_kernel, NULL}};
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, CUDA_TYPE, ctors, 2);
    if (rc == 0)
        rc = weft_register_kernel_table(reg, coo, CUDA_TYPE, both, sizeof both / sizeof *both);
    if (rc == 0)
        rc = weft_register_kernel_table(reg, csr, CUDA_TYPE, both, sizeof both / sizeof *both);
    if (rc == 0)
        rc = weft_register_kernel_table(reg, coo, CUDA_TYPE, coo_only, 1);
    return rc;
}

WEFT_PLUGIN_DEFINE("sparse_cuda", "baseline", "1.0", NULL, init, NULL);
