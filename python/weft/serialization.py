"""weft.save and weft.load: state dicts (a dict of name -> Tensor) and single
tensors, in weft's parameter file (the format of weft_save_parameters,
include/weft/nn.h: magic, version, records, CRC-32) or, for a path ending in
.safetensors (or format="safetensors"), in the safetensors format the rest
of the ecosystem reads.  load tells the two apart by their first bytes.

A damaged file raises OSError naming the path and what is wrong, and
nothing is returned.  Both formats are little-endian; so is every host weft
builds for (a big-endian host gets a clear error)."""

import json
import os
import struct
import sys

from . import _C

__all__ = ["save", "load"]

Tensor = _C.Tensor

# The parameter file stores a dtype as its weft_dtype number (include/weft/weft.h)
_WEFT_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64", "complex64", "complex128"]
_MAGIC = b"WEFTPARM"
# the one name a file made from a single tensor holds (torch.save(t) habit)
_TENSOR_NAME = "__tensor__"

_FROM_SAFETENSORS = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32",
                     "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F32": "float32",
                     "F64": "float64"}
_MAX_HEADER = 100 << 20  # as the safetensors package limits its JSON header


def _check_host():
    if sys.byteorder != "little":
        raise RuntimeError("weft.save/weft.load: the file formats are little-endian and this host is not")


def _entries(obj):
    """(names, tensors) of a state dict or a single tensor."""
    if isinstance(obj, Tensor):
        return (_TENSOR_NAME,), (obj,)
    if not isinstance(obj, dict):
        raise TypeError("weft.save() saves a Tensor or a dict of str -> Tensor, not %s"
                        % type(obj).__name__)
    for name, t in obj.items():
        if not isinstance(name, str) or not isinstance(t, Tensor):
            raise TypeError("weft.save(): entry %r is %s -> %s; a state dict maps str -> Tensor"
                            % (name, type(name).__name__, type(t).__name__))
    return tuple(obj.keys()), tuple(obj.values())


def _format_of(path, format):
    if format is None:
        return "safetensors" if os.fspath(path).endswith(".safetensors") else "weft"
    if format not in ("weft", "safetensors"):
        raise ValueError("format must be 'weft' or 'safetensors', not %r" % (format,))
    return format


def save(obj, f, format=None):
    """save(obj, path, format=None): writes obj (a Tensor, a dict of str
    -> Tensor such as Module.state_dict(), or in weft's format a nesting of
    dicts, lists and tuples of tensors, ints, floats, bools, strings and
    None such as Optimizer.state_dict()) to path, through the C writers
    (weft_save_parameters, weft_save_safetensors).  Device and strided
    tensors are copied to the host first.  format: 'weft' (the parameter
    file, the default) or 'safetensors' (the default for a path ending in
    .safetensors).  TypeError for anything but tensors; RuntimeError for a
    complex tensor in safetensors (the format has no complex dtype);
    OSError when the file cannot be written (path is then untouched)."""
    _check_host()
    if _is_structured(obj):
        if _format_of(f, format) != "weft":
            raise TypeError("weft.save(): the safetensors format holds only a dict of str -> "
                            "Tensor; save nested objects (an optimizer's state_dict) in weft's "
                            "format")
        names, tensors = _flatten_structure(obj)
        _C._save_parameters(f, tensors, names)
        return
    names, tensors = _entries(obj)
    if _format_of(f, format) == "weft":
        _C._save_parameters(f, tensors, names)
    else:
        _C._save_safetensors(f, tensors, names)


def load(f, map_location=None, weights_only=None):
    """load(path, map_location=None): what save wrote: a dict of str ->
    Tensor (in the file's order), the Tensor that was saved alone, or the
    nested object (an optimizer's state_dict) rebuilt as it was saved.
    Tensors are loaded on the CPU, or moved to map_location (a device or
    'cuda:0'-style string).  weights_only is accepted for torch's habit
    (a weft file never holds anything but tensors).  OSError for a file
    that is missing, truncated, damaged (weft: the checksum; both: the
    structure) or of neither format."""
    _check_host()
    with open(f, "rb") as file:
        head = file.read(9)
    if head.startswith(_MAGIC):
        entries = _load_weft(f)
    elif len(head) == 9 and head[8:9] == b"{":
        entries = _load_safetensors(f)
    else:
        raise OSError("%s: neither a weft parameter file nor a safetensors file" % os.fspath(f))
    if _STRUCTURE in entries:
        structure = entries.pop(_STRUCTURE)
        if map_location is not None:
            entries = {k: v.to(map_location) for k, v in entries.items()}
        return _unflatten_structure(f, structure, entries)
    if map_location is not None:
        entries = {k: v.to(map_location) for k, v in entries.items()}
    if list(entries) == [_TENSOR_NAME]:
        return entries[_TENSOR_NAME]
    return entries


