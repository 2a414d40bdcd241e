"""The sparse layouts from Python (issue 16) against Debian's PyTorch 1.13:
every operator on random patterns (nnz 0, duplicates, hybrid dimensions,
int32 and int64 CSR indices, float32 and float64), compared with
torch.sparse on the same indices and values; the refusals; DLPack's
BufferError.  Inputs are made with NumPy and handed to both frameworks."""
import math

import numpy as np
import torch

import weft
from taplib import Skip, done, eq, raises, test

print("# torch", torch.__version__)
rng = np.random.default_rng(1613)
DTYPES = [(np.float32, 1e-5), (np.float64, 1e-12)]


def need_plugin():
    if "sparse_coo" not in [l.name for l, _ in weft.layouts()]:
        raise Skip("libweft-sparse.so is not loaded")


def W(a):
    return weft.from_dlpack(np.ascontiguousarray(a))


def T(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def dense_np(t):
    """a weft tensor (any layout) as a NumPy array"""
    if t.layout != "strided":
        t = t.to_dense()
    return np.from_dlpack(t.contiguous()) if t.ndim else np.array(t.item())


def close(w, t, tol, what=""):
    t = t.to_dense() if t.layout != torch.strided else t
    a, b = dense_np(w), t.numpy()
    eq(a.shape, b.shape, what + " shape")
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    if not err <= tol * (1 + float(np.max(np.abs(b))) if b.size else 1):
        raise AssertionError("%s: differs from torch by %g" % (what, err))


def random_coo(shape, sparse_dim, nnz, dtype, dup=False):
    """the same COO tensor in both frameworks (duplicates if dup)"""
    idx = np.stack([rng.integers(0, shape[d], nnz) for d in range(sparse_dim)]).astype(np.int64)
    if dup and nnz:
        idx = np.concatenate([idx, idx[:, : nnz // 2]], axis=1)
    n = idx.shape[1]
    val = rng.standard_normal((n,) + tuple(shape[sparse_dim:])).astype(dtype)
    return (weft.sparse_coo_tensor(W(idx), W(val), list(shape)),
            torch.sparse_coo_tensor(T(idx), T(val), shape))


def patterns(dtype):
    """(name, weft COO, torch COO) over the issue's cases"""
    yield "empty", *random_coo((5, 4), 2, 0, dtype)
    yield "random", *random_coo((6, 5), 2, 9, dtype)
    yield "duplicates", *random_coo((6, 5), 2, 9, dtype, dup=True)
    yield "hybrid", *random_coo((6, 5, 3), 1, 4, dtype, dup=True)


@test
def layouts_and_names():
    """the plugin's layouts are weft.sparse_coo and weft.sparse_csr; is_sparse, _nnz and friends are Python values"""
    need_plugin()
    w, t = random_coo((4, 3), 2, 5, np.float32, dup=True)
    eq(w.layout == "sparse_coo", True)
    eq(w.layout == weft.sparse_coo, True)
    eq(w.is_sparse, True)
    eq(w.is_sparse_csr, False)
    eq(weft.ones(2).is_sparse, False)
    eq(w._nnz(), t._nnz())
    eq(w.is_coalesced(), t.is_coalesced())
    eq((w.sparse_dim(), w.dense_dim()), (t.sparse_dim(), t.dense_dim()))
    c = w.to_sparse_csr()
    eq(c.layout == weft.sparse_csr, True)
    eq(c.is_sparse_csr, True)


for dt, tol in DTYPES:
    for name, w, t in patterns(dt):

        def conversions(w=w, t=t, tol=tol):
            close(w, t, tol, "to_dense")
            wc, tc = w.coalesce(), t.coalesce()
            eq(wc.is_coalesced(), True)
            eq(wc._nnz(), tc._nnz(), "nnz after coalesce")
            eq(np.from_dlpack(wc.indices()).tolist(), tc.indices().tolist(), "indices")
            close(wc.values(), tc.values(), tol, "values")
            d = t.to_dense()
            close(W(d.numpy()).to_sparse(t.sparse_dim()), d.to_sparse(t.sparse_dim()), tol,
                  "to_sparse(sparse_dim)")
            if t.dense_dim() == 0:
                wr, tr = w.to_sparse_csr(), t.coalesce().to_sparse_csr()
                eq(np.from_dlpack(wr.crow_indices()).tolist(), tr.crow_indices().tolist(), "crow")
                eq(np.from_dlpack(wr.col_indices()).tolist(), tr.col_indices().tolist(), "col")
                close(wr.values(), tr.values(), tol, "CSR values")
                close(wr.to_sparse(), tr.to_sparse(), tol, "CSR -> COO")

        conversions.__doc__ = "%s %s: to_dense, coalesce, to_sparse, COO<->CSR" % (name, dt.__name__)
        test(conversions)

        def operators(w=w, t=t, tol=tol, dt=dt):
            w2, t2 = random_coo(tuple(t.shape), t.sparse_dim(), 7, dt, dup=True)
            close(weft.add(w, w2), torch.add(t, t2), tol, "sparse + sparse")
            close(weft.sub(w, w2, alpha=2.0), torch.sub(t, t2, alpha=2.0), tol, "sparse - 2 sparse")
            dd = rng.standard_normal(tuple(t.shape)).astype(dt)
            # torch 1.13 takes dense + sparse only; weft takes both orders
            close(weft.add(W(dd), w), torch.add(T(dd), t), tol, "dense + sparse")
            close(weft.add(w, W(dd)), torch.add(T(dd), t), tol, "sparse + dense")
            close(weft.mul(w, w2), torch.mul(t, t2), tol, "sparse * sparse")
            close(w * 2.5, t * 2.5, tol, "sparse * scalar")
            for op in ("neg", "abs", "sin", "tan", "tanh", "asin", "atan", "sinh", "expm1",
                       "log1p", "sign", "trunc", "floor", "ceil", "round", "erf", "erfinv"):
                # the inputs of asin/erfinv/log1p kept inside their domains
                arg = w * 0.05 if op in ("asin", "erfinv", "log1p") else w
                targ = t * 0.05 if op in ("asin", "erfinv", "log1p") else t
                close(getattr(weft, op)(arg), getattr(torch, op)(targ), tol * 10, op)
            # torch 1.13 has no sparse relu: the reference applies it to the values
            tc = t.coalesce()
            ref = torch.sparse_coo_tensor(tc.indices(), torch.relu(tc.values()), t.shape)
            close(weft.relu(w), ref, tol, "relu")
            close(weft.relu6(w * 4.0), torch.sparse_coo_tensor(
                tc.indices(), torch.nn.functional.relu6(tc.values() * 4.0), t.shape), tol, "relu6")
            close(weft.sqrt(weft.abs(w)), torch.sqrt(torch.abs(t)), tol, "sqrt")
            close(weft.sparse.sum(w), torch.sparse.sum(t), tol * 10, "sum")
            close(weft.sparse.sum(w, 0), torch.sparse.sum(t, 0), tol * 10, "sum(0)")
            # keepdim: torch 1.13 has no sparse kernel; its dense sum is the reference
            for dims in ([0], [1], [0, 1], list(range(t.ndim))):
                r = weft.sum(w, dims, True)
                every_sparse = all(d in dims for d in range(t.sparse_dim()))
                eq(r.layout, "strided" if every_sparse else "sparse_coo",
                   "sum keepdim %s layout" % dims)
                close(r, torch.sum(t.to_dense(), dims, keepdim=True), tol * 10,
                      "sum keepdim %s" % dims)
            close(w.clone(), t.clone(), tol, "clone")
            close(weft.cat([w, w2], 0), torch.cat([t, t2], 0), tol, "cat")
            ix = np.array([2, 0, 2], np.int64)
            close(weft.index_select(w, 0, W(ix)), torch.index_select(t, 0, T(ix)), tol,
                  "index_select")
            close(weft.sparse_narrow(w, 0, 1, 3), t.narrow_copy(0, 1, 3), tol, "narrow")
            close(weft.sparse_select(w, 0, 1), t.select(0, 1), tol, "select")
            if t.sparse_dim() == 2:
                close(weft.sparse_transpose(w, 0, 1), t.transpose(0, 1), tol, "transpose")
            # along the last dimension: a dense one of the hybrid pattern
            last = t.ndim - 1
            close(weft.index_select(w, last, W(ix[:2] % t.shape[last])),
                  torch.index_select(t, last, T(ix[:2] % t.shape[last])), tol,
                  "index_select, last dim")
            close(weft.sparse_narrow(w, last, 1, 2), t.narrow_copy(last, 1, 2), tol,
                  "narrow, last dim")
            close(weft.sparse_select(w, last, -1), t.select(last, -1), tol, "select, last dim")
            close(weft.cat([w, w2], last), torch.cat([t, t2], last), tol, "cat, last dim")
            if t.sparse_dim() == 2:
                # CSR (torch 1.13 has no index_select for it: the dense
                # result is the reference)
                wc, dense = w.to_sparse_csr(), t.to_dense()
                for d in (0, 1):
                    r = weft.index_select(wc, d, W(ix[:2]))
                    eq(r.layout, "sparse_csr", "CSR index_select(%d) stays CSR" % d)
                    close(r, torch.index_select(dense, d, T(ix[:2])), tol, "CSR index_select")
                    r = weft.sparse_narrow(wc, d, 1, 2)
                    eq(r.layout, "sparse_csr", "CSR narrow(%d) stays CSR" % d)
                    close(r, dense.narrow(d, 1, 2), tol, "CSR narrow")
                    close(weft.sparse_select(wc, d, 1), dense.select(d, 1), tol, "CSR select")

        operators.__doc__ = ("%s %s: add, sub, mul, unary, sum, cat, index_select, narrow, select"
                             " (sparse and dense dims, COO and CSR)" % (name, dt.__name__))
        test(operators)

    def products(dt=dt, tol=tol):
        for itype in (np.int64, np.int32):
            w, t = random_coo((30, 20), 2, 60, dt, dup=True)
            b = rng.standard_normal((20, 6)).astype(dt)
            v = rng.standard_normal(20).astype(dt)
            c = rng.standard_normal((30, 6)).astype(dt)
            tc = t.coalesce().to_sparse_csr()
            wc = weft.sparse_csr_tensor(W(tc.crow_indices().numpy().astype(itype)),
                                        W(tc.col_indices().numpy().astype(itype)),
                                        W(tc.values().numpy()), [30, 20])
            for what, ws in (("COO", w), ("CSR " + itype.__name__, wc)):
                close(weft.sparse.mm(ws, W(b)), torch.sparse.mm(t, T(b)), tol * 10, what + " mm")
                close(weft.mm(ws, W(b)), torch.mm(t, T(b)), tol * 10, what + " weft.mm")
                close(weft.matmul(ws, W(b)), torch.matmul(t, T(b)), tol * 10, what + " matmul")
                close(weft.mv(ws, W(v)), torch.mv(t, T(v)), tol * 10, what + " mv")
                close(weft.sparse.addmm(W(c), ws, W(b), beta=0.5, alpha=2.0),
                      torch.sparse.addmm(T(c), t, T(b), beta=0.5, alpha=2.0), tol * 10,
                      what + " addmm")
            w2, t2 = random_coo((20, 10), 2, 30, dt)
            # torch 1.13 without MKL has no CSR x CSR on the CPU: its dense product
            p = weft.mm(wc, w2.to_sparse_csr())
            eq(p.layout == "sparse_csr", True)
            close(p, torch.mm(tc.to_dense(), t2.to_dense()), tol * 10, "CSR x CSR")

    products.__doc__ = "%s: mm, matmul, mv, addmm (COO, CSR int32/int64), CSR x CSR" % dt.__name__
    test(products)


@test
def tolist_and_item():
    """tolist() and item() of a sparse tensor read its dense values (they read a NULL data
    pointer once sparse tensors could move between devices: found by fuzz_python_ops)"""
    need_plugin()
    eq(weft.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse().tolist(), [[0.0, 1.0], [2.0, 0.0]])
    eq(weft.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csr().tolist(), [[0.0, 1.0], [2.0, 0.0]])
    eq(weft.zeros([0, 4], dtype=weft.float64).to_sparse().tolist(), [])
    eq(weft.tensor([[5.0]]).to_sparse().item(), 5.0)


@test
def refusals():
    """bad input raises naming what is wrong; unsupported operators name themselves and the layout"""
    need_plugin()
    v = W(np.ones(3, np.float32))
    raises(IndexError, weft.sparse_coo_tensor, W(np.array([[0, 1, 5]], np.int64)), v, [3],
           contains="out of range")
    raises(IndexError, weft.sparse_coo_tensor, W(np.array([[0, -1, 1]], np.int64)), v, [3],
           contains="negative")
    raises(RuntimeError, weft.sparse_coo_tensor, W(np.array([[0, 1]], np.int64)), v, [3],
           contains="nnz mismatch")
    # check_invariants=False skips the range scan, as torch's does
    s = weft.sparse_coo_tensor(W(np.array([[0, 1, 5]], np.int64)), v, [3], check_invariants=False)
    eq(s._nnz(), 3)
    raises(RuntimeError, weft.sparse_csr_tensor, W(np.array([0, 2, 3], np.int64)),
           W(np.array([1, 0, 1], np.int64)), v, [2, 2], contains="sorted and distinct")
    w, _ = random_coo((4, 3), 2, 5, np.float32)
    e = raises(NotImplementedError, weft.exp, w, contains="sparse_coo")
    eq("exp" in str(e), True)
    raises(BufferError, w.__dlpack__, contains="sparse_coo")
    # what reads a strided tensor's strides refuses a sparse one by name
    # (stride() and the buffer protocol read NULL strides and crashed)
    raises(RuntimeError, w.stride, contains="layout 'sparse_coo' has no strides")
    raises(RuntimeError, w.stride, 0, contains="no strides")
    raises(BufferError, memoryview, w, contains="layout 'sparse_coo' has no strided memory")
    raises(BufferError, memoryview, w.to_sparse_csr(), contains="sparse_csr")
    eq(memoryview(w.to_dense()).shape, (4, 3), "a strided tensor's buffer as before")


def train_both(w0, batches, optimizer, **opts):
    """Embedding(sparse=True) from w0 in weft and in torch, the same steps
    of optimizer (its name in weft.optim and torch.optim) on sum(e(idx)^2):
    (weft embedding, weft optimizer, torch embedding)"""
    n, d = w0.shape
    e = weft.nn.Embedding(n, d, sparse=True, _weight=W(w0.copy()))
    te = torch.nn.Embedding(n, d, sparse=True, _weight=torch.from_numpy(w0.copy()))
    opt = getattr(weft.optim, optimizer)(e.parameters(), **opts)
    topt = getattr(torch.optim, optimizer)(te.parameters(), **opts)
    for idx in batches:
        opt.zero_grad()
        (e(W(idx)) ** 2).sum().backward()
        opt.step()
        topt.zero_grad()
        (te(torch.from_numpy(idx)) ** 2).sum().backward()
        topt.step()
    return e, opt, te


@test
def embedding_sparse_training():
    """Embedding(sparse=True) + SGD reaches the same parameters as the dense path and as torch"""
    need_plugin()
    n, d = 50, 8
    w0 = rng.standard_normal((n, d)).astype(np.float32)
    batches = [rng.integers(0, n, (6, 5)) for _ in range(4)]
    targets = [rng.standard_normal((6, 5, d)).astype(np.float32) for _ in range(4)]
    results = {}
    for sparse in (True, False):
        e = weft.nn.Embedding(n, d, sparse=sparse, _weight=W(w0.copy()))
        opt = weft.optim.SGD(e.parameters(), lr=0.05)
        for idx, tgt in zip(batches, targets):
            opt.zero_grad()
            loss = ((e(W(idx)) - W(tgt)) ** 2).sum()
            loss.backward()
            if sparse:
                eq(e.weight.grad.layout == "sparse_coo", True, "the gradient is sparse")
                eq(e.weight.grad._nnz() <= idx.size, True, "one row per looked-up index")
            opt.step()
        results[sparse] = np.from_dlpack(e.weight.detach()).copy()
    te = torch.nn.Embedding(n, d, sparse=True, _weight=torch.from_numpy(w0.copy()))
    topt = torch.optim.SGD(te.parameters(), lr=0.05)
    for idx, tgt in zip(batches, targets):
        topt.zero_grad()
        ((te(torch.from_numpy(idx)) - torch.from_numpy(tgt)) ** 2).sum().backward()
        topt.step()
    eq(float(np.max(np.abs(results[True] - results[False]))) < 1e-5, True, "sparse == dense")
    eq(float(np.max(np.abs(results[True] - te.weight.detach().numpy()))) < 1e-5, True,
       "== torch's sparse embedding")


@test
def sgd_momentum_on_sparse_gradients():
    """SGD with momentum (dampening, nesterov, maximize) on sparse embedding gradients matches torch 1.13's; weight_decay is refused by name, as torch's; the momentum buffer stays sparse"""
    need_plugin()
    n, d = 40, 4
    w0 = rng.standard_normal((n, d)).astype(np.float32)
    batches = [rng.integers(0, n, (5, 3)) for _ in range(4)]
    for opts in (dict(momentum=0.9), dict(momentum=0.5, dampening=0.3),
                 dict(momentum=0.9, nesterov=True), dict(momentum=0.9, maximize=True)):
        e, opt, te = train_both(w0, batches, "SGD", lr=0.05, **opts)
        buf = opt.state[e.weight]["momentum_buffer"]
        eq(buf.layout, "sparse_coo", "%s: the momentum buffer is sparse" % opts)
        eq(buf._nnz() <= n, True, "%s: and coalesced" % opts)
        close(e.weight.detach(), te.weight.detach(), 1e-5, str(opts))
    e = weft.nn.Embedding(n, d, sparse=True)
    opt = weft.optim.SGD(e.parameters(), lr=0.05, momentum=0.9, weight_decay=0.1)
    (e(W(batches[0])) ** 2).sum().backward()
    raises(RuntimeError, opt.step, contains="weight_decay")


@test
def sparse_adam():
    """SparseAdam and Adagrad on an Embedding(sparse=True) match torch's; SparseAdam also takes a dense gradient (lazily)"""
    need_plugin()
    n, d = 40, 6
    w0 = rng.standard_normal((n, d)).astype(np.float32)
    batches = [rng.integers(0, n, (5, 4)) for _ in range(5)]
    e, _, te = train_both(w0, batches, "SparseAdam", lr=0.01)
    err = float(np.max(np.abs(np.from_dlpack(e.weight.detach()) - te.weight.detach().numpy())))
    eq(err < 1e-5, True, "differs from torch by %g" % err)
    # Adagrad takes sparse gradients as torch's does
    e, _, te = train_both(w0, batches, "Adagrad", lr=0.1, lr_decay=0.01)
    err = float(np.max(np.abs(np.from_dlpack(e.weight.detach()) - te.weight.detach().numpy())))
    eq(err < 1e-5, True, "Adagrad differs from torch by %g" % err)
    # a dense gradient: only its nonzero rows move, as a sparse one's would
    p = W(w0.copy())
    p.requires_grad_(True)
    o = weft.optim.SparseAdam([p], lr=0.01)
    g = np.zeros((n, d), np.float32)
    g[3] = 1.0
    p.grad = W(g)
    o.step()
    moved = np.any(np.from_dlpack(p.detach()) != w0, axis=1)
    eq(moved.tolist(), [i == 3 for i in range(n)])


@test
def embedding_sparse_gradient():
    """the sparse gradient of embedding equals the dense one (padding row excluded), and accumulates sparse"""
    need_plugin()
    w = weft.randn(7, 3, dtype=weft.float64)
    w.requires_grad_(True)
    idx = W(np.array([[0, 2, 2], [6, 0, 3]], np.int64))
    g = W(rng.standard_normal((2, 3, 3)))
    weft.nn.functional.embedding(idx, w, padding_idx=3, sparse=True).backward(g)
    weft.nn.functional.embedding(idx, w, padding_idx=3, sparse=True).backward(g)
    sg = w.grad
    eq(sg.layout == "sparse_coo", True, "accumulated sparse + sparse stays sparse")
    w.grad = None
    weft.nn.functional.embedding(idx, w, padding_idx=3).backward(g)
    weft.nn.functional.embedding(idx, w, padding_idx=3).backward(g)
    eq(float(np.max(np.abs(dense_np(sg) - dense_np(w.grad)))) < 1e-12, True, "sparse == dense")


@test
def sparse_mm_gradients():
    """weft.sparse.mm's gradients match torch.sparse.mm's (the sparse operand's keeps its pattern; COO and CSR)"""
    need_plugin()
    d = rng.standard_normal((6, 5))
    d[rng.random((6, 5)) < 0.5] = 0
    b, g = rng.standard_normal((5, 3)), rng.standard_normal((6, 3))
    tA = torch.from_numpy(d).to_sparse().requires_grad_(True)
    tB = torch.from_numpy(b.copy()).requires_grad_(True)
    torch.sparse.mm(tA, tB).backward(torch.from_numpy(g))
    for conv in ("to_sparse", "to_sparse_csr"):
        A = getattr(W(d), conv)()
        A.requires_grad_(True)
        B = W(b.copy())
        B.requires_grad_(True)
        weft.sparse.mm(A, B).backward(W(g))
        eq(A.grad.layout == A.layout, True, "the sparse operand's gradient keeps its layout")
        close(A.grad, tA.grad, 1e-12, conv + ": d mat1")
        close(B.grad, tB.grad, 1e-12, conv + ": d mat2")


@test
def gradcheck_through_constructor_and_mm():
    """gradcheck: values -> sparse_coo_tensor -> weft.sparse.mm -> dense, and to_dense"""
    need_plugin()
    idx = W(np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]], np.int64))  # a duplicate at (0, 2)
    v = W(rng.standard_normal(5))
    v.requires_grad_(True)
    b = W(rng.standard_normal((3, 2)))
    b.requires_grad_(True)
    f = lambda v, b: weft.sparse.mm(weft.sparse_coo_tensor(idx, v, [4, 3]), b)  # noqa: E731
    eq(weft.autograd.gradcheck(f, (v, b)), True)
    g = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3]).to_dense() * 3.0  # noqa: E731
    eq(weft.autograd.gradcheck(g, (v,)), True)
    # values() takes a coalesced tensor (torch's rule): the duplicate at
    # (0, 2) is summed, and its two entries get the same gradient
    h = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3]).coalesce().values() * 2.0  # noqa: E731
    eq(weft.autograd.gradcheck(h, (v,)), True)


