"""python/weft/_compose.py against Debian's PyTorch 1.13: torch's view
functions at module level and the compositions (square, isclose, diff,
trace, diag, eye, meshgrid, tensor_split, repeat_interleave, nansum,
where with numbers, ...), each on the same inputs as torch's, edge cases
included (NaN, infinities, empty tensors, negative dims); gradients
through a few by gradcheck; bad arguments refused by name."""
import math

import numpy as np
import torch

import weft
from taplib import done, eq, raises, test

rng = np.random.default_rng(2611)


def W(a):
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:  # (NumPy 1.24's DLPack has no bool)
        return weft.from_dlpack(a.astype(np.uint8)).to(weft.bool)
    return weft.from_dlpack(a)


def T(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def arr(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    if isinstance(x, weft.Tensor):
        x = x.detach()
        if x.dtype == weft.bool:  # (NumPy 1.24's DLPack has no bool)
            return arr(x.to(weft.uint8)).astype(bool)
        return np.from_dlpack(x.reshape(-1).contiguous()).reshape(tuple(x.shape))
    return np.asarray(x)


def same(w, t, what, tol=0.0):
    """w (weft) equals t (torch): shape, dtype kind and values (NaN where
    NaN), a tuple element by element"""
    if isinstance(t, (tuple, list)):
        eq(len(w), len(t), what + ": count")
        for i, (a, b) in enumerate(zip(w, t)):
            same(a, b, "%s[%d]" % (what, i), tol)
        return
    if isinstance(t, (bool, int, float)):
        eq(w, t, what)
        return
    a, b = arr(w), arr(t)
    eq(a.shape, b.shape, what + ": shape")
    eq(a.dtype.kind, b.dtype.kind, what + ": dtype kind")
    eq(a.dtype.itemsize, b.dtype.itemsize, what + ": dtype size")
    if a.dtype.kind == "f":
        ok = np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True) if tol else \
            np.array_equal(a, b, equal_nan=True)
    else:
        ok = np.array_equal(a, b)
    if not ok:
        raise AssertionError("%s: %r != torch's %r" % (what, a, b))


def both(fn, *arrays, what, tol=0.0):
    same(fn(weft, *[W(a) for a in arrays]), fn(torch, *[T(a) for a in arrays]), what, tol)


X = np.array([[1.5, -2.0, 0.0], [np.nan, np.inf, -0.5]], np.float32)
Y = np.array([[1.5, -2.0 + 1e-7, 1e-9], [np.nan, np.inf, 0.5]], np.float32)
R = rng.standard_normal((3, 4, 5)).astype(np.float64)


@test
def views_at_module_level():
    """reshape, transpose, swapaxes, permute, flatten, squeeze, unsqueeze, t, narrow, numel, movedim/moveaxis, unflatten as torch's module functions"""
    both(lambda m, x: m.reshape(x, (4, -1)), R, what="reshape")
    both(lambda m, x: m.transpose(x, 0, -1), R, what="transpose")
    both(lambda m, x: m.swapaxes(x, 1, 2), R, what="swapaxes")
    both(lambda m, x: m.swapdims(x, 0, 1), R, what="swapdims")
    both(lambda m, x: m.permute(x, (2, 0, 1)), R, what="permute")
    both(lambda m, x: m.flatten(x, 1), R, what="flatten")
    both(lambda m, x: m.squeeze(m.unsqueeze(x, 1)), R, what="squeeze/unsqueeze")
    both(lambda m, x: m.squeeze(m.unsqueeze(x, -1), -1), R, what="squeeze(dim)")
    both(lambda m, x: m.t(x), R[0], what="t")
    both(lambda m, x: m.narrow(x, 2, 1, 3), R, what="narrow")
    eq(weft.numel(W(R)), 60, "numel")
    for src, dst in [(0, 2), (-1, 0), ((0, 1), (2, 0)), ([2], [1])]:
        both(lambda m, x: m.movedim(x, src, dst), R, what="movedim %s %s" % (src, dst))
        both(lambda m, x: m.moveaxis(x, src, dst), R, what="moveaxis %s %s" % (src, dst))
        both(lambda m, x: x.movedim(src, dst), R, what="Tensor.movedim %s %s" % (src, dst))
    both(lambda m, x: m.unflatten(x, 1, (2, 2)), R, what="unflatten")
    both(lambda m, x: x.unflatten(-1, (5, -1)), R, what="Tensor.unflatten -1")
    both(lambda m, x: x.mT, R, what="mT")
    eq(W(R).ndimension(), 3, "ndimension")
    eq(weft.is_floating_point(W(R)), True, "is_floating_point")
    eq(weft.get_default_dtype(), weft.float32, "get_default_dtype")
    raises(RuntimeError, weft.movedim, W(R), (0, 1), 2, contains="same number of dims")
    raises(RuntimeError, weft.movedim, W(R), (0, 0), (1, 2), contains="repeated dim")
    raises(IndexError, weft.movedim, W(R), 3, 0, contains="out of range")


@test
def broadcasting_and_stacking():
    """broadcast_to, broadcast_tensors, broadcast_shapes, atleast_1d/2d, hstack, vstack, meshgrid (ij and xy)"""
    a, b = rng.standard_normal((3, 1)), rng.standard_normal((1, 4))
    both(lambda m, x: m.broadcast_to(x, (2, 3, 4)), a, what="broadcast_to")
    both(lambda m, x, y: m.broadcast_tensors(x, y), a, b, what="broadcast_tensors")
    eq(weft.broadcast_shapes((3, 1), (1, 4), (2, 1, 1)), tuple(torch.broadcast_shapes(
        (3, 1), (1, 4), (2, 1, 1))), "broadcast_shapes")
    raises(RuntimeError, weft.broadcast_shapes, (3,), (4,), contains="cannot be broadcast")
    v, s = rng.standard_normal(3), np.array(2.0)
    both(lambda m, x: m.atleast_1d(x), s, what="atleast_1d 0-d")
    both(lambda m, x: m.atleast_2d(x), v, what="atleast_2d 1-d")
    both(lambda m, x, y: m.atleast_2d(x, y), v, s, what="atleast_2d of two")
    both(lambda m, x, y: m.hstack([x, y]), v, v, what="hstack 1-d")
    both(lambda m, x, y: m.hstack([x, y]), a, a, what="hstack 2-d")
    both(lambda m, x, y: m.vstack([x, y]), v, v, what="vstack 1-d")
    u, w = rng.standard_normal(2), rng.standard_normal(3)
    for indexing in ("ij", "xy"):
        both(lambda m, x, y, z: m.meshgrid(x, y, z, indexing=indexing), u, w, v,
             what="meshgrid " + indexing)
    raises(ValueError, weft.meshgrid, W(u), indexing="yx", contains="'ij' or 'xy'")


@test
def splitting_and_repeating():
    """tensor_split by sections and by indices (negative, past the end), repeat_interleave with an int, a list and a tensor of counts"""
    x = np.arange(10.0).reshape(2, 5)
    for arg in (3, 5, 7, [1, 3], [-2, 9], [4, 2]):
        both(lambda m, t: m.tensor_split(t, arg, dim=1), x, what="tensor_split %s" % (arg,))
    both(lambda m, t: t.tensor_split(2), x, what="Tensor.tensor_split")
    raises(RuntimeError, weft.tensor_split, W(x), 0, contains="larger than 0")
    both(lambda m, t: m.repeat_interleave(t, 2), x, what="repeat_interleave flat")
    both(lambda m, t: m.repeat_interleave(t, 3, dim=0), x, what="repeat_interleave dim 0")
    both(lambda m, t: t.repeat_interleave(m.tensor([1, 0, 2, 1, 3]), dim=1), x,
         what="repeat_interleave counts")
    both(lambda m, t: m.repeat_interleave(t, m.tensor([0, 2, 0, 0, 1])), x[0],
         what="repeat_interleave with zero counts")
    both(lambda m, t: m.repeat_interleave(t, m.tensor([0, 0, 0, 0, 0])), x[0],
         what="repeat_interleave to nothing")
    both(lambda m, t: m.repeat_interleave(t, m.tensor(2), dim=1), x,
         what="repeat_interleave by a 0-d tensor")
    raises(MemoryError, weft.repeat_interleave, W(x), 2 ** 40)
    raises(RuntimeError, weft.tensor_split, W(x), 2 ** 40, contains="more than")
    raises(RuntimeError, weft.repeat_interleave, W(x), weft.tensor([1, 2]), dim=1,
           contains="same size")
    raises(RuntimeError, weft.repeat_interleave, W(x), -1, contains="negative")


@test
def elementwise():
    """square, clip, negative, true_divide, frac, sgn, float_power, xlogy (0 * log 0, NaN), heaviside, fmax/fmin (NaN loses), sinc (0), logit (eps)"""
    both(lambda m, x: m.square(x), X, what="square")
    both(lambda m, x: x.square(), np.array([3, -4], np.int64), what="square int64")
    both(lambda m, x: m.clip(x, -1.0, 1.0), X, what="clip")
    both(lambda m, x: x.clip(min=0.0), X, what="clip min")
    both(lambda m, x: m.negative(x), X, what="negative")
    both(lambda m, x, y: m.true_divide(x, y), X, Y, what="true_divide")
    both(lambda m, x: m.frac(x), np.array([2.5, -2.5, 0.0, -0.75]), what="frac")
    both(lambda m, x: m.sgn(x), X, what="sgn")
    both(lambda m, x: m.float_power(x, 2), np.array([1.5, -3.0], np.float32),
         what="float_power (float64)")
    both(lambda m, x, y: m.float_power(x, y), np.array([2, 3], np.int64),
         np.array([0.5, 2.0]), what="float_power tensor")
    xs = np.array([0.0, 0.0, 2.0, 1.0, 0.0], np.float64)
    ys = np.array([0.0, np.nan, 3.0, -1.0, 5.0], np.float64)
    both(lambda m, x, y: m.xlogy(x, y), xs, ys, what="xlogy")
    both(lambda m, x, y: x.xlogy(y), xs, ys, what="Tensor.xlogy")
    hv = np.array([-1.5, 0.0, 2.0, np.nan], np.float32)
    both(lambda m, x, y: m.heaviside(x, y), hv, np.array([0.5], np.float32), what="heaviside")
    both(lambda m, x, y: m.heaviside(x, y), hv, np.array([7, 8, 9, 10], np.float32),
         what="heaviside per element")
    raises(RuntimeError, weft.heaviside, W(hv), W(np.array([1.0])), contains="different dtypes")
    a = np.array([1.0, np.nan, np.nan, -0.5], np.float32)
    b = np.array([np.nan, 2.0, np.nan, 0.5], np.float32)
    both(lambda m, x, y: m.fmax(x, y), a, b, what="fmax")
    both(lambda m, x, y: m.fmin(x, y), a, b, what="fmin")
    both(lambda m, x: m.sinc(x), np.array([0.0, 0.5, -1.0, 2.25], np.float32), what="sinc",
         tol=1e-6)
    both(lambda m, x: m.logit(x), np.array([0.25, 0.5, 0.9]), what="logit", tol=1e-12)
    both(lambda m, x: m.logit(x, 0.1), np.array([0.0, 0.5, 1.0]), what="logit eps", tol=1e-12)


@test
def where_with_numbers():
    """where with a Python number on either side (and both), the dtype torch gives it; where(condition) alone; Tensor.where"""
    x = np.array([[1.5, -2.0], [3.0, -4.0]], np.float32)
    i = np.array([1, -2, 3], np.int64)
    both(lambda m, t: m.where(t > 0, t, 0.0), x, what="where(c, x, 0.0)")
    both(lambda m, t: m.where(t > 0, -1.0, t), x, what="where(c, -1.0, x)")
    both(lambda m, t: m.where(t > 0, t, 0), i, what="where int with 0")
    both(lambda m, t: m.where(t > 0, t, 0.5), i, what="where int with 0.5 (float)")
    both(lambda m, t: m.where(t > 0, 1.0, 0.0), x, what="where of two numbers")
    both(lambda m, t: m.where(t > 0), x, what="where(condition)")
    both(lambda m, t: t.where(t > 0, t * 0 + 2), x, what="Tensor.where")
    same(W(x).where(W(x) > 0, 2.0), T(x).where(T(x) > 0, T(np.float32(2.0))),
         "Tensor.where with a number (torch 1.13's takes a tensor)")
    both(lambda m, t: m.argwhere(t), np.array([[0.0, 1.0], [2.0, 0.0]]), what="argwhere")
    out = weft.empty(2, 2)
    weft.where(W(x) > 0, W(x), 0.0, out=out)
    same(out, torch.where(T(x) > 0, T(x), T(np.float32(0))), "where(..., out=)")


@test
def comparisons():
    """isclose (tolerances, infinities, NaN with and without equal_nan), allclose, equal"""
    both(lambda m, x, y: m.isclose(x, y), X, Y, what="isclose")
    both(lambda m, x, y: m.isclose(x, y, equal_nan=True), X, Y, what="isclose equal_nan")
    both(lambda m, x, y: m.isclose(x, y, rtol=0, atol=1e-8), X, Y, what="isclose atol")
    inf = np.array([np.inf, -np.inf, np.inf, 1.0])
    both(lambda m, x, y: m.isclose(x, y), inf, np.array([np.inf, np.inf, 1e308, 1.0]),
         what="isclose infinities")
    both(lambda m, x, y: m.isclose(x, y), np.array([1, 5], np.int64), np.array([1, 6], np.int64),
         what="isclose int")
    both(lambda m, x, y: m.isclose(x, y), np.array([True, False]), np.array([True, True]),
         what="isclose bool")
    for a, b in [(X, X), (X, Y), (R, R), (R, R + 1e-9)]:
        eq(weft.allclose(W(a), W(b)), torch.allclose(T(a), T(b)), "allclose")
        eq(weft.allclose(W(a), W(b), equal_nan=True),
           torch.allclose(T(a), T(b), equal_nan=True), "allclose equal_nan")
        eq(weft.equal(W(a), W(b)), torch.equal(T(a), T(b)), "equal")
    eq(weft.equal(W(R), W(R[:2])), False, "equal: shapes differ")
    eq(W(R).equal(W(R.copy())), True, "Tensor.equal")


@test
def reductions_and_matrices():
    """nansum and nanmean (all, by dim, keepdim), diff (n, prepend/append, bool, empty), trace, diag both ways with offsets, eye, msort"""
    n = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.0]], np.float32)
    for kw in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}, {"dim": (0, 1)}):
        both(lambda m, x: m.nansum(x, **kw), n, what="nansum %s" % kw)
        both(lambda m, x: m.nanmean(x, **kw), n, what="nanmean %s" % kw, tol=1e-6)
    both(lambda m, x: m.nansum(x), np.array([1, 2], np.int64), what="nansum int")
    raises(RuntimeError, weft.nanmean, weft.tensor([1, 2]), contains="floating point")
    v = np.array([1, 4, 9, 16, 25], np.int64)
    for kw in ({}, {"n": 2}, {"n": 6}, {"prepend": np.array([0])}, {"append": np.array([30, 40])}):
        # the arrays among the arguments in the framework's own tensors
        def own(m, kw=kw):
            conv = W if m is weft else T
            return {k: conv(a) if isinstance(a, np.ndarray) else a for k, a in kw.items()}
        both(lambda m, x: m.diff(x, **own(m)), v, what="diff %s" % list(kw))
    both(lambda m, x: m.diff(x, dim=0), R, what="diff dim 0")
    both(lambda m, x: m.diff(x), np.array([True, False, False, True]), what="diff bool")
    both(lambda m, x: m.diff(x), np.zeros(0), what="diff empty")
    sq = rng.standard_normal((4, 6))
    both(lambda m, x: m.trace(x), sq, what="trace", tol=1e-12)
    raises(RuntimeError, weft.trace, W(R), contains="expected a matrix")
    for k in (0, 1, -2, 5, -3):
        both(lambda m, x: m.diag(x, k), sq, what="diag of a matrix, %d" % k)
    # (torch 1.13 fails with an overflow for a matrix's diagonal past its
    # corner; weft's is empty)
    eq(weft.diag(W(sq), -7).shape, (0,), "diag past the corner is empty")
    for k in (0, 1, -2, 5, -7):
        both(lambda m, x: m.diag(x, k), sq[0], what="diag of a vector, %d" % k)
    raises(RuntimeError, weft.diag, W(R), contains="1D or 2D")
    for args in ((3,), (2, 4), (0,), (3, 0)):
        same(weft.eye(*args), torch.eye(*args), "eye %s" % (args,))
    same(weft.eye(2, dtype=weft.int64), torch.eye(2, dtype=torch.int64), "eye int64")
    both(lambda m, x: m.msort(x), sq, what="msort")


@test
def gradients_through_compositions():
    """gradcheck through square, diag, trace, nansum, where with a number, xlogy, movedim, tensor_split"""
    x = W(rng.standard_normal((3, 3))).requires_grad_(True)
    v = W(rng.standard_normal(3) + 2.0).requires_grad_(True)
    cases = {
        "square": (lambda a: weft.square(a), x),
        "diag of a matrix": (lambda a: weft.diag(a, 1), x),
        "diag of a vector": (lambda a: weft.diag(a, -1), v),
        "trace": (lambda a: weft.trace(a) * 1.0, x),
        "nansum": (lambda a: weft.nansum(a, 0), x),
        "where": (lambda a: weft.where(a > 0, a, 0.0), x),
        "xlogy": (lambda a: weft.xlogy(a, a), v),
        "movedim": (lambda a: weft.movedim(a, 0, 1) * 1.0, x),
        "tensor_split": (lambda a: weft.tensor_split(a, 2, dim=1)[1] * 1.0, x),
    }
    for name, (f, a) in cases.items():
        eq(weft.autograd.gradcheck(f, (a,)), True, name)
    eq(math.isclose(float(weft.trace(weft.eye(3))), 3.0), True, "trace of eye")


done()