def _load_weft(path):
    # The index (names, dtypes, shapes) is read here to make the tensors;
    # weft_load_parameters then checks the whole file (length, checksum,
    # each record) and fills them.  An index that does not parse is left to
    # it too, so the error is the C reader's exact one.
    with open(path, "rb") as file:
        data = file.read()
    try:
        names, tensors = _weft_index(data)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        _C._load_parameters(path, (), ())  # raises OSError saying what is wrong
        raise OSError("%s: damaged parameter file" % os.fspath(path))
    _C._load_parameters(path, tuple(tensors), tuple(names))
    return dict(zip(names, tensors))


def _weft_index(data):
    version, count = struct.unpack_from("<II", data, 8)
    if version != 1:
        raise ValueError("version")
    pos = 16
    names, tensors = [], []
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + length].decode()
        pos += 4 + length
        dtype, ndim = struct.unpack_from("<II", data, pos)
        if dtype >= len(_WEFT_DTYPES) or ndim > 64:
            raise ValueError("record")
        shape = struct.unpack_from("<%dq" % ndim, data, pos + 8)
        pos += 8 + 8 * ndim
        numel = 1
        for s in shape:
            if s < 0:
                raise ValueError("size")
            numel *= s
        dt = getattr(_C, _WEFT_DTYPES[dtype])
        pos += numel * dt.itemsize
        if pos > len(data):
            raise ValueError("truncated")
        names.append(name)
        tensors.append(_C.empty(shape, dtype=dt))
    return names, tensors


