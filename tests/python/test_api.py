"""The weft module's own API: construction, dtypes, views through indexing,
operators, autograd, the generic operator binding and error types."""
import math

import weft
from taplib import Skip, done, eq, raises, test


@test
def construction():
    """weft.tensor infers shapes and dtypes from nested lists as PyTorch does"""
    eq(weft.tensor([[1, 2], [3, 4]]).dtype, weft.int64)
    eq(weft.tensor([1, 2.5]).dtype, weft.float32)
    eq(weft.tensor([True, False]).dtype, weft.bool)
    eq(weft.tensor([1j, 2]).dtype, weft.complex64)
    eq(weft.tensor(3.5).shape, ())
    eq(weft.tensor([]).shape, (0,))
    eq(weft.tensor([[1, 2], [3, 4]], dtype=weft.float64).tolist(), [[1.0, 2.0], [3.0, 4.0]])
    eq(weft.tensor([2**62]).item(), 2**62)
    raises(ValueError, weft.tensor, [[1, 2], [3]])
    raises(TypeError, weft.tensor, ["a"])


@test
def factories():
    """zeros, ones, empty, full, arange, linspace, rand, randn, randint, manual_seed"""
    eq(weft.zeros(2, 3).tolist(), [[0.0] * 3] * 2)
    eq(weft.ones((2,), dtype=weft.int32).tolist(), [1, 1])
    eq(weft.empty(4, 5).shape, (4, 5))
    eq(weft.full((2,), 7).tolist(), [7, 7])
    eq(weft.full((2,), 7).dtype, weft.int64)
    eq(weft.arange(5).tolist(), [0, 1, 2, 3, 4])
    eq(weft.arange(1, 2, 0.5).tolist(), [1.0, 1.5])
    eq(weft.linspace(0, 1, 5).tolist(), [0.0, 0.25, 0.5, 0.75, 1.0])
    weft.manual_seed(7)
    a = weft.rand(100)
    weft.manual_seed(7)
    eq(weft.rand(100).tolist(), a.tolist(), "rand after manual_seed")
    assert all(0 <= x < 1 for x in a.tolist())
    eq(weft.randn(3, 4).shape, (3, 4))
    r = weft.randint(3, 9, (1000,))
    eq(r.dtype, weft.int64)
    assert min(r.tolist()) >= 3 and max(r.tolist()) <= 8
    eq(weft.randint(5, (2, 2)).shape, (2, 2))


@test
def thread_count():
    """set_num_threads / get_num_threads: same results, bad counts refused"""
    before = weft.get_num_threads()
    x = weft.arange(0, 300000, dtype=weft.float32).reshape(300, 1000) / 1000
    weft.set_num_threads(1)
    eq(weft.get_num_threads(), 1)
    one = (x.softmax(-1).sum(0).tolist(), x.erf().sum().item())
    weft.set_num_threads(3)
    eq(weft.get_num_threads(), 3)
    eq((x.softmax(-1).sum(0).tolist(), x.erf().sum().item()), one, "same values with 3 threads")
    for bad in (0, -4, 2**40):  # RuntimeError, as torch.set_num_threads(0)
        raises(RuntimeError, weft.set_num_threads, bad)
    raises(TypeError, weft.set_num_threads, "two")
    eq(weft.get_num_threads(), 3, "a refused count changes nothing")
    weft.set_num_threads(before)


@test
def thread_binding():
    """set_thread_binding / get_thread_binding: the three modes, bad ones refused"""
    before = weft.get_thread_binding()
    x = weft.arange(0, 300000, dtype=weft.float32).reshape(300, 1000) / 1000
    want = x.softmax(-1).sum(0).tolist()
    for mode in ("none", "spread", "auto"):
        weft.set_thread_binding(mode)
        eq(weft.get_thread_binding(), mode)
        eq(x.softmax(-1).sum(0).tolist(), want, "same values bound " + mode)
    raises(ValueError, weft.set_thread_binding, "sideways")
    raises(TypeError, weft.set_thread_binding, 2)
    eq(weft.get_thread_binding(), "auto", "a refused mode changes nothing")
    weft.set_thread_binding(before)


