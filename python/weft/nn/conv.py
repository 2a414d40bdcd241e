"""nn.Conv1d, nn.Conv2d and nn.ConvTranspose2d: torch's arguments, weight
layouts and kaiming-uniform initialisation; forward is one C convolution
(after F.pad for the non-zero padding modes)."""
import math

from .. import _C
from . import functional as F
from . import init
from ._checks import _check_input, _factory
from .module import Module
from .parameter import Parameter


class _ConvNd(Module):
    _transposed = False
    _dims = 2  # spatial dimensions

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                 bias, padding_mode, output_padding=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if groups <= 0:
            raise ValueError("%s: groups must be a positive integer" % name)
        if in_channels % groups:
            raise ValueError("%s: in_channels must be divisible by groups" % name)
        if out_channels % groups:
            raise ValueError("%s: out_channels must be divisible by groups" % name)
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError("%s: padding_mode must be one of 'zeros', 'reflect', 'replicate', "
                             "'circular', got %r" % (name, padding_mode))
        self.in_channels = in_channels
        self.out_channels = out_channels
        n = self._dims
        self.kernel_size = tuple(F._ntuple(kernel_size, n, "kernel_size", name))
        self.stride = tuple(F._ntuple(stride, n, "stride", name))
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError("%s: invalid padding string %r, should be one of "
                                 "{'valid', 'same'}" % (name, padding))
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("%s: padding='same' is not supported for strided "
                                 "convolutions" % name)
            self.padding = padding
        else:
            self.padding = tuple(F._ntuple(padding, n, "padding", name))
        self.dilation = tuple(F._ntuple(dilation, n, "dilation", name))
        self.output_padding = tuple(F._ntuple(output_padding, n, "output_padding", name))
        self.groups = groups
        self.padding_mode = padding_mode
        kw = _factory(device, dtype)
        if self._transposed:
            shape = [in_channels, out_channels // groups] + list(self.kernel_size)
        else:
            shape = [out_channels, in_channels // groups] + list(self.kernel_size)
        self.weight = Parameter(_C.empty(shape, **kw))
        if bias:
            self.bias = Parameter(_C.empty([out_channels], **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels,
                                                   self.kernel_size, self.stride)
        if self.padding != (0,) * self._dims:
            s += ", padding=%s" % (self.padding,)
        if self.dilation != (1,) * self._dims:
            s += ", dilation=%s" % (self.dilation,)
        if self.output_padding != (0,) * self._dims:
            s += ", output_padding=%s" % (self.output_padding,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s


class Conv1d(_ConvNd):
    """1-D convolution over [N, C, L] (or [C, L]); weight
    [out_channels, in_channels/groups, k]."""

    _dims = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError('Conv1d: only "zeros" padding_mode is supported, got %r'
                             % (padding_mode,))
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        _check_input(self, input, (2, 3))
        if input.shape[-2] != self.in_channels:
            raise RuntimeError("Conv1d: expected input with %d channels (in_channels), got shape %s"
                               % (self.in_channels, list(input.shape)))
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over [N, C, H, W] (or [C, H, W]); weight
    [out_channels, in_channels/groups, kH, kW]."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        _check_input(self, input, (3, 4))
        channels = input.shape[-3]
        if channels != self.in_channels:
            raise RuntimeError("Conv2d: expected input with %d channels (in_channels), got shape %s"
                               % (self.in_channels, list(input.shape)))
        if self.padding_mode != "zeros":
            if isinstance(self.padding, str):
                padding, extra = F._conv_padding(self.padding, self.weight, self.dilation,
                                                 self.stride, "Conv2d")
            else:
                padding, extra = list(self.padding), None
            amounts = [padding[1], padding[1], padding[0], padding[0]]
            if extra is not None:
                amounts = [a + e for a, e in zip(amounts, extra)]
            input = F.pad(input, amounts, mode=self.padding_mode)
            return F.conv2d(input, self.weight, self.bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class ConvTranspose2d(_ConvNd):
    """The transpose (gradient) of Conv2d; weight
    [in_channels, out_channels/groups, kH, kW]."""

    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError('ConvTranspose2d: only "zeros" padding_mode is supported, got %r'
                             % (padding_mode,))
        if isinstance(padding, str):
            raise ValueError("ConvTranspose2d: padding must be an int or a pair, not a string")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device=device, dtype=dtype)

    def forward(self, input, output_size=None):
        _check_input(self, input, (3, 4))
        if input.shape[-3] != self.in_channels:
            raise RuntimeError("ConvTranspose2d: expected input with %d channels (in_channels), "
                               "got shape %s" % (self.in_channels, list(input.shape)))
        output_padding = list(self.output_padding)
        if output_size is not None:
            output_size = list(output_size)[-2:]
            for d in range(2):
                smallest = ((input.shape[-2 + d] - 1) * self.stride[d] - 2 * self.padding[d]
                            + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
                extra = output_size[d] - smallest
                if not 0 <= extra < max(self.stride[d], self.dilation[d]):
                    raise ValueError("ConvTranspose2d: requested output_size %s is not reachable "
                                     "from input shape %s" % (output_size, list(input.shape)))
                output_padding[d] = extra
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  output_padding, self.groups, self.dilation)
