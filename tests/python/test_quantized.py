"""Quantized tensors from Python against Debian's PyTorch 1.13 (issue 17):
int_repr bit-equal to torch's after quantize_per_tensor and
quantize_per_channel for random data, scales and zero points (halves
included), dequantize against torch's, the parameter readers with torch's
return types, tensors made from integers, and the errors.  The operators
are the quantized layout plugin's (libweft-quantized.so)."""
import random

import torch
import weft
from taplib import Skip, done, eq, raises, test

print("# torch", torch.__version__, "engines", torch.backends.quantized.supported_engines)

PAIRS = [(weft.qint8, torch.qint8, -128, 127), (weft.quint8, torch.quint8, 0, 255),
         (weft.qint32, torch.qint32, -(2**31), 2**31 - 1)]


def needs_plugin():
    if "quantized" not in [l.name for l, _ in weft.layouts()]:
        raise Skip("libweft-quantized.so is not loaded")


def needs_dnnl():
    """Skips where the plugin was built without oneDNN (configure --with-dnnl=no)."""
    needs_plugin()
    x = weft.quantize_per_tensor(weft.ones(1, 32), 0.1, 0, weft.quint8)
    w = weft.quantize_per_tensor(weft.ones(1, 32), 0.1, 0, weft.qint8)
    try:
        weft.quantized_linear(x, w, None, 0.1, 0)
    except RuntimeError as e:
        if "without oneDNN" in str(e):
            raise Skip("the quantized plugin was built without oneDNN")
        raise


def to_torch(t):
    return torch.from_dlpack(t.contiguous())


def to_weft(t):
    return weft.from_dlpack(t.contiguous())


@test
def tensor_method_views():
    """Tensor methods on quantized tensors are views that keep the quantizer,
    as torch's: reshape, view, flatten, transpose, t, T, permute, narrow,
    select, indexing with ints and slices, contiguous; int_repr equal to
    torch's after each, a per-channel axis moving with its dimension, and a
    write through a view reaching the tensor it views"""
    needs_plugin()
    x = torch.randn(4, 6, 5)
    wq = weft.quantize_per_tensor(weft.tensor(x.tolist()), 0.05, 3, weft.quint8)
    tq = torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
    cases = [
        ("reshape", lambda q: q.reshape(6, 20)), ("reshape -1", lambda q: q.reshape(-1, 5)),
        ("view", lambda q: q.view(24, 5)), ("flatten", lambda q: q.flatten()),
        ("flatten(1)", lambda q: q.flatten(1)), ("transpose", lambda q: q.transpose(0, 2)),
        ("permute", lambda q: q.permute(2, 0, 1)), ("narrow", lambda q: q.narrow(1, 2, 3)),
        ("select", lambda q: q.select(2, 4)), ("index int", lambda q: q[1]),
        ("index slices", lambda q: q[1:, ::2, -3:]), ("index mixed", lambda q: q[:, 2, 1:4]),
        ("t of a matrix", lambda q: q[0].t()), ("T", lambda q: q[0].T),
        ("contiguous after transpose", lambda q: q.transpose(0, 1).contiguous()),
    ]
    for name, f in cases:
        got, want = f(wq), f(tq)
        eq(got.is_quantized, True, "%s keeps the quantized layout" % name)
        eq(tuple(got.shape), tuple(want.shape), "%s: shape" % name)
        eq((got.q_scale(), got.q_zero_point()), (0.05, 3), "%s keeps scale and zero point" % name)
        eq(got.int_repr().tolist(), want.int_repr().tolist(), "%s: int_repr equal to torch's" % name)
    # per channel along dim 1: the axis follows the dimension
    scales, zps = torch.rand(6) * 0.1 + 0.01, torch.randint(0, 10, (6,))
    wpc = weft.quantize_per_channel(weft.tensor(x.tolist()), weft.tensor(scales.tolist()),
                                    weft.tensor(zps.tolist()), 1, weft.quint8)
    tpc = torch.quantize_per_channel(x, scales, zps, 1, torch.quint8)
    # (torch 1.13 refuses to transpose or permute a per-channel tensor: its
    # integers viewed the same way are the reference, the axis by hand)
    for name, f, axis in [("transpose", lambda q: q.transpose(0, 1), 0),
                          ("permute", lambda q: q.permute(2, 0, 1), 2),
                          ("slice of the channels", lambda q: q[:, 1:5], 1)]:
        got = f(wpc)
        eq(got.q_per_channel_axis(), axis, "per channel %s: the axis moves to %d" % (name, axis))
        eq(got.int_repr().tolist(), f(tpc.int_repr()).tolist(), "per channel %s: int_repr" % name)
    eq(wpc[:, 1:5].q_per_channel_scales().tolist(), tpc.q_per_channel_scales()[1:5].tolist(),
       "slicing the channels slices their scales")
    # views share the integers: writing a float block into a slice requantizes there
    q = weft.quantize_per_tensor(weft.zeros(4, 6), 0.5, 0, weft.qint8)
    q[1:3].copy_(weft.ones(2, 6) * 2.0)
    eq(q.int_repr().tolist(), [[0] * 6, [4] * 6, [4] * 6, [0] * 6], "a write through q[1:3] reaches q")
    # the core's narrow checks a quantized tensor as it checks any other
    raises(IndexError, wq.narrow, 1, 4, 3, contains="narrow: start (4) + length (3) exceeds dimension size (6)")
    eq(wq[0].t().t().dequantize().tolist(), wq[0].dequantize().tolist(), "t() of a quantized matrix")
    eq(wq.unsqueeze(0).squeeze(0).dequantize().tolist(), wq.dequantize().tolist(),
       "unsqueeze and squeeze keep the quantizer")


