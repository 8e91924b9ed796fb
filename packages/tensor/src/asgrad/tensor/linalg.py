"""``asgrad.tensor.linalg``: norms and products under ``torch.linalg``'s names.

``vector_norm`` (``ord`` 2, 1, inf, -inf, 0 or any p), ``matrix_norm`` (``'fro'``, 1,
-1, inf, -inf) and ``norm`` (either, chosen by ``axis`` as ``torch.linalg.norm``
does) are compositions of ``abs``, ``pow``, ``sum``, ``max`` and ``min``. The
spectral norms (``ord`` 2 and -2 of a matrix) and ``'nuc'`` need singular values,
which asgrad does not compute: they raise [`ArgumentError`][asgrad.tensor.ArgumentError].

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate, linalg
>>> v = Graph().constant([3.0, -4.0])
>>> [float(evaluate(linalg.vector_norm(v, ord))[0]) for ord in (2, 1, float("inf"))]
[5.0, 7.0, 4.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from asgrad.tensor.api.dims import axis_arg, keepdims_arg
from asgrad.tensor.api.functional import where
from asgrad.tensor.api.functional_shape import bmm, einsum, outer
from asgrad.tensor.api.located import checked, locate
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DTypeError
from asgrad.tensor.ir.common import normalize_axes, normalize_axis

__all__ = ["bmm", "cross", "einsum", "matmul", "matrix_norm", "norm", "outer", "vector_norm"]

Axis = int | Sequence[int] | None


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """The matrix product (``numpy.matmul``).

    >>> from asgrad.tensor import Graph, linalg
    >>> g = Graph()
    >>> linalg.matmul(g.input("a", (5, 2, 3)), g.input("b", (3, 4))).shape
    (5, 2, 4)
    """
    return a.matmul(b)


def cross(a: Tensor, b: Tensor, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``axis`` (``torch.linalg.cross``), broadcasting.

    >>> from asgrad.tensor import Graph, evaluate, linalg
    >>> g = Graph()
    >>> evaluate(linalg.cross(g.constant([1.0, 0.0, 0.0]), g.constant([0.0, 1.0, 0.0])))[0]
    array([0., 0., 1.], dtype=float32)
    """
    ndim = max(a.ndim, b.ndim)
    axis = checked("cross", normalize_axis, axis, ndim)
    return a.graph.apply("cross", (a, b), {"axis": axis})


def _float(op: str, x: Tensor) -> None:
    if x.dtype not in ("float32", "float64"):
        raise locate(op, DTypeError(f"takes float values, got {x.dtype}; cast them first"))


def vector_norm(
    x: Tensor,
    ord: float = 2,
    axis: Axis = None,
    keepdims: bool | None = None,
    *,
    dim: Axis = None,
    keepdim: bool | None = None,
) -> Tensor:
    """``(sum |x|**ord) ** (1/ord)`` over ``axis`` (every axis when None); ``ord`` inf:
    the largest ``|x|``, -inf the smallest, 0 the count of nonzeros.

    Where every ``x`` is 0 the gradient is 0, as PyTorch's.

    >>> from asgrad.tensor import Graph, evaluate, linalg
    >>> x = Graph().input("x", (2,))
    >>> evaluate(linalg.vector_norm(x), {"x": [3.0, 4.0]})[0].tolist()
    5.0
    """
    _float("vector_norm", x)
    if isinstance(ord, bool) or not isinstance(ord, int | float):
        raise locate("vector_norm", ArgumentTypeError(f"ord must be a number, got {ord!r}"))
    axis = axis_arg("vector_norm", axis, dim)
    axes = checked("vector_norm", normalize_axes, axis, x.ndim) if x.ndim else ()
    keep = keepdims_arg("vector_norm", keepdims, keepdim)
    a = x.abs()
    if ord == math.inf:
        return a.max(axes, keep) if axes else a
    if ord == -math.inf:
        return a.min(axes, keep) if axes else a
    if ord == 0:
        return (x != 0.0).cast(x.dtype).sum(axes, keep)
    if ord == 1:
        return a.sum(axes, keep)
    if ord == 2:
        return _root((x * x).sum(axes, keep), 2.0)
    return _root((a ** float(ord)).sum(axes, keep), float(ord))


