"""weft.nn against torch 1.13's nn: each module built with the same
arguments, torch's parameters and buffers copied into weft's (strictly, so
the names agree), then the forward output, the input's gradient and every
parameter's gradient compared to float tolerance; then the Module API
(state_dict round trips, strict loading's messages, hooks, containers,
modes, to) and the errors bad input gets.  The torch comparisons SKIP where
torch is not installed; the rest runs anyway."""
import math
import warnings

import weft
import weft.nn as nn
import weft.nn.functional as F
from taplib import done, eq, raises, test
from torch_peer import close, copy_state, need_torch, to_weft, torch

if torch is not None:
    print("# torch", torch.__version__)
    # torch warns that an even kernel with padding='same' copies the input
    warnings.filterwarnings("ignore", message="Using padding='same'")
    tnn = torch.nn


def module_case(desc, make_weft, make_torch, shape, train=True, long_input=None, tol=1e-5,
                steps=1):
    def run():
        need_torch()
        torch.manual_seed(0)
        tm = make_torch(tnn)
        wm = make_weft(nn)
        copy_state(wm, tm)
        tm.train(train)
        wm.train(train)
        for step in range(steps):
            if long_input is not None:
                x = torch.randint(0, long_input, shape)
                xt, xw = x, to_weft(x)
            else:
                x = torch.randn(*shape)
                xt = x.clone().requires_grad_(True)
                xw = to_weft(x).requires_grad_(True)
            yt = tm(xt)
            yw = wm(xw)
            close(yw, yt, "forward (step %d)" % step, tol, tol)
            g = torch.randn_like(yt)
            for p in tm.parameters():
                p.grad = None
            wm.zero_grad(set_to_none=True)
            yt.backward(g)
            yw.backward(to_weft(g))
            if long_input is None:
                close(xw.grad, xt.grad, "input gradient (step %d)" % step, tol, tol)
            tnames = [n for n, _ in tm.named_parameters()]
            eq([n for n, _ in wm.named_parameters()], tnames, "parameter names")
            for (name, p), (_, q) in zip(wm.named_parameters(), tm.named_parameters()):
                close(p.grad, q.grad, "gradient of %s (step %d)" % (name, step), tol, tol)
            tbufs = dict(tm.named_buffers())
            for name, b in wm.named_buffers():
                close(b, tbufs[name], "buffer %s (step %d)" % (name, step), tol, tol)

    run.__doc__ = "nn.%s matches torch: forward, input and parameter gradients" % desc
    test(run)


def C(expr):
    """A maker for both libraries from one expression over `nn`."""
    return lambda lib: eval(expr, {"nn": lib})


