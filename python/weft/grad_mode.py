"""Grad mode as torch spells it: no_grad, enable_grad, inference_mode and
set_grad_enabled, each a context manager and a decorator.  The mode is the
calling thread's (weft_set_grad_enabled), so threads do not see each
other's."""

import functools

from . import _C

__all__ = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled"]

is_grad_enabled = _C.is_grad_enabled


class _GradMode:
    """A context manager that sets grad mode to self._mode on entry and
    restores the previous mode on exit; applied to a function (as
    @no_grad() or @no_grad) it runs each call in that mode."""

    def __new__(cls, *args, **kwargs):
        # @weft.no_grad without parentheses: the class receives the function
        if len(args) == 1 and callable(args[0]) and not kwargs and cls is not set_grad_enabled:
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self):
        self._prev = _C.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._prev)
        return False

    def clone(self):
        return self.__class__()

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError("%s() decorates a function, not %s" % (type(self).__name__, type(fn).__name__))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Turns gradient recording off in this thread (torch.no_grad)."""

    _mode = False


class enable_grad(_GradMode):
    """Turns gradient recording on in this thread (torch.enable_grad)."""

    _mode = True


class inference_mode(_GradMode):
    """inference_mode(mode=True): torch.inference_mode.  weft has no separate
    inference tensors: with mode True this is no_grad (nothing is recorded,
    which is where the speed comes from), with mode False it changes
    nothing."""

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError("inference_mode(mode) takes a bool, not %s" % type(mode).__name__)
        self._inference = mode
        self._mode = False if mode else None

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        if self._mode is not None:
            _C.set_grad_enabled(self._mode)
        return self

    def clone(self):
        return inference_mode(self._inference)


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): sets grad mode at once (a function call), and
    restores the previous mode when used as a context manager and left."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError("set_grad_enabled(mode) takes a bool, not %s" % type(mode).__name__)
        self._mode = mode
        self._prev = _C.set_grad_enabled(mode)

    def __enter__(self):
        return self

    def clone(self):
        return set_grad_enabled(self._mode)
