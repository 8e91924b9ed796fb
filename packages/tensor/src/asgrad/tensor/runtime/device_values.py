"""Values a launched run leaves on its device until someone reads them.

[`Program.launch`][asgrad.tensor.Program.launch] starts a run and
returns at once, one [`DeviceValue`][asgrad.tensor.DeviceValue] per output, as JAX's jitted
functions return device arrays: the next step can be launched while the GPU still works on this one.
Reading a value (``float(v)``, ``v.item()``, ``np.asarray(v)``, ``v.numpy()``,
printing it) waits for the run that made it and copies it to the host, once; the
values of one launch arrive together. A backend that runs synchronously (the CPU)
hands back values that are ready already.

An error that the device records while the run executes (an index out of range that
a GPU kernel met) is raised by the first read of a value of that run or of a later
one, as a synchronous run raises it on return.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["DeviceValue", "Readback", "read_all"]


class Readback(Protocol):
    """The outputs of one launched run, as a backend delivers them."""

    def result(self) -> Sequence[np.ndarray]:
        """Every output of the run on the host, waiting for the device if needed.

        Called again, returns the same arrays (or raises the same error).
        """
        ...

    def ready(self) -> bool:
        """Whether `result` would return without waiting for the device."""
        ...


class DeviceValue(NDArrayOperatorsMixin):
    """One output of a launched run: its shape and dtype now, its value when read.

    Arithmetic and comparisons (``loss * n``, ``loss < 0.1``) and numpy functions
    read the value and give numpy results; pickling stores the value read.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, compile
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> step = compile([(x * x).sum()])
    >>> (loss,) = step.launch(x=np.arange(3, dtype=np.float32))
    >>> loss.shape, loss.dtype
    ((), dtype('float32'))
    >>> float(loss), loss.item()
    (5.0, 5.0)
    """

    __slots__ = ("_index", "_source", "_value", "dtype", "shape")

    def __init__(
        self,
        source: Readback | None,
        index: int,
        shape: tuple[int, ...],
        dtype: Any,
        value: np.ndarray | None = None,
    ) -> None:
        self._source = source
        self._index = index
        self._value = value
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @classmethod
    def ready_value(cls, value: np.ndarray) -> DeviceValue:
        """A value that is on the host already (a synchronous backend's output)."""
        return cls(None, 0, value.shape, value.dtype, value)

    # -- reading -------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The value as a numpy array (waits for its run the first time; then cached).

        The array is the value's own: reading again returns the same array.
        """
        if self._value is None:
            assert self._source is not None  # a value is either held or has a source
            self._value = self._source.result()[self._index]
            self._source = None
        return self._value

    def item(self) -> Any:
        """The single element as a Python scalar, as ``numpy.ndarray.item``."""
        return self.numpy().item()

    def block_until_ready(self) -> DeviceValue:
        """Wait until the value is on the host; returns the value itself (as in JAX)."""
        self.numpy()
        return self

    def is_ready(self) -> bool:
        """Whether reading would not wait for the device."""
        return self._value is not None or (self._source is not None and self._source.ready())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        value = self.numpy()
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(v.numpy() if isinstance(v, DeviceValue) else v for v in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(
                v.numpy() if isinstance(v, DeviceValue) else v for v in kwargs["out"]
            )
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        return (DeviceValue.ready_value, (self.numpy(),))

    def __float__(self) -> float:
        return float(self.numpy())

    def __int__(self) -> int:
        return int(self.numpy())

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def __getitem__(self, key: Any) -> Any:
        return self.numpy()[key]

    def __format__(self, spec: str) -> str:
        return format(self.numpy(), spec)

    # -- describing ----------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceValue")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceValue({self.numpy()!r})"


def read_all(values: Iterable[DeviceValue]) -> list[np.ndarray]:
    """Read several values (each launch's values arrive with one readback).

    >>> from asgrad.tensor import Graph, compile, read_all
    >>> x = Graph().input("x", (2,))
    >>> program = compile([x + 1.0, x * 2.0])
    >>> [a.tolist() for a in read_all(program.launch({"x": [1.0, 2.0]}))]
    [[2.0, 3.0], [2.0, 4.0]]
    """
    return [v.numpy() for v in values]