# (description, constructor expression, input shape, extra options)
MODULES = [
    ("Linear(5, 3)", "nn.Linear(5, 3)", (4, 5), {}),
    ("Linear(5, 3, bias=False) on [2, 3, 5]", "nn.Linear(5, 3, bias=False)", (2, 3, 5), {}),
    ("Conv2d(3, 4, 3, stride=2, padding=1)", "nn.Conv2d(3, 4, 3, stride=2, padding=1)",
     (2, 3, 9, 9), {}),
    ("Conv2d(4, 6, (3, 2), dilation=2, groups=2, bias=False)",
     "nn.Conv2d(4, 6, (3, 2), dilation=2, groups=2, bias=False)", (2, 4, 10, 9), {}),
    ("Conv2d(3, 2, 4, padding='same')", "nn.Conv2d(3, 2, 4, padding='same')", (1, 3, 7, 6), {}),
    ("Conv2d(2, 3, 3, padding=1, padding_mode='reflect')",
     "nn.Conv2d(2, 3, 3, padding=1, padding_mode='reflect')", (2, 2, 6, 5), {}),
    ("ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)",
     "nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)", (2, 4, 5, 5), {}),
    ("BatchNorm1d(4) on [N, C], training (3 steps of running stats)", "nn.BatchNorm1d(4)",
     (8, 4), {"steps": 3}),
    ("BatchNorm1d(4) on [N, C, L]", "nn.BatchNorm1d(4)", (5, 4, 3), {}),
    ("BatchNorm2d(3, momentum=None), training", "nn.BatchNorm2d(3, momentum=None)",
     (4, 3, 5, 5), {"steps": 3}),
    ("BatchNorm2d(3) in eval mode", "nn.BatchNorm2d(3)", (4, 3, 5, 5), {"train": False}),
    ("BatchNorm2d(3, affine=False, track_running_stats=False)",
     "nn.BatchNorm2d(3, affine=False, track_running_stats=False)", (4, 3, 5, 5), {}),
    ("LayerNorm([4, 5])", "nn.LayerNorm([4, 5])", (3, 4, 5), {}),
    ("LayerNorm(6, elementwise_affine=False)", "nn.LayerNorm(6, elementwise_affine=False)",
     (2, 6), {}),
    ("GroupNorm(2, 4)", "nn.GroupNorm(2, 4)", (3, 4, 5, 5), {}),
    ("Embedding(10, 4, padding_idx=0)", "nn.Embedding(10, 4, padding_idx=0)", (3, 5),
     {"long_input": 10}),
    ("ReLU()", "nn.ReLU()", (4, 7), {}),
    ("GELU()", "nn.GELU()", (4, 7), {}),
    ("GELU(approximate='tanh')", "nn.GELU(approximate='tanh')", (4, 7), {}),
    ("Sigmoid()", "nn.Sigmoid()", (4, 7), {}),
    ("Tanh()", "nn.Tanh()", (4, 7), {}),
    ("Softmax(dim=1)", "nn.Softmax(dim=1)", (4, 7), {}),
    ("LogSoftmax(dim=-1)", "nn.LogSoftmax(dim=-1)", (4, 7), {}),
    ("LeakyReLU(0.2)", "nn.LeakyReLU(0.2)", (4, 7), {}),
    ("SiLU()", "nn.SiLU()", (4, 7), {}),
    ("MaxPool2d(2)", "nn.MaxPool2d(2)", (2, 3, 8, 8), {}),
    ("MaxPool2d(3, stride=2, padding=1, ceil_mode=True)",
     "nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)", (2, 3, 8, 7), {}),
    # windows larger than the plane: ceil_mode still gives one output
    ("MaxPool2d(5, stride=5, ceil_mode=True) over 3 x 4",
     "nn.MaxPool2d(5, stride=5, ceil_mode=True)", (2, 3, 3, 4), {}),
    ("AvgPool2d(5, 5, 2, ceil_mode=True) over 3 x 4",
     "nn.AvgPool2d(5, 5, 2, ceil_mode=True)", (2, 3, 3, 4), {}),
    ("AvgPool2d(3, 2, 1, count_include_pad=False)",
     "nn.AvgPool2d(3, 2, 1, count_include_pad=False)", (2, 3, 8, 7), {}),
    ("AdaptiveAvgPool2d((2, 3))", "nn.AdaptiveAvgPool2d((2, 3))", (2, 3, 7, 8), {}),
    ("AdaptiveAvgPool2d(1)", "nn.AdaptiveAvgPool2d(1)", (2, 3, 5, 5), {}),
    ("Flatten()", "nn.Flatten()", (2, 3, 4, 5), {}),
    ("Identity()", "nn.Identity()", (2, 3), {}),
    ("Dropout(0.5) in eval mode", "nn.Dropout(0.5)", (4, 7), {"train": False}),
    ("Conv1d(4, 6, 3, stride=2, padding=1, groups=2)",
     "nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)", (2, 4, 11), {}),
    ("Conv1d(3, 2, 4, padding='same', dilation=1)", "nn.Conv1d(3, 2, 4, padding='same')",
     (2, 3, 9), {}),
    ("ELU(alpha=0.5)", "nn.ELU(alpha=0.5)", (4, 7), {}),
    ("SELU()", "nn.SELU()", (4, 7), {}),
    ("Softplus(beta=2, threshold=5)", "nn.Softplus(beta=2, threshold=5)", (4, 7), {}),
    ("Hardtanh(-0.5, 0.7)", "nn.Hardtanh(-0.5, 0.7)", (4, 7), {}),
    ("ReLU6()", "nn.ReLU6()", (4, 7), {}),
    ("Mish()", "nn.Mish()", (4, 7), {}),
    ("Hardswish()", "nn.Hardswish()", (4, 7), {}),
    ("Hardsigmoid()", "nn.Hardsigmoid()", (4, 7), {}),
    ("LogSigmoid()", "nn.LogSigmoid()", (4, 7), {}),
    ("Softmin(dim=0)", "nn.Softmin(dim=0)", (4, 7), {}),
    ("Unflatten(1, (2, 3))", "nn.Unflatten(1, (2, 3))", (4, 6, 5), {}),
    ("Upsample(scale_factor=2)", "nn.Upsample(scale_factor=2)", (2, 3, 4, 5), {}),
    ("Upsample(size=(7, 9), mode='bilinear', align_corners=False)",
     "nn.Upsample(size=(7, 9), mode='bilinear', align_corners=False)", (2, 3, 4, 5), {}),
    ("Upsample(scale_factor=2, mode='bilinear', align_corners=True)",
     "nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)", (2, 3, 4, 5), {}),
    ("ZeroPad2d((1, 2, 0, 3))", "nn.ZeroPad2d((1, 2, 0, 3))", (2, 3, 4, 5), {}),
    ("ConstantPad2d(2, 0.5)", "nn.ConstantPad2d(2, 0.5)", (2, 3, 4, 5), {}),
    ("ReflectionPad2d(2)", "nn.ReflectionPad2d(2)", (2, 3, 4, 5), {}),
    ("ReplicationPad2d((1, 0, 2, 1))", "nn.ReplicationPad2d((1, 0, 2, 1))", (2, 3, 4, 5), {}),
    ("TransformerEncoderLayer(8, 2, 16, dropout=0.0)",
     "nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)", (5, 3, 8), {"tol": 1e-4}),
    ("TransformerEncoderLayer(8, 4, 12, 0.0, 'gelu', batch_first=True, norm_first=True)",
     "nn.TransformerEncoderLayer(8, 4, 12, 0.0, 'gelu', batch_first=True, norm_first=True)",
     (3, 5, 8), {"tol": 1e-4}),
    ("TransformerEncoder(layer, 2, norm=LayerNorm(8))",
     "nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, "
     "norm=nn.LayerNorm(8), enable_nested_tensor=False)", (5, 3, 8), {"tol": 1e-4}),
    ("Sequential MLP", "nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), "
     "nn.Linear(16, 10))", (5, 3, 4), {}),
    ("Sequential CNN", "nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), "
     "nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), "
     "nn.Flatten(), nn.Linear(8, 10))", (3, 1, 10, 10), {"tol": 1e-4}),
]

