/* indexing.c — t[key] and t[key] = value with PyTorch's semantics.  Basic
 * indices (ints, slices, None, Ellipsis) reduce t to a view; advanced ones
 * (integer and bool tensors, sequences and arrays, Python bools) then pick
 * elements of that view: reading is a composite of public operators
 * (permute, reshape, index_select), so autograd and every device work
 * unchanged; writing is index_put_ on the view.  As in PyTorch (not NumPy),
 * an int beside advanced indices is a basic index: x[:, i, :, 0] selects
 * first and places i's dims where i stood. */
#include "weftpy.h"

#include <string.h>

enum entry_kind { E_INT, E_SLICE, E_NONE, E_ELLIPSIS, E_TENSOR };

/* One element of the key, resolved before any view is taken. */
typedef struct {
    enum entry_kind kind;
    PyObject *obj;      /* borrowed: the int or the slice */
    weft_tensor *index; /* owned, E_TENSOR: int64/int32 indices or a bool/uint8 mask */
    bool new_dim;       /* E_TENSOR from a Python bool: indexes a new dim of size 1 */
} entry;

/* An advanced index of the view: which dim it starts at, the tensor
 * (borrowed from an entry, or owned when made here), and whether it is a
 * mask (covering ndim(index) dims) or integer indices (one dim). */
typedef struct {
    int dim;
    weft_tensor *index;
    bool mask;
} advanced;

#define MAX_ENTRIES (WEFT_MAX_DIMS * 2)

typedef struct {
    entry entries[MAX_ENTRIES];
    int n;
    int consumed; /* dims of the source the entries use up (an ellipsis takes the rest) */
} parsed_key;

static void key_free(parsed_key *k)
{
    for (int i = 0; i < k->n; i++)
        weft_tensor_release(k->entries[i].index);
    k->n = 0;
}

static bool is_mask_dtype(weft_dtype d)
{
    return d == WEFT_BOOL || d == WEFT_UINT8;
}

static int index_dtype_error(weft_dtype d)
{
    PyErr_Format(PyExc_IndexError,
                 "tensors used as indices must be long, int, byte or bool tensors (got %s)",
                 weft_dtype_name(d));
    return -1;
}

/* A tensor entry from a weft tensor (a new reference to it) or from any
 * other object weft.tensor() accepts (a list, a NumPy array); an empty list
 * is an empty int64 index, as in PyTorch. */
static int tensor_entry(entry *e, PyObject *o, weft_device device)
{
    weft_tensor *t;
    if (wpy_tensor_check(o)) {
        t = weft_tensor_retain(WPY_T(o));
    } else {
        PyObject *args = PyTuple_Pack(1, o);
        PyObject *made = args ? wpy_tensor_from_data(NULL, args, NULL) : NULL;
        Py_XDECREF(args);
        if (!made) {
            if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_IndexError,
                             "only integers, slices (`:`), ellipsis (`...`), None and long or "
                             "byte Variables are valid indices (got %.200s)",
                             Py_TYPE(o)->tp_name);
            }
            return -1;
        }
        t = weft_tensor_retain(WPY_T(made));
        Py_DECREF(made);
        int rc = 0;
        weft_tensor *next = NULL;
        if (weft_tensor_numel(t) == 0 && weft_dtype_is_floating(weft_tensor_dtype(t)))
            rc = weft_to_dtype(&next, t, WEFT_INT64);
        else if (!weft_device_equal(device, weft_tensor_device(t)))
            rc = weft_to_device(&next, t, device);
        if (rc < 0) {
            weft_tensor_release(t);
            return wpy_raise_int(rc);
        }
        if (next) {
            weft_tensor_release(t);
            t = next;
        }
    }
    weft_dtype d = weft_tensor_dtype(t);
    if (!is_mask_dtype(d) && d != WEFT_INT64 && d != WEFT_INT32) {
        weft_tensor_release(t);
        return index_dtype_error(d);
    }
    e->kind = E_TENSOR;
    e->index = t;
    return 0;
}

/* A Python bool (or a 0-d bool tensor) indexes a new dim of size 1: [0]
 * keeps it, an empty index drops every element, as PyTorch does. */
