"""Shared by the nn, optim and data tests: PyTorch 1.13 as the reference,
when it is installed (tests that need it raise Skip saying it is not), and
conversions between weft and torch tensors through DLPack (copies, so
neither side's later writes reach the other)."""
import weft
from taplib import Skip

try:
    import torch
except ImportError:  # the comparisons SKIP; the rest of each file still runs
    torch = None


def need_torch():
    if torch is None:
        raise Skip("torch is not installed for this Python (apt-get install python3-torch)")


def to_torch(w):
    return torch.from_dlpack(w.detach().contiguous()).clone()


def to_weft(t):
    if t.dtype == torch.bool:  # torch 1.13 exports no bool over DLPack
        return weft.from_dlpack(t.detach().to(torch.uint8).contiguous()) != 0
    return weft.from_dlpack(t.detach().contiguous()).clone()


def close(w, t, what, rtol=1e-5, atol=1e-5):
    """Asserts a weft tensor equals a torch tensor to float tolerance."""
    if w is None or t is None:
        if w is not None or t is not None:
            raise AssertionError("%s: weft %s, torch %s" % (what, w, t))
        return
    a = to_torch(w)
    if tuple(a.shape) != tuple(t.shape):
        raise AssertionError("%s: shape %s, torch %s" % (what, tuple(a.shape), tuple(t.shape)))
    b = t.detach().to(a.dtype)
    if not torch.allclose(a, b, rtol=rtol, atol=atol):
        diff = (a.double() - b.double()).abs().max().item()
        raise AssertionError("%s: differs from torch by up to %g" % (what, diff))


def copy_state(weft_module, torch_module):
    """Loads torch_module's state dict into weft_module (strict: the key sets
    must agree, which also checks weft's parameter and buffer names)."""
    weft_module.load_state_dict({k: to_weft(v) for k, v in torch_module.state_dict().items()})