for desc, expr, shape, opts in MODULES:
    module_case(desc, C(expr), C(expr), shape, **opts)


def loss_case(desc, expr, make_inputs, tol=1e-5):
    def run():
        need_torch()
        torch.manual_seed(1)
        x, target = make_inputs()
        tl = eval(expr, {"nn": tnn, "w": torch.tensor([0.5, 1.0, 2.0, 1.5, 0.2])})
        wl = eval(expr, {"nn": nn, "w": to_weft(torch.tensor([0.5, 1.0, 2.0, 1.5, 0.2]))})
        xt = x.clone().requires_grad_(True)
        xw = to_weft(x).requires_grad_(True)
        lt = tl(xt, target)
        lw = wl(xw, to_weft(target))
        close(lw, lt, "loss", tol, tol)
        g = torch.randn_like(lt)
        lt.backward(g)
        lw.backward(to_weft(g))
        close(xw.grad, xt.grad, "input gradient", tol, tol)

    run.__doc__ = "nn.%s matches torch: value and input gradient" % desc
    test(run)


def logits_and_classes(ignore=False):
    def make():
        x = torch.randn(6, 5)
        t = torch.randint(0, 5, (6,))
        if ignore:
            t[2] = -100
        return x, t
    return make


def same_shape(binary=False):
    def make():
        x = torch.randn(4, 5)
        t = torch.rand(4, 5) if binary else torch.randn(4, 5)
        return x, t
    return make


def log_probs():
    x = torch.randn(6, 5).log_softmax(1)
    return x, torch.randint(0, 5, (6,))


LOSSES = [
    ("CrossEntropyLoss()", "nn.CrossEntropyLoss()", logits_and_classes()),
    ("CrossEntropyLoss(weight, ignore_index=-100) with an ignored target",
     "nn.CrossEntropyLoss(weight=w)", logits_and_classes(ignore=True)),
    ("CrossEntropyLoss(label_smoothing=0.1, reduction='sum')",
     "nn.CrossEntropyLoss(label_smoothing=0.1, reduction='sum')", logits_and_classes()),
    ("CrossEntropyLoss(reduction='none')", "nn.CrossEntropyLoss(reduction='none')",
     logits_and_classes()),
    ("NLLLoss()", "nn.NLLLoss()", log_probs),
    ("NLLLoss(weight, reduction='sum')", "nn.NLLLoss(weight=w, reduction='sum')", log_probs),
    ("MSELoss()", "nn.MSELoss()", same_shape()),
    ("MSELoss(reduction='none')", "nn.MSELoss(reduction='none')", same_shape()),
    ("L1Loss()", "nn.L1Loss()", same_shape()),
    ("L1Loss(reduction='sum')", "nn.L1Loss(reduction='sum')", same_shape()),
    ("SmoothL1Loss()", "nn.SmoothL1Loss()", same_shape()),
    ("SmoothL1Loss(beta=0.5, reduction='none')", "nn.SmoothL1Loss(beta=0.5, reduction='none')",
     same_shape()),
    ("HuberLoss()", "nn.HuberLoss()", same_shape()),
    ("HuberLoss(delta=0.4, reduction='sum')", "nn.HuberLoss(delta=0.4, reduction='sum')",
     same_shape()),
    ("BCELoss(weight)", "nn.BCELoss(weight=w)", lambda: (torch.rand(4, 5) * 0.9 + 0.05,
                                                        torch.rand(4, 5))),
    ("BCEWithLogitsLoss()", "nn.BCEWithLogitsLoss()", same_shape(binary=True)),
    ("BCEWithLogitsLoss(pos_weight)", "nn.BCEWithLogitsLoss(pos_weight=w)",
     same_shape(binary=True)),
]

for desc, expr, make in LOSSES:
    loss_case(desc, expr, make)


