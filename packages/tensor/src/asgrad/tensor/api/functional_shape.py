"""Module functions for shape, indexing, padding, Einstein sums and values made in a graph.

PyTorch's and numpy's names: ``pad`` (``torch.nn.functional.pad``'s argument order,
or numpy's per-axis pairs), ``einsum``, ``outer``, ``bmm``, ``take_along_axis``,
``gather`` (``torch.gather``), ``scatter``..., and the creation functions ``zeros``,
``ones``, ``full``, ``arange``, ``linspace``, ``eye`` (constants of a graph) and
``zeros_like``, ``ones_like``, ``full_like`` (which follow their input's shape when
the graph runs, so they fit a batch of any size).

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate, pad, einsum
>>> g = Graph()
>>> x = g.constant(np.arange(3.0))
>>> evaluate(pad(x, (1, 2), mode="reflect"))[0].tolist()
[1.0, 0.0, 1.0, 2.0, 1.0, 0.0]
>>> evaluate(einsum("i,i->", x, x))[0].tolist()
5.0
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from asgrad.tensor.api.located import locate
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from asgrad.tensor.ir.dtypes import as_dtype
from asgrad.tensor.ir.graph import Graph, Variable
from asgrad.tensor.ops.shape_pad import MODES

__all__ = [
    "arange",
    "bmm",
    "chunk",
    "einsum",
    "eye",
    "flip",
    "full",
    "full_like",
    "gather",
    "index_select",
    "linspace",
    "masked_fill",
    "movedim",
    "ones",
    "ones_like",
    "outer",
    "pad",
    "roll",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "split",
    "take_along_axis",
    "tile",
    "tril",
    "triu",
    "unstack",
    "zeros",
    "zeros_like",
]

_MODE_ALIASES = {"edge": "replicate", "wrap": "circular"}


# -- padding --------------------------------------------------------------------------------
def _pad_pairs(x: Tensor, pad: object) -> tuple[tuple[int, int], ...]:
    """``pad`` as one (before, after) pair per axis of ``x``."""
    ndim = x.ndim
    if isinstance(pad, int | np.integer):  # numpy: the same width everywhere
        return ((int(pad), int(pad)),) * ndim
    if not isinstance(pad, Sequence) or isinstance(pad, str):
        raise ArgumentTypeError(f"pad must be a sequence of ints or of pairs, got {pad!r}")
    try:
        if pad and all(isinstance(p, Sequence) and not isinstance(p, str) for p in pad):
            pairs = [tuple(operator.index(v) for v in p) for p in pad]
            if any(len(p) != 2 for p in pairs):
                raise ArgumentError(f"pad pairs must be (before, after), got {pad!r}")
            if len(pairs) == 1:
                pairs = pairs * ndim
            if len(pairs) != ndim:
                raise ShapeError(f"pad has {len(pairs)} pairs for a value of rank {ndim}")
            return tuple((p[0], p[1]) for p in pairs)
        flat = [operator.index(v) for v in pad]
    except TypeError:
        raise ArgumentTypeError(f"pad widths must be integers, got {pad!r}") from None
    if len(flat) % 2 or len(flat) > 2 * ndim:
        raise ShapeError(
            f"pad {list(flat)} must hold (before, after) pairs for at most the {ndim} axes,"
            " last axis first (torch.nn.functional.pad's order)"
        )
    out = [(0, 0)] * ndim
    for k in range(len(flat) // 2):
        out[ndim - 1 - k] = (flat[2 * k], flat[2 * k + 1])
    return tuple(out)


def pad(x: Tensor, pad: object, mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad (or, with negative widths, crop) ``x``.

    ``pad`` is PyTorch's flat form, ``(before_last, after_last, before_2nd_last, ...)``
    for as many trailing axes as it covers (``torch.nn.functional.pad``), or numpy's
    ``((before, after), ...)`` for every axis (one pair or one int: every axis alike).
    ``mode``: ``constant`` (``value``), ``reflect``, ``replicate`` (numpy's ``edge``)
    or ``circular`` (numpy's ``wrap``), each on any axis of any rank.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate, pad
    >>> x = Graph().constant(np.array([[1, 2], [3, 4]]))
    >>> evaluate(pad(x, (1, 0), mode="replicate"))[0].tolist()
    [[1, 1, 2], [3, 3, 4]]
    >>> evaluate(pad(x, ((0, 0), (0, -1))))[0].tolist()
    [[1], [3]]
    """
    mode = _MODE_ALIASES.get(mode, mode)
    if mode not in MODES:
        raise locate("pad", ArgumentError(f"mode must be one of {', '.join(MODES)}; got {mode!r}"))
    try:
        pairs = _pad_pairs(x, pad)
    except (ArgumentError, ArgumentTypeError, ShapeError) as exc:
        raise locate("pad", exc) from None
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise locate("pad", ArgumentTypeError(f"value must be a number, got {value!r}"))
    if all(p == (0, 0) for p in pairs):
        return x
    return x.graph.apply("pad", (x,), {"pad": pairs, "mode": mode, "value": float(value)})


