"""The part of [`Tensor`][asgrad.tensor.Tensor] that its method mixins build on.

The mixins (``methods_math``, ``methods_shape``, ``methods_nn``) subclass
`TensorBase` so that the type checker knows what ``self`` offers; at run
time it adds nothing: [`Tensor`][asgrad.tensor.Tensor] defines every member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor
    from asgrad.tensor.ir.graph import Graph, Node
    from asgrad.tensor.ir.registry import Shape


class TensorBase:
    """What the method mixins may use of a tensor (declarations only)."""

    __slots__ = ()

    if TYPE_CHECKING:
        node: Node

        @property
        def graph(self) -> Graph: ...
        @property
        def shape(self) -> Shape: ...
        @property
        def dtype(self) -> str: ...
        @property
        def ndim(self) -> int: ...
        def _apply(self, op: str, *others: Tensor, **attrs: Any) -> Tensor: ...
        def _lift(self, other: object) -> Tensor: ...
        def _binary(self, op: str, other: object) -> Tensor: ...
