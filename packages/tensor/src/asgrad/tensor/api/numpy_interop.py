"""How a symbolic [`Tensor`][asgrad.tensor.Tensor] meets numpy.

numpy's ufuncs that have a graph op build it (``np.exp(t)`` is ``t.exp()``,
``array + t`` is ``t.__radd__(array)``); any other ufunc, ``np.asarray(t)`` and
iteration raise an error saying what to do instead, since a symbolic tensor has no
values until its graph runs.
"""

from __future__ import annotations

from typing import Any

from asgrad.tensor.errors import ArgumentTypeError

__all__ = ["NumpyInterop"]

# ufunc name -> (method when the Tensor comes first, method when it comes second)
_BINARY = {
    "add": ("__add__", "__radd__"),
    "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"),
    "divide": ("__truediv__", "__rtruediv__"),
    "true_divide": ("__truediv__", "__rtruediv__"),
    "power": ("__pow__", "__rpow__"),
    "matmul": ("__matmul__", "__rmatmul__"),
    "less": ("__lt__", "__gt__"),
    "less_equal": ("__le__", "__ge__"),
    "greater": ("__gt__", "__lt__"),
    "greater_equal": ("__ge__", "__le__"),
    "equal": ("__eq__", "__eq__"),
    "not_equal": ("__ne__", "__ne__"),
    "maximum": ("maximum", "maximum"),
    "minimum": ("minimum", "minimum"),
}
_UNARY = {
    "negative": "__neg__",
    "positive": "__pos__",
    "absolute": "abs",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "sin": "sin",
    "cos": "cos",
    "tanh": "tanh",
    "sign": "sign",
}


class NumpyInterop:
    """numpy protocol methods of ``Tensor`` (a mixin)."""

    __slots__ = ()

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = getattr(ufunc, "__name__", str(ufunc))
        if method == "__call__" and not kwargs:
            if len(inputs) == 2 and name in _BINARY:
                first, second = _BINARY[name]
                if inputs[0] is self:
                    return getattr(self, first)(inputs[1])
                return getattr(self, second)(inputs[0])
            if len(inputs) == 1 and name in _UNARY:
                return getattr(self, _UNARY[name])()
        raise ArgumentTypeError(
            f"numpy's {name} ({method}) cannot compute a symbolic Tensor, which has no values"
            " until its graph runs; use the Tensor's own methods (t.exp(), t.sum(axis=...),"
            " asgrad.tensor.where, ...) to build the computation, or run the graph"
            " (asgrad.tensor.evaluate) and apply numpy to the result"
        )

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise ArgumentTypeError(
            "a symbolic Tensor has no values until its graph runs, so numpy cannot convert"
            " it; run the graph (asgrad.tensor.evaluate([t], feeds)) to get a numpy array"
        )

    def __iter__(self) -> Any:
        raise ArgumentTypeError(
            "a symbolic Tensor cannot be iterated; index it (t[i], t[:, j]) or use ops over"
            " an axis (t.sum(axis=0)) instead of a Python loop over its values"
        )