@test
def per_tensor_bit_equal():
    """quantize_per_tensor: int_repr bit-equal to torch's for random data, scales, zero points"""
    needs_plugin()
    rnd = random.Random(17)
    for i in range(60):
        wd, td, lo, hi = PAIRS[i % 3]
        shape = (rnd.randint(1, 40), rnd.randint(1, 33))
        x = torch.randn(*shape, dtype=torch.float32) * rnd.choice([0.1, 1, 30, 1e4])
        x.view(-1)[::7] = torch.arange(x.view(-1)[::7].numel(), dtype=torch.float32) * 0.5 - 8
        scale = rnd.choice([1.0, 0.5, 0.25, rnd.uniform(1e-3, 2), rnd.uniform(1e-5, 1e-2)])
        zp = rnd.randint(max(lo, -300), min(hi, 300))
        want = torch.quantize_per_tensor(x, scale, zp, td)
        got = weft.quantize_per_tensor(to_weft(x), scale, zp, wd)
        eq(torch.equal(to_torch(got.int_repr()), want.int_repr()), True,
           "int_repr, case %d: scale %r, zero point %d, %s" % (i, scale, zp, td))
        eq(got.q_scale(), want.q_scale(), "q_scale")
        eq(got.q_zero_point(), want.q_zero_point(), "q_zero_point")
        eq(type(got.q_scale()), float)
        eq(type(got.q_zero_point()), int)
        d, dt = to_torch(got.dequantize()), want.dequantize()
        eq(torch.equal(d, dt), True, "dequantize bit-equal, case %d" % i)


@test
def per_channel_bit_equal():
    """quantize_per_channel: int_repr bit-equal to torch's along every axis"""
    needs_plugin()
    rnd = random.Random(5)
    for i in range(30):
        wd, td, lo, hi = PAIRS[i % 2]  # torch 1.13 per-channel: qint8, quint8
        shape = (rnd.randint(1, 6), rnd.randint(1, 7), rnd.randint(1, 9))
        axis = rnd.randrange(3)
        x = torch.randn(*shape) * rnd.choice([0.5, 5, 50])
        n = shape[axis]
        scales = torch.tensor([rnd.uniform(1e-3, 1) for _ in range(n)], dtype=torch.float64)
        zps = torch.tensor([rnd.randint(lo, hi) for _ in range(n)], dtype=torch.int64)
        want = torch.quantize_per_channel(x, scales, zps, axis, td)
        got = weft.quantize_per_channel(to_weft(x), to_weft(scales), to_weft(zps), axis, wd)
        eq(torch.equal(to_torch(got.int_repr()), want.int_repr()), True,
           "int_repr, case %d, axis %d, %s" % (i, axis, td))
        eq(got.q_per_channel_axis(), want.q_per_channel_axis())
        eq(torch.equal(to_torch(got.q_per_channel_scales()), want.q_per_channel_scales()), True)
        eq(torch.equal(to_torch(got.q_per_channel_zero_points()),
                       want.q_per_channel_zero_points()), True)
        # bit-equal: torch rounds the per-channel product (q - z) * scale once,
        # from double (per tensor: the scale as a float first)
        eq(torch.equal(to_torch(got.dequantize()), want.dequantize()), True,
           "dequantize bit-equal, case %d" % i)