def sparse_operands(dtype):
    """(name, weft sparse matrix, torch COO of the same entries): COO with
    nnz 0, with duplicates, coalesced; CSR with int64 and int32 indices"""
    for name, w, t in list(patterns(dtype))[:3]:
        yield "coo " + name, w, t
    d = rng.standard_normal((6, 5)).astype(dtype)
    d[rng.random((6, 5)) < 0.6] = 0
    yield "coo coalesced", W(d).to_sparse(), torch.from_numpy(d).to_sparse()
    csr = W(d).to_sparse_csr()
    yield "csr int64", csr, torch.from_numpy(d).to_sparse()
    c32 = weft.sparse_csr_tensor(csr.crow_indices().to(weft.int32),
                                 csr.col_indices().to(weft.int32), csr.values(), [6, 5])
    yield "csr int32", c32, torch.from_numpy(d).to_sparse()


def with_grad(t):
    t.requires_grad_(True)
    return t


@test
def core_products_gradients():
    """weft.mm, weft.matmul, @, weft.mv and weft.addmm with a sparse operand: its gradient sparse on its pattern (torch.sparse.mm's), the dense one's dense"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in sparse_operands(dtype):
            k = w.shape[1]
            b = rng.standard_normal((k, 3)).astype(dtype)
            x = rng.standard_normal(k).astype(dtype)
            g = rng.standard_normal((w.shape[0], 3)).astype(dtype)
            tA, tB = t.detach().requires_grad_(True), T(b.copy()).requires_grad_(True)
            torch.sparse.mm(tA, tB).backward(T(g))
            for how in ("mm", "matmul", "@", "addmm"):
                A, B = with_grad(w.clone()), with_grad(W(b.copy()))
                if how == "mm":
                    y = weft.mm(A, B)
                elif how == "matmul":
                    y = weft.matmul(A, B)
                elif how == "@":
                    y = A @ B
                else:
                    C = with_grad(W(np.zeros((w.shape[0], 3), dtype)))
                    y = weft.addmm(C, A, B, beta=0.5, alpha=1.0)
                y.backward(W(g))
                what = "%s %s %s" % (np.dtype(dtype).name, name, how)
                eq(A.grad.layout, A.layout, what + ": d mat1's layout")
                eq(B.grad.layout, "strided", what + ": d mat2's layout")
                close(A.grad, tA.grad, tol, what + ": d mat1")
                close(B.grad, tB.grad, tol, what + ": d mat2")
                if how == "addmm":
                    close(C.grad, T(0.5 * g), tol, what + ": d self")
            # mv: torch.sparse.mm with a column
            tA2, tx = t.detach().requires_grad_(True), T(x.copy()).requires_grad_(True)
            torch.sparse.mm(tA2, tx[:, None]).backward(T(g[:, :1]))
            A, X = with_grad(w.clone()), with_grad(W(x.copy()))
            weft.mv(A, X).backward(W(g[:, 0].copy()))
            close(A.grad, tA2.grad, tol, name + " mv: d mat")
            close(X.grad, tx.grad, tol, name + " mv: d vec")


@test
def core_products_gradcheck():
    """gradcheck: values -> sparse_coo_tensor / sparse_csr_tensor -> weft.mm, weft.mv, weft.addmm (alpha, beta, broadcast self)"""
    need_plugin()
    idx = W(np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]], np.int64))  # a duplicate at (0, 2)
    v = with_grad(W(rng.standard_normal(5)))
    b = with_grad(W(rng.standard_normal((3, 2))))
    x = with_grad(W(rng.standard_normal(3)))
    c = with_grad(W(rng.standard_normal(2)))
    coo = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3])  # noqa: E731
    eq(weft.autograd.gradcheck(lambda v, b: weft.mm(coo(v), b), (v, b)), True, "mm")
    eq(weft.autograd.gradcheck(lambda v, x: weft.mv(coo(v), x), (v, x)), True, "mv")
    eq(weft.autograd.gradcheck(
        lambda c, v, b: weft.addmm(c, coo(v), b, beta=0.7, alpha=-1.5), (c, v, b)), True,
        "addmm")
    crow = W(np.array([0, 2, 3, 3, 4], np.int32))
    col = W(np.array([0, 2, 1, 0], np.int32))
    cv = with_grad(W(rng.standard_normal(4)))
    csr = lambda v: weft.sparse_csr_tensor(crow, col, v, [4, 3])  # noqa: E731
    eq(weft.autograd.gradcheck(lambda v, b: weft.matmul(csr(v), b), (cv, b)), True, "csr matmul")


@test
def reshaping_and_conversion_gradients():
    """gradcheck through coalesce, sparse_transpose, sparse_narrow, sparse_select, index_select (repeated indices), to_sparse_csr and to_sparse (CSR->COO, dense->hybrid COO), COO and CSR; the gradients stay sparse"""
    need_plugin()
    idx = W(np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]], np.int64))
    v = with_grad(W(rng.standard_normal(5)))
    coo = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3])  # noqa: E731
    cases = {
        "coalesce": lambda v: coo(v).coalesce().to_dense() * 2.0,
        "transpose": lambda v: weft.sparse_transpose(coo(v), 0, 1).to_dense() * 2.0,
        "narrow": lambda v: weft.sparse_narrow(coo(v), 0, 1, 2).to_dense() * 2.0,
        "narrow dim 1": lambda v: weft.sparse_narrow(coo(v), 1, 1, 2).to_dense() * 2.0,
        "select": lambda v: weft.sparse_select(coo(v), 1, -1).to_dense() * 2.0,
        "to_sparse_csr": lambda v: coo(v).coalesce().to_sparse_csr().to_dense() * 2.0,
        "csr to_sparse": lambda v: coo(v).coalesce().to_sparse_csr().to_sparse().to_dense(),
        "index_select": lambda v: weft.index_select(coo(v), 0, W(np.array([3, 0, 3]))).to_dense(),
        "index_select dim 1": lambda v: weft.index_select(coo(v), 1,
                                                          W(np.array([2, 2]))).to_dense() * 2.0,
        "csr index_select": lambda v: weft.index_select(coo(v).coalesce().to_sparse_csr(), 1,
                                                        W(np.array([2, 0]))).to_dense(),
        "csr narrow": lambda v: weft.sparse_narrow(coo(v).coalesce().to_sparse_csr(), 1, 1,
                                                   2).to_dense() * 2.0,
        "csr select": lambda v: weft.sparse_select(coo(v).coalesce().to_sparse_csr(), 0,
                                                   1).to_dense() * 2.0,
        "mm after transpose": lambda v: weft.mm(weft.sparse_transpose(coo(v), 0, 1),
                                                W(np.ones((4, 2)))),
    }
    for name, f in cases.items():
        eq(weft.autograd.gradcheck(f, (v,)), True, name)
    d = with_grad(W(rng.standard_normal((4, 3, 2))))
    eq(weft.autograd.gradcheck(lambda d: d.to_sparse(1).to_dense() * 2.0, (d,)), True,
       "dense to hybrid COO")
    eq(weft.autograd.gradcheck(lambda d: weft.index_select(d.to_sparse(1), 2, W(
        np.array([1, 1, 0]))).to_dense(), (d,)), True, "index_select on a dense dim")
    eq(weft.autograd.gradcheck(lambda d: weft.sparse_narrow(d.to_sparse(1), 1, 1, 2).to_dense(),
                               (d,)), True, "narrow on a dense dim")
    eq(weft.autograd.gradcheck(lambda d: weft.sparse_select(d.to_sparse(1), 2, 1).to_dense(),
                               (d,)), True, "select on a dense dim")
    h = with_grad(W(rng.standard_normal((4, 3, 2))).to_sparse(1))
    weft.index_select(h, 0, W(np.array([1, 1, 3]))).to_dense().sum().backward()
    eq(h.grad.layout, "sparse_coo", "index_select: a sparse leaf's gradient is sparse")
    # the gradient of a sparse leaf through each stays sparse, as torch's
    for dtype, tol in DTYPES:
        _, w, t = list(patterns(dtype))[2]  # duplicates
        A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
        g = rng.standard_normal((5, 6)).astype(dtype)
        weft.sparse_transpose(A.coalesce(), 0, 1).to_dense().backward(W(g))
        tA.coalesce().t().to_dense().backward(T(g))
        eq(A.grad.layout, "sparse_coo", "transpose: the gradient's layout")
        # to_dense's backward masks the gradient to the input's pattern, as
        # torch's: the whole gradient compares
        eq(A.grad._nnz(), tA.grad._nnz(), "coalesce + transpose: the pattern's size")
        close(A.grad, tA.grad, tol, "coalesce + transpose")


@test
def scalar_and_dense_arithmetic():
    """s / k, s ** k, s *= k, s * d and d * s against torch on every pattern (hybrid included), gradients of both operands of s * d equal to torch's (both sparse), and the refusals where the implicit zeros would change"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            what = "%s %s" % (np.dtype(dtype).name, name)
            close(w / 4.0, t / 4.0, tol, what + " / 4")
            close(w.pow(3), t.pow(3), tol, what + " ** 3")
            close(w ** 2, t ** 2, tol, what + " ** 2")
            d = rng.standard_normal(tuple(t.shape)).astype(dtype)
            eq((w * W(d)).layout, "sparse_coo", what + " * dense: sparse")
            close(w * W(d), t * T(d), tol, what + " * dense")
            close(W(d) * w, T(d) * t, tol, what + " dense *")
            c = w.clone()
            c.mul_(-1.5)
            close(c, t * -1.5, tol, what + " *= -1.5")
            close(w, t, 0, what + ": the clone's source untouched")
        _, w, t = list(patterns(dtype))[2]  # duplicates, 6 x 5
        d = rng.standard_normal((6, 5)).astype(dtype)
        cw = w.coalesce().to_sparse_csr() * W(d)
        eq(cw.layout, "sparse_csr", "CSR * dense: CSR")
        close(cw, t.to_dense() * T(d), tol, "CSR * dense")
    # gradients of s * d, both operands', as torch's
    _, w, t = list(patterns(np.float64))[2]
    d = rng.standard_normal((6, 5))
    A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
    B, tB = with_grad(W(d)), T(d).requires_grad_(True)
    (A * B).to_dense().sum().backward()
    (tA * tB).to_dense().sum().backward()
    eq((A.grad.layout, B.grad.layout), ("sparse_coo", "sparse_coo"), "both gradients sparse")
    close(A.grad, tA.grad, 1e-12, "d(sparse)")
    close(B.grad, tB.grad, 1e-12, "d(dense)")
    w, _ = random_coo((4, 3), 2, 5, np.float32)
    raises(RuntimeError, lambda: w / 0.0, contains="implicit zeros NaN")
    raises(RuntimeError, lambda: w ** 0, contains="0 ** 0 is not 0")
    raises(RuntimeError, lambda: w ** -1.0, contains="implicit zeros")
    raises(RuntimeError, lambda: w * W(np.ones(3, np.float32)), contains="no broadcasting")