# -- linear algebra -------------------------------------------------------------------------
def einsum(equation: str, *operands: Tensor | Variable | Sequence[Tensor | Variable]) -> Tensor:
    """Einstein summation (``numpy.einsum``, ``torch.einsum``): any number of operands,
    ``...``, repeated labels (diagonals, traces) and the implicit output.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate, einsum
    >>> m = Graph().constant(np.arange(4.0).reshape(2, 2))
    >>> evaluate(einsum("ii", m))[0].tolist()
    3.0
    """
    if len(operands) == 1 and isinstance(operands[0], Sequence):
        operands = tuple(operands[0])
    like = next((t for t in operands if isinstance(t, Tensor)), None)
    if like is not None:  # a model's Parameter among them joins that Tensor's graph
        operands = tuple(like._lift(t) if isinstance(t, Variable) else t for t in operands)
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise locate(
            "einsum",
            ArgumentTypeError(
                "einsum takes one or more Tensors (a Parameter alone has no graph:"
                " bind it first, graph.bind(p))"
            ),
        )
    tensors = [t for t in operands if isinstance(t, Tensor)]
    if not isinstance(equation, str):
        raise locate("einsum", ArgumentTypeError(f"equation must be a str, got {equation!r}"))
    return tensors[0].graph.apply("einsum", tuple(tensors), {"equation": equation.replace(" ", "")})


