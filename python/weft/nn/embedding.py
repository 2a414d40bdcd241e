"""nn.Embedding: a lookup table of rows (normal(0, 1) initialisation, the
padding row zero and without gradient)."""
from .. import _C
from . import functional as F
from . import init
from ._checks import _factory
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("Embedding: padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("Embedding: max_norm and scale_grad_by_freq are not "
                                      "supported by weft")
        self.sparse = sparse
        self.max_norm = None
        if _weight is None:
            self.weight = Parameter(_C.empty([num_embeddings, embedding_dim],
                                             **_factory(device, dtype)))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise RuntimeError("Embedding: _weight must have shape [%d, %d], got %s"
                                   % (num_embeddings, embedding_dim, list(_weight.shape)))
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            init.zeros_(self.weight.select(0, self.padding_idx))

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        if embeddings.dim() != 2:
            raise RuntimeError("Embedding.from_pretrained: embeddings must be 2-D")
        m = cls(embeddings.shape[0], embeddings.shape[1], padding_idx=padding_idx,
                _weight=embeddings, **kwargs)
        m.weight.requires_grad_(not freeze)
        return m

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, sparse=self.sparse)

    def extra_repr(self):
        s = "%d, %d" % (self.num_embeddings, self.embedding_dim)
        if self.padding_idx is not None:
            s += ", padding_idx=%d" % self.padding_idx
        if self.sparse:
            s += ", sparse=True"
        return s
