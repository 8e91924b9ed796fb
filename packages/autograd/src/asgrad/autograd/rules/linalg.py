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
    gb = None
    if needs[1]:
        gb = _folded(a, g) if b.ndim == 2 < a.ndim else a.swapaxes(-1, -2) @ g
    return ga, gb


def _folded(a: Tensor, g: Tensor) -> Tensor:
    """The gradient of a 2-D ``b`` in ``a @ b`` with ``a`` of rank > 2 (a linear layer
    on a batch of sequences): the leading axes of ``a`` and ``g`` folded into the
    product's sum, one 2-D product (PyTorch's, whose Linear flattens them), instead of a
    batch of products summed down to ``b``'s shape. Reshapes of ``a`` and ``g`` only."""
    rows = a.reshape(-1, a.shape[-1])
    return rows.swapaxes(-1, -2) @ g.reshape(-1, g.shape[-1])
