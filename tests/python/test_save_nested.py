"""weft.save/weft.load of nested objects (an optimizer's state_dict): the
round trip of every kind of value, an optimizer resumed from a saved file
stepping exactly as the uninterrupted one, files written before nested
objects existed (a version-1 file built here byte by byte) still loading,
and damaged files raising OSError."""
import math
import os
import struct
import tempfile
import zlib

import weft
from taplib import done, eq, raises, test
from weft import optim

TMP = tempfile.mkdtemp()


def path(name):
    return os.path.join(TMP, name)


def same(a, b, where="value"):
    """Deep equality, tensors by shape, dtype and elements, floats bitwise."""
    if isinstance(a, weft.Tensor):
        assert isinstance(b, weft.Tensor), "%s: %r is not a tensor" % (where, b)
        eq((a.shape, a.dtype), (b.shape, b.dtype), where)
        eq(weft._C._to_bytes(a), weft._C._to_bytes(b), where)
    elif isinstance(a, dict):
        eq(type(b), dict, where)
        eq(list(a), list(b), where + " keys")
        for k in a:
            same(a[k], b[k], "%s.%s" % (where, k))
    elif isinstance(a, (list, tuple)):
        eq(type(a), type(b), where)
        eq(len(a), len(b), where)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s.%d" % (where, i))
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        eq((type(a), a), (type(b), b), where)


@test
def round_trip_values():
    """nested dicts (int and str keys), lists, tuples, ints, floats (inf, nan, 0.1), bools, strings, None and tensors round-trip"""
    obj = {"state": {0: {"step": weft.tensor(3.0), "buf": weft.arange(6).view(2, 3)},
                     7: {"sum": weft.ones(4, dtype=weft.float64)}},
           "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 7],
                             "nesterov": False, "foreach": None, "name": "ünï.code",
                             "big": 2 ** 62, "edge": [float("inf"), -0.0, float("nan")]}],
           "empty": [{}, [], ()]}
    weft.save(obj, path("nested.pt"))
    same(obj, weft.load(path("nested.pt")))
    # a list at the top, and two tensors whose paths would collide
    obj = [weft.zeros(2), {"0": weft.ones(1)}, {0: weft.ones(2)}]
    weft.save(obj, path("list.pt"))
    same(obj, weft.load(path("list.pt")))


@test
def optimizer_resumes_exactly():
    """Adam's state_dict saved and loaded into a new optimizer: the next 5 steps equal the uninterrupted run bit for bit"""
    def grads(ws, step):
        for i, w in enumerate(ws):
            w.grad = weft.full(list(w.shape), math.sin(step + i) * 0.3)

    weft.manual_seed(0)
    ws = [weft.randn(3, 2, requires_grad=True), weft.randn(4, requires_grad=True)]
    opt = optim.Adam([{"params": ws[:1]}, {"params": ws[1:], "lr": 0.01}], amsgrad=True)
    for s in range(4):
        grads(ws, s)
        opt.step()
    weft.save(opt.state_dict(), path("adam.pt"))
    copies = [w.detach().clone().requires_grad_(True) for w in ws]
    resumed = optim.Adam([{"params": copies[:1]}, {"params": copies[1:]}])
    loaded = weft.load(path("adam.pt"))
    same(opt.state_dict(), loaded, "the loaded state_dict")
    resumed.load_state_dict(loaded)
    eq(resumed.param_groups[1]["lr"], 0.01)
    eq(resumed.param_groups[0]["betas"], (0.9, 0.999))
    for s in range(4, 9):
        grads(ws, s)
        grads(copies, s)
        opt.step()
        resumed.step()
    for w, c in zip(ws, copies):
        same(w.detach(), c.detach(), "parameter after resuming")


@test
def old_files_still_load():
    """a version-1 parameter file built byte by byte (no structure entry) loads as a flat dict, as before"""
    body = b"WEFTPARM" + struct.pack("<II", 1, 2)
    for name, values in (("a", [1.0, 2.0]), ("b.weight", [3.5])):
        body += struct.pack("<I", len(name)) + name.encode() + struct.pack("<II", 8, 1)
        body += struct.pack("<q", len(values)) + struct.pack("<%df" % len(values), *values)
    body += struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)
    with open(path("old.pt"), "wb") as f:
        f.write(body)
    got = weft.load(path("old.pt"))
    eq(list(got), ["a", "b.weight"])
    eq(got["a"].tolist(), [1.0, 2.0])
    eq(got["b.weight"].tolist(), [3.5])
    # and a flat state dict is still written as before: no structure entry
    weft.save({"w": weft.ones(2)}, path("flat.pt"))
    eq(list(weft.load(path("flat.pt"))), ["w"])


@test
def damaged_files():
    """damaged nested files raise OSError: a flipped byte (checksum), a truncation, a bad or inconsistent structure entry"""
    opt = optim.SGD([weft.ones(3, requires_grad=True)], lr=0.1, momentum=0.9)
    opt.param_groups[0]["params"][0].grad = weft.ones(3)
    opt.step()
    weft.save(opt.state_dict(), path("sgd.pt"))
    data = open(path("sgd.pt"), "rb").read()
    for i, bad in ((len(data) // 2, None), (len(data) - 10, None)):
        flipped = bytearray(data)
        flipped[i] ^= 0x40
        with open(path("bad.pt"), "wb") as f:
            f.write(flipped)
        raises(OSError, weft.load, path("bad.pt"))
    with open(path("bad.pt"), "wb") as f:
        f.write(data[:-7])
    raises(OSError, weft.load, path("bad.pt"))

    def write(structure, tensors):
        blob = structure.encode()
        names = tuple(tensors) + ("__structure__",)
        values = tuple(tensors.values()) + (weft._C._from_bytes(blob, 0, weft.uint8, (len(blob),)),)
        weft._C._save_parameters(path("bad.pt"), values, names)

    write('{"list":[{"tensor":"x"}]}', {})
    raises(OSError, weft.load, path("bad.pt"), contains="does not hold")
    write('{"list":[]}', {"x": weft.ones(1)})
    raises(OSError, weft.load, path("bad.pt"), contains="unreferenced")
    write('{"list":[{"tensor":"x"},{"tensor":"x"}]}', {"x": weft.ones(1)})
    raises(OSError, weft.load, path("bad.pt"), contains="twice")
    write('{"list": [', {})
    raises(OSError, weft.load, path("bad.pt"), contains="not JSON")
    write('{"set":[1]}', {})
    raises(OSError, weft.load, path("bad.pt"), contains="not an encoded value")


@test
def unsavable_values():
    """what the format cannot hold raises TypeError naming where it is; safetensors refuses nested objects"""
    raises(TypeError, weft.save, {"state": {0: {"fn": print}}}, path("x.pt"), contains="state.0.fn")
    raises(TypeError, weft.save, {"a": [weft.ones(1)]}, path("x.safetensors"),
           contains="safetensors")
    loop = []
    loop.append(loop)
    raises(ValueError, weft.save, loop, path("x.pt"), contains="contains itself")


done()