@test
def dtype_conversions():
    """float(), double(), long(), to(dtype), to(device, dtype), to(other), type_as of COO and CSR tensors against torch's: the layout, the pattern (coalesced or not) and the values; a float32 leaf's gradient through double() equal to torch's, in float32"""
    need_plugin()
    for name, w, t in patterns(np.float32):
        for what, f in [("double()", lambda x: x.double()), ("float()", lambda x: x.float()),
                        ("long()", lambda x: x.long()),
                        ("to(float64)", lambda x: x.to(weft.float64 if isinstance(x, weft.Tensor)
                                                       else torch.float64)),
                        ("to(cpu, float64)", lambda x: x.to("cpu", weft.float64 if isinstance(
                            x, weft.Tensor) else torch.float64)),
                        # (torch 1.13's type_as refuses a strided other for a
                        # sparse tensor; weft's takes its dtype)
                        ("type_as", lambda x: x.type_as(W(np.zeros(1))) if isinstance(
                            x, weft.Tensor) else x.double())]:
            a, b = f(w), f(t)
            eq(a.layout, "sparse_coo", "%s %s: the layout" % (name, what))
            eq(str(a.dtype).split(".")[-1], str(b.dtype).split(".")[-1], name + " " + what)
            eq((a._nnz(), a.is_coalesced()), (b._nnz(), b.is_coalesced()),
               "%s %s: the pattern" % (name, what))
            close(a, b, 0, "%s %s" % (name, what))
    _, w, t = list(patterns(np.float32))[1]
    c = w.coalesce().to_sparse_csr().double()
    eq((c.layout, c.dtype), ("sparse_csr", weft.float64), "CSR double(): CSR, float64")
    close(c, t.to_dense().double(), 0, "CSR double()")
    eq(w.to(weft.float32) is w, True, "to() of its own dtype is the tensor itself")
    # the gradient comes back in the leaf's dtype and layout
    _, w, t = list(patterns(np.float32))[2]  # duplicates
    A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
    g = rng.standard_normal((6, 5))
    A.double().to_dense().backward(W(g))
    tA.double().to_dense().backward(T(g))
    eq((A.grad.layout, A.grad.dtype), ("sparse_coo", weft.float32),
       "the leaf's gradient: sparse, float32")
    close(A.grad, tA.grad, 1e-6, "the leaf's gradient through double()")


