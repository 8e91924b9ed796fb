"""Learning-rate schedulers: they set ``optimizer.lr`` between steps, never recompiling.

The learning rate is a variable that the compiled training step reads, so a
scheduler only writes a new number into it. Every scheduler computes its rate in
closed form from the number of [`LRScheduler.step`][asgrad.nn.LRScheduler.step] calls, as PyTorch's
``_get_closed_form_lr``: the first rate (``last_epoch == 0``) is set when the
scheduler is made, and each ``step()`` after an optimizer step moves to the next.

>>> from asgrad.nn import Linear, SGD
>>> opt = SGD(Linear(2, 1, rng=0).parameters(), lr=0.1)
>>> sched = StepLR(opt, step_size=2, gamma=0.5)
>>> rates = []
>>> for _ in range(5):
...     rates.append(opt.lr)  # a compiled step would run here
...     sched.step()
>>> rates
[0.1, 0.1, 0.05, 0.05, 0.025]
"""

from asgrad.nn.schedulers.base import LRScheduler
from asgrad.nn.schedulers.closed_form import (
    CosineAnnealingLR,
    ExponentialLR,
    LinearWarmup,
    StepLR,
    WarmupCosine,
)
from asgrad.nn.schedulers.cyclic import CosineAnnealingWarmRestarts, OneCycleLR
from asgrad.nn.schedulers.stepwise import LambdaLR, MultiStepLR, ReduceLROnPlateau

__all__ = [
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearWarmup",
    "MultiStepLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "StepLR",
    "WarmupCosine",
]