static int bool_entry(entry *e, bool value, weft_device device)
{
    int64_t n = value ? 1 : 0;
    weft_tensor *t = NULL;
    int rc = weft_zeros(&t, &n, 1, WEFT_INT64, device);
    if (rc < 0)
        return wpy_raise_int(rc);
    e->kind = E_TENSOR;
    e->index = t;
    e->new_dim = true;
    return 0;
}

/* Resolves key into entries and checks the count of dims it consumes. */
static int parse_key(parsed_key *k, const weft_tensor *t, PyObject *key)
{
    k->n = 0;
    Py_ssize_t n = PyTuple_Check(key) ? PyTuple_GET_SIZE(key) : 1;
    if (n > MAX_ENTRIES) {
        PyErr_SetString(PyExc_IndexError, "too many indices");
        return -1;
    }
    weft_device device = weft_tensor_device(t);
    int consumed = 0, ellipses = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_Check(key) ? PyTuple_GET_ITEM(key, i) : key;
        entry *e = &k->entries[k->n];
        memset(e, 0, sizeof *e);
        e->obj = o;
        if (o == Py_Ellipsis) {
            e->kind = E_ELLIPSIS;
            ellipses++;
        } else if (o == Py_None) {
            e->kind = E_NONE;
        } else if (PySlice_Check(o)) {
            e->kind = E_SLICE;
            consumed++;
        } else if (PyBool_Check(o)) {
            if (bool_entry(e, o == Py_True, device) < 0)
                goto fail;
        } else if (PyLong_Check(o) ||
                   (PyIndex_Check(o) && !PySequence_Check(o) && !wpy_tensor_check(o))) {
            /* (a NumPy array has __index__ too, but is an array of indices) */
            e->kind = E_INT;
            consumed++;
        } else if (wpy_tensor_check(o) && weft_tensor_ndim(WPY_T(o)) == 0 &&
                   weft_tensor_dtype(WPY_T(o)) == WEFT_BOOL) {
            double v;
            int rc = weft_tensor_item(WPY_T(o), &v);
            if (rc < 0) {
                wpy_raise_int(rc);
                goto fail;
            }
            if (bool_entry(e, v != 0, device) < 0)
                goto fail;
        } else if (wpy_tensor_check(o) && weft_tensor_ndim(WPY_T(o)) == 0 &&
                   !is_mask_dtype(weft_tensor_dtype(WPY_T(o)))) {
            /* a 0-d integer tensor is an int (the shape PyTorch gives; a view
             * here where PyTorch copies) */
            if (!weft_dtype_is_integral(weft_tensor_dtype(WPY_T(o)), false)) {
                index_dtype_error(weft_tensor_dtype(WPY_T(o)));
                goto fail;
            }
            e->kind = E_INT;
            consumed++;
        } else {
            if (tensor_entry(e, o, device) < 0)
                goto fail;
            consumed += is_mask_dtype(weft_tensor_dtype(e->index)) ? weft_tensor_ndim(e->index) : 1;
        }
        k->n++;
    }
    int ndim = weft_tensor_ndim(t);
    if (ellipses > 1) {
        PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
        goto fail;
    }
    if (consumed > ndim) {
        PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d", ndim);
        goto fail;
    }
    k->consumed = consumed;
    return 0;
fail:
    key_free(k);
    return -1;
}

/* Applies the basic entries of k to t as a chain of views (*out, a new
 * reference) and records where each advanced entry lands in that view. */
