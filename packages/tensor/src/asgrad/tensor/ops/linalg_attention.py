"""``scaled_dot_product_attention``: softmax(q k^T * scale + mask) v, as one op that
expands into ``matmul``, ``where``/``add`` and ``softmax`` (``OpDef.expand``).

The inputs are ``(q, k, v)`` or ``(q, k, v, mask)``: q (..., L, E), k (..., S, E),
v (..., S, Ev); a bool mask keeps the True positions (the others get -inf before the
softmax), a float mask is added; ``is_causal`` keeps position j <= i. A row with no
position kept is NaN, as in PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ArgumentError, DTypeError, ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, randn, require_float, same_dtype
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ops.shape_expand import refuse_free_axes

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if len(types) not in (3, 4):
        raise ShapeError("give q, k, v and optionally a mask")
    q, k, v = types[:3]
    require_float(q)
    same_dtype([q, k, v], "q, k and v")
    if min(len(q.shape), len(k.shape), len(v.shape)) < 2:
        raise ShapeError(f"q, k and v need at least 2 axes, got {q}, {k}, {v}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"q (..., L, E), k (..., S, E) and v (..., S, Ev) disagree: {q}, {k}, {v}")
    lead = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scores = (*lead, q.shape[-2], k.shape[-2])
    if len(types) == 4:
        mask = types[3]
        if attrs["is_causal"]:
            raise ArgumentError("give attn_mask or is_causal, not both (PyTorch's rule)")
        if mask.dtype != "bool" and mask.dtype != q.dtype:
            raise DTypeError(f"the mask must be bool or {q.dtype}, got {mask}")
        if broadcast_shapes(mask.shape, scores) != scores:
            raise ShapeError(f"the mask {mask} does not broadcast to the scores {list(scores)}")
    scale = attrs["scale"]
    if scale is not None and not math.isfinite(float(scale)):
        raise ArgumentError(f"scale must be finite, got {scale}")
    return TensorType((*lead, q.shape[-2], v.shape[-1]), q.dtype)


def _softmax(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return np.asarray(e / e.sum(axis=-1, keepdims=True))


def _causal(length: int, source: int) -> np.ndarray:
    return np.tril(np.ones((length, source), dtype=bool))


def _sdpa(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *mask: np.ndarray, **attrs: Any
) -> np.ndarray:
    scale = attrs["scale"]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    if attrs["is_causal"]:
        scores = np.where(_causal(q.shape[-2], k.shape[-2]), scores, -np.inf)
    if mask:
        scores = np.where(mask[0], scores, -np.inf) if mask[0].dtype == bool else scores + mask[0]
    return np.asarray(_softmax(scores) @ v, dtype=q.dtype)


def _expand(q: Tensor, k: Tensor, v: Tensor, *mask: Tensor, **attrs: Any) -> Tensor:
    g = q.graph
    scale = attrs["scale"]
    if scale is None:  # 1 / sqrt(E) of the declared E: built again for another size
        refuse_free_axes(q, (-1,))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = (q @ k.swapaxes(-1, -2)) * scale
    low = g.constant(-np.inf, q.dtype)
    if attrs["is_causal"]:  # a mask of the declared lengths, likewise
        refuse_free_axes(scores, (-2, -1))
        keep = g.constant(_causal(q.shape[-2], k.shape[-2]), "bool")
        scores = g.apply("where", (keep, scores, low), {})
    if mask:
        m = mask[0]
        scores = g.apply("where", (m, scores, low), {}) if m.dtype == "bool" else scores + m
    return scores.softmax(-1) @ v


def _cases(rng: np.random.Generator) -> list[OpCase]:
    q, k, v = randn(rng, 2, 3, 4, 5), randn(rng, 2, 3, 6, 5), randn(rng, 2, 3, 6, 2)
    keep = rng.random((4, 6)) > 0.3
    keep[:, 0] = True  # no fully masked row (its gradient is NaN)
    return [
        OpCase((q, k, v), {"is_causal": False, "scale": None}, label="plain"),
        OpCase((q[:, :, :4], k[:, :, :4], v[:, :, :4]), {"is_causal": True}, label="causal"),
        OpCase((q, k, v, keep), {"is_causal": False}, wrt=(0, 1, 2), label="bool mask"),
        OpCase(
            (q, k, v, randn(rng, 3, 1, 6)), {"is_causal": False, "scale": 0.3}, label="float mask"
        ),
        OpCase((randn(rng, 4, 3), randn(rng, 7, 3), randn(rng, 7, 2)), {}, label="2-D"),
    ]


register_op(
    OpDef(
        name="scaled_dot_product_attention",
        attrs=(
            Attr(
                name="is_causal",
                kind=bool,
                default=False,
                doc="mask the future (a lower-triangular mask)",
            ),
            Attr(
                name="scale",
                kind=float,
                default=None,
                optional=True,
                doc="None: 1 / sqrt(head size)",
            ),
        ),
        family="linalg",
        infer=_infer,
        kernel=accumulating(_sdpa),
        expand=_expand,
        arity=None,
        cases=_cases,
        tolerance=(2e-5, 2e-6),
        doc="softmax(q k^T * scale + mask) v, with a causal option",
    )
)