@test
def norms_and_clipping():
    """norm of COO and CSR tensors for p in 2, 1, 0, inf, -inf, -1, 3 against the dense norm (torch's sparse norm where torch has one), its gradient against the dense one's, and clip_grad_norm_ (2, 1, inf) over an embedding's sparse gradient, which torch 1.13 does not scale"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            d = t.to_dense()
            for p in (2, 1, 0, math.inf, -math.inf, -1, 3):
                close(weft.norm(w, p, None, False), torch.norm(d, p), tol,
                      "%s norm(p=%s)" % (name, p))
            close(w.norm(), torch.norm(t), tol, name + " Tensor.norm() against torch's sparse")
            if w.sparse_dim() == 2:
                close(weft.norm(w.coalesce().to_sparse_csr(), 1, None, False), torch.norm(d, 1),
                      tol, name + " CSR norm(p=1)")
    w, _ = random_coo((4, 3), 2, 5, np.float32)
    raises(RuntimeError, weft.norm, w, 2, [0], False, contains="over some dims")
    _, w, t = list(patterns(np.float64))[2]
    A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
    A.norm().backward()
    # (torch 1.13 has no backward for a sparse norm: its reference is the
    # dense norm's, which to_dense masks to the pattern)
    tA.to_dense().norm().backward()
    eq(A.grad.layout, "sparse_coo", "norm: the leaf's gradient is sparse")
    close(A.grad, tA.grad, 1e-12, "norm: the leaf's gradient")
    # clip_grad_norm_ of sparse gradients (an embedding with sparse=True)
    idx = rng.integers(0, 50, (8, 3))
    for norm_type in (2.0, 1.0, math.inf):
        we, te = weft.nn.Embedding(50, 4, sparse=True), torch.nn.Embedding(50, 4, sparse=True)
        with weft.no_grad():
            we.weight.copy_(W(te.weight.detach().numpy()))
        (we(W(idx)) ** 2).sum().backward()
        (te(T(idx)) ** 2).sum().backward()
        # torch 1.13's clip_grad_norm_ cannot be the reference: with a
        # sparse gradient it leaves it unscaled (its detach().mul_() does
        # not reach it) and fails for inf (no sparse max); the reference is
        # the dense gradient's norm and the gradient times its coefficient
        unclipped = te.weight.grad.to_dense().clone()
        b = torch.norm(unclipped, norm_type)
        a = weft.nn.utils.clip_grad_norm_(we.parameters(), 0.5, norm_type)
        close(a, b, 1e-5, "clip_grad_norm_(%s): the norm" % norm_type)
        eq(we.weight.grad.layout, "sparse_coo", "the gradient stays sparse")
        coef = min(0.5 / (float(b) + 1e-6), 1.0)
        close(we.weight.grad, unclipped * coef, 1e-5,
              "clip_grad_norm_(%s): the clipped gradient" % norm_type)


@test
def inplace_add_and_stack():
    """s.add_(other, alpha) of two sparse tensors (entries appended, an earlier detach keeping the old ones) and stack of sparse tensors along every dim against torch's, with a leaf's gradient through stack"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            w2, t2 = random_coo(tuple(t.shape), t.sparse_dim(), 4, dtype)
            a, ta = w.clone(), t.clone()
            before = a.detach()
            a.add_(w2, alpha=-2.0)
            ta.add_(t2, alpha=-2.0)
            eq((a.layout, a._nnz()), ("sparse_coo", ta._nnz()), name + " add_: layout, nnz")
            close(a, ta, tol, name + " add_")
            close(before, t, 0, name + " add_: a detach made before keeps the old entries")
            for d in range(-t.ndim - 1, t.ndim + 1):
                sw, st = weft.stack([w, w2, w], d), torch.stack([t, t2, t], d)
                eq((sw.sparse_dim(), sw.dense_dim()), (st.sparse_dim(), st.dense_dim()),
                   "%s stack(dim=%d): sparse and dense dims" % (name, d))
                close(sw, st, tol, "%s stack(dim=%d)" % (name, d))
    w, t = random_coo((4, 3), 2, 5, np.float32)
    raises(RuntimeError, w.add_, W(np.ones((4, 3), np.float32)), contains="sparse other")
    raises(RuntimeError, w.add_, random_coo((3, 3), 2, 2, np.float32)[0], contains="one shape")
    raises(RuntimeError, weft.stack, [w, W(np.ones((4, 3), np.float32))],
           contains="sparse_coo tensors only")
    raises(RuntimeError, weft.stack, [w, random_coo((3, 3), 2, 2, np.float32)[0]],
           contains="equal size")
    # the gradient of a leaf through stack: its part of the incoming one
    _, w, t = list(patterns(np.float64))[2]
    A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
    g = rng.standard_normal((2, 6, 5))
    weft.stack([A, A * 2.0]).to_dense().backward(W(g))
    torch.stack([tA, tA * 2.0]).to_dense().backward(T(g))
    eq(A.grad.layout, "sparse_coo", "stack: the leaf's gradient is sparse")
    close(A.grad, tA.grad, 1e-12, "stack: the leaf's gradient")


