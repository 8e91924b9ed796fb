"""Reductions over any axes (sum, mean, max, min, prod, var, std, logsumexp, any, all,
argmax, argmin) and ``size_ratio``. ``std``, ``logsumexp``, ``any`` and ``all`` expand
into other ops (`asgrad.tensor.ops._reduction_math`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.common import (
    normalize_axes,
    normalize_axis,
    randn,
    reduced_shape,
    require_float,
    require_nonempty_axis,
)
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ops import _math_cases as cases
from asgrad.tensor.ops import _reduction_math as expansions


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else "must be a number >= 0"


# The attributes of the reductions over axes, the scans and the sorts.
AXES = Attr(name="axis", kind=tuple, doc="the axes reduced (sorted, non-negative)")
KEEPDIMS = Attr(name="keepdims", kind=bool, default=False, doc="keep each reduced axis, size 1")
CORRECTION = Attr(
    name="correction",
    kind=float,
    default=0.0,
    check=_not_negative,
    doc="divide by n - correction (0: population, 1: sample)",
)
AXIS = Attr(name="axis", kind=int, doc="the axis (non-negative)")
REVERSE = Attr(name="reverse", kind=bool, default=False, doc="run from the end")
DESCENDING = Attr(name="descending", kind=bool, default=False, doc="largest first")


def _infer_reduce(types: Sequence[TensorType], attrs: Attrs, *, bools: bool = False) -> TensorType:
    (t,) = types
    if t.dtype == "bool" and not bools:
        raise DTypeError(f"cannot reduce bool values ({t}); cast them to a number first")
    axes = normalize_axes(attrs["axis"], len(t.shape))
    return TensorType(reduced_shape(t.shape, axes, attrs["keepdims"]), t.dtype)


def _infer_sum(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    # Integers sum in int64 (as numpy and PyTorch), so an int32 total never wraps.
    out = _infer_reduce(types, attrs)
    return TensorType(out.shape, "int64") if out.dtype == "int32" else out


def _infer_reduce_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return _infer_reduce(types, attrs)


def _infer_nonempty_reduce(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    axes = normalize_axes(attrs["axis"], len(types[0].shape))
    if any(types[0].shape[a] == 0 for a in axes):
        raise ShapeError(f"cannot take max/min over an empty axis of {types[0]}")
    return _infer_reduce(types, attrs, bools=True)


def _infer_truth(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """any/all: every dtype (nonzero is true), a bool result."""
    return TensorType(_infer_reduce(types, attrs, bools=True).shape, "bool")


def _infer_argmax(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    axis = normalize_axis(attrs["axis"], len(t.shape))
    require_nonempty_axis(t, axis, "take the argmax or argmin over")
    return TensorType(reduced_shape(t.shape, (axis,), attrs["keepdims"]), "int64")


def _infer_scan(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Scans and sorts along one axis (numbers): the input's type."""
    (t,) = types
    normalize_axis(attrs["axis"], len(t.shape))
    if t.dtype == "bool":
        raise DTypeError(f"cannot scan or sort bool values ({t}); cast them to a number first")
    return t