# ----------------------------------------------------------- initialisation
@test
def default_init_like_torch():
    """Linear and Conv2d initialise as torch: weight and bias uniform within 1/sqrt(fan_in)"""
    weft.manual_seed(0)
    for m, fan_in in ((nn.Linear(400, 300), 400), (nn.Conv2d(16, 32, 5), 16 * 25)):
        bound = 1 / math.sqrt(fan_in)
        for name, p in m.named_parameters():
            biggest = p.abs().max().item()
            if not 0.95 * bound < biggest <= bound:
                raise AssertionError("%s.%s: largest |value| %g, bound %g"
                                     % (type(m).__name__, name, biggest, bound))
        w = m.weight
        std = w.std(None).item()
        if abs(std - bound / math.sqrt(3)) > 0.05 * bound:
            raise AssertionError("%s.weight: std %g, uniform's %g"
                                 % (type(m).__name__, std, bound / math.sqrt(3)))


@test
def init_functions():
    """nn.init: calculate_gain, kaiming/xavier bounds, constant, eye, trunc_normal within [a, b]"""
    eq(nn.init.calculate_gain("relu"), math.sqrt(2.0))
    eq(nn.init.calculate_gain("leaky_relu", 0.2), math.sqrt(2.0 / 1.04))
    w = weft.empty([64, 32])
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6.0 / 96)
    if not w.abs().max().item() <= bound:
        raise AssertionError("xavier_uniform_ out of its bound")
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    std = w.std(None).item()
    if abs(std - math.sqrt(2.0 / 64)) > 0.02:
        raise AssertionError("kaiming_normal_ std %g" % std)
    nn.init.constant_(w, 0.25)
    eq(w.min().item(), 0.25)
    e = weft.empty([3, 4])
    nn.init.eye_(e)
    eq(e.tolist(), [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]])
    t = weft.empty([10000])
    nn.init.trunc_normal_(t, std=1.0, a=-0.5, b=1.0)
    if t.min().item() < -0.5 or t.max().item() > 1.0:
        raise AssertionError("trunc_normal_ outside [a, b]")
    raises(ValueError, nn.init.kaiming_uniform_, weft.empty([3]), contains="fewer than 2")


@test
def dropout_in_training():
    """Dropout(p) in training zeroes about p of the elements and scales the rest by 1/(1-p)"""
    x = weft.ones([200, 100])
    y = nn.Dropout(0.3)(x)
    zeros = (y == 0).sum(None, False).item()
    if abs(zeros / 20000 - 0.3) > 0.02:
        raise AssertionError("dropped %d of 20000" % zeros)
    kept = y.max().item()
    if abs(kept - 1 / 0.7) > 1e-5:
        raise AssertionError("kept values scaled to %g" % kept)
    raises(ValueError, nn.Dropout, 1.5, contains="between 0 and 1")


# -------------------------------------------------------------- Module API
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU())
        self.head = nn.ModuleDict({"fc": nn.Linear(8, 3)})
        self.blocks = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 2)])
        self.scale = nn.Parameter(weft.ones([1]))
        self.register_buffer("steps", weft.zeros([], dtype=weft.int64))
        self.register_buffer("cache", weft.zeros([2]), persistent=False)

    def forward(self, x):
        x = self.features(x).flatten(1)
        x = self.head["fc"](x[:, :8])
        for b in self.blocks:
            x = b(x)
        return x * self.scale


NET_KEYS = ["scale", "steps", "features.0.weight", "features.0.bias", "features.1.weight",
            "features.1.bias", "features.1.running_mean", "features.1.running_var",
            "features.1.num_batches_tracked", "head.fc.weight", "head.fc.bias",
            "blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias"]


@test
def module_tree():
    """Module: named_parameters, buffers, children, modules and state_dict keys in torch's order"""
    net = Net()
    eq(list(net.state_dict()), NET_KEYS)
    eq([n for n, _ in net.named_parameters()],
       [k for k in NET_KEYS if k != "steps" and "running" not in k and "num_batches" not in k])
    eq([n for n, _ in net.named_buffers()],
       ["steps", "cache", "features.1.running_mean", "features.1.running_var",
        "features.1.num_batches_tracked"])
    eq([n for n, _ in net.named_children()], ["features", "head", "blocks"])
    eq(len(list(net.modules())), 10)
    eq(len(list(net.parameters())), 11)
    if not all(isinstance(p, nn.Parameter) for p in net.parameters()):
        raise AssertionError("a parameter is not an nn.Parameter")
    if isinstance(net.steps, nn.Parameter):
        raise AssertionError("a buffer counts as a parameter")
    eq(net.get_submodule("head.fc").out_features, 3)


