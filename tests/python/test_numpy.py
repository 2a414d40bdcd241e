"""DLPack with Debian's NumPy 1.24 (legacy capsules), both directions."""
import numpy as np
import weft
from peer_cases import check_lifetime, numpy_cases, numpy_ptr, weft_cases, write_first
from taplib import Skip, done, eq, raises, test

print("# numpy", np.__version__)

for name, t in weft_cases():

    def weft_to_numpy():
        a = np.from_dlpack(t)
        eq(a.shape, t.shape)
        eq(a.tolist(), t.tolist(), "values")
        if t.numel():
            eq(numpy_ptr(a), t.data_ptr(), "same address")
        if write_first(t):
            eq(a[(0,) * a.ndim], 42.0, "a write in weft is seen by numpy")

    weft_to_numpy.__doc__ = "weft -> numpy.from_dlpack: " + name
    test(weft_to_numpy)

for name, a in numpy_cases():

    def numpy_to_weft():
        t = weft.from_dlpack(a)
        eq(t.shape, a.shape)
        eq(t.dtype, weft.float32)
        eq(t.tolist(), a.tolist(), "values")
        if a.size:
            eq(t.data_ptr(), numpy_ptr(a), "same address")
            a[(0,) * a.ndim] = 7
            eq(t[(0,) * t.ndim].item(), 7.0, "a write in numpy is seen by weft")
            write_first(t)
            eq(float(a[(0,) * a.ndim]), 42.0, "a write in weft is seen by numpy")

    numpy_to_weft.__doc__ = "numpy -> weft.from_dlpack: " + name
    test(numpy_to_weft)


@test
def numpy_method():
    """Tensor.numpy() shares memory (writable) and keeps the tensor alive"""
    t = weft.arange(6, dtype=weft.float64).reshape(2, 3).t()
    a = t.numpy()
    eq(numpy_ptr(a), t.data_ptr())
    eq(a.strides, (8, 24))
    a[0, 0] = 5
    eq(t[0, 0].item(), 5.0)
    del t
    eq(a.tolist(), [[5.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    eq(weft.ones(2, dtype=weft.float16).numpy().dtype, np.float16)
    eq(weft.tensor([True]).numpy().dtype, np.bool_)
    eq(np.asarray(weft.ones(2)).tolist(), [1.0, 1.0])
    raises(TypeError, weft.ones(2, dtype=weft.bfloat16).numpy)


@test
def lifetime_numpy_peer():
    """numpy base -> weft -> numpy: freed once, when the last array dies on another thread"""
    check_lifetime(np.from_dlpack)


@test
def lifetime_weft_holds():
    """numpy -> weft: the array stays alive in weft after numpy drops it"""
    a = np.arange(5.0)
    t = weft.from_dlpack(a)
    del a
    eq(t.tolist(), [0.0, 1.0, 2.0, 3.0, 4.0])


@test
def dtypes():
    """every dtype both sides know crosses unchanged"""
    for d, n in [(weft.uint8, np.uint8), (weft.int8, np.int8), (weft.int16, np.int16),
                 (weft.int32, np.int32), (weft.int64, np.int64), (weft.float16, np.float16),
                 (weft.float64, np.float64), (weft.complex64, np.complex64),
                 (weft.complex128, np.complex128)]:
        eq(np.from_dlpack(weft.ones(2, dtype=d)).dtype, np.dtype(n))
        eq(weft.from_dlpack(np.ones(2, dtype=n)).dtype, d)


@test
def refused():
    """negative strides and consumed capsules are refused with clear errors"""
    e = raises(BufferError, weft.from_dlpack, np.arange(4.0)[::-1])
    assert "negative" in str(e), e
    cap = np.arange(3.0).__dlpack__()
    weft.from_dlpack(cap)
    raises(RuntimeError, weft.from_dlpack, cap)
    raises(TypeError, weft.from_dlpack, [1, 2])


done()
