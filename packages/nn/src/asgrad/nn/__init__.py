"""asgrad.nn: modules, layers, initializers, losses, optimizers, data and checkpoints."""

from asgrad.nn import init
from asgrad.nn.layers import (
    ELU,
    GELU,
    Flatten,
    Identity,
    LeakyReLU,
    Linear,
    LogSoftmax,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from asgrad.nn.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    mse_loss,
)
from asgrad.nn.module import Module, Parameter
from asgrad.nn.optim import SGD, Adam, AdamW, Optimizer

__version__ = "0.1.0"

__all__ = [
    "ELU",
    "GELU",
    "SGD",
    "Adam",
    "AdamW",
    "Flatten",
    "Identity",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "Module",
    "ModuleList",
    "Optimizer",
    "Parameter",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
    "__version__",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "init",
    "mse_loss",
]
