"""Gradient clipping: one norm (or clamp) per parameter's gradient, one
multiply per gradient; Python loops over parameters only."""
import math

from ... import _C
from ...grad_mode import no_grad


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their joint norm (of norm_type, inf for
    the largest magnitude) is at most max_norm; returns the norm before
    clipping, a 0-d tensor."""
    grads = _grads(parameters)
    norm_type = float(norm_type)
    if not grads:
        return _C.tensor(0.0)
    with no_grad():
        # norm() of each gradient, inf included (the largest magnitude):
        # a sparse gradient's norm is its layout's, over its entries
        norms = [_C.norm(g, norm_type, None, False) for g in grads]
        total = norms[0] if len(norms) == 1 else _C.norm(_C.stack(norms), norm_type, None, False)
        value = total.item()
        if error_if_nonfinite and not math.isfinite(value):
            raise RuntimeError("The total norm of order %s for gradients from `parameters` is "
                               "non-finite, so it cannot be clipped. To disable this error and "
                               "scale the gradients by the non-finite norm anyway, set "
                               "`error_if_nonfinite=False`" % norm_type)
        coef = min(float(max_norm) / (value + 1e-6), 1.0)
        for g in grads:
            g.mul_(coef)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    """The parameters flattened and joined into one vector."""
    return _C.cat([p.reshape(-1) for p in parameters])
