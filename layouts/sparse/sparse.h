/* layouts/sparse/sparse.h — what the sparse layout plugin's files share: the
 * two payloads (COO and CSR), how a tensor of either is made, the per-dtype
 * kernel table and the plugin's small thread pool.  Like any out-of-tree
 * plugin it sees only the installed SDK headers, never c10/ or dispatch/.
 * Prefix: sp__. */
#ifndef WEFT_LAYOUTS_SPARSE_H
#define WEFT_LAYOUTS_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

/* COO, hybrid: sparse_dim index dimensions, then dense_dim dense trailing
 * dimensions held by each value.  indices is int64 [sparse_dim, nnz] and
 * values [nnz, dense sizes...], both contiguous strided tensors owned (one
 * reference each) by the payload.  coalesced: the entries are sorted by
 * their row-major position and no position repeats. */
typedef struct sp__coo {
    int sparse_dim, dense_dim;
    int64_t nnz;
    bool coalesced;
    /* false while the pattern is unvalidated (check_invariants=False, or
     * derived from such a pattern); see sp__require_valid */
    _Atomic bool valid;
    weft_tensor *indices;
    weft_tensor *values;
} sp__coo;

/* CSR: sizes [B?, rows, cols]; crow [B?, rows + 1], col [B?, nnz] and
 * values [B?, nnz], contiguous; crow and col share an index dtype, int32 or
 * int64.  nnz is per batch entry (every batch entry has the same). */
typedef struct sp__csr {
    int batch; /* 0 or 1 batch dimension */
    int64_t nnz;
    _Atomic bool valid; /* as sp__coo's */
    weft_tensor *crow, *col, *values;
} sp__csr;

extern int sp__coo_layout, sp__csr_layout;

static inline bool sp__is_coo(const weft_tensor *t)
{
    return t && weft_tensor_layout(t) == sp__coo_layout;
}
static inline bool sp__is_csr(const weft_tensor *t)
{
    return t && weft_tensor_layout(t) == sp__csr_layout;
}
static inline sp__coo *sp__coo_of(const weft_tensor *t)
{
    return weft_tensor_layout_payload(t);
}
static inline sp__csr *sp__csr_of(const weft_tensor *t)
{
    return weft_tensor_layout_payload(t);
}

/* The name an error message gives t's layout ("sparse_coo", "strided"). */
const char *sp__layout_name(const weft_tensor *t);
/* Releases ts[0..n) (NULL entries are fine). */
void sp__release_all(weft_tensor *const *ts, int n);

/* Makes a COO tensor of sizes[ndim] taking over one reference each of
 * indices and values (released on failure too), on values' device, its
 * pattern marked valid (a caller wrapping unchecked indices clears the
 * flag).  Shapes are not checked: callers have done it.  payload.c, shared
 * by both sparse plugins, as the rest down to sp__inherit_valid. */
int sp__coo_wrap(weft_tensor **out, const int64_t *sizes, int ndim, weft_tensor *indices,
                 weft_tensor *values, int sparse_dim, bool coalesced);
/* Likewise for CSR (crow, col, values taken over). */
int sp__csr_wrap(weft_tensor **out, const int64_t *sizes, int ndim, weft_tensor *crow,
                 weft_tensor *col, weft_tensor *values);

/* A contiguous copy of strided t (new tensor). */
int sp__copy(weft_tensor **out, const weft_tensor *t);

/* Every kernel that addresses memory through t's indices calls this
 * first (indices on a device are checked from one host copy): a pattern made with check_invariants=False (or derived from one)
 * is checked in full once, at its first such use, so bad indices are an
 * error naming `op` rather than a write out of bounds; torch leaves that
 * undefined.  Other patterns cost one load. */
int sp__require_valid(const weft_tensor *t, const char *op);
/* Marks out's pattern as valid only if every source's is (for kernels that
 * pass a pattern on without addressing memory through it). */
void sp__inherit_valid(const weft_tensor *out, const weft_tensor *const *src, int n);

