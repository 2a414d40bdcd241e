"""weft.datasets.FashionMNIST against the raw IDX files, decoded here
independently with Python's gzip and struct (not libweft's reader): the
counts, shapes, dtypes, first and last images and labels of both splits;
the torchvision-style layout and plain files; transforms; and the errors
(missing files, download=True, a damaged file of each kind)."""
import gzip
import os
import struct
import tempfile

import weft
from taplib import Skip, done, eq, raises, test
from weft.datasets import DEFAULT_ROOT, FashionMNIST

ROOT = os.environ.get("WEFT_FASHION_MNIST", DEFAULT_ROOT)


def have_data():
    if not os.path.isfile(os.path.join(ROOT, "t10k-labels-idx1-ubyte.gz")):
        raise Skip("no Fashion-MNIST in %s (apt-get install dataset-fashion-mnist)" % ROOT)


def raw(name):
    """(sizes, payload bytes) of an IDX file, decoded by hand."""
    with gzip.open(os.path.join(ROOT, name), "rb") as f:
        blob = f.read()
    zero, kind, ndim = struct.unpack(">HBB", blob[:4])
    assert zero == 0 and kind == 0x08, (zero, kind)
    sizes = struct.unpack(">%dI" % ndim, blob[4:4 + 4 * ndim])
    return sizes, blob[4 + 4 * ndim:]


def check_split(train):
    prefix = "train" if train else "t10k"
    isizes, ibytes = raw(prefix + "-images-idx3-ubyte.gz")
    lsizes, lbytes = raw(prefix + "-labels-idx1-ubyte.gz")
    ds = FashionMNIST(ROOT, train=train)
    n = 60000 if train else 10000
    eq(len(ds), n, "length")
    eq(isizes, (n, 28, 28))
    eq(lsizes, (n,))
    eq(tuple(ds.data.shape), (n, 28, 28))
    eq(ds.data.dtype, weft.uint8)
    eq(tuple(ds.targets.shape), (n,))
    eq(ds.targets.dtype, weft.int64)
    for i in (0, 1, n // 2, n - 1):
        image, label = ds[i]
        want = list(ibytes[i * 784:(i + 1) * 784])
        eq(sum(image.tolist(), []), want, "image %d" % i)
        eq(label, lbytes[i], "label %d" % i)
    eq(ds.targets.tolist(), list(lbytes), "every label")
    # every pixel: the sums per image agree with the raw bytes
    sums = ds.data.to(dtype=weft.int64).sum(dim=(1, 2)).tolist()
    eq(sums[:100] + sums[-100:],
       [sum(ibytes[i * 784:(i + 1) * 784]) for i in list(range(100)) + list(range(n - 100, n))])
    eq(sum(sums), sum(ibytes), "the sum of every pixel")


@test
def train_split():
    """FashionMNIST(train=True): 60000 images [28, 28] uint8 and int64 labels, equal to the raw file"""
    have_data()
    check_split(True)


@test
def test_split():
    """FashionMNIST(train=False): 10000 images and labels, equal to the raw file"""
    have_data()
    check_split(False)


@test
def default_root_and_transforms():
    """root=None reads Debian's directory; transform and target_transform are applied per sample"""
    have_data()
    if ROOT != DEFAULT_ROOT:
        raise Skip("the data is not in " + DEFAULT_ROOT)
    ds = FashionMNIST(train=False, transform=lambda im: im.float() / 255,
                      target_transform=lambda y: FashionMNIST.classes[y])
    image, name = ds[0]
    eq(image.dtype, weft.float32)
    eq(image.max().item() <= 1.0, True)
    eq(name, FashionMNIST.classes[int(ds.targets[0])])
    eq(FashionMNIST.classes[9], "Ankle boot")
    eq(ds.class_to_idx["Trouser"], 1)
    eq("Number of datapoints: 10000" in repr(ds), True)


def write_idx(path, sizes, payload, compress=True, kind=0x08):
    blob = struct.pack(">HBB", 0, kind, len(sizes)) + struct.pack(">%dI" % len(sizes), *sizes)
    blob += payload
    if compress:
        with gzip.open(path + ".gz", "wb") as f:
            f.write(blob)
    else:
        with open(path, "wb") as f:
            f.write(blob)


@test
def torchvision_layout_plain_files():
    """root/FashionMNIST/raw with uncompressed files (torchvision's layout) reads the same"""
    with tempfile.TemporaryDirectory() as d:
        raw_dir = os.path.join(d, "FashionMNIST", "raw")
        os.makedirs(raw_dir)
        pixels = (bytes(range(256)) * 7)[:2 * 784]
        write_idx(os.path.join(raw_dir, "t10k-images-idx3-ubyte"), (2, 28, 28), pixels, False)
        write_idx(os.path.join(raw_dir, "t10k-labels-idx1-ubyte"), (2,), bytes([3, 9]), False)
        ds = FashionMNIST(d, train=False)
        eq(len(ds), 2)
        eq(ds.targets.tolist(), [3, 9])
        eq(sum(ds[1][0].tolist(), []), list(pixels[784:]))


@test
def missing_files():
    """no files: RuntimeError naming the file, the directory and the Debian package; download=True says weft does not download"""
    with tempfile.TemporaryDirectory() as d:
        e = raises(RuntimeError, FashionMNIST, d, contains="dataset-fashion-mnist")
        eq("train-images-idx3-ubyte" in str(e) and d in str(e), True, str(e))
        raises(RuntimeError, FashionMNIST, d, train=False, download=True,
               contains="does not download")
    raises(TypeError, FashionMNIST, 3, contains="root must be a path")


@test
def damaged_files():
    """damaged IDX files raise OSError/RuntimeError naming the path and the fault; nothing half-loaded"""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x-idx1-ubyte")
        write_idx(p, (10,), bytes(9))  # one byte short
        raises(OSError, weft._C._read_idx, p + ".gz", contains="truncated")
        write_idx(p, (10,), bytes(11))  # one byte too many
        raises(OSError, weft._C._read_idx, p + ".gz", contains="more data")
        write_idx(p, (10,), bytes(10), kind=0x0D)  # float32 elements
        raises(RuntimeError, weft._C._read_idx, p + ".gz", contains="element type 0x0d")
        with open(p, "wb") as f:
            f.write(b"\x1f\x8b\x08\x00garbage that is not deflate data" * 4)
        raises(OSError, weft._C._read_idx, p, contains=p)
        with open(p, "wb") as f:
            f.write(b"PK\x03\x04 not idx")
        raises(OSError, weft._C._read_idx, p, contains="not an IDX file")
        write_idx(p, (0xFFFFFFFF, 0xFFFFFFFF), b"", compress=False)
        raises(OSError, weft._C._read_idx, p, contains="damaged")
        raises(OSError, weft._C._read_idx, os.path.join(d, "absent"), contains="cannot open")
        # labels that disagree with the images in count
        write_idx(os.path.join(d, "train-images-idx3-ubyte"), (2, 28, 28), bytes(2 * 784))
        write_idx(os.path.join(d, "train-labels-idx1-ubyte"), (3,), bytes(3))
        raises(RuntimeError, FashionMNIST, d, contains="2 images")


done()
