"""numpy-style module functions over tensors: ``where``, ``maximum``, ``concat``..."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.api.dims import axis_arg
from asgrad.tensor.api.located import checked
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentTypeError, GraphError
from asgrad.tensor.ir.common import normalize_axis
from asgrad.tensor.ir.graph import Variable


def _first_tensor(*values: object) -> Tensor:
    for v in values:
        if isinstance(v, Tensor):
            return v
    raise GraphError("at least one argument must be a Tensor")


def where(cond: Tensor, a: object, b: object) -> Tensor:
    """``a`` where ``cond`` is true, else ``b`` (numpy.where), broadcasting all three.

    With two Python numbers as branches (``where(mask, 1.0, 0.0)``) the result is float32
    when either is a float, else int64 (bool for two bools), as PyTorch's default dtypes.

    >>> from asgrad.tensor import Graph, evaluate, where
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(where(x > 0, x, 0.0), {"x": [-1.0, 2.0, 3.0]})[0].tolist()
    [0.0, 2.0, 3.0]
    """
    if not isinstance(a, Tensor | Variable) and not isinstance(b, Tensor | Variable):
        if not isinstance(cond, Tensor):
            raise ArgumentTypeError(f"where: cond must be a Tensor, got {type(cond).__name__}")
        scalars = (a, b)
        if all(isinstance(v, bool | np.bool_) for v in scalars):
            dtype = "bool"
        elif all(isinstance(v, int | np.integer) for v in scalars):
            dtype = "int64"
        else:
            dtype = "float32"
        like = cond.graph.constant(0, dtype)
    else:
        like = _first_tensor(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else cond
    return cond.graph.apply("where", (cond, like._lift(a), like._lift(b)), {})


def stop_gradient(x: Tensor) -> Tensor:
    """``x``'s value, through which no gradient flows (``jax.lax.stop_gradient``,
    PyTorch's ``detach``); a no-op once compiled.

    >>> from asgrad.tensor import Graph, evaluate, stop_gradient
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> evaluate(stop_gradient(x) + 1.0, {"x": [1.0, 2.0]})[0].tolist()
    [2.0, 3.0]
    """
    return x.detach()


def maximum(a: object, b: object) -> Tensor:
    """Elementwise maximum (numpy.maximum).

    >>> from asgrad.tensor import Graph, evaluate, maximum
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(maximum(x, 0.0), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [0.0, 0.0, 2.0]
    """
    like = _first_tensor(a, b)
    return like.graph.apply("maximum", (like._lift(a), like._lift(b)), {})


def minimum(a: object, b: object) -> Tensor:
    """Elementwise minimum (numpy.minimum).

    >>> from asgrad.tensor import Graph, evaluate, minimum
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(minimum(x, 0.0), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-1.0, 0.0, 0.0]
    """
    like = _first_tensor(a, b)
    return like.graph.apply("minimum", (like._lift(a), like._lift(b)), {})


def concat(tensors: Sequence[Tensor], axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Join tensors along an existing axis (numpy.concatenate; PyTorch's ``cat``).

    ``axis`` or ``dim`` (PyTorch's name), default 0. Parameters of a model mix in: each is
    bound to the graph of the first Tensor.

    >>> from asgrad.tensor import Graph, concat
    >>> g = Graph()
    >>> a, b = g.input("a", (2, 3)), g.input("b", (1, 3))
    >>> concat([a, b], axis=0).shape
    (3, 3)
    """
    if not tensors:
        raise GraphError("concat needs at least one tensor")
    items = _same_graph("concat", tensors)
    if len(items) == 1:
        return items[0]
    given = axis_arg("concat", axis, dim, 0)
    given = checked("concat", normalize_axis, given, items[0].ndim)
    return items[0].graph.apply("concat", tuple(items), {"axis": given})


concatenate = concat
"""The same as [`concat`][asgrad.tensor.concat] (numpy's name).

>>> from asgrad.tensor import Graph, concatenate
>>> g = Graph()
>>> a, b = g.input("a", (2, 3)), g.input("b", (2, 3))
>>> concatenate([a, b], axis=1).shape
(2, 6)
"""

cat = concat
"""The same as [`concat`][asgrad.tensor.concat] (PyTorch's name).

>>> from asgrad.tensor import Graph, cat
>>> g = Graph()
>>> a, b = g.input("a", (2, 3)), g.input("b", (2, 3))
>>> cat([a, b], dim=0).shape
(4, 3)
"""


def stack(tensors: Sequence[Tensor], axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Join tensors along a new axis (numpy.stack), ``axis`` or ``dim``, default 0.

    >>> from asgrad.tensor import Graph, stack
    >>> g = Graph()
    >>> a, b = g.input("a", (2, 3)), g.input("b", (2, 3))
    >>> stack([a, b], dim=1).shape
    (2, 2, 3)
    """
    if not tensors:
        raise GraphError("stack needs at least one tensor")
    items = _same_graph("stack", tensors)
    given = checked("stack", normalize_axis, axis_arg("stack", axis, dim, 0), items[0].ndim + 1)
    return concat([t.expand_dims(given) for t in items], axis=given)


def _same_graph(op: str, tensors: Sequence[object]) -> list[Tensor]:
    """``tensors`` as Tensors of one graph: a Parameter (a Variable) is bound to the graph
    of the first Tensor; with no Tensor among them, a typed error naming ``graph.bind``."""
    like = next((t for t in tensors if isinstance(t, Tensor)), None)
    if like is None:
        raise ArgumentTypeError(
            f"{op}: no Tensor among the items, so no graph to build in; bind a parameter"
            " first: graph.bind(p) (or use it with a Tensor of the graph)"
        )
    return [like._lift(t) for t in tensors]


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with broadcast batch dimensions (numpy.matmul).

    >>> from asgrad.tensor import Graph, evaluate, matmul
    >>> g = Graph()
    >>> matmul(g.input("a", (2, 3)), g.input("b", (3, 4))).shape
    (2, 4)
    """
    return a.matmul(b)


def one_hot(indices: Tensor, depth: int, dtype: str = "float32") -> Tensor:
    """One-hot encoding of integer ``indices`` along a new last axis.

    >>> from asgrad.tensor import Graph, evaluate, one_hot
    >>> g = Graph()
    >>> i = g.input("i", (2,), "int64")
    >>> evaluate(one_hot(i, 3), {"i": [2, 0]})[0].tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    return indices.one_hot(depth, dtype)


def size_ratio(a: Tensor, b: Tensor) -> Tensor:
    """``a.size / b.size`` as a 0-d tensor of ``a``'s (float) dtype, read when the graph runs.

    A count that follows the fed sizes (an input's leading sizes may change per run),
    e.g. the number of values a per-channel mean was taken over.
    """
    return a.graph.apply("size_ratio", (a, b), {})
