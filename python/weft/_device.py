"""weft.device: a device as torch.device spells it (type, index; equal to
another device or to its string), the type of Tensor.device."""

from . import _C


class device:
    """device("cuda:0"), device("cuda", 0), device("cpu"): .type and .index
    (None when not given); == compares with devices and strings; usable
    wherever weft takes a device.  RuntimeError for a string no device
    type matches, TypeError for other kinds of arguments."""

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(device) takes no index")
            type, index = type.type, type.index
        if not isinstance(type, str):
            raise TypeError("device() takes a str such as 'cuda:0', not %s" % _name(type))
        if ":" in type:
            if index is not None:
                raise RuntimeError("device(%r, %r): the string already has an index" % (type, index))
            type, _, text = type.partition(":")
            if not text.isdigit():
                raise RuntimeError("invalid device string: %r" % (type + ":" + text))
            index = int(text)
        elif index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise RuntimeError("device index must be a non-negative int, not %r" % (index,))
        # the core says whether the type exists (the message names the known ones)
        _C._parse_device(type)
        self._type, self._index = type, index

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __str__(self):
        return self._type if self._index is None else "%s:%d" % (self._type, self._index)

    def __repr__(self):
        if self._index is None:
            return "device(type=%r)" % self._type
        return "device(type=%r, index=%d)" % (self._type, self._index)

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self):
        return hash((self._type, self._index))

    def __reduce__(self):
        return (device, (self._type, self._index))


def _name(o):
    return type(o).__name__


# Tensor.device (a C getter) makes its objects with this class, once per
# device; device arguments may be of it too
_C._set_device_class(device)
