"""Tensor methods under the names a PyTorch user types (``size(dim)``, ``numel``, ``pow``,
``mm``, ``norm``, ``log1p``, ``float()``, ``eq``, ``contiguous``...), and typed errors for
the define-by-run habits that have no meaning on a symbolic tensor (``backward``,
``item``, ``grad``, ``data``, ``cuda``).

>>> from asgrad.tensor import Graph
>>> x = Graph().input("x", (2, 3))
>>> x.size(), x.size(1), x.size, x.numel()
((2, 3), 3, 6, 6)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NoReturn, cast, overload

from asgrad.tensor.api.dims import axis_arg, keepdims_arg
from asgrad.tensor.api.located import checked
from asgrad.tensor.api.methods_base import TensorBase
from asgrad.tensor.api.methods_shape import ints
from asgrad.tensor.errors import ArgumentError, DefineByRunError, ShapeError
from asgrad.tensor.ir.common import float_arg, normalize_axis

if TYPE_CHECKING:
    from collections.abc import Sequence

    from asgrad.tensor.api.tensor import Tensor

__all__ = ["Size", "TorchMethods"]

_COMPILE = (
    "asgrad builds the gradients and the update into one program: step = opt.compile(loss)"
    " once, then step(x=..., y=...) per batch (asgrad.autograd.grad(loss, params) gives"
    " gradients as tensors of the graph)"
)


class Size(int):
    """numpy's element count (``x.size``), which PyTorch's ``x.size()`` (the shape) and
    ``x.size(dim)`` (one axis' length) may also call.

    >>> s = Size((2, 3))
    >>> s + 0, s(), s(-1)
    (6, (2, 3), 3)
    """

    _shape: tuple[int, ...]

    def __new__(cls, shape: Sequence[int]) -> Size:
        self = super().__new__(cls, math.prod(shape))
        self._shape = tuple(shape)
        return self

    @overload
    def __call__(self) -> tuple[int, ...]: ...
    @overload
    def __call__(self, dim: int) -> int: ...
    def __call__(self, dim: int | None = None) -> tuple[int, ...] | int:
        if dim is None:
            return self._shape
        if not self._shape:
            raise ShapeError(f"size({dim}) of a scalar tensor (it has no axes)")
        return self._shape[normalize_axis(dim, len(self._shape))]

    def __reduce__(self) -> tuple[type[Size], tuple[tuple[int, ...]]]:
        return (Size, (self._shape,))


class TorchMethods(TensorBase):
    """PyTorch's spellings of tensor methods, each the asgrad op it names."""

    __slots__ = ()

    def _t(self) -> Tensor:
        return cast("Tensor", self)

    def numel(self) -> int:
        """The number of elements (``x.size`` as numpy spells it).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.numel()
        6
        """
        return math.prod(self.shape)

    def dim(self) -> int:
        """The number of axes (``x.ndim``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.dim()
        2
        """
        return len(self.shape)

    def pow(self, exponent: object) -> Tensor:
        """``x ** exponent``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.pow(2), feed)[0].tolist()
        [[1.0, 4.0, 9.0], [16.0, 25.0, 36.0]]
        """
        return self._binary("pow", exponent)

    def mm(self, other: object) -> Tensor:
        """The product of two matrices (``x @ other``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> w = x.graph.input("w", (3, 4), free=())
        >>> x.mm(w).shape
        (2, 4)
        """
        return self._t().matmul(self._lift(other))

    def log1p(self) -> Tensor:
        """``log(1 + x)``, exact near 0 (Goldberg's form ``x * log(u) / (u - 1)``, ``u = 1 + x``),
        with a finite gradient everywhere above -1.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2,))
        >>> evaluate(x.log1p(), {"x": [0.0, 1e-8]})[0].tolist()
        [0.0, 9.99999993922529e-09]
        """
        x = self._t()
        u = x + 1.0
        d = u - 1.0
        exact = d == 0.0
        safe = x.graph.apply("where", (exact, x._lift(1.0), d), {})
        ratio = x * u.log() / safe
        return x.graph.apply("where", (exact, x, ratio), {})

    def norm(
        self,
        p: float = 2,
        axis: int | Sequence[int] | None = None,
        keepdims: bool | None = None,
        *,
        dim: int | Sequence[int] | None = None,
        keepdim: bool | None = None,
    ) -> Tensor:
        """The vector ``p``-norm over ``axis`` (every axis when None), as
        ``torch.Tensor.norm`` (p = inf: the largest ``|x|``); the gradient is 0 where
        every value is 0, as PyTorch's. [`vector_norm`][asgrad.tensor.linalg.vector_norm]
        takes every ``ord``.

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 2))
        >>> feed = {"x": [[3.0, 4.0], [0.0, 0.0]]}
        >>> evaluate(x.norm(dim=1), feed)[0].tolist()
        [5.0, 0.0]
        >>> evaluate(x.norm(1), feed)[0].tolist()
        7.0
        """
        x = self._t()
        given = axis_arg("norm", axis, dim)
        keep = keepdims_arg("norm", keepdims, keepdim)
        p = checked("norm", float_arg, p, "p")
        if not p > 0:
            raise ArgumentError(f"norm: p must be a number > 0 or inf, got {p!r}")
        a = x.abs()
        if p == math.inf:
            return a.max(given, keep)
        if p == 1:
            return a.sum(given, keep)
        total = (x * x if p == 2 else a ** float(p)).sum(given, keep)
        zero = total == 0.0
        safe = x.graph.apply("where", (zero, total._lift(1.0), total), {})
        root = safe.sqrt() if p == 2 else safe ** (1.0 / float(p))
        return x.graph.apply("where", (zero, root._lift(0.0), root), {})

    def contiguous(self) -> Tensor:
        """``x`` itself: graph values have no memory layout to make contiguous.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.contiguous() is x
        True
        """
        return self._t()

    def clone(self) -> Tensor:
        """``x`` itself: graph values are never overwritten, so a copy is the value.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.clone() is x
        True
        """
        return self._t()

    def type_as(self, other: Tensor) -> Tensor:
        """``x`` cast to ``other``'s dtype.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> i = x.graph.input("i", (2,), "int64")
        >>> x.type_as(i).dtype
        'int64'
        """
        return self._t().cast(other.dtype)

    def view_as(self, other: Tensor) -> Tensor:
        """``x`` reshaped to ``other``'s shape.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> y = x.graph.input("y", (3, 2))
        >>> x.view_as(y).shape
        (3, 2)
        """
        return self._t().reshape(other.shape)

    reshape_as = view_as
    """The same as [`view_as`][asgrad.tensor.Tensor.view_as] (PyTorch's name).

    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2, 3))
    >>> y = x.graph.input("y", (3, 2))
    >>> x.reshape_as(y).shape
    (3, 2)
    """

    def expand(self, *sizes: int | Sequence[int]) -> Tensor:
        """``x`` broadcast to ``sizes``; -1 keeps an axis' size (``torch.Tensor.expand``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 1))
        >>> x.expand(2, 3).shape
        (2, 3)
        >>> x.expand(4, -1, 3).shape
        (4, 2, 3)
        """
        wanted = ints("expand", sizes[0] if len(sizes) == 1 else sizes, "sizes")
        lead = len(wanted) - self.ndim
        if lead < 0:
            raise ShapeError(f"expand: {len(wanted)} sizes for a value of rank {self.ndim}")
        shape = [self.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(wanted)]
        return self._t().broadcast_to(tuple(shape))

    def expand_as(self, other: Tensor) -> Tensor:
        """``x`` broadcast to ``other``'s shape.

        >>> from asgrad.tensor import Graph
        >>> g = Graph()
        >>> x, y = g.input("x", (2, 1)), g.input("y", (2, 3))
        >>> x.expand_as(y).shape
        (2, 3)
        """
        return self._t().broadcast_to(other.shape)

    def to(self, dtype: str | Tensor) -> Tensor:
        """``x`` cast to ``dtype`` (a name, or a Tensor whose dtype to take); a device
        (``"cuda"``, ``"cpu"``) is refused: programs are placed when compiled.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.to("float64").dtype
        'float64'
        """
        if not isinstance(dtype, str):
            return self.type_as(dtype)
        if dtype.split(":")[0] in ("cuda", "cpu", "gpu", "mps"):
            raise DefineByRunError(
                f"Tensor.to({dtype!r}): tensors have no device; the program is placed when"
                " compiled: opt.compile(loss, backend='gpu') or compile(outputs, backend='gpu')"
            )
        return self._t().cast(dtype)

    # -- comparisons under PyTorch's names ------------------------------------------------------
    def eq(self, other: object) -> Tensor:
        """``x == other`` (elementwise).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.eq(3.0), feed)[0].tolist()
        [[False, False, True], [False, False, False]]
        """
        return self._binary("equal", other)

    def ne(self, other: object) -> Tensor:
        """``x != other`` (elementwise).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.ne(3.0), feed)[0].tolist()
        [[True, True, False], [True, True, True]]
        """
        return self._binary("not_equal", other)

    def lt(self, other: object) -> Tensor:
        """``x < other`` (elementwise).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.lt(3.0), feed)[0].tolist()
        [[True, True, False], [False, False, True]]
        """
        return self._binary("less", other)

    def le(self, other: object) -> Tensor:
        """``x <= other`` (elementwise).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.le(3.0), feed)[0].tolist()
        [[True, True, True], [False, False, True]]
        """
        return self._binary("less_equal", other)

    def gt(self, other: object) -> Tensor:
        """``x > other`` (elementwise).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.gt(3.0), feed)[0].tolist()
        [[False, False, False], [True, True, False]]
        """
        return self._binary("greater", other)

    def ge(self, other: object) -> Tensor:
        """``x >= other`` (elementwise).

        >>> from asgrad.tensor import Graph, evaluate
        >>> x = Graph().input("x", (2, 3))
        >>> feed = {"x": [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]}
        >>> evaluate(x.ge(3.0), feed)[0].tolist()
        [[False, False, True], [True, True, False]]
        """
        return self._binary("greater_equal", other)

    # -- define-by-run habits: what to do instead ----------------------------------------------
    def backward(self, *args: object, **kwargs: object) -> NoReturn:
        """Refused with the asgrad way: gradients are built when compiling.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.sum().backward()
        Traceback (most recent call last):
            ...
        asgrad.tensor.errors.DefineByRunError: Tensor.backward(): nothing runs while a graph is
        built; ... step = opt.compile(loss) once, then step(x=..., y=...) per batch ...
        """
        raise DefineByRunError(
            f"Tensor.backward(): nothing runs while a graph is built; {_COMPILE}"
        )

    def item(self) -> NoReturn:
        """Refused: a symbolic tensor has a value only when its graph runs.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.sum().item()
        Traceback (most recent call last):
            ...
        asgrad.tensor.errors.DefineByRunError: Tensor.item(): a symbolic Tensor has a value only
        when its graph runs; ... float(asgrad.tensor.evaluate(t, feed)[0])
        """
        raise DefineByRunError(
            "Tensor.item(): a symbolic Tensor has a value only when its graph runs;"
            " float(step(...)[0]) for a compiled step's loss, or"
            " float(asgrad.tensor.evaluate(t, feed)[0])"
        )

    def tolist(self) -> NoReturn:
        """Refused: a symbolic tensor has values only when its graph runs.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.tolist()
        Traceback (most recent call last):
            ...
        asgrad.tensor.errors.DefineByRunError: Tensor.tolist(): a symbolic Tensor has values only
        when its graph runs; asgrad.tensor.evaluate(t, feed)[0].tolist()
        """
        raise DefineByRunError(
            "Tensor.tolist(): a symbolic Tensor has values only when its graph runs;"
            " asgrad.tensor.evaluate(t, feed)[0].tolist()"
        )

    @property
    def grad(self) -> NoReturn:
        """Refused: a gradient is a tensor of the graph (``asgrad.autograd.grad``).

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.grad
        Traceback (most recent call last):
            ...
        asgrad.tensor.errors.DefineByRunError: Tensor.grad: a symbolic Tensor holds no gradient;
        asgrad.autograd.grad(loss, [t]) builds it as a tensor of the graph, ...
        """
        raise DefineByRunError(
            "Tensor.grad: a symbolic Tensor holds no gradient; asgrad.autograd.grad(loss, [t])"
            " builds it as a tensor of the graph, and opt.compile(loss) applies it"
        )

    @property
    def data(self) -> NoReturn:
        """Refused: a symbolic tensor has values only when its graph runs.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.data
        Traceback (most recent call last):
            ...
        asgrad.tensor.errors.DefineByRunError: Tensor.data: a symbolic Tensor has no array until
        its graph runs; x.detach() for a value without gradient, ...
        """
        raise DefineByRunError(
            "Tensor.data: a symbolic Tensor has no array until its graph runs;"
            " x.detach() for a value without gradient, p.value for a parameter's array"
        )

    def cuda(self, *args: object, **kwargs: object) -> NoReturn:
        """Refused: the device is chosen when compiling.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.cuda()
        Traceback (most recent call last):
            ...
        asgrad.tensor.errors.DefineByRunError: Tensor.cuda(): tensors have no device; the program
        is placed when compiled: opt.compile(loss, backend='gpu') or ...
        """
        raise DefineByRunError(
            "Tensor.cuda(): tensors have no device; the program is placed when compiled:"
            " opt.compile(loss, backend='gpu') or compile(outputs, backend='gpu')"
        )

    def cpu(self) -> Tensor:
        """``x`` itself: the device is chosen when compiling.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.cpu() is x
        True
        """
        return self._t()

    # -- casts (last: their names shadow the builtins in the class body) ------------------------
    def double(self) -> Tensor:
        """``x.cast("float64")``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.double().dtype
        'float64'
        """
        return self._t().cast("float64")

    def long(self) -> Tensor:
        """``x.cast("int64")``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.long().dtype
        'int64'
        """
        return self._t().cast("int64")

    def float(self) -> Tensor:
        """``x.cast("float32")``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.long().float().dtype
        'float32'
        """
        return self._t().cast("float32")

    def int(self) -> Tensor:
        """``x.cast("int32")``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.int().dtype
        'int32'
        """
        return self._t().cast("int32")

    def bool(self) -> Tensor:
        """``x.cast("bool")``.

        >>> from asgrad.tensor import Graph
        >>> x = Graph().input("x", (2, 3))
        >>> x.bool().dtype
        'bool'
        """
        return self._t().cast("bool")
