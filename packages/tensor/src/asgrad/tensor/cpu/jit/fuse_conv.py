"""A convolution's ReLU in its kernel: the conv family's fused line group.

`fuse_conv_relu` (the conv family's ``fuse`` in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on. A ``conv2d`` followed by
``relu`` is two passes over the activations on the numpy path; the compiled
convolution applies the ReLU while it writes its result (`conv2d`'s ``relu``), and
the ReLU's line becomes the convolution's value itself.

That changes the convolution's own value, so it is done only where nothing else
could tell: the value is no output or update, and every other line reading it is a
``greater(value, 0)``, ReLU's gradient mask, which is the same on ``relu(x)`` as on
``x`` (``relu(x) > 0`` exactly where ``x > 0``, NaN included).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_readers,
    runtime_roots,
    with_out,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType


def _is_zero(ref: Ref) -> bool:
    if not ref.is_const:
        return False
    value = np.asarray(ref.const)
    return value.size == 1 and bool(value.reshape(-1)[0] == 0)


def fuse_conv_relu(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each convolution's ReLU in its kernel where that is safe (see the
    module docstring)."""
    if not all(context.registered(op) for op in ("conv2d", "relu", "greater")):
        return list(lines)
    readers = line_readers(lines)
    roots = runtime_roots(refs, context.roots)
    out = list(lines)
    for k, line in enumerate(lines):
        node = line.node
        call = line.call
        if (
            node.op != "conv2d"
            or not isinstance(call, Call)
            or not call.fn.startswith("jk")  # the compiled kernel's line
            or node.id in roots
            or refs[node.id].id != node.id
        ):
            continue
        relus, others = [], []
        for r in readers.get(node.id, []):
            user = lines[r].node
            if user.op == "relu" and types[user.id] == types[node.id]:
                relus.append(r)
            elif not (
                user.op == "greater"
                and refs[user.inputs[0].id].id == node.id
                and _is_zero(refs[user.inputs[1].id])
            ):
                others.append(r)
        if len(relus) != 1 or others or relus[0] < k:
            continue
        from asgrad.tensor.cpu.jit.kernels_conv import conv2d  # imports Numba

        name = f"_conv_relu{node.id}"
        env[name] = functools.partial(conv2d, relu=True, **node.attrs)
        fused = Call(name, call.args)
        out[k] = Line(node=node, call=fused, reuse=Reuse.INTO_SLOT, into=with_out(fused))
        relu = lines[relus[0]].node
        out[relus[0]] = Line(node=relu, call=Value(node.id), reuse=Reuse.ALIAS)
    return out
