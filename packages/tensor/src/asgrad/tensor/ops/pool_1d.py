"""1-D pooling, as the 2-D ops over a unit height.

``max_pool1d(x)`` on (N, C, L) is ``max_pool2d`` on (N, C, 1, L) with a (1, K) window:
each op here checks its input as the 2-D op would, then expands into it
(``OpDef.expand``), so it shares the 2-D op's kernels, gradient and GPU twin. The
attributes are PyTorch's 1-D ints; the 2-D op sees ``(1, v)`` (``(0, p)`` for padding).
"""

from __future__ import annotations

import numpy as np

from asgrad.tensor.ir.common import randn
from asgrad.tensor.ir.registry import OpCase
from asgrad.tensor.ops._lift import register_1d


def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Values with no ties (max pooling's gradient is then unambiguous)."""
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0


def _max_pool1d_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((_distinct(rng, 2, 3, 8),), {"kernel_size": 2, "stride": 2, "padding": 0}),
        OpCase((_distinct(rng, 1, 2, 9),), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ]


def _avg_pool1d_cases(rng: np.random.Generator) -> list[OpCase]:
    base = {"kernel_size": 3, "stride": 2, "padding": 1}
    return [
        OpCase((randn(rng, 2, 3, 8),), {**base, "count_include_pad": True}, label="include"),
        OpCase((randn(rng, 2, 3, 8),), {**base, "count_include_pad": False}, label="exclude"),
    ]


def _adaptive_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 3, 7),), {"output_size": 3}, label="7->3"),
        OpCase((randn(rng, 1, 2, 4),), {"output_size": 1}, label="global"),
    ]


register_1d(
    "max_pool1d", "pool", "max_pool2d", (0,), _max_pool1d_cases, "1-D max pooling", __name__
)
register_1d(
    "avg_pool1d", "pool", "avg_pool2d", (0,), _avg_pool1d_cases, "1-D average pooling", __name__
)
register_1d(
    "adaptive_avg_pool1d",
    "pool",
    "adaptive_avg_pool2d",
    (0,),
    _adaptive_cases,
    "1-D average pooling to a fixed output_size",
    __name__,
)
