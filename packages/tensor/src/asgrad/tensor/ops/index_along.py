"""Index ops along one axis, with PyTorch's ``gather``/``scatter`` semantics.

``take_along_axis(x, idx, axis)``: ``out[..., m, ...] = x[..., idx[..., m, ...], ...]``
(``torch.gather``, ``numpy.take_along_axis``): ``idx`` has ``x``'s rank and, outside
``axis``, its sizes; the result has ``idx``'s shape.

``scatter_add_along(g, idx, x)``: zeros shaped like ``x`` (read for its shape only)
with ``g[..., m, ...]`` added at ``[..., idx[..., m, ...], ...]``; the gradient of
``take_along_axis``, and ``torch.scatter_add`` onto zeros.

``scatter_reduce(x, idx, src, axis, reduce, include_self)``: ``torch.scatter_reduce``,
``reduce`` one of ``sum``, ``prod``, ``mean``, ``amax``, ``amin``; a position no index
names keeps ``x``'s value.

As the other index ops, indices must lie in ``[0, n)`` (`check_indices`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import ArgumentError, DTypeError, ShapeError
from asgrad.tensor.ir.common import normalize_axis, randn
from asgrad.tensor.ir.dtypes import accumulating, is_float, is_int
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ops.index import check_indices

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def check_along(x: TensorType, idx: TensorType, axis: int, what: str = "indices") -> int:
    """``axis`` normalized; a typed error unless ``idx`` indexes ``x`` along it."""
    if not is_int(idx.dtype):
        raise DTypeError(f"{what} must be int32 or int64, got {idx}")
    if len(idx.shape) != len(x.shape):
        raise ShapeError(
            f"{what} {idx} must have the rank of the value indexed, {x}; add axes of size 1"
        )
    axis = normalize_axis(axis, len(x.shape))
    for d, (a, b) in enumerate(zip(idx.shape, x.shape, strict=True)):
        if d != axis and a != b:
            raise ShapeError(
                f"{what} {idx} and the value {x} differ at axis {d} (not the indexed axis"
                f" {axis}); slice the value first (the Tensor methods do it for smaller"
                " indices, as PyTorch)"
            )
    return axis


def _grid(idx: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """The full index tuple that puts ``idx`` along ``axis`` of a value of its rank."""
    grids: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grids[axis] = idx
    return tuple(grids)


def _infer_take_along(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, idx = types
    check_along(x, idx, attrs["axis"])
    return TensorType(idx.shape, x.dtype)


def _take_along(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    check_indices("take_along_axis", indices, n, f"axis {axis} of size {n}")
    out: np.ndarray = np.take_along_axis(x, indices, axis)
    return out


def _infer_scatter_add_along(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, idx, x = types
    check_along(x, idx, attrs["axis"])
    if g.shape != idx.shape:
        raise ShapeError(f"the values {g} and the indices {idx} must have one shape")
    return TensorType(x.shape, g.dtype)


def _scatter_add_along(g: np.ndarray, indices: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    check_indices("scatter_add", indices, n, f"axis {axis} of size {n}")
    out = np.zeros(x.shape, g.dtype)
    np.add.at(out, _grid(indices, axis), g)
    return out


def _infer_scatter_reduce(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, idx, src = types
    check_along(x, idx, attrs["axis"])
    if src.shape != idx.shape:
        raise ShapeError(f"the source {src} and the indices {idx} must have one shape")
    if src.dtype != x.dtype:
        raise DTypeError(f"the source {src} and the value {x} differ in dtype; cast one")
    reduce = attrs["reduce"]
    if reduce not in REDUCTIONS:
        raise ArgumentError(f"reduce must be one of {', '.join(REDUCTIONS)}; got {reduce!r}")
    if reduce == "mean" and not is_float(x.dtype):
        raise DTypeError(f"reduce='mean' needs float values, got {x}; cast them first")
    return x


def _identity(reduce: str, dtype: np.dtype) -> float | int:
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    big: float | int = np.inf if dtype.kind == "f" else int(info.max)
    small: float | int = -np.inf if dtype.kind == "f" else int(info.min)
    return small if reduce == "amax" else big


_UFUNCS = {
    "sum": np.add,
    "mean": np.add,
    "prod": np.multiply,
    "amax": np.maximum,
    "amin": np.minimum,
}


def _scatter_reduce(
    x: np.ndarray,
    indices: np.ndarray,
    src: np.ndarray,
    axis: int,
    reduce: str,
    include_self: bool,
) -> np.ndarray:
    n = x.shape[axis]
    check_indices("scatter_reduce", indices, n, f"axis {axis} of size {n}")
    grid = _grid(indices, axis)
    count = np.zeros(x.shape, np.int64)
    np.add.at(count, grid, 1)
    touched = count > 0
    out = x.copy()
    if not include_self:
        out[touched] = _identity(reduce, x.dtype)
    _UFUNCS[reduce].at(out, grid, src)
    if reduce == "mean":
        total = count + (1 if include_self else 0)
        out = np.where(touched, out / np.maximum(total, 1), out).astype(x.dtype)
    return out


# -- cases ---------------------------------------------------------------------------------------
def _take_along_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 4, 3), rng.integers(0, 4, (6, 3))), {"axis": 0}, wrt=(0,)),
        OpCase((randn(rng, 2, 5, 3), rng.integers(0, 5, (2, 2, 3))), {"axis": 1}, wrt=(0,)),
        OpCase((randn(rng, 3, 4), rng.integers(0, 4, (3, 1))), {"axis": -1}, wrt=(0,)),
    ]


def _scatter_add_along_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase(
            (randn(rng, 6, 3), rng.integers(0, 4, (6, 3)), randn(rng, 4, 3)), {"axis": 0}, wrt=(0,)
        ),
        OpCase(
            (randn(rng, 2, 7, 3), rng.integers(0, 5, (2, 7, 3)), randn(rng, 2, 5, 3)),
            {"axis": 1},
            wrt=(0,),
        ),
    ]


def _scatter_reduce_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = []
    for reduce in REDUCTIONS:
        for include_self in (True, False):
            # Indices 0..2 of 4 rows: row 3 is never written, rows are often written twice.
            idx = rng.integers(0, 3, (5, 3))
            src = randn(rng, 5, 3)
            x = randn(rng, 4, 3)
            if reduce == "prod":
                src[0, 0] = 0.0  # a zero among the factors: the gradient of the others
            attrs = {"axis": 0, "reduce": reduce, "include_self": include_self}
            cases.append(OpCase((x, idx, src), attrs, wrt=(0, 2)))
    cases.append(
        OpCase(
            (randn(rng, 2, 4), rng.integers(0, 4, (2, 6)), randn(rng, 2, 6)),
            {"axis": 1, "reduce": "amax", "include_self": True},
            wrt=(0, 2),
        )
    )
    return cases


register_op(
    OpDef(
        name="take_along_axis",
        attrs=(Attr(name="axis", kind=int, doc="the axis indexed"),),
        family="index",
        infer=_infer_take_along,
        kernel=_take_along,
        arity=2,
        tolerance=(0.0, 0.0),
        cases=_take_along_cases,
        doc="x[..., idx[..., m, ...], ...] along an axis (torch.gather); indices in [0, n)",
    )
)
register_op(
    OpDef(
        name="scatter_add_along",
        attrs=(Attr(name="axis", kind=int, doc="the axis indexed"),),
        family="index",
        infer=_infer_scatter_add_along,
        kernel=accumulating(_scatter_add_along),
        arity=3,
        tolerance=(1e-5, 1e-6),
        cases=_scatter_add_along_cases,
        doc="add g into zeros shaped like x at idx along an axis (torch.scatter_add)",
        shape_only_inputs=(2,),
        fresh_result=True,
    )
)
register_op(
    OpDef(
        name="scatter_reduce",
        attrs=(
            Attr(name="axis", kind=int, doc="the axis indexed"),
            Attr(name="reduce", kind=str, doc="sum, prod, mean, amax or amin"),
            Attr(
                name="include_self",
                kind=bool,
                default=True,
                doc="whether the input joins each reduction",
            ),
        ),
        family="index",
        infer=_infer_scatter_reduce,
        kernel=accumulating(_scatter_reduce),
        arity=3,
        tolerance=(1e-5, 1e-6),
        cases=_scatter_reduce_cases,
        doc="torch.scatter_reduce: sum, prod, mean, amax or amin of src into x at idx",
        fresh_result=True,
    )
)