@test
def torch_view_names():
    """t, transpose, T, permute, select, indexing, narrow, slicing, contiguous and detach of a sparse tensor by torch's names: sparse results equal to torch's (narrow to its narrow_copy, which torch's narrow names), gradients through them sparse and equal to torch's; the rest refused by name"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            if w.sparse_dim() == 2:
                views = {"t()": (w.t(), t.t()), "transpose(0, 1)": (w.transpose(0, 1),
                         t.transpose(0, 1)), "T": (w.T, t.t()),
                         "permute(1, 0)": (w.permute(1, 0), t.permute(1, 0)),
                         "select(1, -1)": (w.select(1, -1), t.select(1, -1))}
            else:  # hybrid (6, 5, 3) with one sparse dim: the dense dims swap
                views = {"transpose(1, 2)": (w.transpose(1, 2),
                                             t.to_dense().transpose(1, 2).to_sparse(1)),
                         "permute(0, 2, 1)": (w.permute(0, 2, 1),
                                              t.to_dense().permute(0, 2, 1).to_sparse(1)),
                         "select(2, 1)": (w.select(2, 1), t.select(2, 1))}
            views.update({"select(0, 2)": (w.select(0, 2), t.select(0, 2)),
                          "[3]": (w[3], t[3]), "[-1]": (w[-1], t[-1]),
                          "narrow(0, 1, 3)": (w.narrow(0, 1, 3), t.narrow_copy(0, 1, 3)),
                          "narrow(1, 2, 2)": (w.narrow(1, 2, 2), t.narrow_copy(1, 2, 2)),
                          "[1:4]": (w[1:4], t.narrow_copy(0, 1, 3)),
                          "narrow_copy(1, 0, 2)": (w.narrow_copy(1, 0, 2),
                                                   t.narrow_copy(1, 0, 2)),
                          "contiguous()": (w.contiguous(), t.contiguous()),
                          "detach()": (w.detach(), t.detach())})
            for what, (a, b) in views.items():
                what = "%s %s %s" % (np.dtype(dtype).name, name, what)
                # torch's layout: strided where the only sparse dim is selected
                eq(a.layout, "sparse_coo" if b.layout == torch.sparse_coo else "strided",
                   what + ": the layout")
                close(a, b, tol, what)
        w, _ = random_coo((4, 3), 2, 5, dtype)
        c = w.contiguous()
        eq((c._indices().data_ptr(), c._values().data_ptr()),
           (w._indices().data_ptr(), w._values().data_ptr()), "contiguous() is the tensor itself")
    # gradients: gradcheck through each, then a sparse leaf's gradient
    # through t() and select() against torch's (to_dense masks it to the
    # leaf's pattern in both)
    idx = W(np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]], np.int64))
    v = with_grad(W(rng.standard_normal(5)))
    coo = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3])  # noqa: E731
    cases = {"t": lambda v: coo(v).t().to_dense() * 2.0,
             "transpose": lambda v: coo(v).transpose(1, 0).to_dense() * 2.0,
             "select": lambda v: coo(v).select(1, 2).to_dense() * 2.0,
             "index": lambda v: coo(v)[0].to_dense() * 2.0,
             "narrow": lambda v: coo(v).narrow(0, 1, 3).to_dense() * 2.0,
             "slice": lambda v: coo(v)[:, 1:].to_dense() * 2.0,
             "mm after t": lambda v: weft.mm(coo(v).t(), W(np.ones((4, 2))))}
    for name, f in cases.items():
        eq(weft.autograd.gradcheck(f, (v,)), True, name)
    for dtype, tol in DTYPES:
        _, w, t = list(patterns(dtype))[2]  # duplicates
        g = rng.standard_normal((5, 6)).astype(dtype)
        A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
        A.t().to_dense().backward(W(g))
        tA.t().to_dense().backward(T(g))
        eq(A.grad.layout, "sparse_coo", "t: the leaf's gradient is sparse")
        close(A.grad, tA.grad, tol, "t: the leaf's gradient")
        A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
        g1 = np.ascontiguousarray(g[:, 0])
        A.select(0, 2).to_dense().backward(W(g1))
        # torch 1.13 has no sparse select_backward: its reference is the
        # select of the dense tensor, whose to_dense masks the gradient
        tA.to_dense().select(0, 2).backward(T(g1))
        eq(A.grad.layout, "sparse_coo", "select: the leaf's gradient is sparse")
        eq(tA.grad.layout, torch.sparse_coo, "and so is torch's reference")
        close(A.grad, tA.grad, tol, "select: the leaf's gradient")
    # unsqueeze: torch's shapes and sparse/dense split, every place
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            for d in range(-w.ndim - 1, w.ndim + 1):
                a, b = w.unsqueeze(d), t.unsqueeze(d)
                what = "%s %s unsqueeze(%d)" % (np.dtype(dtype).name, name, d)
                eq((a.sparse_dim(), a.dense_dim()), (b.sparse_dim(), b.dense_dim()),
                   what + ": sparse and dense dims")
                close(a, b, 0, what)
    # and its gradient, which torch 1.13 lacks: the dense reference's,
    # masked to the leaf's pattern (duplicates counted once)
    _, w, t = list(patterns(np.float64))[2]
    A, tA = with_grad(w.clone()), t.detach().requires_grad_(True)
    g = rng.standard_normal((6, 1, 5))
    A.unsqueeze(1).to_dense().backward(W(g))
    tA.to_dense().unsqueeze(1).backward(T(g))
    eq(A.grad.layout, "sparse_coo", "unsqueeze: the leaf's gradient is sparse")
    close(A.grad, tA.grad, 1e-12, "unsqueeze: the leaf's gradient")
    eq(weft.autograd.gradcheck(lambda v: coo(v).unsqueeze(2).to_dense() * 2.0, (v,)), True,
       "gradcheck through unsqueeze")
    # refused, naming the function, the layout and the way
    w, _ = random_coo((4, 3), 2, 5, np.float32)
    raises(RuntimeError, w.reshape, 12, contains="reshape: not supported for a sparse_coo")
    raises(RuntimeError, w.view, 12, contains="view: not supported for a sparse_coo")
    raises(RuntimeError, w.unsqueeze(0).squeeze, 0, contains="to_dense()")
    raises(RuntimeError, lambda: w[::2], contains="a step of 2")
    h = weft.sparse_coo_tensor(W(np.array([[0, 2]], np.int64)), W(np.ones((2, 3))), [4, 3])
    raises(RuntimeError, h.t, contains="cannot move dense dimension 1")
    # these results are new tensors, not views (as torch's): assignment
    # through an index, which would not reach the tensor, is refused as
    # torch refuses it, and the tensor is left as it was
    before = dense_np(w).copy()
    raises(TypeError, w.__setitem__, 0, 5.0, contains="Cannot assign to a sparse tensor")
    raises(TypeError, w.__setitem__, (slice(None), 1), W(np.ones(4, np.float32)),
           contains="layout 'sparse_coo'")
    eq(np.array_equal(dense_np(w), before), True, "and the tensor is unchanged")
    c = w.coalesce().to_sparse_csr()
    raises(TypeError, c.__setitem__, 0, 1.0, contains="sparse_csr")
    raises(RuntimeError, c.t, contains="sparse_csc")
    raises(RuntimeError, c.select, 0, 1, contains="to_sparse() first")
    close(c.narrow(1, 1, 2), w.to_dense()[:, 1:3], 0, "CSR narrow")
    eq(c.narrow(1, 1, 2).layout, "sparse_csr", "CSR narrow keeps the layout")


@test
def to_dense_gradient_and_sparse_mask():
    """to_dense's gradient is grad.sparse_mask(input) as torch 1.13's (the input's coalesced pattern, duplicates once), for COO (empty, duplicates, hybrid) and CSR (which torch refuses); sparse_mask against torch's"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            A, tA = with_grad(w.clone()), t.detach().clone().requires_grad_(True)
            g = rng.standard_normal(tuple(t.shape)).astype(dtype)
            A.to_dense().backward(W(g))
            tA.to_dense().backward(T(g))
            eq(A.grad.layout, "sparse_coo", name + ": the gradient is sparse")
            eq(A.grad._nnz(), tA.grad._nnz(), name + ": on the input's coalesced pattern")
            eq(np.array_equal(np.from_dlpack(A.grad.indices()), tA.grad.coalesce().indices().numpy()),
               True, name + ": the same indices")
            close(A.grad, tA.grad, tol, name + " to_dense backward")
            m, tm = weft.sparse_mask(W(g), w), T(g).sparse_mask(t.coalesce())
            eq(m.is_coalesced(), True, name + ": sparse_mask is coalesced")
            eq(m._nnz(), tm._nnz(), name + ": sparse_mask's pattern")
            close(m, tm, tol, name + " sparse_mask")
            close(W(g).sparse_mask(w), tm, tol, name + " Tensor.sparse_mask")
        d = rng.standard_normal((5, 4)).astype(dtype)
        d[d < 0.3] = 0
        for idx in (weft.int64, weft.int32):
            c = W(d).to_sparse_csr()
            plain = weft.sparse_csr_tensor(c.crow_indices().to(idx), c.col_indices().to(idx),
                                           c.values(), [5, 4])
            c = with_grad(plain.clone())
            tc = torch.from_numpy(d).to_sparse_csr()
            g = rng.standard_normal((5, 4)).astype(dtype)
            c.to_dense().backward(W(g))
            eq(c.grad.layout, "sparse_csr", "CSR: the gradient keeps the layout")
            close(c.grad, T(g).sparse_mask(tc), tol, "CSR to_dense backward (%s)" % idx)
            close(weft.sparse_mask(W(g), plain), T(g).sparse_mask(tc), tol, "CSR sparse_mask")
    _, w, t = list(patterns(np.float64))[2]
    eq(weft.autograd.gradcheck(lambda x: weft.sparse_mask(x, w).to_dense() * 2.0,
                               (with_grad(W(rng.standard_normal((6, 5)))),)), True,
       "sparse_mask's gradient (to dense)")
    v = with_grad(W(rng.standard_normal(5)))
    idx = W(np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]], np.int64))
    eq(weft.autograd.gradcheck(lambda v: weft.sparse_coo_tensor(idx, v, [4, 3]).to_dense() * 2.0,
                               (v,)), True, "to_dense of duplicates")
    raises(RuntimeError, weft.sparse_mask, W(np.ones((6, 5))), W(np.ones((6, 5))),
           contains="sparse")
    raises(RuntimeError, weft.sparse_mask, W(np.ones((6, 4))), w, contains="same shape")


