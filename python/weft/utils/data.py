"""weft.utils.data: Dataset, TensorDataset, samplers and DataLoader in
torch.utils.data's shape.

Batches are made by C operators: a TensorDataset batch is one index_select
per tensor (no per-sample Python work), any other dataset's samples are
joined by default_collate with one stack per field.  Shuffling draws a
permutation with weft.randperm from weft's default generator, so
weft.manual_seed(s) fixes the order of every epoch that follows.  Loading
runs in the calling process (num_workers=0).
"""
import bisect
import collections.abc
import numbers

from .. import _C


class Dataset:
    """A map-style dataset: __getitem__(index) and __len__."""

    def __getitem__(self, index):
        raise NotImplementedError("%s must define __getitem__" % type(self).__name__)

    def __add__(self, other):
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are tuples of the tensors' index-th rows (all tensors must
    have the same first dimension)."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, _C.Tensor):
                raise TypeError("TensorDataset: argument %d must be a weft.Tensor, not %s"
                                % (i, type(t).__name__))
            if t.dim() == 0 or t.shape[0] != tensors[0].shape[0]:
                raise RuntimeError("TensorDataset: size mismatch between tensors (argument %d has "
                                   "shape %s, argument 0 has %s)"
                                   % (i, list(t.shape), list(tensors[0].shape)))
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def _batch(self, indices):
        idx = _C.tensor(indices, dtype=_C.int64)
        return tuple(t.index_select(0, idx) for t in self.tensors)


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths):
    """Splits dataset into non-overlapping Subsets of the given lengths
    (fractions summing to 1 are turned into lengths) by one weft.randperm."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        sizes = [int(n * f) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _C.randperm(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out


# ------------------------------------------------------------------ samplers
class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new permutation each epoch, from weft's default generator
    (replacement=True: num_samples draws with replacement)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if generator is not None:
            raise TypeError("RandomSampler: generator objects are not supported yet; seed "
                            "weft's default generator with weft.manual_seed instead")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             "num_samples=%r" % (self.num_samples,))

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            return iter(_C.randint(0, n, [self.num_samples], dtype=_C.int64).tolist())
        order = []
        while len(order) < self.num_samples:
            order += _C.randperm(n).tolist()
        return iter(order[:self.num_samples])

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             "batch_size=%r" % (batch_size,))
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last=%r"
                             % (drop_last,))
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# -------------------------------------------------------------------- collate
def default_collate(batch):
    """Joins a list of samples: tensors are stacked (a new first
    dimension), numbers become a tensor, tuples, lists and dicts are joined
    field by field, strings and other objects are left as a list."""
    first = batch[0]
    if isinstance(first, _C.Tensor):
        return _C.stack(list(batch), 0)
    if isinstance(first, bool):
        return _C.tensor(list(batch), dtype=_C.bool)
    if isinstance(first, numbers.Integral):
        return _C.tensor(list(batch), dtype=_C.int64)
    if isinstance(first, numbers.Real):
        return _C.tensor(list(batch), dtype=_C.float64)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple
        return type(first)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        return tuple(fields) if isinstance(first, tuple) else fields
    return list(batch)


# ---------------------------------------------------------------- DataLoader
class DataLoader:
    """Iterates over a dataset in batches: DataLoader(dataset, batch_size=1,
    shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
    collate_fn=None, pin_memory=False, drop_last=False)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, generator=None, *, prefetch_factor=2,
                 persistent_workers=False):
        if num_workers != 0:
            raise ValueError("DataLoader: num_workers must be 0 (weft loads in the calling "
                             "process), got %r" % (num_workers,))
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = 0
        self.generator = generator
        self.pin_memory = pin_memory
        self._default_collate = collate_fn is None
        self.collate_fn = default_collate if collate_fn is None else collate_fn

    def __iter__(self):
        if self.batch_sampler is None:  # batch_size=None: samples one by one
            for idx in self.sampler:
                yield self.collate_fn(self.dataset[idx]) if not self._default_collate \
                    else self.dataset[idx]
            return
        fast = self._default_collate and isinstance(self.dataset, TensorDataset)
        for indices in self.batch_sampler:
            if fast:
                yield self.dataset._batch(indices)
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self):
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)
