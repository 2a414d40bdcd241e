"""DLPack with NumPy >= 2.1 from PyPI: versioned capsules, max_version,
copy=, dl_device and read-only arrays."""
import numpy as np
import weft
from peer_cases import check_lifetime, numpy_cases, numpy_ptr, weft_cases, write_first
from taplib import done, eq, raises, test

print("# numpy", np.__version__)
assert tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 1), np.__version__

for name, t in weft_cases():

    def weft_to_numpy():
        a = np.from_dlpack(t)
        eq(a.tolist(), t.tolist(), "values")
        if t.numel():
            eq(numpy_ptr(a), t.data_ptr(), "same address")
            write_first(t)
            eq(float(a[(0,) * a.ndim]), 42.0, "a write in weft is seen by numpy")
            if a.flags.writeable:  # NumPy >= 2.3 imports writable memory as writable
                a[(0,) * a.ndim] = 8
                eq(t[(0,) * t.ndim].item(), 8.0, "a write in numpy is seen by weft")

    weft_to_numpy.__doc__ = "weft -> numpy.from_dlpack (versioned): " + name
    test(weft_to_numpy)

for name, a in numpy_cases():

    def numpy_to_weft():
        cap = a.__dlpack__(max_version=(1, 0))
        assert '"dltensor_versioned"' in repr(cap), repr(cap)
        t = weft.from_dlpack(a)
        eq(t.tolist(), a.tolist(), "values")
        assert not t.is_read_only()
        if a.size:
            eq(t.data_ptr(), numpy_ptr(a), "same address")
            write_first(t)
            eq(float(a[(0,) * a.ndim]), 42.0, "a write in weft is seen by numpy")

    numpy_to_weft.__doc__ = "numpy -> weft.from_dlpack (versioned): " + name
    test(numpy_to_weft)


@test
def max_versions():
    """max_version None and (0, 8) give legacy capsules, (1, 0) and (2, 0) versioned ones"""
    t = weft.ones(3)
    for mv, name in [(None, '"dltensor"'), ((0, 8), '"dltensor"'), ((1, 0), '"dltensor_versioned"'),
                     ((2, 0), '"dltensor_versioned"')]:
        cap = t.__dlpack__(max_version=mv)
        assert name in repr(cap), (mv, repr(cap))
        eq(weft.from_dlpack(cap).tolist(), [1.0, 1.0, 1.0])


@test
def read_only():
    """a read-only array becomes a read-only tensor that refuses in-place writes"""
    a = np.arange(4.0)
    a.flags.writeable = False
    t = weft.from_dlpack(a)
    assert t.is_read_only()
    eq(t.data_ptr(), numpy_ptr(a))
    raises(RuntimeError, t.add_, 1)
    raises(RuntimeError, t.__setitem__, 0, 5.0)
    raises(BufferError, t.__dlpack__)  # the legacy struct cannot say read-only
    b = np.from_dlpack(t)
    assert not b.flags.writeable
    eq(numpy_ptr(b), numpy_ptr(a))
    eq((t + 1).tolist(), [1.0, 2.0, 3.0, 4.0])
    eq(a.tolist(), [0.0, 1.0, 2.0, 3.0])


@test
def copies():
    """copy=True copies on both sides, copy=False shares"""
    t = weft.arange(4, dtype=weft.float32)
    c = np.from_dlpack(t, copy=True)
    assert numpy_ptr(c) != t.data_ptr()
    eq(c.tolist(), t.tolist())
    eq(numpy_ptr(np.from_dlpack(t, copy=False)), t.data_ptr())
    a = np.arange(4.0)
    w = weft.from_dlpack(a, copy=True)
    assert w.data_ptr() != numpy_ptr(a)
    eq(w.tolist(), a.tolist())
    eq(weft.from_dlpack(a, copy=False).data_ptr(), numpy_ptr(a))


@test
def devices():
    """dl_device=(1, 0) and device='cpu' work; another device is a BufferError"""
    t = weft.ones(2)
    eq(np.from_dlpack(t, device="cpu").tolist(), [1.0, 1.0])
    t.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
    raises(BufferError, t.__dlpack__, max_version=(1, 0), dl_device=(2, 0))
    raises(BufferError, weft.from_dlpack, np.ones(2), device="cuda")


@test
def lifetime():
    """numpy base -> weft -> numpy 2: freed once, when the last array dies on another thread"""
    check_lifetime(np.from_dlpack)


@test
def dtypes():
    """bool and complex cross both ways with NumPy 2"""
    for d, n in [(weft.bool, np.bool_), (weft.complex128, np.complex128), (weft.int64, np.int64)]:
        eq(np.from_dlpack(weft.ones(2, dtype=d)).dtype, np.dtype(n))
        eq(weft.from_dlpack(np.ones(2, dtype=n)).dtype, d)


done()
