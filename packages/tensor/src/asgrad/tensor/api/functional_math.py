"""Module functions of the elementwise math ops: rounding, tests, logic, integers.

Each is the [`Tensor`][asgrad.tensor.Tensor] method of the same name, as a function
(numpy's and PyTorch's spelling). The examples run ``x`` below:

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> x = g.input("x", (4,))
>>> feed = {"x": np.array([-1.5, 0.5, 2.5, np.nan], np.float32)}
>>> evaluate([round(x)], feed)[0].tolist()
[-2.0, 0.0, 2.0, nan]
"""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.api.functional import _first_tensor
from asgrad.tensor.api.tensor import Tensor

AxisArg = int | Sequence[int] | None

__all__ = [
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "ceil",
    "floor",
    "floor_divide",
    "frac",
    "isclose",
    "isfinite",
    "isinf",
    "isnan",
    "left_shift",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "nan_to_num",
    "remainder",
    "right_shift",
    "round",
    "trunc",
]


def _pair(op: str, a: object, b: object) -> Tensor:
    like = _first_tensor(a, b)
    return like.graph.apply(op, (like._lift(a), like._lift(b)), {})


def floor(x: Tensor) -> Tensor:
    """The largest integer <= x (floats; zero gradient).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([floor(x)], {"x": np.array([-0.5, 1.5], np.float32)})[0].tolist()
    [-1.0, 1.0]
    """
    return x.floor()


def ceil(x: Tensor) -> Tensor:
    """The smallest integer >= x (floats; zero gradient).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([ceil(x)], {"x": np.array([-0.5, 1.5], np.float32)})[0].tolist()
    [-0.0, 2.0]
    """
    return x.ceil()


def trunc(x: Tensor) -> Tensor:
    """x rounded towards 0 (floats; zero gradient).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([trunc(x)], {"x": np.array([-1.5, 1.5], np.float32)})[0].tolist()
    [-1.0, 1.0]
    """
    return x.trunc()


def round(x: Tensor, decimals: int = 0) -> Tensor:  # numpy's and PyTorch's name
    """x rounded to ``decimals`` places, halves to even (numpy's and PyTorch's rule).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate([round(x, 1)], {"x": np.array([0.25, 0.35, 12.0], np.float32)})[0].tolist()
    [0.20000000298023224, 0.4000000059604645, 12.0]
    """
    return x.round(decimals)


def frac(x: Tensor) -> Tensor:
    """``x - trunc(x)``, with x's sign; gradient 1.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([frac(x)], {"x": np.array([-1.25, 2.5], np.float32)})[0].tolist()
    [-0.25, 0.5]
    """
    return x.frac()


def isnan(x: Tensor) -> Tensor:
    """Whether x is NaN (bool).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([isnan(x)], {"x": np.array([np.nan, 1.0], np.float32)})[0].tolist()
    [True, False]
    """
    return x.isnan()


def isinf(x: Tensor) -> Tensor:
    """Whether x is +inf or -inf (bool).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([isinf(x)], {"x": np.array([-np.inf, np.nan], np.float32)})[0].tolist()
    [True, False]
    """
    return x.isinf()


def isfinite(x: Tensor) -> Tensor:
    """Whether x is neither NaN nor infinite (bool).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([isfinite(x)], {"x": np.array([np.inf, 1.0], np.float32)})[0].tolist()
    [False, True]
    """
    return x.isfinite()


