"""weft.quantization: post-training quantization's observers, with
torch.ao.quantization.observer's names, arguments and arithmetic (issue 17).

An observer watches the float tensors that flow through it (calling it
returns its input unchanged) and keeps their running minimum and maximum —
over the whole tensor (MinMaxObserver, MovingAverageMinMaxObserver) or per
channel along ``ch_axis`` (PerChannelMinMaxObserver,
MovingAveragePerChannelMinMaxObserver); ``calculate_qparams()`` then gives
the scale and zero point torch gives for the same statistics (the same
float32 arithmetic, round half to even), and ``quantize(x)`` quantizes with
them.  The statistics are weft tensors: float32, as torch keeps them.

prepare(model) puts observers around every nn.Linear and nn.Conv2d;
after calibration, convert(model) puts their int8 form in their place
(quantized input, int8 weight per channel, quantized operator, dequantized
output).  Not here yet: observers in the C nn library and weft-train
--quantize (see docs/design.md).
"""
from . import _C, _tensor

per_tensor_affine = "per_tensor_affine"
per_tensor_symmetric = "per_tensor_symmetric"
per_channel_affine = "per_channel_affine"
per_channel_symmetric = "per_channel_symmetric"

_EPS = 1.1920928955078125e-07  # float32's machine epsilon, torch's default eps


def _qrange(dtype, reduce_range, quant_min, quant_max):
    if quant_min is not None or quant_max is not None:
        if quant_min is None or quant_max is None or not quant_min <= 0 <= quant_max:
            raise ValueError("quant_min and quant_max go together and must include 0")
        return int(quant_min), int(quant_max), True
    if dtype == _C.uint8:
        lo, hi = (0, 127) if reduce_range else (0, 255)
    elif dtype == _C.int8:
        lo, hi = (-64, 63) if reduce_range else (-128, 127)
    elif dtype == _C.int32:
        lo, hi = -(2**31), 2**31 - 1
    else:
        raise ValueError("observer: dtype must be weft.quint8, weft.qint8 or weft.qint32, not %s"
                         % dtype)
    return lo, hi, False


class _ObserverBase:
    def __init__(self, dtype, qscheme, reduce_range, quant_min, quant_max, eps, per_channel):
        symmetric = qscheme in (per_tensor_symmetric, per_channel_symmetric)
        if qscheme not in (per_tensor_affine, per_tensor_symmetric, per_channel_affine,
                           per_channel_symmetric):
            raise ValueError("observer: unknown qscheme %r" % (qscheme,))
        if per_channel != qscheme.startswith("per_channel"):
            raise ValueError("observer: qscheme %s does not fit %s" % (qscheme, type(self).__name__))
        self.dtype, self.qscheme, self.symmetric = dtype, qscheme, symmetric
        self.quant_min, self.quant_max, self._custom = _qrange(dtype, reduce_range, quant_min,
                                                               quant_max)
        self.eps = float(eps)
        self.min_val = self.max_val = None

    def _stats(self, x):
        raise NotImplementedError

    def _merge(self, lo, hi):
        self.min_val = _C.minimum(self.min_val, lo)
        self.max_val = _C.maximum(self.max_val, hi)

    def __call__(self, x):
        """Records x's statistics; returns x."""
        if x.numel() == 0:
            return x
        x = x.detach().to(_C.float32)
        lo, hi = self._stats(x)
        if self.min_val is None:
            self.min_val, self.max_val = lo, hi
        else:
            self._merge(lo, hi)
        return x

    forward = __call__

    def calculate_qparams(self):
        """(scale, zero_point) as float32 and int64 tensors: one entry for
        the per-tensor observers (as torch), one per channel for the others."""
        if self.min_val is None:
            raise RuntimeError("calculate_qparams: the observer has seen no data")
        zero = _tensor.zeros_like(self.min_val)
        min_neg = _C.minimum(self.min_val, zero)
        max_pos = _C.maximum(self.max_val, zero)
        qmin, qmax = self.quant_min, self.quant_max
        if self.symmetric:
            max_pos = _C.maximum(-min_neg, max_pos)
            scale = max_pos / ((qmax - qmin) / 2.0)
            scale = _C.clamp(scale, self.eps)
            if self.dtype == _C.uint8:
                zp = (qmin + qmax) // 2 if self._custom else 128
            else:
                zp = 0
            zero_point = _tensor.full_like(scale, zp).to(_C.int64)
        else:
            scale = (max_pos - min_neg) / float(qmax - qmin)
            scale = _C.clamp(scale, self.eps)
            zero_point = qmin - _C.round(min_neg / scale).to(_C.int64)
            zero_point = _C.clamp(zero_point, qmin, qmax)
        if scale.ndim == 0:  # torch gives one-entry vectors for per-tensor observers
            scale, zero_point = scale.reshape(1), zero_point.reshape(1)
        return scale, zero_point

    def quantize(self, x):
        """x quantized with this observer's parameters."""
        from . import _quantized
        scale, zero_point = self.calculate_qparams()
        if not self.qscheme.startswith("per_channel"):
            return _quantized.quantize_per_tensor(x, scale.item(), int(zero_point.item()),
                                                  self.dtype)
        return _quantized.quantize_per_channel(x, scale.to(_C.float64), zero_point,
                                               self.ch_axis, self.dtype)


