"""A ReLU's gradient in max pooling's gradient kernel: the pool family's fused line group.

`fuse_pool_relu_backward` (the pool family's ``fuse`` in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on. In a network's backward pass, a
ReLU followed by max pooling gives ``where(c > 0, max_pool2d_backward(g, relu(c)), 0)``:
the pooling's gradient (a pass writing the whole input's shape), the ReLU's mask
(``greater``, another) and the ``where`` (a third). The gradient is non-zero only at
each window's argmax, where the pooled input is the window's maximum, and
``relu(c) > 0`` exactly where ``c > 0`` (NaN included), so the mask there is
``maximum > 0``: the compiled kernel reads it from the maximum it found
(`kernels_pool.max_pool2d_backward`'s ``positive``), bit for bit the three lines'
result, and the ``where``'s line becomes the kernel's value.

It applies where the ``where`` is ``where(greater(a, 0), p, 0)`` with ``p`` the pooling
gradient's compiled line of the input ``a`` (or of ``relu(a)``), read by nothing else
and no output; the ``greater`` line, then unread, is dropped with the other dead lines.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from asgrad.tensor.cpu.jit.fuse_conv import _is_zero
from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_at,
    line_readers,
    runtime_roots,
    with_out,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType


def fuse_pool_relu_backward(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each ReLU mask after a pooling gradient in its kernel (see the
    module docstring)."""
    if not all(context.registered(op) for op in ("max_pool2d_backward", "greater", "where")):
        return list(lines)
    readers = line_readers(lines)
    by_id = line_at(lines)
    roots = runtime_roots(refs, context.roots)
    out = list(lines)
    for k, line in enumerate(lines):
        call = line.call
        if (
            line.node.op != "where"
            or not isinstance(call, Call)
            or call.fn != "_where_zero"
            or call.args[2] != "True"
            or not isinstance(call.args[0], Value)
            or not isinstance(call.args[1], Value)
        ):
            continue
        kp, km = by_id.get(call.args[1].id), by_id.get(call.args[0].id)
        if kp is None or km is None or kp > k:
            continue
        pool, mask = lines[kp], lines[km]
        pool_call = pool.call
        if (
            pool.node.op != "max_pool2d_backward"
            or not isinstance(pool_call, Call)
            or not pool_call.fn.startswith("jk")  # the compiled kernel's line
            or pool.node.id in roots
            or len(readers.get(pool.node.id, ())) != 1
            or types[pool.node.id] != types[line.node.id]
            or mask.node.op != "greater"
            or not _is_zero(refs[mask.node.inputs[1].id])
            or not _masks(mask.node.inputs[0].id, pool.node.inputs[1].id, refs, lines, by_id)
        ):
            continue
        from asgrad.tensor.cpu.jit.kernels_pool import max_pool2d_backward  # imports Numba

        name = f"_pool_relu_backward{pool.node.id}"
        env[name] = functools.partial(max_pool2d_backward, positive=True, **pool.node.attrs)
        fused = Call(name, pool_call.args)
        out[kp] = Line(node=pool.node, call=fused, reuse=Reuse.INTO_SLOT, into=with_out(fused))
        out[k] = Line(node=line.node, call=Value(pool.node.id), reuse=Reuse.ALIAS)
    return out


def _masks(
    masked_id: int,
    pooled_id: int,
    refs: Mapping[int, Ref],
    lines: Sequence[Line],
    by_id: Mapping[int, int],
) -> bool:
    """Whether ``masked > 0`` is ``pooled > 0`` everywhere: the same value, or ``pooled``
    is ``relu(masked)``."""
    masked, pooled = refs[masked_id], refs[pooled_id]
    if masked.is_const or pooled.is_const:
        return False
    if masked.id == pooled.id:
        return True
    kr = by_id.get(pooled.id)
    if kr is None:
        return False
    relu = lines[kr].node
    return relu.op == "relu" and refs[relu.inputs[0].id].id == masked.id
