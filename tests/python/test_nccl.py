"""weft.distributed on the nccl backend (issue 18), in a world of one
without a launcher: init_process_group(backend="nccl") reaches
libweftdist-nccl.so and the collectives run on CUDA tensors, each result
checked against values written here.  Without the backend built, or
without a GPU, the GPU parts SKIP with the reason; without a GPU the
backend must still refuse to start with a message that says nccl."""
import os

import weft
import weft.distributed as dist
from taplib import Skip, done, eq, raises, test

for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
            "PMI_RANK", "PMI_SIZE", "WEFT_NCCL_ID_FILE"):
    os.environ.pop(var, None)

built = any(os.path.exists(os.path.join(d, "libweftdist-nccl.so"))
            for d in os.environ.get("WEFT_PLUGIN_PATH", "").split(":") if d)
gpu = "cuda:0" in weft.devices()
why_not = None if built and gpu else (
    "libweftdist-nccl.so was not built (configure found no NCCL)" if not built
    else "weft sees no CUDA device")


def need_gpu():
    if why_not:
        raise Skip(why_not)


@test
def refuses_without_gpu():
    """without a GPU, init_process_group(backend="nccl") fails naming nccl"""
    if not built:
        raise Skip("libweftdist-nccl.so was not built")
    if gpu:
        raise Skip("there is a GPU: the world starts (next tests)")
    raises(Exception, dist.init_process_group, backend="nccl", contains="nccl")


@test
def init():
    """init_process_group(backend="nccl"): a world of one"""
    need_gpu()
    dist.init_process_group(backend="nccl")
    eq(dist.get_backend(), "nccl")
    eq(dist.get_world_size(), 1)
    eq(dist.get_rank(), 0)


@test
def collectives():
    """all_reduce (sum, avg, max), broadcast, all_gather, reduce_scatter, barrier on cuda"""
    need_gpu()
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX):
        t = weft.tensor([1.0, -2.0, 3.5]).to("cuda")
        assert dist.all_reduce(t, op=op) is None
        eq(t.to("cpu").tolist(), [1.0, -2.0, 3.5], "all_reduce %s" % op)
    b = weft.tensor([7, 8, 9], dtype=weft.int64).to("cuda")
    dist.broadcast(b, 0)
    eq(b.to("cpu").tolist(), [7, 8, 9], "broadcast")
    out = [weft.zeros(2, 2).to("cuda")]
    dist.all_gather(out, weft.tensor([[1.0, 2.0], [3.0, 4.0]]).to("cuda"))
    eq(out[0].to("cpu").tolist(), [[1.0, 2.0], [3.0, 4.0]], "all_gather")
    r = weft.zeros(3).to("cuda")
    dist.reduce_scatter(r, [weft.tensor([5.0, 6.0, 7.0]).to("cuda")])
    eq(r.to("cpu").tolist(), [5.0, 6.0, 7.0], "reduce_scatter")
    dist.barrier()


@test
def async_work():
    """async_op=True returns a Work; wait() leaves the result in the tensor"""
    need_gpu()
    t = weft.tensor([2.0, 4.0]).to("cuda")
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert w.is_completed()
    eq(t.to("cpu").tolist(), [2.0, 4.0])


@test
def cpu_tensor_refused():
    """a cpu tensor given to the nccl backend is refused by name"""
    need_gpu()
    raises(Exception, dist.all_reduce, weft.tensor([1.0]), contains="moves only cuda tensors")


@test
def finalize():
    """destroy_process_group"""
    need_gpu()
    dist.destroy_process_group()
    assert not dist.is_initialized()


done()
