"""weft.sparse — torch.sparse's functions over the sparse layouts of the
plugin libweft-sparse.so (issue 16).

The plugin defines its operators by schema, so the extension binds them
like every other operator: ``weft.sparse_coo_tensor``,
``weft.sparse_csr_tensor``, ``Tensor.to_sparse``, ``.to_sparse_csr``,
``.to_dense``, ``.coalesce``, ``.indices``, ``.values`` (of a coalesced
tensor, as torch's; ``._indices``/``._values`` give an uncoalesced one's raw arrays),
``.crow_indices``, ``.col_indices``, and ``weft.mm``/``weft.matmul``
with a sparse operand.  This module adds what torch spells differently
from a schema: ``weft.sparse.mm``/``addmm``/``sum``, and the Tensor
members that torch makes Python numbers or properties (``_nnz()``,
``is_coalesced()``, ``sparse_dim()``, ``dense_dim()``; ``is_sparse``
and ``is_sparse_csr`` are on every tensor).  Without the plugin the module still imports; its
functions then raise the dispatcher's error for the missing operator.
"""

from . import _C
from ._layout import layout

__all__ = ["mm", "addmm", "sum"]


def mm(mat1, mat2):
    """torch.sparse.mm: a sparse matrix (COO or CSR) times a strided one
    (strided result), differentiable as torch's (the sparse operand's
    gradient keeps its pattern: the plugin's product records it, as for
    weft.mm), or CSR times CSR (CSR result)."""
    return _C.mm(mat1, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """torch.sparse.addmm: beta * mat + alpha * (mat1 @ mat2), mat1 sparse."""
    return _C.addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):  # noqa: A001 -- torch's name
    """torch.sparse.sum: over all dimensions a 0-d strided tensor; over some,
    a sparse COO tensor over the sparse dimensions left."""
    if dim is not None and not isinstance(dim, (list, tuple)):
        dim = [dim]
    return _C.sum(input, dim, False, dtype=dtype)


class _EmbeddingSparse:
    """embedding(..., sparse=True): the gradient of the weight is a sparse
    COO tensor holding one row per looked-up index (duplicates summed when
    it is coalesced or applied), never a dense tensor of the table's size."""

    _fn = None

    @classmethod
    def apply(cls, weight, input, padding_idx):
        if cls._fn is None:
            from .autograd import Function

            class EmbeddingSparse(Function):
                @staticmethod
                def forward(ctx, weight, input, padding_idx):
                    ctx.save_for_backward(input)
                    ctx.size = list(weight.shape)
                    ctx.padding_idx = padding_idx
                    return _C.embedding(weight, input, padding_idx)

                @staticmethod
                def backward(ctx, grad):
                    (input,) = ctx.saved_tensors
                    n, d = ctx.size
                    idx = input.reshape(1, -1).to(_C.int64)
                    rows = grad.reshape(-1, d).contiguous()
                    if ctx.padding_idx >= 0:
                        # the padding row gets no gradient, as the dense path
                        keep = _C.ne(idx.reshape(-1, 1), ctx.padding_idx).to(rows.dtype)
                        rows = rows * keep
                    return _C.sparse_coo_tensor(idx, rows, [n, d], False), None, None

            cls._fn = EmbeddingSparse
        return cls._fn.apply(weight, input, padding_idx)


def embedding_sparse(input, weight, padding_idx=-1):
    """F.embedding(input, weight, padding_idx, sparse=True)"""
    return _EmbeddingSparse.apply(weight, input, padding_idx)


def _install():
    T = _C.Tensor
    as_int = {"_nnz": int, "sparse_dim": int, "dense_dim": int, "is_coalesced": bool}
    for name, conv in as_int.items():
        op = getattr(_C, name, None)
        if op is None:
            continue  # the plugin is not loaded

        def member(self, _op=op, _conv=conv):
            return _conv(_op(self).item())

        member.__name__ = name
        member.__doc__ = "torch's Tensor.%s(): a Python %s" % (name, conv.__name__)
        setattr(T, name, member)
    # Tensor.clone of a plugin layout's tensor goes through the clone
    # operator, which keeps its layout (python/tensor.c)
    # to_dense through the plugin's operator, whose gradient for a sparse
    # input keeps the input's pattern (grad.sparse_mask(input), as torch's),
    # rather than _layout.py's core conversion (the whole gradient's nonzeros)
    # (only for the sparse layouts: the operator is this plugin's, and a
    # tensor of another plugin's layout converts through the core as before)
    to_dense_op = getattr(_C, "to_dense", None)
    if to_dense_op is not None:
        core_to_dense = T.to_dense

        def to_dense(self):
            """this tensor in the strided layout (itself when already strided)"""
            if self.is_sparse or self.is_sparse_csr:
                return to_dense_op(self)
            return core_to_dense(self)

        T.to_dense = to_dense
    # to(dtype) and the converters (float(), double(), type(), type_as())
    # of a sparse tensor through the plugin's sparse_to_dtype, which keeps
    # the layout (the core's dtype conversion takes strided tensors only):
    # Tensor.to (python/tensor.c) calls it for these layouts; the device
    # part of to() is the core's
    to_dtype_op = getattr(_C, "sparse_to_dtype", None)
    if to_dtype_op is not None:
        _C._set_layout_to_dtype("sparse_coo", to_dtype_op)
        _C._set_layout_to_dtype("sparse_csr", to_dtype_op)
    # weft.sparse_coo and weft.sparse_csr, as torch.sparse_coo/sparse_csr
    import weft

    weft.sparse_coo = layout("sparse_coo")
    weft.sparse_csr = layout("sparse_csr")
    # Tensor.is_sparse and is_sparse_csr are C getters (python/tensor.c)


_install()
