"""weft.nn: torch.nn's modules, losses, functional and init, in Python
over weft's C operators (see module.py for the Module bookkeeping)."""
from . import functional, init, utils
from .layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d,
                     ConvTranspose2d, Dropout, Embedding, Flatten, GELU, GroupNorm, Identity,
                     LayerNorm, LeakyReLU, Linear, LogSoftmax, MaxPool2d, ReLU, SiLU, Sigmoid,
                     Softmax, Tanh)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .module import Module, ModuleDict, ModuleList, Sequential
from .parameter import Parameter

__all__ = ["functional", "init", "utils", "Parameter", "Module", "Sequential", "ModuleList", "ModuleDict",
           "Identity", "Linear", "Conv2d", "ConvTranspose2d", "BatchNorm1d", "BatchNorm2d",
           "LayerNorm", "GroupNorm", "Dropout", "Embedding", "ReLU", "LeakyReLU", "GELU", "SiLU",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d", "Flatten", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss",
           "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss"]
