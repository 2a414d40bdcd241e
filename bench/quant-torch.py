#!/usr/bin/env python3
"""bench/quant-torch.py — issue 17's int8 rows: weft's quantized functional
calls against torch 1.13's quantized engine (onednn) with prepacked weights
(torch.ops.quantized.linear / conv2d), the same inputs, the same thread
count, in one process, alternating rounds.  Run through bench/quant-run-py
(uninstalled build, Debian's python3 with python3-torch).  Prints one row
per shape: microseconds per call, median of 15 rounds, and weft's
throughput as a ratio of torch's (goal >= 1.0)."""
import sys
import time

import torch
import weft
import weft.nn.quantized.functional as wF

torch.backends.quantized.engine = "onednn"
threads = weft.get_num_threads()
torch.set_num_threads(threads)


def w(t):
    return weft.from_dlpack(t.contiguous())


def per_call_us(fn, rounds):
    fn()
    calls = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if time.perf_counter() - t0 > 0.05:
            break
        calls *= 2
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return out


def compare(name, weft_fn, torch_fn, check):
    check()
    tw, tt = [], []
    for _ in range(15):  # alternate, so both see the same machine load
        tw += per_call_us(weft_fn, 1)
        tt += per_call_us(torch_fn, 1)
    mw, mt = sorted(tw)[7], sorted(tt)[7]
    print("%-46s %10.1f %10.1f %7.2fx" % (name, mw, mt, mt / mw))
    return name, mw, mt


def linear_row(m, k, n):
    torch.manual_seed(0)
    x, wt, b = torch.randn(m, k), torch.randn(n, k) * 0.05, torch.randn(n)
    qx = torch.quantize_per_tensor(x, 0.05, 128, torch.quint8)
    s = (wt.abs().amax(1) / 127).double()
    z = torch.zeros(n, dtype=torch.long)
    qw = torch.quantize_per_channel(wt, s, z, 0, torch.qint8)
    packed = torch.ops.quantized.linear_prepack(qw, b)
    wqx = weft.quantize_per_tensor(w(x), 0.05, 128, weft.quint8)
    wqw = weft.quantize_per_channel(w(wt), w(s), w(z), 0, weft.qint8)
    wb = w(b)

    def check():
        a = torch.from_dlpack(wF.linear(wqx, wqw, wb, 0.2, 64).int_repr().contiguous())
        t = torch.ops.quantized.linear(qx, packed, 0.2, 64).int_repr()
        if (a.int() - t.int()).abs().max().item() > 1:
            sys.exit("quant-torch: linear %dx%d->%d differs from torch" % (m, k, n))

    return compare("quantized linear %d x %d -> %d (per channel)" % (m, k, n),
                   lambda: wF.linear(wqx, wqw, wb, 0.2, 64),
                   lambda: torch.ops.quantized.linear(qx, packed, 0.2, 64), check)


def conv_row(n, c, hw, oc):
    torch.manual_seed(0)
    x, wt, b = torch.randn(n, c, hw, hw), torch.randn(oc, c, 3, 3) * 0.05, torch.randn(oc)
    qx = torch.quantize_per_tensor(x, 0.05, 128, torch.quint8)
    s = (wt.abs().amax((1, 2, 3)) / 127).double()
    z = torch.zeros(oc, dtype=torch.long)
    qw = torch.quantize_per_channel(wt, s, z, 0, torch.qint8)
    packed = torch.ops.quantized.conv2d_prepack(qw, b, [1, 1], [1, 1], [1, 1], 1)
    wqx = weft.quantize_per_tensor(w(x), 0.05, 128, weft.quint8)
    wqw = weft.quantize_per_channel(w(wt), w(s), w(z), 0, weft.qint8)
    wb = w(b)

    def run_weft():
        return wF.conv2d(wqx, wqw, wb, 1, 1, 1, 1, scale=0.2, zero_point=64)

    def check():
        a = torch.from_dlpack(run_weft().int_repr().contiguous())
        t = torch.ops.quantized.conv2d(qx, packed, 0.2, 64).int_repr()
        if (a.int() - t.int()).abs().max().item() > 1:
            sys.exit("quant-torch: conv2d differs from torch")

    return compare("quantized conv2d %dx%dx%dx%d, %d 3x3 filters, pad 1" % (n, c, hw, hw, oc),
                   run_weft, lambda: torch.ops.quantized.conv2d(qx, packed, 0.2, 64), check)


print("# torch %s, engine onednn, %d threads, weft and torch alternating" % (torch.__version__, threads))
print("%-46s %10s %10s %8s" % ("row", "weft us", "torch us", "ratio"))
rows = [linear_row(64, 784, 256), linear_row(64, 1024, 1024), conv_row(16, 32, 28, 32)]
