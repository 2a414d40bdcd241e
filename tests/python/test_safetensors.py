"""weft.save/weft.load against the safetensors package (PyPI) with torch:
files weft writes load in torch, and files torch writes load in weft.  Run
by tests/python.sh in a virtual environment that sees Debian's torch and
has safetensors from PyPI."""
import os
import tempfile

import weft
from taplib import Skip, done, eq, test

try:
    import torch
except ImportError:
    torch = None

tmp = tempfile.mkdtemp()


def path(name):
    return os.path.join(tmp, name)


def needs_torch():
    if torch is None:
        raise Skip("torch is not installed (apt-get install python3-torch)")


@test
def safetensors_against_torch_files():
    """files written by weft load in torch (via safetensors' layout) and the reverse, value for value"""
    needs_torch()
    from safetensors.torch import load_file, save_file
    sd = {"w": weft.randn(3, 5), "i": weft.arange(4), "h": weft.ones(2, dtype=weft.bfloat16),
          "b": weft.tensor([True, False, True])}
    weft.save(sd, path("w2t.safetensors"))
    got = load_file(path("w2t.safetensors"))
    for k, v in sd.items():
        eq(got[k].tolist(), v.tolist(), k)
        eq(str(got[k].dtype), "torch." + v.dtype.name, k)
    ref = {"weight": torch.randn(4, 2), "ids": torch.arange(6, dtype=torch.int32).reshape(2, 3),
           "f64": torch.linspace(0, 1, 5, dtype=torch.float64)}
    save_file(ref, path("t2w.safetensors"))
    back = weft.load(path("t2w.safetensors"))
    for k, v in ref.items():
        eq(back[k].tolist(), v.tolist(), k)
        eq(back[k].dtype.name, str(v.dtype).replace("torch.", ""), k)



@test
def safetensors_metadata_and_numpy():
    """safe_open reads weft's file lazily; safetensors.numpy files (with metadata) load in weft"""
    from safetensors import safe_open
    from safetensors.numpy import save_file
    import numpy as np
    weft.save({"x": weft.ones(2), "y": weft.arange(3)}, path("lazy.safetensors"))
    with safe_open(path("lazy.safetensors"), framework="pt") as f:
        eq(sorted(f.keys()), ["x", "y"])
        eq(f.get_tensor("y").tolist(), [0, 1, 2])
    save_file({"a": np.arange(6, dtype=np.int16).reshape(2, 3), "e": np.zeros((0, 2), np.float32)},
              path("np.safetensors"), metadata={"format": "np"})
    back = weft.load(path("np.safetensors"))
    eq((back["a"].dtype, back["a"].tolist()), (weft.int16, [[0, 1, 2], [3, 4, 5]]))
    eq(back["e"].shape, (0, 2))


done()