def _infer_cumsum(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    # Integers sum in int64, as ``sum``'s do.
    t = _infer_scan(types, attrs)
    return TensorType(t.shape, "int64") if t.dtype == "int32" else t


def _infer_scan_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return _infer_scan(types, attrs)


def _infer_scan_index(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """The int64 positions a scan or sort picks (cummax's indices, argsort)."""
    return TensorType(_infer_scan(types, attrs).shape, "int64")


def _infer_size_ratio(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return TensorType((), types[0].dtype)


@accumulating
def _sum(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.sum(x, axis=axis, keepdims=keepdims)
    return out


@accumulating
def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.mean(x, axis=axis, keepdims=keepdims)
    return out


def _max(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.max(x, axis=axis, keepdims=keepdims)
    return out


def _min(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.min(x, axis=axis, keepdims=keepdims)
    return out


@accumulating
def _var(x: np.ndarray, axis: tuple[int, ...], keepdims: bool, correction: float) -> np.ndarray:
    out: np.ndarray = np.var(x, axis=axis, keepdims=keepdims, ddof=correction)
    return out


@accumulating
def _std(x: np.ndarray, axis: tuple[int, ...], keepdims: bool, correction: float) -> np.ndarray:
    out: np.ndarray = np.std(x, axis=axis, keepdims=keepdims, ddof=correction)
    return out


@accumulating
def _prod(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.prod(x, axis=axis, keepdims=keepdims)
    return out


@accumulating
def _logsumexp(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True) if x.size else np.zeros((1,) * x.ndim, x.dtype)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):  # log 0 = -inf: every value -inf
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return np.asarray(out if keepdims else np.squeeze(out, axis=axis), x.dtype)


def _argmin(x: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.argmin(x, axis=axis, keepdims=keepdims)
    return out


def _argmax(x: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
    out: np.ndarray = np.argmax(x, axis=axis, keepdims=keepdims)
    return out


def _along(fn: Callable[..., np.ndarray], x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    if not reverse:
        return fn(x, axis)
    return np.flip(fn(np.flip(x, axis), axis), axis)


@accumulating
def _cumsum(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    dtype = np.int64 if x.dtype.kind in "iu" else x.dtype
    return _along(lambda v, a: np.cumsum(v, axis=a, dtype=dtype), x, axis, reverse)


@accumulating
def _cumprod(x: np.ndarray, axis: int) -> np.ndarray:
    return np.asarray(np.cumprod(x, axis=axis))


@accumulating
def _logcumsumexp(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return _along(lambda v, a: np.logaddexp.accumulate(v, axis=a), x, axis, reverse)


def _cumarg(largest: bool) -> Callable[..., np.ndarray]:
    """PyTorch's cummax/cummin indices: a tie or a NaN moves the index forward."""

    def kernel(x: np.ndarray, axis: int) -> np.ndarray:
        v = np.moveaxis(x, axis, -1)
        out = np.zeros(v.shape, np.int64)
        if not v.shape[-1]:
            return np.moveaxis(out, -1, axis)
        best, at = v[..., :1], np.zeros((*v.shape[:-1], 1), np.int64)
        for k in range(v.shape[-1]):
            cur = v[..., k : k + 1]
            take = (cur >= best) if largest else (cur <= best)
            take = take | (cur != cur)
            best, at = np.where(take, cur, best), np.where(take, k, at)
            out[..., k : k + 1] = at
        return np.moveaxis(out, -1, axis)

    return kernel


def _argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable: ties keep their order; NaN sorts as the largest value (numpy, PyTorch)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    ascending = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.asarray(x.shape[axis] - 1 - np.flip(ascending, axis))


def _sort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    return np.take_along_axis(x, _argsort(x, axis, descending), axis=axis)


def _size_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(a.size / max(b.size, 1), dtype=a.dtype)


def _reduce_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4)
    return [
        OpCase((x3,), {"axis": (0, 1, 2), "keepdims": False}, label="all"),
        OpCase((x3,), {"axis": (1,), "keepdims": True}, label="axis 1 keepdims"),
        OpCase((x3,), {"axis": (0, 2), "keepdims": False}, label="axes 0,2"),
        OpCase((randn(rng, 5, 1),), {"axis": (1,), "keepdims": False}, label="size-1 axis"),
        OpCase((randn(rng, 3, 70),), {"axis": (1,), "keepdims": False}, label="long row"),
    ]


def _size_ratio_cases(rng: np.random.Generator) -> list[OpCase]:
    return [OpCase((randn(rng, 3, 4), randn(rng, 3)), grad=False)]


def _reduction(
    name: str,
    kernel: Callable[..., np.ndarray],
    doc: str,
    infer: Callable[[Sequence[TensorType], Attrs], TensorType] = _infer_reduce,
    tolerance: tuple[float, float] = (1e-5, 1e-5),
    **fields: Any,
) -> None:
    fields = {"cases": _reduce_cases, "attrs": (AXES, KEEPDIMS), **fields}
    register_op(
        OpDef(
            name=name,
            family="reduction",
            infer=infer,
            kernel=kernel,
            arity=1,
            tolerance=tolerance,
            doc=doc,
            **fields,
        )
    )


_reduction("sum", _sum, "sum over axes (integers in int64)", _infer_sum)
_reduction("mean", _mean, "mean over axes", _infer_reduce_float)
_reduction("max", _max, "max over axes", _infer_nonempty_reduce, cases=cases.max_cases)
_reduction("min", _min, "min over axes", _infer_nonempty_reduce, cases=cases.max_cases)
_reduction(
    "var",
    _var,
    "variance over axes, divided by n - correction (0: population, 1: sample)",
    _infer_reduce_float,
    (1e-4, 1e-5),
    cases=cases.moment_cases,
    attrs=(AXES, KEEPDIMS, CORRECTION),
)
_reduction(
    "std",
    _std,
    "standard deviation: sqrt(var) with its correction",
    _infer_reduce_float,
    (1e-4, 1e-5),
    cases=cases.moment_cases,
    attrs=(AXES, KEEPDIMS, CORRECTION),
    expand=expansions.std,
)
_reduction("prod", _prod, "product over axes (floats)", _infer_reduce_float, cases=cases.prod_cases)
_reduction(
    "logsumexp",
    _logsumexp,
    "log(sum(e**x)) taken as max + log(sum(e**(x - max)))",
    _infer_reduce_float,
    (2e-5, 2e-6),
    cases=cases.logsumexp_cases,
    expand=expansions.logsumexp,
)
for _name, _truth_fn, _doc in (
    ("any", np.any, "whether any is nonzero"),
    ("all", np.all, "whether all are nonzero"),
):
    _reduction(
        _name,
        _truth_fn,
        f"{_doc} (empty: {_name == 'all'})",
        _infer_truth,
        cases=cases.truth_cases,
        differentiable=False,
        expand=getattr(expansions, f"{_name}_"),
    )
for _name, _arg_fn in (("argmax", _argmax), ("argmin", _argmin)):
    register_op(
        OpDef(
            name=_name,
            family="reduction",
            infer=_infer_argmax,
            kernel=_arg_fn,
            arity=1,
            differentiable=False,
            tolerance=(0.0, 0.0),
            cases=cases.arg_cases,
            attrs=(AXIS, KEEPDIMS),
            doc=f"index of the {_name[3:]} along an axis (the first of ties; NaN wins)",
        )
    )
register_op(
    OpDef(
        name="size_ratio",
        family="reduction",
        infer=_infer_size_ratio,
        kernel=_size_ratio,
        arity=2,
        differentiable=False,
        tolerance=(0.0, 0.0),
        cases=_size_ratio_cases,
        attrs=(),
        doc="a.size / b.size as a scalar (gradient rules of mean and var)",
        shape_only_inputs=(0, 1),
    )
)

_scan_ops: tuple[tuple[str, Callable[..., np.ndarray], Any, tuple[Attr, ...], str], ...] = (
    (
        "cumsum",
        _cumsum,
        _infer_cumsum,
        (AXIS, REVERSE),
        "running sum along an axis (reverse: from the end)",
    ),
    ("cumprod", _cumprod, _infer_scan_float, (AXIS,), "running product along an axis (floats)"),
    (
        "cummax",
        lambda x, axis: np.maximum.accumulate(x, axis=axis),
        _infer_scan,
        (AXIS,),
        "running max",
    ),
    (
        "cummin",
        lambda x, axis: np.minimum.accumulate(x, axis=axis),
        _infer_scan,
        (AXIS,),
        "running min",
    ),
    (
        "logcumsumexp",
        _logcumsumexp,
        _infer_scan_float,
        (AXIS, REVERSE),
        "running log(sum(e**x)), stable",
    ),
    (
        "sort",
        _sort,
        _infer_scan,
        (AXIS, DESCENDING),
        "values sorted along an axis (stable; NaN largest)",
    ),
)
for _name, _scan_fn, _infer, _attrs, _doc in _scan_ops:
    _reduction(
        _name,
        _scan_fn,
        _doc,
        _infer,
        (2e-5, 2e-6),
        cases=getattr(cases, f"{_name}_cases"),
        attrs=_attrs,
    )
for _name, _index_fn, _attrs, _doc in (
    (
        "cummax_index",
        _cumarg(True),
        (AXIS,),
        "where cummax's value is (the last of ties, as PyTorch)",
    ),
    (
        "cummin_index",
        _cumarg(False),
        (AXIS,),
        "where cummin's value is (the last of ties, as PyTorch)",
    ),
    (
        "argsort",
        _argsort,
        (AXIS, DESCENDING),
        "the positions that sort an axis (stable; NaN largest)",
    ),
):
    _reduction(
        _name,
        _index_fn,
        _doc,
        _infer_scan_index,
        (0.0, 0.0),
        cases=getattr(cases, f"{_name}_cases"),
        differentiable=False,
        attrs=_attrs,
    )
