/* backends/cuda/index.c — the boxed indexing kernels: index_select,
 * embedding and gather through index.cu (elements moved by size, every
 * dtype), masked_fill and masked_fill_ as where() of a 0-d value.  Shapes
 * and index dtypes are checked before any launch; indices out of range
 * are found on the GPU and reported after one small read back, as an
 * error naming the index, with no output delivered. */
#include <stdio.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"

static bool same_cuda(const weft_tensor *a, const weft_tensor *b)
{
    weft_device x = weft_tensor_device(a), y = weft_tensor_device(b);
    return x.type == WFC_DEVICE_TYPE && y.type == x.type && x.index == y.index;
}

static int wrap_dim(const char *op, int64_t dim, int nd, int *out)
{
    int range = nd > 0 ? nd : 1;
    if (dim < -range || dim >= range)
        return weft_set_error(WEFT_EINVAL, "%s: dim %lld is out of range for a tensor of %d dims",
                              op, (long long)dim, nd);
    *out = (int)(dim < 0 ? dim + range : dim);
    return 0;
}

/* int64 contiguous indices on the device (int32 converted): cuda.h. */
int wfc_indices_of(const char *op, const char *arg, const weft_tensor *index, weft_tensor **out)
{
    *out = NULL;
    weft_dtype dt = weft_tensor_dtype(index);
    if (dt == WEFT_INT64)
        return weft_contiguous(out, index);
    if (dt == WEFT_INT32) {
        weft_tensor *wide = NULL;
        int rc = weft_to_dtype(&wide, index, WEFT_INT64);
        if (rc == 0)
            rc = weft_contiguous(out, wide);
        weft_tensor_release(wide);
        return rc;
    }
    return weft_set_error(WEFT_EDTYPE, "%s: '%s' must be an int64 (or int32) tensor of indices, "
                          "got %s", op, arg, weft_dtype_name(dt));
}

/* Reads the kernel's two words back: an error when an index was out of
 * range for dimension dim of the given size. */
static int check_bad(const char *op, weft_tensor *bad, int dim, int64_t size)
{
    weft_tensor *host = NULL;
    int rc = weft_to_device(&host, bad, WEFT_DEVICE_CPU);
    if (rc == 0) {
        const int64_t *b = weft_tensor_data_ptr(host);
        if (b[0])
            rc = weft_set_error(WEFT_ERANGE, "%s: index %lld is out of range for dimension %d "
                                "with size %lld", op, (long long)b[1], dim, (long long)size);
    }
    weft_tensor_release(host);
    return rc;
}

int wfc_wrap_dim(const char *op, int64_t dim, int nd, int *out)
{
    int wrap = nd > 0 ? nd : 1;
    *out = 0;
    if (dim < -wrap || dim >= wrap)
        return weft_set_error(WEFT_ERANGE, "%s: dimension out of range (expected to be in range "
                              "of [%d, %d], but got %lld)", op, -wrap, wrap - 1, (long long)dim);
    *out = (int)(dim < 0 ? dim + wrap : dim);
    return 0;
}

int wfc_at_least_1d(weft_tensor **out, const weft_tensor *t)
{
    if (weft_tensor_ndim(t) > 0) {
        *out = weft_tensor_retain((weft_tensor *)t);
        return 0;
    }
    const int64_t one = 1;
    return weft_view(out, t, &one, 1);
}

int wfc_first_bad(const weft_tensor *bad, int64_t *pos)
{
    weft_tensor *host = NULL;
    int rc = weft_to_device(&host, bad, WEFT_DEVICE_CPU);
    if (rc == 0) {
        const uint64_t *b = weft_tensor_data_ptr(host);
        rc = b[0] ? 1 : 0;
        *pos = (int64_t)~b[1];
    }
    weft_tensor_release(host);
    return rc;
}

int wfc_read_element(const weft_tensor *t, int64_t pos, void *out)
{
    const int64_t all = -1;
    weft_tensor *flat = NULL, *one = NULL, *host = NULL;
    int rc = weft_reshape(&flat, t, &all, 1);
    if (rc == 0)
        rc = weft_narrow(&one, flat, 0, pos, 1);
    if (rc == 0)
        rc = weft_to_device(&host, one, WEFT_DEVICE_CPU);
    if (rc == 0)
        memcpy(out, weft_tensor_data_ptr(host), weft_dtype_size(weft_tensor_dtype(t)));
    weft_tensor_release(flat);
    weft_tensor_release(one);
    weft_tensor_release(host);
    return rc;
}

