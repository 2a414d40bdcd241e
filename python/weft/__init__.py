"""weft: a tensor framework with a C core, plugins and autograd.

The package is a thin Python layer over the extension ``weft._C`` (tensors,
every operator of the table, autograd, DLPack).  Every public name of
``weft._C`` is re-exported here, so ``weft.add``, ``weft.Tensor`` and the
rest are the C functions and types themselves, with no Python call in
between.  The Python modules add what is simplest in Python: grad-mode
context managers, weft.autograd, weft.save/load, weft.device, weft.cuda,
and the PyTorch habits that compose operators (``_tensor.py``).
"""

from . import _C
from ._C import *  # noqa: F401,F403 -- what type checkers see (weft/_C.pyi); _reexport does the rest

__version__ = _C.__version__

# torch's habit: `import weft`, then weft.nn.Linear (they need only _C)
from . import nn, optim, utils  # noqa: E402


def _reexport():
    # Copies the extension's names into the package.  Run again after
    # load_plugin, because a plugin's operators are bound into weft._C.
    g = globals()
    for name, value in vars(_C).items():
        if name.startswith("__") or name in _OWN:
            continue
        g[name] = value


# names this package defines itself, which the extension must not replace
_OWN = {"load_plugin", "einsum", "set_grad_enabled", "device"}


def load_plugin(path):
    """load_plugin(path): loads one plugin file; its operators become weft
    functions and Tensor methods.  Raises RuntimeError when the file cannot
    be loaded (the message says why)."""
    _C.load_plugin(path)
    _reexport()


_reexport()

from ._device import device  # noqa: E402
from ._layout import layout, layouts, strided, to_layout  # noqa: E402
from ._tensor import (as_tensor, einsum, empty_like, from_numpy, full_like, is_tensor,  # noqa: E402
                      ones_like, rand_like, randint_like, randn_like, zeros_like)
# torch's functions that are compositions of weft's operators and views
from . import _compose  # noqa: E402
for _name in _compose._MODULE:
    globals()[_name] = getattr(_compose, _name)
del _name
from .grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: E402
from .serialization import load, save  # noqa: E402
from . import autograd, cuda  # noqa: E402
# the profiler (issue 19)
from . import profiler  # noqa: E402
# quantized tensors with torch's names (issue 17; the operators are the
# quantized layout plugin's)
from ._quantized import (_make_per_channel_quantized_tensor,  # noqa: E402,F401
                         _make_per_tensor_quantized_tensor, qint8, qint32, quantize_per_channel,
                         quantize_per_tensor, quint8)
from . import quantization  # noqa: E402,F401
# the sparse layouts' torch-style functions and Tensor members (issue 16)
from . import sparse  # noqa: E402

