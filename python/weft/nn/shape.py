"""Layers that only rearrange, pad or resample values: nn.Flatten,
nn.Unflatten, the Pad2d modules and nn.Upsample."""
import numbers

from . import functional as F
from .module import Module


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return "start_dim=%d, end_dim=%d" % (self.start_dim, self.end_dim)


class Unflatten(Module):
    """Splits dimension dim into unflattened_size."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        shape = list(input.shape)
        dim = self.dim % len(shape)
        return input.reshape(*(shape[:dim] + list(self.unflattened_size) + shape[dim + 1:]))

    def extra_repr(self):
        return "dim=%s, unflattened_size=%s" % (self.dim, self.unflattened_size)


class _Pad2d(Module):
    _mode = "constant"

    def __init__(self, padding, value=None):
        super().__init__()
        if isinstance(padding, numbers.Integral):
            padding = (padding,) * 4
        if len(padding) != 4:
            raise ValueError("%s: padding must be an int or 4 ints (left, right, top, bottom), "
                             "got %r" % (type(self).__name__, padding))
        self.padding = tuple(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, self._mode, self.value)

    def extra_repr(self):
        return "%s" % (self.padding,)


class ZeroPad2d(_Pad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ConstantPad2d(_Pad2d):
    def __init__(self, padding, value):
        super().__init__(padding, float(value))


class ReflectionPad2d(_Pad2d):
    _mode = "reflect"


class ReplicationPad2d(_Pad2d):
    _mode = "replicate"


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self):
        if self.scale_factor is not None:
            return "scale_factor=%s, mode='%s'" % (self.scale_factor, self.mode)
        return "size=%s, mode='%s'" % (self.size, self.mode)
