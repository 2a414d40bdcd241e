"""weft: a tensor framework with a C core, plugins and autograd.

The package is a thin Python layer over the extension ``weft._C`` (tensors,
every operator of the table, autograd, DLPack).  Every public name of
``weft._C`` is re-exported here, so ``weft.add``, ``weft.Tensor`` and the
rest are the C functions and types themselves, with no Python call in
between.
"""

from . import _C

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
_OWN = {"load_plugin"}


def load_plugin(path):
    """load_plugin(path): loads one plugin file; its operators become weft
    functions and Tensor methods.  Raises RuntimeError when the file cannot
    be loaded (the message says why)."""
    _C.load_plugin(path)
    _reexport()


_reexport()
