"""weft.nn.quantized.functional: torch.ao.nn.quantized.functional's calls on
weft's quantized tensors (issue 17).  The weight's packed form is cached with
the weight tensor by the plugin, so calling these with the same weight costs
what torch's prepacked call costs."""
from ... import _C


def linear(input, weight, bias=None, scale=None, zero_point=None):
    """linear(input, weight, bias=None, scale=None, zero_point=None): input
    (quint8, per tensor) times weight (qint8, zero points 0, per tensor or per
    output channel) transposed, plus bias (float), quantized to scale and
    zero_point (torch's defaults: the input's)."""
    scale = input.q_scale() if scale is None else scale
    zero_point = input.q_zero_point() if zero_point is None else zero_point
    return _C.quantized_linear(input, weight, bias, float(scale), int(zero_point), False)


def linear_relu(input, weight, bias=None, scale=None, zero_point=None):
    """linear followed by relu, fused (torch.ops.quantized.linear_relu)."""
    scale = input.q_scale() if scale is None else scale
    zero_point = input.q_zero_point() if zero_point is None else zero_point
    return _C.quantized_linear(input, weight, bias, float(scale), int(zero_point), True)
