"""tests/fuzz/fuzz_python_ops.py -- atheris fuzzer of the Python bindings:
calls weft's functions and Tensor methods, chosen by the input, with
arguments the input builds (ints from small to 2**63, floats with NaN and
infinities, None, strings, dtypes, nested lists, tuples, small tensors of
every dtype and rank 0..3, keyword arguments from the schemas' names).

The only thing asserted is that whatever goes wrong comes out as a Python
exception: a crash or an abort in the module (or the library under it) is a
finding, and so is SystemError, which CPython raises when a C function
returns an error without setting an exception, or a result with one set.
tests/fuzz.sh runs it with PYTHONPATH at the build's python/pkg.

WEFT_FUZZ_WRITE_SEEDS=DIR python3 fuzz_python_ops.py writes the seed corpus
(tests/fuzz/corpus/python_ops/) and exits."""
import math
import os
import sys


def write_seeds(directory):
    os.makedirs(directory, exist_ok=True)
    for i, seed in enumerate([b"", b"\x00" * 32, b"\x01" * 48, bytes(range(64)),
                              bytes(range(255, 127, -1)), b"\x07\x03\x05" * 20]):
        with open(os.path.join(directory, "seed-%d" % i), "wb") as f:
            f.write(seed)


if __name__ == "__main__" and os.environ.get("WEFT_FUZZ_WRITE_SEEDS"):
    write_seeds(os.environ["WEFT_FUZZ_WRITE_SEEDS"])
    sys.exit(0)

import atheris  # noqa: E402 (the seeds need neither)
import resource  # noqa: E402

# An operator asked for a huge tensor (weft.zeros(2**31)) must fail as it
# would for a user whose memory is limited, not fill the machine: the address
# space is capped at 2 GiB (the process needs about 200 MiB), so such calls
# raise instead of being taken for a finding by libFuzzer's RSS limit.  The C
# harnesses get the same from ASan's allocation cap.
_soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
if _hard == resource.RLIM_INFINITY or _hard > 2 << 30:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, _hard))

import weft  # noqa: E402

# Callables that change the process rather than compute: loading a file
# named by the input, or thread pools of up to 1024 threads; and weft.save
# and weft.load, which would write and read files the input names.
EXCLUDED = {"load_plugin", "set_num_threads", "set_thread_binding", "manual_seed", "save", "load"}
FUNCTIONS = sorted(
    name for name in dir(weft)
    if not name.startswith("_") and name not in EXCLUDED and callable(getattr(weft, name))
    and not isinstance(getattr(weft, name), type)
)
# The layout plugins' Python functions, called as the weft ones are: the
# quantized functional calls and weft.sparse (their schemas are Python
# signatures, so their arguments come from value()).
MODULE_FUNCTIONS = []
for _module in ("weft.nn.quantized.functional", "weft.sparse"):
    try:
        __import__(_module)
        _m = sys.modules[_module]
    except ImportError:
        continue
    MODULE_FUNCTIONS += [getattr(_m, n) for n in sorted(dir(_m))
                         if not n.startswith("_") and callable(getattr(_m, n))
                         and not isinstance(getattr(_m, n), type)
                         and getattr(getattr(_m, n), "__module__", "") == _module]
METHODS = sorted(
    name for name in dir(weft.Tensor)
    if not name.startswith("_") and callable(getattr(weft.Tensor, name, None))
)
DTYPES = [getattr(weft, n) for n in ("bool", "uint8", "int8", "int16", "int32", "int64",
                                     "float16", "bfloat16", "float32", "float64",
                                     "complex64", "complex128") if hasattr(weft, n)]
KEYWORDS = ["dim", "keepdim", "dtype", "out", "alpha", "value", "reduction", "p", "eps",
            "min", "max", "rounding_mode", "generator", "device", "requires_grad", "size",
            "weight", "bias", "index", "approximate", "mode", "other", "unbiased", "bogus"]
