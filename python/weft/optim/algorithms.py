"""SGD, Adam, AdamW, RMSprop and Adagrad: torch.optim's hyperparameters,
defaults and update rules (as in torch 1.13's single-tensor path).  A
step is one C call per parameter group (_group_step: libweft's
weft_sgd_step ..., a fused pass per parameter); _update, a handful of
whole-tensor in-place operators, serves the parameters the fused step
does not take (sparse gradients, non-contiguous tensors)."""
import math

from .. import _C
from .optimizer import Optimizer, required


def _zeros_like(p):
    return _C.zeros(list(p.shape), dtype=p.dtype, device=p.device)


def _check(value, name, cls, low=0.0, high=None):
    if value is required:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError("%s: %s must be a number, got %s" % (cls, name, type(value).__name__))
    if value < low or (high is not None and value >= high):
        raise ValueError("%s: invalid %s: %s" % (cls, name, value))


def _state_list(items, key):
    """[state[key] or None] of the group's parameters: None entries are
    created by the C step, then stored back with _keep_state."""
    return [state.get(key) for _, _, state in items]


def _keep_state(items, key, values):
    for (_, _, state), value in zip(items, values):
        state[key] = value


def _next_step(state):
    state["step"].add_(1)
    return state["step"].item()


class SGD(Optimizer):
    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None):
        _check(lr, "learning rate", "SGD")
        _check(momentum, "momentum value", "SGD")
        _check(weight_decay, "weight_decay value", "SGD")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach))

    def _update(self, p, grad, state, group):
        wd, momentum = group["weight_decay"], group["momentum"]
        if grad.layout != "strided":
            return self._sparse_update(p, grad, state, group)
        d_p = grad.neg() if group["maximize"] else grad
        if wd != 0:
            d_p = d_p.add(p, alpha=wd)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d_p.detach().clone()
            else:
                buf.mul_(momentum)
                buf.add_(d_p, alpha=1 - group["dampening"])
            d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(d_p, alpha=-group["lr"])

    @staticmethod
    def _sparse_update(p, grad, state, group):
        """torch 1.13's SGD on a sparse gradient: the momentum buffer is a
        sparse tensor too (the union of the patterns seen, coalesced here so
        it does not grow with repeats), and only its rows are written into
        the parameter; weight_decay is refused, as torch refuses it (it
        would add the whole parameter to the gradient)."""
        if group["weight_decay"] != 0:
            raise RuntimeError("SGD: weight_decay does not work with sparse gradients (layout "
                               "'%s'); torch refuses it too" % grad.layout)
        if grad.layout != "sparse_coo":
            grad = grad.to_sparse()
        d_p = grad.neg() if group["maximize"] else grad
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d_p.clone().coalesce()
            elif buf.layout == "strided":  # a dense gradient made it before
                buf.mul_(momentum)
                buf.add_(d_p, alpha=1 - group["dampening"])
            else:
                buf = _C.add(buf * momentum, d_p, alpha=1 - group["dampening"]).coalesce()
            state["momentum_buffer"] = buf
            d_p = _C.add(d_p, buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(d_p, alpha=-group["lr"])

    def _group_step(self, group, items):
        params = [p for p, _, _ in items]
        grads = [g for _, g, _ in items]
        momentum = group["momentum"]
        bufs = _state_list(items, "momentum_buffer") if momentum != 0 else None
        _C._sgd_step(params, grads, bufs, group["lr"], momentum, group["dampening"],
                     group["weight_decay"], group["nesterov"], group["maximize"])
        if bufs is not None:
            _keep_state(items, "momentum_buffer", bufs)


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=False):
        cls = type(self).__name__
        _check(lr, "learning rate", cls)
        _check(eps, "epsilon value", cls)
        _check(betas[0], "beta parameter at index 0", cls, 0.0, 1.0)
        _check(betas[1], "beta parameter at index 1", cls, 0.0, 1.0)
        _check(weight_decay, "weight_decay value", cls)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.tensor(0.0)
            state["exp_avg"] = _zeros_like(p)
            state["exp_avg_sq"] = _zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _zeros_like(p)
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        if group["maximize"]:
            grad = grad.neg()
        step = _next_step(state)
        if wd != 0:
            if self._decoupled:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1)
        exp_avg.add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2)
        exp_avg_sq.addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
        if group["amsgrad"]:
            peak = state["max_exp_avg_sq"]
            _C.maximum(peak, exp_avg_sq, out=peak)
            denom = peak.sqrt()
        else:
            denom = exp_avg_sq.sqrt()
        denom.div_(bias_correction2_sqrt)
        denom.add_(group["eps"])
        p.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)


    def _group_step(self, group, items):
        params = [p for p, _, _ in items]
        grads = [g for _, g, _ in items]
        keys = ["exp_avg", "exp_avg_sq", "step"]
        if group["amsgrad"]:
            keys.append("max_exp_avg_sq")
        lists = {k: _state_list(items, k) for k in keys}
        beta1, beta2 = group["betas"]
        _C._adam_step(params, grads, lists["exp_avg"], lists["exp_avg_sq"],
                      lists.get("max_exp_avg_sq"), lists["step"], group["lr"], beta1, beta2,
                      group["eps"], group["weight_decay"], group["amsgrad"], group["maximize"],
                      self._decoupled)
        for k in keys:
            _keep_state(items, k, lists[k])


