"""The sparse layouts from Python (issue 16) against Debian's PyTorch 1.13:
every operator on random patterns (nnz 0, duplicates, hybrid dimensions,
int32 and int64 CSR indices, float32 and float64), compared with
torch.sparse on the same indices and values; the refusals; DLPack's
BufferError.  Inputs are made with NumPy and handed to both frameworks."""
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
            close(w.clone(), t.clone(), tol, "clone")
            close(weft.cat([w, w2], 0), torch.cat([t, t2], 0), tol, "cat")
            ix = np.array([2, 0, 2], np.int64)
            close(weft.index_select(w, 0, W(ix)), torch.index_select(t, 0, T(ix)), tol,
                  "index_select")
            close(weft.sparse_narrow(w, 0, 1, 3), t.narrow_copy(0, 1, 3), tol, "narrow")
            close(weft.sparse_select(w, 0, 1), t.select(0, 1), tol, "select")
            if t.sparse_dim() == 2:
                close(weft.sparse_transpose(w, 0, 1), t.transpose(0, 1), tol, "transpose")

        operators.__doc__ = "%s %s: add, sub, mul, unary, sum, cat, index_select, narrow, select" % (
            name, dt.__name__)
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
def sparse_adam():
    """SparseAdam and Adagrad on an Embedding(sparse=True) match torch's; SparseAdam also takes a dense gradient (lazily)"""
    need_plugin()
    n, d = 40, 6
    w0 = rng.standard_normal((n, d)).astype(np.float32)
    batches = [rng.integers(0, n, (5, 4)) for _ in range(5)]
    e = weft.nn.Embedding(n, d, sparse=True, _weight=W(w0.copy()))
    opt = weft.optim.SparseAdam(e.parameters(), lr=0.01)
    te = torch.nn.Embedding(n, d, sparse=True, _weight=torch.from_numpy(w0.copy()))
    topt = torch.optim.SparseAdam(te.parameters(), lr=0.01)
    for idx in batches:
        opt.zero_grad()
        (e(W(idx)) ** 2).sum().backward()
        opt.step()
        topt.zero_grad()
        (te(torch.from_numpy(idx)) ** 2).sum().backward()
        topt.step()
    err = float(np.max(np.abs(np.from_dlpack(e.weight.detach()) - te.weight.detach().numpy())))
    eq(err < 1e-5, True, "differs from torch by %g" % err)
    # Adagrad takes sparse gradients as torch's does
    e = weft.nn.Embedding(n, d, sparse=True, _weight=W(w0.copy()))
    te = torch.nn.Embedding(n, d, sparse=True, _weight=torch.from_numpy(w0.copy()))
    opt = weft.optim.Adagrad(e.parameters(), lr=0.1, lr_decay=0.01)
    topt = torch.optim.Adagrad(te.parameters(), lr=0.1, lr_decay=0.01)
    for idx in batches:
        opt.zero_grad()
        (e(W(idx)) ** 2).sum().backward()
        opt.step()
        topt.zero_grad()
        (te(torch.from_numpy(idx)) ** 2).sum().backward()
        topt.step()
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
    h = lambda v: weft.sparse_coo_tensor(idx, v, [4, 3]).values() * 2.0  # noqa: E731
    eq(weft.autograd.gradcheck(h, (v,)), True)


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


done()
