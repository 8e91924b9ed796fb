"""Gradient rules of the shape ops: reshapes, transposes, broadcasts, ``concat``.

Each moves the incoming gradient back to the operand's layout; the ``*_like`` ops'
second input only gives a shape and gets no gradient.
"""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("reshape", "reshape_like")
def _reshape(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    gx = g.graph.apply("reshape_like", (g, ins[0]))
    return (gx, None) if len(ins) == 2 else (gx,)


@rule("transpose")
def _transpose(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axes = tuple(attrs["axes"])
    inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
    return (g.transpose(inverse),)


@rule("broadcast_to")
def _broadcast_to(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g,)  # grad() sums it down to the operand's shape


@rule("broadcast_like")
def _broadcast_like(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g, None


@rule("sum_to_like")
def _sum_to_like(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g.graph.apply("broadcast_like", (g, ins[0])), None


@rule("expand_dims")
def _expand_dims(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.squeeze(tuple(attrs["axis"])),)


@rule("squeeze")
def _squeeze(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.expand_dims(tuple(attrs["axis"])),)


@rule("concat")
def _concat(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axis = attrs["axis"] % out.ndim
    grads: list[Tensor | None] = []
    start = 0
    for x, need in zip(ins, needs, strict=True):
        stop = start + x.shape[axis]
        index = (slice(None),) * axis + (slice(start, stop),)
        grads.append(g.graph.apply("slice", (g,), {"index": index}) if need else None)
        start = stop
    return grads
