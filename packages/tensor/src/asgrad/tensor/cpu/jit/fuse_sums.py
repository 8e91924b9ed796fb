"""Sums over leading axes on the compiled path: one kernel in blocks of rows, over threads.

`fuse_leading_sums` (the reduction family's, after softmax's gradient, in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on. A ``sum`` or ``sum_to_like``
line that numpy runs as ``add.reduce`` over leading axes (a bias's gradient, a
positional embedding's) of a floating value of at least
`asgrad.tensor.cpu.jit.threads.PARALLEL_MIN` elements becomes a call of
`asgrad.tensor.cpu.jit.kernels_sum.leading_sum`: the rows added in blocks whose size
depends on the row count alone, on one thread or over Numba's threads with the same
bits. It is taken at every thread count, so that the result does not depend on the
threads; it differs from the numpy path's by rounding only, and not at all up to
`asgrad.tensor.cpu.jit.kernels_sum.ROWS` rows.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from typing import Any

from asgrad.tensor.cpu.jit import threads
from asgrad.tensor.cpu.records import Call, Expr, Line, Method, Ref, Reuse, Value
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

__all__ = ["fuse_leading_sums"]

_FLOATS = ("float32", "float64")


def _reduced(call: Expr) -> tuple[int, tuple[int, ...]] | None:
    """(the value's id, the axes) of an ``_add_reduce(value, axes, ...)`` call, possibly
    reshaped; else None."""
    if isinstance(call, Method) and call.name == "reshape":
        call = call.obj
    if not isinstance(call, Call) or call.fn != "_add_reduce" or len(call.args) < 2:
        return None
    value, axes = call.args[0], call.args[1]
    if not isinstance(value, Value) or not isinstance(axes, str):
        return None
    try:
        parsed = ast.literal_eval(axes)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(parsed, tuple) or not all(isinstance(a, int) for a in parsed):
        return None
    return value.id, parsed


def fuse_leading_sums(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each large sum over leading axes a `leading_sum` call (see the
    module docstring)."""
    out: list[Line] = []
    for line in lines:
        node = line.node
        found = _reduced(line.call) if node.op in ("sum", "sum_to_like") else None
        if found is None:
            out.append(line)
            continue
        value, axes = found
        src, dst = types[node.inputs[0].id], types[node.id]
        k = len(axes)
        kept = math.prod(src.shape[k:])
        if (
            src.dtype not in _FLOATS
            or dst.dtype != src.dtype
            or not 0 < k < len(src.shape)
            or axes != tuple(range(k))
            or math.prod(src.shape) < threads.PARALLEL_MIN
            or math.prod(dst.shape) != kept
        ):
            out.append(line)
            continue
        name = f"_leading_sum{node.id}"
        env[name] = _LeadingSum(kept, dst.shape)
        out.append(Line(node=node, call=Call(name, (Value(value),)), reuse=Reuse.FRESH))
    return out


class _LeadingSum:
    """`leading_sum` keeping ``n`` elements, shaped ``shape``, importing Numba on its
    first call."""

    def __init__(self, n: int, shape: tuple[int, ...]) -> None:
        self.n = n
        self.shape = shape

    def __call__(self, x: Any) -> Any:
        from asgrad.tensor.cpu.jit.kernels_sum import leading_sum

        return leading_sum(x, self.n).reshape(self.shape)
