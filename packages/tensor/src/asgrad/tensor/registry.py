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

# The op families. Each family is one file of the same name in every package.
FAMILIES = (
    "leaf",
    "elementwise",
    "reduction",
    "shape",
    "index",
    "linalg",
    "conv",
    "pool",
    "norm",
    "random",
    "optim",
)


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
        family: The op family, one of :data:`FAMILIES`; the same file name holds the
            op in every package (``tensor/ops/<family>.py``,
            ``autograd/rules/<family>.py``, ``gpu/lowering/<family>.py``).
        infer: The shape/dtype rule; raises :class:`ShapeError`/:class:`DTypeError`.
        kernel: The numpy kernel, ``kernel(*arrays, **attrs) -> ndarray``.
        arity: The number of inputs, or None for a variadic op.
        differentiable: Whether autograd must hold a gradient rule for it.
        tolerance: ``(rtol, atol)`` within which a float32 backend must match the
            numpy kernel.
        cases: Random test cases for value, gradient and parity tests.
        composite: Whether the op is a composite operation (softmax, layer norm...)
            kept as one primitive with its own kernels instead of being decomposed;
            the docs' op table says which.
        doc: One line for the coverage table.
    """

    name: str
    family: str
    infer: InferFn
    kernel: KernelFn
    arity: int | None
    differentiable: bool = True
    tolerance: tuple[float, float] = (1e-5, 1e-6)
    cases: CasesFn | None = None
    composite: bool = False
    doc: str = ""


_REGISTRY: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add ``op`` to the registry; a second op of the same name is an error."""
    if op.family not in FAMILIES:
        raise GraphError(f"op {op.name!r} has unknown family {op.family!r}; use one of {FAMILIES}")
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
