"""weft.distributed under mpirun (issue 18), run by tests/dist.sh with 2
ranks: torch.distributed's names on the mpi backend, each result checked
against values computed by hand.  Each rank writes numbered TAP into
argv[1]/rank<R>.tap, as tests/test_dist.c does."""
import datetime
import os
import sys
import traceback

import weft
import weft.distributed as dist

dist.init_process_group(backend="mpi", timeout=datetime.timedelta(seconds=60))
rank, size = dist.get_rank(), dist.get_world_size()
sys.stdout = open(os.path.join(sys.argv[1], "rank%d.tap" % rank), "w")
count = 0
failed = 0


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


@test
def world():
    """init_process_group, get_rank, get_world_size, is_initialized"""
    assert dist.is_initialized() and 0 <= rank < size and size == int(os.environ["OMPI_COMM_WORLD_SIZE"])
    assert dist.get_backend() == "mpi"


@test
def all_reduce_ops():
    """all_reduce with every ReduceOp on float32, int64 and a strided view"""
    base = weft.tensor([1.0, 2.0, 3.0]) * (rank + 1)
    for op, want in [(dist.ReduceOp.SUM, sum(range(1, size + 1))),
                     (dist.ReduceOp.MAX, size), (dist.ReduceOp.MIN, 1),
                     (dist.ReduceOp.AVG, sum(range(1, size + 1)) / size)]:
        t = base.clone()
        assert dist.all_reduce(t, op=op) is None
        assert t.tolist() == [want * k for k in (1.0, 2.0, 3.0)], (op, t.tolist())
    p = weft.tensor([rank + 2], dtype=weft.int64)
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    prod = 1
    for r in range(size):
        prod *= r + 2
    assert p.tolist() == [prod]
    m = weft.zeros(4, 3)
    m.fill_(rank + 1)
    col = m.t()[1]
    dist.all_reduce(col)
    assert m[:, 1].tolist() == [sum(range(1, size + 1))] * 4 and m[0, 0].item() == rank + 1


@test
def broadcast_gather():
    """broadcast, all_gather, all_gather_into_tensor, reduce_scatter"""
    t = weft.full((2,), float(rank))
    dist.broadcast(t, src=size - 1)
    assert t.tolist() == [size - 1.0] * 2
    outs = [weft.zeros(2) for _ in range(size)]
    dist.all_gather(outs, weft.full((2,), rank * 10.0))
    assert [o.tolist() for o in outs] == [[r * 10.0] * 2 for r in range(size)]
    flat = weft.zeros(2 * size)
    dist.all_gather_into_tensor(flat, weft.full((2,), rank + 0.5))
    assert flat.tolist() == [r + 0.5 for r in range(size) for _ in range(2)]
    out = weft.zeros(3)
    dist.reduce_scatter(out, [weft.full((3,), float(r * 100 + rank)) for r in range(size)])
    assert out.tolist() == [rank * 100.0 * size + sum(range(size))] * 3


@test
def async_and_p2p():
    """async_op works, barrier, send/recv and isend/irecv around a ring"""
    t = weft.ones(1000)
    w = dist.all_reduce(t, async_op=True)
    assert isinstance(w, dist.Work) and w.wait() and w.is_completed()
    assert t[999].item() == size
    dist.barrier()
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = weft.zeros(3)
    s = dist.isend(weft.full((3,), float(rank)), nxt, tag=5)
    r = dist.irecv(got, prv, tag=5)
    r.wait()
    s.wait()
    assert got.tolist() == [float(prv)] * 3
    if rank == 0:
        dist.send(weft.tensor([7, 8], dtype=weft.int32), 1, tag=2)
    elif rank == 1:
        back = weft.zeros(2, dtype=weft.int32)
        assert dist.recv(back, 0, tag=2) == 0 and back.tolist() == [7, 8]


@test
def groups():
    """new_group: members reduce among themselves, a non-member is refused"""
    g = dist.new_group([size - 1, 0])
    t = weft.tensor([float(rank)])
    member = rank in (0, size - 1)
    if member:
        dist.all_reduce(t, group=g)
        assert t.item() == size - 1 and dist.get_rank(g) == (0 if rank == size - 1 else 1)
    else:
        try:
            dist.all_reduce(t, group=g)
            raise AssertionError("a non-member's all_reduce succeeded")
        except RuntimeError as e:
            assert "not a member" in str(e), str(e)


@test
def errors():
    """mismatched dtypes across ranks raise RuntimeError on every rank"""
    t = weft.zeros(3, dtype=weft.float32 if rank == 0 else weft.float64)
    try:
        dist.all_reduce(t)
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "rank 0 passed float32 but rank 1 passed float64" in str(e), str(e)


dist.destroy_process_group()
print("1..%d" % count)
sys.stdout.flush()
sys.exit(1 if failed else 0)
