"""PyTorch's ``dim``/``keepdim`` beside numpy's ``axis``/``keepdims``: one meaning, two names.

Every method and function that takes an axis accepts either spelling; giving both is an
[`ArgumentError`][asgrad.tensor.errors.ArgumentError], even when they agree.

>>> axis_arg("sum", None, 1)
1
>>> keepdims_arg("sum", None, True)
True
"""

from __future__ import annotations

from typing import TypeVar, overload

from asgrad.tensor.errors import ArgumentError

__all__ = ["axis_arg", "keepdims_arg"]

A = TypeVar("A")


@overload
def axis_arg(op: str, axis: A | None, dim: A | None, default: A) -> A: ...
@overload
def axis_arg(op: str, axis: A, dim: A, default: None = None) -> A: ...
def axis_arg(op: str, axis: object, dim: object, default: object = None) -> object:
    """``axis`` or ``dim``, whichever was given (``default`` when neither was)."""
    if axis is not None and dim is not None:
        raise ArgumentError(
            f"{op}: got axis={axis!r} and dim={dim!r}; give one of them"
            " (dim is PyTorch's name for numpy's axis, the same argument)"
        )
    if dim is not None:
        return dim
    if axis is None and default is not None:
        return default
    return axis


def keepdims_arg(op: str, keepdims: bool | None, keepdim: bool | None) -> bool:
    """``keepdims`` or ``keepdim``, whichever was given (False when neither was)."""
    if keepdims is not None and keepdim is not None:
        raise ArgumentError(
            f"{op}: got keepdims={keepdims!r} and keepdim={keepdim!r}; give one of them"
            " (keepdim is PyTorch's name for numpy's keepdims, the same argument)"
        )
    chosen = keepdim if keepdim is not None else keepdims
    return bool(chosen)
