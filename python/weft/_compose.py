"""torch's functions that are plain compositions of weft's operators and
views, with torch's names and arguments: the view functions as module
functions (weft.reshape(x, shape) as torch.reshape), the small numerical
helpers (square, isclose, diff, trace, nansum, meshgrid, ...) as module
functions and Tensor methods.  Each is built from operators that autograd
already differentiates, so gradients flow through them; none is a kernel
of its own (a composition costs what its pieces cost, which is why the
heavier ones, such as a fused hypot or logaddexp with torch's overflow
care, are not here).  Attached at import, like _tensor.py's."""

import builtins
import math
import numbers

from . import _C
from ._tensor import ones_like, zeros_like

Tensor = _C.Tensor

# ------------------------------------------------------------- helpers


def _scalar_dtype(value, like):
    """the dtype torch gives a Python scalar next to tensor `like` (None:
    no tensor): the tensor's where the scalar's kind fits it, else the
    default for the kind (float32, int64, bool)"""
    if isinstance(value, bool):
        return like.dtype if like is not None else _C.bool
    if isinstance(value, numbers.Integral):
        return like.dtype if like is not None and like.dtype != _C.bool else _C.int64
    if isinstance(value, numbers.Real):
        return like.dtype if like is not None and like.is_floating_point() else _C.float32
    raise TypeError("expected a Tensor or a real number, got %s" % type(value).__name__)


def _as_tensor(value, like):
    """value itself when a Tensor, else a 0-d tensor of torch's dtype for
    it on like's device"""
    if isinstance(value, Tensor):
        return value
    kw = {"dtype": _scalar_dtype(value, like)}
    if like is not None:
        kw["device"] = like.device
    return _C.tensor(value, **kw)


def _dim(d, ndim, what):
    """d wrapped into [0, ndim), or IndexError naming what"""
    n = builtins.max(ndim, 1)
    if not -n <= d < n:
        raise IndexError("%s: dimension %d out of range [%d, %d]" % (what, d, -n, n - 1))
    return d % n


def _ints(v):
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]


# ------------------------------------------- views as module functions


def reshape(input, shape):
    """torch.reshape: input.reshape(shape)"""
    return input.reshape(shape)


def transpose(input, dim0, dim1):
    """torch.transpose (also swapaxes, swapdims)"""
    return input.transpose(dim0, dim1)


def permute(input, dims):
    """torch.permute"""
    return input.permute(dims)


def flatten(input, start_dim=0, end_dim=-1):
    """torch.flatten"""
    return input.flatten(start_dim, end_dim)


def squeeze(input, dim=None):
    """torch.squeeze"""
    return input.squeeze() if dim is None else input.squeeze(dim)


def unsqueeze(input, dim):
    """torch.unsqueeze"""
    return input.unsqueeze(dim)


def t(input):
    """torch.t"""
    return input.t()


def narrow(input, dim, start, length):
    """torch.narrow"""
    return input.narrow(dim, start, length)


def numel(input):
    """torch.numel"""
    return input.numel()


def is_floating_point(input):
    """torch.is_floating_point"""
    return input.is_floating_point()


def get_default_dtype():
    """torch.get_default_dtype: weft's default floating dtype, float32 (it
    is fixed: there is no set_default_dtype)"""
    return _C.float32