WORDS = ["mean", "sum", "none", "tanh", "floor", "trunc", "nearest", "bilinear", "constant",
         "reflect", "cpu", "cpu:0", "cuda", "ij,jk->ik", "ii->i", "...", "", "float32"]
INTS = [0, 1, -1, 2, 3, -2, 4, 7, 2**31, -2**31, 2**62, 2**63 - 1, -2**63, 2**64, 2**100]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, math.nan, math.inf, -math.inf, 1e308, 5e-324, 1e20]
VERBOSE = bool(os.environ.get("WEFT_FUZZ_VERBOSE"))
# Errors that are ordinary answers to wrong arguments.  SystemError is not
# among them: it means the binding broke CPython's error protocol.
EXPECTED = (TypeError, ValueError, RuntimeError, IndexError, OverflowError, MemoryError,
            NotImplementedError, ZeroDivisionError, KeyError, AttributeError, BufferError,
            ImportError)  # Tensor.numpy() where NumPy is not installed


# The harness's own functions are instrumented: their branch coverage (which
# kinds of values and calls an input makes) is what guides libFuzzer, as the
# module itself is not instrumented.
@atheris.instrument_func
def small_tensor(fdp):
    dtype = DTYPES[fdp.ConsumeIntInRange(0, len(DTYPES) - 1)]
    ndim = fdp.ConsumeIntInRange(0, 3)
    shape = [fdp.ConsumeIntInRange(0, 4) for _ in range(ndim)]  # numel <= 64
    numel = 1
    for s in shape:
        numel *= s
    values = [fdp.ConsumeIntInRange(-3, 5) for _ in range(numel)]
    t = weft.tensor(values, dtype=weft.int64).reshape(shape) if shape else weft.tensor(
        values[0] if values else 0)
    try:
        t = t.to(dtype)
    except EXPECTED:
        pass
    if fdp.ConsumeIntInRange(0, 7) == 0 and ndim >= 2:
        t = t.transpose(0, 1)
    if fdp.ConsumeIntInRange(0, 7) == 0 and t.dtype in (weft.float32, weft.float64):
        t.requires_grad_(True)
    elif fdp.ConsumeIntInRange(0, 5) == 0:
        t = layout_tensor(fdp, t)
    return t


# Quantized (per tensor or per channel, qint8/quint8/qint32, scales and zero
# points in and out of range) and sparse (COO, CSR) forms of a small
# tensor, so that the layout plugins' kernels get what users pass them.
SCALES = [1.0, 0.1, 1e-30, 0.0, -1.0, math.nan, math.inf, 3.0]


@atheris.instrument_func
def layout_tensor(fdp, t):
    kind = fdp.ConsumeIntInRange(0, 3)
    try:
        if kind == 0:
            return t.to_sparse()
        if kind == 1:
            return t.to_sparse_csr()
        qdtype = (weft.quint8, weft.qint8, weft.qint32)[fdp.ConsumeIntInRange(0, 2)]
        scale = SCALES[fdp.ConsumeIntInRange(0, len(SCALES) - 1)]
        zp = fdp.ConsumeIntInRange(-2, 300) if fdp.ConsumeIntInRange(0, 3) == 0 else 0
        f = t.detach().to(weft.float32)
        if kind == 2 or f.dim() == 0:
            return weft.quantize_per_tensor(f, scale, zp, qdtype)
        axis = fdp.ConsumeIntInRange(-1, f.dim())
        n = f.shape[axis] if -f.dim() <= axis < f.dim() else 1
        return weft.quantize_per_channel(f, weft.full([n], scale, dtype=weft.float64),
                                         weft.full([n], zp, dtype=weft.int64), axis, qdtype)
    except EXPECTED:
        return t


