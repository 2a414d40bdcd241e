"""weft.nn.Module, the base class of every layer and model.

A Module keeps its parameters, buffers and submodules in three ordered
dicts, filled by attribute assignment, so that parameters(), state_dict()
and to() can walk the tree.  The arithmetic lives in the C operators; this
file only does the bookkeeping.
"""
import collections
import collections.abc
import copy
import itertools

from .. import _C
from ..grad_mode import no_grad
from .parameter import Parameter

_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class RemovableHandle:
    """What register_*_hook returns: remove() unregisters the hook."""

    _next_id = itertools.count()

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = next(RemovableHandle._next_id)

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _is_tensor(v):
    return isinstance(v, _C.Tensor)


class Module:
    """The base class of every layer and model.  Subclasses call
    super().__init__() first, then assign parameters (nn.Parameter),
    buffers (register_buffer) and submodules as attributes, and define
    forward()."""

    training = True

    def __init__(self):
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = collections.OrderedDict()
        d["_buffers"] = collections.OrderedDict()
        d["_non_persistent_buffers"] = set()
        d["_modules"] = collections.OrderedDict()
        d["_forward_hooks"] = collections.OrderedDict()
        d["_forward_pre_hooks"] = collections.OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            'Module [%s] is missing the required "forward" function' % type(self).__name__)

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, out)
            if result is not None:
                out = result
        return out

    # ------------------------------------------------------------ registration
    def _check_ready(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to a module before Module.__init__() call "
                                 "(call super().__init__() first in %s.__init__)"
                                 % type(self).__name__)

    def register_parameter(self, name, param):
        self._check_ready()
        if not isinstance(name, str):
            raise TypeError("parameter name should be a string, got %s" % type(name).__name__)
        if "." in name or name == "":
            raise KeyError('parameter name can\'t contain "." or be empty: %r' % name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError("attribute '%s' already exists" % name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (nn.Parameter or None "
                            "required)" % (type(param).__name__, name))
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_ready()
        if not isinstance(name, str):
            raise TypeError("buffer name should be a string, got %s" % type(name).__name__)
        if "." in name or name == "":
            raise KeyError('buffer name can\'t contain "." or be empty: %r' % name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError("attribute '%s' already exists" % name)
        if tensor is not None and not _is_tensor(tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (weft.Tensor or None "
                            "required)" % (type(tensor).__name__, name))
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        self._check_ready()
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % type(module).__name__)
        if not isinstance(name, str):
            raise TypeError("module name should be a string, got %s" % type(name).__name__)
        if "." in name or name == "":
            raise KeyError('module name can\'t contain "." or be empty: %r' % name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError("attribute '%s' already exists" % name)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._check_ready()
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (nn.Parameter or None "
                                "expected)" % (type(value).__name__, name))
            params[name] = None
        elif isinstance(value, Module):
            self._check_ready()
            self._forget(name)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (nn.Module or None "
                                "expected)" % (type(value).__name__, name))
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not _is_tensor(value):
                raise TypeError("cannot assign '%s' as buffer '%s' (weft.Tensor or None "
                                "expected)" % (type(value).__name__, name))
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name):
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            self.__dict__[table].pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            t = self.__dict__.get(table)
            if t is not None and name in t:
                del t[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__())
        for table in ("_parameters", "_buffers", "_modules"):
            keys += list(self.__dict__.get(table, ()))
        return sorted(set(k for k in keys if not k[:1].isdigit()))

    def get_submodule(self, target):
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules:
                raise AttributeError("%s has no attribute `%s`" % (type(mod).__name__, item))
            mod = mod._modules[item]
        return mod

    def register_forward_hook(self, hook):
        """hook(module, inputs, output) runs after forward; a non-None result
        replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook):
        """hook(module, inputs) runs before forward; a non-None result
        replaces the inputs."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    # ---------------------------------------------------------------- walking
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, v in getattr(mod, table).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True):
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Calls fn on every submodule (children first) and on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=False):
        """Zeroes every parameter's gradient (set_to_none=True drops them)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.fill_(0)

    # -------------------------------------------------------------- state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered dict from dotted names to the parameters and persistent
        buffers (detached tensors sharing their memory unless keep_vars)."""
        if destination is None:
            destination = collections.OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing, errors):
        local = [(n, p) for n, p in self._parameters.items() if p is not None]
        local += [(n, b) for n, b in self._buffers.items()
                  if b is not None and n not in self._non_persistent_buffers]
        for name, dest in local:
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            src = state_dict[key]
            if not _is_tensor(src):
                errors.append('While copying the parameter named "%s", expected weft.Tensor '
                              "in the state_dict, got %s." % (key, type(src).__name__))
                continue
            if tuple(src.shape) != tuple(dest.shape):
                errors.append("size mismatch for %s: copying a param with shape %s from "
                              "checkpoint, the shape in current model is %s."
                              % (key, list(src.shape), list(dest.shape)))
                continue
            try:
                with no_grad():
                    dest.copy_(src)
            except Exception as e:
                errors.append('While copying the parameter named "%s", whose dimensions in the '
                              "model are %s and whose dimensions in the checkpoint are %s, an "
                              "exception occurred: %s" % (key, list(dest.shape),
                                                          list(src.shape), e))

    def load_state_dict(self, state_dict, strict=True):
        """Copies the state dict's tensors into this module's parameters and
        buffers.  strict: missing or unexpected keys raise RuntimeError
        (otherwise they are returned).  A shape mismatch always raises."""
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError("Expected state_dict to be dict-like, got %s." % type(state_dict).__name__)
        missing, errors = [], []
        for prefix, module in self.named_modules():
            module._load_from_state_dict(state_dict, prefix + "." if prefix else "",
                                         missing, errors)
        # unexpected: the keys that no module's parameter or buffer claims
        claimed = set(self.state_dict(keep_vars=True))
        unexpected = [k for k in state_dict if k not in claimed]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. "
                              % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. "
                              % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------- device, dtype
    def _apply_tensors(self, fn):
        """Replaces each parameter and buffer t by fn(t) where that is a new
        tensor.  All conversions happen before any assignment, so a failure
        (an absent device) leaves the module as it was; a tensor shared by
        several modules (tied weights) stays shared."""
        converted = {}  # id(old) -> new
        for module in self.modules():
            for table in (module._parameters, module._buffers):
                for t in table.values():
                    if t is None or id(t) in converted:
                        continue
                    new = fn(t)
                    if new is not t:
                        if isinstance(t, Parameter):
                            new = Parameter(new, t.requires_grad)
                            if t.grad is not None:
                                new.grad = fn(t.grad)
                        converted[id(t)] = new
        for module in self.modules():
            for table in (module._parameters, module._buffers):
                for name, t in table.items():
                    if t is not None and id(t) in converted:
                        table[name] = converted[id(t)]
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(tensor): converts the
        floating-point parameters and buffers (a dtype leaves integer
        buffers alone).  Parameters that change become new Parameter
        tensors: build optimizers after moving the model."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError("Module.to() got unexpected keyword arguments %s" % sorted(kwargs))
        for a in args:
            if isinstance(a, _C.dtype):
                dtype = a
            elif _is_tensor(a):
                dtype, device = a.dtype, a.device
            elif a is not None:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point dtypes, but got "
                            "desired dtype=%s" % dtype)

        def convert(t):
            kw = {}
            if device is not None and str(t.device) != str(device):
                kw["device"] = device
            if dtype is not None and t.is_floating_point() and t.dtype != dtype:
                kw["dtype"] = dtype
            if not kw:
                return t
            with no_grad():
                return t.to(**kw)

        return self._apply_tensors(convert)

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else "cuda:%d" % device
                       if isinstance(device, int) else device)

    def __deepcopy__(self, memo):
        """copy.deepcopy(model): a model of its own, with clones of every
        parameter (still Parameters, gradients cloned too) and buffer.
        weft.Tensor cannot be pickled, which copy's generic path needs, so
        this module's tensors go into memo as clones first; tied tensors
        stay tied in the copy."""
        for m in self.modules():
            tensors = itertools.chain(m._parameters.values(), m._buffers.values(),
                                      (v for v in m.__dict__.values() if _is_tensor(v)))
            for t in tensors:
                if t is None or id(t) in memo:
                    continue
                c = t.detach().clone()
                if isinstance(t, Parameter):
                    c = Parameter(c, t.requires_grad)
                    if t.grad is not None:
                        c.grad = t.grad.detach().clone()
                memo[id(t)] = c
                memo.setdefault(id(memo), []).append(t)  # keeps t alive, as copy does
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = copy.deepcopy(value, memo)
        return new

    # ------------------------------------------------------------------ repr
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, module in self._modules.items():
            text = repr(module).replace("\n", "\n  ")
            lines.append("(" + name + "): " + text)
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


__all__ = ["Module", "RemovableHandle"]
