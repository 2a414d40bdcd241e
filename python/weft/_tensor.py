"""The PyTorch habits that are plain compositions of weft operators: Tensor
methods (float(), cpu(), new_zeros(), view_as(), data, ...), Tensor.device
as a weft.device, the weft.Tensor(...) constructor and the *_like
factories.  They are attached to the C type weft._C.Tensor at import, so
they are its methods like any other."""

import numbers

from . import _C
from ._device import device
from ._layout import strided as _strided

Tensor = _C.Tensor

# ----------------------------------------------------------- construction


def _tensor_new(cls, *args, **kwargs):
    """weft.Tensor(2, 3): uninitialised float32 of that shape;
    weft.Tensor([..]) / weft.Tensor((..)): float32 holding the data;
    weft.Tensor(): empty (0,), as torch.Tensor.  A subclass gets the
    same tensor as an instance of itself."""
    t = _tensor_make(*args, **kwargs)
    if cls is Tensor:
        return t
    return Tensor._make_subclass(cls, t, t.requires_grad)


def _tensor_make(*args, **kwargs):
    dev = kwargs.pop("device", None)
    if kwargs:
        raise TypeError("Tensor() got unexpected keyword arguments %s" % ", ".join(kwargs))
    if not args:
        return _C.empty(0, device=dev)
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
        return _C.empty(*args, device=dev)
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and not isinstance(args[0], str):
        return _C.tensor(args[0], dtype=_C.float32, device=dev)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0]
    raise TypeError("Tensor() takes sizes (ints) or a sequence of numbers, not %s"
                    % ", ".join(type(a).__name__ for a in args))


Tensor.__new__ = _tensor_new

# ----------------------------------------------------------- conversions


# float(), double(), ... are C methods (python/tensor.c), as to() is

_LEGACY_NAMES = {_C.float32: "FloatTensor", _C.float64: "DoubleTensor", _C.float16: "HalfTensor",
                 _C.bfloat16: "BFloat16Tensor", _C.int64: "LongTensor", _C.int32: "IntTensor",
                 _C.int16: "ShortTensor", _C.int8: "CharTensor", _C.uint8: "ByteTensor",
                 _C.bool: "BoolTensor", _C.complex64: "ComplexFloatTensor",
                 _C.complex128: "ComplexDoubleTensor"}
_FROM_LEGACY = {v: k for k, v in _LEGACY_NAMES.items()}


def _type(self, dtype=None, non_blocking=False):
    """type(): the legacy type name ('weft.FloatTensor', 'weft.cuda.FloatTensor');
    type(dtype): self.to(dtype), where dtype may also be such a name."""
    if dtype is None:
        prefix = "weft." if self.device.type == "cpu" else "weft.%s." % self.device.type
        return prefix + _LEGACY_NAMES[self.dtype]
    if isinstance(dtype, str):
        kind = dtype.rsplit(".", 1)[-1]
        if kind not in _FROM_LEGACY:
            raise RuntimeError("invalid type: %r" % dtype)
        moved = self.to("cuda") if ".cuda." in dtype and self.device.type != "cuda" else self
        return moved.to(_FROM_LEGACY[kind])
    return self.to(dtype)


Tensor.type = _type


def _type_as(self, other):
    """self.to(other's dtype), as torch.Tensor.type_as"""
    return self.to(other.dtype)


Tensor.type_as = _type_as


def _cpu(self, memory_format=None):
    """self.to('cpu'): self when it is on the CPU already"""
    return self.to("cpu")


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    """self.to('cuda:N') (device: None for 0, an int, a string or a weft.device)"""
    if device is None:
        device = "cuda:0"
    elif isinstance(device, int) and not isinstance(device, bool):
        device = "cuda:%d" % device
    return self.to(device)


Tensor.cpu = _cpu
Tensor.cuda = _cuda

# Tensor.device, is_cuda and is_cpu are C getters (python/tensor.c); the
# device objects are weft.device's, which weft/_device.py hands to _C

# ------------------------------------------------------------- in place


# zero_() is a C method (python/tensor.c)

# ------------------------------------------------------------ new_* family