@test
def edges_found_by_a_differential_campaign():
    """torch's values where weft once differed: conv2d at input zero point 255 with padding, an all-padding max_pool2d window, qint32 of NaN, a dilated kernel past the padded input"""
    needs_dnnl()
    import weft.nn.quantized.functional as wF
    torch.backends.quantized.engine = "onednn"
    torch.manual_seed(11)
    # small integers far below the zero point and full-range weights: the
    # padding (the zero point, 255) once went into oneDNN's 16-bit pair
    # sums and saturated them (17 steps off at the border)
    for zp, pad in [(255, 1), (200, 2), (129, 1), (128, 1), (255, 0)]:
        q = torch.randint(0, 20, (1, 4, 5, 5))
        x = (q.float() - zp) * 0.1
        w = torch.full((2, 4, 3, 3), 1.27)
        w[1] = -1.28
        tX = torch.quantize_per_tensor(x, 0.1, zp, torch.quint8)
        tW = torch.quantize_per_tensor(w, 0.01, 0, torch.qint8)
        packed = torch.ops.quantized.conv2d_prepack(tW, None, [1, 1], [pad, pad], [1, 1], 1)
        want = torch.ops.quantized.conv2d(tX, packed, 20.0, 128).int_repr().int()
        got = wF.conv2d(weft.quantize_per_tensor(to_weft(x), 0.1, zp, weft.quint8),
                        weft.quantize_per_tensor(to_weft(w), 0.01, 0, weft.qint8), None, 1, pad,
                        scale=20.0, zero_point=128)
        diff = (to_torch(got.int_repr().contiguous()).int() - want).abs().max().item()
        eq(diff <= 1, True, "zero point %d, padding %d: %d steps" % (zp, pad, diff))
    # a window wholly in the padding: the dtype's least integer, as torch's
    for wd, td, zp in [(weft.qint8, torch.qint8, 0), (weft.qint8, torch.qint8, -5),
                       (weft.quint8, torch.quint8, 40)]:
        x = torch.tensor([[[[1.0]]]])
        want = torch.nn.functional.max_pool2d(torch.quantize_per_tensor(x, 0.05, zp, td),
                                              (1, 2), (1, 2), (0, 1), (1, 2), ceil_mode=True)
        got = weft.max_pool2d(weft.quantize_per_tensor(to_weft(x), 0.05, zp, wd),
                              [1, 2], [1, 2], [0, 1], [1, 2], True)
        eq(to_torch(got.int_repr().contiguous()).tolist(), want.int_repr().tolist(), str(td))
    # qint32 of NaN: the least integer, as the 8-bit dtypes give theirs (and torch)
    nan = torch.tensor([float("nan"), 1.0])
    eq(to_torch(weft.quantize_per_tensor(to_weft(nan), 0.5, 3, weft.qint32).int_repr()).tolist(),
       [-2 ** 31, 5])
    eq(to_torch(weft.quantize_per_tensor(to_weft(nan), 0.5, 3, weft.qint8).int_repr()).tolist(),
       [-128, 5])
    # a dilated kernel past the padded input by less than the stride: once one
    # output of garbage (C's truncating division), now refused as torch's float conv2d
    wqx = weft.quantize_per_tensor(weft.randn(1, 4, 5, 2), 0.04, 73, weft.quint8)
    wqw = weft.quantize_per_tensor(weft.randn(2, 4, 1, 3) * 0.1, 0.005, 0, weft.qint8)
    raises(RuntimeError, wF.conv2d, wqx, wqw, None, (1, 3), (1, 0),
           contains="(1 x 3, 1 x 3 with its dilation) is larger than the padded input (7 x 2)")
    wqx = weft.quantize_per_tensor(weft.randn(1, 4, 4, 2), 0.04, 73, weft.quint8)
    wqw = weft.quantize_per_tensor(weft.randn(2, 4, 3, 1) * 0.1, 0.005, 0, weft.qint8)
    raises(RuntimeError, wF.conv2d, wqx, wqw, None, (3, 1), 0, (2, 1),
           contains="(3 x 1, 5 x 1 with its dilation) is larger than the padded input (4 x 2)")


