"""The dtypes a graph value can have, and their numpy equivalents."""

from __future__ import annotations

from typing import Literal, cast, get_args

import numpy as np

from asgrad.tensor.errors import DTypeError

DType = Literal["float32", "float64", "int32", "int64", "bool"]
"""The names of the element types a tensor may have.

>>> from asgrad.tensor import DType, Graph
>>> from typing import get_args
>>> Graph().input("x", (2,)).dtype in get_args(DType)
True
"""

DTYPES: tuple[str, ...] = get_args(DType)
FLOAT_DTYPES: frozenset[str] = frozenset({"float32", "float64"})
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


def is_float(dtype: str) -> bool:
    """Whether values of ``dtype`` are floating point (and so differentiable)."""
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    """Whether values of ``dtype`` are integers."""
    return dtype in INT_DTYPES
