"""Quantized tensors from Python, with torch's names (issue 17).

The operators come from the quantized layout plugin (libweft-quantized.so),
bound into weft._C from their schemas like every operator; this module
gives them torch's spelling and return types.  A quantized tensor has the
layout ``quantized`` and the dtype of its integers, so ``weft.qint8`` *is*
``weft.int8`` (``weft.quint8`` uint8, ``weft.qint32`` int32): the pair
(layout, dtype) is torch's quantized dtype, and ``Tensor.is_quantized``
tells the layout (see docs/design.md, "Quantized layouts").
"""
from . import _C

qint8 = _C.int8
quint8 = _C.uint8
qint32 = _C.int32


def _op(name):
    # The binding strips torch-style overload suffixes ("_tensor") from the
    # Python names; look the operator up under either spelling.
    fn = getattr(_C, name, None) or getattr(_C, name[: -len("_tensor")], None)
    if fn is None:
        raise RuntimeError("%s: the quantized plugin (libweft-quantized.so) is not loaded" % name)
    return fn


def quantize_per_tensor(input, scale, zero_point, dtype):
    """weft.quantize_per_tensor(input, scale, zero_point, dtype): input
    (floating) quantized with round(input / scale) + zero_point, rounded half
    to even and clamped to dtype (weft.qint8, weft.quint8, weft.qint32),
    bit for bit as torch."""
    return _op("quantize_per_tensor")(input, float(scale), int(zero_point), dtype)


def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """weft.quantize_per_channel(input, scales, zero_points, axis, dtype):
    one scale and zero point per entry of dimension axis."""
    return _C.quantize_per_channel(input, scales, zero_points, int(axis), dtype)


def _make_per_tensor_quantized_tensor(input, scale, zero_point):
    """weft._make_per_tensor_quantized_tensor(int_tensor, scale, zero_point):
    a quantized tensor holding a copy of the integers (torch's name)."""
    return _op("make_per_tensor_quantized_tensor")(input, float(scale), int(zero_point))


def _make_per_channel_quantized_tensor(input, scales, zero_points, axis):
    """weft._make_per_channel_quantized_tensor(int_tensor, scales, zero_points, axis)"""
    return _op("make_per_channel_quantized_tensor")(input, scales, zero_points, int(axis))


# Tensor.is_quantized is a C getter (python/tensor.c)
# torch returns Python numbers for these three
_C.Tensor.q_scale = lambda self: _C.q_scale(self).item()
_C.Tensor.q_zero_point = lambda self: int(_C.q_zero_point(self).item())
_C.Tensor.q_per_channel_axis = lambda self: int(_C.q_per_channel_axis(self).item())