@test
def from_integers():
    """_make_per_tensor_quantized_tensor / _make_per_channel_quantized_tensor as torch's"""
    needs_plugin()
    q = torch.randint(-128, 128, (5, 4), dtype=torch.int8)
    want = torch._make_per_tensor_quantized_tensor(q, 0.3, -2)
    got = weft._make_per_tensor_quantized_tensor(to_weft(q), 0.3, -2)
    eq(got.is_quantized, True)
    eq(torch.allclose(to_torch(got.dequantize()), want.dequantize()), True)
    s, z = torch.rand(4, dtype=torch.float64) + 0.1, torch.randint(-5, 5, (4,))
    want = torch._make_per_channel_quantized_tensor(q, s, z, 1)
    got = weft._make_per_channel_quantized_tensor(to_weft(q), to_weft(s), to_weft(z), 1)
    eq(torch.allclose(to_torch(got.dequantize()), want.dequantize()), True)


@test
def names_and_types():
    """weft.qint8/quint8/qint32 are the integer dtypes; is_quantized tells the layout"""
    needs_plugin()
    x = weft.randn(3, 4)
    q = weft.quantize_per_tensor(x, 0.05, 10, weft.quint8)
    eq(q.is_quantized, True)
    eq(x.is_quantized, False)
    eq(q.dtype == weft.quint8, True)
    eq(q.layout == "quantized", True)
    eq("per_tensor_affine" in repr(q), True, "printing names the quantizer")
    v = weft.quantized_transpose(q, 0, 1)
    eq(v.is_quantized and v.q_scale() == 0.05, True, "a view keeps the quantizer")
    eq(torch.equal(to_torch(v.dequantize()), to_torch(q.dequantize()).t()), True)


@test
def errors():
    """bad scales, zero points, axes and counts raise with the reason; float ops suggest dequantize()"""
    needs_plugin()
    x = weft.randn(2, 3)
    raises(RuntimeError, weft.quantize_per_tensor, x, 0.0, 0, weft.qint8, contains="scale must be positive")
    raises(RuntimeError, weft.quantize_per_tensor, x, float("nan"), 0, weft.qint8, contains="scale")
    raises(RuntimeError, weft.quantize_per_tensor, x, 0.1, 300, weft.quint8,
           contains="zero_point 300 is outside the range of uint8")
    s, z = weft.ones(3, dtype=weft.float64), weft.zeros(3, dtype=weft.int64)
    raises(RuntimeError, weft.quantize_per_channel, x, s, z, 2, weft.qint8, contains="axis 2 is out of range")
    raises(RuntimeError, weft.quantize_per_channel, x, s, z, 0, weft.qint8,
           contains="expected 2 scales and 2 zero points")
    q = weft.quantize_per_tensor(x, 0.1, 0, weft.qint8)
    raises(RuntimeError, weft.exp, q, contains="call dequantize() first")
    raises(RuntimeError, q.q_per_channel_axis, contains="expected a per-channel quantized tensor")


