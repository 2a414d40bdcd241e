"""weft.nn.functional: torch.nn.functional's names, arguments and defaults,
each a call of one C operator of weft's table (autograd included).  This
file only translates arguments (pairs, None, reductions); it computes
nothing itself.
"""
import numbers

from .. import _C

_REDUCTIONS = ("none", "mean", "sum")


def _ntuple(v, n, name, fn):
    """v as a list of n ints (an int is repeated; a 1-sequence too)."""
    if isinstance(v, numbers.Integral):
        return [int(v)] * n
    try:
        items = [int(x) for x in v]
    except TypeError:
        raise TypeError("%s: %s must be an int or a tuple of %d ints, got %s"
                        % (fn, name, n, type(v).__name__)) from None
    if len(items) == 1:
        return items * n
    if len(items) != n:
        raise ValueError("%s: %s must be an int or a tuple of %d ints, got %r" % (fn, name, n, v))
    return items


def _pair(v, name, fn):
    return _ntuple(v, 2, name, fn)


def _check_tensor(x, name, fn):
    if not isinstance(x, _C.Tensor):
        raise TypeError("%s: argument '%s' must be a weft.Tensor, not %s"
                        % (fn, name, type(x).__name__))


def _reduction(size_average, reduce, reduction, fn):
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in _REDUCTIONS:
        raise ValueError("%s: %r is not a valid value for reduction (one of 'none', 'mean', "
                         "'sum')" % (fn, reduction))
    return reduction


# ----------------------------------------------------------------- activations
def relu(input, inplace=False):
    if inplace:
        input.relu_()
        return input
    return _C.relu(input)


def relu6(input, inplace=False):
    if inplace:
        input.relu6_()
        return input
    return _C.relu6(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    if inplace:
        input.leaky_relu_(negative_slope)
        return input
    return _C.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    if inplace:
        input.elu_(alpha)
        return input
    return _C.elu(input, alpha)


def selu(input, inplace=False):
    if inplace:
        input.selu_()
        return input
    return _C.selu(input)


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))
    return _C.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    if inplace:
        input.silu_()
        return input
    return _C.silu(input)