/* Rows idx of self along dim into a new tensor of self's shape with
 * sizes[dim] = numel(idx) (or, for a 0-d self, idx's shape). */
static int take(weft_tensor **out, const char *op, const weft_tensor *self, int dim,
                const weft_tensor *idx, const int64_t *sizes, int nd)
{
    *out = NULL;
    int snd = weft_tensor_ndim(self);
    int64_t outer = 1, inner = 1, len = snd ? weft_tensor_size(self, dim) : 1;
    for (int d = 0; d < snd; d++)
        d < dim ? (outer *= weft_tensor_size(self, d)) : d > dim ? (inner *= weft_tensor_size(self, d)) : 0;
    weft_tensor *src = NULL, *r = NULL, *bad = NULL;
    int index = weft_tensor_device(self).index;
    int rc = weft_contiguous(&src, self);
    if (rc == 0)
        rc = weft_new_output(&r, self, sizes, nd, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_zeros(&bad, (const int64_t[]){2}, 1, WEFT_INT64, weft_tensor_device(self));
    if (rc == 0 && cudaSetDevice(index) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    if (rc == 0)
        rc = wfc_take(wfc_current_stream(index), weft_dtype_size(weft_tensor_dtype(self)),
                      weft_tensor_data_ptr(r), weft_tensor_data_ptr(src), weft_tensor_data_ptr(idx),
                      outer, len, weft_tensor_numel(idx), inner, weft_tensor_data_ptr(bad));
    if (rc == 0 && weft_tensor_numel(r) > 0)
        rc = check_bad(op, bad, dim, len);
    weft_tensor_release(src);
    weft_tensor_release(bad);
    if (rc < 0) {
        weft_tensor_release(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* index_select(self, dim, index) */
static int index_select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "index_select";
    const weft_tensor *self = call->args[0].u.tensor, *index = call->args[2].u.tensor;
    if (!same_cuda(self, index))
        return weft_call_cpu_fallback(call);
    int dim = 0, nd = weft_tensor_ndim(self);
    int rc = wrap_dim(op, weft_arg_int(call, 1), nd, &dim);
    if (rc < 0)
        return rc;
    if (weft_tensor_ndim(index) > 1)
        return weft_set_error(WEFT_ESHAPE, "%s: index must be 0-d or 1-d, got %d dims", op,
                              weft_tensor_ndim(index));
    weft_tensor *idx = NULL, *r = NULL;
    if ((rc = wfc_indices_of(op, "index", index, &idx)) < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(self), sizeof(int64_t) * (size_t)nd);
    if (nd)
        sizes[dim] = weft_tensor_numel(idx);
    rc = nd ? take(&r, op, self, dim, idx, sizes, nd)
            : take(&r, op, self, 0, idx, weft_tensor_sizes(idx), weft_tensor_ndim(idx));
    weft_tensor_release(idx);
    return rc < 0 ? rc : weft_return_tensor(call, 0, r);
}

/* embedding(weight, indices, padding_idx): rows of weight, shaped
 * [*indices.shape, embedding_dim]. */
static int embedding_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "embedding";
    const weft_tensor *weight = call->args[0].u.tensor, *indices = call->args[1].u.tensor;
    if (!same_cuda(weight, indices))
        return weft_call_cpu_fallback(call);
    if (weft_tensor_ndim(weight) != 2)
        return weft_set_error(WEFT_ESHAPE, "%s: 'weight' must be 2-d, got %d dims", op,
                              weft_tensor_ndim(weight));
    int nd = weft_tensor_ndim(indices);
    if (nd + 1 > WEFT_MAX_DIMS)
        return weft_set_error(WEFT_ESHAPE, "%s: indices have too many dims (%d)", op, nd);
    weft_tensor *idx = NULL, *r = NULL;
    int rc = wfc_indices_of(op, "indices", indices, &idx);
    if (rc < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(indices), sizeof(int64_t) * (size_t)nd);
    sizes[nd] = weft_tensor_size(weight, 1);
    rc = take(&r, op, weight, 0, idx, sizes, nd + 1);
    weft_tensor_release(idx);
    return rc < 0 ? rc : weft_return_tensor(call, 0, r);
}

/* gather(self, dim, index): out has index's shape. */
static int gather_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "gather";
    const weft_tensor *self = call->args[0].u.tensor, *index = call->args[2].u.tensor;
    if (!same_cuda(self, index))
        return weft_call_cpu_fallback(call);
    int nd = weft_tensor_ndim(self), dim = 0;
    int rc = wrap_dim(op, weft_arg_int(call, 1), nd, &dim);
    if (rc < 0)
        return rc;
    int ind = weft_tensor_ndim(index);
    int rank = nd ? nd : 1;
    if ((ind ? ind : 1) != rank)
        return weft_set_error(WEFT_ESHAPE, "%s: index must have the same number of dimensions as "
                              "self (%d), got %d", op, nd, ind);
    for (int d = 0; d < ind; d++)
        if (d != dim && nd && weft_tensor_size(index, d) > weft_tensor_size(self, d))
            return weft_set_error(WEFT_ESHAPE, "%s: index must be no larger than self apart "
                                  "from dimension %d", op, dim);
    if (rank > WFC_MAX_DIMS)
        return weft_call_cpu_fallback(call);
    weft_tensor *idx = NULL, *src = NULL, *r = NULL, *bad = NULL;
    rc = wfc_indices_of(op, "index", index, &idx);
    if (rc == 0)
        rc = weft_contiguous(&src, self);
    if (rc == 0)
        rc = weft_new_output(&r, self, weft_tensor_sizes(index), ind, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_zeros(&bad, (const int64_t[]){2}, 1, WEFT_INT64, weft_tensor_device(self));
    wfc_geometry g;
    memset(&g, 0, sizeof g);
    g.ndim = rank, g.noperands = 1;
    for (int d = 0; d < rank; d++) {
        g.sizes[d] = ind ? weft_tensor_size(index, d) : 1;
        g.strides[0][d] = nd ? weft_tensor_stride(src ? src : self, d) : 1;
    }
    int64_t size = nd ? weft_tensor_size(self, dim) : 1;
    int index_dev = weft_tensor_device(self).index;
    if (rc == 0 && cudaSetDevice(index_dev) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index_dev);
    if (rc == 0)
        rc = wfc_gather(wfc_current_stream(index_dev), weft_dtype_size(weft_tensor_dtype(self)),
                        weft_tensor_data_ptr(r), weft_tensor_data_ptr(src), weft_tensor_data_ptr(idx),
                        weft_tensor_numel(idx), dim, size, &g, weft_tensor_data_ptr(bad));
    if (rc == 0 && weft_tensor_numel(r) > 0)
        rc = check_bad(op, bad, dim, size);
    weft_tensor_release(idx);
    weft_tensor_release(src);
    weft_tensor_release(bad);
    if (rc < 0) {
        weft_tensor_release(r);
        return rc;
    }
    return weft_return_tensor(call, 0, r);
}

/* masked_fill(self, mask, value) and masked_fill_: where(mask, value,
 * self) with value a 0-d tensor of self's dtype; a mask that is not bool
 * or would grow self's shape is the CPU's case (and error). */
static int masked_fill_kernel(weft_call *call, void *ctx)
{
    bool inplace = ctx != NULL;
    weft_tensor *self = call->args[0].u.tensor;
    const weft_tensor *mask = call->args[1].u.tensor;
    if (!same_cuda(self, mask) || weft_tensor_dtype(mask) != WEFT_BOOL ||
        weft_tensor_ndim(mask) > weft_tensor_ndim(self))
        return weft_call_cpu_fallback(call);
    int64_t sizes[WEFT_MAX_DIMS];
    int nd = 0;
    if (weft_broadcast_shapes(sizes, &nd, weft_tensor_sizes(self), weft_tensor_ndim(self),
                              weft_tensor_sizes(mask), weft_tensor_ndim(mask)) < 0 ||
        nd != weft_tensor_ndim(self) || memcmp(sizes, weft_tensor_sizes(self), sizeof(int64_t) * (size_t)nd) != 0)
        return weft_call_cpu_fallback(call);
    weft_tensor *value = NULL, *r = NULL;
    int rc = weft_full(&value, NULL, 0, weft_arg_double(call, 2), weft_tensor_dtype(self),
                       weft_tensor_device(self));
    if (rc == 0)
        rc = weft_where(&r, mask, value, self);
    weft_tensor_release(value);
    if (rc == 0 && inplace) {
        rc = weft_copy_(self, r);
        weft_tensor_release(r);
        return rc;
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, r);
}

static const int inplace_marker = 1;

int wfc_register_index(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"index_select", index_select_kernel, NULL}, {"embedding", embedding_kernel, NULL},
        {"gather", gather_kernel, NULL},             {"masked_fill", masked_fill_kernel, NULL},
        {"masked_fill_", masked_fill_kernel, &inplace_marker},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