@test
def quantized_linear_as_torch():
    """nn.quantized.functional.linear (+ relu): torch 1.13's onednn result, per tensor and per channel"""
    needs_dnnl()
    import torch.ao.nn.quantized.functional as qF
    import weft.nn.quantized.functional as wF
    if "onednn" not in torch.backends.quantized.supported_engines:
        raise Skip("torch has no onednn quantized engine here")
    torch.backends.quantized.engine = "onednn"
    torch.manual_seed(3)
    for per_channel in (False, True):
        for relu in (False, True):
            x, w, b = torch.randn(16, 200), torch.randn(48, 200) * 0.1, torch.randn(48)
            qx = torch.quantize_per_tensor(x, 0.04, 128, torch.quint8)
            if per_channel:
                s = (w.abs().amax(1) / 127).double()
                z = torch.zeros(48, dtype=torch.long)
                qw = torch.quantize_per_channel(w, s, z, 0, torch.qint8)
                wqw = weft.quantize_per_channel(to_weft(w), to_weft(s), to_weft(z), 0, weft.qint8)
            else:
                qw = torch.quantize_per_tensor(w, 0.005, 0, torch.qint8)
                wqw = weft.quantize_per_tensor(to_weft(w), 0.005, 0, weft.qint8)
            packed = torch.ops.quantized.linear_prepack(qw, b)
            want = (torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear)(
                qx, packed, 0.15, 7)
            wqx = weft.quantize_per_tensor(to_weft(x), 0.04, 128, weft.quint8)
            got = (wF.linear_relu if relu else wF.linear)(wqx, wqw, to_weft(b), 0.15, 7)
            diff = (to_torch(got.int_repr()).int() - want.int_repr().int()).abs().max().item()
            eq(diff <= 1, True, "per_channel=%s relu=%s: largest difference %d steps"
               % (per_channel, relu, diff))
            eq((got.q_scale(), got.q_zero_point()), (0.15, 7))
    wqx = weft.quantize_per_tensor(weft.randn(2, 200), 0.04, 128, weft.quint8)
    raises(RuntimeError, wF.linear, wqx, wqx, None, 0.1, 0, contains="quantized_linear")


