"""bench/sparse-python.py — the sparse layouts (issue 16), weft against
PyTorch side by side in one run on the same inputs (built once from NumPy
arrays and handed to both): CSR x dense mm on a 10,000 x 10,000 matrix at
0.1% and 1% density times 10,000 x 128 float32, and coalesce of 10M COO
entries of which half repeat a position.  Both run with the same thread
count (torch.set_num_threads, weft.set_num_threads).  The two sides of a
row run interleaved, several rounds, so a busy machine slows both columns
alike; in each round a side runs a block of calls back to back, the first
untimed where the block has more than one: the first call after the other
framework's meets its idle threads still spinning for work (torch's
OpenMP threads spin a while after each parallel region, weft's pool 200
us), which took a core from weft's embedding step on this 2-core machine
(its forward 4.4 ms with torch's threads told to sleep, OMP_WAIT_POLICY=
PASSIVE, 5.9 ms without, torch's step unchanged), an effect of two
frameworks in one process that a training loop, running one framework's
steps back to back, does not have.  Each row prints the best call and the
median of all timed calls per side.  Every row first checks that both
results agree.  Run with the package importable, e.g.
    PYTHONPATH=python/pkg WEFT_PLUGIN_PATH=$PWD/.libs /usr/bin/python3 bench/sparse-python.py
"""
import statistics
import sys
import time

import numpy as np
import torch

import weft

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
THREADS = weft.get_num_threads()
torch.set_num_threads(THREADS)
rng = np.random.default_rng(16)


def w(a):
    return weft.from_dlpack(np.ascontiguousarray(a))


def best(fn, rounds):
    b = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t0)
    return b


def random_csr(n, density):
    nnz = int(n * n * density)
    keys = np.unique(rng.integers(0, n * n, size=nnz, dtype=np.int64))
    rows, cols = keys // n, keys % n
    vals = rng.standard_normal(len(keys)).astype(np.float32)
    crow = np.zeros(n + 1, np.int64)
    np.add.at(crow, rows + 1, 1)
    crow = np.cumsum(crow)
    return crow, cols.copy(), vals


def row(name, wfn, tfn, rounds=ROUNDS, block=1):
    tw, tt = [], []
    for _ in range(rounds):
        for fn, times in ((wfn, tw), (tfn, tt)):
            if block > 1:
                fn()  # meets the other side's spinning threads: untimed
            times.extend(best(fn, 1) for _ in range(block))
    bw, bt = min(tw), min(tt)
    mw, mt = statistics.median(tw), statistics.median(tt)
    print(f"{name:<52} weft {bw * 1e3:9.2f} ms   torch {bt * 1e3:9.2f} ms   "
          f"torch/weft {bt / bw:5.2f}x   medians {mw * 1e3:.2f} / {mt * 1e3:.2f} ms = "
          f"{mt / mw:.2f}x ({len(tw)} calls each)", flush=True)


print(f"# threads: {THREADS}; torch {torch.__version__}; {ROUNDS} interleaved rounds; best and median")

N, K = 10000, 128
for density in (0.001, 0.01):
    crow, col, vals = random_csr(N, density)
    b = rng.standard_normal((N, K)).astype(np.float32)
    tA = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(col),
                                 torch.from_numpy(vals), (N, N))
    tB = torch.from_numpy(b)
    wA = weft.sparse_csr_tensor(w(crow), w(col), w(vals), [N, N])
    wB = w(b)
    ref = torch.sparse.mm(tA, tB)
    got = torch.from_dlpack(weft.mm(wA, wB))
    err = (ref - got).abs().max().item()
    assert err < 1e-3, f"mm results differ by {err}"
    row(f"CSR mm {N}^2 at {density * 100:g}% x {N}x{K} (nnz {len(vals)})",
        lambda: weft.mm(wA, wB), lambda: torch.sparse.mm(tA, tB))

# 10M entries, 5M positions each twice, in random order
M = 10_000_000
shape = (1_000_000, 1000)
keys = np.unique(rng.integers(0, shape[0] * shape[1], size=M // 2 + M // 50, dtype=np.int64))
keys = rng.permutation(keys)[: M // 2]
keys = rng.permutation(np.concatenate([keys, keys]))
idx = np.stack([keys // shape[1], keys % shape[1]])
val = rng.standard_normal(M).astype(np.float32)
tS = torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(val), shape)
wS = weft.sparse_coo_tensor(w(idx), w(val), list(shape))
tc, wc = tS.coalesce(), wS.coalesce()
assert tc._nnz() == wc._nnz() == M // 2
assert torch.equal(tc.indices(), torch.from_dlpack(wc.indices()))
err = (tc.values() - torch.from_dlpack(wc.values())).abs().max().item()
assert err < 1e-5, f"coalesce results differ by {err}"
del tc, wc
row(f"coalesce {M // 1_000_000}M COO entries, 50% duplicates", lambda: wS.coalesce(),
    lambda: tS.coalesce(), rounds=max(2, ROUNDS // 2))

# one training step of a 1,000,000 x 64 embedding with sparse gradients:
# a batch of 4,096 x 20 indices, the sum of the looked-up rows as the loss,
# backward, SGD; zero_grad first, as a training loop does
import ctypes  # noqa: E402


class _Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("version", ctypes.c_uint32)] + [
        (n, ctypes.c_uint64) for n in ("allocated", "peak", "reserved", "alloc_calls",
                                       "free_calls", "cached", "hits", "sys_alloc", "sys_free")]


_lib = ctypes.CDLL("libweft.so.1")  # the library weft._C already loaded


def weft_host_extra_peak(fn):
    """bytes the host allocator held at its peak during fn, above what was
    live before it (weft's own counters: weft_host_reset_peak/_stats)"""
    s = _Stats(struct_size=ctypes.sizeof(_Stats), version=2)
    _lib.weft_host_allocator_stats(ctypes.byref(s))
    before = s.allocated
    _lib.weft_host_reset_peak()
    fn()
    _lib.weft_host_allocator_stats(ctypes.byref(s))
    return s.peak - before


V, D, B, L = 1_000_000, 64, 4096, 20
w0 = rng.standard_normal((V, D)).astype(np.float32)
batch = rng.integers(0, V, (B, L))
we = weft.nn.Embedding(V, D, sparse=True, _weight=w(w0))
wopt = weft.optim.SGD(we.parameters(), lr=0.01)
te = torch.nn.Embedding(V, D, sparse=True, _weight=torch.from_numpy(w0.copy()))
topt = torch.optim.SGD(te.parameters(), lr=0.01)
wb, tb = w(batch), torch.from_numpy(batch)


def weft_step():
    wopt.zero_grad()
    we(wb).sum().backward()
    wopt.step()


def torch_step():
    topt.zero_grad()
    te(tb).sum().backward()
    topt.step()


weft_step()
torch_step()
err = float(np.max(np.abs(np.from_dlpack(we.weight.detach()) - te.weight.detach().numpy())))
assert err < 1e-5, f"embedding steps differ by {err}"
row(f"embedding {V:,} x {D} sparse-grad step (batch {B} x {L}, SGD)", weft_step, torch_step,
    block=5)
# measured from a clean start: no gradient left from the timed steps
we.weight.grad = None
import gc  # noqa: E402
gc.collect()
peak = weft_host_extra_peak(weft_step)
print(f"# weft's host memory peak during one step, above what was live before: "
      f"{peak / 2**20:.1f} MiB (the dense gradient would be {V * D * 4 / 2**20:.0f} MiB)")
