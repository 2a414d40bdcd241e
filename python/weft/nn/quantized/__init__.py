"""weft.nn.quantized: quantized operators with torch.ao.nn.quantized's names
(issue 17); the kernels are the quantized layout plugin's (oneDNN)."""
from . import functional  # noqa: F401
