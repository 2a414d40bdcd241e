"""weft.nn.utils: gradient clipping (torch.nn.utils' clip_grad_norm_ and
clip_grad_value_) and parameters_to_vector, with whole-tensor C operators."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, parameters_to_vector

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector"]