@test
def cat_and_partial_sum_gradients():
    """backward through sum over some dims of a sparse tensor (torch.sparse.sum's: the input's coalesced pattern) and through cat of sparse tensors (torch 1.13 fails there; each input gets its slice of the gradient, on its pattern); gradcheck"""
    need_plugin()
    for dtype, tol in DTYPES:
        for name, w, t in patterns(dtype):
            for dims in ([0], [1], [0, 1], [w.ndim - 1], None):
                A, tA = with_grad(w.clone()), t.detach().clone().requires_grad_(True)
                s, ts = weft.sparse.sum(A, dims), (torch.sparse.sum(tA, dims) if dims
                                                   else torch.sparse.sum(tA))
                if ts.dim() == 0:
                    c = float(rng.standard_normal())
                    (s * c).backward()
                    (ts * c).backward()
                else:
                    g = rng.standard_normal(tuple(ts.shape)).astype(dtype)
                    (s.to_dense() if s.layout != "strided" else s).backward(W(g))
                    (ts.to_dense() if ts.layout != torch.strided else ts).backward(T(g))
                what = "%s sum over %s" % (name, dims)
                eq(A.grad.layout, "sparse_coo", what + ": the gradient is sparse")
                eq(A.grad._nnz(), tA.grad._nnz(), what + ": on the input's coalesced pattern")
                close(A.grad, tA.grad, tol, what)
        for dim in (0, 1):
            (_, a, ta), (_, b, tb) = list(patterns(dtype))[1:3]
            A, B = with_grad(a.clone()), with_grad(b.clone())
            out = weft.cat([A, B], dim)
            g = rng.standard_normal(tuple(out.shape)).astype(dtype)
            out.to_dense().backward(W(g))
            ga, gb = np.split(g, [ta.shape[dim]], axis=dim)
            for X, tX, gx, which in ((A, ta, ga, "first"), (B, tb, gb, "second")):
                eq(X.grad.layout, "sparse_coo", "cat dim %d: the %s gradient is sparse" % (dim, which))
                close(X.grad, T(gx).sparse_mask(tX.coalesce()), tol,
                      "cat dim %d: the %s input's slice" % (dim, which))
    idx = W(np.array([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]], np.int64))
    v = with_grad(W(rng.standard_normal(5)))
    u = with_grad(W(rng.standard_normal(5)))
    coo = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3])  # noqa: E731
    cases = {
        "sum dim 0": lambda v, u: weft.sparse.sum(coo(v), 0).to_dense() * 2.0,
        "sum dim 1": lambda v, u: weft.sparse.sum(coo(v), 1).to_dense() * 2.0,
        "sum all": lambda v, u: weft.sparse.sum(coo(v)) * 2.0,
        "sum of a CSR": lambda v, u: weft.sparse.sum(coo(v).coalesce().to_sparse_csr(), 1).to_dense(),
        "cat dim 0": lambda v, u: weft.cat([coo(v), coo(u)], 0).to_dense() * 2.0,
        "cat dim 1": lambda v, u: weft.cat([coo(u), coo(v)], 1).to_dense() * 2.0,
    }
    for name, f in cases.items():
        eq(weft.autograd.gradcheck(f, (v, u)), True, name)
    h = with_grad(W(rng.standard_normal((4, 3, 2))).to_sparse(1))
    weft.sparse.sum(h, [2]).to_dense().sum().backward()
    eq(h.grad.layout, "sparse_coo", "sum over a dense dim of a hybrid: sparse gradient")
    eq(np.abs(dense_np(h.grad) - 1.0).max(), 0.0, "ones at every entry")