static int apply_basic(weft_tensor **out, advanced *adv, int *nadv, weft_tensor *t,
                       const parsed_key *k)
{
    *out = NULL;
    *nadv = 0;
    int ndim = weft_tensor_ndim(t);
    weft_tensor *cur = weft_tensor_retain(t);
    int dim = 0, rc = 0;
    for (int i = 0; i < k->n && rc == 0; i++) {
        const entry *e = &k->entries[i];
        weft_tensor *next = NULL;
        switch (e->kind) {
        case E_ELLIPSIS:
            dim += ndim - k->consumed;
            continue;
        case E_NONE:
            rc = weft_unsqueeze(&next, cur, dim);
            dim++;
            break;
        case E_SLICE: {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(e->obj, &start, &stop, &step) < 0)
                goto fail;
            if (step <= 0) {
                PyErr_SetString(PyExc_ValueError, "step must be greater than zero");
                goto fail;
            }
            rc = weft_slice(&next, cur, dim, start, stop, step);
            dim++;
            break;
        }
        case E_INT: {
            Py_ssize_t index = PyNumber_AsSsize_t(e->obj, PyExc_IndexError);
            if (index == -1 && PyErr_Occurred())
                goto fail;
            rc = weft_select(&next, cur, dim, index);
            break;
        }
        case E_TENSOR: {
            bool mask = is_mask_dtype(weft_tensor_dtype(e->index));
            if (e->new_dim) {
                rc = weft_unsqueeze(&next, cur, dim);
                mask = false;
            }
            adv[(*nadv)++] = (advanced){.dim = dim, .index = e->index, .mask = mask};
            dim += mask ? weft_tensor_ndim(e->index) : 1;
            if (!e->new_dim)
                continue;
            break;
        }
        }
        weft_tensor_release(cur);
        cur = next;
    }
    if (rc < 0) {
        weft_tensor_release(cur);
        return wpy_raise_int(rc);
    }
    *out = cur;
    return 0;
fail:
    weft_tensor_release(cur);
    return -1;
}

/* A mask must match the view's sizes over the dims it covers. */
static int check_mask(const weft_tensor *view, const advanced *a, int position)
{
    int m = weft_tensor_ndim(a->index);
    for (int j = 0; j < m; j++) {
        if (a->dim + j < weft_tensor_ndim(view) &&
            weft_tensor_size(a->index, j) == weft_tensor_size(view, a->dim + j))
            continue;
        PyErr_Format(PyExc_IndexError,
                     "The shape of the mask at index %d does not match the shape of the indexed "
                     "tensor: mask dim %d has size %lld, tensor dim %d has size %lld",
                     position, j, (long long)weft_tensor_size(a->index, j), a->dim + j,
                     (long long)weft_tensor_size(view, a->dim + j));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------- read */

/* The integer index tensors of view's advanced dims, one per dim (masks
 * replaced by their nonzero columns), as new int64 references in idx[],
 * their dims in dims[]; *n their count. */
static int integer_indices(weft_tensor **idx, int *dims, int *n, const weft_tensor *view,
                           const advanced *adv, int nadv)
{
    *n = 0;
    for (int a = 0; a < nadv; a++) {
        weft_tensor *t = adv[a].index;
        int rc = 0;
        if (adv[a].mask) {
            if (check_mask(view, &adv[a], a) < 0)
                return -1;
            weft_tensor *nz = NULL;
            rc = weft_nonzero(&nz, t);
            for (int j = 0; rc == 0 && j < weft_tensor_ndim(t); j++) {
                weft_tensor *col = NULL;
                rc = weft_select(&col, nz, 1, j);
                if (rc == 0) {
                    dims[*n] = adv[a].dim + j;
                    idx[(*n)++] = col;
                }
            }
            weft_tensor_release(nz);
        } else if (weft_tensor_dtype(t) != WEFT_INT64) {
            weft_tensor *wide = NULL;
            rc = weft_to_dtype(&wide, t, WEFT_INT64);
            if (rc == 0) {
                dims[*n] = adv[a].dim;
                idx[(*n)++] = wide;
            }
        } else {
            dims[*n] = adv[a].dim;
            idx[(*n)++] = weft_tensor_retain(t);
        }
        if (rc < 0)
            return wpy_raise_int(rc);
    }
    return 0;
}

static void format_shape(char *buf, size_t size, const weft_tensor *t)
{
    weft_format_shape(buf, size, weft_tensor_sizes(t), weft_tensor_ndim(t));
}

/* Broadcasts idx[0..n) together (replacing each by an expanded view);
 * bshape/bdims receive the common shape. */
static int broadcast_indices(weft_tensor **idx, int n, int64_t *bshape, int *bdims)
{
    *bdims = 0;
    for (int k = 0; k < n; k++) {
        int64_t next[WEFT_MAX_DIMS];
        int nd;
        if (weft_broadcast_shapes(next, &nd, bshape, *bdims, weft_tensor_sizes(idx[k]),
                                  weft_tensor_ndim(idx[k])) < 0) {
            char a[256], b[256];
            format_shape(a, sizeof a, idx[0]);
            format_shape(b, sizeof b, idx[k]);
            PyErr_Format(PyExc_IndexError,
                         "shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes %s, %s",
                         a, b);
            return -1;
        }
        memcpy(bshape, next, sizeof *next * (size_t)nd);
        *bdims = nd;
    }
    for (int k = 0; k < n; k++) {
        weft_tensor *e = NULL;
        int rc = weft_expand(&e, idx[k], bshape, *bdims);
        if (rc < 0)
            return wpy_raise_int(rc);
        weft_tensor_release(idx[k]);
        idx[k] = e;
    }
    return 0;
}

/* Checks every index of idx against size: IndexError naming the first
 * bound it crosses and the dim of the view.  *negative: whether any index
 * counts from the end. */
static int check_range(const weft_tensor *idx, int dim, int64_t size, bool *negative)
{
    *negative = false;
    if (weft_tensor_numel(idx) == 0)
        return 0;
    weft_tensor *hi = NULL, *lo = NULL;
    double max, min;
    int rc = weft_amax(&hi, idx, NULL, 0, false);
    if (rc == 0)
        rc = weft_amin(&lo, idx, NULL, 0, false);
    if (rc == 0)
        rc = weft_tensor_item(hi, &max);
    if (rc == 0)
        rc = weft_tensor_item(lo, &min);
    weft_tensor_release(hi);
    weft_tensor_release(lo);
    if (rc < 0)
        return wpy_raise_int(rc);
    if (max >= (double)size || min < -(double)size) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld",
                     (long long)(max >= (double)size ? max : min), dim, (long long)size);
        return -1;
    }
    *negative = min < 0;
    return 0;
}

