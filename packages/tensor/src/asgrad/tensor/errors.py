"""The exception hierarchy of asgrad.

Every error a user can make while building or running a graph derives from
[`AsgradError`][asgrad.tensor.AsgradError]. Messages name the op, the shapes involved, the user's
source line where it is known, and what to do about it.
"""

from __future__ import annotations


class AsgradError(Exception):
    """Base class of every error raised by asgrad.

    >>> from asgrad.tensor import AsgradError
    >>> [c.__name__ for c in AsgradError.__bases__]
    ['Exception']
    """


class GraphError(AsgradError):
    """The graph is malformed: mixed graphs, unknown inputs, cycles.

    >>> from asgrad.tensor import Graph, GraphError
    >>> try:
    ...     bool(Graph().input("x", (2,)))
    ... except GraphError as error:
    ...     print(type(error).__name__, [c.__name__ for c in GraphError.__bases__])
    GraphError ['AsgradError']
    """


class NameConflictError(GraphError):
    """A name was registered twice in one graph.

    >>> from asgrad.tensor import NameConflictError
    >>> [c.__name__ for c in NameConflictError.__bases__]
    ['GraphError']
    """


class ArgumentError(AsgradError, ValueError):
    """An argument is outside the values it may take (a negative rate, an unknown mode).

    >>> from asgrad.tensor import ArgumentError
    >>> [c.__name__ for c in ArgumentError.__bases__]
    ['AsgradError', 'ValueError']
    """


class ArgumentTypeError(AsgradError, TypeError):
    """An argument is of the wrong type (a list where a Tensor is needed).

    >>> from asgrad.tensor import ArgumentTypeError, Graph
    >>> try:
    ...     Graph().input("x", (2,)) + "one"
    ... except ArgumentTypeError as error:
    ...     print(type(error).__name__, [c.__name__ for c in ArgumentTypeError.__bases__])
    ArgumentTypeError ['AsgradError', 'TypeError']
    """


class OutOfRangeError(AsgradError, IndexError):
    """An index is out of range for the sequence or axis it indexes.

    >>> from asgrad.tensor import OutOfRangeError
    >>> [c.__name__ for c in OutOfRangeError.__bases__]
    ['AsgradError', 'IndexError']
    """


class ShapeError(AsgradError, ValueError):
    """Operand shapes do not fit the op (broadcasting, reshape, matmul, axes).

    >>> from asgrad.tensor import Graph, ShapeError
    >>> try:
    ...     Graph().input("x", (2, 3)).reshape(4)
    ... except ShapeError as error:
    ...     print(type(error).__name__, [c.__name__ for c in ShapeError.__bases__])
    ShapeError ['AsgradError', 'ValueError']
    """


class FreeAxisError(ShapeError):
    """An op cannot follow a free axis (one fed at any size) and refuses it when built.

    >>> from asgrad.tensor import FreeAxisError, Graph
    >>> x = Graph().input("x", (3,))  # axis 0, the batch axis, is free
    >>> try:
    ...     x.repeat_interleave([1, 0, 2], 0)  # one count per element of the declared 3
    ... except FreeAxisError as e:
    ...     print(type(e).__name__)
    FreeAxisError
    """


class DTypeError(AsgradError, TypeError):
    """Operand dtypes do not fit the op.

    >>> from asgrad.tensor import DTypeError, Graph
    >>> try:
    ...     (Graph().input("x", (2,)) > 0).sum()
    ... except DTypeError as error:
    ...     print(type(error).__name__, [c.__name__ for c in DTypeError.__bases__])
    DTypeError ['AsgradError', 'TypeError']
    """


class FeedError(AsgradError, ValueError):
    """A value fed to a compiled program is missing or has the wrong shape/dtype.

    >>> from asgrad.tensor import Graph, FeedError, evaluate
    >>> try:
    ...     evaluate(Graph().input("x", (2,)) * 2.0, {})
    ... except FeedError as error:
    ...     print(type(error).__name__, [c.__name__ for c in FeedError.__bases__])
    FeedError ['AsgradError', 'ValueError']
    """


class NotDifferentiableError(AsgradError, TypeError):
    """A gradient was asked of a value that has none (integer, bool, no rule).

    >>> from asgrad.tensor import NotDifferentiableError
    >>> [c.__name__ for c in NotDifferentiableError.__bases__]
    ['AsgradError', 'TypeError']
    """


class BackendError(AsgradError, RuntimeError):
    """A backend is unknown or cannot run the program.

    >>> from asgrad.tensor import BackendError
    >>> [c.__name__ for c in BackendError.__bases__]
    ['AsgradError', 'RuntimeError']
    """


class PrecisionWarning(UserWarning):
    """A fed array was narrowed to the input's dtype (float64 to float32): values are
    rounded. Issued once per program and input; feed the input's dtype to avoid it.

    >>> from asgrad.tensor import PrecisionWarning
    >>> [c.__name__ for c in PrecisionWarning.__bases__]
    ['UserWarning']
    """


class NumericsError(AsgradError, FloatingPointError):
    """An op produced NaN or infinity while numerics checking was on.

    >>> from asgrad.tensor import NumericsError
    >>> [c.__name__ for c in NumericsError.__bases__]
    ['AsgradError', 'FloatingPointError']
    """


# -- the graph file ---------------------------------------------------------------------
class GraphFileError(AsgradError, ValueError):
    """A graph file cannot be read or written: malformed, of an unknown version, or
    holding a value the format cannot represent.

    >>> from asgrad.tensor import GraphFileError
    >>> [c.__name__ for c in GraphFileError.__bases__]
    ['AsgradError', 'ValueError']
    """


# -- integer arithmetic ---------------------------------------------------------------
class IntegerArithmeticError(AsgradError, ArithmeticError):
    """An integer op met values it has no integer result for: a division or remainder
    by zero, a negative power. Raised by every backend (the GPU at the readback).

    >>> from asgrad.tensor import Graph, IntegerArithmeticError, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> try:
    ...     evaluate(x // 0, {"x": [1, 2]})
    ... except IntegerArithmeticError as e:
    ...     print(type(e).__name__)
    IntegerArithmeticError
    """


class DefineByRunError(AsgradError, AttributeError):
    """A PyTorch habit that has no meaning on a symbolic graph (``loss.backward()``,
    ``t.item()``, ``p.grad``); the message names asgrad's way. An ``AttributeError``,
    so ``hasattr`` still answers False."""


class MemoryBudgetError(AsgradError, ValueError):
    """No plan of a step fits its ``memory_budget``, even recomputing forward values.

    ``reachable`` is the smallest planned peak found (bytes), ``budget`` the budget.

    >>> from asgrad.tensor import Graph, MemoryBudgetError, compile
    >>> x = Graph().input("x", (1024,))
    >>> try:
    ...     compile([x.exp()], memory_budget=100)
    ... except MemoryBudgetError as error:
    ...     print(error.reachable)
    8192
    """

    def __init__(self, message: str, *, budget: int, reachable: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.reachable = reachable
