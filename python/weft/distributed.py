"""weft.distributed: torch.distributed's names over weft's process groups
(include/weft/distributed.h) and the mpi backend.

    import weft.distributed as dist
    dist.init_process_group(backend="mpi")   # under mpirun
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

Tensors are CPU tensors of any dtype and strides.  Collectives called with
async_op=True return a Work (wait(), is_completed()); the tensors must stay
alive and untouched until it is waited for.  Errors are RuntimeError with
the core's message: mismatched arguments across ranks fail on every rank,
and a rank that does not answer ends the call at the timeout, naming it.
"""
import datetime
import enum

from weft import _C

__all__ = ["ReduceOp", "Work", "init_process_group", "is_initialized", "destroy_process_group",
           "get_rank", "get_world_size", "get_backend", "new_group", "all_reduce", "broadcast",
           "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "barrier",
           "send", "recv", "isend", "irecv"]


class ReduceOp(enum.IntEnum):
    """The reductions, numbered as weft_reduce_op."""
    SUM = 0
    AVG = 1
    MAX = 2
    MIN = 3
    PRODUCT = 4


class Work:
    """An asynchronous collective in flight (torch's Work)."""

    def __init__(self, handle):
        self._handle = handle

    def wait(self, timeout=None):
        """Waits until done (or the group's timeout); raises its error."""
        return _C._work_wait(self._handle)

    def is_completed(self):
        return _C._work_test(self._handle)


class ProcessGroup:
    """A group of ranks (the world, or one from new_group)."""

    def __init__(self, handle, ranks):
        self._handle = handle
        self.ranks = ranks

    def rank(self):
        return _C._dist_rank_size(self._handle)[0]

    def size(self):
        return _C._dist_rank_size(self._handle)[1]


_world = None
_backend = None


def _group(group):
    if _world is None:
        raise RuntimeError("weft.distributed: call init_process_group first")
    return (group or _world)._handle


def init_process_group(backend="mpi", init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name=""):
    """Starts the world group on backend ("mpi" for CPU tensors, "nccl"
    for CUDA tensors), with rank and size from the launcher's environment
    (mpirun's; nccl also reads torchrun's RANK/WORLD_SIZE, and takes NCCL's
    id from the file $WEFT_NCCL_ID_FILE when there is more than one rank);
    given ones must agree with it.  timeout: a timedelta (default 30
    minutes) for every blocking call."""
    global _world, _backend
    if init_method is not None or store is not None:
        raise ValueError("init_process_group: weft's backends take their ranks from the "
                         "launcher's environment; init_method and store are not used")
    ms = 0 if timeout is None else int(timeout / datetime.timedelta(milliseconds=1))
    handle = _C._dist_init(backend, rank, world_size, ms)
    size = _C._dist_rank_size(handle)[1]
    _world = ProcessGroup(handle, list(range(size)))
    _backend = backend


def is_initialized():
    return _world is not None


def destroy_process_group(group=None):
    """Shuts the world down (every sub-group with it)."""
    global _world
    if group is not None and group is not _world:
        return
    if _world is not None:
        _C._dist_finalize(_world._handle)
        _world = None


def get_backend(group=None):
    _group(group)
    return _backend


def get_rank(group=None):
    """This process's rank in group (-1 when not a member)."""
    return _C._dist_rank_size(_group(group))[0]


def get_world_size(group=None):
    return _C._dist_rank_size(_group(group))[1]


def new_group(ranks=None, timeout=None, backend=None):
    """A sub-group of the world's ranks, in that order; every rank calls it."""
    if ranks is None:
        ranks = list(range(get_world_size()))
    ranks = [int(r) for r in ranks]
    return ProcessGroup(_C._dist_group_new(_group(None), ranks), ranks)


def _work(handle):
    return Work(handle) if handle is not None else None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    return _work(_C._dist_all_reduce(_group(group), tensor, int(op), async_op))


def broadcast(tensor, src, group=None, async_op=False):
    return _work(_C._dist_broadcast(_group(group), tensor, src, async_op))


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    return _work(_C._dist_reduce(_group(group), tensor, dst, int(op), async_op))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    return _work(_C._dist_all_gather(_group(group), list(tensor_list), tensor, async_op))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    return _work(_C._dist_all_gather_into(_group(group), output_tensor, input_tensor, async_op))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    return _work(_C._dist_reduce_scatter(_group(group), output, list(input_list), int(op),
                                         async_op))


def barrier(group=None, async_op=False):
    return _work(_C._dist_barrier(_group(group), async_op))


def send(tensor, dst, group=None, tag=0):
    _C._dist_send(_group(group), tensor, dst, tag, False)


def recv(tensor, src, group=None, tag=0):
    """Receives into tensor from rank src (torch also accepts src=None, any
    rank; weft needs the rank).  Returns src."""
    if src is None:
        raise ValueError("recv: weft needs the source rank")
    _C._dist_recv(_group(group), tensor, src, tag, False)
    return src


def isend(tensor, dst, group=None, tag=0):
    return Work(_C._dist_send(_group(group), tensor, dst, tag, True))


def irecv(tensor, src, group=None, tag=0):
    return Work(_C._dist_recv(_group(group), tensor, src, tag, True))