def _root(total: Tensor, p: float) -> Tensor:
    """``total ** (1/p)``, whose gradient is 0 (PyTorch's choice), not NaN, where
    ``total`` is 0: the root is taken of 1 there and the result replaced by 0."""
    zero = total == 0.0
    safe = where(zero, 1.0, total)
    root = safe.sqrt() if p == 2.0 else safe ** (1.0 / p)
    return where(zero, 0.0, root)


def matrix_norm(
    x: Tensor, ord: str | float = "fro", axis: tuple[int, int] = (-2, -1), keepdims: bool = False
) -> Tensor:
    """A matrix norm over the two ``axis``: ``'fro'`` (Frobenius), 1 / -1 (largest /
    smallest column sum of ``|x|``), inf / -inf (the same of row sums).

    >>> from asgrad.tensor import Graph, evaluate, linalg
    >>> x = Graph().input("x", (2, 2))
    >>> evaluate(linalg.matrix_norm(x), {"x": [[1.0, 1.0], [1.0, 1.0]]})[0].tolist()
    2.0
    """
    _float("matrix_norm", x)
    if len(axis) != 2:
        raise locate("matrix_norm", ArgumentError(f"axis must name two axes, got {axis!r}"))
    rows, cols = (checked("matrix_norm", normalize_axis, a, x.ndim) for a in axis)
    if rows == cols:
        raise locate("matrix_norm", ArgumentError(f"axis {axis!r} names one axis twice"))
    if ord == "fro":
        return vector_norm(x, 2, (rows, cols), keepdims)
    if ord in ("nuc", 2, -2):
        raise locate(
            "matrix_norm",
            ArgumentError(
                f"ord={ord!r} needs the singular values, which asgrad does not compute;"
                " use 'fro', 1, -1, inf or -inf"
            ),
        )
    if ord not in (1, -1, math.inf, -math.inf):
        raise locate("matrix_norm", ArgumentError(f"unsupported matrix norm ord={ord!r}"))
    summed, over = (rows, cols) if ord in (1, -1) else (cols, rows)
    sums = x.abs().sum(summed, keepdims=True)
    out = sums.max(over, keepdims=True) if ord in (1, math.inf) else sums.min(over, keepdims=True)
    return out if keepdims else out.squeeze((rows, cols))


def norm(
    x: Tensor, ord: str | float | None = None, axis: Axis = None, keepdims: bool = False
) -> Tensor:
    """``torch.linalg.norm``: a vector norm over one axis (or, ``ord`` None, over every
    axis flattened), a matrix norm over two axes (``ord`` None: Frobenius).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate, linalg
    >>> m = Graph().constant(np.array([[1.0, -2.0], [3.0, 4.0]]))
    >>> float(evaluate(linalg.norm(m, 1))[0])
    6.0
    """
    if isinstance(axis, int):
        if isinstance(ord, str):
            raise locate("norm", ArgumentError(f"ord={ord!r} is a matrix norm; give two axes"))
        return vector_norm(x, 2 if ord is None else ord, axis, keepdims)
    if axis is None and ord is None:
        return vector_norm(x, 2, None, keepdims)
    pair = tuple(axis) if axis is not None else (-2, -1)
    if axis is None and x.ndim != 2:
        raise locate("norm", ArgumentError(f"ord={ord!r} without axis needs a matrix, got {x!r}"))
    if len(pair) == 1:
        if isinstance(ord, str):
            raise locate("norm", ArgumentError(f"ord={ord!r} is a matrix norm; give two axes"))
        return vector_norm(x, 2 if ord is None else ord, pair, keepdims)
    if len(pair) != 2:
        raise locate("norm", ArgumentError(f"axis must name one or two axes, got {axis!r}"))
    return matrix_norm(x, "fro" if ord is None else ord, (pair[0], pair[1]), keepdims)
