"""Tensor methods for math ops: rounding, tests, logic, integers, reductions, scans, order.

Each method appends one op (or the ops an op expands into) to the tensor's graph;
the functions of the same names live in the functional modules.
"""

from __future__ import annotations

from asgrad.tensor.methods_base import TensorBase


class MathMethods(TensorBase):
    """Tensor methods for math ops: rounding, tests, logic, integers, reductions, scans, order."""

    __slots__ = ()
