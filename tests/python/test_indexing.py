"""Indexing (t[key] and t[key] = value), unique's results and interpolate's
scale_factor pair, against NumPy 1.24 on the same data and, where the two
differ or autograd is involved, against PyTorch 1.13 (skipped without it)."""
import numpy as np
import weft
from taplib import Skip, done, eq, raises, test

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

rng = np.random.default_rng(7)
A = rng.standard_normal((3, 4, 5))


def w(a):
    """a weft copy of a NumPy array (bool through lists: NumPy 1.24 cannot
    export bool through DLPack)"""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return weft.tensor(a.tolist(), dtype=weft.bool)
    return weft.tensor(np.ascontiguousarray(a))


def same(t, a, what=""):
    eq(t.shape, a.shape, what + " shape")
    eq(t.tolist(), a.tolist(), what + " values")


def need_torch():
    if torch is None:
        raise Skip("torch is not installed")


I = np.array([2, 0, -1, 2])
J = np.array([[1], [3]])
M = A > 0.3
# keys that NumPy and PyTorch read the same way, made twice (NumPy and
# weft index objects) by a function of a converter
KEYS = [
    ("an index list on dim 0", lambda c: ([0, 2, 2],)),
    ("tensor on dim 1", lambda c: (slice(None), c(I))),
    ("Ellipsis then a tensor", lambda c: (Ellipsis, c(np.array([4, 0])))),
    ("two adjacent tensors", lambda c: (c(np.array([0, 2])), c(np.array([1, 3])))),
    ("two broadcast tensors", lambda c: (slice(None), c(J), c(np.array([0, 4, 1])))),
    ("tensors separated by a slice", lambda c: (c(np.array([0, 2])), slice(None), c(np.array([1, 3])))),
    ("None, tensor, None, slice, tensor", lambda c: (None, c(np.array([1])), None, slice(None), c(np.array([0])))),
    ("a step slice then a tensor", lambda c: (slice(None, None, 2), c(np.array([3, 1])))),
    ("int then a tensor", lambda c: (1, c(np.array([0, 0, 3])), slice(1, 3))),
    ("a full bool mask", lambda c: (c(M),)),
    ("a 2-d mask after a slice", lambda c: (slice(None), c(M[0]))),
    ("a 1-d mask on dim 1", lambda c: (slice(None), c(np.array([True, False, True, True])))),
    ("a mask and a tensor", lambda c: (c(np.array([True, False, True])), slice(None), c(np.array([1, 4])))),
    ("an empty index", lambda c: (slice(None), c(np.array([], dtype=np.int64)))),
    ("a 2-d index", lambda c: (c(np.array([[0, 1], [2, 0]])),)),
]


def as_weft(a):
    return w(a)


@test
def getitem_numpy():
    """x[key] with advanced indices matches NumPy (contiguous and transposed sources)"""
    for name, key in KEYS:
        same(w(A)[key(as_weft)], A[key(np.asarray)], name)
    # a non-contiguous source: the same keys on a permuted view
    B = A.transpose(0, 2, 1)[:, :4, :]  # [3, 4, 4]
    tb = w(A).permute(0, 2, 1)[:, :4, :]
    same(tb[:, weft.tensor([3, 0])], B[:, [3, 0]], "permuted view")
    same(tb[weft.tensor([2, 1]), :, weft.tensor([0, 3])], B[[2, 1], :, [0, 3]], "permuted view, separated")


@test
def getitem_other_index_kinds():
    """lists, NumPy arrays, int32 tensors, 0-d ints and Python bools as indices"""
    t = w(A)
    same(t[[1, 0]], A[[1, 0]], "a list")
    same(t[np.array([2, 1])], A[np.array([2, 1])], "a NumPy array")
    same(t[:, weft.tensor([3, 1], dtype=weft.int32)], A[:, [3, 1]], "int32 indices")
    same(t[weft.tensor(2)], A[2], "a 0-d integer tensor")
    same(t[np.int64(1), 2], A[1, 2], "a NumPy integer")
    same(t[[[0, 1], [1, 2]]], A[np.array([[0, 1], [1, 2]])], "a nested list is one index")
    same(t[True], A[None], "True adds a dim")
    eq(t[False].shape, (0, 3, 4, 5), "False adds an empty dim")
    same(t[[]], A[np.array([], dtype=np.int64)], "an empty list")


