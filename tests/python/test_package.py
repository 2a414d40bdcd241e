"""The package's Python layer (issue 15): save/load in both formats and
their damaged files, grad-mode context managers and decorators,
weft.autograd (grad, Function under gradcheck), weft.device, weft.cuda,
and the PyTorch habits, each compared with torch 1.13 where torch is
installed (the comparisons say SKIP otherwise)."""
import math
import os
import struct
import tempfile
import threading

import weft
from taplib import Skip, done, eq, raises, test

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


def close(a, b, tol=1e-5):
    a, b = list(a), list(b)
    eq(len(a), len(b))
    for x, y in zip(a, b):
        assert math.isclose(x, y, rel_tol=tol, abs_tol=tol), (a, b)


def state_dict():
    return {"fc.weight": weft.randn(3, 4), "fc.bias": weft.arange(3, dtype=weft.float64),
            "steps": weft.tensor(7), "mask": weft.tensor([True, False]),
            "half": weft.ones(2, 2, dtype=weft.float16), "view": weft.arange(12.0).reshape(3, 4).t()}


def same_dicts(a, b):
    eq(list(a), list(b))
    for k in a:
        eq(a[k].dtype, b[k].dtype, k)
        eq(a[k].shape, b[k].shape, k)
        eq(a[k].tolist(), b[k].tolist(), k)


@test
def save_load_weft_format():
    """weft.save/load round trip a state dict and a tensor in the parameter file"""
    sd = state_dict()
    weft.save(sd, path("m.weft"))
    with open(path("m.weft"), "rb") as f:
        eq(f.read(8), b"WEFTPARM")
    same_dicts(sd, weft.load(path("m.weft")))
    t = weft.arange(5.0)
    weft.save(t, path("t.weft"))
    back = weft.load(path("t.weft"))
    assert isinstance(back, weft.Tensor)
    eq(back.tolist(), t.tolist())
    eq(weft.load(path("t.weft"), map_location="cpu").device, weft.device("cpu"))
    weft.save({}, path("empty.weft"))
    eq(weft.load(path("empty.weft")), {})


