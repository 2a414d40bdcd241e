"""weft.optim: torch.optim's optimizers and learning-rate schedules."""
from . import lr_scheduler
from .algorithms import SGD, Adagrad, Adam, AdamW, RMSprop
from .optimizer import Optimizer
# row-wise Adam on sparse gradients (issue 16)
from .sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler",
           "SparseAdam"]
