"""Tensor methods for math ops: rounding, tests, logic, integers, reductions, scans, order.

Each method appends one op (or the ops an op expands into) to the tensor's graph;
the functions of the same names live in the functional modules
(`asgrad.tensor.api.functional_math`, `asgrad.tensor.api.functional_reduce`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from asgrad.tensor.api.dims import axis_arg, keepdims_arg
from asgrad.tensor.api.located import checked
from asgrad.tensor.api.methods_base import TensorBase
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.common import float_arg, int_arg, normalize_axes, normalize_axis

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

AxisArg = int | Sequence[int] | None


class MathMethods(TensorBase):
    """Tensor methods for math ops: rounding, tests, logic, integers, reductions, scans, order."""

    __slots__ = ()

    # -- rounding ---------------------------------------------------------------------
    def floor(self) -> Tensor:
        """The largest integer <= x (floats; zero gradient).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.floor(), {"x": [-1.5, 0.5, 2.0]})[0].tolist()
        [-2.0, 0.0, 2.0]
        """
        return self._apply("floor")

    def ceil(self) -> Tensor:
        """The smallest integer >= x (floats; zero gradient).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.ceil(), {"x": [-1.5, 0.5, 2.0]})[0].tolist()
        [-1.0, 1.0, 2.0]
        """
        return self._apply("ceil")

    def trunc(self) -> Tensor:
        """x rounded towards 0 (floats; zero gradient).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.trunc(), {"x": [-1.5, 0.5, 2.7]})[0].tolist()
        [-1.0, 0.0, 2.0]
        """
        return self._apply("trunc")

    fix = trunc
    """The same as [`trunc`][asgrad.tensor.Tensor.trunc] (numpy's name).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(x.fix(), {"x": [-1.5, 0.5, 2.7]})[0].tolist()
    [-1.0, 0.0, 2.0]
    """

    def round(self, decimals: int = 0) -> Tensor:
        """x rounded to ``decimals`` places, halves to even (as numpy and PyTorch).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.round(), {"x": [0.5, 1.5, 2.25]})[0].tolist()
        [0.0, 2.0, 2.0]
        """
        return self._apply("round", decimals=checked("round", int_arg, decimals, "decimals"))

    def frac(self) -> Tensor:
        """``x - trunc(x)``: the fractional part, with x's sign.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.frac(), {"x": [-1.5, 0.25, 2.0]})[0].tolist()
        [-0.5, 0.25, 0.0]
        """
        return self._apply("frac")

    # -- tests ------------------------------------------------------------------------
    def isnan(self) -> Tensor:
        """Whether each element is NaN (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.isnan(), {"x": [1.0, float("nan"), float("inf")]})[0].tolist()
        [False, True, False]

        """
        return self._apply("isnan")

    def isinf(self) -> Tensor:
        """Whether each element is +inf or -inf (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.isinf(), {"x": [1.0, float("nan"), float("-inf")]})[0].tolist()
        [False, False, True]

        """
        return self._apply("isinf")

    def isfinite(self) -> Tensor:
        """Whether each element is neither NaN nor infinite (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.isfinite(), {"x": [1.0, float("nan"), float("inf")]})[0].tolist()
        [True, False, False]

        """
        return self._apply("isfinite")

    def isclose(
        self, other: object, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
    ) -> Tensor:
        """``|x - other| <= atol + rtol * |other|`` elementwise (numpy's and PyTorch's rule).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.isclose(1.0), {"x": [1.0, 1.000001, 1.1]})[0].tolist()
        [True, True, False]
        """
        rtol, atol = (
            checked("isclose", float_arg, v, n) for v, n in ((rtol, "rtol"), (atol, "atol"))
        )
        if rtol < 0 or atol < 0:
            raise ArgumentError(f"isclose: rtol and atol must be >= 0, got {rtol} and {atol}")
        return self._apply(
            "isclose", self._lift(other), rtol=rtol, atol=atol, equal_nan=bool(equal_nan)
        )

    def nan_to_num(
        self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> Tensor:
        """NaN as ``nan``, +-inf as ``posinf``/``neginf`` (default: the dtype's largest
        finite values); the gradient flows to the finite elements only.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.nan_to_num(posinf=9.0), {"x": [float("nan"), float("inf"), 1.0]})[0].tolist()
        [0.0, 9.0, 1.0]
        """
        attrs = {
            k: None if v is None else checked("nan_to_num", float_arg, v, k)
            for k, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf))
        }
        return self._apply("nan_to_num", **attrs)

    # -- logic and integers -----------------------------------------------------------
    def logical_and(self, other: object) -> Tensor:
        """x and ``other``, elementwise, as truth values (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,), "bool")
        >>> evaluate(x.logical_and(True), {"x": [True, False, True]})[0].tolist()
        [True, False, True]

        """
        return self._binary("logical_and", other)

    def logical_or(self, other: object) -> Tensor:
        """x or ``other``, elementwise, as truth values (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,), "bool")
        >>> evaluate(x.logical_or(False), {"x": [True, False, True]})[0].tolist()
        [True, False, True]

        """
        return self._binary("logical_or", other)

    def logical_xor(self, other: object) -> Tensor:
        """Exactly one of x and ``other``, elementwise, as truth values (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,), "bool")
        >>> evaluate(x.logical_xor(True), {"x": [True, False, True]})[0].tolist()
        [False, True, False]

        """
        return self._binary("logical_xor", other)

    def logical_not(self) -> Tensor:
        """Not x, elementwise, as truth values (bool).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,), "bool")
        >>> evaluate(x.logical_not(), {"x": [True, False, True]})[0].tolist()
        [False, True, False]

        """
        return self._apply("logical_not")

    def __and__(self, other: object) -> Tensor:
        return self._binary("bitwise_and", other)

    def __rand__(self, other: object) -> Tensor:
        return self._lift(other)._binary("bitwise_and", self)

    def __or__(self, other: object) -> Tensor:
        return self._binary("bitwise_or", other)

    def __ror__(self, other: object) -> Tensor:
        return self._lift(other)._binary("bitwise_or", self)

    def __xor__(self, other: object) -> Tensor:
        return self._binary("bitwise_xor", other)

    def __rxor__(self, other: object) -> Tensor:
        return self._lift(other)._binary("bitwise_xor", self)

    def __invert__(self) -> Tensor:
        return self._apply("bitwise_not")

    def __lshift__(self, other: object) -> Tensor:
        return self._binary("left_shift", other)

    def __rlshift__(self, other: object) -> Tensor:
        return self._lift(other)._binary("left_shift", self)

    def __rshift__(self, other: object) -> Tensor:
        return self._binary("right_shift", other)

    def __rrshift__(self, other: object) -> Tensor:
        return self._lift(other)._binary("right_shift", self)

    def __floordiv__(self, other: object) -> Tensor:
        return self._binary("floor_divide", other)

    def __rfloordiv__(self, other: object) -> Tensor:
        return self._lift(other)._binary("floor_divide", self)

    def __mod__(self, other: object) -> Tensor:
        return self._binary("remainder", other)

    def __rmod__(self, other: object) -> Tensor:
        return self._lift(other)._binary("remainder", self)

    bitwise_and = __and__
    """``x & other`` (integers, or bools: logical and).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate(x.bitwise_and(6), {"x": [3, 5, 6]})[0].tolist()
    [2, 4, 6]

    """
    bitwise_or = __or__
    """``x | other`` (integers, or bools: logical or).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate(x.bitwise_or(4), {"x": [3, 0, 1]})[0].tolist()
    [7, 4, 5]

    """
    bitwise_xor = __xor__
    """``x ^ other`` (integers, or bools: logical xor).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate(x.bitwise_xor(5), {"x": [3, 5, 0]})[0].tolist()
    [6, 0, 5]

    """
    bitwise_not = __invert__
    """``~x`` (integers: two's complement, or bools: logical not).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate(x.bitwise_not(), {"x": [0, 1, -1]})[0].tolist()
    [-1, -2, 0]

    """
    floor_divide = __floordiv__
    """``x // other``: the quotient rounded down (Python's and numpy's rule).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate(x.floor_divide(2), {"x": [7, -7, 4]})[0].tolist()
    [3, -4, 2]

    """
    remainder = __mod__
    """``x % other``, with the sign of ``other`` (Python's and numpy's rule).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,), "int64")
    >>> evaluate(x.remainder(3), {"x": [7, -7, 6]})[0].tolist()
    [1, 2, 0]

    """

    # -- reductions ---------------------------------------------------------------------
    def _reduce_math(
        self,
        op: str,
        axis: AxisArg,
        keepdims: bool | None,
        dim: AxisArg = None,
        keepdim: bool | None = None,
        attrs: dict[str, float] | None = None,
    ) -> Tensor:
        axes = checked(op, normalize_axes, axis_arg(op, axis, dim), self.ndim)
        keep = keepdims_arg(op, keepdims, keepdim)
        return self._apply(op, axis=axes, keepdims=keep, **(attrs or {}))

    def prod(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The product over ``axis`` (floats); its gradient is right with zeros in x.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.prod(1), feed)[0].tolist()
        [-6.0, -120.0]
        """
        return self._reduce_math("prod", axis, keepdims, dim, keepdim)

    def std(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        correction: float | None = None,
        ddof: float | None = None,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The standard deviation, dividing by ``n - correction`` (``ddof`` is numpy's name;
        default 0, numpy's; PyTorch's default is 1).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.std(0).shape
        (3,)
        """
        attrs = correction_attr(correction, ddof)
        return self._reduce_math("std", axis, keepdims, dim, keepdim, attrs)

    def logsumexp(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """``log(sum(exp(x)))`` over ``axis`` without overflow.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.logsumexp(1).shape
        (2,)
        """
        return self._reduce_math("logsumexp", axis, keepdims, dim, keepdim)

    def any(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """Whether any value over ``axis`` is nonzero (False over an empty axis).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate((x > 4.0).any(1), feed)[0].tolist()
        [False, True]
        """
        return self._reduce_math("any", axis, keepdims, dim, keepdim)

    def all(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """Whether every value over ``axis`` is nonzero (True over an empty axis).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate((x > 0.0).all(0), feed)[0].tolist()
        [True, False, False]
        """
        return self._reduce_math("all", axis, keepdims, dim, keepdim)

    def amax(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """``max`` (PyTorch's name for the reduction that returns values only).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.amax(0), feed)[0].tolist()
        [4.0, 5.0, 3.0]
        """
        return self._reduce_math("max", axis, keepdims, dim, keepdim)

    def amin(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """``min`` (PyTorch's name for the reduction that returns values only).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.amin(0), feed)[0].tolist()
        [1.0, -2.0, -6.0]
        """
        return self._reduce_math("min", axis, keepdims, dim, keepdim)

    def argmin(
        self,
        axis: int | None = None,
        keepdims: bool | None = None,
        *,
        dim: int | None = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The index of the min along ``axis`` (default the last; the first of ties; a NaN
        wins).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.argmin(1), feed)[0].tolist()
        [1, 2]
        """
        axis = checked("argmin", normalize_axis, axis_arg("argmin", axis, dim, -1), self.ndim)
        return self._apply("argmin", axis=axis, keepdims=keepdims_arg("argmin", keepdims, keepdim))

    # -- scans ------------------------------------------------------------------------------
    def _scan(self, op: str, axis: int | None, dim: int | None = None, **attrs: object) -> Tensor:
        given = axis_arg(op, axis, dim, -1)
        return self._apply(op, axis=checked(op, normalize_axis, given, self.ndim), **attrs)

    def cumsum(
        self, axis: int | None = None, reverse: bool = False, *, dim: int | None = None
    ) -> Tensor:
        """The running sum along ``axis`` (from the end with ``reverse``; ints in int64).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.cumsum(1), feed)[0].tolist()
        [[1.0, -1.0, 2.0], [4.0, 9.0, 3.0]]
        """
        return self._scan("cumsum", axis, dim, reverse=bool(reverse))

    def cumprod(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """The running product along ``axis`` (floats); its gradient holds with zeros.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.cumprod(1), feed)[0].tolist()
        [[1.0, -2.0, -6.0], [4.0, 20.0, -120.0]]
        """
        return self._scan("cumprod", axis, dim)

    def cummax(self, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
        """``(values, indices)`` of the running max along ``axis``: the indices are
        where each value is (the last of ties, and a NaN wins, as PyTorch's).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> values, indices = x.cummax(1)
        >>> [a.tolist() for a in evaluate([values, indices], feed)]
        [[[1.0, 1.0, 3.0], [4.0, 5.0, 5.0]], [[0, 0, 2], [0, 1, 1]]]
        """
        return self._scan("cummax", axis, dim), self._scan("cummax_index", axis, dim)

    def cummin(self, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, Tensor]:
        """``(values, indices)`` of the running min along ``axis`` (as
        [`cummax`][asgrad.tensor.Tensor.cummax]).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> values, indices = x.cummin(1)
        >>> [a.tolist() for a in evaluate([values, indices], feed)]
        [[[1.0, -2.0, -2.0], [4.0, 4.0, -6.0]], [[0, 1, 1], [0, 0, 2]]]
        """
        return self._scan("cummin", axis, dim), self._scan("cummin_index", axis, dim)

    def logcumsumexp(
        self, axis: int | None = None, reverse: bool = False, *, dim: int | None = None
    ) -> Tensor:
        """``log(cumsum(exp(x)))`` along ``axis``, without overflow (floats).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.logcumsumexp(1).shape
        (2, 3)
        """
        return self._scan("logcumsumexp", axis, dim, reverse=bool(reverse))

    # -- ordering ---------------------------------------------------------------------------
    def sort(
        self,
        axis: int | None = None,
        descending: bool = False,
        stable: bool = True,
        *,
        dim: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``(values, indices)`` sorted along ``axis``. Always stable (ties keep their
        order; ``stable`` is accepted for PyTorch's signature); NaN sorts as the
        largest value. The gradient goes back to where each value came from.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> values, indices = x.sort()
        >>> [a.tolist() for a in evaluate([values, indices], {"x": [3.0, 1.0, 2.0]})]
        [[1.0, 2.0, 3.0], [1, 2, 0]]
        """
        attrs = {"descending": bool(descending)}
        return self._scan("sort", axis, dim, **attrs), self._scan("argsort", axis, dim, **attrs)

    def argsort(
        self,
        axis: int | None = None,
        descending: bool = False,
        stable: bool = True,
        *,
        dim: int | None = None,
    ) -> Tensor:
        """The positions that sort ``axis`` (int64; stable, NaN largest).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.argsort(1), feed)[0].tolist()
        [[1, 0, 2], [2, 0, 1]]
        """
        return self._scan("argsort", axis, dim, descending=bool(descending))

    def topk(
        self,
        k: int,
        axis: int | None = None,
        largest: bool = True,
        sorted: bool = True,
        *,
        dim: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``(values, indices)`` of the ``k`` largest (or smallest) along ``axis``, in
        order (``sorted`` is accepted for PyTorch's signature; the result is always
        sorted; of ties, the first ones).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> values, indices = x.topk(2)
        >>> [a.tolist() for a in evaluate([values, indices], {"x": [3.0, 1.0, 2.0]})]
        [[3.0, 2.0], [0, 2]]
        """
        k = checked("topk", int_arg, k, "k")
        axis = checked("topk", normalize_axis, axis_arg("topk", axis, dim, -1), self.ndim)
        if not 0 <= k <= self.shape[axis]:
            raise ArgumentError(
                f"topk: k = {k} is not in [0, {self.shape[axis]}], the size of axis {axis}"
            )
        values, indices = self.sort(axis, descending=bool(largest))
        window = (slice(None),) * axis + (slice(0, k),)
        return values[window], indices[window]


def correction_attr(correction: float | None, ddof: float | None) -> dict[str, float]:
    """The ``correction`` attribute of var/std as given (none: the op's default)."""
    if correction is not None and ddof is not None and correction != ddof:
        raise ArgumentError(f"give correction or ddof, not both ({correction} and {ddof})")
    value = correction if correction is not None else ddof
    return {} if value is None else {"correction": checked("var", float_arg, value, "correction")}
