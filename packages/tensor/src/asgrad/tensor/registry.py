"""The op registry: one entry per primitive op, read by every layer of asgrad.

An :class:`OpDef` holds what the tensor package knows of an op: its name, its
shape/dtype rule, its numpy kernel (the reference semantics) and the test cases
that the gradient checks and GPU parity tests are generated from. The autograd
package adds a gradient rule per op and the GPU package a WGSL kernel per op, both
keyed by the op's name; tests fail when an op lacks either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.tensor.errors import GraphError

Shape = tuple[int, ...]
Attrs = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TensorType:
    """The static type of a graph value: its shape and dtype."""

    shape: Shape
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class OpCase:
    """One test case of an op: input arrays (float64 where floating) and attributes.

    ``wrt`` lists the inputs a gradient check differentiates (None: every floating
    input). ``grad=False`` marks a case that is a value test only (a kink, say).
    """

    inputs: tuple[np.ndarray, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    wrt: tuple[int, ...] | None = None
    grad: bool = True
    label: str = ""


InferFn = Callable[[Sequence[TensorType], Attrs], TensorType]
KernelFn = Callable[..., np.ndarray]
CasesFn = Callable[[np.random.Generator], list[OpCase]]


@dataclass(frozen=True)
class OpDef:
    """Everything the tensor package knows about one primitive op.

    Attributes:
        name: The op's unique name (``"matmul"``).
        category: ``leaf``, ``elementwise``, ``reduction``, ``shape``, ``index``,
            ``linalg``, ``nn``, ``optim`` or ``random``.
        infer: The shape/dtype rule; raises :class:`ShapeError`/:class:`DTypeError`.
        kernel: The numpy kernel, ``kernel(*arrays, **attrs) -> ndarray``.
        arity: The number of inputs, or None for a variadic op.
        differentiable: Whether autograd must hold a gradient rule for it.
        tolerance: ``(rtol, atol)`` within which a float32 backend must match the
            numpy kernel.
        cases: Random test cases for value, gradient and parity tests.
        fused: Whether the op is a fused composite (softmax, layer norm...) rather
            than an arithmetic primitive; the docs' coverage table says which.
        doc: One line for the coverage table.
    """

    name: str
    category: str
    infer: InferFn
    kernel: KernelFn
    arity: int | None
    differentiable: bool = True
    tolerance: tuple[float, float] = (1e-5, 1e-6)
    cases: CasesFn | None = None
    fused: bool = False
    doc: str = ""


_REGISTRY: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add ``op`` to the registry; a second op of the same name is an error."""
    if op.name in _REGISTRY:
        raise GraphError(f"op {op.name!r} is already registered")
    _REGISTRY[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    """The registered op called ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise GraphError(f"no op called {name!r} is registered") from None


def all_ops() -> list[OpDef]:
    """Every registered op, sorted by name."""
    _load_builtin_ops()
    return sorted(_REGISTRY.values(), key=lambda op: op.name)


def iter_ops() -> Iterator[OpDef]:
    """Iterate over every registered op, sorted by name."""
    yield from all_ops()


def _load_builtin_ops() -> None:
    # Importing the ops package registers the built-in ops; done lazily so that
    # this module stays importable from the op modules themselves.
    import asgrad.tensor.ops  # noqa: F401  # imported for its registrations
