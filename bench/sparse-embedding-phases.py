"""bench/sparse-embedding-phases.py — where the sparse embedding step's time
goes (issue 16): bench/sparse-python.py's embedding row (a 1,000,000 x 64
table, a batch of 4,096 x 20 indices, embedding(sparse=True), sum,
backward, SGD) timed phase by phase (zero_grad, forward, sum, backward,
step), weft and torch alternating in blocks of steps in one process on the
same inputs, so a busy machine slows both columns alike.  Prints the median of
each phase's wall time and the median of the whole step's wall and process
CPU time (time.process_time, less disturbed by other processes' load).
    PYTHONPATH=python/pkg WEFT_PLUGIN_PATH=$PWD/.libs /usr/bin/python3 \
        bench/sparse-embedding-phases.py [steps]
"""
import os
import statistics
import sys
import time

import numpy as np
import torch

import weft

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
THREADS = weft.get_num_threads()
torch.set_num_threads(THREADS)
rng = np.random.default_rng(16)
V, D, B, L = 1_000_000, 64, 4096, 20
w0 = rng.standard_normal((V, D)).astype(np.float32)
batch = rng.integers(0, V, (B, L))

we = weft.nn.Embedding(V, D, sparse=True, _weight=weft.from_dlpack(w0.copy()))
wopt = weft.optim.SGD(we.parameters(), lr=0.01)
te = torch.nn.Embedding(V, D, sparse=True, _weight=torch.from_numpy(w0.copy()))
topt = torch.optim.SGD(te.parameters(), lr=0.01)
wb, tb = weft.from_dlpack(np.ascontiguousarray(batch)), torch.from_numpy(batch)
PHASES = ("zero_grad", "forward", "sum", "backward", "step")


def timed_step(emb, opt, idx):
    t = [time.perf_counter()]
    c0 = time.process_time()
    opt.zero_grad()
    t.append(time.perf_counter())
    out = emb(idx)
    t.append(time.perf_counter())
    loss = out.sum()
    t.append(time.perf_counter())
    loss.backward()
    t.append(time.perf_counter())
    opt.step()
    t.append(time.perf_counter())
    cpu = time.process_time() - c0
    return [b - a for a, b in zip(t, t[1:])] + [t[-1] - t[0], cpu]


timed_step(we, wopt, wb)
timed_step(te, topt, tb)
err = float(np.max(np.abs(np.from_dlpack(we.weight.detach()) - te.weight.detach().numpy())))
assert err < 1e-5, f"embedding steps differ by {err}"
rows = {"weft": [], "torch": []}
# blocks of BLOCK steps per side, the first untimed: right after the other
# framework's step its idle threads still spin for work (torch's OpenMP
# threads, weft's pool for 200 us) and take a core from this one
# (bench/sparse-python.py says more)
BLOCK = 5
for _ in range(max(1, STEPS // BLOCK)):
    for name, args in (("weft", (we, wopt, wb)), ("torch", (te, topt, tb))):
        timed_step(*args)
        rows[name].extend(timed_step(*args) for _ in range(BLOCK))
STEPS = len(rows["weft"])
print(f"# {STEPS} steps each, in alternating blocks of {BLOCK}, {THREADS} threads, load average "
      f"{os.getloadavg()[0]:.2f}; ms, median (best)")
print("| phase | weft | torch 1.13 | weft / torch |")
print("|---|---:|---:|---:|")
for i, name in enumerate(PHASES + ("total (wall)", "total (CPU time)")):
    wm, tm = (statistics.median(r[i] for r in rows[s]) * 1e3 for s in ("weft", "torch"))
    wb, tb = (min(r[i] for r in rows[s]) * 1e3 for s in ("weft", "torch"))
    print(f"| {name} | {wm:.2f} ({wb:.2f}) | {tm:.2f} ({tb:.2f}) | {wm / tm:.2f}x ({wb / tb:.2f}x) |")
