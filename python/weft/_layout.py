"""Layouts: how a tensor's elements are stored.  ``weft.strided`` is built
in; plugins register others (a sparse format, a quantized one), whose
objects are made here on first sight.  ``Tensor.layout`` reports a
tensor's, ``Tensor.to_layout`` and ``Tensor.to_strided`` convert
(differentiably), ``weft.layouts()`` lists those registered."""

from . import _C


class layout:
    """A layout, named as its plugin registered it; ``weft.strided`` for the
    built-in one.  Compares equal to the same layout and to its name."""

    __slots__ = ("name",)
    _known = {}

    def __new__(cls, name):
        if not isinstance(name, str):
            raise TypeError("layout(): the name must be a str, not %s" % type(name).__name__)
        got = cls._known.get(name)
        if got is None:
            got = super().__new__(cls)
            got.name = name
            cls._known[name] = got
        return got

    def __repr__(self):
        return "weft." + self.name

    def __eq__(self, other):
        if isinstance(other, layout):
            return self is other
        return isinstance(other, str) and other == self.name

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (layout, (self.name,))


strided = layout("strided")


def layouts():
    """The registered layouts: [(layout, plugin name)], strided first."""
    return [(layout(name), plugin) for _, name, plugin in _C._layouts()]


def _name_of(target):
    if isinstance(target, layout):
        return target.name
    if isinstance(target, str):
        return target
    raise TypeError("to_layout(): layout must be a weft.layout or its name, not %s"
                    % type(target).__name__)


def _to_layout(self, target):
    """This tensor in another layout (a new tensor; itself when already in
    it).  Differentiable: the gradient flows back converted."""
    return _C._to_layout(self, _name_of(target))


def _to_strided(self):
    """This tensor in the strided layout (itself when already strided)."""
    return _C._to_strided(self)


# Tensor.layout is a C getter (python/layout.c) that makes its objects with
# this class once per layout
_C._set_layout_class(layout)
_C.Tensor.to_layout = _to_layout
_C.Tensor.to_strided = _to_strided
# torch's name for the conversion to strided
_C.Tensor.to_dense = _to_strided


def to_layout(input, layout):
    """weft.to_layout(t, layout): t converted to layout (see Tensor.to_layout)."""
    return _to_layout(input, layout)