def movedim(input, source, destination):
    """torch.movedim (also moveaxis): the dims in source moved to the
    positions in destination, the others keeping their order"""
    src, dst = _ints(source), _ints(destination)
    if len(src) != len(dst):
        raise RuntimeError("movedim: Invalid source or destination dims: source (%s dims) should "
                           "contain the same number of dims as destination (%s dims)"
                           % (src, dst))
    n = input.ndim
    src = [_dim(d, n, "movedim") for d in src]
    dst = [_dim(d, n, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError("movedim: repeated dim in source %s or destination %s" % (src, dst))
    perm = [None] * n
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(d for d in range(n) if d not in src)
    perm = [p if p is not None else next(rest) for p in perm]
    return input.permute(perm)


moveaxis = movedim
swapaxes = transpose
swapdims = transpose


def broadcast_shapes(*shapes):
    """torch.broadcast_shapes"""
    out = []
    for shape in shapes:
        shape = _ints(shape) if not isinstance(shape, numbers.Integral) else [int(shape)]
        for i in range(1, len(shape) + 1):
            s = shape[-i]
            if i > len(out):
                out.insert(0, s)
            elif out[-i] == 1:
                out[-i] = s
            elif s != 1 and s != out[-i]:
                raise RuntimeError("shape mismatch: objects cannot be broadcast to a single shape "
                                   "(%s against %s)" % (list(shape), out))
    return tuple(out)


def broadcast_to(input, size):
    """torch.broadcast_to: input.expand(size)"""
    return input.expand(tuple(size))


def broadcast_tensors(*tensors):
    """torch.broadcast_tensors: each expanded to the common shape"""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


def atleast_1d(*tensors):
    """torch.atleast_1d"""
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    return out[0] if one else tuple(out)


def atleast_2d(*tensors):
    """torch.atleast_2d"""
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = [t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t
           for t in tensors]
    return out[0] if one else tuple(out)


def hstack(tensors):
    """torch.hstack: along dim 1, or dim 0 when all are 1-D"""
    ts = [atleast_1d(t) for t in tensors]
    return _C.cat(ts, dim=0 if ts and all(t.ndim == 1 for t in ts) else 1)


def vstack(tensors):
    """torch.vstack: along dim 0, 1-D tensors as rows"""
    return _C.cat([atleast_2d(t) for t in tensors], dim=0)


def meshgrid(*tensors, indexing="ij"):
    """torch.meshgrid: 'ij' (torch's default) or 'xy' (the first two
    outputs' dims swapped); views of the inputs, expanded"""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError("meshgrid: indexing must be 'ij' or 'xy', not %r" % (indexing,))
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("meshgrid: expected 0D or 1D tensors, got %dD" % t.ndim)
    n = len(tensors)
    axes = list(range(n))
    if indexing == "xy" and n >= 2:
        axes[0], axes[1] = 1, 0
    shape = [0] * n
    for t, a in zip(tensors, axes):
        shape[a] = t.numel()
    out = []
    for t, a in zip(tensors, axes):
        view = [1] * n
        view[a] = t.numel()
        out.append(t.reshape(view).expand(shape))
    return tuple(out)


def unflatten(input, dim, sizes):
    """torch.unflatten: dim split into sizes (one may be -1)"""
    d = _dim(dim, input.ndim, "unflatten")
    shape = list(input.shape)
    return input.reshape(shape[:d] + _ints(sizes) + shape[d + 1:])


def tensor_split(input, indices_or_sections, dim=0):
    """torch.tensor_split: n sections (the first size % n one longer), or
    the pieces between the given indices; views"""
    d = _dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, numbers.Integral):
        n = int(indices_or_sections)
        if n <= 0:
            raise RuntimeError("tensor_split: number of sections must be larger than 0, got %d"
                               % n)
        if n > size + (1 << 16):
            # (each section is a tensor in the tuple: billions of empty
            # ones would only exhaust memory slowly)
            raise RuntimeError("tensor_split: %d sections of a dimension of size %d is more "
                               "than this function makes" % (n, size))
        q, r = divmod(size, n)
        bounds, at = [], 0
        for i in range(n - 1):
            at += q + (1 if i < r else 0)
            bounds.append(at)
    else:
        bounds = _ints(indices_or_sections)
    # piece i runs from bound i - 1 to bound i, each clamped into [0,
    # size]; a bound below the one before gives an empty piece
    pieces, start = [], 0
    for b in bounds + [size]:
        b = builtins.min(builtins.max(b + size if b < 0 else b, 0), size)
        pieces.append(input.narrow(d, start, builtins.max(b - start, 0)))
        start = b
    return tuple(pieces)


def repeat_interleave(input, repeats, dim=None):
    """torch.repeat_interleave: each element (or slice along dim) repeated
    repeats times (an int, or one count per element); the index is built
    with weft's operators, so a huge count fails in the allocator at once
    instead of in a Python loop"""
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = _dim(dim, input.ndim, "repeat_interleave")
    size = input.shape[d]
    if isinstance(repeats, numbers.Integral) or (isinstance(repeats, Tensor) and
                                                 repeats.numel() == 1 and size != 1):
        r = int(repeats.item() if isinstance(repeats, Tensor) else repeats)
        if r < 0:
            raise RuntimeError("repeat_interleave: repeats can not be negative")
        shape = list(input.shape)
        wide = shape[:d + 1] + [r] + shape[d + 1:]
        return input.unsqueeze(d + 1).expand(wide).reshape(shape[:d] + [size * r] + shape[d + 1:])
    counts = _ints(repeats.tolist() if isinstance(repeats, Tensor) else repeats)
    if len(counts) != size:
        raise RuntimeError("repeat_interleave: repeats must have the same size as input along "
                           "dim (%d against %d)" % (len(counts), size))
    if builtins.any(c < 0 for c in counts):
        raise RuntimeError("repeat_interleave: repeats can not be negative")
    # the output's index i -> the source element: a step of (j - the last
    # j) at the first output of each element j that repeats, summed
    total = builtins.sum(counts)
    steps = _C.zeros(total, dtype=_C.int64, device=input.device)
    starts, jumps, at, last = [], [], 0, 0
    for j, c in enumerate(counts):
        if c:
            starts.append(at)
            jumps.append(j - last)
            last = j
        at += c
    if starts:
        steps = steps.index_add(0, _C.tensor(starts, dtype=_C.int64, device=input.device),
                                _C.tensor(jumps, dtype=_C.int64, device=input.device))
    return input.index_select(d, steps.cumsum(0))


# ------------------------------------------------------- element-wise


def square(input):
    """torch.square: input * input (a bool tensor squares as int64, as torch's)"""
    if input.dtype == _C.bool:
        input = input.to(_C.int64)
    return input * input


def floor_divide(input, other):
    """torch.floor_divide (torch 1.13's: rounds toward minus infinity), div
    with rounding_mode='floor'; either operand may be a Python number"""
    if not isinstance(input, Tensor):
        input = _as_tensor(input, other)
    return _C.div(input, other, rounding_mode="floor")


def _floor_divide_(self, other):
    """Tensor.floor_divide_: self //= other in place"""
    return self.div_(other, rounding_mode="floor")


def signbit(input):
    """torch.signbit: whether the sign bit is set (True for -0.0; False
    for every unsigned or bool element)"""
    if input.is_floating_point():
        # -0.0 < 0 is False: 1 / -0.0 is -inf tells it
        return (input < 0) | ((input == 0) & (input.reciprocal() < 0))
    return input < 0


def clip(input, min=None, max=None):  # noqa: A002 -- torch's names
    """torch.clip: clamp"""
    return input.clamp(min, max)


def negative(input):
    """torch.negative: neg"""
    return -input


def true_divide(input, other):
    """torch.true_divide: div"""
    return input / other


def frac(input):
    """torch.frac: input - trunc(input), the sign of input's"""
    return input - input.trunc()


def sgn(input):
    """torch.sgn: sign, for real tensors"""
    return input.sign()


def float_power(input, exponent):
    """torch.float_power: the power in float64"""
    base = _as_tensor(input, exponent if isinstance(exponent, Tensor) else None)
    base = base.to(_C.float64)
    return base.pow(exponent.to(_C.float64) if isinstance(exponent, Tensor) else float(exponent))


def xlogy(input, other):
    """torch.xlogy: input * log(other), 0 where input is 0 (unless other is
    NaN, which stays NaN)"""
    x = _as_tensor(input, other if isinstance(other, Tensor) else None)
    y = _as_tensor(other, x)
    if not x.is_floating_point() and not y.is_floating_point():
        x = x.to(_C.float32)
    prod = x * y.log()
    return _C.where((x == 0) & ~_C.isnan(y), zeros_like(prod), prod)


def heaviside(input, values):
    """torch.heaviside: values where input is 0, else 1 where positive, 0
    where negative (or NaN)"""
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes "
                           "(%s and %s)" % (input.dtype, values.dtype))
    return _C.where(input == 0, values, (input > 0).to(input.dtype))


