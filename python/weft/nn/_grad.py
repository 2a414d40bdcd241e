"""A private no-grad context for nn, init and optim (in-place updates of
leaf tensors must not be recorded by autograd)."""
import contextlib

from .. import _C


@contextlib.contextmanager
def no_grad():
    prev = _C.is_grad_enabled()
    _C.set_grad_enabled(False)
    try:
        yield
    finally:
        _C.set_grad_enabled(prev)


@contextlib.contextmanager
def enable_grad():
    prev = _C.is_grad_enabled()
    _C.set_grad_enabled(True)
    try:
        yield
    finally:
        _C.set_grad_enabled(prev)