@test
def save_load_weft_damaged():
    """a damaged parameter file raises OSError (checksum, truncation, magic); bad input raises TypeError"""
    weft.save(state_dict(), path("d.weft"))
    data = bytearray(open(path("d.weft"), "rb").read())
    flipped = bytearray(data)
    flipped[-6] ^= 0x40  # inside the last tensor's elements: only the checksum can tell
    open(path("flip.weft"), "wb").write(flipped)
    raises(OSError, weft.load, path("flip.weft"), contains="checksum")
    open(path("short.weft"), "wb").write(data[:-9])
    raises(OSError, weft.load, path("short.weft"))
    structure = bytearray(data)
    structure[len(structure) // 2] ^= 0x40
    open(path("structure.weft"), "wb").write(structure)
    raises(OSError, weft.load, path("structure.weft"))
    open(path("junk"), "wb").write(b"hello world, not a model")
    raises(OSError, weft.load, path("junk"), contains="neither")
    raises(OSError, weft.load, path("missing.weft"))
    raises(TypeError, weft.save, {"a": [1, object()]}, path("x.weft"), contains="a.1")
    raises(TypeError, weft.save, [weft.ones(1)], path("x.safetensors"))
    raises(ValueError, weft.save, {"a": weft.ones(1)}, path("x.weft"), format="zip")
    weft.save({"a": weft.ones(1)}, path("x.bin"), format="safetensors")
    eq(weft.load(path("x.bin"))["a"].tolist(), [1.0])


@test
def save_load_safetensors_format():
    """weft.save to .safetensors and back: the layout the format specifies"""
    sd = state_dict()
    weft.save(sd, path("m.safetensors"))
    raw = open(path("m.safetensors"), "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    eq((8 + n) % 8, 0, "data is 8-aligned")
    import json
    header = json.loads(raw[8:8 + n])
    eq(list(header), list(sd))
    eq(header["fc.bias"]["dtype"], "F64")
    eq(header["half"]["dtype"], "F16")
    eq(header["view"]["shape"], [4, 3])
    same_dicts(sd, weft.load(path("m.safetensors")))
    raises(RuntimeError, weft.save, {"c": weft.ones(2, dtype=weft.complex64)}, path("c.safetensors"),
           contains="safetensors")


@test
def save_load_safetensors_damaged():
    """a damaged safetensors file raises OSError naming what is wrong"""
    weft.save({"a": weft.ones(4), "b": weft.zeros(2)}, path("d.safetensors"))
    raw = open(path("d.safetensors"), "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    cases = {
        "short data": (raw[:-4], "offsets"),
        "extra data": (raw + b"\0" * 8, "follow"),
        "header past the end": (struct.pack("<Q", 1 << 40) + raw[8:], "does not fit"),
        "not JSON": (raw[:8] + b"{" + b"x" * (n - 1) + raw[8 + n:], "JSON"),
        "bad dtype": (raw.replace(b'"F32"', b'"Q99"', 1), "dtype"),
    }
    for what, (data, word) in cases.items():
        open(path("bad.safetensors"), "wb").write(data)
        raises(OSError, weft.load, path("bad.safetensors"), contains=word)


@test
def grad_modes():
    """no_grad, enable_grad, inference_mode, set_grad_enabled: context managers and decorators"""
    x = weft.ones(2, requires_grad=True)
    with weft.no_grad():
        assert not (x * 2).requires_grad
        with weft.enable_grad():
            assert (x * 2).requires_grad
        assert not weft.is_grad_enabled()
    assert weft.is_grad_enabled()

    @weft.no_grad()
    def f():
        return weft.is_grad_enabled()

    @weft.no_grad
    def g():
        return weft.is_grad_enabled()

    @weft.inference_mode()
    def h():
        return (x * 2).requires_grad

    eq((f(), g(), h()), (False, False, False))
    eq(f.__name__, "f")
    assert weft.is_grad_enabled()
    with weft.inference_mode():
        assert not (x + 1).requires_grad
    with weft.inference_mode(False):
        assert (x + 1).requires_grad
    weft.set_grad_enabled(False)
    assert not weft.is_grad_enabled()
    weft.set_grad_enabled(True)
    with weft.set_grad_enabled(False):
        assert not weft.is_grad_enabled()
    assert weft.is_grad_enabled()
    # an exception inside restores the mode
    try:
        with weft.no_grad():
            raise KeyError
    except KeyError:
        pass
    assert weft.is_grad_enabled()
    # per thread: another thread's no_grad is not seen here
    seen = []
    entered, leave = threading.Event(), threading.Event()

    def other():
        with weft.no_grad():
            entered.set()
            leave.wait()

    th = threading.Thread(target=other)
    th.start()
    entered.wait()
    seen.append(weft.is_grad_enabled())
    leave.set()
    th.join()
    eq(seen, [True])
    raises(TypeError, weft.set_grad_enabled, "yes")
    raises(TypeError, weft.no_grad(), 3)


@test
def autograd_grad():
    """weft.autograd.grad as torch.autograd.grad: values, allow_unused, create_graph, errors"""
    x = weft.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = weft.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * x * w).sum()
    gx, gw = weft.autograd.grad(y, [x, w], retain_graph=True)
    eq(gx.tolist(), [1.0, -4.0, 12.0])
    eq(gw.tolist(), [1.0, 4.0, 9.0])
    assert x.grad is None, "grad touches no .grad"
    unused = weft.ones(2, requires_grad=True)
    raises(RuntimeError, weft.autograd.grad, y, [x, unused], retain_graph=True)
    eq(weft.autograd.grad(y, [x, unused], allow_unused=True)[1], None)
    (g,) = weft.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (gg,) = weft.autograd.grad(g.sum(), x)
    close(gg.tolist(), [6.0, 12.0, 18.0])
    raises(RuntimeError, weft.autograd.grad, weft.ones(2).sum(), [x])
    raises(TypeError, weft.autograd.grad, y, 3)


class MulExp(weft.autograd.Function):
    """x * exp(x), saving its input; backward in weft operators"""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x.exp() * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.exp() * (x + 1) * ctx.scale, None


class SplitSquare(weft.autograd.Function):
    """two outputs, the second one saved"""

    @staticmethod
    def forward(ctx, a):
        sq = a * a
        ctx.save_for_backward(a, sq)
        return a + 1, sq

    @staticmethod
    def backward(ctx, g1, g2):
        a, sq = ctx.saved_tensors
        eq(sq.tolist(), (a * a).tolist())
        return g1 + g2 * 2 * a


@test
def custom_function():
    """autograd.Function: forward/backward in Python, save_for_backward, gradcheck, errors"""
    x = weft.tensor([0.5, -1.0, 2.0], dtype=weft.float64, requires_grad=True)
    y = MulExp.apply(x, 3.0)
    eq(y.grad_fn, "MulExpBackward")
    y.sum().backward()
    close(x.grad.tolist(), [3 * math.exp(v) * (v + 1) for v in (0.5, -1.0, 2.0)])
    assert weft.autograd.gradcheck(lambda t: MulExp.apply(t, 2.0), [x])
    # double backward: backward's own operators are recorded with create_graph
    (g,) = weft.autograd.grad(MulExp.apply(x, 1.0).sum(), x, create_graph=True)
    (gg,) = weft.autograd.grad(g.sum(), x)
    close(gg.tolist(), [math.exp(v) * (v + 2) for v in (0.5, -1.0, 2.0)])
    a = weft.tensor([1.0, 2.0], dtype=weft.float64, requires_grad=True)
    p, q = SplitSquare.apply(a)
    (p.sum() + q.sum()).backward()
    eq(a.grad.tolist(), [3.0, 5.0])
    assert weft.autograd.gradcheck(lambda t: SplitSquare.apply(t)[1], [a])
    # without grad, nothing is recorded and forward's result comes back as is
    with weft.no_grad():
        assert not MulExp.apply(x, 1.0).requires_grad
    # a saved input modified in place afterwards: backward refuses, naming the function
    b = weft.tensor([1.0, 2.0], requires_grad=True)
    c = b * 1
    z = MulExp.apply(c, 1.0)
    c.add_(1)
    raises(RuntimeError, z.sum().backward, contains="MulExp")

    class Broken(weft.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("no gradient today")

    raises(RuntimeError, Broken.apply(weft.ones(2, requires_grad=True)).sum().backward,
           contains="no gradient today")

    class NotATensor(weft.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return 3

    raises(TypeError, NotATensor.apply, weft.ones(1, requires_grad=True))
    raises(RuntimeError, weft.autograd.gradcheck, lambda t: t * 2,
           [weft.ones(2, requires_grad=True)], contains="float64")
    wrong = weft.tensor([1.0], dtype=weft.float64, requires_grad=True)

    class WrongGrad(weft.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * t

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2 t g

    raises(RuntimeError, weft.autograd.gradcheck, WrongGrad.apply, [wrong * 3], contains="numeric")


@test
def device_objects():
    """Tensor.device is a weft.device with .type and .index, equal to devices and strings"""
    t = weft.ones(2)
    d = t.device
    assert isinstance(d, weft.device)
    eq((d.type, d.index), ("cpu", None))
    eq(weft.device("cpu").index, None)
    eq(weft.device("cuda:1").index, 1)
    eq(weft.device("cuda", 2), weft.device("cuda:2"))
    eq(str(weft.device("cuda", 2)), "cuda:2")
    eq(repr(weft.device("cpu")), "device(type='cpu')")
    assert d == "cpu" and d == weft.device("cpu") and weft.device("cuda:0") != weft.device("cuda:1")
    eq(len({weft.device("cuda:0"), weft.device("cuda", 0)}), 1)
    eq(weft.zeros(2, device=weft.device("cpu")).device.type, "cpu")
    eq(t.to(weft.device("cpu")).data_ptr(), t.data_ptr())
    raises(RuntimeError, weft.device, "bogus")
    raises(RuntimeError, weft.device, "cuda:x")
    raises(TypeError, weft.device, 3)
    raises(TypeError, weft.zeros, 2, device=3.5)
    assert t.is_cpu and not t.is_cuda


@test
def cuda_module():
    """weft.cuda.is_available/device_count agree with the loaded plugins; .cuda() errors clearly without one"""
    n = sum(1 for d in weft.devices() if d.startswith("cuda:"))
    eq(weft.cuda.device_count(), n)
    eq(weft.cuda.is_available(), n > 0)
    if n == 0:
        raises(RuntimeError, weft.ones(2).cuda)
        raises(RuntimeError, weft.ones(2).to, "cuda:0")
    else:
        c = weft.arange(4.0).to("cuda:0")
        assert c.is_cuda and c.device == weft.device("cuda:0")
        eq(c.cpu().tolist(), [0.0, 1.0, 2.0, 3.0])


@test
def threads_and_seed():
    """set_num_threads/get_num_threads and manual_seed reproduce draws"""
    before = weft.get_num_threads()
    weft.set_num_threads(1)
    eq(weft.get_num_threads(), 1)
    weft.set_num_threads(before)
    raises(RuntimeError, weft.set_num_threads, 0)
    raises(TypeError, weft.set_num_threads, "2")
    weft.manual_seed(123)
    a = weft.randn(5).tolist()
    weft.manual_seed(123)
    eq(weft.randn(5).tolist(), a)


@test
def to_arguments_as_torch():
    """to(): non_blocking and memory_format=None taken, copy=True always copies, to(None) keeps; the converters take memory_format"""
    t = weft.tensor([[1.5, -2.0], [3.0, 0.0]], requires_grad=True)
    # the training loop's x.to(device, non_blocking=True)
    assert t.to("cpu", non_blocking=True) is t
    assert t.to(weft.float32, memory_format=None) is t
    assert t.float(memory_format=None) is t and t.float() is t
    eq(t.double(memory_format=None).dtype, weft.float64)
    # copy=True: a new tensor even where nothing changes (torch's rule), the
    # gradient flowing back through it
    for c in (t.to(copy=True), t.to("cpu", copy=True), t.to(weft.float32, copy=True)):
        assert c is not t and c.data_ptr() != t.data_ptr()
        eq(c.tolist(), t.tolist())
        eq(c.requires_grad, True)
    t.to(copy=True).sum().backward()
    eq(t.grad.tolist(), [[1.0, 1.0], [1.0, 1.0]])
    c = t.to(weft.float64, copy=True)
    eq((c.dtype, c.tolist()), (weft.float64, t.tolist()))
    raises(TypeError, t.to, memory_format="channels_last", contains="memory_format")
    raises(TypeError, t.half, memory_format=3, contains="half: memory_format")
    raises(TypeError, t.to, weft.float32, "cpu", "cpu")
    # Tensor.layout and the is_* members: one object per layout, on any tensor
    assert t.layout is weft.strided and t.layout is t.detach().layout
    eq((t.is_sparse, t.is_sparse_csr, t.is_quantized), (False, False, False))


@test
def int_list_as_varargs():
    """x.repeat(2, 1), x.flip(0, 1), x.tile(2, 1): a method's one int list taken as varargs, as torch"""
    x = weft.arange(6.0).reshape(2, 3)
    for name, args in [("repeat", (2, 1)), ("repeat", (2, 1, 3)), ("flip", (0, 1)),
                       ("tile", (2, 1)), ("permute", (1, 0))]:
        got = getattr(x, name)(*args)
        want = getattr(x, name)(args)
        eq((got.shape, got.tolist()), (want.shape, want.tolist()), "%s%s" % (name, args))
    eq(x.repeat(2, 1).shape, (4, 3))
    eq(x.flip(0, 1).tolist(), [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]])
    raises(TypeError, x.repeat, 2, "a", contains="'repeats' must be a tuple of ints")
    raises(TypeError, x.repeat, 2, 1, repeats=(1, 1), contains="multiple values for argument 'repeats'")
    # a method with more than one positional argument after self keeps them apart
    eq(x.sum(0, True).shape, (1, 3))


@test
def tensor_habits():
    """float/double/long/int/half/bool/type/zero_/new_*/view_as/expand_as/data/is_cuda"""
    t = weft.tensor([[1.5, -2.0], [3.0, 0.0]])
    eq(t.double().dtype, weft.float64)
    eq(t.long().tolist(), [[1, -2], [3, 0]])
    eq(t.int().dtype, weft.int32)
    eq(t.half().dtype, weft.float16)
    eq(t.bool().tolist(), [[True, True], [True, False]])
    assert t.float() is t
    eq(t.type(), "weft.FloatTensor")
    eq(t.type(weft.int64).dtype, weft.int64)
    eq(t.type("torch.DoubleTensor").dtype, weft.float64)
    eq(t.type_as(weft.ones(1, dtype=weft.int16)).dtype, weft.int16)
    eq(t.to(weft.ones(1, dtype=weft.float64)).dtype, weft.float64)
    assert t.to(weft.ones(1)) is t
    raises(RuntimeError, t.type, "torch.NoSuchTensor")
    assert t.cpu() is t
    z = t.clone()
    assert z.zero_() is z
    eq(z.tolist(), [[0.0, 0.0], [0.0, 0.0]])
    n = t.new_zeros(3)
    eq((n.shape, n.dtype), ((3,), weft.float32))
    eq(t.new_ones((2, 1), dtype=weft.int64).tolist(), [[1], [1]])
    eq(t.new_empty(0, 4).shape, (0, 4))
    eq(t.new_full((2,), 7).tolist(), [7.0, 7.0])
    nt = t.new_tensor([1, 2])
    eq((nt.dtype, nt.tolist()), (weft.float32, [1.0, 2.0]))
    assert t.new_tensor(t).data_ptr() != t.data_ptr()
    eq(weft.arange(4.0).view_as(t).shape, (2, 2))
    eq(weft.ones(1, 2).expand_as(t).shape, (2, 2))
    raises(RuntimeError, weft.arange(3.0).view_as, t)
    p = weft.ones(2, requires_grad=True)
    d = p.data
    assert not d.requires_grad and d.data_ptr() == p.data_ptr()
    p.data = weft.tensor([4.0, 5.0])
    eq(p.tolist(), [4.0, 5.0])
    raises(RuntimeError, setattr, p, "data", weft.ones(3))
    raises(TypeError, setattr, p, "data", [1.0, 2.0])
    eq(t.nelement(), 4)
    eq(t.is_cuda, False)


@test
def register_hook():
    """Tensor.register_hook: sees and replaces gradients, survives its wrapper, remove() stops it"""
    x = weft.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    y = x * 3
    h = y.register_hook(lambda g: seen.append(g.tolist()))
    y.register_hook(lambda g: g * 10)
    z = y.sum()
    del y  # the graph keeps the hooks
    z.backward(retain_graph=True)
    eq(seen, [[1.0, 1.0]])
    eq(x.grad.tolist(), [30.0, 30.0])
    h.remove()
    x.grad = None
    z.backward()
    eq(seen, [[1.0, 1.0]], "removed: not called again")
    eq(x.grad.tolist(), [30.0, 30.0])
    leaf_seen = []
    x.grad = None
    x.register_hook(lambda g: leaf_seen.append(g.tolist()))
    (x * x).sum().backward()
    eq(leaf_seen, [[2.0, 4.0]])
    raises(RuntimeError, weft.ones(2).register_hook, print)
    raises(TypeError, x.register_hook, 3)
    w = weft.ones(1, requires_grad=True)
    v = w * 2
    v.register_hook(lambda g: "not a tensor")
    raises(RuntimeError, v.sum().backward, contains="Tensor or None")
    u = w * 2
    u.register_hook(lambda g: 1 / 0)
    raises(RuntimeError, u.sum().backward, contains="ZeroDivisionError")
    if torch is not None:
        tx = torch.tensor([1.0, 2.0], requires_grad=True)
        ty = tx * 3
        ty.register_hook(lambda g: g * 10)
        ty.sum().backward()
        eq(tx.grad.tolist(), [30.0, 30.0], "torch gives the same")


@test
def factory_habits():
    """*_like, as_tensor, from_numpy, is_tensor, einsum with operands as arguments, weft.Tensor(...)"""
    t = weft.ones(2, 3, dtype=weft.float64)
    for f in (weft.zeros_like, weft.ones_like, weft.empty_like, weft.rand_like, weft.randn_like):
        r = f(t)
        eq((r.shape, r.dtype, r.device), ((2, 3), weft.float64, t.device), f.__name__)
    eq(weft.zeros_like(t, dtype=weft.int32).dtype, weft.int32)
    eq(weft.full_like(t, 2.5).tolist(), [[2.5] * 3] * 2)
    assert weft.zeros_like(t, requires_grad=True).requires_grad
    raises(TypeError, weft.zeros_like, [1, 2])
    r = weft.randint_like(t, 3, 5)
    assert all(3 <= v < 5 for row in r.tolist() for v in row)
    assert weft.as_tensor(t) is t
    eq(weft.as_tensor([1, 2]).tolist(), [1, 2])
    eq(weft.as_tensor(t, dtype=weft.float32).dtype, weft.float32)
    assert weft.is_tensor(t) and not weft.is_tensor([1])
    a, b = weft.randn(2, 3), weft.randn(3, 4)
    close(weft.einsum("ij,jk->ik", a, b).reshape(-1).tolist(), (a @ b).reshape(-1).tolist())
    close(weft.einsum("ij,jk->ik", [a, b]).reshape(-1).tolist(), (a @ b).reshape(-1).tolist())
    raises(TypeError, weft.einsum, "ij->i", [[1.0]])
    e = weft.Tensor(2, 3)
    eq((e.shape, e.dtype), ((2, 3), weft.float32))
    eq(weft.Tensor([1, 2]).tolist(), [1.0, 2.0])
    eq(weft.Tensor([1, 2]).dtype, weft.float32)
    eq(weft.Tensor().shape, (0,))
    raises(TypeError, weft.Tensor, "abc")
    assert isinstance(e, weft.Tensor)
    raises(TypeError, weft.from_numpy, [1, 2])
    try:
        import numpy as np
    except ImportError:
        raise Skip("numpy is not installed: from_numpy's sharing is not checked")
    arr = np.arange(4, dtype=np.float32)
    s = weft.from_numpy(arr)
    arr[0] = 9
    eq(s.tolist(), [9.0, 1.0, 2.0, 3.0])
    eq(weft.as_tensor(arr).data_ptr(), arr.ctypes.data)


@test
def habits_match_torch():
    """the habits give torch 1.13's dtypes, shapes and values; errors are torch's types"""
    needs_torch()
    data = [[1.5, -2.25], [3.0, 0.5]]
    w, t = weft.tensor(data), torch.tensor(data)
    for name in ("float", "double", "long", "int", "half", "bool"):
        a, b = getattr(w, name)(), getattr(t, name)()
        eq(a.dtype.name, str(b.dtype).replace("torch.", ""), name)
        eq(a.tolist(), b.tolist(), name)
    eq(w.type().replace("weft.", ""), t.type().replace("torch.", ""))
    for name, args in (("new_zeros", (2, 3)), ("new_ones", ((1, 2),)), ("new_full", ((2,), 4))):
        a, b = getattr(w, name)(*args), getattr(t, name)(*args)
        eq((a.shape, a.tolist()), (tuple(b.shape), b.tolist()), name)
    eq(w.new_tensor([1, 2]).dtype.name, str(t.new_tensor([1, 2]).dtype).replace("torch.", ""))
    eq(weft.Tensor([1, 2]).dtype.name, str(torch.Tensor([1, 2]).dtype).replace("torch.", ""))
    eq(weft.Tensor(2, 3).shape, tuple(torch.Tensor(2, 3).shape))
    eq((w.device.type, w.device.index, str(w.device)), (t.device.type, t.device.index, str(t.device)))
    a, b = torch.randn(2, 3), torch.randn(3, 2)
    wa, wb = weft.tensor(a.tolist()), weft.tensor(b.tolist())
    close(weft.einsum("ij,jk->ik", wa, wb).reshape(-1).tolist(),
          torch.einsum("ij,jk->ik", a, b).reshape(-1).tolist(), 1e-4)
    for fn in ("zeros_like", "ones_like", "full_like"):
        extra = (3,) if fn == "full_like" else ()
        eq(getattr(weft, fn)(w, *extra).tolist(), getattr(torch, fn)(t, *extra).tolist(), fn)
    # error types: shape -> RuntimeError, wrong argument types -> TypeError
    for lib, x in ((torch, t), (weft, w)):
        raises(RuntimeError, x.view_as, lib.ones(3))
        raises(TypeError, lib.zeros_like, [1.0])
        raises(RuntimeError, lambda: x @ lib.ones(3, 3))



@test
def dlpack_producer_memory():
    """from_dlpack asks a legacy producer type the versioned way once, then plainly (no exception per import)"""
    calls = []

    class Legacy:
        def __init__(self):
            self.t = weft.arange(3.0)

        def __dlpack__(self, **kwargs):
            calls.append(sorted(kwargs))
            if "max_version" in kwargs or "copy" in kwargs:
                raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
            return self.t.__dlpack__(**kwargs)

    class Versioned(Legacy):
        def __dlpack__(self, **kwargs):
            calls.append(sorted(kwargs))
            return self.t.__dlpack__(max_version=kwargs["max_version"])

    eq(weft.from_dlpack(Legacy()).tolist(), [0.0, 1.0, 2.0])
    eq(calls, [["copy", "max_version"], []])
    del calls[:]
    for _ in range(3):
        eq(weft.from_dlpack(Legacy()).tolist(), [0.0, 1.0, 2.0])
    eq(calls, [[], [], []], "remembered: asked plainly")
    del calls[:]
    for _ in range(2):
        eq(weft.from_dlpack(Versioned()).tolist(), [0.0, 1.0, 2.0])
    eq(calls, [["copy", "max_version"]] * 2, "a versioned producer is asked the versioned way")

    class Broken(Legacy):
        def __dlpack__(self, **kwargs):
            raise ValueError("nothing to export")

    raises(ValueError, weft.from_dlpack, Broken(), contains="nothing to export")
    raises(TypeError, weft.from_dlpack, object())


done()
