"""Gradient rules of the indexing ops: ``slice``/``scatter_slice``, ``gather``/``scatter_add``.

The ops come in adjoint pairs, so each rule emits its partner. Indices get no
gradient, and ``one_hot`` (of integer indices) has no rule.
"""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("slice")
def _slice(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (g.graph.apply("scatter_slice", (g, ins[0]), {"index": attrs["index"]}),)


@rule("scatter_slice")
def _scatter_slice(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return g.graph.apply("slice", (g,), {"index": attrs["index"]}), None


@rule("gather")
def _gather(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, idx = ins
    return g.graph.apply("scatter_add", (g, idx, x), {"axis": attrs["axis"]}), None


@rule("scatter_add")
def _scatter_add(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    _, idx, _ = ins
    return g.gather(idx, axis=attrs["axis"]), None, None
