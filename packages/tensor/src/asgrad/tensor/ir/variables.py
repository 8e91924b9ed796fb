"""Graph variables: named values that persist across runs, and the stores that hold
them on a device. Re-exported by `asgrad.tensor.ir.graph`."""

from __future__ import annotations

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.dtypes import as_dtype
from asgrad.tensor.ir.registry import Shape

__all__ = ["Variable", "VariableStore"]


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
        return f"Variable({self.name!r}, {self.dtype}{list(self.shape)})"


class VariableStore:
    """Interface of a backend's store of variables' newest values (a GPU's memory).

    A variable whose newest value lives in a store is *held* by it
    ([`Variable.hold`][asgrad.tensor.Variable.hold]); reading ``variable.value`` fetches the value
    back.
    """

    def fetch(self, variable: Variable) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def release(self, variable: Variable) -> None:  # pragma: no cover - interface
        raise NotImplementedError
