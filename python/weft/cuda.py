"""weft.cuda: whether the CUDA backend is there and how many devices it
sees (torch.cuda's names).  Nothing here starts CUDA: the answers come
from the plugin load report."""

from . import _C

__all__ = ["is_available", "device_count", "current_device", "manual_seed", "manual_seed_all"]


def device_count():
    """How many CUDA devices the loaded CUDA plugin sees (0 without one)."""
    return sum(1 for d in _C.devices() if d.startswith("cuda:"))


def is_available():
    """True when a CUDA plugin is loaded and sees at least one device."""
    return device_count() > 0


def current_device():
    """0: weft addresses CUDA devices by index in each call."""
    if not is_available():
        raise RuntimeError("no CUDA device: the CUDA plugin is not loaded or sees no GPU")
    return 0


def manual_seed(seed):
    """Seeds weft's generator, which every device draws from (as
    weft.manual_seed)."""
    _C.manual_seed(seed)


manual_seed_all = manual_seed
