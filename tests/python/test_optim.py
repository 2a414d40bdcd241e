"""weft.optim against torch 1.13's optim: each optimizer's trajectory over
20 steps from the same parameters with the same gradients, parameter
groups, state_dict/load_state_dict (a resumed run matches an uninterrupted
one), and each lr scheduler's learning rates (and OneCycleLR's momentum)
step by step.  The torch comparisons SKIP where torch is not installed."""
import math

import weft
import weft.optim as optim
from taplib import done, eq, raises, test
from torch_peer import close, need_torch, to_weft, torch

if torch is not None:
    print("# torch", torch.__version__)

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def make_params():
    torch.manual_seed(0)
    tp = [torch.randn(*s, requires_grad=True) for s in SHAPES]
    wp = [to_weft(p).requires_grad_(True) for p in tp]
    return tp, wp


def groups(params, split):
    """One group, or two groups where the second has its own lr."""
    if not split:
        return params
    return [{"params": params[:2]}, {"params": params[2:], "lr": 0.05}]


def run_steps(topt, wopt, tp, wp, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    for step in range(steps):
        for t, w in zip(tp, wp):
            g = torch.randn(t.shape, generator=gen)
            t.grad = g.clone()
            w.grad = to_weft(g)
        topt.step()
        wopt.step()
        for i, (t, w) in enumerate(zip(tp, wp)):
            close(w, t, "parameter %d after step %d" % (i, step + 1), rtol=1e-5, atol=1e-6)


CASES = [
    ("SGD(lr=0.1)", "SGD", dict(lr=0.1), False),
    ("SGD(momentum=0.9, dampening=0.1, weight_decay=0.01)", "SGD",
     dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01), False),
    ("SGD(nesterov=True, momentum=0.8) with two groups", "SGD",
     dict(lr=0.05, momentum=0.8, nesterov=True), True),
    ("SGD(maximize=True, momentum=0.5)", "SGD", dict(lr=0.05, momentum=0.5, maximize=True),
     False),
    ("Adam()", "Adam", dict(), False),
    ("Adam(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True) with two groups", "Adam",
     dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True), True),
    ("AdamW()", "AdamW", dict(lr=0.01), False),
    ("AdamW(weight_decay=0.1, amsgrad=True, maximize=True)", "AdamW",
     dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True), False),
    ("RMSprop()", "RMSprop", dict(lr=0.01), False),
    ("RMSprop(momentum=0.9, centered=True, weight_decay=0.01)", "RMSprop",
     dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01), False),
    ("Adagrad()", "Adagrad", dict(), False),
    ("Adagrad(lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1) two groups",
     "Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1),
     True),
]


def trajectory_case(desc, name, kwargs, split):
    def run():
        need_torch()
        tp, wp = make_params()
        topt = getattr(torch.optim, name)(groups(tp, split), **kwargs)
        wopt = getattr(optim, name)(groups(wp, split), **kwargs)
        run_steps(topt, wopt, tp, wp, 20, seed=1)
        for tg, wg in zip(topt.param_groups, wopt.param_groups):
            eq({k: v for k, v in wg.items() if k not in ("params", "foreach")},
               {k: v for k, v in tg.items() if k in wg and k not in ("params", "foreach")},
               "hyperparameters")

    run.__doc__ = "optim.%s follows torch's trajectory over 20 steps" % desc
    test(run)


def resume_case(desc, name, kwargs, split):
    def run():
        need_torch()
        tp, wp = make_params()
        topt = getattr(torch.optim, name)(groups(tp, split), **kwargs)
        wopt = getattr(optim, name)(groups(wp, split), **kwargs)
        run_steps(topt, wopt, tp, wp, 10, seed=2)
        saved = wopt.state_dict()
        # a new optimizer over copies of the parameters, resumed from the dict
        wp2 = [w.detach().clone().requires_grad_(True) for w in wp]
        wopt2 = getattr(optim, name)(groups(wp2, split), lr=123.0)
        wopt2.load_state_dict(saved)
        eq(wopt2.param_groups[0]["lr"], wopt.param_groups[0]["lr"], "restored lr")
        run_steps(topt, wopt2, tp, wp2, 10, seed=3)

    run.__doc__ = "optim.%s: state_dict, load_state_dict into a new optimizer, " \
                  "10 more steps still follow torch" % desc
    test(run)


for case in CASES:
    trajectory_case(*case)
