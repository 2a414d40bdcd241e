"""bench/tensor-methods-python.py — the Tensor members that training and
inference code calls on every step or every parameter (to() that changes
nothing, to(dtype), to(device, non_blocking=True), float(), clone(),
.device, .is_cuda, .layout, .is_sparse), per call, weft against PyTorch side by side in one
run, on the same 4-element float32 CPU tensor, so that the call's own cost
is what is timed.  The pairs run interleaved, many rounds, and each row
keeps its best round.  Needs torch (Debian's python3-torch); run with the
package importable, e.g.
    PYTHONPATH=python/pkg WEFT_PLUGIN_PATH=$PWD/.libs /usr/bin/python3 bench/tensor-methods-python.py
"""
import sys
import timeit

import torch

import weft

CALLS = 20000
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20

w, t = weft.ones(4), torch.ones(4)
rows = [
    ("x.to(float32), already float32", lambda: w.to(weft.float32), lambda: t.to(torch.float32)),
    ("x.to('cpu', non_blocking=True)", lambda: w.to("cpu", non_blocking=True),
     lambda: t.to("cpu", non_blocking=True)),
    ("x.to(float64)", lambda: w.to(weft.float64), lambda: t.to(torch.float64)),
    ("x.float(), already float32", lambda: w.float(), lambda: t.float()),
    ("x.clone()", lambda: w.clone(), lambda: t.clone()),
    ("x.device", lambda: w.device, lambda: t.device),
    ("x.is_cuda", lambda: w.is_cuda, lambda: t.is_cuda),
    ("x.layout", lambda: w.layout, lambda: t.layout),
    ("x.is_sparse", lambda: w.is_sparse, lambda: t.is_sparse),
]
best = {}
for _ in range(ROUNDS):
    for name, fw, ft in rows:
        for lib, f in (("weft", fw), ("torch", ft)):
            s = timeit.timeit(f, number=CALLS) / CALLS
            best[name, lib] = min(best.get((name, lib), s), s)
print("| call | weft | torch | torch / weft |")
print("|---|---:|---:|---:|")
for name, _, _ in rows:
    a, b = best[name, "weft"], best[name, "torch"]
    print("| %s | %.0f ns | %.0f ns | %.2fx |" % (name, a * 1e9, b * 1e9, b / a))