def fmax(input, other):
    """torch.fmax: maximum, but a NaN loses to a number"""
    return _C.where(_C.isnan(input), other, _C.where(_C.isnan(other), input,
                                                     _C.maximum(input, other)))


def fmin(input, other):
    """torch.fmin: minimum, but a NaN loses to a number"""
    return _C.where(_C.isnan(input), other, _C.where(_C.isnan(other), input,
                                                     _C.minimum(input, other)))


def sinc(input):
    """torch.sinc: sin(pi x) / (pi x), 1 at 0"""
    x = input if input.is_floating_point() else input.to(_C.float32)
    px = x * math.pi
    return _C.where(x == 0, ones_like(x), px.sin() / px)


def logit(input, eps=None):
    """torch.logit: log(p / (1 - p)), p clamped to [eps, 1 - eps] if eps"""
    p = input if eps is None else input.clamp(eps, 1.0 - eps)
    return (p / (1 - p)).log()


def where(condition, input=None, other=None, **kwargs):
    """torch.where: input where condition, else other (either may be a
    Python number); with condition alone, the nonzero indices per dim;
    out= as the operator's"""
    if input is None and other is None:
        return tuple(_C.nonzero(condition).t().unbind(0)) if condition.ndim else \
            (_C.nonzero(condition.reshape(1)).reshape(-1),)
    like = input if isinstance(input, Tensor) else other if isinstance(other, Tensor) else None
    if like is None:
        # two numbers: torch's promotion of the pair (float beats int beats bool)
        kinds = [float if isinstance(v, float) else int if not isinstance(v, bool) else bool
                 for v in (input, other)]
        kind = float if float in kinds else int if int in kinds else bool
        like = _C.tensor(kind(0), device=condition.device)
    return _C.where(condition, _as_tensor(input, like), _as_tensor(other, like), **kwargs)


