"""Module functions of the math reductions, scans and sorts (prod, std, logsumexp, any,
all, argmin, cumsum, cummax, sort, topk...).

Each is the [`Tensor`][asgrad.tensor.Tensor] method of the same name, as a function
(numpy's and PyTorch's spelling).
"""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.api.tensor import Tensor

AxisArg = int | Sequence[int] | None

__all__ = [
    "all",
    "amax",
    "amin",
    "any",
    "argmin",
    "argsort",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "logcumsumexp",
    "logsumexp",
    "prod",
    "sort",
    "std",
    "topk",
    "var",
]


def prod(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """The product over ``axis`` (floats); its gradient holds with zeros in ``x``.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2, 2))
    >>> evaluate([prod(x, axis=1)], {"x": np.array([[2, 3], [0, 4]], np.float32)})[0].tolist()
    [6.0, 0.0]
    """
    return x.prod(axis, keepdims, dim=dim, keepdim=keepdim)


def var(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    correction: float | None = None,
    ddof: float | None = None,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """The variance, dividing by ``n - correction`` (default 0; PyTorch's default is 1).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (4,))
    >>> evaluate([var(x, correction=1)], {"x": np.array([1, 2, 3, 4], np.float32)})[0].round(4)
    np.float32(1.6667)
    """
    return x.var(axis, keepdims, correction=correction, ddof=ddof, dim=dim, keepdim=keepdim)


def std(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    correction: float | None = None,
    ddof: float | None = None,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """The standard deviation, dividing by ``n - correction`` (default 0).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([std(x, ddof=1)], {"x": np.array([1, 3], np.float32)})[0].round(4)
    np.float32(1.4142)
    """
    return x.std(axis, keepdims, correction=correction, ddof=ddof, dim=dim, keepdim=keepdim)


def logsumexp(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, without overflow; its gradient is the softmax.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([logsumexp(x)], {"x": np.array([1000, 1000], np.float32)})[0].round(3)
    np.float32(1000.693)
    """
    return x.logsumexp(axis, keepdims, dim=dim, keepdim=keepdim)


def any(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """Whether any value over ``axis`` is nonzero (False over an empty axis).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2, 2), "bool")
    >>> evaluate([any(x, axis=1)], {"x": np.array([[0, 1], [0, 0]], bool)})[0].tolist()
    [True, False]
    """
    return x.any(axis, keepdims, dim=dim, keepdim=keepdim)


def all(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """Whether every value over ``axis`` is nonzero (True over an empty axis).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2, 2), "bool")
    >>> evaluate([all(x, axis=1)], {"x": np.array([[1, 1], [0, 1]], bool)})[0].tolist()
    [True, False]
    """
    return x.all(axis, keepdims, dim=dim, keepdim=keepdim)


def amax(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """The max over ``axis`` (PyTorch's name; ties share the gradient).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int32")
    >>> evaluate([amax(x)], {"x": np.array([3, -1, 7], np.int32)})[0].tolist()
    7
    """
    return x.amax(axis, keepdims, dim=dim, keepdim=keepdim)


def amin(
    x: Tensor,
    axis: AxisArg = None,
    keepdims: bool | None = None,
    *,
    dim: AxisArg = None,
    keepdim: bool | None = None,
) -> Tensor:
    """The min over ``axis`` (PyTorch's name; ties share the gradient).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "bool")
    >>> evaluate([amin(x)], {"x": np.array([True, False, True])})[0].tolist()
    False
    """
    return x.amin(axis, keepdims, dim=dim, keepdim=keepdim)


def argmin(
    x: Tensor,
    axis: int | None = None,
    keepdims: bool | None = None,
    *,
    dim: int | None = None,
    keepdim: bool | None = None,
) -> Tensor:
    """The index of the min along ``axis`` (int64; the first of ties, a NaN wins).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (4,))
    >>> evaluate([argmin(x)], {"x": np.array([3, 1, 1, 5], np.float32)})[0].tolist()
    1
    """
    return x.argmin(axis, keepdims, dim=dim, keepdim=keepdim)


def cumsum(
    x: Tensor, axis: int | None = None, reverse: bool = False, *, dim: int | None = None
) -> Tensor:
    """The running sum along ``axis`` (from the end with ``reverse``; integers in int64).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int32")
    >>> feed = {"x": np.array([1, 2, 3], np.int32)}
    >>> [v.tolist() for v in evaluate([cumsum(x), cumsum(x, reverse=True)], feed)]
    [[1, 3, 6], [6, 5, 3]]
    """
    return x.cumsum(axis, reverse, dim=dim)


def cumprod(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """The running product along ``axis`` (floats); its gradient holds with zeros.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate([cumprod(x)], {"x": np.array([2, 0, 3], np.float32)})[0].tolist()
    [2.0, 0.0, 0.0]
    """
    return x.cumprod(axis, dim=dim)


def cummax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of the running max (the last of ties, as PyTorch).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (4,))
    >>> feed = {"x": np.array([1, 3, 3, 2], np.float32)}
    >>> [v.tolist() for v in evaluate(list(cummax(x)), feed)]
    [[1.0, 3.0, 3.0, 3.0], [0, 1, 2, 2]]
    """
    return x.cummax(axis, dim=dim)


def cummin(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of the running min (the last of ties, as PyTorch).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> feed = {"x": np.array([2, 1, 5], np.float32)}
    >>> [v.tolist() for v in evaluate(list(cummin(x)), feed)]
    [[2.0, 1.0, 1.0], [0, 1, 1]]
    """
    return x.cummin(axis, dim=dim)


def logcumsumexp(
    x: Tensor, axis: int | None = None, reverse: bool = False, *, dim: int | None = None
) -> Tensor:
    """``log(cumsum(exp(x)))`` along ``axis``, without overflow.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2,))
    >>> evaluate([logcumsumexp(x)], {"x": np.array([1000, 1000], np.float32)})[0].round(3)
    array([1000.   , 1000.693], dtype=float32)
    """
    return x.logcumsumexp(axis, reverse, dim=dim)


def sort(
    x: Tensor,
    axis: int | None = None,
    descending: bool = False,
    stable: bool = True,
    *,
    dim: int | None = None,
) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` sorted along ``axis`` (always stable; NaN is the largest).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (4,))
    >>> feed = {"x": np.array([3, np.nan, 1, 3], np.float32)}
    >>> [v.tolist() for v in evaluate(list(sort(x, descending=True)), feed)]
    [[nan, 3.0, 3.0, 1.0], [1, 0, 3, 2]]
    """
    return x.sort(axis, descending, stable, dim=dim)


def argsort(
    x: Tensor,
    axis: int | None = None,
    descending: bool = False,
    stable: bool = True,
    *,
    dim: int | None = None,
) -> Tensor:
    """The positions that sort ``axis`` (int64; stable; NaN is the largest).

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate([argsort(x)], {"x": np.array([5, -1, 5])})[0].tolist()
    [1, 0, 2]
    """
    return x.argsort(axis, descending, stable, dim=dim)


def topk(
    x: Tensor,
    k: int,
    axis: int | None = None,
    largest: bool = True,
    sorted: bool = True,
    *,
    dim: int | None = None,
) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of the ``k`` largest (or smallest) along ``axis``, in order.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (4,))
    >>> feed = {"x": np.array([0.1, 0.7, 0.2, 0.5], np.float32)}
    >>> [v.tolist() for v in evaluate(list(topk(x, 2)), feed)]
    [[0.699999988079071, 0.5], [1, 3]]
    """
    return x.topk(k, axis, largest, sorted, dim=dim)