@test
def product_refusals():
    """products with no gradient formula refuse by name when an operand requires grad, and so does a double backward through a sparse product"""
    need_plugin()
    d = rng.standard_normal((4, 4))
    d[d < 0] = 0
    a = with_grad(W(d).to_sparse_csr())
    raises(RuntimeError, weft.mm, a, W(d).to_sparse_csr(), contains="'sparse_csr' and 'sparse_csr'")
    b = with_grad(W(d))
    raises((NotImplementedError, RuntimeError), weft.mm, b, W(d).to_sparse(),
           contains="sparse_coo")
    # create_graph: the second derivative is refused, not dropped
    s = with_grad(W(d).to_sparse())
    y = weft.mm(s, b).sum()
    raises(RuntimeError, weft.autograd.grad, y, [b], create_graph=True,
           contains="no double backward")


@test
def integer_values():
    """int32 and int64 values: construction, to_dense and coalesce (duplicates summed), neg, abs, sign, add, sum, index_select, cat, mm and mv against torch; float-only products refuse by dtype"""
    need_plugin()
    for dt in (np.int64, np.int32):
        idx = np.stack([rng.integers(0, 6, 12), rng.integers(0, 5, 12)]).astype(np.int64)
        idx = np.concatenate([idx, idx[:, :5]], axis=1)  # duplicates
        val = rng.integers(-9, 10, idx.shape[1]).astype(dt)
        w = weft.sparse_coo_tensor(W(idx), W(val), [6, 5])
        t = torch.sparse_coo_tensor(T(idx), T(val), (6, 5))
        what = np.dtype(dt).name
        eq(dense_np(w).dtype, np.dtype(dt), what + ": to_dense keeps the dtype")
        close(w, t, 0, what + " to_dense")
        close(w.coalesce(), t.coalesce(), 0, what + " coalesce")
        eq(w.coalesce()._nnz(), t.coalesce()._nnz(), what + " coalesced nnz")
        for op in ("neg", "abs", "sign"):
            close(getattr(weft, op)(w), getattr(torch, op)(t), 0, what + " " + op)
        close(weft.add(w, w), torch.add(t, t), 0, what + " sparse + sparse")
        close(weft.sparse.sum(w), torch.sparse.sum(t), 0, what + " sum")
        close(weft.sparse.sum(w, 1), torch.sparse.sum(t, 1), 0, what + " sum(1)")
        ix = np.array([4, 0, 4], np.int64)
        close(weft.index_select(w, 0, W(ix)), torch.index_select(t, 0, T(ix)), 0,
              what + " index_select")
        close(weft.cat([w, w], 1), torch.cat([t, t], 1), 0, what + " cat")
        b = rng.integers(-5, 6, (5, 3)).astype(dt)
        close(weft.mm(w, W(b)), torch.from_numpy(t.to_dense().numpy() @ b), 0, what + " mm")
        close(weft.mm(w.to_sparse_csr(), W(b)), torch.from_numpy(t.to_dense().numpy() @ b), 0,
              what + " CSR mm")
        x = rng.integers(-5, 6, 5).astype(dt)
        close(weft.mv(w, W(x)), torch.from_numpy(t.to_dense().numpy() @ x), 0, what + " mv")
        d = t.to_dense().numpy()
        close(W(d).to_sparse(), torch.from_numpy(d).to_sparse(), 0, what + " to_sparse")
        wt = weft.sparse_transpose(w.coalesce(), 0, 1).coalesce().to_sparse_csr()
        raises(RuntimeError, weft.mm, w.to_sparse_csr(), wt, contains="float32")
    raises(RuntimeError, weft.sparse_coo_tensor, W(np.zeros((1, 2), np.int64)),
           W(np.zeros(2, np.int8)), [3], contains="int32 or int64")


