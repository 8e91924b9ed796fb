"""What a plan's dispatches are, by kind: how many copies, elementwise kernels, matmuls...

A captured command's label is its pipeline's cache key, shortened
(`Pipeline`); `kernel_kind` names the kind of
kernel from it, and `count_kinds` counts a plan's dispatches by kind, which is
what ``benchmarks/gpu_micro.py --profile`` prints and what tests pin.

>>> kernel_kind("copy vec4<u32> 2"), kernel_kind("elementwise x0 strided 2 f32")
('copy', 'view copy')
>>> kernel_kind("elementwise x0 * x1 contig 0 f32"), kernel_kind("elementwise 0.0 contig 0 f32")
('elementwise', 'fill')
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["KINDS", "count_kinds", "kernel_kind"]

_MODE = r" (contig|strided|scalar)\b"
# label pattern (matched at its start) -> kind, first match wins
KINDS: tuple[tuple[str, str], ...] = (
    ("copy", "copy"),
    ("elementwise x0" + _MODE, "view copy"),  # a strided view made contiguous
    (r"elementwise [-0-9.e]+(u|i)?" + _MODE, "fill"),
    ("elementwise", "elementwise"),
    ("multi_update", "optimizer update"),
    ("multi_elementwise", "variable casts"),  # of variables alone (multi_copies)
    ("multi_column_sum", "gradient sums"),  # the bias gradients the update reads
    ("multi_none_true", "checks"),  # all(isfinite(g)) of many gradients (multi_finite)
    ("linalg", "matmul"),
    ("attention_backward", "attention backward"),
    ("attention", "attention"),
    ("reduction_cols", "column reduction"),
    ("reduction", "reduction"),
    ("norm_softmax", "softmax"),
    ("norm", "norm"),
    ("index", "index"),
    ("conv", "conv"),
    ("pool", "pool"),
)


def kernel_kind(label: str) -> str:
    """The kind of kernel a dispatch label names (its first word when unknown)."""
    for pattern, kind in KINDS:
        if re.match(pattern, label):
            return kind
    return label.split(" ", 1)[0] or "unknown"


def count_kinds(commands: Iterable[tuple[Any, ...]]) -> Counter[str]:
    """Dispatches by kind; each command's last item is its label (a plan's commands)."""
    return Counter(kernel_kind(str(command[-1])) for command in commands)
