"""A transposed value reshaped (a copy in numpy) copied over threads on the compiled path.

`fuse_transposed_reshapes` (the shape family's, in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on. A ``reshape`` line of a 4-D
floating value of at least `asgrad.tensor.cpu.jit.threads.PARALLEL_MIN` elements that a
``transpose`` line made (attention's output heads merged back: ``[B, H, T, d]``
transposed to ``[B, T, H, d]``, reshaped to ``[B, T, H * d]``) calls
`asgrad.tensor.cpu.jit.kernels_copy.reshaped`: numpy's view where it makes one, else
the copy by `asgrad.tensor.cpu.jit.kernels_copy.copy_into`, over threads where its
measured choice says so. A copy is exact: the result is numpy's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from asgrad.tensor.cpu.jit import threads
from asgrad.tensor.cpu.records import Call, Line, Method, Ref, Value
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

__all__ = ["fuse_transposed_reshapes"]


def fuse_transposed_reshapes(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each large reshape of a transposed 4-D value a `reshaped` call."""
    transposed = {
        line.node.id
        for line in lines
        if isinstance(line.call, Method) and line.call.name == "transpose"
    }
    out: list[Line] = []
    for line in lines:
        call = line.call
        if (
            line.node.op in ("reshape", "reshape_like")
            and isinstance(call, Method)
            and call.name == "reshape"
            and isinstance(call.obj, Value)
            and call.obj.id in transposed
        ):
            t = types[call.obj.id]
            if (
                len(t.shape) == 4
                and t.dtype in ("float32", "float64")
                and math.prod(t.shape) >= threads.PARALLEL_MIN
            ):
                env["_reshaped"] = _reshaped
                line = Line(node=line.node, call=Call("_reshaped", (call.obj, *call.args)))
        out.append(line)
    return out


def _reshaped(x: Any, shape: tuple[int, ...]) -> Any:
    """`asgrad.tensor.cpu.jit.kernels_copy.reshaped`, importing Numba on the first call."""
    from asgrad.tensor.cpu.jit.kernels_copy import reshaped

    return reshaped(x, shape)
