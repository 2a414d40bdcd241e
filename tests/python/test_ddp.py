"""weft.nn.parallel.DistributedDataParallel under mpirun (issue 18), run by
tests/dist.sh with 2 ranks: each rank trains a DDP replica on its shard of
every global batch and, beside it, a plain model on the whole batch; they
must end with the same parameters.  Numbered TAP into argv[1]/rank<R>.tap."""
import math
import os
import sys
import traceback

import weft
import weft.distributed as dist
import weft.nn as nn
from weft.nn.parallel import DistributedDataParallel

dist.init_process_group(backend="mpi")
rank, size = dist.get_rank(), dist.get_world_size()
sys.stdout = open(os.path.join(sys.argv[1], "rank%d.tap" % rank), "w")
count = failed = 0
GLOBAL = 12


def test(fn):
    global count, failed
    count += 1
    try:
        fn()
        print("ok %d - %s" % (count, fn.__doc__))
    except Exception:
        failed += 1
        print("not ok %d - %s" % (count, fn.__doc__))
        for line in traceback.format_exc().splitlines():
            print("# " + line)
    sys.stdout.flush()


def data(step, start, n):
    x = [[math.sin((start + i + step * GLOBAL) * 7.0 + j) for j in range(6)] for i in range(n)]
    y = [[math.cos(start + i + step * GLOBAL + 3.0 * k) for k in range(3)] for i in range(n)]
    return weft.tensor(x), weft.tensor(y)


def model():
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


weft.manual_seed(100 + rank)  # different replicas until DDP broadcasts rank 0's
replica, reference = model(), model()
ddp = DistributedDataParallel(replica)
with weft.no_grad():
    for a, b in zip(reference.parameters(), replica.parameters()):
        a.copy_(b)


def max_diff():
    return max((a - b).abs().max().item() for a, b in zip(replica.parameters(), reference.parameters()))


def train(steps, micro=1):
    o1 = weft.optim.SGD(replica.parameters(), lr=0.1)
    o2 = weft.optim.SGD(reference.parameters(), lr=0.1)
    shard, gpart = GLOBAL // size, GLOBAL // micro
    part = shard // micro
    for s in range(steps):
        o1.zero_grad()
        o2.zero_grad()
        for k in range(micro):
            x, y = data(s, k * gpart + rank * part, part)
            if k < micro - 1:
                with ddp.no_sync():
                    nn.functional.mse_loss(ddp(x), y).backward()
            else:
                nn.functional.mse_loss(ddp(x), y).backward()
            x, y = data(s, k * gpart, gpart)
            nn.functional.mse_loss(reference(x), y).backward()
        o1.step()
        o2.step()


@test
def same_start():
    """DDP broadcasts rank 0's parameters"""
    w = replica[0].weight.clone()
    lo, hi = w.clone(), w.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    assert (hi - lo).abs().max().item() == 0


@test
def same_parameters():
    """N ranks on shards end with the parameters of one process on the whole batch"""
    train(3)
    assert max_diff() < 1e-5, max_diff()


@test
def no_sync():
    """no_sync over 2 micro-batches gives the same parameters too"""
    train(2, micro=2)
    assert max_diff() < 1e-5, max_diff()


@test
def unused():
    """a parameter without gradient is an error at the next forward, naming it"""
    x, y = data(0, 0, 2)
    replica[0](x).sum().backward()
    try:
        ddp(x)
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "2.weight" in str(e), str(e)
    train(1)
    assert max_diff() < 1e-5, max_diff()


dist.destroy_process_group()
print("1..%d" % count)
sys.stdout.flush()
sys.exit(1 if failed else 0)
