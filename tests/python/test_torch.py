"""DLPack with Debian's PyTorch 1.13 (legacy capsules), both directions:
torch.from_dlpack / torch.utils.dlpack and weft.from_dlpack."""
import numpy as np
import torch
import torch.utils.dlpack
import weft
from peer_cases import check_lifetime, weft_cases, write_first
from taplib import done, eq, raises, test

print("# torch", torch.__version__)


def torch_cases():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    return [
        ("contiguous", base),
        ("transposed", base.t()),
        ("sliced with offset and step", base[1:3, 1::2]),
        ("size 0", torch.zeros(0, 3)),
        ("0-d", torch.tensor(3.5)),
    ]


for name, t in weft_cases():

    def weft_to_torch():
        for how in (torch.from_dlpack, lambda x: torch.utils.dlpack.from_dlpack(x.__dlpack__())):
            p = how(t)
            eq(tuple(p.shape), t.shape)
            eq(p.tolist(), t.tolist(), "values")
            if t.numel():
                eq(p.data_ptr(), t.data_ptr(), "same address")
                p[(0,) * p.dim()] = 9
                eq(t[(0,) * t.ndim].item(), 9.0, "a write in torch is seen by weft")
                write_first(t)
                eq(p[(0,) * p.dim()].item(), 42.0, "a write in weft is seen by torch")

    weft_to_torch.__doc__ = "weft -> torch.from_dlpack: " + name
    test(weft_to_torch)

for name, p in torch_cases():

    def torch_to_weft():
        for how in (weft.from_dlpack, lambda x: weft.from_dlpack(torch.utils.dlpack.to_dlpack(x))):
            t = how(p)
            eq(t.shape, tuple(p.shape))
            eq(t.tolist(), p.tolist(), "values")
            if p.numel():
                eq(t.data_ptr(), p.data_ptr(), "same address")
                p[(0,) * p.dim()] = 7
                eq(t[(0,) * t.ndim].item(), 7.0, "a write in torch is seen by weft")
                write_first(t)
                eq(p[(0,) * p.dim()].item(), 42.0, "a write in weft is seen by torch")

    torch_to_weft.__doc__ = "torch -> weft.from_dlpack: " + name
    test(torch_to_weft)


@test
def lifetime_torch_peer():
    """numpy base -> weft -> torch: freed once, when the torch tensor dies on another thread"""
    check_lifetime(torch.from_dlpack)


@test
def lifetime_torch_source():
    """numpy base -> torch -> weft: freed once, when the weft tensor dies on another thread"""
    check_lifetime(lambda w: weft.from_dlpack(torch.from_dlpack(w)), imports=2)


@test
def dtypes():
    """bfloat16, float16, complex and integers cross both ways; bool is refused by torch 1.13"""
    for d, td in [(weft.bfloat16, torch.bfloat16), (weft.float16, torch.float16),
                  (weft.complex64, torch.complex64), (weft.int16, torch.int16),
                  (weft.uint8, torch.uint8), (weft.float64, torch.float64)]:
        eq(torch.from_dlpack(weft.ones(2, dtype=d)).dtype, td)
        eq(weft.from_dlpack(torch.ones(2, dtype=td)).dtype, d)
    raises(Exception, torch.from_dlpack, weft.ones(2, dtype=weft.bool))


@test
def autograd_refused():
    """a tensor that requires grad is refused, as torch refuses its own"""
    raises(RuntimeError, torch.from_dlpack, weft.ones(2, requires_grad=True))
    t = weft.from_dlpack(torch.ones(2, requires_grad=True).detach())
    eq(t.tolist(), [1.0, 1.0])


@test
def values_match_torch():
    """the same computation gives the same numbers in both (through DLPack)"""
    w = weft.randn(4, 5)
    x = torch.from_dlpack(w).clone()
    got = weft.softmax(w, 1) @ weft.from_dlpack(x.t().contiguous())
    want = torch.softmax(x, 1) @ x.t()
    assert np.allclose(torch.from_dlpack(got).numpy(), want.numpy(), atol=1e-5)



@test
def index_put_with_none_matches_torch():
    """index_put with None entries (x[:, i] = v, x[i, :, j] = v, ...) as torch's indexing"""
    import itertools
    shape = (2, 3, 4, 5)
    x = torch.arange(120, dtype=torch.float64).reshape(shape)
    gen = torch.Generator().manual_seed(3)
    count = 0
    for pattern in itertools.product((None, "index"), repeat=4):
        for cut in range(1, 5):
            entries = pattern[:cut]
            if all(e is None for e in entries):
                continue
            idx = [None if e is None else
                   torch.randint(-shape[d], shape[d], (3,), generator=gen)
                   for d, e in enumerate(entries)]
            key = tuple(slice(None) if i is None else i for i in idx)
            shaped = x[key].shape
            v = torch.arange(shaped.numel(), dtype=torch.float64).reshape(shaped) + 1000
            want = x.clone()
            want[key] = v
            got = weft.index_put(weft.from_dlpack(x), [None if i is None else weft.from_dlpack(i)
                                                       for i in idx], weft.from_dlpack(v))
            eq(got.tolist(), want.tolist(), f"pattern {entries}")
            count += 1
    eq(count, 49)  # 16 patterns x 4 lengths, less the 15 all-None ones
    raises(TypeError, weft.index_put, weft.from_dlpack(x), [1], weft.from_dlpack(x))

