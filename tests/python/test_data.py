"""weft.utils.data: DataLoader's batches and order (sequential, shuffled
under weft.manual_seed, drop_last), default_collate of tensors, numbers,
tuples, lists, dicts and namedtuples (its structure and dtypes compared
with torch's where torch is installed), TensorDataset's batched path,
ConcatDataset, Subset, random_split and the errors."""
import collections

import weft
from taplib import done, eq, raises, test
from torch_peer import need_torch, to_torch
from weft.utils.data import (DataLoader, Dataset, Subset, TensorDataset,
                             default_collate, random_split)


def order(loader):
    return [i for batch in loader for i in batch[0].tolist()]


def dataset(n=10):
    return TensorDataset(weft.arange(n), weft.arange(n).to(weft.float32).unsqueeze(1) * 2)


@test
def sequential_batches():
    """DataLoader: batches in order, the last one short unless drop_last"""
    ds = dataset()
    batches = list(DataLoader(ds, batch_size=4))
    eq([b[0].tolist() for b in batches], [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]])
    eq(batches[0][1].shape, (4, 1))
    eq(batches[2][1].tolist(), [[16.0], [18.0]])
    eq(len(DataLoader(ds, batch_size=4)), 3)
    eq(len(DataLoader(ds, batch_size=4, drop_last=True)), 2)
    eq([b[0].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)],
       [[0, 1, 2, 3], [4, 5, 6, 7]])


@test
def shuffle_under_seed():
    """DataLoader(shuffle=True): a permutation each epoch, the same under the same weft.manual_seed"""
    ds = dataset(50)
    loader = DataLoader(ds, batch_size=8, shuffle=True)
    weft.manual_seed(7)
    first = order(loader)
    second = order(loader)
    eq(sorted(first), list(range(50)))
    eq(sorted(second), list(range(50)))
    if first == list(range(50)) or first == second:
        raise AssertionError("shuffle=True did not shuffle, or repeated an epoch's order")
    weft.manual_seed(7)
    eq(order(loader), first, "same seed, same first epoch")
    eq(order(loader), second, "same seed, same second epoch")
    weft.manual_seed(8)
    if order(loader) == first:
        raise AssertionError("another seed gave the same order")
    # rows stay together: the second tensor follows the first
    weft.manual_seed(7)
    for idx, doubled in DataLoader(ds, batch_size=8, shuffle=True):
        eq([v[0] for v in doubled.tolist()], [2.0 * i for i in idx.tolist()])


@test
def batched_path_equals_per_sample():
    """TensorDataset batches (one index_select per tensor) equal per-sample default_collate"""
    ds = dataset(13)
    weft.manual_seed(3)
    fast = [[t.tolist() for t in b] for b in DataLoader(ds, batch_size=5, shuffle=True)]
    weft.manual_seed(3)
    slow = [[t.tolist() for t in b]
            for b in DataLoader(ds, batch_size=5, shuffle=True, collate_fn=default_collate)]
    eq(fast, slow)


Point = collections.namedtuple("Point", ["x", "label"])


class DictSet(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"image": weft.full([2, 2], float(i)), "label": i, "weight": i / 2,
                "pair": (weft.tensor([i, -i]), [i, i + 1]), "name": "s%d" % i,
                "point": Point(weft.tensor(float(i)), i % 2)}


@test
def collate_structures():
    """default_collate: tensors stacked; ints int64, floats float64; tuples, lists, dicts by field"""
    batch = next(iter(DataLoader(DictSet(), batch_size=3)))
    eq(sorted(batch), ["image", "label", "name", "pair", "point", "weight"])
    eq(batch["image"].shape, (3, 2, 2))
    eq(batch["label"].tolist(), [0, 1, 2])
    eq(str(batch["label"].dtype), "weft.int64")
    eq(str(batch["weight"].dtype), "weft.float64")
    eq(batch["weight"].tolist(), [0.0, 0.5, 1.0])
    eq(type(batch["pair"]), tuple)
    eq(batch["pair"][0].tolist(), [[0, 0], [1, -1], [2, -2]])
    eq(type(batch["pair"][1]), list)
    eq([t.tolist() for t in batch["pair"][1]], [[0, 1, 2], [1, 2, 3]])
    eq(batch["name"], ["s0", "s1", "s2"])
    eq(type(batch["point"]).__name__, "Point")
    eq(batch["point"].label.tolist(), [0, 1, 0])


@test
def collate_like_torch():
    """default_collate: the same structure, shapes and values as torch's for the same samples"""
    need_torch()
    from torch.utils.data import default_collate as torch_collate
    samples = [DictSet()[i] for i in range(4)]
    ours = default_collate(samples)
    tsamples = [{k: (to_torch(v) if isinstance(v, weft.Tensor) else v) for k, v in s.items()}
                for s in samples]
    for s in tsamples:
        s["pair"] = (to_torch(s["pair"][0]), s["pair"][1])
        s["point"] = Point(to_torch(s["point"].x), s["point"].label)
    theirs = torch_collate(tsamples)
    for key in ("image", "label", "weight"):
        eq(ours[key].tolist(), theirs[key].tolist(), key)
        eq(str(ours[key].dtype).split(".")[1], str(theirs[key].dtype).split(".")[1], key)
    eq(ours["pair"][0].tolist(), theirs["pair"][0].tolist())
    eq([t.tolist() for t in ours["pair"][1]], [t.tolist() for t in theirs["pair"][1]])
    eq(ours["name"], theirs["name"])
    eq(ours["point"].x.tolist(), theirs["point"].x.tolist())


@test
def datasets_compose():
    """ConcatDataset, Subset, random_split and batch_size=None"""
    a, b = dataset(3), dataset(4)
    both = a + b
    eq(len(both), 7)
    eq([both[i][0].item() for i in range(7)], [0, 1, 2, 0, 1, 2, 3])
    eq(both[-1][0].item(), 3)
    sub = Subset(dataset(10), [9, 2])
    eq([sub[i][0].item() for i in range(2)], [9, 2])
    weft.manual_seed(0)
    parts = random_split(dataset(10), [7, 3])
    eq([len(p) for p in parts], [7, 3])
    eq(sorted(parts[0].indices + parts[1].indices), list(range(10)))
    eq([len(p) for p in random_split(dataset(10), [0.5, 0.5])], [5, 5])
    samples = list(DataLoader(dataset(3), batch_size=None))
    eq([s[0].item() for s in samples], [0, 1, 2])


@test
def data_errors():
    """bad arguments: clear errors naming the class and argument"""
    raises(RuntimeError, TensorDataset, weft.zeros([3]), weft.zeros([4]), contains="size mismatch")
    raises(TypeError, TensorDataset, [1, 2], contains="must be a weft.Tensor")
    raises(ValueError, DataLoader, dataset(), batch_size=0, contains="batch_size")
    raises(ValueError, DataLoader, dataset(), num_workers=2, contains="num_workers")
    raises(TypeError, DataLoader, dataset(), shuffle=True, generator=object(),
           contains="weft.manual_seed")
    raises(ValueError, random_split, dataset(5), [2, 2], contains="Sum of input lengths")


done()