@atheris.instrument_func
def value(fdp, depth=0):
    kind = fdp.ConsumeIntInRange(0, 13)
    if kind == 0:
        return None
    if kind <= 2:
        return fdp.ConsumeIntInRange(-3, 8) if kind == 1 else INTS[
            fdp.ConsumeIntInRange(0, len(INTS) - 1)]
    if kind == 3:
        return FLOATS[fdp.ConsumeIntInRange(0, len(FLOATS) - 1)]
    if kind == 4:
        return fdp.ConsumeBool()
    if kind == 5:
        return WORDS[fdp.ConsumeIntInRange(0, len(WORDS) - 1)] if fdp.ConsumeBool() else \
            fdp.ConsumeUnicodeNoSurrogates(6)
    if kind == 6:
        return DTYPES[fdp.ConsumeIntInRange(0, len(DTYPES) - 1)]
    if kind <= 9:
        return small_tensor(fdp)
    if kind == 10 and depth < 2:
        return [value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if kind == 11 and depth < 2:
        return tuple(fdp.ConsumeIntInRange(-2, 4) for _ in range(fdp.ConsumeIntInRange(0, 4)))
    if kind == 12:
        return complex(fdp.ConsumeIntInRange(-2, 2), 1)
    return fdp.ConsumeIntInRange(0, 3)


def schemas(fn):
    """The schemas in a bound operator's docstring, one per overload, as
    (python name, [(type, name, keyword only, has a default)])."""
    out = []
    for line in (getattr(fn, "__doc__", None) or "").splitlines():
        line = line.strip()
        if "->" not in line or "(" not in line:
            continue
        name = line[:line.index("(")]
        inside = line[line.index("(") + 1:line.rindex(")", 0, line.index("->"))]
        args, kwonly = [], False
        for part in inside.split(","):
            part = part.strip()
            if part == "*":
                kwonly = True
            elif part:
                typ, _, rest = part.partition(" ")
                arg, eq, _ = rest.partition("=")
                args.append((typ, arg.strip(), kwonly, bool(eq)))
        out.append((name, args))
    return out


@atheris.instrument_func
def value_of_type(fdp, typ):
    """Mostly a value of the schema's type; now and then anything."""
    if fdp.ConsumeIntInRange(0, 15) == 0:
        return value(fdp)
    if typ.endswith("?") and fdp.ConsumeIntInRange(0, 5) == 0:
        return None
    base = typ.rstrip("?")
    if base.startswith("Tensor") and base.endswith("[]"):
        return [small_tensor(fdp) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if base.startswith("Tensor"):
        return small_tensor(fdp)
    if base == "int[]":
        n = fdp.ConsumeIntInRange(0, 4)
        return [fdp.ConsumeIntInRange(-3, 4) if fdp.ConsumeIntInRange(0, 7) else
                INTS[fdp.ConsumeIntInRange(0, len(INTS) - 1)] for _ in range(n)]
    if base == "float[]":
        return [FLOATS[fdp.ConsumeIntInRange(0, len(FLOATS) - 1)]
                for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if base == "int":
        return fdp.ConsumeIntInRange(-3, 4) if fdp.ConsumeIntInRange(0, 7) else \
            INTS[fdp.ConsumeIntInRange(0, len(INTS) - 1)]
    if base in ("float", "Scalar"):
        return FLOATS[fdp.ConsumeIntInRange(0, len(FLOATS) - 1)] if fdp.ConsumeBool() else \
            fdp.ConsumeIntInRange(-3, 4)
    if base == "bool":
        return fdp.ConsumeBool()
    if base == "ScalarType":
        return DTYPES[fdp.ConsumeIntInRange(0, len(DTYPES) - 1)]
    if base == "str":
        return WORDS[fdp.ConsumeIntInRange(0, len(WORDS) - 1)]
    return value(fdp)


@atheris.instrument_func
def quantized_tensor(fdp, qdtype, ndim, like=None):
    """A quantized tensor of ndim dims (sizes 0..5, or mostly like's sizes
    where given, None for free), values -40..40."""
    shape = [fdp.ConsumeIntInRange(0, 5) for _ in range(ndim)]
    for i, size in enumerate(like or []):
        if size is not None and i < ndim and fdp.ConsumeIntInRange(0, 7):
            shape[i] = size
    numel = 1
    for d in shape:
        numel *= d
    f = weft.tensor([float(fdp.ConsumeIntInRange(-40, 40)) for _ in range(numel)]).reshape(shape)
    scale = 0.25 if fdp.ConsumeIntInRange(0, 7) else SCALES[fdp.ConsumeIntInRange(0, 7)]
    if qdtype == weft.qint8 and ndim and fdp.ConsumeBool():
        n = shape[0]
        return weft.quantize_per_channel(f, weft.full([n], scale, dtype=weft.float64),
                                         weft.zeros([n], dtype=weft.int64), 0, qdtype)
    zp = 0 if qdtype == weft.qint8 else fdp.ConsumeIntInRange(0, 255)
    return weft.quantize_per_tensor(f, scale, zp, qdtype)


@atheris.instrument_func
def quantized_call(fdp, fn):
    """fn of weft.nn.quantized.functional with what it expects, mostly: a
    quint8 input and a qint8 weight of random shapes (empty ones
    included), a float bias or None, then the other arguments by value()."""
    conv, linear = fn.__name__.startswith("conv"), fn.__name__.startswith("linear")
    want = 4 if conv or "pool" in fn.__name__ else 2 if linear else 3
    x = quantized_tensor(fdp, weft.quint8, want if fdp.ConsumeIntInRange(0, 3) else
                         fdp.ConsumeIntInRange(1, 4))
    args = [x]
    if conv or linear:
        # the weight's input size (conv: channels) mostly the input's
        inner = x.shape[-1] if linear and x.dim() else x.shape[1] if x.dim() > 1 else None
        like = [None, inner] if conv else [None, inner]
        if linear:
            like = [None, inner]
        w = quantized_tensor(fdp, weft.qint8, (4 if conv else 2) if fdp.ConsumeIntInRange(0, 3)
                             else fdp.ConsumeIntInRange(1, 4), like)
        args.append(w)
        n = w.shape[0] if w.dim() else 0
        args.append(None if fdp.ConsumeBool() else
                    weft.zeros([n if fdp.ConsumeIntInRange(0, 3) else fdp.ConsumeIntInRange(0, 5)]))
        kwargs = {"scale": 0.5 if fdp.ConsumeIntInRange(0, 3) else
                  FLOATS[fdp.ConsumeIntInRange(0, len(FLOATS) - 1)],
                  "zero_point": fdp.ConsumeIntInRange(-1, 256)}
    else:
        kwargs = {}
    for _ in range(0 if linear else fdp.ConsumeIntInRange(0, 3)):
        args.append(fdp.ConsumeIntInRange(-1, 4) if fdp.ConsumeIntInRange(0, 3) else value(fdp))
    if VERBOSE:
        print("call %s %r %r" % (fn.__name__, args, kwargs), file=sys.stderr, flush=True)
    return fn(*args, **kwargs)


@atheris.instrument_func
def block_call(fdp):
    """weft.nn.functional.linear(x, W) or weft.matmul(W, v) with W in
    ggml's q8_0 or q4_0 blocks: 0-3 rows of 0-17 blocks (the vector Q4_0
    kernels take groups of eight and finish a tail block by block), random
    values with now and then a special float in W or x, and an x of W's
    width mostly (0-3 rows, or a vector)."""
    layout = ("q8_0", "q4_0")[fdp.ConsumeIntInRange(0, 1)]
    rows, k = fdp.ConsumeIntInRange(0, 3), 32 * fdp.ConsumeIntInRange(0, 17)
    weft.manual_seed(fdp.ConsumeIntInRange(0, 1 << 16))
    w = weft.randn(rows, k) * FLOATS[fdp.ConsumeIntInRange(0, 4)]
    if rows and k and fdp.ConsumeIntInRange(0, 3) == 0:
        w[fdp.ConsumeIntInRange(0, rows - 1), fdp.ConsumeIntInRange(0, k - 1)] = \
            FLOATS[fdp.ConsumeIntInRange(0, len(FLOATS) - 1)]
    wq = weft.to_layout(w, layout)
    width = k if fdp.ConsumeIntInRange(0, 7) else fdp.ConsumeIntInRange(0, 40)
    x = weft.randn(width) if fdp.ConsumeIntInRange(0, 3) == 0 else \
        weft.randn(fdp.ConsumeIntInRange(0, 3), width)
    if x.numel() and fdp.ConsumeIntInRange(0, 3) == 0:
        x.view(-1)[fdp.ConsumeIntInRange(0, x.numel() - 1)] = \
            FLOATS[fdp.ConsumeIntInRange(0, len(FLOATS) - 1)]
    if VERBOSE:
        print("block call %s %r %r" % (layout, list(w.shape), list(x.shape)), file=sys.stderr,
              flush=True)
    if x.dim() == 1 and fdp.ConsumeBool():
        return weft.matmul(wq, x)
    bias = None if fdp.ConsumeBool() else weft.randn(rows if fdp.ConsumeIntInRange(0, 3) else 1)
    return weft.nn.functional.linear(x, wq, bias)


@atheris.instrument_func
def call(fdp):
    method = fdp.ConsumeBool()
    if method:
        fn = getattr(small_tensor(fdp), METHODS[fdp.ConsumeIntInRange(0, len(METHODS) - 1)])
    elif fdp.ConsumeIntInRange(0, 15) == 0:
        return block_call(fdp)
    elif MODULE_FUNCTIONS and fdp.ConsumeIntInRange(0, 7) == 0:
        fn = MODULE_FUNCTIONS[fdp.ConsumeIntInRange(0, len(MODULE_FUNCTIONS) - 1)]
        if fn.__module__.endswith("quantized.functional") and fdp.ConsumeIntInRange(0, 3):
            return quantized_call(fdp, fn)
    else:
        fn = getattr(weft, FUNCTIONS[fdp.ConsumeIntInRange(0, len(FUNCTIONS) - 1)])
    overloads = schemas(fn)
    args, kwargs = [], {}
    if overloads and fdp.ConsumeIntInRange(0, 7):
        # arguments after one of the operator's schemas: positional ones in
        # order (self is the tensor of a method; an _out form's out= is a
        # keyword), keyword-only ones by name, defaults now and then left out
        name, params = overloads[fdp.ConsumeIntInRange(0, len(overloads) - 1)]
        if name.endswith("_out") and params:
            kwargs["out"] = value_of_type(fdp, params[0][0])
            params = params[1:]
        if method and params:
            params = params[1:]
        by_name = False  # once one is left out or named, the rest are named
        for typ, arg, kwonly, has_default in params:
            if has_default and fdp.ConsumeBool():
                by_name = True
                continue
            by_name = by_name or kwonly or (has_default and fdp.ConsumeIntInRange(0, 3) == 0)
            if by_name:
                kwargs[arg] = value_of_type(fdp, typ)
            else:
                args.append(value_of_type(fdp, typ))
    else:
        args = [value(fdp) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    for _ in range(fdp.ConsumeIntInRange(0, 1) if fdp.ConsumeIntInRange(0, 7) == 0 else 0):
        kwargs[KEYWORDS[fdp.ConsumeIntInRange(0, len(KEYWORDS) - 1)]] = value(fdp)
    if VERBOSE:  # WEFT_FUZZ_VERBOSE=1: what an input (a saved finding) calls
        print("call %s%s %r %r" % ("Tensor." if method else "weft.", fn.__name__, args, kwargs),
              file=sys.stderr, flush=True)
    return fn(*args, **kwargs)


def use(result, depth=0):
    """Reads what came back, as a user would print it."""
    if isinstance(result, weft.Tensor):
        repr(result)
        if result.numel() <= 64:
            result.tolist()
        if result.requires_grad and result.numel() == 1 and result.dtype in (weft.float32,
                                                                             weft.float64):
            result.sum().backward()
    elif isinstance(result, (tuple, list)) and depth < 2:
        for r in result[:8]:
            use(r, depth + 1)


@atheris.instrument_func
def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    try:
        use(call(fdp))
    except EXPECTED:
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
