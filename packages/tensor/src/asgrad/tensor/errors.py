"""The exception hierarchy of asgrad.

Every error a user can make while building or running a graph derives from
[`AsgradError`][asgrad.tensor.AsgradError]. Messages name the op, the shapes involved, the user's
source line where it is known, and what to do about it.
"""

from __future__ import annotations


class AsgradError(Exception):
    """Base class of every error raised by asgrad."""


class GraphError(AsgradError):
    """The graph is malformed: mixed graphs, unknown inputs, cycles."""


class NameConflictError(GraphError):
    """A name was registered twice in one graph."""


class ArgumentError(AsgradError, ValueError):
    """An argument is outside the values it may take (a negative rate, an unknown mode)."""


class ArgumentTypeError(AsgradError, TypeError):
    """An argument is of the wrong type (a list where a Tensor is needed)."""


class OutOfRangeError(AsgradError, IndexError):
    """An index is out of range for the sequence or axis it indexes."""


class ShapeError(AsgradError, ValueError):
    """Operand shapes do not fit the op (broadcasting, reshape, matmul, axes)."""


class DTypeError(AsgradError, TypeError):
    """Operand dtypes do not fit the op."""


class FeedError(AsgradError, ValueError):
    """A value fed to a compiled program is missing or has the wrong shape/dtype."""


class NotDifferentiableError(AsgradError, TypeError):
    """A gradient was asked of a value that has none (integer, bool, no rule)."""


class BackendError(AsgradError, RuntimeError):
    """A backend is unknown or cannot run the program."""


class PrecisionWarning(UserWarning):
    """A fed array was narrowed to the input's dtype (float64 to float32): values are
    rounded. Issued once per program and input; feed the input's dtype to avoid it."""


class NumericsError(AsgradError, FloatingPointError):
    """An op produced NaN or infinity while numerics checking was on."""


# -- the graph file ---------------------------------------------------------------------
class GraphFileError(AsgradError, ValueError):
    """A graph file cannot be read or written: malformed, of an unknown version, or
    holding a value the format cannot represent."""


# -- integer arithmetic ---------------------------------------------------------------
class IntegerArithmeticError(AsgradError, ArithmeticError):
    """An integer op met values it has no integer result for: a division or remainder
    by zero, a negative power. Raised by every backend (the GPU at the readback)."""
