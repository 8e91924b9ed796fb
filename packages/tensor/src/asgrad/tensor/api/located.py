"""Errors that name the user's source line, for checks made outside
[`Graph.apply`][asgrad.tensor.Graph.apply].

A front door (a [`Tensor`][asgrad.tensor.Tensor] method) checks some arguments before it
applies its op, such as the axes of a reduction; wrapped in `checked`, such a
check's error reads as the shape errors of [`apply`][asgrad.tensor.Graph.apply] do: the
op, the problem, and ``(at file:line)`` of the user's code.

>>> from asgrad.tensor.ir.common import normalize_axis
>>> checked("sum", normalize_axis, -1, 2)
1
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgrad.tensor.errors import AsgradError
from asgrad.tensor.ir.graph import user_location

__all__ = ["checked", "locate"]

T = TypeVar("T")


def locate(op: str, exc: AsgradError) -> AsgradError:
    """``exc``, raised while building ``op``, as an error of the same class whose message
    names the op and the user's source line (raise it ``from None``)."""
    return type(exc)(f"{op}: {exc}\n  (at {user_location()})")


def checked(op: str, check: Callable[..., T], *args: Any) -> T:
    """``check(*args)``; an asgrad error it raises names ``op`` and the user's line."""
    try:
        return check(*args)
    except AsgradError as exc:
        raise locate(op, exc) from None