def _load_safetensors(path):
    name = os.fspath(path)
    with open(path, "rb") as file:
        data = file.read()

    def damaged(why):
        return OSError("%s: damaged safetensors file: %s" % (name, why))

    (n,) = struct.unpack_from("<Q", data, 0)
    if n > _MAX_HEADER or 8 + n > len(data):
        raise damaged("its header of %d bytes does not fit in the file of %d bytes" % (n, len(data)))
    try:
        header = json.loads(data[8:8 + n].decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise damaged("the header is not JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise damaged("the header is not a JSON object")
    header.pop("__metadata__", None)
    base = 8 + n
    size = len(data) - base
    spans = []
    out = {}
    for key, info in header.items():
        try:
            code, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise damaged("entry %r lacks dtype, shape or data_offsets" % key) from None
        if code not in _FROM_SAFETENSORS:
            raise damaged("entry %r has dtype %r, which weft does not read" % (key, code))
        if (not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape)
                or not all(isinstance(o, int) for o in (begin, end))):
            raise damaged("entry %r has a bad shape or offsets" % key)
        dt = getattr(_C, _FROM_SAFETENSORS[code])
        numel = 1
        for s in shape:
            numel *= s
        if not 0 <= begin <= end <= size or end - begin != numel * dt.itemsize:
            raise damaged("entry %r: offsets [%d, %d) do not hold %d elements of %s within %d bytes"
                          % (key, begin, end, numel, dt, size))
        spans.append((begin, end, key))
        out[key] = _C._from_bytes(data, base + begin, dt, tuple(shape))
    # the data is covered exactly, without overlaps or holes (the format's rule)
    spans.sort()
    at = 0
    for begin, end, key in spans:
        if begin != at:
            raise damaged("entry %r starts at %d, where %d was expected" % (key, begin, at))
        at = end
    if at != size:
        raise damaged("%d bytes of data follow the last entry" % (size - at))
    return out


# ------------------------------------------------------- nested objects
# An optimizer's state_dict nests dicts (int keys), lists and tuples around
# tensors and numbers.  It is saved as an ordinary version-1 parameter file
# (so the format, its checksum and the C reader are unchanged, and older
# files load as before): each tensor an entry named by its path
# ("state.0.exp_avg"), plus one uint8 entry "__structure__" holding UTF-8
# JSON of the object with every container tagged ({"dict": [[key, value],
# ...]}, {"list": [...]}, {"tuple": [...]}) and every tensor a reference
# ({"tensor": "state.0.exp_avg"}); numbers, strings, booleans and None are
# JSON's own (floats round-trip exactly; inf and nan as JSON's extension).
_STRUCTURE = "__structure__"
_MAX_NAME = 4096


def _is_structured(obj):
    """True for what the plain formats do not hold: anything but a tensor
    or a flat dict of str -> Tensor."""
    if isinstance(obj, Tensor):
        return False
    if isinstance(obj, dict) and all(isinstance(k, str) and isinstance(v, Tensor)
                                     for k, v in obj.items()):
        return _STRUCTURE in obj
    return isinstance(obj, (dict, list, tuple))


def _flatten_structure(obj):
    tensors = {}

    def name_for(path):
        name = ".".join(path) or "tensor"
        if name in tensors or name == _STRUCTURE or len(name.encode()) > _MAX_NAME:
            name = "tensor.%d" % len(tensors)
            while name in tensors:
                name += "_"
        return name

    def encode(o, path, active):
        if isinstance(o, Tensor):
            name = name_for(path)
            tensors[name] = o
            return {"tensor": name}
        if o is None or isinstance(o, (bool, str, int, float)):
            return o
        if isinstance(o, (dict, list, tuple)):
            if id(o) in active:
                raise ValueError("weft.save(): %s contains itself" % (".".join(path) or "the object"))
            active.add(id(o))
            if isinstance(o, dict):
                out = {"dict": [[encode(k, path + ["<key>"], active),
                                 encode(v, path + [str(k)], active)] for k, v in o.items()]}
            else:
                if isinstance(o, tuple) and type(o) is not tuple:  # a namedtuple's fields
                    raise TypeError("weft.save(): %s is a %s; weft's format holds plain tuples"
                                    % (".".join(path) or "the object", type(o).__name__))
                out = {"tuple" if isinstance(o, tuple) else "list":
                       [encode(v, path + [str(i)], active) for i, v in enumerate(o)]}
            active.discard(id(o))
            return out
        raise TypeError("weft.save(): %s is a %s; weft's format holds tensors, dicts, lists, "
                        "tuples, ints, floats, bools, strings and None"
                        % (".".join(path) or "the object", type(o).__name__))

    tree = encode(obj, [], set())
    blob = json.dumps(tree, separators=(",", ":")).encode()
    names = tuple(tensors) + (_STRUCTURE,)
    values = tuple(tensors.values()) + (_C._from_bytes(blob, 0, _C.uint8, (len(blob),)),)
    return names, values


def _unflatten_structure(path, structure, tensors):
    def damaged(why):
        return OSError("%s: damaged parameter file: its structure entry %s"
                       % (os.fspath(path), why))

    if structure.dtype != _C.uint8 or structure.dim() != 1:
        raise damaged("is not a uint8 vector")
    try:
        tree = json.loads(_C._to_bytes(structure).decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise damaged("is not JSON (%s)" % e) from None
    used = set()

    def decode(o):
        if o is None or isinstance(o, (bool, str, int, float)):
            return o
        if isinstance(o, dict) and len(o) == 1:
            (tag, body), = o.items()
            if tag == "tensor" and isinstance(body, str):
                if body not in tensors:
                    raise damaged("refers to a tensor %r the file does not hold" % body)
                if body in used:
                    raise damaged("refers to the tensor %r twice" % body)
                used.add(body)
                return tensors[body]
            if tag in ("list", "tuple") and isinstance(body, list):
                items = [decode(v) for v in body]
                return items if tag == "list" else tuple(items)
            if tag == "dict" and isinstance(body, list) and \
                    all(isinstance(kv, list) and len(kv) == 2 for kv in body):
                out = {}
                for k, v in body:
                    key = decode(k)
                    try:
                        out[key] = decode(v)
                    except TypeError:
                        raise damaged("has an unhashable key") from None
                return out
        raise damaged("holds %.60r, which is not an encoded value" % (o,))

    obj = decode(tree)
    if used != set(tensors):
        raise damaged("leaves tensors unreferenced: %s" % sorted(set(tensors) - used))
    return obj