@test
def result_dtypes_match_torch():
    """the dtype of binary, where and addcmul results over every dtype pair, dimensioned and 0-d operands: torch's result_type (a 0-d tensor ranks below a dimensioned one of its category)"""
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
             "float32", "float64", "complex64", "complex128"]
    ops = {"add": lambda m, a, b: m.add(a, b), "mul": lambda m, a, b: m.mul(a, b),
           "eq": lambda m, a, b: m.eq(a, b), "maximum": lambda m, a, b: m.maximum(a, b),
           "where": lambda m, a, b: m.where(m.ones(2, 3, dtype=m.bool), a, b),
           "addcmul": lambda m, a, b: m.addcmul(a, b, b)}
    checked = 0
    for da in names:
        for db in names:
            for sa, sb in (((2, 3), ()), ((), (2, 3)), ((), ())):
                for op, f in ops.items():
                    try:
                        tdt = f(torch, torch.zeros(sa, dtype=getattr(torch, da)),
                                torch.zeros(sb, dtype=getattr(torch, db))).dtype
                    except RuntimeError:
                        continue  # no CPU kernel in torch 1.13 (float16 maximum, ...)
                    try:
                        wdt = f(weft, weft.zeros(sa, dtype=getattr(weft, da)),
                                weft.zeros(sb, dtype=getattr(weft, db))).dtype
                    except RuntimeError:
                        continue  # no kernel for the dtype in weft either
                    if str(tdt) == "torch.complex32":
                        tdt = torch.complex64  # weft has no complex32
                    eq(str(wdt).split(".")[-1], str(tdt).split(".")[-1],
                       "%s(%s %s, %s %s)" % (op, da, sa, db, sb))
                    checked += 1
    eq(checked > 1000, True, "compared %d results" % checked)


@test
def floor_divide_signbit_square_and_empty_division_match_torch():
    """floor_divide (functions, methods, in place, a number first), signbit (-0.0, inf, ints), square of bool, and an integer division by zero of an empty tensor (no error: nothing is divided) as torch's"""
    def both(f):
        return f(weft, lambda t: weft.from_dlpack(t)), f(torch, lambda t: t)

    ints = torch.tensor([7, -7, 0, 5, -1])
    floats = torch.tensor([7.5, -7.5, -0.0, 0.0, float("inf"), -float("inf"), 3.0])
    cases = {
        "floor_divide ints": lambda m, c: m.floor_divide(c(ints), 2),
        "floor_divide by a tensor": lambda m, c: m.floor_divide(c(ints), c(torch.tensor([2, -3, 4, -2, 3]))),
        "floor_divide a number first": lambda m, c: m.floor_divide(7, c(torch.tensor([2, -2, 3]))),
        "floor_divide floats": lambda m, c: c(floats).floor_divide(-2.0),
        "signbit floats": lambda m, c: m.signbit(c(floats)),
        "signbit ints": lambda m, c: c(ints).signbit(),
        "square of bool": lambda m, c: m.square(c(torch.tensor([1, 0, 1], dtype=torch.uint8)).to(m.bool)),
        "remainder of an empty int tensor by 0": lambda m, c: m.remainder(c(torch.zeros(0, 3, dtype=torch.int32)), 0),
        "fmod of an empty int tensor by a 0-d 0": lambda m, c: m.fmod(c(torch.zeros(0, 3, dtype=torch.int8)), c(torch.tensor(0, dtype=torch.int8))),
    }
    for what, f in cases.items():
        w, t = both(f)
        eq(str(w.dtype).split(".")[-1], str(t.dtype).split(".")[-1], what + ": dtype")
        # repr: NaN equals NaN, and -0.0 differs from 0.0
        eq([repr(v) for v in (w.to(weft.float64).tolist() if w.dtype != weft.bool else w.tolist())],
           [repr(v) for v in (t.double().tolist() if t.dtype != torch.bool else t.tolist())], what)
    w = weft.tensor([7, -7])
    w.floor_divide_(2)
    eq(w.tolist(), [3, -4], "floor_divide_ in place")
    # a division by zero that happens is still refused, as torch's
    raises(RuntimeError, weft.remainder, weft.tensor([1, 2]), 0, contains="ZeroDivisionError")


