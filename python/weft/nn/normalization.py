"""nn.BatchNorm1d/2d (running statistics as buffers, momentum=None for a
cumulative average), nn.LayerNorm and nn.GroupNorm, each forward one C
operator."""
import numbers

from .. import _C
from . import functional as F
from . import init
from ._checks import _check_input, _factory, _positive_int
from .module import Module
from .parameter import Parameter


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