def mish(input, inplace=False):
    if inplace:
        input.mish_()
        return input
    return _C.mish(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if inplace:
        input.hardtanh_(min_val, max_val)
        return input
    return _C.hardtanh(input, min_val, max_val)


def hardsigmoid(input, inplace=False):
    if inplace:
        input.hardsigmoid_()
        return input
    return _C.hardsigmoid(input)


def hardswish(input, inplace=False):
    if inplace:
        input.hardswish_()
        return input
    return _C.hardswish(input)


def softplus(input, beta=1, threshold=20):
    return _C.softplus(input, beta, threshold)


def logsigmoid(input):
    return _C.logsigmoid(input)


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


def _softmax_dim(input, dim, fn):
    if dim is None:
        # torch's legacy rule for a missing dim
        dim = 0 if input.dim() in (0, 1, 3) else 1
    return dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    dim = _softmax_dim(input, dim, "softmax")
    if dtype is not None:
        input = input.to(dtype)
    return _C.softmax(input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    dim = _softmax_dim(input, dim, "log_softmax")
    if dtype is not None:
        input = input.to(dtype)
    return _C.log_softmax(input, dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return softmax(-input, dim, dtype=dtype)


# --------------------------------------------------------------------- layers
def linear(input, weight, bias=None):
    return _C.linear(input, weight, bias)


def _conv_padding(padding, weight, dilation, stride, fn):
    """(padding per spatial dimension, extra end padding for F.pad or None);
    'same' with an odd total puts the extra row or column at the end, as
    torch."""
    n = weight.dim() - 2
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * n, None
        if padding != "same":
            raise ValueError("%s: invalid padding string %r, should be one of {'valid', 'same'}"
                             % (fn, padding))
        if any(s != 1 for s in stride):
            raise ValueError("%s: padding='same' is not supported for strided convolutions" % fn)
        total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
        left = [t // 2 for t in total]
        if all(t % 2 == 0 for t in total):
            return left, None
        extra = []
        for t, lo in reversed(list(zip(total, left))):  # F.pad lists the last dimension first
            extra += [0, t - 2 * lo]
        return left, extra
    return _ntuple(padding, n, "padding", fn), None


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    stride = _pair(stride, "stride", "conv2d")
    dilation = _pair(dilation, "dilation", "conv2d")
    padding, extra = _conv_padding(padding, weight, dilation, stride, "conv2d")
    if extra is not None:
        input = _C.pad(input, extra)
    return _C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    stride = _ntuple(stride, 1, "stride", "conv1d")
    dilation = _ntuple(dilation, 1, "dilation", "conv1d")
    padding, extra = _conv_padding(padding, weight, dilation, stride, "conv1d")
    if extra is not None:
        input = _C.pad(input, extra)
    return _C.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    fn = "conv_transpose2d"
    return _C.conv_transpose2d(input, weight, bias, _pair(stride, "stride", fn),
                               _pair(padding, "padding", fn),
                               _pair(output_padding, "output_padding", fn), groups,
                               _pair(dilation, "dilation", fn))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    fn = "max_pool2d"
    kernel_size = _pair(kernel_size, "kernel_size", fn)
    stride = kernel_size if stride is None or stride == [] else _pair(stride, "stride", fn)
    args = (input, kernel_size, stride, _pair(padding, "padding", fn),
            _pair(dilation, "dilation", fn), ceil_mode)
    if return_indices:
        return _C.max_pool2d_with_indices(*args)
    return _C.max_pool2d(*args)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    fn = "avg_pool2d"
    kernel_size = _pair(kernel_size, "kernel_size", fn)
    stride = kernel_size if stride is None or stride == [] else _pair(stride, "stride", fn)
    return _C.avg_pool2d(input, kernel_size, stride, _pair(padding, "padding", fn), ceil_mode,
                         count_include_pad, divisor_override)


def adaptive_avg_pool2d(input, output_size):
    if isinstance(output_size, numbers.Integral):
        size = [int(output_size)] * 2
    else:
        size = list(output_size)
        if len(size) != 2:
            raise ValueError("adaptive_avg_pool2d: output_size must be an int or a pair, got %r"
                             % (output_size,))
        # None keeps the input's size in that dimension
        size = [input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(size)]
    return _C.adaptive_avg_pool2d(input, size)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    if training:
        size = input.shape
        count = size[0]
        for s in size[2:]:
            count *= s
        if count == 1:
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             "size %s" % (list(size),))
    return _C.batch_norm(input, weight, bias, running_mean, running_var, training,
                         0.0 if momentum is None else momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = [int(normalized_shape)]
    return _C.layer_norm(input, list(normalized_shape), weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return _C.group_norm(input, num_groups, weight, bias, eps)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
    if inplace:
        input.dropout_(p, training)
        return input
    return _C.dropout(input, p, training)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding: max_norm and scale_grad_by_freq are not "
                                  "supported by weft")
    if padding_idx is None:
        padding_idx = -1
    else:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError("embedding: padding_idx must be within the %d embeddings, got %d"
                             % (n, padding_idx))
        padding_idx %= n
    if sparse:  # a sparse COO gradient (weft.sparse, issue 16)
        from ..sparse import embedding_sparse
        return embedding_sparse(input, weight, padding_idx)
    return _C.embedding(weight, input, padding_idx)


def one_hot(tensor, num_classes=-1):
    return _C.one_hot(tensor, num_classes)


def pad(input, pad, mode="constant", value=None):
    return _C.pad(input, list(pad), mode, value)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    if isinstance(size, numbers.Integral):
        size = [int(size)] * (input.dim() - 2)
    if isinstance(scale_factor, numbers.Real):
        scale_factor = [float(scale_factor)] * (input.dim() - 2)
    return _C.interpolate(input, size, scale_factor, mode, bool(align_corners))


def flatten(input, start_dim=0, end_dim=-1):
    return input.flatten(start_dim, end_dim)


# --------------------------------------------------------------------- losses
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    _check_tensor(input, "input", "cross_entropy")
    _check_tensor(target, "target", "cross_entropy")
    reduction = _reduction(size_average, reduce, reduction, "cross_entropy")
    return _C.cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    _check_tensor(input, "input", "nll_loss")
    _check_tensor(target, "target", "nll_loss")
    reduction = _reduction(size_average, reduce, reduction, "nll_loss")
    return _C.nll_loss(input, target, weight, reduction, ignore_index)


def _same_shape(input, target, fn):
    _check_tensor(input, "input", fn)
    _check_tensor(target, "target", fn)
    if tuple(input.shape) != tuple(target.shape):
        raise RuntimeError("%s: target size %s must be the same as input size %s"
                           % (fn, list(target.shape), list(input.shape)))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _same_shape(input, target, "mse_loss")
    return _C.mse_loss(input, target, _reduction(size_average, reduce, reduction, "mse_loss"))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _same_shape(input, target, "l1_loss")
    return _C.l1_loss(input, target, _reduction(size_average, reduce, reduction, "l1_loss"))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _same_shape(input, target, "smooth_l1_loss")
    if beta < 0:
        raise ValueError("smooth_l1_loss: beta must be non-negative, got %s" % beta)
    return _C.smooth_l1_loss(input, target,
                             _reduction(size_average, reduce, reduction, "smooth_l1_loss"), beta)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """Huber loss: delta times smooth_l1_loss with beta=delta."""
    _same_shape(input, target, "huber_loss")
    if delta <= 0:
        raise ValueError("huber_loss: delta must be positive, got %s" % delta)
    loss = _C.smooth_l1_loss(input, target, _reduction(None, None, reduction, "huber_loss"),
                             float(delta))
    return loss * float(delta) if delta != 1.0 else loss


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    _same_shape(input, target, "binary_cross_entropy")
    return _C.binary_cross_entropy(
        input, target, weight, _reduction(size_average, reduce, reduction, "binary_cross_entropy"))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
    return _C.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


__all__ = [n for n in dir() if not n.startswith("_") and n != "numbers"]
