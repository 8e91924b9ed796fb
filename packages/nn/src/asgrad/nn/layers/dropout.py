"""``Dropout``: zeroes a fresh random subset of elements at every training step."""

from __future__ import annotations

import itertools

import numpy as np

from asgrad.nn.layers._checks import probability
from asgrad.nn.module import Module
from asgrad.tensor import Tensor, Variable, where
from asgrad.tensor.api.nn_functional import dropout, dropout2d

# Each Dropout draws its masks from its own stream: modules made in the same order
# get the same seeds, so a model built under one ``--seed`` is reproducible, and two
# dropout layers of the same shape never share masks.
_SEEDS = itertools.count()


class Dropout(Module):
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    In training mode the mask comes from the ``dropout`` op, seeded by the buffer
    ``seed``, which the training step advances (``graph.add_update``), so every
    step draws a fresh mask; in evaluation mode (or with ``p = 0``) it is the
    identity. ``inplace`` is accepted and ignored, as by the activations. ``seed``
    (default: a per-process counter) fixes the first mask.

    A graph traced in training mode reads the module's mode when it runs
    ([`mode_flag`][asgrad.nn.Module.mode_flag]): after ``eval()`` the same graph passes
    its input through unchanged, after ``train()`` it drops again. A graph traced in
    evaluation mode has no dropout op and stays an evaluation graph.

    >>> from asgrad.tensor import Graph
    >>> drop = Dropout(0.1)
    >>> x = Graph().input("x", (4, 8))
    >>> drop.eval()(x) is x
    True
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, *, seed: int | None = None) -> None:
        super().__init__()
        self.p = probability(p, "Dropout")
        self.inplace = bool(inplace)  # PyTorch's flag, ignored: graph ops never overwrite
        # Scattered starts (golden-ratio steps, kept in the int32 range that every
        # backend holds): layers' seed streams do not overlap for millions of steps.
        start = (next(_SEEDS) * 0x9E3779B1) % (1 << 30) if seed is None else int(seed)
        self.seed = Variable("seed", np.array(start, dtype=np.int64), trainable=False)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x  # traced in evaluation mode: an evaluation graph, no dropout op
        g = x.graph
        # A module applied twice in one graph continues its own stream.
        seed = g.updates[self.seed] if self.seed in g.updates else g.bind(self.seed)
        # The mode is read when the graph runs: eval() turns dropout off in a graph
        # already traced (where() passes the gradient of the branch taken).
        out = where(self.mode_flag(g), self._drop(x, seed), x)
        if self.seed in g.updates:
            g.updates[self.seed] = seed + 1
        else:
            g.add_update(self.seed, seed + 1)
        return out

    def _drop(self, x: Tensor, seed: Tensor) -> Tensor:
        return dropout(x, self.p, seed)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Dropout2d(Dropout):
    """Zeroes whole channels of ``(N, C, H, W)`` (or ``(C, H, W)``) with probability ``p``
    and scales the rest by ``1 / (1 - p)``, as PyTorch's ``nn.Dropout2d``; modes, seeds
    and ``inplace`` as [`Dropout`][asgrad.nn.Dropout].

    >>> from asgrad.tensor import Graph
    >>> Dropout2d(0.2)(Graph().input("x", (2, 3, 4, 4))).shape
    (2, 3, 4, 4)
    """

    def _drop(self, x: Tensor, seed: Tensor) -> Tensor:
        return dropout2d(x, self.p, seed)
