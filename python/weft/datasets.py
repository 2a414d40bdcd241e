"""weft.datasets: FashionMNIST in torchvision.datasets' shape, read from the
IDX files that Debian's dataset-fashion-mnist package installs (or any
directory holding the four files, gzip-compressed or not).

The files are decoded by libweft's weft_read_idx, the reader weft-train
uses, so Python and C see the same bytes.  There is no PIL here: a sample's
image is a uint8 tensor [28, 28] (a row of .data), which the transform, if
any, receives.  Nothing is downloaded.
"""
import os

from . import _C
from .utils.data import Dataset

__all__ = ["FashionMNIST", "DEFAULT_ROOT"]

# where Debian's dataset-fashion-mnist puts the files
DEFAULT_ROOT = "/usr/share/datasets/fashion-mnist"


def _find(root, stem):
    """The file for stem ("train-images-idx3-ubyte") under root, as the
    Debian package lays it out (root/stem.gz) or as torchvision does
    (root/FashionMNIST/raw/stem[.gz]); None when there is none."""
    for folder in (root, os.path.join(root, "FashionMNIST", "raw")):
        for name in (stem + ".gz", stem):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return path
    return None


class FashionMNIST(Dataset):
    """Fashion-MNIST: 60,000 training and 10,000 test images of 28x28
    pixels in 10 classes.

    root: the directory with the IDX files (None: Debian's
    /usr/share/datasets/fashion-mnist); train: the training split, else the
    test split; transform(image) and target_transform(label) are applied by
    __getitem__; download must stay False: weft does not fetch data (the
    error says how to install it).  .data is uint8 [N, 28, 28], .targets
    int64 [N]."""

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]

    def __init__(self, root=None, train=True, transform=None, target_transform=None,
                 download=False):
        if root is None:
            root = DEFAULT_ROOT
        if not isinstance(root, (str, bytes, os.PathLike)):
            raise TypeError("FashionMNIST: root must be a path, not %s" % type(root).__name__)
        self.root = os.fspath(root)
        self.train = bool(train)
        self.transform = transform
        self.target_transform = target_transform
        prefix = "train" if self.train else "t10k"
        stems = (prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte")
        paths = [_find(self.root, s) for s in stems]
        if None in paths:
            missing = [s for s, p in zip(stems, paths) if p is None]
            how = ("weft does not download datasets; " if download else "") + \
                "install them with `apt-get install dataset-fashion-mnist` (root=None reads " + \
                DEFAULT_ROOT + ") or pass the directory that holds them"
            raise RuntimeError("FashionMNIST: dataset not found: no %s(.gz) in %s; %s"
                               % (" or ".join(missing), self.root, how))
        images = _C._read_idx(paths[0])
        labels = _C._read_idx(paths[1])
        if images.dim() != 3:
            raise RuntimeError("FashionMNIST: %s holds a %d-dimensional array, images are 3"
                               % (paths[0], images.dim()))
        if labels.dim() != 1:
            raise RuntimeError("FashionMNIST: %s holds a %d-dimensional array, labels are 1"
                               % (paths[1], labels.dim()))
        if labels.shape[0] != images.shape[0]:
            raise RuntimeError("FashionMNIST: %d images in %s but %d labels in %s"
                               % (images.shape[0], paths[0], labels.shape[0], paths[1]))
        self.data = images
        self.targets = labels.to(dtype=_C.int64)

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        image, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self):
        return ("Dataset FashionMNIST\n    Number of datapoints: %d\n    Root location: %s\n"
                "    Split: %s" % (len(self), self.root, "Train" if self.train else "Test"))
