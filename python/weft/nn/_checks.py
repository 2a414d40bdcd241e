"""Argument and input checks shared by weft.nn's layers: clear errors that
name the module and the argument."""
import numbers

from .. import _C


def _factory(device, dtype):
    kw = {}
    if device is not None:
        kw["device"] = device
    if dtype is not None:
        kw["dtype"] = dtype
    return kw


def _positive_int(v, name, cls):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError("%s: %s must be an int, got %s" % (cls, name, type(v).__name__))
    if v < 0:
        raise ValueError("%s: %s must be non-negative, got %d" % (cls, name, v))
    return int(v)


def _check_input(module, x, dims):
    if not isinstance(x, _C.Tensor):
        raise TypeError("%s.forward: input must be a weft.Tensor, not %s"
                        % (type(module).__name__, type(x).__name__))
    if x.dim() not in dims:
        raise RuntimeError("%s: expected %s input, got a %dD tensor of shape %s"
                           % (type(module).__name__, " or ".join("%dD" % d for d in dims),
                              x.dim(), list(x.shape)))