# ----------------------------------------------------- comparisons


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """torch.isclose: |input - other| <= atol + rtol * |other|, or equal
    (infinities are close only to themselves)"""
    if input.dtype == _C.bool and other.dtype == _C.bool:
        return input == other
    eq = input == other
    diff = (input - other).abs()
    close = eq | (_C.isfinite(diff) & (diff <= atol + rtol * other.abs()))
    if equal_nan:
        close = close | (_C.isnan(input) & _C.isnan(other))
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """torch.allclose: whether isclose holds everywhere (a bool)"""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """torch.equal: the same shape and the same elements (NaN is not equal)"""
    return tuple(input.shape) == tuple(other.shape) and bool((input == other).all())


# --------------------------------------------------------- reductions


def nansum(input, dim=None, keepdim=False, dtype=None):
    """torch.nansum: sum with NaN counted as 0"""
    x = _C.where(_C.isnan(input), zeros_like(input), input) \
        if input.is_floating_point() else input
    if dtype is not None:
        x = x.to(dtype)
    return x.sum() if dim is None else x.sum(dim=dim, keepdim=keepdim)


def nanmean(input, dim=None, keepdim=False, dtype=None):
    """torch.nanmean: the mean of the elements that are not NaN"""
    if not input.is_floating_point():
        raise RuntimeError("nanmean(): expected input to have floating point dtype but got %s"
                           % input.dtype)
    x = input if dtype is None else input.to(dtype)
    count = (~_C.isnan(x)).to(x.dtype)
    if dim is None:
        return nansum(x) / count.sum()
    return nansum(x, dim, keepdim) / count.sum(dim=dim, keepdim=keepdim)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """torch.diff: the n-th forward difference along dim (for bool, !=)"""
    d = _dim(dim, input.ndim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    x = _C.cat(parts, dim=d) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        hi, lo = x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)
        x = hi != lo if x.dtype == _C.bool else hi - lo
    return x


def trace(input):
    """torch.trace: the sum of a matrix's main diagonal"""
    if input.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim %d" % input.ndim)
    return diag(input).sum()


def diag(input, diagonal=0):
    """torch.diag: a vector's matrix with it on the diagonal-th diagonal,
    or a matrix's diagonal-th diagonal as a vector (a copy)"""
    k = int(diagonal)
    if input.ndim == 1:
        n = input.shape[0]
        side = n + abs(k)
        r0, c0 = builtins.max(-k, 0), builtins.max(k, 0)
        idx = _C.arange(n, device=input.device) * (side + 1) + (r0 * side + c0)
        flat = _C.zeros(side * side, dtype=input.dtype, device=input.device)
        return flat.index_add(0, idx, input).reshape(side, side)
    if input.ndim != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got %dD" % input.ndim)
    rows, cols = input.shape
    r0, c0 = builtins.max(-k, 0), builtins.max(k, 0)
    length = builtins.max(0, builtins.min(rows - r0, cols - c0))
    idx = _C.arange(length, device=input.device) * (cols + 1) + (r0 * cols + c0)
    return input.reshape(-1).index_select(0, idx)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """torch.eye: ones on the main diagonal of an n x m matrix"""
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError("eye: n and m must be non-negative, got %d and %d" % (n, m))
    kw = {"dtype": dtype if dtype is not None else _C.float32}
    if device is not None:
        kw["device"] = device
    flat = _C.zeros(n * m, **kw)
    k = builtins.min(n, m)
    if k:
        flat[_C.arange(k, device=flat.device) * (m + 1)] = 1
    out = flat.reshape(n, m)
    if requires_grad:
        out.requires_grad_(True)
    return out


def argwhere(input):
    """torch.argwhere: the indices of the nonzero elements, one row each"""
    return _C.nonzero(input)


def msort(input):
    """torch.msort: sorted along dim 0"""
    return _C.sort(input, dim=0)[0]


# torch's keywords and overloads that the schemas lack, in front of the C
# operators: each wrapper passes a call without them straight through


