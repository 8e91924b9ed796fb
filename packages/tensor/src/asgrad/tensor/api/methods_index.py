"""Tensor methods for indexing with PyTorch's semantics: ``take_along_axis`` (``gather``),
``index_select``, ``scatter``, ``scatter_add``, ``scatter_reduce``, ``masked_fill``,
and integer-array (advanced) indexing in ``x[...]``.

A graph's shapes are static, so a boolean mask selects only when it is a numpy array
(known when the graph is built); a boolean *Tensor* chooses values with
[`masked_fill`][asgrad.tensor.masked_fill] or [`asgrad.tensor.where`][asgrad.tensor.where] instead.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> x = g.constant(np.arange(6.0).reshape(2, 3))
>>> evaluate(x[[1, 0], [2, 0]])[0].tolist()
[5.0, 0.0]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np

from asgrad.tensor.api.dims import axis_arg
from asgrad.tensor.api.located import checked, locate
from asgrad.tensor.api.methods_base import TensorBase
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, OutOfRangeError, ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, expand_ellipsis, normalize_axis
from asgrad.tensor.ops.index_along import REDUCTIONS

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

T = TypeVar("T")

_MASK_HINT = (
    "a boolean Tensor cannot select elements in a graph (the result's shape would depend"
    " on its values); use x.masked_fill(~mask, 0) or asgrad.tensor.where(mask, x, y) to"
    " choose values, or index with a numpy bool array, known when the graph is built"
)


def _given(op: str, name: str, value: T | None) -> T:
    """``value``, which the caller must give (optional in the signature only so that
    PyTorch's ``dim=`` may come by keyword before it)."""
    if value is None:
        raise locate(op, ArgumentError(f"{name} is required"))
    return value


def _given_axis(op: str, axis: int | None, dim: int | None) -> int:
    """``axis`` or ``dim`` (PyTorch's name), exactly one of them."""
    return _given(op, "axis (or dim)", axis_arg(op, axis, dim))


class IndexMethods(TensorBase):
    """Tensor methods for indexing with PyTorch's semantics."""

    __slots__ = ()

    def _self(self) -> Tensor:
        return cast("Tensor", self)

    def _fit_index(self, op: str, axis: int, index: Tensor) -> tuple[Tensor, int]:
        """``axis`` normalized, after checks that ``index`` may index this value along it."""
        axis = checked(op, normalize_axis, axis, self.ndim)
        if index.ndim != self.ndim:
            raise locate(
                op,
                ShapeError(
                    f"index {index.dtype}{list(index.shape)} must have the rank of the value,"
                    f" {self.ndim}"
                ),
            )
        for d, (a, b) in enumerate(zip(index.shape, self.shape, strict=True)):
            if d != axis and a > b:
                raise locate(
                    op,
                    ShapeError(
                        f"index size {a} at axis {d} exceeds the value's size {b}; outside"
                        f" the indexed axis {axis}, an index may be smaller, never larger"
                    ),
                )
        return self._self(), axis

    def _narrow_to(self, index: Tensor, axis: int) -> Tensor:
        """This value sliced to ``index``'s sizes outside ``axis``."""
        items = tuple(
            slice(None) if d == axis or n == m else slice(0, n)
            for d, (n, m) in enumerate(zip(index.shape, self.shape, strict=True))
        )
        return self._self()[items]

    def take_along_axis(
        self, indices: Tensor, axis: int | None = None, *, dim: int | None = None
    ) -> Tensor:
        """``out[..., m, ...] = x[..., indices[..., m, ...], ...]`` along ``axis``
        (``numpy.take_along_axis``; ``torch.gather(x, axis, indices)``): ``indices`` has
        this value's rank, sizes no larger outside ``axis``, values in ``[0, n)``.
        ``dim=`` (PyTorch's name) may stand for ``axis``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> g = Graph()
        >>> x = g.constant([[1.0, 2.0], [3.0, 4.0]])
        >>> evaluate(x.take_along_axis(g.constant([[1], [0]]), 1))[0].tolist()
        [[2.0], [3.0]]
        """
        axis = _given_axis("take_along_axis", axis, dim)
        x, axis = self._fit_index("take_along_axis", axis, indices)
        x = x._narrow_to(indices, axis)
        return x._apply("take_along_axis", indices, axis=axis)

    def index_select(
        self, axis: int | None = None, index: Tensor | None = None, *, dim: int | None = None
    ) -> Tensor:
        """The entries ``index`` (a vector of ints in ``[0, n)``) along ``axis``
        (``torch.index_select``; ``dim=`` may stand for ``axis``).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 2))
        >>> i = x.graph.constant([1, 1, 0])
        >>> evaluate(x.index_select(0, i), {"x": [[1.0, 2.0], [3.0, 4.0]]})[0].tolist()
        [[3.0, 4.0], [3.0, 4.0], [1.0, 2.0]]
        """
        axis = _given_axis("index_select", axis, dim)
        index = _given("index_select", "index", index)
        if index.ndim != 1:
            raise locate("index_select", ShapeError(f"index must be a vector, got {index!r}"))
        return self._self().gather(index, axis=axis)

    def scatter_add(
        self,
        axis: int | None = None,
        index: Tensor | None = None,
        src: Tensor | None = None,
        *,
        dim: int | None = None,
    ) -> Tensor:
        """This value with ``src[..., m, ...]`` added at ``[..., index[..., m, ...], ...]``
        along ``axis`` (``torch.Tensor.scatter_add``; ``dim=`` may stand for ``axis``).

        >>> from asgrad.tensor import Graph, evaluate
        >>> g = Graph()
        >>> x = g.constant([0.0, 0.0, 0.0])
        >>> evaluate(x.scatter_add(0, g.constant([2, 0, 2]), g.constant([1.0, 2.0, 3.0])))[0]
        array([2., 0., 4.], dtype=float32)
        """
        axis = _given_axis("scatter_add", axis, dim)
        index = _given("scatter_add", "index", index)
        x, axis = self._fit_index("scatter_add", axis, index)
        src = self._fit_src("scatter_add", _given("scatter_add", "src", src), index)
        region = x._narrow_to(index, axis)
        added = region.graph.apply("scatter_add_along", (src, index, region), {"axis": axis})
        if region.shape != x.shape:
            items = tuple(slice(0, n) for n in region.shape)
            added = added.graph.apply("scatter_slice", (added, x), {"index": items})
        return x + added

    def _fit_src(self, op: str, src: object, index: Tensor) -> Tensor:
        """``src`` (a Tensor at least ``index``'s size, or a number) cut to ``index``'s shape."""
        x = self._self()
        if not isinstance(src, IndexMethods):
            value = x._lift(src)
            return value.graph.apply("broadcast_like", (value, index.cast(x.dtype)))
        s = cast("Tensor", src)
        if s.ndim != index.ndim or any(a < b for a, b in zip(s.shape, index.shape, strict=True)):
            raise locate(
                op,
                ShapeError(f"src {s.dtype}{list(s.shape)} must cover index {list(index.shape)}"),
            )
        if s.shape != index.shape:
            s = s[tuple(slice(0, n) for n in index.shape)]
        return s

    def scatter_reduce(
        self,
        axis: int | None = None,
        index: Tensor | None = None,
        src: Tensor | None = None,
        reduce: str | None = None,
        include_self: bool = True,
        *,
        dim: int | None = None,
    ) -> Tensor:
        """``torch.Tensor.scatter_reduce``: each entry of ``src`` combined into this value at
        ``index`` along ``axis`` by ``reduce`` (``sum``, ``prod``, ``mean``, ``amax``,
        ``amin``), with or without this value's own entry; positions no index names keep it.
        ``dim=`` (PyTorch's name) may stand for ``axis``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> g = Graph()
        >>> x = g.constant([5.0, 5.0])
        >>> y = x.scatter_reduce(0, g.constant([0, 0, 0]), g.constant([1.0, 9.0, 2.0]), "amax")
        >>> evaluate(y)[0].tolist()
        [9.0, 5.0]
        """
        if reduce not in REDUCTIONS:
            raise locate(
                "scatter_reduce",
                ArgumentError(f"reduce must be one of {', '.join(REDUCTIONS)}; got {reduce!r}"),
            )
        axis = _given_axis("scatter_reduce", axis, dim)
        index = _given("scatter_reduce", "index", index)
        x, axis = self._fit_index("scatter_reduce", axis, index)
        src = self._fit_src("scatter_reduce", _given("scatter_reduce", "src", src), index)
        region = x._narrow_to(index, axis)
        attrs = {"axis": axis, "reduce": reduce, "include_self": bool(include_self)}
        out = region.graph.apply("scatter_reduce", (region, index, src), attrs)
        if region.shape == x.shape:
            return out
        items = tuple(slice(0, n) for n in region.shape)
        placed = out.graph.apply("scatter_slice", (out, x), {"index": items})
        inside = np.zeros(x.shape, bool)
        inside[items] = True
        return out.graph.apply("where", (x.graph.constant(inside), placed, x), {})

    def scatter(
        self,
        axis: int | None = None,
        index: Tensor | None = None,
        src: object = None,
        *,
        dim: int | None = None,
    ) -> Tensor:
        """This value with ``src`` (a Tensor or a number) written at ``index`` along
        ``axis`` (``torch.Tensor.scatter``). Where several entries land on one position,
        the largest is written (PyTorch leaves the choice undefined). ``dim=`` (PyTorch's
        name) may stand for ``axis``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> i = x.graph.constant([2, 0])
        >>> evaluate(x.scatter(0, i, 9.0), {"x": [1.0, 2.0, 3.0]})[0].tolist()
        [9.0, 2.0, 9.0]
        """
        axis = _given_axis("scatter", axis, dim)
        src = _given("scatter", "src", src)
        return self.scatter_reduce(axis, index, src, "amax", include_self=False)  # type: ignore[arg-type]

    def masked_fill(self, mask: Tensor, value: object) -> Tensor:
        """``value`` where the boolean ``mask`` (broadcast) is true, else this value.

        >>> import numpy as np
        >>> from asgrad.tensor import Graph, evaluate
        >>> g = Graph()
        >>> x = g.constant([1.0, -2.0, 3.0])
        >>> evaluate(x.masked_fill(x < 0, 0.0))[0].tolist()
        [1.0, 0.0, 3.0]
        """
        x = self._self()
        return x.graph.apply("where", (mask, x._lift(value), x), {})

    def __setitem__(self, index: object, value: object) -> None:
        raise ArgumentTypeError(
            "a Tensor is a value in a graph and cannot be assigned to; build the new value"
            " instead: x.masked_fill(mask, v) or asgrad.tensor.where(mask, v, x) for a mask,"
            " x.scatter(axis, index, v) for indices"
        )

    # -- x[...] with integer arrays -----------------------------------------------------------
    @staticmethod
    def _check_slice_bounds(items: tuple[object, ...]) -> None:
        """A typed error for a slice bound that is not a Python int (or None)."""
        for item in items:
            if not isinstance(item, slice):
                continue
            for bound in (item.start, item.stop, item.step):
                if bound is None or (
                    isinstance(bound, int | np.integer) and not isinstance(bound, bool)
                ):
                    continue
                hint = (
                    "; a bound held by a Tensor would make the result's shape depend on"
                    " values when the graph runs: slice with ints, or keep the shape and"
                    " choose values with masked_fill/where"
                    if isinstance(bound, IndexMethods)
                    else ""
                )
                raise locate(
                    "index",
                    ArgumentTypeError(
                        f"slice bounds must be Python ints (or None), got {bound!r}{hint}"
                    ),
                )

    def _advanced_index(self, items: tuple[object, ...]) -> Tensor:
        """``x[items]`` where some items are integer arrays (Tensors, lists, numpy arrays):
        numpy's rules, with every array's values in ``[0, n)`` for Tensors (numpy arrays
        may count from the end)."""
        x = self._self()
        flat: list[object] = []
        for k, item in enumerate(items):
            if isinstance(item, IndexMethods):
                t = cast("Tensor", item)
                if t.dtype == "bool":
                    raise locate("index", ArgumentTypeError(_MASK_HINT))
                flat.append(t)
            elif isinstance(item, list | np.ndarray) and np.asarray(item).dtype == bool:
                mask = np.asarray(item)
                _check_mask(mask, _mask_start(items, k, x.ndim), x.shape)
                flat.extend(np.nonzero(mask))  # static: its shape is known
            elif isinstance(item, list | np.ndarray):
                flat.append(np.asarray(item))
            else:
                flat.append(item)
        if any(item is None for item in flat):
            raise locate(
                "index",
                ArgumentTypeError(
                    "None (a new axis) cannot be combined with array indices in one"
                    " subscript; index first, then add the axis with expand_dims"
                ),
            )
        full = checked("index", expand_ellipsis, tuple(flat), x.ndim)
        if len(full) > x.ndim:
            raise locate("index", ShapeError(f"{len(full)} indices for a value of rank {x.ndim}"))
        positions = [i for i, item in enumerate(full) if not isinstance(item, slice)]
        basic = tuple(slice(None) if i in positions else item for i, item in enumerate(full))
        if any(s != slice(None) for s in basic):
            x = x[basic]  # slices first; the array and int positions keep their axes
        arrays = [x._index_array(full[p], p) for p in positions]
        if len(positions) > 1:
            # The arrays combine into one flat position, which gather checks only as a
            # whole: check each Tensor against its own axis by gathering it from a range.
            arrays = [
                x.graph.constant(np.arange(x.shape[p], dtype=np.int64)).gather(a, axis=0)
                if isinstance(full[p], IndexMethods)
                else a
                for p, a in zip(positions, arrays, strict=True)
            ]
        checked("index", broadcast_shapes, *(a.shape for a in arrays))
        sizes = [x.shape[p] for p in positions]
        position = arrays[0]
        for a, n in zip(arrays[1:], sizes[1:], strict=True):
            position = position * n + a
        adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
        if len(positions) == 1:
            return x.gather(position, axis=positions[0])
        if not adjacent:
            rest = [d for d in range(x.ndim) if d not in positions]
            x = x.transpose(*positions, *rest)
            positions = list(range(len(positions)))
        p0 = positions[0]
        merged = (*x.shape[:p0], math.prod(sizes), *x.shape[p0 + len(positions) :])
        if p0 > 0 and math.prod(merged[1:]) > 0:
            merged = (-1, *merged[1:])  # keep the batch axis free
        return x.reshape(merged).gather(position, axis=p0)

    def _index_array(self, item: object, axis: int) -> Tensor:
        """One integer index (an int, a numpy array or a Tensor) as an int64 Tensor."""
        x = self._self()
        n = x.shape[axis]
        if isinstance(item, IndexMethods):
            t = cast("Tensor", item)
            if t.dtype not in ("int32", "int64"):
                raise locate("index", ArgumentTypeError(f"array indices must be integers: {t!r}"))
            return t.cast("int64")
        array = np.asarray(item)
        if array.size == 0:  # x[[]]: numpy takes an empty list as integer indices
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise locate(
                "index", ArgumentTypeError(f"unsupported index {item!r}; use ints or int arrays")
            )
        if array.size and (array.min() < -n or array.max() >= n):
            raise locate(
                "index",
                ShapeError(f"index {item!r} is out of bounds for axis {axis} with size {n}"),
            )
        return x.graph.constant(np.where(array < 0, array + n, array).astype(np.int64), "int64")


def _axes_taken(item: object) -> int:
    """How many axes of the value one subscript item consumes (not for ``...``)."""
    if item is None:
        return 0
    if isinstance(item, list | np.ndarray) and np.asarray(item).dtype == bool:
        return max(np.asarray(item).ndim, 1)
    return 1


def _mask_start(items: tuple[object, ...], k: int, ndim: int) -> int:
    """The first axis that the boolean mask ``items[k]`` covers."""
    if any(item is Ellipsis for item in items[:k]):
        return ndim - sum(_axes_taken(item) for item in items[k:])
    return sum(_axes_taken(item) for item in items[:k])


def _check_mask(mask: np.ndarray, start: int, shape: tuple[int, ...]) -> None:
    """numpy's rule: a boolean mask's shape equals the axes of the value it covers."""
    covered = shape[start : start + mask.ndim]
    if mask.ndim and (start < 0 or tuple(mask.shape) != tuple(covered)):
        raise locate(
            "index",
            OutOfRangeError(
                f"boolean index of shape {list(mask.shape)} does not match the indexed"
                f" axes {list(covered)} (from axis {start}) of a value of shape"
                f" {list(shape)}; a mask must have exactly the shape of the axes it selects"
            ),
        )