@test
def module_keys_like_torch():
    """Module: the state_dict keys of a nested model equal torch's for the same structure"""
    need_torch()

    def build(lib):
        return lib.Sequential(lib.Conv2d(1, 2, 3), lib.BatchNorm2d(2),
                              lib.Sequential(lib.Flatten(), lib.Linear(2, 3), lib.LayerNorm(3)),
                              lib.ModuleList([lib.Embedding(4, 2), lib.GroupNorm(1, 2)]))

    eq(list(build(nn).state_dict()), list(build(tnn).state_dict()))


@test
def state_dict_round_trip():
    """state_dict -> load_state_dict into a fresh model gives the same outputs"""
    weft.manual_seed(1)
    a, b = Net(), Net()
    a.train()
    a(weft.randn(4, 1, 6, 6))  # moves running stats
    a.eval()
    b.eval()
    x = weft.randn(2, 1, 6, 6)
    result = b.load_state_dict(a.state_dict())
    eq((result.missing_keys, result.unexpected_keys), ([], []))
    eq(b(x).tolist(), a(x).tolist())
    eq(b.features[1].num_batches_tracked.item(), 1)
    sd = a.state_dict()
    if sd["head.fc.weight"].requires_grad:
        raise AssertionError("state_dict tensors should be detached")
    eq(sd["head.fc.weight"].data_ptr(), a.head["fc"].weight.data_ptr(), "shares memory")
    if a.state_dict(keep_vars=True)["head.fc.weight"] is not a.head["fc"].weight:
        raise AssertionError("keep_vars=True should give the parameters themselves")


@test
def strict_load_messages():
    """load_state_dict(strict): missing, unexpected and mismatched keys raise clear RuntimeErrors"""
    net = Net()
    sd = net.state_dict()
    del sd["head.fc.bias"]
    sd["head.fc.extra"] = weft.zeros([1])
    e = raises(RuntimeError, net.load_state_dict, sd)
    msg = str(e)
    for part in ("Error(s) in loading state_dict for Net",
                 'Missing key(s) in state_dict: "head.fc.bias"',
                 'Unexpected key(s) in state_dict: "head.fc.extra"'):
        if part not in msg:
            raise AssertionError("message %r lacks %r" % (msg, part))
    result = net.load_state_dict(sd, strict=False)
    eq(result.missing_keys, ["head.fc.bias"])
    eq(result.unexpected_keys, ["head.fc.extra"])
    sd = net.state_dict()
    sd["blocks.1.weight"] = weft.zeros([5, 3])
    raises(RuntimeError, net.load_state_dict, sd,
           contains="size mismatch for blocks.1.weight: copying a param with shape [5, 3] from "
                    "checkpoint, the shape in current model is [2, 3]")
    sd = net.state_dict()
    sd["cache"] = weft.zeros([2])
    raises(RuntimeError, net.load_state_dict, sd, contains='Unexpected key(s) in state_dict: "cache"')
    raises(TypeError, net.load_state_dict, [1, 2], contains="dict-like")


@test
def train_eval_zero_grad_apply():
    """Module: train/eval reach every submodule; zero_grad; apply; requires_grad_"""
    net = Net()
    net.eval()
    if any(m.training for m in net.modules()):
        raise AssertionError("eval() left a module in training mode")
    net.train()
    if not all(m.training for m in net.modules()):
        raise AssertionError("train() left a module in eval mode")
    net(weft.randn(2, 1, 6, 6)).sum().backward()
    grads = [p.grad for p in net.parameters()]
    if any(g is None for g in grads):
        raise AssertionError("a parameter got no gradient")
    net.zero_grad()
    eq(sum(p.grad.abs().sum(None, False).item() for p in net.parameters()), 0.0)
    net.zero_grad(set_to_none=True)
    eq([p.grad for p in net.parameters()], [None] * 11)
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    eq(seen[-1], "Net")
    eq(seen[:3], ["Conv2d", "BatchNorm2d", "ReLU"])
    net.requires_grad_(False)
    eq([p.requires_grad for p in net.parameters()], [False] * 11)


