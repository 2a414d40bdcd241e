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


def _pair(v):
    return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]


def _conv2d(input, weight, bias, stride, padding, dilation, groups, padding_mode, scale,
            zero_point, dtype, relu):
    if padding_mode != "zeros":
        raise NotImplementedError("conv2d: only padding_mode='zeros' is supported")
    if dtype is not None and dtype != _C.uint8:
        raise RuntimeError("conv2d: the output is quint8 (weft.quint8)")
    return _C.quantized_conv2d(input, weight, bias, _pair(stride), _pair(padding),
                               _pair(dilation), int(groups), float(scale), int(zero_point), relu)


def conv2d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros",
           scale=1.0, zero_point=0, dtype=None):
    """conv2d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1,
    padding_mode='zeros', scale=1.0, zero_point=0, dtype=quint8), as
    torch.ao.nn.quantized.functional.conv2d: input quint8 (N, C, H, W) per
    tensor, weight qint8 (OC, C / groups, KH, KW) with zero points 0, per
    tensor or per output channel; the output quint8 with scale, zero_point."""
    return _conv2d(input, weight, bias, stride, padding, dilation, groups, padding_mode, scale,
                   zero_point, dtype, False)


def conv2d_relu(input, weight, bias, stride=1, padding=0, dilation=1, groups=1,
                padding_mode="zeros", scale=1.0, zero_point=0, dtype=None):
    """conv2d followed by relu, fused (torch.ops.quantized.conv2d_relu)."""
    return _conv2d(input, weight, bias, stride, padding, dilation, groups, padding_mode, scale,
                   zero_point, dtype, True)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """max_pool2d on a quantized tensor (its quantizer kept), as torch.ao's."""
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices is not supported on quantized tensors")
    stride = kernel_size if stride is None or stride == [] else stride
    return _C.max_pool2d(input, _pair(kernel_size), _pair(stride), _pair(padding),
                         _pair(dilation), bool(ceil_mode))


def adaptive_avg_pool2d(input, output_size):
    """adaptive_avg_pool2d on a quantized tensor (its quantizer kept)."""
    return _C.adaptive_avg_pool2d(input, _pair(output_size))
