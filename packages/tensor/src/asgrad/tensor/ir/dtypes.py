"""The dtypes a graph value can have, and their numpy equivalents."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, cast, get_args

import numpy as np

from asgrad.tensor.errors import DTypeError

DType = Literal["float16", "float32", "float64", "int32", "int64", "bool"]
"""The names of the element types a tensor may have.

>>> from asgrad.tensor import DType, Graph
>>> from typing import get_args
>>> Graph().input("x", (2,)).dtype in get_args(DType)
True
"""

DTYPES: tuple[str, ...] = get_args(DType)
FLOAT_DTYPES: frozenset[str] = frozenset({"float16", "float32", "float64"})
INT_DTYPES: frozenset[str] = frozenset({"int32", "int64"})


def as_dtype(value: object) -> DType:
    """Normalise a dtype given as a string, numpy dtype or numpy type.

    >>> as_dtype(np.float32)
    'float32'
    """
    try:
        name = np.dtype(value).name  # type: ignore[call-overload]  # any dtype-like
    except TypeError as exc:
        raise DTypeError(f"unknown dtype {value!r}; use one of {', '.join(DTYPES)}") from exc
    if name not in DTYPES:
        raise DTypeError(f"dtype {name!r} is not supported; use one of {', '.join(DTYPES)}")
    return cast(DType, name)  # checked against DTYPES above


def accumulation_dtype(dtype: str) -> str:
    """The dtype a sum, product or matrix product of ``dtype`` values accumulates in:
    float32 for float16 (PyTorch's and JAX's meaning of half precision: the result is
    rounded to float16 once, not after every addition), else ``dtype`` itself.

    >>> accumulation_dtype("float16"), accumulation_dtype("float64")
    ('float32', 'float64')
    """
    return "float32" if dtype == "float16" else dtype


def accumulating(kernel: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``kernel`` (a numpy kernel of floats) accumulating float16 inputs in float32:
    float16 arrays are widened before it runs and its float32 result rounded back to
    float16 once; a kernel of no float16 input runs unchanged. The reference meaning
    of reductions, matrix products and row programs on float16.

    >>> total = accumulating(lambda x: np.sum(x, axis=0))
    >>> x = np.ones((4096, 2), np.float16)
    >>> np.sum(x, axis=0).tolist(), total(x).tolist()  # float16 steps stop at 2048
    ([2048.0, 2048.0], [4096.0, 4096.0])
    """

    @functools.wraps(kernel)
    def run(*args: Any, **kwargs: Any) -> np.ndarray:
        if not any(isinstance(a, np.ndarray) and a.dtype == np.float16 for a in args):
            return kernel(*args, **kwargs)
        wide = [
            a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float16 else a
            for a in args
        ]
        out = np.asarray(kernel(*wide, **kwargs))
        return out.astype(np.float16) if out.dtype == np.float32 else out

    return run


def is_float(dtype: str) -> bool:
    """Whether values of ``dtype`` are floating point (and so differentiable)."""
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    """Whether values of ``dtype`` are integers."""
    return dtype in INT_DTYPES
