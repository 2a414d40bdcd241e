"""Shared by the peer tests: the layouts every exchange is tried with, and
how to prove zero-copy and lifetime."""
import gc
import sys

import numpy as np
import weft
from taplib import eq, on_thread


def weft_cases():
    """(name, a weft tensor viewing fresh memory) for each layout"""
    base = weft.arange(24, dtype=weft.float32).reshape(4, 6)
    return [
        ("contiguous", base),
        ("transposed", base.t()),
        ("sliced with offset and step", base[1:3, 1::2]),
        ("size 0", weft.zeros(0, 3)),
        ("0-d", weft.tensor(3.5)),
    ]


def numpy_cases():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    return [
        ("contiguous", base),
        ("transposed", base.T),
        ("sliced with offset and step", base[1:3, 1::2]),
        ("size 0", np.zeros((0, 3), dtype=np.float32)),
        ("0-d", np.array(3.5, dtype=np.float32)),
    ]


def numpy_ptr(a):
    return a.__array_interface__["data"][0]


def write_first(t):
    """Writes 42 into the first element of a weft tensor (if it has one)."""
    if t.numel() == 0:
        return False
    index = (0,) * t.ndim
    t[index] = 42
    return True


def check_lifetime(make_peer, imports=1):
    """A NumPy base array -> weft -> peer (or peer -> weft): the memory stays
    alive while any side holds it, is given back exactly once when the last
    reference dies, on another thread, and the base's reference count comes
    back to where it was.  imports: how many imports into weft the chain
makes (each gives its memory back once)."""
    base = np.arange(12, dtype=np.float64)
    before = sys.getrefcount(base)
    calls = weft._dlpack_deleter_calls()
    w = weft.from_dlpack(base)
    peer = make_peer(w)
    del w
    gc.collect()
    assert sys.getrefcount(base) > before, "the exchange holds the base array"
    eq(weft._dlpack_deleter_calls(), calls, "nothing given back while the peer holds it")
    holder = [peer]
    del peer

    def drop():
        x = holder.pop()
        del x

    on_thread(drop)
    eq(weft._dlpack_deleter_calls(), calls + imports, "each deleter ran exactly once")
    eq(sys.getrefcount(base), before, "the base array's reference count")