/* idx checked against size and wrapped into [0, size) (a new reference). */
static int checked_index(weft_tensor **out, weft_tensor *idx, int dim, int64_t size)
{
    *out = NULL;
    bool negative;
    if (check_range(idx, dim, size, &negative) < 0)
        return -1;
    int rc = negative ? weft_remainder_scalar(out, idx, (double)size) : weft_alias(out, idx);
    return rc < 0 ? wpy_raise_int(rc) : 0;
}

/* view[indices]: the advanced dims are permuted to the front and flattened
 * into one, whose row-major position (a linear combination of the wrapped
 * indices) index_select picks; the broadcast index shape then takes the
 * place of the first advanced dim when the advanced dims are adjacent, or
 * leads otherwise. */
static int gather_advanced(weft_tensor **out, weft_tensor *view, weft_tensor **idx,
                           const int *dims, int n)
{
    *out = NULL;
    int64_t bshape[WEFT_MAX_DIMS];
    int bdims, ndim = weft_tensor_ndim(view);
    if (broadcast_indices(idx, n, bshape, &bdims) < 0)
        return -1;
    bool adjacent = true;
    for (int k = 1; k < n; k++)
        adjacent = adjacent && dims[k] == dims[k - 1] + 1;
    bool is_adv[WEFT_MAX_DIMS] = {false};
    int64_t perm[WEFT_MAX_DIMS], flat_sizes[WEFT_MAX_DIMS], product = 1;
    int np = 0;
    weft_tensor *linear = NULL, *t = NULL;
    int rc = 0;
    for (int k = 0; k < n; k++) {
        int64_t size = weft_tensor_size(view, dims[k]);
        weft_tensor *w = NULL, *next = NULL;
        if (checked_index(&w, idx[k], dims[k], size) < 0)
            goto fail;
        if (!linear) {
            linear = w;
            w = NULL;
        } else {
            weft_tensor *scaled = NULL;
            rc = weft_mul_scalar(&scaled, linear, (double)size);
            if (rc == 0)
                rc = weft_add(&next, scaled, w);
            weft_tensor_release(scaled);
            weft_tensor_release(linear);
            linear = next;
        }
        weft_tensor_release(w);
        if (rc < 0)
            goto raise;
        is_adv[dims[k]] = true;
        perm[np++] = dims[k];
        product *= size;
    }
    flat_sizes[0] = product;
    int nrest = 0;
    for (int d = 0; d < ndim; d++)
        if (!is_adv[d]) {
            perm[np++] = d;
            flat_sizes[1 + nrest++] = weft_tensor_size(view, d);
        }
    int64_t minus_one = -1;
    weft_tensor *permuted = NULL, *flat = NULL, *flat_index = NULL, *picked = NULL;
    rc = weft_permute(&permuted, view, perm, ndim);
    if (rc == 0)
        rc = weft_reshape(&flat, permuted, flat_sizes, 1 + nrest);
    if (rc == 0)
        rc = weft_reshape(&flat_index, linear, &minus_one, 1);
    if (rc == 0)
        rc = weft_index_select(&picked, flat, 0, flat_index);
    weft_tensor_release(permuted);
    weft_tensor_release(flat);
    weft_tensor_release(flat_index);
    if (rc == 0 && bdims + nrest > WEFT_MAX_DIMS) {
        weft_tensor_release(picked);
        PyErr_Format(PyExc_IndexError, "the indexed result would have %d dimensions (at most %d)",
                     bdims + nrest, WEFT_MAX_DIMS);
        goto fail;
    }
    if (rc == 0) {
        int64_t shape[WEFT_MAX_DIMS];
        memcpy(shape, bshape, sizeof *bshape * (size_t)bdims);
        memcpy(shape + bdims, flat_sizes + 1, sizeof *shape * (size_t)nrest);
        rc = weft_reshape(&t, picked, shape, bdims + nrest);
    }
    weft_tensor_release(picked);
    if (rc < 0)
        goto raise;
    if (adjacent && dims[0] > 0 && nrest > 0) {
        /* the rest dims before the first advanced one go back in front */
        int64_t back[WEFT_MAX_DIMS];
        int nb = 0;
        for (int d = 0; d < dims[0]; d++)
            back[nb++] = bdims + d;
        for (int d = 0; d < bdims; d++)
            back[nb++] = d;
        for (int d = bdims + dims[0]; d < bdims + nrest; d++)
            back[nb++] = d;
        weft_tensor *placed = NULL;
        rc = weft_permute(&placed, t, back, nb);
        weft_tensor_release(t);
        t = placed;
        if (rc < 0)
            goto raise;
    }
    weft_tensor_release(linear);
    *out = t;
    return 0;
raise:
    wpy_raise_int(rc);
fail:
    weft_tensor_release(linear);
    weft_tensor_release(t);
    return -1;
}

