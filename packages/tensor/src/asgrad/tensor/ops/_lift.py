"""Lifting a 1-D op to its 2-D op over a unit height (``conv1d`` as ``conv2d``).

Shared by ``conv_1d.py`` and ``pool_1d.py``: `OneD` gives the shape rule,
kernel and expansion of a 1-D op from those of the 2-D op it expands into.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, get_op, register_op

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

# How a 1-D attribute becomes the 2-D op's: a unit height, no padding on it.
_UNIT = {"stride": 1, "dilation": 1, "kernel_size": 1, "padding": 0, "output_padding": 0}


def lift_attrs(attrs: Attrs) -> dict[str, Any]:
    """The 2-D op's attributes for a 1-D op's."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if key in _UNIT and value is not None:
            out[key] = (_UNIT[key], int(value))
        elif key == "output_size":
            out[key] = (1, int(value))
        else:
            out[key] = value
    return out


class OneD:
    """The shape rule, kernel and expansion of a 1-D op over the 2-D op ``base``,
    lifting the inputs at ``lifted`` (each gains the unit axis 2)."""

    def __init__(self, base: str, lifted: tuple[int, ...]) -> None:
        self.base, self.lifted = base, lifted

    def infer(self, types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        for i in self.lifted:
            if i < len(types) and len(types[i].shape) != 3:
                what = "input" if i == 0 else "weight"
                raise ShapeError(f"the {what} must have rank 3 (N, C, L), got {types[i]}")
        lifted = [
            TensorType((*t.shape[:2], 1, *t.shape[2:]), t.dtype) if i in self.lifted else t
            for i, t in enumerate(types)
        ]
        base = get_op(self.base)
        out = base.infer(lifted, base.normalize_attrs(lift_attrs(attrs)))
        return TensorType((*out.shape[:2], *out.shape[3:]), out.dtype)

    def kernel(self, *arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        lifted = [np.expand_dims(a, 2) if i in self.lifted else a for i, a in enumerate(arrays)]
        base = get_op(self.base)
        out = base.kernel(*lifted, **base.normalize_attrs(lift_attrs(attrs)))
        return np.asarray(np.squeeze(out, axis=2))

    def expand(self, *inputs: Tensor, **attrs: Any) -> Tensor:
        lifted = [t.expand_dims(2) if i in self.lifted else t for i, t in enumerate(inputs)]
        return inputs[0].graph.apply(self.base, lifted, lift_attrs(attrs)).squeeze(2)


def register_1d(
    name: str,
    family: str,
    base: str,
    lifted: tuple[int, ...],
    cases: Callable[[np.random.Generator], list[OpCase]],
    doc: str,
    module: str,
    attrs: tuple[Attr, ...],
) -> None:
    """Register the 1-D op ``name`` over ``base``; its functions carry ``module`` (the
    family file that declares it, where the op table looks for its spec)."""
    one_d = OneD(base, lifted)

    def infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
        return one_d.infer(types, attrs)

    def kernel(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        return one_d.kernel(*arrays, **attrs)

    infer.__module__ = kernel.__module__ = module
    register_op(
        OpDef(
            name=name,
            family=family,
            infer=infer,
            kernel=kernel,
            expand=one_d.expand,
            arity=None,
            cases=cases,
            doc=doc,
            tolerance=get_op(base).tolerance,
            attrs=attrs,
        )
    )
