"""nn.Identity and nn.Linear (y = x W^T + b, kaiming-uniform weight as
torch)."""
import math

from .. import _C
from . import functional as F
from . import init
from ._checks import _factory, _positive_int
from .module import Module
from .parameter import Parameter


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