@test
def quantized_conv2d_as_torch():
    """nn.quantized.functional.conv2d (+ relu): torch 1.13's onednn result (stride, padding, dilation, groups)"""
    needs_dnnl()
    import weft.nn.quantized.functional as wF
    if "onednn" not in torch.backends.quantized.supported_engines:
        raise Skip("torch has no onednn quantized engine here")
    torch.backends.quantized.engine = "onednn"
    torch.manual_seed(4)
    for per_channel in (False, True):
        for relu in (False, True):
            for stride, pad, dil, groups in [(1, 1, 1, 1), (2, 0, 1, 1), ((1, 2), (2, 1), 2, 4)]:
                x, w, b = torch.randn(2, 16, 11, 13), torch.randn(8, 16 // groups, 3, 3) * 0.1, torch.randn(8)
                qx = torch.quantize_per_tensor(x, 0.05, 120, torch.quint8)
                if per_channel:
                    s = (w.abs().amax((1, 2, 3)) / 127).double()
                    z = torch.zeros(8, dtype=torch.long)
                    qw = torch.quantize_per_channel(w, s, z, 0, torch.qint8)
                    wqw = weft.quantize_per_channel(to_weft(w), to_weft(s), to_weft(z), 0, weft.qint8)
                else:
                    qw = torch.quantize_per_tensor(w, 0.004, 0, torch.qint8)
                    wqw = weft.quantize_per_tensor(to_weft(w), 0.004, 0, weft.qint8)
                pair = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731
                packed = torch.ops.quantized.conv2d_prepack(qw, b, pair(stride), pair(pad), pair(dil), groups)
                want = (torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d)(
                    qx, packed, 0.3, 5)
                wqx = weft.quantize_per_tensor(to_weft(x), 0.05, 120, weft.quint8)
                got = (wF.conv2d_relu if relu else wF.conv2d)(wqx, wqw, to_weft(b), stride, pad, dil,
                                                              groups, scale=0.3, zero_point=5)
                eq(tuple(got.shape), tuple(want.shape))
                diff = (to_torch(got.int_repr()).int() - want.int_repr().int()).abs().max().item()
                eq(diff <= 1, True, "per_channel=%s relu=%s stride=%s pad=%s dil=%s groups=%d: %d steps"
                   % (per_channel, relu, stride, pad, dil, groups, diff))
    wqx = weft.quantize_per_tensor(weft.randn(1, 4, 5, 5), 0.04, 128, weft.quint8)
    wqw = weft.quantize_per_tensor(weft.randn(2, 3, 3, 3), 0.04, 0, weft.qint8)
    raises(RuntimeError, wF.conv2d, wqx, wqw, None, contains="do not fit")


@test
def elementwise_pooling_cat_as_torch():
    """add (+ relu), mul, relu, max_pool2d, adaptive_avg_pool2d, cat, quantized cat, requantize: within one step of torch"""
    needs_plugin()
    import torch.ao.nn.quantized.functional  # noqa: F401
    import weft.nn.quantized.functional as wF
    torch.manual_seed(6)
    a, b = torch.randn(3, 5, 9, 11), torch.randn(3, 5, 9, 11)
    qa = torch.quantize_per_tensor(a, 0.02, 130, torch.quint8)
    qb = torch.quantize_per_tensor(b, 0.03, 120, torch.quint8)
    wa = weft.quantize_per_tensor(to_weft(a), 0.02, 130, weft.quint8)
    wb = weft.quantize_per_tensor(to_weft(b), 0.03, 120, weft.quint8)
    cases = [
        ("add", weft.quantized_add(wa, wb, 0.05, 128), torch.ops.quantized.add(qa, qb, 0.05, 128)),
        ("add_relu", weft.quantized_add(wa, wb, 0.05, 128, True),
         torch.ops.quantized.add_relu(qa, qb, 0.05, 128)),
        ("mul", weft.quantized_mul(wa, wb, 0.01, 128), torch.ops.quantized.mul(qa, qb, 0.01, 128)),
        ("relu", weft.relu(wa), torch.relu(qa)),
        ("max_pool2d", weft.max_pool2d(wa, [3, 3], [2, 2], [1, 1], [1, 1]),
         torch.nn.functional.max_pool2d(qa, 3, 2, 1)),
        ("max_pool2d, ceil_mode, dilation 2", weft.max_pool2d(wa, [2, 3], [2, 2], [1, 1], [2, 2], True),
         torch.nn.functional.max_pool2d(qa, (2, 3), 2, 1, 2, ceil_mode=True)),
        # a window larger than the plane: with ceil_mode torch still gives
        # one output (the plugin once said "empty" here)
        ("max_pool2d, ceil_mode, window larger than the plane",
         weft.max_pool2d(wa, [11, 13], [11, 13], [0, 0], [1, 1], True),
         torch.nn.functional.max_pool2d(qa, (11, 13), (11, 13), 0, ceil_mode=True)),
        ("max_pool2d, 3-D", weft.max_pool2d(weft.quantized_select(wa, 0, 0), [2, 2], [2, 2], [0, 0], [1, 1]),
         torch.nn.functional.max_pool2d(qa[0], 2)),
        ("adaptive_avg_pool2d", weft.adaptive_avg_pool2d(wa, [4, 3]),
         torch.nn.functional.adaptive_avg_pool2d(qa, (4, 3))),
        ("functional.max_pool2d", wF.max_pool2d(wa, 3, padding=1),
         torch.ao.nn.quantized.functional.max_pool2d(qa, 3, padding=1)),
        ("functional.adaptive_avg_pool2d", wF.adaptive_avg_pool2d(wa, 2),
         torch.ao.nn.quantized.functional.adaptive_avg_pool2d(qa, 2)),
        ("cat", weft.cat([wa, wb], 1), torch.cat([qa, qb], 1)),
        ("quantized_cat", weft.quantized_cat([wa, wb], 2, 0.04, 100),
         torch.ops.quantized.cat([qa, qb], 2, 0.04, 100)),
        ("requantize", weft.requantize(wa, 0.1, 10),
         torch.quantize_per_tensor(qa.dequantize(), 0.1, 10, torch.quint8)),
    ]
    for name, got, want in cases:
        eq(tuple(got.shape), tuple(want.shape), name)
        eq((got.q_scale(), got.q_zero_point()), (want.q_scale(), want.q_zero_point()), name)
        diff = (to_torch(got.int_repr()).int() - want.int_repr().int()).abs().max().item()
        eq(diff <= 1, True, "%s: %d steps" % (name, diff))
    wc = weft.quantize_per_tensor(to_weft(a), 0.02, 0, weft.qint8)
    raises(RuntimeError, weft.quantized_add, wa, wc, 0.05, 128, contains="cannot combine")
    s, z = weft.ones(3, dtype=weft.float64), weft.zeros(3, dtype=weft.int64)
    wp = weft.quantize_per_channel(to_weft(a), s, z, 0, weft.quint8)
    raises(RuntimeError, weft.quantized_add, wa, wp, 0.05, 128, contains="per channel")


@test
def observers_as_torch():
    """weft.quantization's observers: torch's scale and zero point for the same batches"""
    needs_plugin()
    import warnings
    import weft.quantization as wq
    from torch.ao.quantization import observer as tobs
    warnings.simplefilter("ignore")  # torch's reduce_range deprecation notice
    torch.manual_seed(8)
    batches = [torch.randn(8, 6, 5) * (i + 1) + 0.3 * i for i in range(4)]
    cases = [
        (wq.MinMaxObserver(), tobs.MinMaxObserver()),
        (wq.MinMaxObserver(dtype=weft.qint8, qscheme=wq.per_tensor_symmetric),
         tobs.MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)),
        (wq.MinMaxObserver(reduce_range=True), tobs.MinMaxObserver(reduce_range=True)),
        (wq.MinMaxObserver(quant_min=0, quant_max=15), tobs.MinMaxObserver(quant_min=0, quant_max=15)),
        (wq.MovingAverageMinMaxObserver(averaging_constant=0.1),
         tobs.MovingAverageMinMaxObserver(averaging_constant=0.1)),
        (wq.PerChannelMinMaxObserver(ch_axis=1, dtype=weft.qint8, qscheme=wq.per_channel_symmetric),
         tobs.PerChannelMinMaxObserver(ch_axis=1, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)),
        (wq.PerChannelMinMaxObserver(ch_axis=0), tobs.PerChannelMinMaxObserver(ch_axis=0)),
        (wq.MovingAveragePerChannelMinMaxObserver(ch_axis=2),
         tobs.MovingAveragePerChannelMinMaxObserver(ch_axis=2)),
    ]
    for w, t in cases:
        for b in batches:
            w(to_weft(b))
            t(b)
        (ws, wz), (ts, tz) = w.calculate_qparams(), t.calculate_qparams()
        eq(torch.equal(to_torch(ws), ts) and torch.equal(to_torch(wz), tz), True,
           "%s(%s): %s %s vs %s %s" % (type(w).__name__, w.qscheme, ws.tolist(), wz.tolist(),
                                       ts.tolist(), tz.tolist()))
    q = cases[0][0].quantize(to_weft(batches[0]))
    eq(q.is_quantized and q.dtype == weft.quint8, True, "quantize() with the observed parameters")
    raises(RuntimeError, wq.MinMaxObserver().calculate_qparams, contains="seen no data")