@test
def getitem_torch_int_rule():
    """an int beside tensor indices is a basic index, as in PyTorch (not NumPy)"""
    x = weft.arange(5 * 6 * 7 * 8.0).reshape(5, 6, 7, 8)
    i = weft.tensor([0, 4])
    eq(x[:, i, :, 0].shape, (5, 2, 7))
    need_torch()
    tx = torch.arange(5 * 6 * 7 * 8.0).reshape(5, 6, 7, 8)
    ti = torch.tensor([0, 4])
    for key, tkey in [((slice(None), i, slice(None), 0), (slice(None), ti, slice(None), 0)),
                      ((i, 1, i), (ti, 1, ti)),
                      ((0, slice(None), i, None), (0, slice(None), ti, None)),
                      ((1, slice(1, 3), i), (1, slice(1, 3), ti))]:
        eq(x[key].tolist(), tx[tkey].tolist(), str(tkey))


@test
def setitem_numpy():
    """x[key] = number / tensor / broadcast tensor matches NumPy"""
    for name, key in KEYS:
        expect = A.copy()
        expect[key(np.asarray)] = 2.5
        t = w(A)
        t[key(as_weft)] = 2.5
        same(t, expect, name + " = number")
        shape = A[key(np.asarray)].shape
        vals = rng.standard_normal(shape)
        expect = A.copy()
        expect[key(np.asarray)] = vals
        t = w(A)
        t[key(as_weft)] = w(vals)
        same(t, expect, name + " = tensor")
        if shape and shape[-1] > 1:
            row = rng.standard_normal(shape[-1])
            expect = A.copy()
            expect[key(np.asarray)] = row
            t = w(A)
            t[key(as_weft)] = w(row)
            same(t, expect, name + " = broadcast row")


@test
def setitem_dtypes_and_duplicates():
    """scalars take x's dtype; a list value; duplicates keep one write; views see the write"""
    x = weft.zeros(4, dtype=weft.int64)
    x[[0, 2]] = 7
    eq(x.tolist(), [7, 0, 7, 0])
    x[weft.tensor([True, False, False, True])] = True
    eq(x.tolist(), [1, 0, 7, 1])
    x[[1, 3]] = [5, 6]
    eq(x.tolist(), [1, 5, 7, 6])
    y = weft.zeros(3, 4)
    col = y[:, 1]
    y[..., [1]] = 3.0
    eq(col.tolist(), [3.0, 3.0, 3.0], "a view of y sees the write")
    z = weft.zeros(3)
    z[[0, 0, 0]] = weft.tensor([4.0, 4.0, 4.0])
    eq(z.tolist(), [4.0, 0.0, 0.0])


@test
def index_errors():
    """bad indices: a clear error and nothing written"""
    t = w(A)
    before = t.tolist()
    raises(IndexError, lambda: t[:, [4]], contains="index 4 is out of bounds for dimension 1 with size 4")
    raises(IndexError, lambda: t[[-4]], contains="index -4 is out of bounds for dimension 0 with size 3")

    def put(key, value):
        t[key] = value

    raises(IndexError, put, (slice(None), weft.tensor([0, 9])), 1.0, contains="index 9")
    raises(IndexError, put, (0, slice(None), [-6]), 1.0, contains="index -6")
    raises(RuntimeError, put, (slice(None), [0, 1]), weft.ones(3, dtype=weft.float64),
           contains="shape mismatch")
    raises(RuntimeError, put, (slice(None), [0, 1]), weft.ones(5, dtype=weft.float32),
           contains="dtype")
    raises(IndexError, put, weft.tensor([True, False]), 1.0, contains="mask")
    raises(IndexError, lambda: t[weft.tensor([True, False])], contains="mask")
    raises(IndexError, lambda: t[weft.tensor([0.5])], contains="must be long, int, byte or bool")
    raises(IndexError, lambda: t[[0, 1], [0, 1, 2]], contains="could not be broadcast")
    raises(IndexError, lambda: t[0, 0, 0, [0]], contains="too many indices")
    raises(IndexError, lambda: t["a"], contains="valid indices")
    raises(TypeError, put, [0], object())
    eq(t.tolist(), before, "nothing was written")


@test
def autograd_getitem():
    """the gradient of x[:, idx] and x[mask] (duplicates add up)"""
    x = weft.tensor(A, requires_grad=True)
    idx = weft.tensor([1, 1, 3])
    g = rng.standard_normal((3, 3, 5))
    (x[:, idx] * w(g)).sum().backward()
    expect = np.zeros_like(A)
    np.add.at(expect, (slice(None), [1, 1, 3]), g)
    np.testing.assert_allclose(np.array(x.grad.tolist()), expect, rtol=1e-12)
    x2 = weft.tensor(A, requires_grad=True)
    (x2[w(M)] * 3.0).sum().backward()
    np.testing.assert_allclose(np.array(x2.grad.tolist()), 3.0 * M, rtol=0)


