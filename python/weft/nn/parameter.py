"""weft.nn.Parameter: a tensor that a Module registers as one of its
parameters.

weft.Tensor is a C type that cannot be subclassed, so a Parameter is not a
separate class of object: Parameter(data) returns a weft.Tensor (a leaf that
shares data's memory and requires grad) and remembers it, and
isinstance(t, Parameter) asks that registry.  Everything a tensor does, a
parameter does, at C speed.
"""
import weakref

from .. import _C

_registry = {}  # id(tensor) -> weakref to it, dropped when the tensor dies


def _mark(t):
    key = id(t)

    def forget(ref, key=key):
        if _registry.get(key) is ref:
            del _registry[key]

    _registry[key] = weakref.ref(t, forget)
    return t


class _ParameterType(type):
    def __instancecheck__(cls, obj):
        ref = _registry.get(id(obj))
        return ref is not None and ref() is obj


class Parameter(metaclass=_ParameterType):
    """Parameter(data=None, requires_grad=True): a leaf tensor sharing
    data's memory, marked as a module parameter (see the module docstring:
    the result is a weft.Tensor)."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty([0])
        if not isinstance(data, _C.Tensor):
            raise TypeError("nn.Parameter: data must be a weft.Tensor, not %s" % type(data).__name__)
        t = data.detach()
        t.requires_grad_(bool(requires_grad))
        return _mark(t)


def is_parameter(obj):
    return isinstance(obj, Parameter)