for case in (CASES[1], CASES[5], CASES[9], CASES[11]):
    resume_case(*case)


@test
def state_dict_layout():
    """Optimizer.state_dict: torch's layout (params by index, per-parameter state) and checks"""
    ws = [weft.zeros([2], requires_grad=True), weft.zeros([3], requires_grad=True)]
    opt = optim.Adam([{"params": [ws[0]]}, {"params": [ws[1]], "lr": 0.5}])
    for w in ws:
        w.grad = weft.ones(list(w.shape))
    opt.step()
    sd = opt.state_dict()
    eq([g["params"] for g in sd["param_groups"]], [[0], [1]])
    eq(sd["param_groups"][1]["lr"], 0.5)
    eq(sorted(sd["state"][1]), ["exp_avg", "exp_avg_sq", "step"])
    eq(sd["state"][0]["step"].item(), 1.0)
    other = optim.Adam([weft.zeros([2], requires_grad=True)])
    raises(ValueError, other.load_state_dict, sd, contains="number of parameter groups")
    other = optim.Adam([{"params": [weft.zeros([2], requires_grad=True)]},
                        {"params": [weft.zeros([3], requires_grad=True),
                                    weft.zeros([1], requires_grad=True)]}])
    raises(ValueError, other.load_state_dict, sd, contains="doesn't match the size")
    other = optim.Adam([{"params": [weft.zeros([2], requires_grad=True)]},
                        {"params": [weft.zeros([4], requires_grad=True)]}])
    raises(RuntimeError, other.load_state_dict, sd, contains="has shape [3]")