@test
def autograd_setitem():
    """y[:, idx] = v records index_put_: the gradients of x and v match PyTorch"""
    need_torch()
    idx = [0, 3]
    gw = rng.standard_normal((3, 4, 5))
    vals = rng.standard_normal((3, 2, 5))
    x = weft.tensor(A, requires_grad=True)
    v = weft.tensor(vals, requires_grad=True)
    y = x * 2.0
    y[:, weft.tensor(idx)] = v
    (y * w(gw)).sum().backward()
    tx = torch.tensor(A, requires_grad=True)
    tv = torch.tensor(vals, requires_grad=True)
    ty = tx * 2.0
    ty[:, torch.tensor(idx)] = tv
    (ty * torch.tensor(gw)).sum().backward()
    np.testing.assert_allclose(np.array(y.tolist()), ty.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.array(x.grad.tolist()), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.array(v.grad.tolist()), tv.grad.numpy(), rtol=1e-12)
    # a broadcast value: its gradient sums over the broadcast dims
    x = weft.tensor(A, requires_grad=True)
    r = weft.tensor(vals[0, 0], requires_grad=True)
    y = x * 1.0
    y[0, [1, 2]] = r
    (y * w(gw)).sum().backward()
    np.testing.assert_allclose(np.array(r.grad.tolist()), gw[0, [1, 2]].sum(0), rtol=1e-12)
    leaf = weft.tensor(A, requires_grad=True)

    def write_leaf():
        leaf[:, [0]] = 1.0

    raises(RuntimeError, write_leaf)


@test
def unique_results():
    """unique returns what torch.unique returns for each return_* combination"""
    data = [3, 1, 3, 7, 1, 1]
    u, inv, cnt = np.unique(data, return_inverse=True, return_counts=True)
    t = weft.tensor(data)
    r = weft.unique(t)
    eq(type(r).__name__, "Tensor")
    eq(r.tolist(), u.tolist())
    r = t.unique(return_inverse=True)
    eq((len(r), r[0].tolist(), r[1].tolist()), (2, u.tolist(), inv.tolist()))
    r = weft.unique(t, return_counts=True)
    eq((len(r), r[0].tolist(), r[1].tolist()), (2, u.tolist(), cnt.tolist()))
    r = weft.unique(t, True, True, True)
    eq([x.tolist() for x in r], [u.tolist(), inv.tolist(), cnt.tolist()])
    m = weft.tensor([[1, 2], [0, 5], [1, 2]])
    r = m.unique(dim=0, return_counts=True)
    eq((r[0].tolist(), r[1].tolist()), ([[0, 5], [1, 2]], [1, 2]))
    raises(TypeError, weft.unique, [1, 2])
    if torch is not None:
        tt = torch.tensor(data)
        for kw in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True}):
            a, b = weft.unique(t, **kw), torch.unique(tt, **kw)
            eq(type(a) is tuple, type(b) is tuple, str(kw))
            a, b = (a, b) if type(a) is tuple else ((a,), (b,))
            eq([x.tolist() for x in a], [x.tolist() for x in b], str(kw))


@test
def interpolate_scale_pair():
    """interpolate's scale_factor: a float or a pair (H, W), as PyTorch's"""
    x = w(rng.standard_normal((1, 2, 3, 4)))
    eq(weft.interpolate(x, scale_factor=(2.0, 1.5)).shape, (1, 2, 6, 6))
    eq(weft.interpolate(x, scale_factor=[1, 3], mode="bilinear").shape, (1, 2, 3, 12))
    eq(weft.interpolate(x, scale_factor=2).shape, (1, 2, 6, 8))
    raises(RuntimeError, weft.interpolate, x, scale_factor=(2.0, 2.0, 2.0), contains="got 3")
    raises(TypeError, weft.interpolate, x, scale_factor="2")
    need_torch()
    import torch.nn.functional as F
    tx = torch.tensor(np.array(x.tolist()))
    for sf in (2.0, (2.0, 1.5), (1.7, 0.6), [0.5, 3.0]):
        for mode, ac in (("nearest", None), ("bilinear", False), ("bilinear", True)):
            kw = {} if ac is None else {"align_corners": ac}
            a = weft.interpolate(x, scale_factor=sf, mode=mode, **kw)
            b = F.interpolate(tx, scale_factor=sf, mode=mode, **kw)
            np.testing.assert_allclose(np.array(a.tolist()), b.numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg="%s %s %s" % (sf, mode, ac))


done()