@test
def calibrate_convert_evaluate():
    """prepare -> calibrate -> convert of a trained MLP and a CNN: int8 accuracy within 1 point of float"""
    needs_dnnl()
    import weft.nn as nn
    import weft.optim as optim
    import weft.quantization as wq
    weft.manual_seed(0)
    centers = weft.randn(4, 32) * 1.5

    def data(n):
        y = weft.randint(0, 4, (n,))
        return centers.index_select(0, y) + weft.randn(n, 32) * 2.5, y

    def train(model, x, y, steps=300):
        opt = optim.SGD(model.parameters(), lr=0.1)
        for step in range(steps):
            i = (step * 100) % x.shape[0]
            loss = nn.functional.cross_entropy(model(x[i:i + 100]), y[i:i + 100])
            opt.zero_grad()
            loss.backward()
            opt.step()

    def accuracy(model, x, y):
        with weft.no_grad():
            return (model(x).argmax(1) == y).float().mean().item()

    def check(model, xtr, ytr, xte, yte, name):
        train(model, xtr, ytr)
        fa = accuracy(model, xte, yte)
        wq.prepare(model)
        with weft.no_grad():
            for i in range(0, xtr.shape[0], 200):
                model(xtr[i:i + 200])
        wq.convert(model)
        eq(all(type(m).__name__ != "Linear" and type(m).__name__ != "Conv2d"
               for m in model.modules()), True, "%s: every layer converted" % name)
        qa = accuracy(model, xte, yte)
        print("# %s: float accuracy %.4f, int8 %.4f" % (name, fa, qa))
        eq(fa > 0.8, True, "%s: the float model learned (%.3f)" % (name, fa))
        eq(abs(fa - qa) <= 0.01, True, "%s: int8 %.4f vs float %.4f" % (name, qa, fa))

    xtr, ytr = data(2000)
    xte, yte = data(1000)
    mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    check(mlp, xtr, ytr, xte, yte, "MLP")
    cnn = nn.Sequential(nn.Unflatten(1, (2, 4, 4)), nn.Conv2d(2, 8, 3, padding=1), nn.ReLU(),
                        nn.Flatten(), nn.Linear(128, 4))
    check(cnn, xtr, ytr, xte, yte, "CNN")


done()