@test
def dtypes():
    """dtypes are named objects with PyTorch's names and aliases"""
    eq(repr(weft.float32), "weft.float32")
    assert weft.float is weft.float32 and weft.long is weft.int64 and weft.double is weft.float64
    eq(weft.float64.itemsize, 8)
    assert weft.bfloat16.is_floating_point and weft.complex64.is_complex
    t = weft.ones(2).to(weft.float16)
    eq(t.dtype, weft.float16)
    eq(t.tolist(), [1.0, 1.0])
    eq(repr(weft.zeros(2, dtype=weft.float64)), "tensor([0., 0.], dtype=weft.float64)")


@test
def attributes():
    """shape, dtype, device, ndim, data_ptr, is_leaf, item, tolist, to, contiguous"""
    t = weft.arange(6).reshape(2, 3)
    eq(t.shape, (2, 3))
    eq(t.ndim, 2)
    eq(t.device, "cpu")
    eq(t.size(1), 3)
    eq(t.stride(), (3, 1))
    assert t.is_leaf and not t.requires_grad and t.grad is None
    eq(t[1, 2].item(), 5)
    eq(t.to(weft.float32).dtype, weft.float32)
    assert t.to("cpu") is t
    c = t.t().contiguous()
    assert c.is_contiguous() and c.data_ptr() != t.data_ptr()
    eq(c.tolist(), [[0, 3], [1, 4], [2, 5]])
    raises(ValueError, weft.ones(2).item)  # torch 1.13: ValueError
    raises(ValueError, float, weft.ones(2))
    raises(RuntimeError, bool, weft.ones(2))


@test
def indexing_views():
    """ints, slices with steps, None and Ellipsis give views of the same memory"""
    t = weft.arange(24).reshape(2, 3, 4)
    size = t.element_size()
    eq(t[1].data_ptr(), t.data_ptr() + 12 * size)
    eq(t[1, :, ::2].tolist(), [[12, 14], [16, 18], [20, 22]])
    eq(t[1, :, ::2].stride(), (4, 2))
    eq(t[..., 1].shape, (2, 3))
    eq(t[None, 0, ..., None].shape, (1, 3, 4, 1))
    eq(t[-1, -1, -1].item(), 23)
    eq(t[:, 1:10].shape, (2, 2, 4))
    v = t[0, 1]
    v[...] = 0
    eq(t[0, 1].tolist(), [0, 0, 0, 0], "a write through a view")
    t[1, :, 0] = weft.tensor([7, 8, 9])
    eq(t[1, :, 0].tolist(), [7, 8, 9])
    raises(IndexError, lambda: t[2])
    raises(IndexError, lambda: t[0, 0, 0, 0])
    raises(ValueError, lambda: t[::-1])
    eq(len(t), 2)
    eq([r.shape for r in t], [(3, 4), (3, 4)])