def _sizes(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return size


def _new(factory):
    def new(self, *size, dtype=None, device=None, requires_grad=False):
        return factory(*_sizes(size), dtype=dtype or self.dtype, device=device or self.device,
                       requires_grad=requires_grad)

    new.__doc__ = ("new_%s(*size, dtype=None, device=None, requires_grad=False): like weft.%s, "
                   "with self's dtype and device unless given" % (factory.__name__, factory.__name__))
    return new


Tensor.new_zeros = _new(_C.zeros)
Tensor.new_ones = _new(_C.ones)
Tensor.new_empty = _new(_C.empty)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    """new_full(size, fill_value): weft.full with self's dtype and device unless given"""
    return _C.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                   requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """new_tensor(data): a copy of data (never shared), with self's dtype and
    device unless given"""
    if isinstance(data, Tensor):
        t = data.detach().to(dtype or data.dtype).to(device or self.device).clone()
    else:
        t = _C.tensor(data, dtype=dtype or self.dtype, device=device or self.device)
    return t.requires_grad_(requires_grad) if requires_grad else t


Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor

# ---------------------------------------------------------------- views


def _view_as(self, other):
    """self.view(other.shape)"""
    return self.view(other.shape)


def _expand_as(self, other):
    """self.expand(other.shape)"""
    return self.expand(other.shape)


def _reshape_as(self, other):
    """self.reshape(other.shape)"""
    return self.reshape(other.shape)


def _narrow_copy(self, dim, start, length):
    """self.narrow(dim, start, length) in new memory, as torch's: a strided
    tensor's narrow is a view, so it is cloned; a sparse tensor's narrow
    is already a new tensor (torch's sparse narrow refuses and names this
    method)."""
    part = self.narrow(dim, start, length)
    return part.clone() if part.layout == _strided or part.is_quantized else part


Tensor.narrow_copy = _narrow_copy
Tensor.view_as = _view_as
Tensor.expand_as = _expand_as
Tensor.reshape_as = _reshape_as
Tensor.nelement = Tensor.numel


def _get_data(self):
    return self.detach()


def _set_data(self, value):
    # torch swaps the storage in; weft tensors never change storage, so the
    # values are copied into place instead, which needs the same shape
    if not isinstance(value, Tensor):
        raise TypeError("data must be a Tensor, not %s" % type(value).__name__)
    if value.shape != self.shape:
        raise RuntimeError("data: a tensor of shape %s cannot take data of shape %s"
                           % (list(self.shape), list(value.shape)))
    self.detach().copy_(value)


Tensor.data = property(_get_data, _set_data,
                       doc="a detached view sharing the memory (assigning copies values in)")

# ---------------------------------------------------------------- hooks


class RemovableHandle:
    """What register_hook returns: remove() stops the hook (the C hook
    stays registered until its node is freed, and calls nothing)."""

    __slots__ = ("_fn",)

    def __init__(self, fn):
        self._fn = fn

    def remove(self):
        self._fn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _register_hook(self, hook):
    """register_hook(hook): hook(grad) runs each time the gradient of self is
    computed, before it is used; returning a Tensor replaces the gradient,
    None keeps it.  Returns a handle whose remove() stops it.  RuntimeError
    when self does not require grad; TypeError when hook is not callable."""
    if not callable(hook):
        raise TypeError("register_hook() takes a callable, not %s" % type(hook).__name__)
    handle = RemovableHandle(hook)

    def run(grad):
        fn = handle._fn
        return None if fn is None else fn(grad)

    _C._register_hook(self, run)
    return handle


Tensor.register_hook = _register_hook

# -------------------------------------------------------------- factories


def _like(factory, name):
    def like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
        if not isinstance(input, Tensor):
            raise TypeError("%s(): input must be a Tensor, not %s" % (name, type(input).__name__))
        return factory(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                       requires_grad=requires_grad)

    like.__name__ = name
    like.__doc__ = ("%s(input, *, dtype=None, device=None, requires_grad=False): a new tensor of "
                    "input's shape, dtype and device unless given" % name)
    return like


zeros_like = _like(_C.zeros, "zeros_like")
ones_like = _like(_C.ones, "ones_like")
empty_like = _like(_C.empty, "empty_like")
rand_like = _like(_C.rand, "rand_like")
randn_like = _like(_C.randn, "randn_like")


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False, memory_format=None):
    """full_like(input, fill_value): weft.full of input's shape, dtype and device unless given"""
    if not isinstance(input, Tensor):
        raise TypeError("full_like(): input must be a Tensor, not %s" % type(input).__name__)
    return _C.full(input.shape, fill_value, dtype=dtype or input.dtype, device=device or input.device,
                   requires_grad=requires_grad)


def randint_like(input, low=0, high=None, dtype=None, device=None, requires_grad=False):
    """randint_like(input, high) or randint_like(input, low, high)"""
    if high is None:
        low, high = 0, low
    return _C.randint(low, high, input.shape, dtype=dtype or input.dtype, device=device or input.device)


def as_tensor(data, dtype=None, device=None):
    """data itself when it is a Tensor of that dtype and device (else
    converted), a tensor sharing a NumPy array's memory where dtype and
    device allow, else a copy (weft.tensor)."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if (dtype or device) else data
    if hasattr(data, "__dlpack__") and type(data).__module__ == "numpy":
        try:
            t = _C.from_dlpack(data)
        except (BufferError, RuntimeError, TypeError):
            t = None
        if t is not None:
            return t.to(dtype=dtype, device=device) if (dtype or device) else t
    return _C.tensor(data, dtype=dtype, device=device)


def from_numpy(array):
    """A tensor sharing array's memory (writes are seen both ways), as
    torch.from_numpy.  TypeError for anything but a NumPy array; the
    dtypes DLPack cannot carry are refused with that error."""
    if type(array).__module__ != "numpy" or not hasattr(array, "__dlpack__"):
        raise TypeError("from_numpy() expects a numpy.ndarray, not %s" % type(array).__name__)
    try:
        return _C.from_dlpack(array)
    except BufferError as e:
        raise TypeError("from_numpy(): %s" % e) from None


def is_tensor(obj):
    """isinstance(obj, weft.Tensor)"""
    return isinstance(obj, Tensor)


def einsum(equation, *operands):
    """einsum('ij,jk->ik', a, b): operands as arguments, as torch.einsum
    (a single list of tensors is accepted too)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError("einsum(): operand %d must be a Tensor, not %s" % (i, type(t).__name__))
    return _C.einsum(equation, list(operands))


__all__ = ["device", "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like",
           "full_like", "randint_like", "as_tensor", "from_numpy", "is_tensor", "einsum"]