class MinMaxObserver(_ObserverBase):
    """The running minimum and maximum over whole tensors."""

    def __init__(self, dtype=_C.uint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=_EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, False)

    def _stats(self, x):
        return _C.amin(x, None, False), _C.amax(x, None, False)


class MovingAverageMinMaxObserver(MinMaxObserver):
    """The minimum and maximum as moving averages: after the first batch,
    min += averaging_constant * (batch min - min), and the same for max."""

    def __init__(self, averaging_constant=0.01, dtype=_C.uint8, qscheme=per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.averaging_constant = float(averaging_constant)

    def _merge(self, lo, hi):
        c = self.averaging_constant
        self.min_val = self.min_val + c * (lo - self.min_val)
        self.max_val = self.max_val + c * (hi - self.max_val)


class PerChannelMinMaxObserver(_ObserverBase):
    """The running minimum and maximum of each channel along ch_axis."""

    def __init__(self, ch_axis=0, dtype=_C.uint8, qscheme=per_channel_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=_EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, True)
        self.ch_axis = int(ch_axis)

    def _stats(self, x):
        axis = self.ch_axis % x.ndim
        dims = [d for d in range(x.ndim) if d != axis]
        if not dims:
            return x.clone(), x.clone()
        return _C.amin(x, dims, False), _C.amax(x, dims, False)


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """PerChannelMinMaxObserver with moving averages, as
    MovingAverageMinMaxObserver."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=_C.uint8,
                 qscheme=per_channel_affine, reduce_range=False, quant_min=None, quant_max=None,
                 eps=_EPS):
        super().__init__(ch_axis, dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.averaging_constant = float(averaging_constant)

    _merge = MovingAverageMinMaxObserver._merge


# ------------------------------------------------ calibrate, then convert

def _nn():
    from . import nn
    return nn


def _observed_class():
    nn = _nn()

    class Observed(nn.Module):
        """A float Linear or Conv2d with observers on its input and output
        (what prepare() puts in its place); runs the float module."""

        def __init__(self, float_module):
            super().__init__()
            self.float_module = float_module
            self.input_observer = MinMaxObserver(dtype=_C.uint8)
            self.output_observer = MinMaxObserver(dtype=_C.uint8)

        def forward(self, x):
            self.input_observer(x)
            y = self.float_module(x)
            self.output_observer(y)
            return y

    return Observed


def _quantized_class():
    nn = _nn()

    class Quantized(nn.Module):
        """The int8 form of an observed Linear or Conv2d: quantizes its float
        input with the calibrated parameters (quint8), runs the quantized
        operator with the weight quantized per output channel (qint8,
        symmetric) and the calibrated output parameters, and returns the
        dequantized result, so float modules (activations, pooling) can
        stay between quantized ones."""

        def __init__(self, observed):
            super().__init__()
            from . import _quantized
            from .nn.quantized import functional as qF
            m = observed.float_module
            self._qF = qF
            self.conv = isinstance(m, nn.Conv2d)
            w = m.weight.detach()
            wobs = PerChannelMinMaxObserver(ch_axis=0, dtype=_C.int8, qscheme=per_channel_symmetric)
            wobs(w)
            self.weight_q = wobs.quantize(w)
            self.bias = None if m.bias is None else m.bias.detach().clone()
            s, z = observed.input_observer.calculate_qparams()
            self.in_scale, self.in_zp = s.item(), int(z.item())
            s, z = observed.output_observer.calculate_qparams()
            self.out_scale, self.out_zp = s.item(), int(z.item())
            if self.conv:
                if m.padding_mode != "zeros" or isinstance(m.padding, str):
                    raise NotImplementedError("convert: Conv2d with padding_mode %r or padding %r"
                                              % (m.padding_mode, m.padding))
                self.args = (list(m.stride), list(m.padding), list(m.dilation), m.groups)
            self._quantize = _quantized.quantize_per_tensor

        def forward(self, x):
            qx = self._quantize(x, self.in_scale, self.in_zp, _C.uint8)
            if self.conv:
                stride, padding, dilation, groups = self.args
                qy = self._qF.conv2d(qx, self.weight_q, self.bias, stride, padding, dilation,
                                     groups, scale=self.out_scale, zero_point=self.out_zp)
            else:
                qy = self._qF.linear(qx, self.weight_q, self.bias, self.out_scale, self.out_zp)
            return qy.dequantize()

    return Quantized


def _swap(module, test, make):
    for name, child in list(module.named_children()):
        if test(child):
            module._modules[name] = make(child)  # in place: Sequential keeps its order
        else:
            _swap(child, test, make)
    return module


def prepare(model):
    """Puts observers around every nn.Linear and nn.Conv2d of model (in
    place; returns model).  Run calibration data through it, then convert."""
    nn = _nn()
    Observed = _observed_class()
    if isinstance(model, (nn.Linear, nn.Conv2d)):
        raise ValueError("prepare: give a model that contains the layers, not a layer")
    prepare.Observed = Observed
    return _swap(model, lambda m: isinstance(m, (nn.Linear, nn.Conv2d)), Observed)


def convert(model):
    """Replaces every observed layer of a prepared, calibrated model by its
    int8 form (in place; returns model)."""
    Quantized = _quantized_class()
    Observed = getattr(prepare, "Observed", None)
    if Observed is None:
        raise RuntimeError("convert: the model was not prepared")
    return _swap(model, lambda m: isinstance(m, Observed), Quantized)
