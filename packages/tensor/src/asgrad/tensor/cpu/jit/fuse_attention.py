"""Attention's scaled, masked softmax as one compiled pass (the norm family's fused
line group).

Attention writes its weights as ``softmax(scores * scale + mask)`` along the last
axis, ``mask`` a constant (``-inf`` where a query may not look: above the diagonal
for a causal mask): three lines, three passes over a value the size of the
scores. Where the product and the sum are read by nothing else and are no output,
the scale is a constant scalar and the mask a constant of the scores' dtype whose
shape ends theirs (after leading 1s), `fuse_masked_softmax` makes the softmax's line
one call of `asgrad.tensor.cpu.jit.kernels_attention.masked_softmax` and the other
two lines go. The product is optional (a mask alone). The result differs from the
numpy path's by rounding only (the row sum reassociated, as the softmax kernel's is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_at,
    line_readers,
    runtime_roots,
    shaped,
    with_out,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType

__all__ = ["fuse_masked_softmax"]


def _mask_rows(mask: Any, t: TensorType) -> np.ndarray | None:
    """``mask`` as a 2-D array of rows of ``t``'s last axis, repeating over the rows of
    a value of type ``t``, or None when it does not end ``t``'s shape that way."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.dtype(t.dtype) or mask.ndim < 1:
        return None
    shape = mask.shape
    while len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(t.shape) or tuple(t.shape[len(t.shape) - len(shape) :]) != shape:
        return None
    n = t.shape[-1]
    return np.ascontiguousarray(mask.reshape(-1, n))


def _scalar(value: Any) -> float | None:
    """A constant scalar's value (a 0-d or one-element array, or a number), else None."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | float | np.floating):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind == "f":
        return float(value.reshape(()))
    return None


def fuse_masked_softmax(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each scaled, masked softmax as one pass (see the module
    docstring)."""
    if not all(context.registered(op) for op in ("softmax", "add", "mul")):
        return list(lines)
    readers = line_readers(lines)
    roots = runtime_roots(refs, context.roots)
    at = line_at(lines)

    def producer(value: int, op: str, reader: Node) -> Node | None:
        """The line computing ``value`` when it is an ``op`` read by ``reader`` alone
        and no root."""
        if value in roots or value not in at or refs[value].id != value:
            return None
        node = lines[at[value]].node
        users = readers.get(value, [])
        if node.op != op or len(users) != 1 or lines[users[0]].node.id != reader.id:
            return None
        return node

    def split(node: Node, t: TensorType) -> tuple[int, Any] | None:
        """``(value, constant)`` of a binary node of one runtime operand of type ``t``
        and one constant."""
        a, b = (refs[n.id] for n in node.inputs)
        if a.is_const == b.is_const:
            return None
        var, const = (b, a) if a.is_const else (a, b)
        if types[var.id] != t:
            return None
        return var.id, const.const

    drop: set[int] = set()
    out = list(lines)
    for line in lines:
        soft = line.node
        t = types[soft.id]
        if soft.op != "softmax" or t.dtype not in ("float32", "float64") or not shaped(t):
            continue
        if soft.attrs["axis"] != len(t.shape) - 1 or refs[soft.inputs[0].id].is_const:
            continue
        added = producer(refs[soft.inputs[0].id].id, "add", soft)
        if added is None or types[added.id] != t:
            continue
        parts = split(added, t)
        mask = None if parts is None else _mask_rows(parts[1], t)
        if parts is None or mask is None:
            continue
        x, scale, fused = parts[0], 1.0, [added]
        scaled = producer(x, "mul", added)
        if scaled is not None:
            factor = split(scaled, t)
            value = None if factor is None else _scalar(factor[1])
            if factor is not None and value is not None:
                x, scale = factor[0], value
                fused.append(scaled)
        name = f"_masked_softmax{soft.id}"
        env[name] = _LazyMasked(scale, mask)
        call = Call(name, (Value(x),))
        out[at[soft.id]] = Line(node=soft, call=call, reuse=Reuse.IN_PLACE, into=with_out(call))
        drop.update(at[n.id] for n in fused)
    return [line for k, line in enumerate(out) if k not in drop]


class _LazyMasked:
    """`masked_softmax` at one scale and mask, importing Numba on its first call."""

    def __init__(self, scale: float, mask: np.ndarray) -> None:
        self.scale, self.mask = scale, mask

    def __call__(self, x: Any, out: Any = None) -> Any:
        from asgrad.tensor.cpu.jit.kernels_attention import masked_softmax

        return masked_softmax(x, self.scale, self.mask, out=out)
