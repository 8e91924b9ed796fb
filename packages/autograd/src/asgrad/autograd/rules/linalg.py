"""Gradient rule of ``matmul``: the incoming gradient times the other operand, transposed."""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("matmul")
def _matmul(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    a, b = ins
    ga = g @ b.swapaxes(-1, -2) if needs[0] else None
    gb = a.swapaxes(-1, -2) @ g if needs[1] else None
    return ga, gb
