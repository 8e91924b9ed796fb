"""1-D convolutions, as the 2-D ops over a unit height.

``conv1d(x, w)`` on (N, C, L) is ``conv2d`` on (N, C, 1, L) with a (O, C, 1, K) kernel:
each op here checks its input as the 2-D op would, then expands into it
(``OpDef.expand``), so it shares the 2-D op's kernels, gradient and GPU twin. The
attributes are PyTorch's 1-D ints; the 2-D op sees ``(1, v)`` (``(0, p)`` for padding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asgrad.tensor.ir.common import randn
from asgrad.tensor.ir.registry import OpCase
from asgrad.tensor.ops._lift import register_1d


def _conv_attrs(**attrs: Any) -> dict[str, Any]:
    return {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **attrs}


def _conv1d_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 3, 9), randn(rng, 4, 3, 3)), _conv_attrs(), label="plain"),
        OpCase(
            (randn(rng, 2, 4, 10), randn(rng, 6, 2, 3), randn(rng, 6)),
            _conv_attrs(stride=2, padding=2, dilation=2, groups=2),
            label="bias, stride, padding, dilation, groups",
        ),
        OpCase((randn(rng, 1, 2, 5), randn(rng, 3, 2, 1)), _conv_attrs(), label="1x1"),
    ]


def _conv_transpose1d_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase(
            (randn(rng, 2, 3, 5), randn(rng, 3, 4, 3)),
            {**_conv_attrs(stride=2), "output_padding": 1},
            label="stride 2, output padding",
        ),
        OpCase(
            (randn(rng, 1, 4, 6), randn(rng, 4, 1, 3), randn(rng, 2)),
            {**_conv_attrs(padding=1, groups=2), "output_padding": 0},
            label="bias, groups",
        ),
    ]


register_1d(
    "conv1d",
    "conv",
    "conv2d",
    (0, 1),
    _conv1d_cases,
    "1-D convolution (conv2d, height 1)",
    __name__,
)
register_1d(
    "conv_transpose1d",
    "conv",
    "conv_transpose2d",
    (0, 1),
    _conv_transpose1d_cases,
    "1-D transposed convolution (conv_transpose2d, height 1)",
    __name__,
)