PyObject *wpy_tensor_getitem(PyObject *self, PyObject *key)
{
    parsed_key k;
    if (parse_key(&k, WPY_T(self), key) < 0)
        return NULL;
    advanced adv[MAX_ENTRIES];
    int nadv;
    weft_tensor *view;
    if (apply_basic(&view, adv, &nadv, WPY_T(self), &k) < 0) {
        key_free(&k);
        return NULL;
    }
    if (nadv == 0) {
        key_free(&k);
        return wpy_wrap(view);
    }
    weft_tensor *idx[WEFT_MAX_DIMS];
    int dims[WEFT_MAX_DIMS], n = 0;
    weft_tensor *result = NULL;
    if (integer_indices(idx, dims, &n, view, adv, nadv) == 0)
        gather_advanced(&result, view, idx, dims, n);
    for (int i = 0; i < n; i++)
        weft_tensor_release(idx[i]);
    weft_tensor_release(view);
    key_free(&k);
    return result ? wpy_wrap(result) : NULL;
}

/* ------------------------------------------------------------------ write */

/* The value of an assignment as a tensor (a new reference): a tensor as
 * it is, a number or a sequence converted to dtype on device. */
static int value_tensor(weft_tensor **out, PyObject *value, const weft_tensor *like)
{
    *out = NULL;
    if (wpy_tensor_check(value)) {
        *out = weft_tensor_retain(WPY_T(value));
        return 0;
    }
    weft_value v;
    if (wpy_scalar_value(value, &v) == 0) {
        weft_tensor *t = NULL;
        int rc = weft_empty(&t, NULL, 0, weft_tensor_dtype(like), weft_tensor_device(like));
        if (rc < 0)
            return wpy_raise_int(rc);
        weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = t}, v};
        PyObject *r = wpy_call_op("fill_", args, 2);
        if (!r) {
            weft_tensor_release(t);
            return -1;
        }
        Py_DECREF(r);
        *out = t;
        return 0;
    }
    PyObject *dtype = wpy_dtype_object(weft_tensor_dtype(like));
    PyObject *args = PyTuple_Pack(1, value);
    PyObject *kwargs = dtype && args ? Py_BuildValue("{sO}", "dtype", dtype) : NULL;
    PyObject *made = kwargs ? wpy_tensor_from_data(NULL, args, kwargs) : NULL;
    Py_XDECREF(dtype);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    if (!made) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "can't assign a %.200s to a weft.Tensor",
                         Py_TYPE(value)->tp_name);
        }
        return -1;
    }
    int rc = weft_to_device(out, WPY_T(made), weft_tensor_device(like));
    Py_DECREF(made);
    return rc < 0 ? wpy_raise_int(rc) : 0;
}