@test
def coalesce_is_deterministic():
    """coalesce gives bit-identical sums with 1 and 2 threads"""
    need_plugin()
    idx = rng.integers(0, 50, (2, 100000)).astype(np.int64)
    val = (rng.standard_normal(100000) * 10.0 ** rng.integers(0, 7, 100000)).astype(np.float32)
    s = weft.sparse_coo_tensor(W(idx), W(val), [50, 50])
    n = weft.get_num_threads()
    try:
        weft.set_num_threads(1)
        a = np.from_dlpack(s.coalesce().values()).copy()
        weft.set_num_threads(2)
        b = np.from_dlpack(s.coalesce().values()).copy()
    finally:
        weft.set_num_threads(n)
    eq(a.tobytes() == b.tobytes(), True)


@test
def edges_found_by_a_differential_campaign():
    """addmm's self must broadcast to the product, mm takes matrices, to() refuses dtypes the layout cannot hold, backward with a gradient of another dtype, repeated sum dims: as torch"""
    need_plugin()
    idx = np.array([[0, 0], [0, 2]], np.int64)
    val = np.array([1.0, 2.0], np.float32)
    w = weft.sparse_coo_tensor(W(idx), W(val), [1, 3])
    for s in (w, w.to_sparse_csr()):
        # self (2, 2) and the product (1, 2): torch refuses; the product was
        # once broadcast up to (2, 2)
        raises(RuntimeError, weft.addmm, W(np.ones((2, 2), np.float32)), s,
               W(np.ones((3, 2), np.float32)),
               contains="self of shape [2, 2] cannot be broadcast to the product's [1, 2]")
        eq(dense_np(weft.addmm(W(np.ones((1, 2), np.float32)), s, W(np.ones((3, 2), np.float32)))
                    ).tolist(), [[4.0, 4.0]], "a fitting self still adds")
        eq(dense_np(weft.addmm(W(np.ones(2, np.float32)), s, W(np.ones((3, 2), np.float32)))
                    ).tolist(), [[4.0, 4.0]], "a 1-D self broadcasts")
        raises(RuntimeError, weft.mm, s, W(np.ones(3, np.float32)),
               contains="mm: mat2 must be a 2-D tensor")
    raises(RuntimeError, weft.sparse.mm, w, W(np.ones(3, np.float32)), contains="2-D")
    eq(dense_np(weft.mv(w, W(np.ones(3, np.float32)))).tolist(), [3.0], "mv still takes a vector")
    # a dtype the sparse kernels cannot hold: refused by to(), as by the
    # constructor, not made into a tensor that nothing can read
    for f in (lambda: w.to(weft.float16), lambda: w.half(), lambda: w.to(weft.int8)):
        raises(RuntimeError, f, contains="sparse values must be float32, float64, int32 or int64")
    eq(dense_np(w.double()).dtype, np.float64)
    # backward(float32 gradient) through .double() of a sparse tensor: the
    # gradient converted on the way, as torch (it failed on a sparse to_dtype)
    idx2 = np.array([[0, 1, 1], [2, 0, 2]], np.int64)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    g = np.arange(6, dtype=np.float32).reshape(2, 3)
    tv = T(v.copy()).requires_grad_(True)
    torch.sparse_coo_tensor(T(idx2), tv, (2, 3)).double().to_dense().backward(T(g))
    wv = W(v.copy())
    wv.requires_grad_(True)
    weft.sparse_coo_tensor(W(idx2), wv, [2, 3]).double().to_dense().backward(W(g))
    eq(np.from_dlpack(wv.grad).tolist(), tv.grad.tolist())
    # a custom Function whose backward returns a sparse gradient of another
    # dtype: the engine converts it to the input's, keeping the layout
    class Twice(weft.autograd.Function):
        @staticmethod
        def forward(ctx, s):
            return s.to_dense() * 2

        @staticmethod
        def backward(ctx, go):
            return (go * 2).float().to_sparse()

    s64 = weft.sparse_coo_tensor(W(idx2), W(v.astype(np.float64)), [2, 3])
    s64.requires_grad_(True)
    Twice.apply(s64).sum().backward()
    eq((s64.grad.layout == "sparse_coo", s64.grad.dtype), (True, weft.float64))
    eq(dense_np(s64.grad).tolist(), [[2.0] * 3] * 2)
    # a dim named twice: refused, as the strided sum and torch
    s = weft.sparse_coo_tensor(W(idx2), W(v), [2, 3])
    for dims in ([0, 0], [-1, 1]):
        raises(RuntimeError, weft.sparse.sum, s, dims, contains="appears multiple times")


@test
def raw_arrays_of_an_uncoalesced_tensor():
    """indices() and values() of an uncoalesced COO tensor refused as torch's (a position may repeat), _indices() and _values() give the raw arrays as torch's; a CSR tensor's values() always"""
    need_plugin()
    idx = np.array([[1, 0, 1], [0, 2, 0]], np.int64)
    val = np.array([1.0, 2.0, 3.0], np.float32)
    w = weft.sparse_coo_tensor(W(idx), W(val), [2, 3])
    t = torch.sparse_coo_tensor(T(idx), T(val), [2, 3])
    eq((w.is_coalesced(), t.is_coalesced()), (False, False))
    for name in ("indices", "values"):
        raises(RuntimeError, getattr(w, name), contains="coalesce() first")
        raises(RuntimeError, getattr(t, name))
    eq(np.from_dlpack(w._indices()).tolist(), t._indices().tolist(), "_indices")
    eq(np.from_dlpack(w._values()).tolist(), t._values().tolist(), "_values")
    c, tc = w.coalesce(), t.coalesce()
    eq(np.from_dlpack(c.indices()).tolist(), tc.indices().tolist(), "coalesced indices")
    eq(np.from_dlpack(c.values()).tolist(), tc.values().tolist(), "coalesced values")
    # a tensor requiring grad: refused before any node is recorded, and the
    # raw values carry no gradient (torch's _values is not differentiable)
    g = weft.sparse_coo_tensor(W(idx), W(val), [2, 3]).requires_grad_(True)
    raises(RuntimeError, g.values, contains="coalesce() first")
    eq(g._values().grad_fn, None)
    # unsqueeze of an uncoalesced tensor keeps working through the raw arrays
    eq(dense_np(w.unsqueeze(0)).tolist(), [dense_np(w).tolist()])
    eq(np.from_dlpack(w.to_sparse_csr().values()).tolist(), [2.0, 4.0], "CSR values")


done()