@test
def optimizer_arguments():
    """Optimizer: zero_grad, closures, add_param_group, and errors for bad arguments"""
    w = weft.ones([3], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum(None, False)
        loss.backward()
        return loss

    eq(opt.step(closure).item(), 3.0)
    eq(w.tolist(), [0.0, 0.0, 0.0])
    opt.zero_grad(set_to_none=True)
    eq(w.grad, None)
    raises(TypeError, optim.SGD, weft.zeros([2]), lr=0.1, contains="iterable")
    raises(ValueError, optim.SGD, [], lr=0.1, contains="empty parameter list")
    raises(ValueError, optim.SGD, [w], contains="required optimization parameter lr")
    raises(ValueError, optim.Adam, [w], lr=-1, contains="learning rate")
    raises(ValueError, optim.Adam, [w], betas=(1.0, 0.9), contains="beta parameter at index 0")
    raises(TypeError, optim.Adam, [w], lr="fast", contains="must be a number")
    raises(ValueError, optim.SGD, [w], lr=0.1, nesterov=True, contains="Nesterov")
    raises(ValueError, opt.add_param_group, {"params": [w]}, contains="more than one")
    raises(TypeError, optim.SGD, [[1.0]], lr=0.1, contains="optimize Tensors")
    opt.add_param_group({"params": weft.zeros([1], requires_grad=True), "lr": 0.1})
    eq([g["lr"] for g in opt.param_groups], [0.5, 0.1])
    eq(opt.param_groups[1]["momentum"], 0)


# ---------------------------------------------------------------- schedulers
SCHEDULES = [
    ("StepLR(step_size=3, gamma=0.5)", "StepLR", dict(step_size=3, gamma=0.5), "SGD"),
    ("MultiStepLR(milestones=[2, 5, 5, 9])", "MultiStepLR",
     dict(milestones=[2, 5, 5, 9], gamma=0.3), "SGD"),
    ("CosineAnnealingLR(T_max=7, eta_min=0.001) past T_max", "CosineAnnealingLR",
     dict(T_max=7, eta_min=0.001), "SGD"),
    ("LambdaLR(lambda e: 0.9 ** e)", "LambdaLR", dict(lr_lambda=lambda e: 0.9 ** e), "SGD"),
    ("ExponentialLR(gamma=0.9)", "ExponentialLR", dict(gamma=0.9), "SGD"),
    ("MultiplicativeLR(lambda e: 0.95)", "MultiplicativeLR", dict(lr_lambda=lambda e: 0.95),
     "SGD"),
    ("ConstantLR(factor=0.5, total_iters=4)", "ConstantLR", dict(factor=0.5, total_iters=4),
     "SGD"),
    ("LinearLR(start_factor=0.25, end_factor=0.9, total_iters=6)", "LinearLR",
     dict(start_factor=0.25, end_factor=0.9, total_iters=6), "SGD"),
    ("CosineAnnealingWarmRestarts(T_0=4, T_mult=2, eta_min=0.01)",
     "CosineAnnealingWarmRestarts", dict(T_0=4, T_mult=2, eta_min=0.01), "SGD"),
    ("OneCycleLR(max_lr=1.0, total_steps=25) with SGD momentum", "OneCycleLR",
     dict(max_lr=1.0, total_steps=25), "SGD"),
    ("OneCycleLR(three_phase=True, linear) with Adam's beta1", "OneCycleLR",
     dict(max_lr=[0.5, 0.2], epochs=5, steps_per_epoch=5, three_phase=True,
          anneal_strategy="linear"), "Adam"),
]


def schedule_case(desc, name, kwargs, opt_name):
    def run():
        need_torch()
        tp, wp = make_params()
        opt_kwargs = {"lr": 0.1, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.1}
        topt = getattr(torch.optim, opt_name)(groups(tp, True), **opt_kwargs)
        wopt = getattr(optim, opt_name)(groups(wp, True), **opt_kwargs)
        ts = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
        ws = getattr(optim.lr_scheduler, name)(wopt, **kwargs)
        steps = 24 if name == "OneCycleLR" else 30
        for step in range(steps + 1):
            for k, (a, b) in enumerate(zip(ws.get_last_lr(), ts.get_last_lr())):
                if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
                    raise AssertionError("step %d group %d: lr %r, torch %r" % (step, k, a, b))
            for wg, tg in zip(wopt.param_groups, topt.param_groups):
                for key in ("momentum", "betas"):
                    if key in tg and tg[key] != wg[key]:
                        a, b = wg[key], tg[key]
                        a = a if isinstance(a, tuple) else (a,)
                        b = b if isinstance(b, tuple) else (b,)
                        if any(not math.isclose(x, y, rel_tol=1e-9) for x, y in zip(a, b)):
                            raise AssertionError("step %d: %s %r, torch %r" % (step, key, a, b))
            if step < steps:
                topt.step()
                wopt.step()
                ts.step()
                ws.step()

    run.__doc__ = "lr_scheduler.%s: learning rates equal torch's at every step" % desc
    test(run)


for case in SCHEDULES:
    schedule_case(*case)


@test
def scheduler_state_dict():
    """lr_scheduler: state_dict/load_state_dict resume the schedule where it was"""
    w = weft.zeros([1], requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(5):
        sched.step()
    saved = sched.state_dict()
    eq("optimizer" in saved, False)
    opt2 = optim.SGD([w], lr=1.0)
    sched2 = optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(saved)
    eq(sched2.last_epoch, 5)
    opt2.param_groups[0]["lr"] = sched.get_last_lr()[0]
    sched.step()
    sched2.step()
    eq(sched2.get_last_lr(), sched.get_last_lr())
    eq(sched.get_last_lr(), [0.125])
    raises(TypeError, optim.lr_scheduler.StepLR, "sgd", 2, contains="not an Optimizer")
    raises(ValueError, optim.lr_scheduler.OneCycleLR, opt, 1.0,
           contains="total_steps OR (epochs AND steps_per_epoch)")


@test
def clip_grad_like_torch():
    """nn.utils.clip_grad_norm_ (2, 1, inf) and clip_grad_value_ scale gradients as torch"""
    need_torch()
    import weft.nn.utils as wutils
    for norm_type, max_norm in ((2.0, 1.0), (1.0, 2.0), (math.inf, 0.5), (2.0, 100.0)):
        tp, wp = make_params()
        for t, w in zip(tp, wp):
            g = torch.randn(t.shape)
            t.grad = g.clone()
            w.grad = to_weft(g)
        tn = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
        wn = wutils.clip_grad_norm_(wp, max_norm, norm_type)
        close(wn, tn, "total %s-norm" % norm_type)
        for i, (t, w) in enumerate(zip(tp, wp)):
            close(w.grad, t.grad, "gradient %d after clipping to %s-norm %s"
                  % (i, norm_type, max_norm))
    torch.nn.utils.clip_grad_value_(tp, 0.1)
    wutils.clip_grad_value_(wp, 0.1)
    for i, (t, w) in enumerate(zip(tp, wp)):
        close(w.grad, t.grad, "gradient %d after clip_grad_value_" % i)
    close(wutils.parameters_to_vector(wp), torch.nn.utils.parameters_to_vector(tp),
          "parameters_to_vector")
    wp[0].grad.fill_(float("nan"))
    raises(RuntimeError, wutils.clip_grad_norm_, wp, 1.0, error_if_nonfinite=True,
           contains="non-finite")


@test
def training_loop_like_torch():
    """a training loop (DataLoader, MLP with BatchNorm, CrossEntropyLoss, SGD, StepLR) follows torch's losses"""
    need_torch()
    import weft.nn as nn
    from weft.utils.data import DataLoader, TensorDataset
    torch.manual_seed(5)

    def build(lib):
        return lib.Sequential(lib.Linear(6, 16), lib.BatchNorm1d(16), lib.ReLU(),
                              lib.Dropout(0.0), lib.Linear(16, 3))

    tm, wm = build(torch.nn), build(nn)
    wm.load_state_dict({k: to_weft(v) for k, v in tm.state_dict().items()})
    x, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    tdl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    wdl = DataLoader(TensorDataset(to_weft(x), to_weft(y)), batch_size=8)
    topt = torch.optim.SGD(tm.parameters(), lr=0.2, momentum=0.9)
    wopt = optim.SGD(wm.parameters(), lr=0.2, momentum=0.9)
    tsched = torch.optim.lr_scheduler.StepLR(topt, 3, 0.5)
    wsched = optim.lr_scheduler.StepLR(wopt, 3, 0.5)
    tloss_fn, wloss_fn = torch.nn.CrossEntropyLoss(), nn.CrossEntropyLoss()
    losses = []
    for epoch in range(6):
        for (tx, ty), (wx, wy) in zip(tdl, wdl):
            topt.zero_grad()
            wopt.zero_grad()
            tl = tloss_fn(tm(tx), ty)
            wl = wloss_fn(wm(wx), wy)
            close(wl, tl, "loss in epoch %d" % epoch, rtol=1e-4, atol=1e-5)
            tl.backward()
            wl.backward()
            topt.step()
            wopt.step()
            losses.append(wl.item())
        tsched.step()
        wsched.step()
    for (name, w), t in zip(wm.state_dict().items(), tm.state_dict().values()):
        close(w, t, "final " + name, rtol=1e-4, atol=1e-5)
    if not losses[-1] < losses[0] * 0.7:
        raise AssertionError("the loss did not fall: %g -> %g" % (losses[0], losses[-1]))


@test
def plateau_like_torch():
    """lr_scheduler.ReduceLROnPlateau (min/rel and max/abs, cooldown, min_lr) follows torch"""
    need_torch()
    metrics = [1.0, 0.9, 0.95, 0.91, 0.92, 0.93, 0.8, 0.85, 0.86, 0.87, 0.88, 0.89, 0.9, 0.91,
               0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    for kwargs in (dict(patience=2, factor=0.5, cooldown=1),
                   dict(mode="max", threshold_mode="abs", threshold=0.05, patience=1,
                        factor=0.3, min_lr=[0.02, 0.01])):
        tp, wp = make_params()
        topt = torch.optim.SGD(groups(tp, True), lr=0.1)
        wopt = optim.SGD(groups(wp, True), lr=0.1)
        ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
        ws = optim.lr_scheduler.ReduceLROnPlateau(wopt, **kwargs)
        for i, m in enumerate(metrics):
            ts.step(m)
            ws.step(m)
            eq([g["lr"] for g in wopt.param_groups], [g["lr"] for g in topt.param_groups],
               "%s, after metric %d" % (kwargs, i))
    raises(ValueError, optim.lr_scheduler.ReduceLROnPlateau, wopt, factor=1.0, contains="< 1.0")


@test
def warm_restarts_with_epochs():
    """CosineAnnealingWarmRestarts.step(epoch) with fractional epochs follows torch"""
    need_torch()
    tp, wp = make_params()
    topt = torch.optim.SGD(tp, lr=0.1)
    wopt = optim.SGD(wp, lr=0.1)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0=3, T_mult=2)
    ws = optim.lr_scheduler.CosineAnnealingWarmRestarts(wopt, T_0=3, T_mult=2)
    for e in [0.5, 1.25, 2.9, 3.0, 7.5, 8.0, 20.0, 21.3]:
        ts.step(e)
        ws.step(e)
        if not math.isclose(ws.get_last_lr()[0], ts.get_last_lr()[0], rel_tol=1e-9):
            raise AssertionError("epoch %s: lr %r, torch %r" % (e, ws.get_last_lr(),
                                                                ts.get_last_lr()))


done()
