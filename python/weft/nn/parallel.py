"""weft.nn.parallel.DistributedDataParallel: torch's DDP over
weft.distributed (issue 18).

Creating it broadcasts rank 0's parameters and buffers.  In backward, a hook
on each parameter copies its gradient (plus what .grad already held, so
that gradients accumulated under no_sync() are reduced too) into a bucket
(parameters in reverse order, up to bucket_cap_mb each); a full bucket's
average over the ranks starts at once as an asynchronous all_reduce, so the
communication overlaps the rest of backward.  The hook of the last
parameter of the pass waits for the buckets and writes the averages into
every .grad, so that optimizer.step() may follow backward() directly, as
with torch.  A parameter that got no gradient in a synced pass is an error
at the next forward, naming it (torch's rule without
find_unused_parameters)."""
import contextlib

import weft
import weft.distributed as dist
from weft.nn.module import Module

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, process_group=None, bucket_cap_mb=25,
                 broadcast_buffers=True, find_unused_parameters=False):
        super().__init__()
        if find_unused_parameters:
            raise NotImplementedError("DistributedDataParallel: find_unused_parameters is not "
                                      "supported; every parameter must take part in the loss")
        self.module = module
        self.process_group = process_group
        self.require_backward_grad_sync = True
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("DistributedDataParallel: the module has no parameter that requires grad")
        with weft.no_grad():
            for t in module.state_dict().values():
                dist.broadcast(t, 0, group=process_group)
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        cap = int(bucket_cap_mb * 1024 * 1024)
        # buckets in reverse order: backward meets the last layer first
        self._buckets = []   # [flat tensor, number of params, ready count, work]
        self._slot = [None] * len(named)
        size = 0
        for i in reversed(range(len(named))):
            p = self._params[i]
            nbytes = p.numel() * p.element_size()
            b = self._buckets[-1] if self._buckets else None
            if b is None or b[4] != p.dtype or (size + nbytes > cap and size > 0):
                b = [None, 0, 0, None, p.dtype, 0]
                self._buckets.append(b)
                size = 0
            self._slot[i] = (len(self._buckets) - 1, b[5])
            b[1] += 1
            b[5] += p.numel()
            size += nbytes
        for b in self._buckets:
            b[0] = weft.zeros(b[5], dtype=b[4])
        self._ready = [False] * len(named)
        self._pending = 0
        for i, p in enumerate(self._params):
            p.register_hook(self._make_hook(i))

    def _view(self, i):
        b, off = self._slot[i]
        p = self._params[i]
        return self._buckets[b][0][off:off + p.numel()].view(*p.shape)

    def _make_hook(self, i):
        def hook(grad):
            return self._on_grad(i, grad)
        return hook

    def _on_grad(self, i, grad):
        if not self.require_backward_grad_sync or self._ready[i]:
            return None
        p = self._params[i]
        slot = self._view(i)
        with weft.no_grad():
            slot.copy_(grad)
            if p.grad is not None:
                slot.add_(p.grad)
        self._ready[i] = True
        self._pending += 1
        # move the buckets in flight on: between ranks of one node the mpi
        # backend's shared-memory all_reduce advances only when tested
        # (a failed one raises again at its wait, below, which reports it)
        for other in self._buckets:
            if other[3] is not None:
                try:
                    other[3].is_completed()
                except Exception:  # the wait below raises it again
                    pass
        b = self._buckets[self._slot[i][0]]
        b[2] += 1
        if b[2] == b[1]:
            b[3] = dist.all_reduce(b[0], op=dist.ReduceOp.AVG, group=self.process_group,
                                   async_op=True)
        if self._pending < len(self._params):
            return None
        # the last gradient of the pass: every other parameter's .grad is
        # accumulated by now; overwrite them with the averages, and make
        # this one's accumulation land on its average
        for b in self._buckets:
            b[3].wait()
            b[3] = None
            b[2] = 0
        with weft.no_grad():
            for k, q in enumerate(self._params):
                if k != i:
                    q.grad.copy_(self._view(k))
            mine = self._view(i).clone()
            if p.grad is not None:
                mine = mine - p.grad
        self._ready = [False] * len(self._params)
        self._pending = 0
        return mine

    def forward(self, *args, **kwargs):
        if self._pending:
            missing = [n for n, r in zip(self._names, self._ready) if not r]
            for b in self._buckets:
                if b[3] is not None:
                    b[3].wait()
                    b[3] = None
                b[2] = 0
            self._ready = [False] * len(self._params)
            self._pending = 0
            raise RuntimeError("DistributedDataParallel: parameter(s) %s received no gradient in the "
                               "previous backward; every parameter must take part in the loss on "
                               "every rank" % ", ".join(missing))
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate local gradients; the first
        one after reduces the sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old
