"""The activation modules, each forward one C operator through
weft.nn.functional."""
from .. import _C
from . import functional as F
from .module import Module


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