@test
def forward_hooks():
    """Module: forward pre-hooks and hooks run, may replace inputs and outputs, and can be removed"""
    lin = nn.Linear(3, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, inp: (inp[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, inp, out: calls.append(out.shape) or out + 1)
    y = lin(weft.randn(4, 3))
    eq(calls, [(4, 2)])
    expected = (lin.bias + 1).tolist()
    for row in y.tolist():
        for got, want in zip(row, expected):
            if abs(got - want) > 1e-6:
                raise AssertionError("hooks did not replace input and output")
    h1.remove()
    h2.remove()
    x = weft.randn(4, 3)
    eq(lin(x).tolist(), F.linear(x, lin.weight, lin.bias).tolist())
    eq(len(calls), 1)


@test
def containers():
    """Sequential, ModuleList and ModuleDict: indexing, slicing, append, insert, len, iteration"""
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    eq(len(seq), 3)
    eq(type(seq[-1]).__name__, "Linear")
    eq(len(seq[1:]), 2)
    seq.append(nn.Sigmoid())
    eq(list(seq.state_dict()), ["0.weight", "0.bias", "2.weight", "2.bias"])
    eq(seq(weft.randn(5, 2)).shape, (5, 1))
    ml = nn.ModuleList([nn.ReLU()])
    ml.append(nn.Tanh())
    ml.insert(0, nn.Linear(1, 1))
    eq([type(m).__name__ for m in ml], ["Linear", "ReLU", "Tanh"])
    eq(list(ml.state_dict()), ["0.weight", "0.bias"])
    del ml[0]
    eq(len(ml), 2)
    md = nn.ModuleDict([("a", nn.Linear(1, 2)), ("b", nn.ReLU())])
    eq(list(md.keys()), ["a", "b"])
    eq("a" in md, True)
    md.pop("b")
    eq(len(md), 1)
    raises(TypeError, nn.ModuleList().append, 3, contains="not a Module subclass")
    raises(IndexError, seq.__getitem__, 7)


def close_lists(a, b, tol):
    flat_a = weft.tensor(a).flatten().tolist()
    flat_b = weft.tensor(b).flatten().tolist()
    for u, v in zip(flat_a, flat_b):
        if abs(u - v) > tol:
            raise AssertionError("%g != %g" % (u, v))


@test
def module_to_dtype():
    """Module.to(float64)/.double(): floating parameters and buffers convert, int64 buffers stay"""
    net = Net()
    x = weft.randn(2, 1, 6, 6)
    net.eval()
    y32 = net(x)
    net.to(weft.float64)
    eq({str(p.dtype) for p in net.parameters()}, {"weft.float64"})
    eq(str(net.features[1].running_mean.dtype), "weft.float64")
    eq(str(net.steps.dtype), "weft.int64")
    if not all(isinstance(p, nn.Parameter) for p in net.parameters()):
        raise AssertionError("to() lost the Parameter mark")
    y64 = net(x.to(weft.float64))
    close_lists(y64.tolist(), y32.tolist(), 1e-5)
    net.float()
    eq({str(p.dtype) for p in net.parameters()}, {"weft.float32"})
    raises(TypeError, net.to, weft.int32, contains="floating point")
    before = list(net.parameters())
    net.to("cpu")
    if any(a is not b for a, b in zip(before, net.parameters())):
        raise AssertionError("to() the device it is on replaced parameters")
    if "cuda" not in [str(d).split(":")[0] for d in weft.devices()]:
        raises(RuntimeError, net.to, "cuda", contains="cuda")
        if any(a is not b for a, b in zip(before, net.parameters())):
            raise AssertionError("a failed to() changed the module")
    # tied weights stay tied
    emb, out = nn.Embedding(5, 3), nn.Linear(3, 5, bias=False)
    out.weight = emb.weight
    tied = nn.Sequential(emb, out).double()
    if tied[0].weight is not tied[1].weight:
        raise AssertionError("to() untied a shared parameter")
    eq(len(list(tied.parameters())), 1)


@test
def assignment_rules():
    """Module: parameters only by nn.Parameter; super().__init__ first; clear TypeErrors"""
    lin = nn.Linear(2, 2)
    raises(TypeError, setattr, lin, "weight", weft.zeros([2, 2]), contains="parameter 'weight'")
    lin.weight = nn.Parameter(weft.zeros([2, 2]))
    eq(lin.weight.tolist(), [[0, 0], [0, 0]])
    lin.plain = weft.zeros([1])  # a plain tensor attribute is neither parameter nor buffer
    eq("plain" in lin.state_dict(), False)

    class Early(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(1, 1)

    raises(AttributeError, Early, contains="super().__init__()")
    raises(TypeError, nn.Parameter, [1.0, 2.0], contains="weft.Tensor")
    p = nn.Parameter(weft.zeros([3]))
    eq((p.requires_grad, p.is_leaf), (True, True))
    eq(nn.Parameter(weft.zeros([3]), requires_grad=False).requires_grad, False)
    raises(AttributeError, getattr, lin, "nothing", contains="'Linear' object has no attribute")


@test
def parameter_is_a_tensor_subclass():
    """nn.Parameter subclasses weft.Tensor as torch's: shares data's memory, a leaf;
    operators give plain tensors; attributes, weakrefs; user subclasses"""
    import gc
    import weakref
    data = weft.arange(0, 6, dtype=weft.float32).reshape([2, 3])
    p = nn.Parameter(data)
    eq((type(p) is nn.Parameter, isinstance(p, weft.Tensor), issubclass(nn.Parameter, weft.Tensor)),
       (True, True, True))
    eq((p.requires_grad, p.is_leaf, p.data_ptr() == data.data_ptr()), (True, True, True))
    data[0, 0] = 7.0  # the same memory
    eq(p[0, 0].item(), 7.0)
    eq(type(p * 2) is weft.Tensor, True)
    eq(repr(p).startswith("Parameter containing:"), True)
    p.note = "x"  # a subclass instance has a __dict__
    eq(p.note, "x")
    ref = weakref.ref(p)
    del p
    gc.collect()
    eq(ref(), None)
    lin = nn.Linear(3, 2)
    lin.weight.sum().backward()
    eq((type(lin.weight) is nn.Parameter, lin.weight.grad.shape), (True, (2, 3)))
    eq(type(lin.to(weft.float64).weight) is nn.Parameter, True)
    raises(TypeError, weft.Tensor._make_subclass, int, weft.ones([1]), contains="subclass of weft.Tensor")

    class Mine(weft.Tensor):
        pass

    m = Mine([1.0, 2.0])
    eq((type(m) is Mine, m.tolist(), type(m + 1) is weft.Tensor), (True, [1.0, 2.0], True))


@test
def bad_input_errors():
    """bad input: RuntimeError naming the module and parameter, TypeError for non-tensors"""
    raises(RuntimeError, nn.Linear(3, 2), weft.randn(4, 5), contains="in_features=3")
    raises(TypeError, nn.Linear(3, 2), [1.0, 2.0, 3.0], contains="Linear.forward")
    raises(RuntimeError, nn.Conv2d(3, 2, 3), weft.randn(1, 4, 5, 5), contains="in_channels")
    raises(RuntimeError, nn.Conv2d(3, 2, 3), weft.randn(5, 5), contains="Conv2d: expected 3D or 4D")
    raises(RuntimeError, nn.BatchNorm2d(3), weft.randn(2, 3, 4),
           contains="BatchNorm2d: expected 4D")
    raises(RuntimeError, nn.BatchNorm1d(3), weft.randn(2, 4), contains="num_features")
    raises(RuntimeError, nn.LayerNorm(4), weft.randn(2, 5), contains="normalized_shape=[4]")
    raises(RuntimeError, nn.MSELoss(), weft.randn(2, 3), weft.randn(3, 2),
           contains="mse_loss: target size [3, 2]")
    raises(TypeError, nn.CrossEntropyLoss(), weft.randn(2, 3), [0, 1],
           contains="cross_entropy: argument 'target'")
    raises(ValueError, nn.CrossEntropyLoss, reduction="average", contains="reduction")
    raises(ValueError, nn.Conv2d, 3, 4, 3, groups=2, contains="in_channels must be divisible")
    raises(ValueError, nn.Conv2d, 3, 4, 3, stride=2, padding="same", contains="strided")
    raises(TypeError, nn.Linear, 3.5, 2, contains="in_features must be an int")


@test
def functional_names():
    """nn.functional: torch's names and defaults (softmax's implicit dim, pools' stride=kernel)"""
    x = weft.randn(2, 3, 8, 8)
    eq(F.max_pool2d(x, 2).shape, (2, 3, 4, 4))
    eq(F.avg_pool2d(x, 4).shape, (2, 3, 2, 2))
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    eq(str(idx.dtype), "weft.int64")
    eq(F.adaptive_avg_pool2d(x, (None, 2)).shape, (2, 3, 8, 2))
    close_lists(F.softmax(weft.randn(2, 5)).sum(1, False).tolist(), [1.0, 1.0], 1e-6)
    eq(F.one_hot(weft.tensor([0, 2]), 3).tolist(), [[1, 0, 0], [0, 0, 1]])
    eq(F.relu(weft.tensor([-1.0, 2.0])).tolist(), [0.0, 2.0])
    y = weft.tensor([-1.0, 2.0])
    F.relu(y, inplace=True)
    eq(y.tolist(), [0.0, 2.0])


@test
def repr_like_torch():
    """print(model) shows what torch shows for the same model"""
    need_torch()

    def build(lib):
        return lib.Sequential(
            lib.Conv2d(1, 4, 3, padding=1, bias=False), lib.BatchNorm2d(4), lib.ReLU(),
            lib.MaxPool2d(2), lib.AvgPool2d(2), lib.AdaptiveAvgPool2d((2, 2)), lib.Dropout(0.25),
            lib.Flatten(), lib.Linear(16, 8), lib.LayerNorm(8), lib.GELU(), lib.Softmax(dim=1),
            lib.ModuleList([lib.Embedding(10, 3, padding_idx=0), lib.GroupNorm(2, 4),
                            lib.Identity(), lib.Sigmoid(), lib.Tanh()]),
            lib.ModuleDict({"up": lib.ConvTranspose2d(4, 2, 2, stride=2)}),
            lib.CrossEntropyLoss())

    eq(repr(build(nn)), repr(build(tnn)))


@test
def conv_transpose_output_size():
    """ConvTranspose2d(output_size=...) picks torch's output padding; impossible sizes raise"""
    need_torch()
    torch.manual_seed(0)
    tm = tnn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    wm = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    copy_state(wm, tm)
    x = torch.randn(1, 3, 5, 5)
    for size in ((9, 9), (10, 9), (1, 2, 10, 10)):
        close(wm(to_weft(x), output_size=size), tm(x, output_size=size), "output_size %s" % (size,))
    raises(ValueError, wm, to_weft(x), output_size=(12, 12), contains="not reachable")


@test
def embedding_from_pretrained():
    """Embedding.from_pretrained: the given rows, frozen by default"""
    rows = weft.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    emb = nn.Embedding.from_pretrained(rows)
    eq(emb(weft.tensor([2, 0])).tolist(), [[5.0, 6.0], [1.0, 2.0]])
    eq(emb.weight.requires_grad, False)
    eq(nn.Embedding.from_pretrained(rows, freeze=False).weight.requires_grad, True)


def attention_case(desc, kwargs, call, batched=True):
    def run():
        need_torch()
        torch.manual_seed(2)
        tm = tnn.MultiheadAttention(**kwargs).eval()
        wm = nn.MultiheadAttention(**kwargs).eval()
        eq(list(wm.state_dict()), list(tm.state_dict()), "parameter names")
        copy_state(wm, tm)
        L, S, N, E = 4, 6, 3, kwargs["embed_dim"]
        first = kwargs.get("batch_first", False)
        shape = lambda n: ((N, n, E) if first else (n, N, E)) if batched else (n, E)
        q, k, v = torch.randn(*shape(L)), torch.randn(*shape(S)), torch.randn(*shape(S))
        extra_t, extra_w = call(L, S, N)
        tq, tk, tv = (t.clone().requires_grad_(True) for t in (q, k, v))
        wq, wk, wv = (to_weft(t).requires_grad_(True) for t in (q, k, v))
        tout, tweights = tm(tq, tk, tv, **extra_t)
        wout, wweights = wm(wq, wk, wv, **extra_w)
        close(wout, tout, "output")
        close(wweights, tweights, "attention weights")
        g = torch.randn_like(tout)
        tout.backward(g)
        wout.backward(to_weft(g))
        for name, a, b in (("query", wq, tq), ("key", wk, tk), ("value", wv, tv)):
            close(a.grad, b.grad, name + " gradient")
        for (name, p), (_, t) in zip(wm.named_parameters(), tm.named_parameters()):
            close(p.grad, t.grad, name + " gradient")

    run.__doc__ = "nn.MultiheadAttention %s matches torch: output, weights, gradients" % desc
    test(run)


def no_masks(L, S, N):
    return {}, {}


def masks(L, S, N):
    causal = torch.ones(L, S, dtype=torch.bool).triu(1)
    padding = torch.zeros(N, S, dtype=torch.bool)
    padding[0, -2:] = True
    return ({"attn_mask": causal, "key_padding_mask": padding},
            {"attn_mask": to_weft(causal), "key_padding_mask": to_weft(padding)})


def float_mask_per_head(L, S, N):
    m = torch.randn(N * 2, L, S)
    return ({"attn_mask": m, "average_attn_weights": False},
            {"attn_mask": to_weft(m), "average_attn_weights": False})


attention_case("(8, 2)", dict(embed_dim=8, num_heads=2), no_masks)
attention_case("(8, 4, batch_first=True) with causal and padding masks",
               dict(embed_dim=8, num_heads=4, batch_first=True), masks)
attention_case("(6, 2, bias=False) with a float mask per head, weights per head",
               dict(embed_dim=6, num_heads=2, bias=False), float_mask_per_head)
attention_case("(8, 2) on unbatched input", dict(embed_dim=8, num_heads=2), no_masks,
               batched=False)


@test
def deepcopy_module():
    """copy.deepcopy(model): equal outputs, its own parameters (still Parameters), tied stay tied"""
    import copy
    weft.manual_seed(4)
    net = Net()
    net(weft.randn(2, 1, 6, 6)).sum().backward()
    net.eval()
    twin = copy.deepcopy(net)
    x = weft.randn(2, 1, 6, 6)
    eq(twin(x).tolist(), net(x).tolist())
    eq(list(twin.state_dict()), list(net.state_dict()))
    for (name, a), (_, b) in zip(net.named_parameters(), twin.named_parameters()):
        if a is b or a.data_ptr() == b.data_ptr():
            raise AssertionError("%s is shared with the copy" % name)
        if not isinstance(b, nn.Parameter) or not b.requires_grad:
            raise AssertionError("%s lost its Parameter mark in the copy" % name)
        eq(b.grad.tolist(), a.grad.tolist(), name + " gradient")
    twin.scale.detach().fill_(5.0)
    eq(net.scale.tolist(), [1.0], "the original after a write to the copy")
    emb, out = nn.Embedding(5, 3), nn.Linear(3, 5, bias=False)
    out.weight = emb.weight
    tied = copy.deepcopy(nn.Sequential(emb, out))
    if tied[0].weight is not tied[1].weight:
        raise AssertionError("deepcopy untied a shared parameter")


done()