def _var_std(name):
    op = getattr(_C, name)

    def f(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **kw):
        # torch's var(dim, unbiased, keepdim) and var(unbiased) (a bool first)
        if isinstance(dim, bool) and unbiased is None:
            dim, unbiased = None, dim
        if unbiased is not None:
            if correction is not None:
                raise TypeError("%s(): give unbiased or correction, not both" % name)
            correction = 1 if unbiased else 0
        if correction is not None:
            kw["correction"] = correction
        return op(input, dim, keepdim=keepdim, **kw)

    f.__name__ = name
    f.__doc__ = ("torch.%s: over dim (all when None), with Bessel's correction unless "
                 "unbiased=False (or correction=c)" % name)
    return f


var = _var_std("var")
std = _var_std("std")
_sort_op = _C.sort


def sort(input, dim=-1, descending=False, stable=False):
    """torch.sort: (values, indices) along dim; weft's sort is always stable,
    so stable=True is what it does anyway"""
    return _sort_op(input, dim, descending)


_nonzero_op = _C.nonzero


def nonzero(input, *, as_tuple=False):
    """torch.nonzero: the indices of the nonzero elements, an (n, ndim)
    int64 tensor, or with as_tuple=True one 1-D tensor per dim (a 0-d input
    counts as 1-D, as torch's)"""
    nz = _nonzero_op(input)
    if not as_tuple:
        return nz
    if input.dim() == 0:
        # nz is (1, 0) or (0, 0): the one element at index 0, or none
        return (_C.zeros([nz.shape[0]], dtype=_C.int64, device=input.device),)
    return tuple(nz[:, d] for d in range(input.dim()))


_clamp_op = _C.clamp


def clamp(input, min=None, max=None):  # noqa: A002 -- torch's names
    """torch.clamp: min and max are numbers, or tensors that broadcast with
    input (then maximum(input, min) and minimum(..., max), in torch's
    result dtype)"""
    if not isinstance(min, Tensor) and not isinstance(max, Tensor):
        return _clamp_op(input, min, max)  # refuses both None by name
    out = input
    if min is not None:
        out = _C.maximum(out, _as_tensor(min, input))
    if max is not None:
        out = _C.minimum(out, _as_tensor(max, input))
    return out


_scatter_op = _C.scatter


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """torch.scatter: src a tensor, or a number (value) written at every
    index; reduce as torch's scatter(..., reduce=) is not supported"""
    if reduce is not None:
        raise NotImplementedError("scatter: reduce= is not supported; use scatter_add or "
                                  "scatter_reduce")
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter(): missing src (a tensor) or value (a number)")
    if not isinstance(src, Tensor):
        src = _C.full(list(index.shape), src, dtype=input.dtype, device=input.device)
    return _scatter_op(input, dim, index, src)


# ------------------------------------------------------------ install

_MODULE = ["reshape", "transpose", "permute", "flatten", "squeeze", "unsqueeze", "t", "narrow",
           "numel", "is_floating_point", "get_default_dtype", "movedim", "moveaxis", "swapaxes",
           "swapdims", "broadcast_shapes", "broadcast_to", "broadcast_tensors", "atleast_1d",
           "atleast_2d", "hstack", "vstack", "meshgrid", "unflatten", "tensor_split",
           "repeat_interleave", "square", "clip", "negative", "true_divide", "frac", "sgn",
           "floor_divide", "signbit", "float_power", "xlogy", "heaviside", "fmax", "fmin", "sinc", "logit", "where",
           "isclose", "allclose", "equal", "nansum", "nanmean", "diff", "trace", "diag", "eye",
           "argwhere", "msort", "var", "std", "sort", "nonzero", "clamp", "scatter"]

# Tensor methods: self is the first argument of each
_METHODS = ["movedim", "moveaxis", "swapaxes", "swapdims", "broadcast_to", "unflatten",
            "tensor_split", "repeat_interleave", "square", "clip", "negative", "true_divide",
            "frac", "sgn", "floor_divide", "signbit", "float_power", "xlogy", "heaviside", "fmax", "fmin", "sinc", "logit",
            "isclose", "allclose", "equal", "nansum", "nanmean", "diff", "trace", "diag",
            "argwhere", "msort", "var", "std", "sort", "nonzero", "clamp", "scatter"]

for _name in _METHODS:
    setattr(Tensor, _name, globals()[_name])
Tensor.floor_divide_ = _floor_divide_


def _tensor_where(self, condition, other):
    """Tensor.where(condition, other): self where condition, else other"""
    return where(condition, self, other)


Tensor.where = _tensor_where
Tensor.ndimension = Tensor.dim
Tensor.mT = property(lambda self: self.transpose(-2, -1),
                     doc="the last two dims swapped (a view)")