def isclose(
    a: object, b: object, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> Tensor:
    """``|a - b| <= atol + rtol * |b|`` or ``a == b`` elementwise (numpy's and PyTorch's rule).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> a = Graph().input("a", (3,))
    >>> feed = {"a": np.array([1.0, 1.001, np.nan], np.float32)}
    >>> evaluate([isclose(a, 1.0, rtol=1e-2, equal_nan=True)], feed)[0].tolist()
    [True, True, False]
    """
    like = _first_tensor(a, b)
    return like._lift(a).isclose(like._lift(b), rtol=rtol, atol=atol, equal_nan=equal_nan)


def nan_to_num(
    x: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN as ``nan`` and +-inf as ``posinf``/``neginf`` (default: the largest finite values).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> feed = {"x": np.array([np.nan, np.inf, 2.0], np.float32)}
    >>> evaluate([nan_to_num(x, posinf=9.0)], feed)[0].tolist()
    [0.0, 9.0, 2.0]
    """
    return x.nan_to_num(nan, posinf, neginf)


def logical_and(a: object, b: object) -> Tensor:
    """``a and b`` elementwise, any dtypes (nonzero is true).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> feed = {"x": np.array([0.0, 1.0, 2.0], np.float32)}
    >>> evaluate([logical_and(x, x > 1.0)], feed)[0].tolist()
    [False, False, True]
    """
    return _pair("logical_and", a, b)


def logical_or(a: object, b: object) -> Tensor:
    """``a or b`` elementwise, any dtypes (nonzero is true).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "bool")
    >>> evaluate([logical_or(x, True)], {"x": np.array([False, True])})[0].tolist()
    [True, True]
    """
    return _pair("logical_or", a, b)


def logical_xor(a: object, b: object) -> Tensor:
    """``bool(a) != bool(b)`` elementwise.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "bool")
    >>> evaluate([logical_xor(x, True)], {"x": np.array([False, True])})[0].tolist()
    [True, False]
    """
    return _pair("logical_xor", a, b)


def logical_not(x: Tensor) -> Tensor:
    """``not x`` elementwise (zero is true).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([logical_not(x)], {"x": np.array([0, 3])})[0].tolist()
    [True, False]
    """
    return x.logical_not()


def bitwise_and(a: object, b: object) -> Tensor:
    """``a & b`` (integers, or bools: logical and).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([bitwise_and(x, 6)], {"x": np.array([3, -1])})[0].tolist()
    [2, 6]
    """
    return _pair("bitwise_and", a, b)


def bitwise_or(a: object, b: object) -> Tensor:
    """``a | b`` (integers, or bools: logical or).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([bitwise_or(x, 4)], {"x": np.array([3, 0])})[0].tolist()
    [7, 4]
    """
    return _pair("bitwise_or", a, b)


def bitwise_xor(a: object, b: object) -> Tensor:
    """``a ^ b`` (integers, or bools: logical xor).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([bitwise_xor(x, 5)], {"x": np.array([3, 5])})[0].tolist()
    [6, 0]
    """
    return _pair("bitwise_xor", a, b)


def bitwise_not(x: Tensor) -> Tensor:
    """``~x`` (integers: ``-x - 1``; bools: not).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([bitwise_not(x)], {"x": np.array([0, 5])})[0].tolist()
    [-1, -6]
    """
    return x.bitwise_not()


def left_shift(a: object, b: object) -> Tensor:
    """``a << b`` (integers; 0 for ``b`` outside ``[0, bits)``, as numpy).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([left_shift(x, 3)], {"x": np.array([1, -2])})[0].tolist()
    [8, -16]
    """
    return _pair("left_shift", a, b)


def right_shift(a: object, b: object) -> Tensor:
    """``a >> b``, arithmetic (integers; the sign for ``b`` outside ``[0, bits)``).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([right_shift(x, 1)], {"x": np.array([7, -7])})[0].tolist()
    [3, -4]
    """
    return _pair("right_shift", a, b)


def floor_divide(a: object, b: object) -> Tensor:
    """``a // b`` rounded down (integers; a zero divisor raises IntegerArithmeticError).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([floor_divide(x, 2)], {"x": np.array([7, -7])})[0].tolist()
    [3, -4]
    """
    return _pair("floor_divide", a, b)


def remainder(a: object, b: object) -> Tensor:
    """``a % b`` with the divisor's sign (integers; a zero divisor raises).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,), "int64")
    >>> evaluate([remainder(x, 3)], {"x": np.array([7, -7])})[0].tolist()
    [1, 2]
    """
    return _pair("remainder", a, b)
