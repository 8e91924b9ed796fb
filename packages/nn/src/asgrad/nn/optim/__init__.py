"""Optimizers whose updates are graph ops, compiled into the training step."""

from asgrad.nn.optim.adam import Adam, AdamW
from asgrad.nn.optim.adam_variants import NAdam, RAdam
from asgrad.nn.optim.adaptive import Adadelta, Adagrad, Adamax
from asgrad.nn.optim.lbfgs import LBFGS
from asgrad.nn.optim.optimizer import Optimizer
from asgrad.nn.optim.rmsprop import RMSprop
from asgrad.nn.optim.sgd import SGD

__all__ = [
    "LBFGS",
    "SGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
]