class AdamW(Adam):
    """Adam with decoupled weight decay (param *= 1 - lr * weight_decay)."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach)


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False):
        _check(lr, "learning rate", "RMSprop")
        _check(eps, "epsilon value", "RMSprop")
        _check(momentum, "momentum value", "RMSprop")
        _check(weight_decay, "weight_decay value", "RMSprop")
        _check(alpha, "alpha value", "RMSprop")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, foreach=foreach,
                                      maximize=maximize))

    def _update(self, p, grad, state, group):
        if not state:
            state["step"] = _C.tensor(0.0)
            state["square_avg"] = _zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = _zeros_like(p)
        _next_step(state)
        alpha, wd = group["alpha"], group["weight_decay"]
        if group["maximize"]:
            grad = grad.neg()
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        square_avg = state["square_avg"]
        square_avg.mul_(alpha)
        square_avg.addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.mul_(alpha)
            grad_avg.add_(grad, alpha=1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1)
            avg.sqrt_()
        else:
            avg = square_avg.sqrt()
        avg.add_(group["eps"])
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"])
            buf.addcdiv_(grad, avg)
            p.add_(buf, alpha=-group["lr"])
        else:
            p.addcdiv_(grad, avg, value=-group["lr"])


    def _group_step(self, group, items):
        params = [p for p, _, _ in items]
        grads = [g for _, g, _ in items]
        keys = ["square_avg", "step"]
        if group["momentum"] > 0:
            keys.append("momentum_buffer")
        if group["centered"]:
            keys.append("grad_avg")
        lists = {k: _state_list(items, k) for k in keys}
        _C._rmsprop_step(params, grads, lists["square_avg"], lists.get("momentum_buffer"),
                         lists.get("grad_avg"), lists["step"], group["lr"], group["alpha"],
                         group["eps"], group["weight_decay"], group["momentum"],
                         group["centered"], group["maximize"])
        for k in keys:
            _keep_state(items, k, lists[k])


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False):
        _check(lr, "learning rate", "Adagrad")
        _check(lr_decay, "lr_decay value", "Adagrad")
        _check(weight_decay, "weight_decay value", "Adagrad")
        _check(initial_accumulator_value, "initial_accumulator_value", "Adagrad")
        _check(eps, "epsilon value", "Adagrad")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize))
        # torch makes Adagrad's state at construction
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self._initial_state(p, group)

    @staticmethod
    def _initial_state(p, group):
        acc = _C.full(list(p.shape), group["initial_accumulator_value"], dtype=p.dtype,
                      device=p.device)
        return {"step": _C.tensor(0.0), "sum": acc}

    def _update(self, p, grad, state, group):
        if not state:
            state.update(self._initial_state(p, group))
        step = _next_step(state)
        if group["maximize"]:
            grad = grad.neg()
        if group["weight_decay"] != 0:
            if grad.layout != "strided":
                raise RuntimeError("Adagrad: weight_decay does not work with sparse gradients")
            grad = grad.add(p, alpha=group["weight_decay"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        if grad.layout == "sparse_coo":
            # a sparse gradient (issue 16): its rows only, as torch's
            from .sparse_adam import adagrad_sparse_rows
            return adagrad_sparse_rows(p, grad, state["sum"], clr, group["eps"])
        state["sum"].addcmul_(grad, grad, value=1)
        std = state["sum"].sqrt()
        std.add_(group["eps"])
        p.addcdiv_(grad, std, value=-clr)

    def _group_step(self, group, items):
        params = [p for p, _, _ in items]
        grads = [g for _, g, _ in items]
        lists = {k: _state_list(items, k) for k in ("sum", "step")}
        _C._adagrad_step(params, grads, lists["sum"], lists["step"], group["lr"],
                         group["lr_decay"], group["weight_decay"],
                         group["initial_accumulator_value"], group["eps"], group["maximize"])
        for k in ("sum", "step"):
            _keep_state(items, k, lists[k])
