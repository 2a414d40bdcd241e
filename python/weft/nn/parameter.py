"""weft.nn.Parameter: a tensor that a Module registers as one of its
parameters.

As in torch, Parameter is a subclass of weft.Tensor: Parameter(data) is a
leaf sharing data's memory that requires grad, isinstance(p, Parameter)
and isinstance(p, weft.Tensor) both hold, and operators on a parameter
return plain tensors.  Everything a tensor does, a parameter does, at C
speed (the methods are weft.Tensor's).
"""
from .. import _C


class Parameter(_C.Tensor):
    """Parameter(data=None, requires_grad=True): a leaf tensor sharing
    data's memory, marked as a module parameter."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty([0])
        if not isinstance(data, _C.Tensor):
            raise TypeError("nn.Parameter: data must be a weft.Tensor, not %s" % type(data).__name__)
        return _C.Tensor._make_subclass(cls, data, bool(requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + _C.Tensor.__repr__(self)


def is_parameter(obj):
    return isinstance(obj, Parameter)
