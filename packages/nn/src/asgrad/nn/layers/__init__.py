"""Layers."""

from asgrad.nn.layers.activation import (
    ELU,
    GELU,
    Flatten,
    Identity,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from asgrad.nn.layers.container import ModuleList, Sequential
from asgrad.nn.layers.linear import Linear

__all__ = [
    "ELU",
    "GELU",
    "Flatten",
    "Identity",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "ModuleList",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
]
