import time, torch, weft, weft.optim as wo
from weft.optim.optimizer import Optimizer
N, E, R = 100, 10000, 30
def bench(make, params, setgrad):
    opt = make(params); setgrad()
    opt.step()
    t = time.perf_counter()
    for _ in range(R): opt.step()
    return (time.perf_counter() - t) / R * 1e3
for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad"):
    kw = dict(lr=0.01, momentum=0.9) if name in ("SGD", "RMSprop") else dict(lr=0.01)
    wp = [weft.randn(E, requires_grad=True) for _ in range(N)]
    def wg():
        for p in wp: p.grad = weft.randn(E)
    fused = bench(lambda p: getattr(wo, name)(p, **kw), wp, wg)
    cls = getattr(wo, name)
    class Loop(cls):  # the previous path: per-parameter composed operators
        _fusable = staticmethod(lambda p, g: False)
    loop = bench(lambda p: Loop(p, **kw), wp, wg)
    tp = [torch.randn(E, requires_grad=True) for _ in range(N)]
    def tg():
        for p in tp: p.grad = torch.randn(E)
    t0 = bench(lambda p: getattr(torch.optim, name)(p, foreach=False, **kw), tp, tg)
    t1 = bench(lambda p: getattr(torch.optim, name)(p, foreach=True, **kw), tp, tg)
    print("| %s | %.2f | %.2f | %.2f | %.2f |" % (name, fused, loop, t0, t1))
