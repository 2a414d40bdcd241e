"""weft.nn's layers: torch.nn's constructors, parameter shapes, default
initialisation (kaiming uniform for Linear and the convolutions) and
forward(), each forward one call into weft.nn.functional.
"""
import math
import numbers

from .. import _C
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


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


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b; weight [out_features, in_features]."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = _positive_int(in_features, "in_features", "Linear")
        self.out_features = _positive_int(out_features, "out_features", "Linear")
        kw = _factory(device, dtype)
        self.weight = Parameter(_C.empty([out_features, in_features], **kw))
        if bias:
            self.bias = Parameter(_C.empty([out_features], **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if not isinstance(input, _C.Tensor):
            raise TypeError("Linear.forward: input must be a weft.Tensor, not %s"
                            % type(input).__name__)
        if input.dim() == 0 or input.shape[-1] != self.in_features:
            raise RuntimeError("Linear: input's last dimension must be in_features=%d, got shape %s"
                               % (self.in_features, list(input.shape)))
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (
            self.in_features, self.out_features, self.bias is not None)


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


class _NormBase(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features = _positive_int(num_features, "num_features", type(self).__name__)
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        kw = _factory(device, dtype)
        if affine:
            self.weight = Parameter(_C.empty([num_features], **kw))
            self.bias = Parameter(_C.empty([num_features], **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros([num_features], **kw))
            self.register_buffer("running_var", _C.ones([num_features], **kw))
            self.register_buffer("num_batches_tracked",
                                 _C.zeros([], dtype=_C.int64, **_factory(device, None)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.fill_(0)
            self.running_var.fill_(1)
            self.num_batches_tracked.fill_(0)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def extra_repr(self):
        return "%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s" % (
            self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats)


class _BatchNorm(_NormBase):
    _dims = ()

    def forward(self, input):
        _check_input(self, input, self._dims)
        if input.shape[1] != self.num_features:
            raise RuntimeError("%s: expected input with %d channels (num_features) in "
                               "dimension 1, got shape %s"
                               % (type(self).__name__, self.num_features, list(input.shape)))
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch_stats = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over [N, C] or [N, C, L]."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over [N, C, H, W]."""
    _dims = (4,)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        kw = _factory(device, dtype)
        if elementwise_affine:
            self.weight = Parameter(_C.ones(list(self.normalized_shape), **kw))
            self.bias = Parameter(_C.zeros(list(self.normalized_shape), **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        n = len(self.normalized_shape)
        if not isinstance(input, _C.Tensor):
            raise TypeError("LayerNorm.forward: input must be a weft.Tensor, not %s"
                            % type(input).__name__)
        if tuple(input.shape[input.dim() - n:]) != self.normalized_shape or input.dim() < n:
            raise RuntimeError("LayerNorm: input's trailing dimensions must be normalized_shape=%s,"
                               " got shape %s" % (list(self.normalized_shape), list(input.shape)))
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps,
                                                     self.elementwise_affine)


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("GroupNorm: num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        kw = _factory(device, dtype)
        if affine:
            self.weight = Parameter(_C.ones([num_channels], **kw))
            self.bias = Parameter(_C.zeros([num_channels], **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        _check_input(self, input, (2, 3, 4, 5))
        if input.shape[1] != self.num_channels:
            raise RuntimeError("GroupNorm: expected input with %d channels (num_channels) in "
                               "dimension 1, got shape %s" % (self.num_channels, list(input.shape)))
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%d, %d, eps=%s, affine=%s" % (self.num_groups, self.num_channels, self.eps,
                                              self.affine)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return "p=%s, inplace=%s" % (self.p, self.inplace)


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("Embedding: padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported by weft")
        self.max_norm = None
        if _weight is None:
            self.weight = Parameter(_C.empty([num_embeddings, embedding_dim],
                                             **_factory(device, dtype)))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise RuntimeError("Embedding: _weight must have shape [%d, %d], got %s"
                                   % (num_embeddings, embedding_dim, list(_weight.shape)))
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            init.zeros_(self.weight.select(0, self.padding_idx))

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        if embeddings.dim() != 2:
            raise RuntimeError("Embedding.from_pretrained: embeddings must be 2-D")
        m = cls(embeddings.shape[0], embeddings.shape[1], padding_idx=padding_idx,
                _weight=embeddings, **kwargs)
        m.weight.requires_grad_(not freeze)
        return m

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = "%d, %d" % (self.num_embeddings, self.embedding_dim)
        if self.padding_idx is not None:
            s += ", padding_idx=%d" % self.padding_idx
        return s


# ----------------------------------------------------------------- activations
class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError("GELU: approximate must be 'none' or 'tanh', got %r" % (approximate,))
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return "approximate='%s'" % self.approximate


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, self.inplace)


class Sigmoid(Module):
    def forward(self, input):
        return _C.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return _C.tanh(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % (self.dim,)


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % (self.dim,)


# --------------------------------------------------------------------- pooling
class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        _check_input(self, input, (3, 4))
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s" % (
            self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        _check_input(self, input, (3, 4))
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride,
                                                          self.padding)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        _check_input(self, input, (3, 4))
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return "output_size=%s" % (self.output_size,)


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


# ------------------------------------------- more activations (one operator each)
def _activation(name, fn, doc, params=()):
    """A Module class whose forward is fn(input, *hyperparameters)."""
    names = [p for p, _ in params]

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = dict(params)
        if len(args) > len(names):
            raise TypeError("%s takes at most %d arguments" % (name, len(names)))
        values.update(zip(names, args))
        for key in kwargs:
            if key not in values:
                raise TypeError("%s got an unexpected keyword argument '%s'" % (name, key))
        values.update(kwargs)
        for key in names:
            setattr(self, key, values[key])

    def forward(self, input):
        return fn(input, *[getattr(self, key) for key in names])

    def extra_repr(self):
        return ", ".join("%s=%s" % (key, getattr(self, key)) for key in names
                         if key != "inplace" or getattr(self, key))

    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                  "extra_repr": extra_repr, "__doc__": doc})


ELU = _activation("ELU", F.elu, "x if x > 0 else alpha * (exp(x) - 1)",
                  [("alpha", 1.0), ("inplace", False)])
SELU = _activation("SELU", F.selu, "scale * elu(x, alpha) with the self-normalising constants",
                   [("inplace", False)])
Softplus = _activation("Softplus", F.softplus, "log(1 + exp(beta * x)) / beta",
                       [("beta", 1), ("threshold", 20)])
Hardtanh = _activation("Hardtanh", F.hardtanh, "x clamped to [min_val, max_val]",
                       [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)])
ReLU6 = _activation("ReLU6", F.relu6, "min(max(0, x), 6)", [("inplace", False)])
Mish = _activation("Mish", F.mish, "x * tanh(softplus(x))", [("inplace", False)])
Hardswish = _activation("Hardswish", F.hardswish, "x * relu6(x + 3) / 6", [("inplace", False)])
Hardsigmoid = _activation("Hardsigmoid", F.hardsigmoid, "relu6(x + 3) / 6", [("inplace", False)])
LogSigmoid = _activation("LogSigmoid", F.logsigmoid, "log(sigmoid(x))")
Softmin = _activation("Softmin", F.softmin, "softmax(-x, dim)", [("dim", None)])