def _rounded(v):
    """v's numbers rounded to 9 digits, so that two float64 computations
    compare across summation orders"""
    if isinstance(v, (list, tuple)):
        return [_rounded(u) for u in v]
    if isinstance(v, float):
        return round(v, 9)
    return v


@test
def torch_keywords_and_overloads():
    """var/std(unbiased=...) and a bool first, sort(stable=True), nonzero(as_tuple=True), clamp with tensor bounds, scatter of a number: as torch's (each was a TypeError)"""
    x = torch.randn(3, 4, dtype=torch.float64)
    idx = torch.tensor([[0, 1], [2, 3], [3, 0]])
    cases = {
        "var(unbiased=False)": lambda m, c: c(x).var(unbiased=False),
        "std(1, False, True)": lambda m, c: c(x).std(1, False, True),
        "var(False)": lambda m, c: m.var(c(x), False),
        "std(dim=0, correction=0)": lambda m, c: m.std(c(x), dim=0, correction=0),
        "sort(stable=True)": lambda m, c: c(torch.tensor([3, 1, 2, 1, 3])).sort(descending=True, stable=True),
        "nonzero(as_tuple=True)": lambda m, c: m.nonzero(c(x > 0), as_tuple=True),
        "nonzero of a 0-d tensor, as_tuple": lambda m, c: c(torch.tensor(2.0)).nonzero(as_tuple=True),
        "nonzero": lambda m, c: c(x > 0).nonzero(),
        "clamp(tensor, tensor)": lambda m, c: c(x).clamp(c(torch.tensor([-0.5, 0.0, 0.5, 1.0], dtype=torch.float64)),
                                                         c(torch.tensor([[0.75]], dtype=torch.float64))),
        "clamp(max=0-d tensor)": lambda m, c: m.clamp(c(x), max=c(torch.tensor(0.1, dtype=torch.float64))),
        "clamp numbers": lambda m, c: c(x).clamp(-0.2, 0.2),
        "scatter a number": lambda m, c: c(torch.zeros(3, 4)).scatter(1, c(idx), 2.5),
        "scatter a tensor": lambda m, c: m.scatter(c(torch.zeros(3, 4)), 1, c(idx), c(torch.ones(3, 2))),
    }

    def flat(r):
        if isinstance(r, (tuple, list)):
            return [flat(v) for v in r]
        if isinstance(r, weft.Tensor):
            r = torch.from_dlpack(r.to(weft.float64).contiguous())
        return r.double().tolist()

    def W(t):  # torch 1.13's DLPack has no bool
        if t.dtype == torch.bool:
            return weft.from_dlpack(t.to(torch.uint8)).to(weft.bool)
        return weft.from_dlpack(t)

    for what, f in cases.items():
        w, t = f(weft, W), f(torch, lambda v: v)
        wt = [flat(v) for v in w] if isinstance(w, tuple) else flat(w)
        tt = [flat(v) for v in t] if isinstance(t, tuple) else flat(t)
        # dtypes compared where weft returns them (flat converts to float64)
        wd = [str(v.dtype) for v in (w if isinstance(w, tuple) else (w,))]
        td = [str(v.dtype) for v in (t if isinstance(t, tuple) else (t,))]
        eq([d.split(".")[-1] for d in wd], [d.split(".")[-1] for d in td], what + ": dtypes")
        eq(_rounded(wt), _rounded(tt), what)
    raises(TypeError, weft.var, weft.from_dlpack(x), unbiased=True, correction=1)
    raises(RuntimeError, weft.clamp, weft.from_dlpack(x), contains="'min' or 'max'")


@test
def values_and_indices_by_name():
    """max/min over a dim, sort, topk, cummax and cummin return torch's named pairs: .values and .indices equal torch's, and they still unpack as tuples"""
    t = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    w = weft.from_dlpack(t)
    cases = {"max(1)": lambda x: x.max(1), "min(0, keepdim=True)": lambda x: x.min(0, keepdim=True),
             "sort()": lambda x: x.sort(), "sort(0, descending)": lambda x: x.sort(0, True),
             "topk(2)": lambda x: x.topk(2), "cummax(1)": lambda x: x.cummax(1),
             "cummin(0)": lambda x: x.cummin(0)}
    for what, f in cases.items():
        rw, rt = f(w), f(t)
        eq(type(rw).__name__, type(rt).__name__, what + ": the type's name")
        eq(torch.from_dlpack(rw.values).tolist(), rt.values.tolist(), what + ": values")
        eq(torch.from_dlpack(rw.indices).tolist(), rt.indices.tolist(), what + ": indices")
        v, i = rw
        eq((isinstance(rw, tuple), len(rw), v is rw[0], i is rw[1]), (True, 2, True, True),
           what + ": a tuple")
    eq("values=" in repr(w.max(1)), True, "the repr names the fields")


done()
