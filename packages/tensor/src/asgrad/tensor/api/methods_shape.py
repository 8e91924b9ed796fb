"""Tensor methods for shape, indexing, linear algebra and creation ops.

Each method appends one op (or the ops an op expands into) to the tensor's graph;
the functions of the same names live in the functional modules. Names and argument
orders follow PyTorch where it has the method (``repeat``, ``unfold``, ``narrow``),
numpy otherwise; ``axis`` is the name of what PyTorch calls ``dim``.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> x = g.constant(np.arange(6.0).reshape(2, 3))
>>> evaluate([x.flip(1), x.roll(1, 1)])[0].tolist()
[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from asgrad.tensor.api.dims import axis_arg
from asgrad.tensor.api.located import checked
from asgrad.tensor.api.methods_index import IndexMethods
from asgrad.tensor.errors import ArgumentTypeError, ShapeError
from asgrad.tensor.ir.common import axis_tuple, int_arg, normalize_axes, normalize_axis
from asgrad.tensor.ops.shape import resolve_reshape

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

IntOrInts = int | Sequence[int]


def ints(op: str, value: object, what: str) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ints) as a tuple of ints; else a typed error."""
    items = value if isinstance(value, Sequence | np.ndarray) else (value,)
    try:
        return tuple(operator.index(v) for v in items)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(
            f"{op}: {what} must be integers (Python ints, fixed when the graph is built),"
            f" got {value!r}"
        ) from None


def _sizes(args: tuple[object, ...]) -> object:
    return args[0] if len(args) == 1 and not isinstance(args[0], int | np.integer) else args


