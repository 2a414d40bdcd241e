"""weft.optim.Optimizer: parameter groups, per-parameter state and
state_dict/load_state_dict in torch.optim's shape.

Each algorithm's step is one C call per parameter group (_group_step:
libweft's weft_sgd_step ... weft_adagrad_step, one fused pass per
parameter), the state staying in self.state[p] as torch keeps it.
Parameters the fused step does not take (a sparse gradient, a
non-contiguous tensor) go through _update, a few whole-tensor in-place
operators per parameter.  Python loops over parameters, never over
elements.
"""
import copy

from .. import _C
from ..grad_mode import enable_grad, no_grad


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = {}  # tensor -> dict (tensors hash by identity)
        self.param_groups = []
        if isinstance(params, _C.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError("param_group must be a dict, got %s" % type(param_group).__name__)
        params = param_group["params"]
        if isinstance(params, _C.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, _C.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but parameter %d of the "
                                "group is a %s" % (i, type(p).__name__))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 "optimization parameter " + name)
            group.setdefault(name, default)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
        if len(set(id(p) for p in params)) != len(params) or any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\nParameter Group %d" % i
            for key in sorted(group):
                if key != "params":
                    s += "\n    %s: %s" % (key, group[key])
        return s + "\n)"

    def zero_grad(self, set_to_none=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.fill_(0)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                fused = []
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state.get(p)
                    if state is None:
                        state = self.state[p] = {}
                    if self._fusable(p, grad):
                        fused.append((p, grad, state))
                    else:
                        self._update(p, grad, state, group)
                if fused:
                    self._group_step(group, fused)
        return loss

    @staticmethod
    def _fusable(p, grad):
        return (grad.layout == "strided" and p.is_floating_point() and p.is_contiguous()
                and grad.is_contiguous() and grad.dtype == p.dtype)

    def _group_step(self, group, items):
        """One step of [(param, grad, state)] of group; by default each
        through _update (the algorithms replace it with one C call)."""
        for p, grad, state in items:
            self._update(p, grad, state, group)

    def _update(self, param, grad, state, group):
        raise NotImplementedError

    # ---------------------------------------------------------- state dicts
    def state_dict(self):
        """{'state': {index: {name: value}}, 'param_groups': [{..., 'params':
        [index, ...]}]}: parameters by their position across the groups, as
        torch.  The state's tensors are the optimizer's own (not copies)."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = self.state[p]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores hyperparameters and state saved by state_dict() into an
        optimizer over parameters of the same shapes (state tensors are
        copied, so the dict can be reused)."""
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or \
                "state" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with 'state' and "
                             "'param_groups' (as Optimizer.state_dict() returns)")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups "
                             "(%d) than the optimizer (%d)"
                             % (len(saved_groups), len(self.param_groups)))
        for i, (mine, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group (group %d: %d saved, %d "
                                 "here)" % (i, len(saved["params"]), len(mine["params"])))
        by_index = {}
        for mine, saved in zip(self.param_groups, saved_groups):
            for idx, p in zip(saved["params"], mine["params"]):
                by_index[idx] = p
        new_state = {}
        for idx, st in state_dict["state"].items():
            idx = int(idx)
            if idx not in by_index:
                raise ValueError("optimizer state_dict: state for parameter %d, which no group "
                                 "lists" % idx)
            p = by_index[idx]
            restored = {}
            for key, value in st.items():
                if isinstance(value, _C.Tensor):
                    if key != "step" and tuple(value.shape) != tuple(p.shape):
                        raise RuntimeError("optimizer state_dict: state '%s' of parameter %d has "
                                           "shape %s, the parameter has shape %s"
                                           % (key, idx, list(value.shape), list(p.shape)))
                    value = value.detach().clone()
                    if key != "step" and value.is_floating_point():
                        value = value.to(dtype=p.dtype, device=p.device)
                else:
                    value = copy.deepcopy(value)
                restored[key] = value
            new_state[p] = restored
        self.state = new_state
        for mine, saved in zip(self.param_groups, saved_groups):
            params = mine["params"]
            mine.clear()
            mine.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})
            mine["params"] = params
