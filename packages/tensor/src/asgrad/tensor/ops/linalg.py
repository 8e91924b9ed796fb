"""Batched matrix multiplication with broadcast batch dimensions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, randn, same_dtype
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attrs, OpCase, OpDef, TensorType, register_op


def _infer_matmul(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = types
    dtype = same_dtype(types)
    if dtype == "bool":
        raise DTypeError("matmul of bool values; cast them to a number first")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ShapeError(f"matmul operands need rank >= 2, got {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"inner dimensions differ: {list(a.shape)} @ {list(b.shape)}"
            f" ({a.shape[-1]} != {b.shape[-2]}); transpose or reshape an operand"
        )
    try:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"batch dimensions {list(a.shape[:-2])} and {list(b.shape[:-2])} of"
            f" {list(a.shape)} @ {list(b.shape)} do not broadcast"
        ) from None
    return TensorType((*batch, a.shape[-2], b.shape[-1]), dtype)


@accumulating
def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.matmul(a, b)
    return out


def _matmul_cases(rng: np.random.Generator) -> list[OpCase]:
    pairs = [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (3, 4, 2)),
        ((1, 7), (7, 1)),
        ((17, 33), (33, 9)),
    ]
    return [
        OpCase((randn(rng, *a), randn(rng, *b)), label=f"{list(a)}@{list(b)}") for a, b in pairs
    ]


register_op(
    OpDef(
        name="matmul",
        attrs=(),
        family="linalg",
        infer=_infer_matmul,
        kernel=_matmul,
        arity=2,
        tolerance=(1e-4, 1e-5),
        cases=_matmul_cases,
        doc="batched matrix product, batch dims broadcast",
    )
)
