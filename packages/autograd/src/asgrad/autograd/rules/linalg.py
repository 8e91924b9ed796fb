"""Gradient rule of ``matmul``: the incoming gradient times the other operand, transposed."""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor
from asgrad.tensor.ir.free_sizes import free_axes_of

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("matmul")
def _matmul(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    a, b = ins
    ga = g @ b.swapaxes(-1, -2) if needs[0] else None
    if not needs[1]:
        return ga, None
    if a.ndim > 2 and b.ndim == 2 and free_axes_of(b.node) == frozenset():
        # A stack of rows times one matrix (an input projection over every step): the
        # gradient is one product over all the rows, not a product per stacked matrix
        # summed afterwards.
        k, m = b.shape
        return ga, a.reshape(-1, k).T @ g.reshape(-1, m)
    return ga, a.swapaxes(-1, -2) @ g