def outer(a: Tensor, b: Tensor) -> Tensor:
    """The outer product of two vectors (``torch.outer``).

    >>> from asgrad.tensor import Graph, evaluate, outer
    >>> g = Graph()
    >>> a, b = g.input("a", (2,)), g.input("b", (2,))
    >>> evaluate(outer(a, b), {"a": [1.0, 2.0], "b": [3.0, 4.0]})[0].tolist()
    [[3.0, 4.0], [6.0, 8.0]]
    """
    if a.ndim != 1 or b.ndim != 1:
        raise locate("outer", ShapeError(f"outer takes two vectors, got {a!r} and {b!r}"))
    return a.expand_dims(1) * b.expand_dims(0)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of two rank-3 values of one batch size (``torch.bmm``).

    >>> from asgrad.tensor import Graph, evaluate, bmm
    >>> g = Graph()
    >>> bmm(g.input("a", (4, 2, 3)), g.input("b", (4, 3, 5))).shape
    (4, 2, 5)
    """
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise locate("bmm", ShapeError(f"bmm takes (b, n, m) @ (b, m, p), got {a!r} @ {b!r}"))
    return a.matmul(b)


# -- function forms of the Tensor methods ------------------------------------------------------
def flip(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """Reverse ``x`` along ``axis`` (every axis when None).

    >>> from asgrad.tensor import Graph, evaluate, flip
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(flip(x), {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [3.0, 2.0, 1.0]
    """
    return x.flip() if axis is None else x.flip(axis)


def roll(x: Tensor, shifts: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
    """``x`` rotated by ``shifts`` along ``axis`` (``torch.roll``, ``numpy.roll``).

    >>> from asgrad.tensor import Graph, evaluate, roll
    >>> g = Graph()
    >>> x = g.input("x", (3,), free=())
    >>> evaluate(roll(x, 1), {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [3.0, 1.0, 2.0]
    """
    return x.roll(shifts, axis)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of ``x``'s last two axes.

    >>> from asgrad.tensor import Graph, evaluate, tril
    >>> g = Graph()
    >>> x = g.input("x", (2, 2))
    >>> evaluate(tril(x), {"x": [[1.0, 2.0], [3.0, 4.0]]})[0].tolist()
    [[1.0, 0.0], [3.0, 4.0]]
    """
    return x.tril(diagonal)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of ``x``'s last two axes.

    >>> from asgrad.tensor import Graph, evaluate, triu
    >>> g = Graph()
    >>> x = g.input("x", (2, 2))
    >>> evaluate(triu(x), {"x": [[1.0, 2.0], [3.0, 4.0]]})[0].tolist()
    [[1.0, 2.0], [0.0, 4.0]]
    """
    return x.triu(diagonal)


def tile(x: Tensor, reps: int | Sequence[int]) -> Tensor:
    """``x`` repeated whole along each axis (``numpy.tile``, ``torch.tile``).

    >>> from asgrad.tensor import Graph, evaluate, tile
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> evaluate(tile(x, 2), {"x": [1.0, 2.0]})[0].tolist()
    [1.0, 2.0, 1.0, 2.0]
    """
    return x.tile(reps)


def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """``x`` with axes ``source`` moved to ``destination`` (``numpy.moveaxis``).

    >>> from asgrad.tensor import Graph, evaluate, movedim
    >>> g = Graph()
    >>> movedim(g.input("x", (2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    return x.movedim(source, destination)


def unstack(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> list[Tensor]:
    """The slices of ``x`` along ``axis`` (``torch.unbind``).

    >>> from asgrad.tensor import Graph, unstack
    >>> g = Graph()
    >>> [t.shape for t in unstack(g.input("x", (2, 3)), 1)]
    [(2,), (2,), (2,)]
    """
    return x.unstack(axis, dim=dim)


def split(
    x: Tensor,
    split_size_or_sections: int | Sequence[int],
    axis: int | None = None,
    *,
    dim: int | None = None,
) -> list[Tensor]:
    """``x`` in pieces along ``axis`` (``torch.split``).

    >>> from asgrad.tensor import Graph, split
    >>> g = Graph()
    >>> [t.shape for t in split(g.input("x", (5, 2)), [2, 3])]
    [(2, 2), (3, 2)]
    """
    return x.split(split_size_or_sections, axis, dim=dim)


def chunk(
    x: Tensor, chunks: int, axis: int | None = None, *, dim: int | None = None
) -> list[Tensor]:
    """``x`` in at most ``chunks`` equal pieces along ``axis`` (``torch.chunk``).

    >>> from asgrad.tensor import Graph, chunk
    >>> g = Graph()
    >>> [t.shape for t in chunk(g.input("x", (6,)), 3)]
    [(2,), (2,), (2,)]
    """
    return x.chunk(chunks, axis, dim=dim)


def take_along_axis(
    x: Tensor, indices: Tensor, axis: int | None = None, *, dim: int | None = None
) -> Tensor:
    """``numpy.take_along_axis``: see
    [`Tensor.take_along_axis`][asgrad.tensor.Tensor.take_along_axis].

    >>> from asgrad.tensor import Graph, evaluate, take_along_axis
    >>> g = Graph()
    >>> x = g.input("x", (2, 2))
    >>> i = g.constant([[1], [0]])
    >>> evaluate(take_along_axis(x, i, 1), {"x": [[1.0, 2.0], [3.0, 4.0]]})[0].tolist()
    [[2.0], [3.0]]
    """
    return x.take_along_axis(indices, axis, dim=dim)


def gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``torch.gather(x, dim, index)``: ``take_along_axis(x, index, axis)``.

    >>> from asgrad.tensor import Graph, evaluate, gather
    >>> g = Graph()
    >>> x = g.input("x", (2, 2))
    >>> i = g.constant([[1, 0], [0, 0]])
    >>> evaluate(gather(x, 1, i), {"x": [[1.0, 2.0], [3.0, 4.0]]})[0].tolist()
    [[2.0, 1.0], [3.0, 3.0]]
    """
    return x.take_along_axis(index, axis)


def index_select(
    x: Tensor, axis: int | None = None, index: Tensor | None = None, *, dim: int | None = None
) -> Tensor:
    """``torch.index_select``: the entries ``index`` of ``x`` along ``axis``.

    >>> from asgrad.tensor import Graph, evaluate, index_select
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> i = g.constant([2, 0])
    >>> evaluate(index_select(x, 0, i), {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [3.0, 1.0]
    """
    return x.index_select(axis, index, dim=dim)


def scatter(
    x: Tensor,
    axis: int | None = None,
    index: Tensor | None = None,
    src: object = None,
    *,
    dim: int | None = None,
) -> Tensor:
    """``torch.scatter``: see
    [`Tensor.scatter`][asgrad.tensor.Tensor.scatter].

    >>> from asgrad.tensor import Graph, evaluate, scatter
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> i = g.constant([0])
    >>> evaluate(scatter(x, 0, i, 5.0), {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [5.0, 2.0, 3.0]
    """
    return x.scatter(axis, index, src, dim=dim)


def scatter_add(
    x: Tensor,
    axis: int | None = None,
    index: Tensor | None = None,
    src: Tensor | None = None,
    *,
    dim: int | None = None,
) -> Tensor:
    """``torch.scatter_add``: see
    [`Tensor.scatter_add`][asgrad.tensor.Tensor.scatter_add].

    >>> from asgrad.tensor import Graph, evaluate, scatter_add
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> i, src = g.constant([0, 0]), g.constant([1.0, 2.0])
    >>> evaluate(scatter_add(x, 0, i, src), {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [4.0, 2.0, 3.0]
    """
    return x.scatter_add(axis, index, src, dim=dim)


def scatter_reduce(
    x: Tensor,
    axis: int | None = None,
    index: Tensor | None = None,
    src: Tensor | None = None,
    reduce: str | None = None,
    include_self: bool = True,
    *,
    dim: int | None = None,
) -> Tensor:
    """``torch.scatter_reduce``: see
    [`Tensor.scatter_reduce`][asgrad.tensor.Tensor.scatter_reduce].

    >>> from asgrad.tensor import Graph, evaluate, scatter_reduce
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> i, src = g.constant([0, 0]), g.constant([5.0, 7.0])
    >>> out = scatter_reduce(x, 0, i, src, "amax")
    >>> evaluate(out, {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [7.0, 2.0, 3.0]
    """
    return x.scatter_reduce(axis, index, src, reduce, include_self, dim=dim)


def masked_fill(x: Tensor, mask: Tensor, value: object) -> Tensor:
    """``value`` where ``mask`` holds, else ``x``.

    >>> from asgrad.tensor import Graph, evaluate, masked_fill
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(masked_fill(x, x < 0, 0.0), {"x": [-1.0, 2.0, -3.0]})[0].tolist()
    [0.0, 2.0, 0.0]
    """
    return x.masked_fill(mask, value)


# -- values made in a graph ---------------------------------------------------------------
def _graph_of(where: Graph | Tensor) -> Graph:
    if isinstance(where, Tensor):
        return where.graph
    if isinstance(where, Graph):
        return where
    raise ArgumentTypeError(
        f"give the Graph (or a Tensor of it) to make the value in, got {where!r}"
    )


def _shape(shape: tuple[int | Sequence[int], ...]) -> tuple[int, ...]:
    dims = shape[0] if len(shape) == 1 and isinstance(shape[0], Sequence) else shape
    try:
        out = tuple(operator.index(d) for d in dims)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(f"sizes must be integers, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"sizes must be >= 0, got {list(out)}")
    return out


def _check_fits(op: str, dtype: str, *values: object) -> None:
    """A [`DTypeError`][asgrad.tensor.DTypeError] unless the integer dtype ``dtype`` holds every int
    of ``values``."""
    if np.dtype(dtype).kind not in "iu":
        return
    info = np.iinfo(dtype)
    for v in values:
        if isinstance(v, int | np.integer) and not info.min <= int(v) <= info.max:
            raise locate(
                op,
                DTypeError(
                    f"{dtype} holds {info.min}..{info.max}, not {int(v)}; give a wider dtype"
                    " (int64) or values in range"
                ),
            )


def full(
    graph: Graph | Tensor, shape: int | Sequence[int], value: float, dtype: str = "float32"
) -> Tensor:
    """A constant of ``shape`` filled with ``value`` in ``graph``.

    >>> from asgrad.tensor import Graph, evaluate, full
    >>> g = Graph()
    >>> evaluate(full(g, (2,), 7.0))[0].tolist()
    [7.0, 7.0]
    """
    dims = _shape((shape,))
    dt = as_dtype(dtype)
    _check_fits("full", dt, value)
    return _graph_of(graph).constant(np.full(dims, value, dtype=dt), dt)


def zeros(graph: Graph | Tensor, *shape: int | Sequence[int], dtype: str = "float32") -> Tensor:
    """A constant of zeros (``zeros(g, 2, 3)`` or ``zeros(g, (2, 3))``).

    >>> from asgrad.tensor import Graph, zeros
    >>> zeros(Graph(), 2, 3).shape
    (2, 3)
    """
    return full(graph, _shape(shape), 0, dtype)


def ones(graph: Graph | Tensor, *shape: int | Sequence[int], dtype: str = "float32") -> Tensor:
    """A constant of ones.

    >>> from asgrad.tensor import Graph, evaluate, ones
    >>> g = Graph()
    >>> evaluate(ones(g, 2, 2))[0].tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return full(graph, _shape(shape), 1, dtype)


def eye(graph: Graph | Tensor, n: int, m: int | None = None, dtype: str = "float32") -> Tensor:
    """The ``n`` x ``m`` identity matrix (``m`` defaults to ``n``).

    >>> from asgrad.tensor import Graph, evaluate, eye
    >>> g = Graph()
    >>> evaluate(eye(g, 2))[0].tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    if n < 0 or m < 0:
        raise locate("eye", ShapeError(f"sizes must be >= 0, got n={n}, m={m}"))
    return _graph_of(graph).constant(np.eye(n, m, dtype=as_dtype(dtype)), dtype)


def arange(
    graph: Graph | Tensor,
    start: float,
    end: float | None = None,
    step: float = 1,
    dtype: str | None = None,
) -> Tensor:
    """``start, start + step, ...`` below ``end`` (``arange(g, n)``: ``0 .. n-1``); int64
    when every bound is an int, else float32 (``dtype`` overrides).

    >>> from asgrad.tensor import Graph, arange, evaluate
    >>> evaluate(arange(Graph(), 1, 7, 2))[0].tolist()
    [1, 3, 5]
    """
    if end is None:
        start, end = 0, start
    if step == 0:
        raise locate("arange", ArgumentError("step must not be zero"))
    integral = all(isinstance(v, int | np.integer) for v in (start, end, step))
    dt = dtype or ("int64" if integral else "float32")
    if integral:
        r = range(int(start), int(end), int(step))
        if len(r):
            _check_fits("arange", as_dtype(dt), r[0], r[-1])
    return _graph_of(graph).constant(np.arange(start, end, step, dtype=as_dtype(dt)), dt)


def linspace(
    graph: Graph | Tensor, start: float, end: float, steps: int, dtype: str = "float32"
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end``, both included.

    >>> from asgrad.tensor import Graph, evaluate, linspace
    >>> g = Graph()
    >>> evaluate(linspace(g, 0.0, 1.0, 5))[0].tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    steps = operator.index(steps)
    if steps < 0:
        raise locate("linspace", ArgumentError(f"steps must be >= 0, got {steps}"))
    if as_dtype(dtype) == "bool":
        raise locate("linspace", DTypeError("linspace makes numbers; give a numeric dtype"))
    values = np.linspace(start, end, steps, dtype=np.float64).astype(as_dtype(dtype))
    return _graph_of(graph).constant(values, dtype)


def full_like(x: Tensor, value: float, dtype: str | None = None) -> Tensor:
    """``value`` in ``x``'s shape, read when the graph runs (so a larger fed batch gives a
    larger result), of ``x``'s dtype unless ``dtype`` is given.

    >>> from asgrad.tensor import Graph, evaluate, ones_like
    >>> import numpy as np
    >>> g = Graph()
    >>> x = g.input("x", (2, 3))
    >>> evaluate(ones_like(x), {"x": np.zeros((4, 3), np.float32)})[0].shape
    (4, 3)
    """
    dt = as_dtype(dtype) if dtype is not None else x.dtype
    return x.graph.apply("broadcast_like", (x.graph.constant(value, dt), x), {})


def zeros_like(x: Tensor, dtype: str | None = None) -> Tensor:
    """Zeros in ``x``'s shape (when the graph runs).

    >>> from asgrad.tensor import Graph, evaluate, zeros_like
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> evaluate(zeros_like(x), {"x": [5.0, 6.0]})[0].tolist()
    [0.0, 0.0]
    """
    return full_like(x, 0, dtype)


def ones_like(x: Tensor, dtype: str | None = None) -> Tensor:
    """Ones in ``x``'s shape (when the graph runs).

    >>> from asgrad.tensor import Graph, evaluate, ones_like
    >>> g = Graph()
    >>> x = g.input("x", (2,), "int64")
    >>> evaluate(ones_like(x), {"x": [5, 6]})[0].tolist()
    [1, 1]
    """
    return full_like(x, 1, dtype)
