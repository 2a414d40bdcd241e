"""weft.optim.SparseAdam, and Adagrad's step on a sparse gradient: torch 1.13's SparseAdam ("lazy" Adam: the moments
and the parameter change only in the rows a gradient holds), applied row
by row on sparse COO gradients (weft.sparse, issue 16) without a dense
tensor of the parameter's size.  Unlike torch's, it also takes a dense
gradient: its rows with a nonzero are treated as a sparse gradient's."""
import math

from .. import _C
from .algorithms import _check, _zeros_like
from .optimizer import Optimizer


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check(lr, "learning rate", "SparseAdam")
        _check(eps, "epsilon value", "SparseAdam")
        _check(betas[0], "beta parameter at index 0", "SparseAdam", 0.0, 1.0)
        _check(betas[1], "beta parameter at index 1", "SparseAdam", 0.0, 1.0)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize))

    def _update(self, p, grad, state, group):
        if grad.layout == "strided":
            # what torch refuses: a dense gradient, as the sparse one of its
            # rows that hold a nonzero (the other rows stay as they are)
            grad = grad.to_sparse(1)
        elif grad.layout != "sparse_coo":
            grad = grad.to_sparse()
        grad = grad.coalesce()
        if not state:
            state["step"] = 0
            state["exp_avg"] = _zeros_like(p)
            state["exp_avg_sq"] = _zeros_like(p)
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        idx = grad.indices()
        values = grad.values()
        if group["maximize"]:
            values = values.neg()
        if values.shape[0] == 0:
            return
        rows = idx[0] if idx.shape[0] == 1 else None
        if rows is None:
            raise RuntimeError("SparseAdam: the gradient must have one sparse dimension (rows), "
                               "got %d" % idx.shape[0])
        size = list(p.shape)

        def sparse(v):
            return _C.sparse_coo_tensor(idx, v.contiguous(), size, False)

        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        old_avg = _C.index_select(exp_avg, 0, rows)
        avg_update = (values - old_avg) * (1 - beta1)
        exp_avg.add_(sparse(avg_update))
        old_sq = _C.index_select(exp_avg_sq, 0, rows)
        sq_update = (values * values - old_sq) * (1 - beta2)
        exp_avg_sq.add_(sparse(sq_update))
        numer = avg_update + old_avg
        denom = (sq_update + old_sq).sqrt() + group["eps"]
        step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        p.add_(sparse(numer / denom), alpha=-step_size)


def adagrad_sparse_rows(p, grad, state_sum, clr, eps):
    """Adagrad's step for a sparse COO gradient, as torch's: the squared
    gradient is added to the sum's rows, and the parameter moves in those
    rows only, by grad / (sqrt(sum) + eps)."""
    grad = grad.coalesce()
    idx, values = grad.indices(), grad.values()
    if values.shape[0] == 0:
        return
    size = list(p.shape)

    def sparse(v):
        return _C.sparse_coo_tensor(idx, v.contiguous(), size, False)

    if idx.shape[0] != 1:
        raise RuntimeError("Adagrad: a sparse gradient must have one sparse dimension (rows), "
                           "got %d" % idx.shape[0])
    state_sum.add_(sparse(values * values))
    std = _C.index_select(state_sum, 0, idx[0])
    p.add_(sparse(values / (std.sqrt() + eps)), alpha=-clr)