/* index_put_'s index list for the view: None for every dim before an
 * advanced entry that none covers, each entry covering one dim (a mask its
 * ndim). */
static int index_list(weft_tensor **list, int *len, const weft_tensor *view,
                      const advanced *adv, int nadv)
{
    int covered = 0;
    *len = 0;
    for (int a = 0; a < nadv; a++) {
        bool negative;
        if (adv[a].mask ? check_mask(view, &adv[a], a) < 0
                        : check_range(adv[a].index, adv[a].dim,
                                      weft_tensor_size(view, adv[a].dim), &negative) < 0)
            return -1;
        while (covered < adv[a].dim) {
            list[(*len)++] = NULL;
            covered++;
        }
        list[(*len)++] = adv[a].index;
        covered += adv[a].mask ? weft_tensor_ndim(adv[a].index) : 1;
    }
    return 0;
}

int wpy_tensor_setitem(PyObject *self, PyObject *key, PyObject *value)
{
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "tensor elements cannot be deleted");
        return -1;
    }
    /* a layout whose views are new tensors (the sparse ones: torch's rule
     * for a sparse select, narrow and transpose) would take the write into
     * a temporary and leave self as it was, silently; the quantized
     * layout's views share memory and take writes */
    int layout = weft_tensor_layout(WPY_T(self));
    int flags = layout ? weft_layout_flags(layout) : 0;
    if (flags > 0 && (flags & WEFT_LAYOUT_VIEWS_COPY)) {
        /* torch's words for its sparse layouts; the layout named always */
        const char *name = weft_layout_name(layout);
        bool sparse = name && strncmp(name, "sparse", 6) == 0;
        PyErr_Format(PyExc_TypeError,
                     "Cannot assign to a %stensor of layout '%s': its views are copies "
                     "(convert it with to_dense() first)",
                     sparse ? "sparse " : "", name);
        return -1;
    }
    parsed_key k;
    if (parse_key(&k, WPY_T(self), key) < 0)
        return -1;
    advanced adv[MAX_ENTRIES];
    int nadv;
    weft_tensor *view, *values = NULL;
    if (apply_basic(&view, adv, &nadv, WPY_T(self), &k) < 0) {
        key_free(&k);
        return -1;
    }
    PyObject *r = NULL;
    weft_value number;
    if (nadv == 0 && !wpy_tensor_check(value) && wpy_scalar_value(value, &number) == 0) {
        weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = view}, number};
        r = wpy_call_op("fill_", args, 2);
    } else if (value_tensor(&values, value, view) < 0) {
        /* r stays NULL */
    } else if (nadv == 0) {
        weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = view},
                              {.tag = WEFT_VALUE_TENSOR, .u.tensor = values}};
        r = wpy_call_op("copy_", args, 2);
    } else {
        weft_tensor *list[MAX_ENTRIES * 2];
        int len;
        if (index_list(list, &len, view, adv, nadv) == 0) {
            weft_value args[3] = {
                {.tag = WEFT_VALUE_TENSOR, .u.tensor = view},
                {.tag = WEFT_VALUE_TENSOR_LIST, .len = len, .u.tensors = list},
                {.tag = WEFT_VALUE_TENSOR, .u.tensor = values},
            };
            r = wpy_call_op("index_put_", args, 3);
        }
    }
    weft_tensor_release(values);
    weft_tensor_release(view);
    key_free(&k);
    Py_XDECREF(r);
    return r ? 0 : -1;
}
