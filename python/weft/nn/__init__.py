"""weft.nn: torch.nn's modules, losses, functional and init, in Python
over weft's C operators (see module.py for the Module bookkeeping)."""
from . import functional, init, utils
from .attention import MultiheadAttention
from .transformer import TransformerEncoder, TransformerEncoderLayer
from .layers import (ELU, GELU, SELU, AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d,
                     ConstantPad2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Embedding, Flatten,
                     GroupNorm, Hardsigmoid, Hardswish, Hardtanh, Identity, LayerNorm, LeakyReLU,
                     Linear, LogSigmoid, LogSoftmax, MaxPool2d, Mish, ReflectionPad2d, ReLU, ReLU6,
                     ReplicationPad2d, Sigmoid, SiLU, Softmax, Softmin, Softplus, Tanh, Unflatten,
                     Upsample, ZeroPad2d)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss,
                   NLLLoss, SmoothL1Loss)
from .module import Module, ModuleDict, ModuleList, Sequential
from .parameter import Parameter

__all__ = ["functional", "init", "utils", "Parameter", "Module", "Sequential", "ModuleList", "ModuleDict",
           "Identity", "Linear", "Conv2d", "ConvTranspose2d", "BatchNorm1d", "BatchNorm2d",
           "LayerNorm", "GroupNorm", "Dropout", "Embedding", "ReLU", "LeakyReLU", "GELU", "SiLU",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d", "Flatten", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss",
           "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss", "Conv1d", "Unflatten",
           "Upsample", "ZeroPad2d", "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d",
           "ELU", "SELU", "Softplus", "Hardtanh", "ReLU6", "Mish", "Hardswish", "Hardsigmoid",
           "LogSigmoid", "Softmin", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder"]
