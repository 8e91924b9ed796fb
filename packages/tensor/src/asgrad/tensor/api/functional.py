"""numpy-style module functions over tensors: ``where``, ``maximum``, ``concat``..."""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.api.located import checked
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import GraphError
from asgrad.tensor.ir.common import normalize_axis


def _first_tensor(*values: object) -> Tensor:
    for v in values:
        if isinstance(v, Tensor):
            return v
    raise GraphError("at least one argument must be a Tensor")


def where(cond: Tensor, a: object, b: object) -> Tensor:
    """``a`` where ``cond`` is true, else ``b`` (numpy.where), broadcasting all three.

    >>> from asgrad.tensor import Graph, evaluate, where
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(where(x > 0, x, -x), {"x": [-1.0, 2.0, -3.0]})[0].tolist()
    [1.0, 2.0, 3.0]
    """
    like = _first_tensor(a, b)
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


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis (numpy.concatenate).

    >>> from asgrad.tensor import Graph, evaluate, concat
    >>> g = Graph()
    >>> a, b = g.input("a", (2, 3)), g.input("b", (1, 3))
    >>> concat([a, b]).shape
    (3, 3)
    """
    if not tensors:
        raise GraphError("concat needs at least one tensor")
    if len(tensors) == 1:
        return tensors[0]
    axis = checked("concat", normalize_axis, axis, tensors[0].ndim)
    return tensors[0].graph.apply("concat", tuple(tensors), {"axis": axis})


concatenate = concat
"""The same as [`concat`][asgrad.tensor.concat] (numpy's name).

>>> from asgrad.tensor import Graph, concatenate
>>> g = Graph()
>>> concatenate([g.input("a", (2,)), g.input("b", (3,))]).shape
(5,)
"""


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along a new axis (numpy.stack).

    >>> from asgrad.tensor import Graph, evaluate, stack
    >>> g = Graph()
    >>> a, b = g.input("a", (3,)), g.input("b", (3,))
    >>> stack([a, b]).shape, stack([a, b], axis=1).shape
    ((2, 3), (3, 2))
    """
    if not tensors:
        raise GraphError("stack needs at least one tensor")
    axis = checked("stack", normalize_axis, axis, tensors[0].ndim + 1)
    return concat([t.expand_dims(axis) for t in tensors], axis=axis)


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