@test
def operators():
    """+ - * / // % ** @, unary -, comparisons and their in-place forms"""
    a = weft.tensor([1.0, 2.0, 3.0])
    b = weft.tensor([4.0, 5.0, 6.0])
    eq((a + b).tolist(), [5.0, 7.0, 9.0])
    eq((a - 1).tolist(), [0.0, 1.0, 2.0])
    eq((10 - a).tolist(), [9.0, 8.0, 7.0])
    eq((a * b).tolist(), [4.0, 10.0, 18.0])
    eq((b / 2).tolist(), [2.0, 2.5, 3.0])
    eq((1 / weft.tensor([2.0, 4.0])).tolist(), [0.5, 0.25])
    eq((b // 4).tolist(), [1.0, 1.0, 1.0])
    eq((weft.tensor([-7, 7]) // 2).tolist(), [-4, 3])
    eq((weft.tensor([-7, 7]) % 3).tolist(), [2, 1])
    eq((a ** 2).tolist(), [1.0, 4.0, 9.0])
    eq((2 ** a).tolist(), [2.0, 4.0, 8.0])
    eq((-a).tolist(), [-1.0, -2.0, -3.0])
    eq((a @ b).item(), 32.0)
    m = weft.arange(6, dtype=weft.float32).reshape(2, 3)
    eq((m @ m.t()).tolist(), [[5.0, 14.0], [14.0, 50.0]])
    eq((a < 2).tolist(), [True, False, False])
    eq((a == b - 3).tolist(), [True, True, True])
    eq((a != 2).tolist(), [True, False, True])
    eq((a >= 2).dtype, weft.bool)
    i = weft.tensor([1, 2])
    eq((i + 1).dtype, weft.int64, "int tensor + int")
    eq((i + 0.5).dtype, weft.float32, "int tensor + float")
    eq((i / 2).dtype, weft.float32, "true division of ints")
    c = a.contiguous()
    ptr = c.data_ptr()
    c += 1
    c *= 2
    c -= b
    c /= 2
    c **= 2
    eq(c.tolist(), [0.0, 0.25, 1.0])
    eq(c.data_ptr(), ptr, "in-place forms keep the memory")
    eq((~weft.tensor([True, False])).tolist(), [False, True])
    assert bool(weft.tensor([1]))
    raises(RuntimeError, bool, weft.ones(2))


@test
def generic_ops():
    """every operator of the table is a function and a method with PyTorch's arguments"""
    t = weft.tensor([[1.0, -2.0], [3.0, -4.0]])
    eq(t.sum().item(), -2.0)
    eq(t.sum(dim=0).tolist(), [4.0, -6.0])
    eq(t.sum(1, keepdim=True).shape, (2, 1))
    eq(t.mean().item(), -0.5)
    eq(weft.relu(t).tolist(), [[1.0, 0.0], [3.0, 0.0]])
    eq(t.abs().tolist(), [[1.0, 2.0], [3.0, 4.0]])
    eq(abs(t).tolist(), [[1.0, 2.0], [3.0, 4.0]])
    assert math.isclose(weft.exp(weft.tensor(1.0)).item(), math.e, rel_tol=1e-6)
    assert math.isclose(weft.tensor(math.e).log().item(), 1.0, rel_tol=1e-6)
    eq(weft.sigmoid(weft.tensor(0.0)).item(), 0.5)
    eq(weft.tanh(weft.tensor(0.0)).item(), 0.0)
    eq(weft.add(t, t, alpha=2).tolist(), [[3.0, -6.0], [9.0, -12.0]])
    eq(weft.add(t, 1).tolist(), [[2.0, -1.0], [4.0, -3.0]])
    eq(weft.div(weft.tensor([7, -7]), 2, rounding_mode="floor").tolist(), [3, -4])
    values, indices = t.max(dim=1)
    eq(values.tolist(), [1.0, 3.0])
    eq(indices.tolist(), [0, 0])
    eq(t.max().item(), 3.0)
    eq(weft.clamp(t, min=0).tolist(), [[1.0, 0.0], [3.0, 0.0]])
    eq(weft.matmul(t, t).tolist(), [[-5.0, 6.0], [-9.0, 10.0]])
    eq(t.sum(dtype=weft.float64).dtype, weft.float64)
    out = weft.empty(2, 2)
    r = weft.neg(t, out=out)
    assert r is out
    eq(out.tolist(), [[-1.0, 2.0], [-3.0, 4.0]])
    u = t.clone()
    assert u.relu_() is u
    eq(u.tolist(), [[1.0, 0.0], [3.0, 0.0]])
    eq(weft.softmax(weft.zeros(1, 4), 1).tolist(), [[0.25] * 4])
    assert "add(Tensor self, Tensor other" in weft.add.__doc__
    raises(TypeError, weft.add, t, "x")
    raises(TypeError, weft.relu, t, bogus=1)


@test
def autograd():
    """backward on a small expression gives the gradients PyTorch gives"""
    x = weft.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = weft.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = ((x * w).sum() + (x ** 2).mean()) * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn
    y.backward()
    # dy/dx = 2 * (w + 2x/3), dy/dw = 2x
    for got, want in zip(x.grad.tolist(), [2 * (0.5 + 2 / 3), 2 * (-1 + 4 / 3), 2 * (2 + 2)]):
        assert math.isclose(got, want, rel_tol=1e-5), (got, want)
    eq(w.grad.tolist(), [2.0, 4.0, 6.0])
    z = weft.tanh(x).sum()
    z.backward(retain_graph=True)
    raises(RuntimeError, weft.ones(2).sum().backward)
    with weft.no_grad():
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    d = x.detach()
    assert not d.requires_grad and d.data_ptr() == x.data_ptr()
    g = weft.ones(3)
    v = x * 3
    v.backward(g)
    x.grad = None
    assert x.grad is None
    e = raises(RuntimeError, setattr, weft.tensor([1, 2]), "requires_grad", True)
    assert "float" in str(e) or "dtype" in str(e), e


@test
def errors():
    """C errors become PyTorch's exception types, carrying the C message"""
    e = raises(RuntimeError, lambda: weft.ones(2, 3) @ weft.ones(2, 3))
    assert "mm" in str(e) or "matmul" in str(e), e
    raises(IndexError, lambda: weft.ones(3)[3])
    raises(IndexError, weft.ones(3).transpose, 0, 5)
    raises(RuntimeError, weft.ones(6).view, 4)
    raises(TypeError, weft.zeros, 2, dtype="nonsense")
    raises(RuntimeError, weft.zeros, 2, device="nonsense")
    raises(RuntimeError, lambda: weft.ones(3, requires_grad=True).__dlpack__(),
           contains="require")
    raises(RuntimeError, lambda: weft.ones(3, requires_grad=True).numpy())


@test
def dlpack_protocol():
    """__dlpack__ keywords, __dlpack_device__ and a weft to weft round trip"""
    t = weft.arange(6, dtype=weft.float32).reshape(2, 3)
    eq(t.__dlpack_device__(), (1, 0))
    assert '"dltensor"' in repr(t.__dlpack__())
    assert '"dltensor"' in repr(t.__dlpack__(max_version=(0, 8)))
    assert '"dltensor_versioned"' in repr(t.__dlpack__(max_version=(1, 0)))
    assert '"dltensor_versioned"' in repr(t.__dlpack__(max_version=(2, 0)))
    t.__dlpack__(dl_device=(1, 0), stream=None)
    t.__dlpack__(stream=-1)
    raises(BufferError, t.__dlpack__, stream=1)
    raises(BufferError, t.__dlpack__, dl_device=(2, 0))
    raises(TypeError, t.__dlpack__, 1)  # keyword-only
    u = weft.from_dlpack(t.t())
    eq(u.data_ptr(), t.data_ptr())
    eq(u.tolist(), t.t().tolist())
    cap = t.__dlpack__(max_version=(1, 0))
    weft.from_dlpack(cap)
    assert '"used_dltensor_versioned"' in repr(cap)
    raises(RuntimeError, weft.from_dlpack, cap, contains="consumed")
    c = weft.from_dlpack(t, copy=True)
    assert c.data_ptr() != t.data_ptr()
    eq(c.tolist(), t.tolist())
    eq(weft.from_dlpack(weft.tensor(5.0)).item(), 5.0)
    eq(weft.from_dlpack(weft.zeros(0, 3)).shape, (0, 3))
    for d in (weft.bool, weft.float16, weft.bfloat16, weft.complex128, weft.int8):
        x = weft.ones(3, dtype=d)
        eq(weft.from_dlpack(x).dtype, d)


@test
def module_extras():
    """plugins(), devices(), load_plugin errors"""
    assert any(p["status"] == "loaded" and p["name"] == "cpu" for p in weft.plugins())
    assert "cpu" in weft.devices()
    raises(RuntimeError, weft.load_plugin, "/nonexistent/libweft-nothing.so")


@test
def tensor_list_results():
    """split, split with sizes, chunk, unbind return tuples of views"""
    t = weft.arange(10.0).reshape([2, 5])
    parts = weft.split(t, 2, 1)
    assert isinstance(parts, tuple)
    eq([p.shape for p in parts], [(2, 2), (2, 2), (2, 1)])
    eq(parts[2].tolist(), [[4.0], [9.0]])
    eq([p.shape for p in t.split([1, 4], 1)], [(2, 1), (2, 4)])
    eq([p.tolist() for p in t.unbind(1)][3], [3.0, 8.0])
    eq(len(t.chunk(3, 1)), 3)
    eq(weft.unbind(weft.zeros(0, 3)), ())
    parts[0].fill_(-1.0)
    eq(t.tolist()[1][:2], [-1.0, -1.0])
    raises(RuntimeError, t.split, 0, 1, contains="split_size 0")
    raises(RuntimeError, t.split, [1, 1], 1, contains="add up to")


@test
def random_operators():
    """randint, randperm, bernoulli_, bernoulli, multinomial"""
    weft.manual_seed(11)
    r = weft.randint(-2, 3, (1000,))
    eq(r.dtype, weft.int64)
    assert set(r.tolist()) == {-2, -1, 0, 1, 2}
    eq(weft.randint(4, [2, 2], dtype=weft.uint8).dtype, weft.uint8)
    eq(sorted(weft.randperm(50).tolist()), list(range(50)))
    weft.manual_seed(11)
    eq(weft.randint(-2, 3, (1000,)).tolist(), r.tolist())
    t = weft.zeros(2, 3)
    t.bernoulli_(weft.tensor([0.0, 1.0, 0.0]))
    eq(t.tolist(), [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    eq(weft.bernoulli(weft.tensor([1.0, 0.0])).tolist(), [1.0, 0.0])
    s = weft.tensor([0.0, 1.0, 1.0, 1.0]).multinomial(3)
    eq(sorted(s.tolist()), [1, 2, 3])
    raises(RuntimeError, t.bernoulli_, 2.0, contains="[0, 1]")
    raises(RuntimeError, weft.randint, 3, 3, (2,), contains="low < high")
    raises(RuntimeError, weft.multinomial, weft.tensor([0.0, 0.0]), 1, contains="sum of probabilities")


@test
def indexing_operators():
    """tile, take, index_put(_) with masks, scatter_reduce, unique"""
    x = weft.arange(6.0).reshape([2, 3])
    eq(x.tile([2]).shape, (2, 6))
    eq(x.take(weft.tensor([0, -1])).tolist(), [0.0, 5.0])
    eq(x.index_put([weft.tensor([1, 1])], weft.tensor(1.0), True).tolist()[1], [5.0, 6.0, 7.0])
    y = x.clone()
    y.index_put_([weft.tensor([True, False])], weft.tensor(9.0))
    eq(y.tolist(), [[9.0, 9.0, 9.0], [3.0, 4.0, 5.0]])
    r = x.scatter_reduce(1, weft.tensor([[0, 0], [2, 2]]), weft.ones(2, 2), "sum", include_self=False)
    eq(r.tolist(), [[2.0, 1.0, 2.0], [3.0, 4.0, 2.0]])
    u, inv, cnt = weft.unique(weft.tensor([3, 1, 3]), return_inverse=True, return_counts=True)
    eq((u.tolist(), inv.tolist(), cnt.tolist()), ([1, 3], [1, 0, 1], [1, 2]))
    raises(IndexError, x.take, weft.tensor([6]), contains="take")
    raises(RuntimeError, x.scatter_reduce, 0, weft.tensor([[0]]), x, "max", contains="amax")


done()
