"""Graph variables: named values that persist across runs, and the stores that hold
them on a device. Re-exported by `asgrad.tensor.ir.graph`."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from asgrad.tensor.errors import ArgumentTypeError, DefineByRunError, ShapeError
from asgrad.tensor.ir.dtypes import as_dtype
from asgrad.tensor.ir.registry import Shape

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

__all__ = ["TENSOR_NAMES", "Variable", "VariableStore"]

# The public names of Tensor, filled in when asgrad.tensor.api.tensor is imported: a
# Tensor method called on a variable gets an error naming graph.bind.
TENSOR_NAMES: set[str] = set()

# PyTorch's attributes of a parameter that asgrad answers with its own way
_HABITS = {
    "grad": "asgrad keeps no gradient on a parameter; asgrad.autograd.grad(loss,"
    " [x.graph.bind(p)]) builds it in the graph, and opt.compile(loss) applies it in one"
    " program",
    "data": "the parameter's array is p.value (read it, or assign it a new array of the same"
    " shape and dtype)",
}

_BIND = (
    "bind it to the graph being built: t = x.graph.bind(p) (x a Tensor of that graph),"
    " then use t; combined with a Tensor (x + p, x @ p, cat([x, p])) it is bound for you"
)


def _with_tensor(op: Callable[[Any, Any], Any], symbol: str, reflected: bool = False) -> Any:
    """A binary operator of a variable: bound to the graph of the other operand, a Tensor;
    with no Tensor there, a typed error that names ``graph.bind``."""

    def method(self: Variable, other: object) -> Tensor:
        graph = getattr(other, "graph", None)
        if graph is None or not hasattr(other, "node"):  # not a Tensor of a graph
            raise ArgumentTypeError(
                f"{self!r} {symbol} {type(other).__name__}: a Parameter is not a Tensor"
                f" of a graph; {_BIND}"
            )
        mine = graph.bind(self)
        return op(other, mine) if reflected else op(mine, other)  # type: ignore[no-any-return]  # Tensor's operators

    return method


class Variable:
    """A named, mutable value that outlives any one graph: a model parameter.

    Graphs refer to a variable through a ``parameter`` node; a compiled program reads
    its value when it runs and writes it when the program updates it. A backend
    that keeps the value elsewhere (a GPU) registers itself as the variable's
    holder and is asked for the value when someone reads it.

    >>> v = Variable("w", np.zeros((2, 3), np.float32))
    >>> v.shape
    (2, 3)
    """

    __slots__ = ("__weakref__", "_holder", "_value", "name", "trainable")

    def __init__(self, name: str, value: np.ndarray, *, trainable: bool = True) -> None:
        self.name = name
        self._value = np.asarray(value)
        as_dtype(self._value.dtype)
        self.trainable = trainable
        self._holder: VariableStore | None = None

    @property
    def value(self) -> np.ndarray:
        """The current value (fetched from the backend holding it, if any)."""
        if self._holder is not None:
            self._value = self._holder.fetch(self)  # if it raises, the holder still has it
            self._holder = None
        return self._value

    @value.setter
    def value(self, new: np.ndarray) -> None:
        new = np.asarray(new)
        if new.shape != self._value.shape or new.dtype != self._value.dtype:
            raise ShapeError(
                f"variable {self.name!r} holds {self._value.dtype}{list(self._value.shape)};"
                f" cannot assign {new.dtype}{list(new.shape)}"
            )
        if self._holder is not None:
            self._holder.release(self)
            self._holder = None
        self._value = new

    def hold(self, holder: VariableStore) -> None:
        """Mark ``holder`` as owning the newest value (used by device backends)."""
        if self._holder is not None and self._holder is not holder:
            self._value = self._holder.fetch(self)
            self._holder.release(self)
        self._holder = holder

    @property
    def holder(self) -> VariableStore | None:
        """The backend holding the newest value, or None when it is on the host."""
        return self._holder

    def host_value(self) -> np.ndarray:
        """The value last on the host, without fetching from a holder."""
        return self._value

    def set_host_value(self, new: np.ndarray) -> None:
        """Store ``new`` on the host, for the CPU backend's variable updates."""
        self._value = new

    @property
    def shape(self) -> Shape:
        return tuple(self._value.shape)

    @property
    def dtype(self) -> str:
        return str(self._value.dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.dtype}{list(self.shape)})"

    # -- PyTorch's habits on a parameter ---------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self._value.shape)

    def numel(self) -> int:
        """The number of elements (PyTorch's ``p.numel()``)."""
        return math.prod(self._value.shape)

    __add__ = _with_tensor(operator.add, "+")
    __radd__ = _with_tensor(operator.add, "+", reflected=True)
    __sub__ = _with_tensor(operator.sub, "-")
    __rsub__ = _with_tensor(operator.sub, "-", reflected=True)
    __mul__ = _with_tensor(operator.mul, "*")
    __rmul__ = _with_tensor(operator.mul, "*", reflected=True)
    __truediv__ = _with_tensor(operator.truediv, "/")
    __rtruediv__ = _with_tensor(operator.truediv, "/", reflected=True)
    __matmul__ = _with_tensor(operator.matmul, "@")
    __rmatmul__ = _with_tensor(operator.matmul, "@", reflected=True)
    __pow__ = _with_tensor(operator.pow, "**")

    def __getitem__(self, index: object) -> NoReturn:
        raise ArgumentTypeError(f"{self!r}[...]: a Parameter is not a Tensor of a graph; {_BIND}")

    def __getattr__(self, name: str) -> NoReturn:
        # only for names the class lacks: PyTorch's p.grad and p.data, or a Tensor method
        if name in _HABITS:
            raise DefineByRunError(f"{self!r}.{name}: {_HABITS[name]}")
        if name in ("T", "t", "mT"):
            raise DefineByRunError(
                f"{self!r}.{name}: a Parameter is not a Tensor of a graph; {_BIND}. Mind the"
                " layout: asgrad's Linear.weight is (in_features, out_features), so PyTorch's"
                " x @ W.T is x @ W here (layer.weight_torch(x) is PyTorch's (out, in) layout)"
            )
        if name in TENSOR_NAMES:  # public names only
            raise DefineByRunError(
                f"{self!r}.{name}: a Parameter is not a Tensor of a graph; {_BIND}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class VariableStore:
    """Interface of a backend's store of variables' newest values (a GPU's memory).

    A variable whose newest value lives in a store is *held* by it
    ([`Variable.hold`][asgrad.tensor.Variable.hold]); reading ``variable.value`` fetches the value
    back.

    A backend's store implements these two methods:

    >>> from asgrad.tensor import VariableStore
    >>> [name for name in vars(VariableStore) if not name.startswith("_")]
    ['fetch', 'release']
    """

    def fetch(self, variable: Variable) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def release(self, variable: Variable) -> None:  # pragma: no cover - interface
        raise NotImplementedError