class ShapeMethods(IndexMethods):
    """Tensor methods for shape, indexing, linear algebra and creation ops."""

    __slots__ = ()

    def _t(self) -> Tensor:
        return cast("Tensor", self)

    # -- ops of their own (expanding) ---------------------------------------------------
    def flip(self, *axes: IntOrInts, dims: IntOrInts | None = None) -> Tensor:
        """Reverse the order along ``axes`` (all axes when none are given).

        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant([1, 2, 3]).flip(0))[0].tolist()
        [3, 2, 1]
        """
        picked = axis_arg("flip", _sizes(axes) if axes else None, dims)
        given = ints("flip", picked, "axes") if picked is not None else None
        return self._apply("flip", axis=checked("flip", normalize_axes, given, self.ndim))

    def roll(
        self, shifts: IntOrInts, axis: IntOrInts | None = None, *, dims: IntOrInts | None = None
    ) -> Tensor:
        """Rotate elements by ``shifts`` along ``axis`` (the flattened value when None),
        as ``torch.roll``/``numpy.roll``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant([1, 2, 3, 4]).roll(1))[0].tolist()
        [4, 1, 2, 3]
        """
        axis = axis_arg("roll", axis, dims)
        shift = ints("roll", shifts, "shifts")
        axes = None if axis is None else ints("roll", axis, "axis")
        if axes is not None and len(shift) == 1 and len(axes) > 1:
            shift = shift * len(axes)
        return self._apply("roll", shift=shift, axis=axes)

    def tril(self, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two axes (``diagonal`` > 0: above the main one too).

        >>> import numpy as np
        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant(np.ones((2, 2))).tril())[0].tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._apply("tril", diagonal=int_arg(diagonal, "tril: diagonal"))

    def triu(self, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two axes (``diagonal`` < 0: below the main one too).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 2))
        >>> evaluate(x.triu(), {"x": [[1.0, 2.0], [3.0, 4.0]]})[0].tolist()
        [[1.0, 2.0], [0.0, 4.0]]
        """
        return self._apply("triu", diagonal=int_arg(diagonal, "triu: diagonal"))

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
        """The diagonal of ``axis1`` and ``axis2`` (shifted by ``offset``) as a new last axis.

        >>> import numpy as np
        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant(np.arange(9).reshape(3, 3)).diagonal(1))[0].tolist()
        [1, 5]
        """
        return self._apply(
            "diagonal", offset=int_arg(offset, "diagonal: offset"), axis1=axis1, axis2=axis2
        )

    def repeat(self, *repeats: IntOrInts) -> Tensor:
        """Whole copies along each axis, as ``torch.Tensor.repeat`` (one count per axis;
        extra leading counts add axes).

        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant([1, 2]).repeat(2))[0].tolist()
        [1, 2, 1, 2]
        """
        return self._apply("repeat", repeats=ints("repeat", _sizes(repeats), "repeats"))

    def tile(self, *reps: IntOrInts) -> Tensor:
        """``numpy.tile``/``torch.tile``: ``repeat`` with missing leading counts taken as 1.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.tile(2).shape, x.tile(2, 1, 1).shape
        ((2, 6), (2, 2, 3))
        """
        counts = ints("tile", _sizes(reps), "reps")
        return self.repeat((1,) * (self.ndim - len(counts)) + counts)

    def repeat_interleave(
        self, repeats: IntOrInts, axis: int | None = None, *, dim: int | None = None
    ) -> Tensor:
        """Repeat each element ``repeats`` times along ``axis`` (the flattened value when
        None), as ``torch.repeat_interleave``; per-element counts must be static ints.

        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant([1, 2]).repeat_interleave(2))[0].tolist()
        [1, 1, 2, 2]
        """
        x = self._t()
        axis = axis_arg("repeat_interleave", axis, dim)
        if axis is None:
            x, axis = x.reshape(-1), 0
        counts = ints("repeat_interleave", repeats, "repeats (a Tensor's values are not static)")
        axis = checked("repeat_interleave", normalize_axis, axis, x.ndim)
        return x._apply("repeat_interleave", repeats=counts, axis=axis)

    def unfold(self, axis: int, size: int, step: int) -> Tensor:
        """Windows of ``size`` every ``step`` along ``axis``, as a new last axis
        (``torch.Tensor.unfold``).

        >>> from asgrad.tensor import Graph, evaluate
        >>> evaluate(Graph().constant([1, 2, 3, 4]).unfold(0, 2, 2))[0].tolist()
        [[1, 2], [3, 4]]
        """
        axis = checked("unfold", normalize_axis, axis, self.ndim)
        size, step = int_arg(size, "unfold: size"), int_arg(step, "unfold: step")
        return self._apply("unfold", axis=axis, size=size, step=step)

    # -- compositions of reshape, transpose and slice ------------------------------------------
    def view(self, *shape: IntOrInts) -> Tensor:
        """``reshape`` under PyTorch's name (one -1 allowed); values are never shared.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.view(3, -1).shape
        (3, 2)
        """
        return self._t().reshape(*shape)

    def unflatten(self, axis: int, sizes: Sequence[int]) -> Tensor:
        """Split ``axis`` into ``sizes`` (one may be -1), as ``torch.Tensor.unflatten``.

        >>> from asgrad.tensor import Graph
        >>> Graph().input("x", (2, 12)).unflatten(1, (3, -1)).shape
        (2, 3, 4)
        """
        axis = checked("unflatten", normalize_axis, axis, self.ndim)
        dims = ints("unflatten", sizes, "sizes")
        inner = checked("unflatten", resolve_reshape, (self.shape[axis],), dims)
        shape = self.shape[:axis] + inner + self.shape[axis + 1 :]
        if axis > 0 and math.prod(shape[1:]) > 0:
            shape = (-1, *shape[1:])  # keep the batch axis free
        return self._t().reshape(shape)

    def movedim(self, source: IntOrInts, destination: IntOrInts) -> Tensor:
        """Move axes ``source`` to positions ``destination`` (``numpy.moveaxis``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3, 4))
        >>> x.movedim(0, -1).shape
        (3, 4, 2)
        """
        src = [checked("movedim", normalize_axis, a, self.ndim) for a in axis_tuple(source)]
        dst = [checked("movedim", normalize_axis, a, self.ndim) for a in axis_tuple(destination)]
        if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise checked_error("movedim", f"source {source} and destination {destination}")
        order = [a for a in range(self.ndim) if a not in src]
        for d, s in sorted(zip(dst, src, strict=True)):
            order.insert(d, s)
        return self._t().transpose(*order)

    moveaxis = movedim
    """The same as [`movedim`][asgrad.tensor.Tensor.movedim] (numpy's name).

    >>> from asgrad.tensor import Graph
    >>> Graph().input("x", (2, 3, 4)).moveaxis(-1, 0).shape
    (4, 2, 3)
    """

    def narrow(
        self,
        axis: int | None = None,
        start: int = 0,
        length: int | None = None,
        *,
        dim: int | None = None,
    ) -> Tensor:
        """``length`` elements from ``start`` along ``axis`` (``torch.Tensor.narrow``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.narrow(1, 1, 2).shape
        (2, 2)
        """
        given = axis_arg("narrow", axis, dim)
        if given is None or length is None:
            raise ArgumentTypeError("narrow takes (axis or dim, start, length)")
        axis = checked("narrow", normalize_axis, given, self.ndim)
        n = self.shape[axis]
        start, length = int_arg(start, "narrow: start"), int_arg(length, "narrow: length")
        begin = start + n if start < 0 else start
        if not (0 <= begin <= n and 0 <= length <= n - begin):
            raise checked_error(
                "narrow", f"start {start} and length {length} for axis {axis} of size {n}"
            )
        return self._t()[(slice(None),) * axis + (slice(begin, begin + length),)]

    def t(self) -> Tensor:
        """The transpose of a matrix (rank <= 2), as ``torch.Tensor.t``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.t().shape
        (3, 2)
        """
        if self.ndim > 2:
            raise checked_error("t", f"a value of rank {self.ndim}; use .mT or .transpose")
        return self._t().transpose()

    @property
    def mT(self) -> Tensor:  # noqa: N802  # PyTorch's name
        """The last two axes swapped (a batch of matrices transposed).

        >>> from asgrad.tensor import Graph
        >>> Graph().input("x", (5, 2, 3)).mT.shape
        (5, 3, 2)
        """
        return self._t().swapaxes(-2, -1)

    def unstack(self, axis: int | None = None, *, dim: int | None = None) -> list[Tensor]:
        """The slices along ``axis``, that axis removed (``torch.unbind``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> [row.shape for row in x.unstack()]
        [(3,), (3,)]
        """
        axis = checked("unstack", normalize_axis, axis_arg("unstack", axis, dim, 0), self.ndim)
        return [self._t()[(slice(None),) * axis + (i,)] for i in range(self.shape[axis])]

    unbind = unstack
    """The same as [`unstack`][asgrad.tensor.Tensor.unstack] (PyTorch's name).

    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2, 3))
    >>> [column.shape for column in x.unbind(1)]
    [(2,), (2,), (2,)]
    """

    def split(
        self, split_size_or_sections: IntOrInts, axis: int | None = None, *, dim: int | None = None
    ) -> list[Tensor]:
        """Pieces along ``axis``: of ``split_size`` each (the last smaller), or of the
        given sizes, which must add up to the axis' size (``torch.split``).

        >>> from asgrad.tensor import Graph
        >>> [p.shape for p in Graph().input("x", (5, 2)).split(2)]
        [(2, 2), (2, 2), (1, 2)]
        """
        axis = checked("split", normalize_axis, axis_arg("split", axis, dim, 0), self.ndim)
        n = self.shape[axis]
        if isinstance(split_size_or_sections, int | np.integer):
            size = int(split_size_or_sections)
            if size <= 0:
                raise checked_error("split", f"split size {size}; give a positive size")
            sizes = [min(size, n - s) for s in range(0, n, size)] or [0]
        else:
            sizes = list(ints("split", split_size_or_sections, "sizes"))
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise checked_error("split", f"sizes {sizes} for axis {axis} of size {n}")
        pieces, start = [], 0
        for s in sizes:
            pieces.append(self.narrow(axis, start, s))
            start += s
        return pieces

    def chunk(
        self, chunks: int, axis: int | None = None, *, dim: int | None = None
    ) -> list[Tensor]:
        """At most ``chunks`` pieces of ``ceil(n / chunks)`` along ``axis`` (``torch.chunk``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> [piece.shape for piece in x.chunk(2, dim=1)]
        [(2, 2), (2, 1)]
        """
        chunks = int_arg(chunks, "chunk: chunks")
        if chunks <= 0:
            raise checked_error("chunk", f"chunks {chunks}; give a positive count")
        axis = checked("chunk", normalize_axis, axis_arg("chunk", axis, dim, 0), self.ndim)
        return self.split(max(1, -(-self.shape[axis] // chunks)), axis)


def checked_error(op: str, what: str) -> ShapeError:
    """A ShapeError for ``op`` that names the user's line: raise it."""
    from asgrad.tensor.api.located import locate

    return cast(ShapeError, locate(op, ShapeError(f"invalid {what}")))
