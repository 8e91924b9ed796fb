"""Tensor methods for shape, indexing, linear algebra and creation ops.

Each method appends one op (or the ops an op expands into) to the tensor's graph;
the functions of the same names live in the functional modules.
"""

from __future__ import annotations

from asgrad.tensor.methods_base import TensorBase


class ShapeMethods(TensorBase):
    """Tensor methods for shape, indexing, linear algebra and creation ops."""

    __slots__ = ()
