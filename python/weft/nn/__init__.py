"""weft.nn: torch.nn's modules, losses, functional and init, in Python
over weft's C operators (module.py keeps the Module bookkeeping; one file
per family of layers, as torch.nn.modules)."""
from . import functional, init, utils
from .activation import (ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
                         LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softmin, Softplus,
                         Tanh)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .dropout import Dropout
from .embedding import Embedding
from .linear import Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss,
                   NLLLoss, SmoothL1Loss)
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from .parameter import Parameter
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .shape import (ConstantPad2d, Flatten, ReflectionPad2d, ReplicationPad2d, Unflatten, Upsample,
                    ZeroPad2d)
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "functional", "init", "utils", "Parameter", "Module", "Sequential", "ModuleList", "ModuleDict",
    # layers
    "Identity", "Linear", "Conv1d", "Conv2d", "ConvTranspose2d", "BatchNorm1d", "BatchNorm2d",
    "LayerNorm", "GroupNorm", "Dropout", "Embedding", "MaxPool2d", "AvgPool2d",
    "AdaptiveAvgPool2d", "Flatten", "Unflatten", "Upsample", "ZeroPad2d", "ConstantPad2d",
    "ReflectionPad2d", "ReplicationPad2d", "MultiheadAttention", "TransformerEncoderLayer",
    "TransformerEncoder",
    # activations
    "ReLU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "ELU", "SELU",
    "Softplus", "Hardtanh", "ReLU6", "Mish", "Hardswish", "Hardsigmoid", "LogSigmoid", "Softmin",
    # losses
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss",
]
