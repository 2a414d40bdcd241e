"""bench/dlpack-python.py — DLPack imports from Python, per call, weft
against PyTorch (and NumPy) side by side in one run: 1,000 float32
elements, each import and the release of its result.  The pairs run
interleaved, many rounds, and each row keeps its best round, so a busy
machine slows both columns alike.  Needs numpy and torch (Debian's
python3-numpy, python3-torch); run with the package importable, e.g.
    PYTHONPATH=python/pkg WEFT_PLUGIN_PATH=$PWD/.libs /usr/bin/python3 bench/dlpack-python.py
"""
import sys
import timeit

import numpy as np
import torch

import weft

N = 1000
CALLS = 2000
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 40

a = np.ones(N, np.float32)
t = torch.ones(N)
w = weft.ones(N)

rows = [
    ("import of a NumPy array", "weft.from_dlpack(np_array)", lambda: weft.from_dlpack(a),
     "torch.from_dlpack(np_array)", lambda: torch.from_dlpack(a)),
    ("import from the other framework", "weft.from_dlpack(torch_tensor)", lambda: weft.from_dlpack(t),
     "torch.from_dlpack(weft_tensor)", lambda: torch.from_dlpack(w)),
    # the same producer for both importers: what each consumer adds to a
    # torch tensor's own (slow, Python-level) __dlpack__
    ("import of a torch tensor", "weft.from_dlpack(torch_tensor)", lambda: weft.from_dlpack(t),
     "torch.from_dlpack(torch_tensor)", lambda: torch.from_dlpack(t)),
    ("NumPy importing", "np.from_dlpack(weft_tensor)", lambda: np.from_dlpack(w),
     "np.from_dlpack(torch_tensor)", lambda: np.from_dlpack(t)),
    ("the producer's share", "weft_tensor.__dlpack__()", lambda: w.__dlpack__(),
     "torch_tensor.__dlpack__()", lambda: t.__dlpack__()),
]

best = {}
for _ in range(ROUNDS):
    for _, wn, wf, tn, tf in rows:
        for name, fn in ((wn, wf), (tn, tf)):
            ns = timeit.timeit(fn, number=CALLS) / CALLS * 1e9
            best[name] = min(best.get(name, ns), ns)

print("DLPack from Python, %d float32 elements, ns per call (best of %d rounds of %d calls)"
      % (N, ROUNDS, CALLS))
print("weft %s, numpy %s, torch %s, Python %s" % (weft.__version__, np.__version__, torch.__version__,
                                                 sys.version.split()[0]))
for what, wn, _, tn, _ in rows:
    print("  %-32s %-32s %7.0f   %-32s %7.0f   %.2fx" % (what, wn, best[wn], tn, best[tn],
                                                       best[wn] / best[tn]))