/* indices() and values() of a COO tensor: 0 when it is coalesced, else
 * WEFT_EINVAL naming `op` (check.c).  Its entries may repeat a position,
 * and code reading them as the tensor's nonzeros would count a value
 * twice: torch refuses too, and _indices()/_values() give the raw arrays. */
int sp__require_coalesced(const char *op, const weft_tensor *t);

/* Full checks of a constructor's arguments (check.c); `op` names the
 * caller in the messages.  Only shapes, dtypes and sizes are read from
 * values; with check_invariants the index tensors are read on the host, so
 * they must be CPU tensors then (the CUDA plugin passes host copies).
 * Devices are not checked here: the callers do it. */
int sp__coo_check(const char *op, const weft_tensor *indices, const weft_tensor *values,
                  const int64_t *sizes, int ndim, bool check_invariants);
int sp__csr_check(const char *op, const weft_tensor *crow, const weft_tensor *col,
                  const weft_tensor *values, const int64_t *sizes, int ndim,
                  bool check_invariants);

/* Conversions; each makes a new tensor and leaves its input alone. */
int sp__coo_to_dense(weft_tensor **out, const weft_tensor *t);
int sp__csr_to_dense(weft_tensor **out, const weft_tensor *t);
int sp__dense_to_coo(weft_tensor **out, const weft_tensor *src, int sparse_dim);
int sp__dense_to_csr(weft_tensor **out, const weft_tensor *src);
int sp__coo_to_csr(weft_tensor **out, const weft_tensor *t);
int sp__csr_to_coo(weft_tensor **out, const weft_tensor *t);
/* A coalesced copy of COO t (t itself, retained, when already coalesced). */
int sp__coalesce(weft_tensor **out, const weft_tensor *t);
/* What strided src holds at each entry of a pattern, one value block per
 * entry (duplicates each get their position's whole value): COO when col
 * is NULL (ix: int64 indices [sparse_dim, nnz]; values [nnz, dense sizes]),
 * CSR otherwise (ix: crow, int32 or int64; values [B?, nnz]); sizes[ndim]
 * is the pattern's shape, src's too.  The indices must be in range.  A new
 * contiguous tensor of src's dtype: the constructors' backward and
 * sparse_mask. */
int sp__gather_pattern(weft_tensor **out, const weft_tensor *src, const weft_tensor *ix,
                       const weft_tensor *col, const int64_t *sizes, int ndim);
/* sparse_mask: strided self read at mask's entries, a new tensor in mask's
 * layout with mask's pattern (COO: its coalesced pattern, so a position
 * repeated in mask appears once) and self's dtype. */
int sp__sparse_mask(weft_tensor **out, const weft_tensor *self, const weft_tensor *mask);

/* out = a @ b for sparse 2-D a (COO or CSR) and strided b (2-D, or 1-D
 * for mv); a new strided tensor.  `op` names the caller in errors. */
int sp__spmm(weft_tensor **out, const weft_tensor *a, const weft_tensor *b, const char *op);
/* COO t with dimensions d0 and d1 swapped (both sparse or both dense; negative
 * counts from the end): a new tensor sharing nothing it would write. */
int sp__coo_transpose(weft_tensor **out, const weft_tensor *t, int64_t d0, int64_t d1);
/* t (COO or CSR) with its values converted to dtype, the pattern shared
 * (ops.c: the kernel of sparse_to_dtype, and its backward). */
int sp__to_dtype(weft_tensor **out, const weft_tensor *t, weft_dtype dtype);
/* An operator by name through the dispatcher, autograd included (so a
 * composition of them is differentiated with the operators' formulas): its
 * one tensor result in *out (NULL on error).  sp__call_ints takes t and up
 * to three ints.  plugin.c. */
int sp__call(weft_tensor **out, const char *name, const weft_value *args, int nargs);
int sp__call_ints(weft_tensor **out, const char *name, const weft_tensor *t, const int64_t *ints,
                  int nints);
/* The layout interface's view hook of both sparse layouts (views.c): the
 * core's transpose, permute, select, narrow, contiguous and alias of a
 * sparse tensor, through the plugin's operators so that autograd records
 * them. */
