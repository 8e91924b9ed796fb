"""The symbolic [`Tensor`][asgrad.tensor.Tensor]: a handle on a graph node with numpy-like
methods."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, overload

import numpy as np

from asgrad.tensor.api.dims import axis_arg, keepdims_arg
from asgrad.tensor.api.located import checked, locate
from asgrad.tensor.api.methods_math import MathMethods, correction_attr
from asgrad.tensor.api.methods_nn import NNMethods
from asgrad.tensor.api.methods_shape import ShapeMethods
from asgrad.tensor.api.methods_torch import Size, TorchMethods
from asgrad.tensor.api.numpy_interop import NumpyInterop
from asgrad.tensor.errors import (
    ArgumentTypeError,
    GraphError,
    ShapeError,
)
from asgrad.tensor.ir.common import (
    axis_tuple,
    check_basic_index,
    exact_scalar,
    expand_ellipsis,
    float_arg,
    int_arg,
    normalize_axes,
    normalize_axis,
    shape_arg,
)
from asgrad.tensor.ir.free_sizes import free_reshape_target
from asgrad.tensor.ir.graph import Variable
from asgrad.tensor.ir.registry import Shape
from asgrad.tensor.ir.variables import TENSOR_NAMES

if TYPE_CHECKING:
    from asgrad.tensor.ir.graph import Graph, Node

AxisArg = int | Sequence[int] | None


class ValuesIndices(NamedTuple):
    """What ``x.max(dim=...)``/``x.min(dim=...)`` give (as ``torch.return_types.max``):
    the values and the ``int64`` indices along ``dim``; unpacks as ``values, indices``.

    >>> from asgrad.tensor import Graph
    >>> values, indices = Graph().input("x", (2, 3)).max(dim=1, keepdim=True)
    >>> values.shape, indices.shape
    ((2, 1), (2, 1))
    """

    values: Tensor
    indices: Tensor


class Tensor(NumpyInterop, MathMethods, ShapeMethods, NNMethods, TorchMethods):
    """A symbolic value of a [`Graph`][asgrad.tensor.Graph].

    Operators and methods append nodes to the graph; nothing is computed until the
    graph is compiled and run. Shapes and dtypes are known at once.

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (2, 3))
    >>> (x.exp() + 1.0).mean(axis=0).shape
    (3,)
    """

    __slots__ = ("node",)
    __array_priority__ = 1000  # so ndarray <op> Tensor defers to Tensor's reflected op

    def __init__(self, node: Node) -> None:
        self.node = node
        """The graph node that computes this value.

        >>> from asgrad.tensor import Graph
        >>> Graph().input("x", (2,)).node.op
        'input'
        """

    # -- static facts -------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        """The [`Graph`][asgrad.tensor.Graph] that holds this value.

        >>> from asgrad.tensor import Graph
        >>> g = Graph()
        >>> g.input("x", (2,)).graph is g
        True
        """
        return self.node.graph

    @property
    def shape(self) -> Shape:
        """The static shape: a tuple of ints, known as the graph is built.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.shape
        (2, 3)
        """
        return self.node.type.shape

    @property
    def dtype(self) -> str:
        """The element type's name: ``"float16"``, ``"float32"``, ``"float64"``, ``"int32"``,
        ``"int64"`` or ``"bool"``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.dtype, (x > 0).dtype
        ('float32', 'bool')
        """
        return self.node.type.dtype

    @property
    def ndim(self) -> int:
        """The number of axes (``len(x.shape)``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.ndim
        2
        """
        return len(self.node.type.shape)

    @property
    def size(self) -> Size:
        """The number of elements (numpy's ``size``), also callable as PyTorch's
        ``x.size()`` (the shape) and ``x.size(dim)`` (one axis' length).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.size, x.size(), x.size(1)
        (6, (2, 3), 3)
        """
        return Size(self.node.type.shape)

    @property
    def name(self) -> str:
        """The name of this value's node (an input's or a parameter's given name).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.name
        'x'
        """
        return self.node.name

    @property
    def op(self) -> str:
        """The name of the op that computes this value.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.op, (x + 1.0).op
        ('input', 'add')
        """
        return self.node.op

    def __repr__(self) -> str:
        return f"Tensor({self.node.name}: {self.node.op} -> {self.node.type})"

    def __len__(self) -> int:
        if not self.shape:
            raise ShapeError("len() of a scalar tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        raise GraphError(
            "a symbolic Tensor has no truth value until the graph runs; use"
            " asgrad.tensor.where(cond, a, b) for data-dependent choices"
        )

    __hash__ = object.__hash__

    # -- helpers --------------------------------------------------------------------------
    def _apply(self, op: str, *others: Tensor, **attrs: Any) -> Tensor:
        return self.node.graph.apply(op, (self, *others), attrs)

    def _lift(self, other: object) -> Tensor:
        """Turn a Python or numpy value into a constant of this tensor's dtype."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, Variable):
            return self.graph.bind(other)
        if isinstance(other, bool | int | float | np.number):
            return self.graph.constant(
                checked("constant", exact_scalar, other, self.dtype), self.dtype
            )
        if isinstance(other, np.ndarray):
            same_kind = np.dtype(self.dtype).kind == other.dtype.kind
            return self.graph.constant(other, self.dtype if same_kind else None)
        raise ArgumentTypeError(f"cannot combine a Tensor with {type(other).__name__}")

    def _binary(self, op: str, other: object) -> Tensor:
        return self._apply(op, self._lift(other))

    def _rbinary(self, op: str, other: object) -> Tensor:
        return self.graph.apply(op, (self._lift(other), self), {})

    # -- arithmetic -------------------------------------------------------------------------
    def __add__(self, other: object) -> Tensor:
        return self._binary("add", other)

    def __radd__(self, other: object) -> Tensor:
        return self._rbinary("add", other)

    def __sub__(self, other: object) -> Tensor:
        return self._binary("sub", other)

    def __rsub__(self, other: object) -> Tensor:
        return self._rbinary("sub", other)

    def __mul__(self, other: object) -> Tensor:
        return self._binary("mul", other)

    def __rmul__(self, other: object) -> Tensor:
        return self._rbinary("mul", other)

    def __truediv__(self, other: object) -> Tensor:
        return self._binary("div", other)

    def __rtruediv__(self, other: object) -> Tensor:
        return self._rbinary("div", other)

    def __pow__(self, other: object) -> Tensor:
        return self._binary("pow", other)

    def __rpow__(self, other: object) -> Tensor:
        return self._rbinary("pow", other)

    def __matmul__(self, other: object) -> Tensor:
        return self.matmul(self._lift(other))

    def __rmatmul__(self, other: object) -> Tensor:
        return self._lift(other).matmul(self)

    def __neg__(self) -> Tensor:
        return self._apply("neg")

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self._apply("abs")

    # -- comparisons -------------------------------------------------------------------------
    def __lt__(self, other: object) -> Tensor:
        return self._binary("less", other)

    def __le__(self, other: object) -> Tensor:
        return self._binary("less_equal", other)

    def __gt__(self, other: object) -> Tensor:
        return self._binary("greater", other)

    def __ge__(self, other: object) -> Tensor:
        return self._binary("greater_equal", other)

    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]  # elementwise, as numpy
        return self._binary("equal", other)

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]  # elementwise, as numpy
        return self._binary("not_equal", other)

    # -- unary math and activations ----------------------------------------------------------
    def exp(self) -> Tensor:
        """``e ** x`` elementwise.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.exp(), {"x": [0.0, 1.0, 2.0]})[0].tolist()
        [1.0, 2.71828..., 7.38905...]
        """
        return self._apply("exp")

    def log(self) -> Tensor:
        """The natural logarithm elementwise (``-inf`` at 0, NaN below).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.log(), {"x": [1.0, 2.0, 4.0]})[0].tolist()
        [0.0, 0.69314..., 1.38629...]
        """
        return self._apply("log")

    def sqrt(self) -> Tensor:
        """The square root elementwise (NaN below 0).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.sqrt(), {"x": [0.0, 4.0, 9.0]})[0].tolist()
        [0.0, 2.0, 3.0]

        """
        return self._apply("sqrt")

    def abs(self) -> Tensor:
        """``|x|`` elementwise (also ``abs(x)``).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.abs(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [1.0, 0.0, 2.0]

        """
        return self._apply("abs")

    def sign(self) -> Tensor:
        """-1, 0 or 1 elementwise, by the sign of x (zero gradient).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.sign(), {"x": [-3.0, 0.0, 2.0]})[0].tolist()
        [-1.0, 0.0, 1.0]

        """
        return self._apply("sign")

    def sin(self) -> Tensor:
        """The sine elementwise (radians).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.sin(), {"x": [0.0, 1.0, 2.0]})[0].tolist()
        [0.0, 0.84147..., 0.90929...]
        """
        return self._apply("sin")

    def cos(self) -> Tensor:
        """The cosine elementwise (radians).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.cos(), {"x": [0.0, 1.0, 2.0]})[0].tolist()
        [1.0, 0.54030..., -0.41614...]
        """
        return self._apply("cos")

    def tanh(self) -> Tensor:
        """The hyperbolic tangent elementwise.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.tanh(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [-0.76159..., 0.0, 0.76159...]
        """
        return self._apply("tanh")

    def sigmoid(self) -> Tensor:
        """``1 / (1 + exp(-x))`` elementwise.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.sigmoid(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [0.26894..., 0.5, 0.73105...]
        """
        return self._apply("sigmoid")

    def erf(self) -> Tensor:
        """The Gauss error function elementwise.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.erf(), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
        [-0.84270..., 0.0, 0.84270...]
        """
        return self._apply("erf")

    # ``min``/``max`` shadow builtins on purpose: they are PyTorch's argument names.
    def clamp(self, min: float | None = None, max: float | None = None) -> Tensor:
        """x limited to ``[min, max]`` elementwise; either bound may be ``None`` (none).

        Args:
            min: The lower bound, or ``None``.
            max: The upper bound, or ``None``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.clamp(0.0, 1.0), {"x": [-1.0, 0.5, 2.0]})[0].tolist()
        [0.0, 0.5, 1.0]

        """
        return self._apply(
            "clamp",
            min=None if min is None else checked("clamp", float_arg, min, "min"),
            max=None if max is None else checked("clamp", float_arg, max, "max"),
        )

    clip = clamp
    """The same as [`clamp`][asgrad.tensor.Tensor.clamp] (numpy's name).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(x.clip(0.0, 1.0), {"x": [-1.0, 0.5, 2.0]})[0].tolist()
    [0.0, 0.5, 1.0]
    """

    def square(self) -> Tensor:
        """``x * x`` elementwise.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.square(), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [1.0, 0.0, 4.0]

        """
        return self * self

    def maximum(self, other: object) -> Tensor:
        """The larger of x and ``other`` elementwise (broadcasting).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.maximum(0.0), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [0.0, 0.0, 2.0]

        """
        return self._binary("maximum", other)

    def minimum(self, other: object) -> Tensor:
        """The smaller of x and ``other`` elementwise (broadcasting).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.minimum(0.0), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
        [-1.0, 0.0, 0.0]

        """
        return self._binary("minimum", other)

    def detach(self) -> Tensor:
        """This value, through which no gradient flows (``stop_gradient``).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.detach() * 2.0, {"x": [1.0, 2.0, 3.0]})[0].tolist()
        [2.0, 4.0, 6.0]
        """
        return self._apply("stop_gradient")

    def cast(self, dtype: str) -> Tensor:
        """x converted to ``dtype`` (x itself when it has that dtype already).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,))
        >>> evaluate(x.cast("int64"), {"x": [-1.5, 0.0, 2.7]})[0].tolist()
        [-1, 0, 2]

        """
        from asgrad.tensor.ir.dtypes import as_dtype

        dt = as_dtype(dtype)
        return self if dt == self.dtype else self._apply("cast", dtype=dt)

    astype = cast
    """The same as [`cast`][asgrad.tensor.Tensor.cast] (numpy's name).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> evaluate(x.astype("int32"), {"x": [-1.5, 0.0, 2.7]})[0].tolist()
    [-1, 0, 2]
    """

    # -- reductions ------------------------------------------------------------------------------
    def _reduce(
        self, op: str, axis: AxisArg, keepdims: bool | None, dim: AxisArg, keepdim: bool | None
    ) -> Tensor:
        axes = checked(op, normalize_axes, axis_arg(op, axis, dim), self.ndim)
        return self._apply(op, axis=axes, keepdims=keepdims_arg(op, keepdims, keepdim))

    def sum(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The sum over ``axis`` (every axis when None; ``dim``/``keepdim``: PyTorch's names).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.sum(1), feed)[0].tolist()
        [2.0, 3.0]
        >>> x.sum().shape, x.sum(0, keepdims=True).shape
        ((), (1, 3))
        """
        return self._reduce("sum", axis, keepdims, dim, keepdim)

    def mean(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The mean over ``axis`` (every axis when None; ``dim``/``keepdim``: PyTorch's names).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.mean(0), feed)[0].tolist()
        [2.5, 1.5, -1.5]
        """
        return self._reduce("mean", axis, keepdims, dim, keepdim)

    @overload
    def max(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: None = None,
        keepdim: bool | None = None,
    ) -> Tensor: ...
    @overload
    def max(
        self,
        axis: None = None,
        keepdims: None = None,
        *,
        dim: int,
        keepdim: bool | None = None,
    ) -> ValuesIndices: ...
    def max(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor | ValuesIndices:
        """The largest value over ``axis`` (every axis when None), as ``numpy.max``; with
        PyTorch's ``dim=`` keyword, PyTorch's ``(values, indices)`` pair
        ([`ValuesIndices`][asgrad.tensor.ValuesIndices]; the index of the first of ties).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.max(1), feed)[0].tolist()
        [3.0, 5.0]
        >>> values, indices = x.max(dim=1)
        >>> [a.tolist() for a in evaluate([values, indices], feed)]
        [[3.0, 5.0], [2, 1]]
        """
        return self._extreme("max", axis, keepdims, dim, keepdim)

    @overload
    def min(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: None = None,
        keepdim: bool | None = None,
    ) -> Tensor: ...
    @overload
    def min(
        self,
        axis: None = None,
        keepdims: None = None,
        *,
        dim: int,
        keepdim: bool | None = None,
    ) -> ValuesIndices: ...
    def min(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor | ValuesIndices:
        """The smallest value over ``axis`` (every axis when None), as ``numpy.min``; with
        PyTorch's ``dim=`` keyword, PyTorch's ``(values, indices)`` pair
        ([`ValuesIndices`][asgrad.tensor.ValuesIndices]; the index of the first of ties).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.min(1), feed)[0].tolist()
        [-2.0, -6.0]
        >>> evaluate(x.min(dim=0).indices, feed)[0].tolist()
        [0, 0, 1]
        """
        return self._extreme("min", axis, keepdims, dim, keepdim)

    def _extreme(
        self, op: str, axis: AxisArg, keepdims: bool | None, dim: AxisArg, keepdim: bool | None
    ) -> Tensor | ValuesIndices:
        """``max``/``min``: numpy's values, or PyTorch's pair when ``dim`` names the axis."""
        values = self._reduce(op, axis, keepdims, dim, keepdim)
        if dim is None:
            return values
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise locate(
                op,
                ArgumentTypeError(
                    f"dim must be one int (PyTorch's max/min over dim give values and"
                    f" indices); got {dim!r}; for values over several axes use amax/amin"
                ),
            )
        arg = self.argmax if op == "max" else self.argmin
        return ValuesIndices(values, arg(dim=dim, keepdim=keepdim))

    def var(
        self,
        axis: AxisArg = None,
        keepdims: bool | None = None,
        *,
        correction: float | None = None,
        ddof: float | None = None,
        dim: AxisArg = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """Variance dividing by ``n - correction`` (``ddof``: numpy's name; default 0, as
        ``numpy.var``; PyTorch's default is 1).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.var(1, correction=1).shape
        (2,)
        """
        attrs = correction_attr(correction, ddof)
        return self._reduce_math("var", axis, keepdims, dim, keepdim, attrs)

    def argmax(
        self,
        axis: int | None = None,
        keepdims: bool | None = None,
        *,
        dim: int | None = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The index of the max along ``axis`` (default the last; the first of ties).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.argmax(), feed)[0].tolist()
        [2, 1]
        >>> x.argmax(0, keepdims=True).shape
        (1, 3)
        """
        axis = checked("argmax", normalize_axis, axis_arg("argmax", axis, dim, -1), self.ndim)
        return self._apply("argmax", axis=axis, keepdims=keepdims_arg("argmax", keepdims, keepdim))

    # -- shape ------------------------------------------------------------------------------------
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """``x`` with the same values in ``shape`` (one size may be -1: the rest).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.reshape(3, 2).shape
        (3, 2)
        >>> x.reshape((-1,)).shape
        (6,)
        """
        target = checked("reshape", shape_arg, shape, "shape")
        return self._apply("reshape", shape=free_reshape_target(self.node, target))

    def flatten(
        self,
        start_axis: int | None = None,
        end_axis: int | None = None,
        *,
        start_dim: int | None = None,
        end_dim: int | None = None,
    ) -> Tensor:
        """Axes ``start_axis`` to ``end_axis`` (inclusive; default: all) merged into one,
        as ``torch.flatten`` (``start_dim``/``end_dim``: PyTorch's names).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.flatten().shape
        (6,)
        >>> x.unsqueeze(1).flatten(1).shape
        (2, 3)
        """
        first = axis_arg("flatten", start_axis, start_dim, 0)
        last = axis_arg("flatten", end_axis, end_dim, -1)
        if not self.ndim:
            return self.reshape(1)
        start = checked("flatten", normalize_axis, first, self.ndim)
        end = checked("flatten", normalize_axis, last, self.ndim)
        if end < start:
            raise ShapeError(f"flatten: end axis {last} comes before start axis {first}")
        if end < self.ndim - 1:
            merged = math.prod(self.shape[start : end + 1])
            if start == 0:
                return self.reshape(-1, *self.shape[end + 1 :])
            return self.reshape(-1, *self.shape[1:start], merged, *self.shape[end + 1 :])
        # The -1 goes on the leading (batch) axis, so that the reshape does not bake
        # in the batch size declared at build time (a graph built for batch 3 runs
        # on batch 7).
        inner = math.prod(self.shape[start:])
        if start >= 1 and inner > 0:
            return self.reshape(-1, *self.shape[1:start], inner)
        return self.reshape(*self.shape[:start], -1)

    def transpose(self, *axes: int | Sequence[int]) -> Tensor:
        """The axes permuted by ``axes`` (default: reversed), as ``numpy.transpose``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3, 4))
        >>> x.transpose().shape, x.transpose(0, 2, 1).shape
        ((4, 3, 2), (2, 4, 3))
        """
        given = checked("transpose", shape_arg, axes, "axes") if axes else ()
        perm = tuple(checked("transpose", normalize_axis, a, self.ndim) for a in given)
        perm = perm or tuple(reversed(range(self.ndim)))
        if perm == tuple(range(self.ndim)):
            return self
        return self._apply("transpose", axes=perm)

    permute = transpose
    """The same as [`transpose`][asgrad.tensor.Tensor.transpose] (PyTorch's name).

    >>> from asgrad.tensor import Graph
    >>> Graph().input("x", (2, 3, 4)).permute(2, 0, 1).shape
    (4, 2, 3)
    """

    @property
    def T(self) -> Tensor:  # noqa: N802  # numpy's name
        """The axes reversed (``x.transpose()``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.T.shape
        (3, 2)
        """
        return self.transpose()

    def swapaxes(self, a: int, b: int) -> Tensor:
        """Axes ``a`` and ``b`` exchanged.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.swapaxes(0, 1).shape
        (3, 2)
        """
        perm = list(range(self.ndim))
        a, b = (checked("swapaxes", normalize_axis, i, self.ndim) for i in (a, b))
        perm[a], perm[b] = perm[b], perm[a]
        return self.transpose(*perm)

    def broadcast_to(self, *shape: int | Sequence[int]) -> Tensor:
        """x repeated along new or length-1 axes to ``shape`` (numpy's broadcasting).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (3,))
        >>> x.broadcast_to(2, 3).shape
        (2, 3)
        """
        # Kept at the declared shape too: fed a larger batch, the target still holds.
        return self._apply("broadcast_to", shape=checked("broadcast_to", shape_arg, shape))

    def expand_dims(
        self, axis: int | Sequence[int] | None = None, *, dim: int | Sequence[int] | None = None
    ) -> Tensor:
        """A new axis of size 1 at ``axis`` (or PyTorch's ``dim``; several axes at once).

        >>> from asgrad.tensor import Graph
        >>> Graph().input("x", (2, 3)).expand_dims(0).shape
        (1, 2, 3)
        """
        given = axis_arg("expand_dims", axis, dim)
        if given is None:
            raise ArgumentTypeError("expand_dims: give the new axis (axis=, or dim=)")
        return self._apply("expand_dims", axis=checked("expand_dims", axis_tuple, given))

    unsqueeze = expand_dims
    """The same as [`expand_dims`][asgrad.tensor.Tensor.expand_dims] (PyTorch's name).

    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2, 3))
    >>> x.unsqueeze(1).shape
    (2, 1, 3)
    """

    def squeeze(self, axis: AxisArg = None, *, dim: AxisArg = None) -> Tensor:
        """``x`` without its axes of size 1 (all of them, or those of ``axis``/``dim``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.unsqueeze(0).squeeze().shape
        (2, 3)
        >>> x.unsqueeze(0).squeeze(0).shape
        (2, 3)
        """
        axis = axis_arg("squeeze", axis, dim)
        if axis is None:
            axes = tuple(i for i, d in enumerate(self.shape) if d == 1)
        else:
            axes = checked("squeeze", normalize_axes, axis, self.ndim)
        return self._apply("squeeze", axis=axes) if axes else self

    def matmul(self, other: object) -> Tensor:
        """The matrix product ``x @ other`` (numpy's rules: a 1-D operand is a vector,
        leading axes broadcast).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> w = x.graph.input("w", (3, 4), free=())
        >>> x.matmul(w).shape
        (2, 4)
        >>> x.matmul(x.graph.input("v", (3,), free=())).shape
        (2,)
        """
        a, b = self, self._lift(other)
        squeeze: list[int] = []
        if a.ndim == 1:
            a = a.expand_dims(0)
            squeeze.append(-2)
        if b.ndim == 1:
            b = b.expand_dims(-1) if b.ndim else b
            b = b.reshape(-1, 1)
            squeeze.append(-1)
        out = a._apply("matmul", b)
        if squeeze:
            out = out.squeeze(tuple(out.ndim + s for s in squeeze))
        return out

    def gather(
        self,
        indices: Tensor | int | None = None,
        axis: int | Tensor = 0,
        *,
        dim: int | None = None,
        index: Tensor | None = None,
    ) -> Tensor:
        """``numpy.take(x, indices, axis)``; called as PyTorch's ``x.gather(dim, index)``
        (or ``gather(dim=, index=)``), [`take_along_axis`][asgrad.tensor.Tensor.take_along_axis].

        >>> from asgrad.tensor import Graph, evaluate
        >>> g = Graph()
        >>> x = g.input("x", (2, 3))
        >>> i = g.input("i", (2, 1), "int64")
        >>> feed = {"x": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "i": [[2], [0]]}
        >>> evaluate(x.gather(dim=1, index=i), feed)[0].tolist()
        [[3.0], [4.0]]
        """
        if dim is not None or index is not None:
            if dim is None or index is None or indices is not None:
                raise ArgumentTypeError("gather: give dim= and index= together (PyTorch's form)")
            return self.take_along_axis(index, dim)
        if isinstance(indices, int | np.integer) and isinstance(axis, Tensor):
            return self.take_along_axis(axis, int(indices))
        if not isinstance(indices, Tensor) or isinstance(axis, Tensor):
            raise ArgumentTypeError("gather takes (indices: Tensor, axis: int) or (dim, index)")
        axis = checked("gather", normalize_axis, axis, self.ndim)
        return self._apply("gather", indices, axis=axis)

    take = gather
    """The same as [`gather`][asgrad.tensor.Tensor.gather] (numpy's name).

    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (3,))
    >>> i = x.graph.constant([1, 1])
    >>> evaluate(x.take(i), {"x": [1.0, 2.0, 3.0]})[0].tolist()
    [2.0, 2.0]
    """

    def one_hot(self, depth: int, dtype: str = "float32") -> Tensor:
        """Integer labels as one-hot vectors of length ``depth`` (a new last axis).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (3,), "int64")
        >>> evaluate(x.one_hot(3), {"x": [0, 2, 1]})[0].tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]

        """
        depth = checked("one_hot", int_arg, depth, "depth")
        return self._apply("one_hot", depth=depth, dtype=dtype)

    def __getitem__(self, index: object) -> Tensor:
        items = index if isinstance(index, tuple) else (index,)
        self._check_slice_bounds(items)
        if any(isinstance(item, Tensor | list | np.ndarray) for item in items):
            return self._advanced_index(items)
        items = checked("index", expand_ellipsis, items, self.ndim)
        basic = tuple(item for item in items if item is not None)
        checked("index", check_basic_index, basic, self.shape)
        for item in basic:
            if not isinstance(item, int | slice | np.integer):
                raise ArgumentTypeError(
                    f"unsupported index {item!r}; use ints, slices, None, ... or a Tensor"
                )
        basic = tuple(int(i) if isinstance(i, np.integer) else i for i in basic)
        out = self
        if any(not (isinstance(i, slice) and i == slice(None)) for i in basic):
            while basic and basic[-1] == slice(None):
                basic = basic[:-1]
            out = self._apply("slice", index=basic)
        new_axes: list[int] = []
        pos = 0
        for item in items:
            if item is None:
                new_axes.append(pos)
                pos += 1
            elif isinstance(item, slice):
                pos += 1
        return out.expand_dims(tuple(new_axes)) if new_axes else out


TENSOR_NAMES.update(name for name in dir(Tensor) if not name.startswith("_"))
