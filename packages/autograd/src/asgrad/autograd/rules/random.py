"""Gradient rule of ``dropout``: the same mask applied to the incoming gradient."""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, apply, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("dropout")
def _dropout(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # The same seed gives the same mask: dropout is its own (diagonal) adjoint.
    return apply("dropout", (g, ins[1]), attrs), None