int sp__layout_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v);
/* Whether a tensor argument of call requires grad with grad mode on: the
 * core's formulas for mm, mv, addmm and index_select leave a call with a
 * plugin-layout operand to the layout's kernel (formula layout_records),
 * which then records its own node (autograd.c): */
bool sp__needs_grad(const weft_call *call);
/* the products (mm, mv, matmul, addmm) as a custom function whose node
 * gives the sparse operand a sparse gradient on its own pattern
 * (torch.sparse.mm's) and the dense ones dense gradients; */
int sp__product_autograd(weft_call *call);
/* index_select of a sparse tensor: the gradient's entries sent back to
 * the positions they were selected from (a sparse gradient stays sparse). */
int sp__index_select_autograd(weft_call *call);
/* sum of a sparse tensor (the core's formula leaves it to the layout): the
 * gradient has the input's coalesced pattern, each entry getting the
 * incoming gradient at its position (torch.sparse.sum's backward). */
int sp__sum_autograd(weft_call *call);
/* cat of sparse tensors: each input's gradient is its slice of the
 * incoming one, in the input's layout (a sparse gradient stays sparse). */
int sp__cat_autograd(weft_call *call);
/* A conversion between layouts (to_sparse, to_sparse_csr) that the core's
 * differentiable weft_to_layout does not cover, run as a custom function
 * whose gradient goes back to the input's layout (autograd.c). */
int sp__conversion_autograd(weft_call *call);

/* float32, float64, int32 and int64 values: every kernel is written once on
 * this table and instantiated per dtype in kernels.c. */
typedef struct sp__kernels {
    /* y[0..n) += a * x[0..n) */
    void (*axpy)(int64_t n, double a, const void *x, void *y);
    /* CSR (int64 or int32 indices) times dense [K, n] rows [r0, r1):
     * out[i, :] = sum_k val[k] * b[col[k], :] */
    void (*spmm_rows)(int64_t r0, int64_t r1, const void *crow, const void *col, bool idx32,
                      const void *val, const void *b, int64_t n, void *out);
    /* a[i] *= b[i] */
    void (*mul)(int64_t n, const void *b, void *a);
    /* sum of x[i] * y[i] over [0, n) */
    double (*dot)(int64_t n, const void *x, const void *y);
    /* whether any of x[0..n) is not zero */
    bool (*nonzero)(int64_t n, const void *x);
} sp__kernels;
/* The table of dtype, or NULL with WEFT_EDTYPE set naming `op`. */
const sp__kernels *sp__kernels_for(weft_dtype dtype, const char *op);

/* Runs fn(chunk, nchunks, ctx) for chunk = 0..nchunks-1, nchunks being at
 * most weft_get_num_threads() and at most ceil(n / grain); the caller runs
 * chunk 0.  Threads are started per call (a sparse kernel's work dwarfs
 * that) so the plugin leaves nothing running when it is unloaded.  Returns
 * the number of chunks used. */
typedef void (*sp__chunk_fn)(int chunk, int nchunks, void *ctx);
int sp__parallel(int64_t n, int64_t grain, sp__chunk_fn fn, void *ctx);
/* Exactly nchunks chunks (1..64), whatever the thread setting. */
int sp__parallel_chunks(int nchunks, sp__chunk_fn fn, void *ctx);
/* [begin, end) of chunk c of nchunks over n items. */
static inline void sp__chunk_range(int64_t n, int c, int nchunks, int64_t *begin, int64_t *end)
{
    *begin = n * c / nchunks;
    *end = n * (c + 1) / nchunks;
}

/* Stable parallel radix sort of keys[0..n) (each < limit) carrying perm;
 * on return keys are ascending and perm holds each key's original position.
 * Ties keep their input order, whatever the thread count. */
int sp__sort_keys(int64_t *keys, int64_t *perm, int64_t n, int64_t limit);

/* Kernel registration of each file (plugin.c calls them from init). */
int sp__register_construct(weft_registrar *reg);
int sp__register_ops(weft_registrar *reg);
int sp__register_autograd(weft_registrar *reg);

#endif /* WEFT_LAYOUTS_SPARSE_H */
