"""weft.autograd: grad, Function (custom forward and backward in Python,
recorded by the C custom-function API) and gradcheck, as torch.autograd."""

from . import _C
from .grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled

__all__ = ["grad", "backward", "Function", "FunctionCtx", "gradcheck", "no_grad", "enable_grad",
           "inference_mode", "set_grad_enabled"]

Tensor = _C.Tensor


def _tensors(x, what):
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (list, tuple)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x)
    raise TypeError("%s must be a Tensor or a sequence of Tensors, not %s" % (what, type(x).__name__))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of outputs with respect to inputs, as a tuple (None for
    an input the outputs do not depend on when allow_unused); no tensor's
    .grad is touched.  RuntimeError for an output that does not require
    grad, mismatched shapes or an unused input without allow_unused."""
    outputs = _tensors(outputs, "outputs")
    inputs = _tensors(inputs, "inputs")
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    else:
        grad_outputs = tuple(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    return _C._autograd_grad(outputs, grad_outputs, inputs, bool(retain_graph), bool(create_graph),
                             bool(allow_unused))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """torch.autograd.backward: accumulates into the leaves' .grad."""
    tensors = _tensors(tensors, "tensors")
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,) * len(tensors) if grad_tensors is None else (grad_tensors,)
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        last = i == len(tensors) - 1
        t.backward(g, retain_graph=True if not last else retain_graph, create_graph=create_graph)


class FunctionCtx:
    """The ctx of a Function's forward and backward: save_for_backward,
    saved_tensors, needs_input_grad, mark_non_differentiable, mark_dirty,
    and any attribute forward sets for backward."""

    def __init__(self):
        self._to_save = ()
        self._non_differentiable = ()
        self._dirty = ()
        self.saved_tensors = ()
        self.needs_input_grad = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward() takes Tensors or None, not %s" % type(t).__name__)
        self._to_save = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = _tensors(list(tensors), "mark_non_differentiable's arguments")

    def mark_dirty(self, *tensors):
        self._dirty = _tensors(list(tensors), "mark_dirty's arguments")

    def set_materialize_grads(self, value):
        # weft's node always materializes (zeros for missing gradients);
        # backward then sees zeros where torch would pass None
        self.materialize_grads = bool(value)


class Function:
    """A differentiable operation written in Python, as torch.autograd.Function:

        class Exp(weft.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                y, = ctx.saved_tensors
                return grad * y

        y = Exp.apply(x)

    forward runs with grad mode off; when an input requires grad and grad
    mode is on, one node named after the class ("ExpBackward") is recorded
    through weft_function_apply, whose backward calls the Python backward
    (with create_graph its operations are recorded too).  backward returns
    one gradient (or None) per forward argument; non-tensor arguments get
    None.  Saved tensors modified in place after forward make backward
    raise RuntimeError naming the function."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = tuple(args[i] for i in positions)
        recording = _C.is_grad_enabled() and any(t.requires_grad for t in inputs)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad and recording
                                     for a in args)
        with no_grad():
            result = cls.forward(ctx, *args)
        single = isinstance(result, Tensor)
        outputs = (result,) if single else result
        if not isinstance(outputs, tuple) or not all(isinstance(o, Tensor) for o in outputs):
            raise TypeError("%s.forward must return a Tensor or a tuple of Tensors, not %s"
                            % (cls.__name__, type(result).__name__))
        if not recording:
            return result
        saved = tuple(t for t in ctx._to_save if t is not None)
        if len(saved) != len(ctx._to_save):
            ctx._saved_nones = [i for i, t in enumerate(ctx._to_save) if t is None]
        nargs = len(args)

        def run_backward(grads, saved_tensors):
            # the saved tensors come back checked by the C node; None entries
            # of save_for_backward are put back where they were
            saved_list = list(saved_tensors)
            for i in getattr(ctx, "_saved_nones", ()):
                saved_list.insert(i, None)
            ctx.saved_tensors = tuple(saved_list)
            try:
                got = cls.backward(ctx, *grads)
            finally:
                ctx.saved_tensors = ()
            got = got if isinstance(got, tuple) else (got,)
            if len(got) != nargs:
                raise RuntimeError("%s.backward returned %d gradients, forward took %d arguments"
                                   % (cls.__name__, len(got), nargs))
            return tuple(got[i] for i in positions)

        recorded = _C._function_apply(cls.__name__ + "Backward", inputs, outputs, saved,
                                      ctx._non_differentiable, ctx._dirty, run_backward)
        # what ctx held for forward is the C node's now: no reference cycle
        ctx._to_save = ctx._non_differentiable = ctx._dirty = ()
        return recorded[0] if single else recorded


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Compares the gradients autograd gives func (a function of tensors
    returning one tensor) with central finite differences, for every input
    that requires grad (float64 tensors, as torch asks).  Returns True, or
    raises RuntimeError naming the input, element and both values (False
    instead when raise_exception is False)."""
    inputs = _tensors(inputs, "inputs")
    for t in inputs:
        if t.requires_grad and t.dtype != _C.float64:
            raise RuntimeError("gradcheck needs float64 inputs; got %s" % t.dtype)
    checked = [t for t in inputs if t.requires_grad]
    out = func(*inputs).reshape(-1)
    # every analytic row first: perturbing an input in place below bumps its
    # version, after which the graph of out can no longer be run
    analytic = []
    for k in range(out.numel()):
        rows = grad(out[k], checked, retain_graph=True, allow_unused=True)
        analytic.append([r.reshape(-1).tolist() if r is not None else None for r in rows])
    for which, t in enumerate(checked):
        flat = t.detach().reshape(-1)
        for j in range(flat.numel()):
            orig = flat[j].item()
            with no_grad():
                flat[j] = orig + eps
                plus = func(*inputs).reshape(-1).tolist()
                flat[j] = orig - eps
                minus = func(*inputs).reshape(-1).tolist()
                flat[j] = orig
            for k in range(len(plus)):
                numeric = (plus[k] - minus[k]) / (2 * eps)
                row = analytic[k][which]
                value = row[j] if row is not None else 0.0
                if abs(numeric - value) > atol + rtol * abs(numeric):
                    if not raise_exception:
                        return False
                    raise RuntimeError("gradcheck: input %d, output element %d, input element %d: "
                                       "numeric %r, analytic %r" % (which, k, j, numeric, value))
    return True
