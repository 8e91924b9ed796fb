"""Casting a module's variables to another dtype (``Module.to``, ``load_state_dict``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad.nn.errors import StateMismatchError
from asgrad.tensor import Variable
from asgrad.tensor.errors import ArgumentError

__all__ = ["cast_variables", "lossless_cast"]


def cast_variables(
    variables: Mapping[str, Variable], dtype: str | np.dtype[Any] | type, *, exact: bool
) -> None:
    """Cast every floating-point variable to ``dtype`` in place (see ``Module.to``); every
    cast is checked before any is applied."""
    if isinstance(dtype, str) and dtype in ("cpu", "cuda", "gpu", "mps"):
        raise ArgumentError(
            f"Module.to({dtype!r}): asgrad places a program on a device when it is"
            " compiled (optimizer.compile(loss, backend='gpu'), compile(..., backend="
            "'gpu')); Module.to takes a dtype ('float64', 'float32')"
        )
    target = str(np.dtype(dtype))
    if np.dtype(target).kind != "f":
        raise ArgumentError(f"Module.to: give a floating-point dtype, got {target}")
    casts = {}
    for name, v in variables.items():
        if np.dtype(v.dtype).kind == "f" and v.dtype != target:
            value = v.value
            if not exact:
                casts[name] = value.astype(target)
                continue
            try:
                casts[name] = lossless_cast(name, value, target)
            except StateMismatchError:
                raise ArgumentError(
                    f"Module.to({target!r}): {name} holds {v.dtype} values that"
                    f" {target} cannot hold exactly; pass exact=False to round them"
                    f" (model.to({target!r}, exact=False)), as PyTorch's .to does"
                ) from None
    for name, value in casts.items():  # every cast checked before any is applied
        variables[name].set_host_value(value)


def lossless_cast(name: str, value: object, dtype: str) -> np.ndarray:
    """``value`` as a fresh ``dtype`` array; a cast that changes a value is refused."""
    array = np.asarray(value)
    if array.dtype == np.dtype(dtype):
        return np.array(array, copy=True)
    with np.errstate(all="ignore"):
        cast = array.astype(dtype)
        same = array.dtype.kind in "biuf" and np.array_equal(
            cast.astype(array.dtype), array, equal_nan=array.dtype.kind == "f"
        )
    if not same:
        raise StateMismatchError(
            f"{name}: the model holds {dtype}, the state {array.dtype}, and casting would"
            f" change values; convert the state first (value.astype({dtype!r})) if rounding"
            " is what you want"
        )
    return cast
