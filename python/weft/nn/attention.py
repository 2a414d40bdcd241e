"""weft.nn.MultiheadAttention: torch's constructor, parameter names
(in_proj_weight, in_proj_bias, out_proj) and forward(query, key, value,
key_padding_mask, need_weights, attn_mask, average_attn_weights), as
batched matrix products of the C operators."""
import math

from .. import _C
from . import functional as F
from . import init
from .linear import Linear
from .module import Module
from .parameter import Parameter


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("MultiheadAttention: embed_dim (%d) must be divisible by num_heads "
                             "(%d)" % (embed_dim, num_heads))
        if (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: kdim and vdim other than embed_dim "
                                      "are not supported by weft")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not "
                                      "supported by weft")
        self.embed_dim = embed_dim
        self.kdim = self.vdim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        kw = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}
        self.in_proj_weight = Parameter(_C.empty([3 * embed_dim, embed_dim], **kw))
        if bias:
            self.in_proj_bias = Parameter(_C.empty([3 * embed_dim], **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _heads(self, x, length, batch):
        # [length, batch, E] -> [batch * heads, length, head_dim]
        return x.reshape(length, batch * self.num_heads, self.head_dim).transpose(0, 1)

    def _mask(self, attn_mask, key_padding_mask, batch, tgt, src, dtype):
        """The additive mask [batch * heads or 1, tgt, src], or None."""
        mask = None
        if attn_mask is not None:
            if attn_mask.dim() == 2:
                if tuple(attn_mask.shape) != (tgt, src):
                    raise RuntimeError("MultiheadAttention: attn_mask should have shape %s, got %s"
                                       % ([tgt, src], list(attn_mask.shape)))
                attn_mask = attn_mask.unsqueeze(0)
            elif tuple(attn_mask.shape) != (batch * self.num_heads, tgt, src):
                raise RuntimeError("MultiheadAttention: attn_mask should have shape %s, got %s"
                                   % ([batch * self.num_heads, tgt, src], list(attn_mask.shape)))
            mask = self._additive(attn_mask, dtype)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (batch, src):
                raise RuntimeError("MultiheadAttention: key_padding_mask should have shape %s, "
                                   "got %s" % ([batch, src], list(key_padding_mask.shape)))
            pad = self._additive(key_padding_mask, dtype).reshape(batch, 1, 1, src)
            pad = pad.expand(batch, self.num_heads, 1, src).reshape(batch * self.num_heads, 1, src)
            mask = pad if mask is None else mask + pad
        return mask

    @staticmethod
    def _additive(mask, dtype):
        if str(mask.dtype) == "weft.bool":  # True: not allowed to attend
            return _C.zeros(list(mask.shape), dtype=dtype).masked_fill(mask, float("-inf"))
        return mask.to(dtype)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, _C.Tensor):
                raise TypeError("MultiheadAttention.forward: %s must be a weft.Tensor, not %s"
                                % (name, type(t).__name__))
        batched = query.dim() == 3
        if not batched:
            if query.dim() != 2:
                raise RuntimeError("MultiheadAttention: query should be 2-D (unbatched) or 3-D, "
                                   "got shape %s" % (list(query.shape),))
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt, batch, embed = query.shape
        src = key.shape[0]
        if embed != self.embed_dim:
            raise RuntimeError("MultiheadAttention: query's last dimension must be embed_dim=%d, "
                               "got shape %s" % (self.embed_dim, list(query.shape)))
        E = self.embed_dim
        w = self.in_proj_weight
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else \
            (b.narrow(0, 0, E), b.narrow(0, E, E), b.narrow(0, 2 * E, E))
        q = F.linear(query, w.narrow(0, 0, E), bq)
        k = F.linear(key, w.narrow(0, E, E), bk)
        v = F.linear(value, w.narrow(0, 2 * E, E), bv)
        q = self._heads(q, tgt, batch) * (1.0 / math.sqrt(self.head_dim))
        k = self._heads(k, src, batch)
        v = self._heads(v, src, batch)
        scores = _C.bmm(q, k.transpose(1, 2))
        mask = self._mask(attn_mask, key_padding_mask, batch, tgt, src, scores.dtype)
        if mask is not None:
            scores = scores + mask
        weights = _C.softmax(scores, -1)
        if self.training and self.dropout > 0:
            weights = F.dropout(weights, self.dropout, True)
        out = _C.bmm(weights, v)  # [batch * heads, tgt, head_dim]
        out = out.transpose(0, 1).reshape(tgt * batch, E)
        out = self.out_proj(out).reshape(tgt, batch, E)
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(batch, self.num_heads, tgt, src)
        if average_attn_weights:
            weights = weights.mean([1], False)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights
