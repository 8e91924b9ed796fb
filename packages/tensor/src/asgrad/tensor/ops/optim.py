"""Optimizer ops: Adam's moment and parameter updates, each one composite kernel.

Each replaces a chain of arithmetic primitives with one kernel that reads its
inputs once and writes into fresh buffers (``out=``):

* ``adam_ema(m, g)``: Adam's moment update ``beta * m + (1 - beta) * g`` (``g * g``
  with ``square``), the same arithmetic, in the same order, as the graph-op form.
* ``adam_update(p, m, v, step_size, bc2_sqrt[, decay])``: Adam's parameter step
  ``p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps)``.

Each states its arithmetic as a scalar expression (`asgrad.tensor.ir.scalar`),
which the GPU renders and fuses like an elementwise op's; the numpy kernels below
compute the same arithmetic into fresh buffers. They are not differentiable (an update
is not differentiated).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn, require_float, same_dtype, uniform
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ir.scalar import Expr, sqrt


def _same_shape(types: Sequence[TensorType], names: Sequence[str]) -> None:
    for t, name in zip(types[1:], names[1:], strict=True):
        if t.shape != types[0].shape:
            raise ShapeError(f"{name} is {t}; it must have the shape of {names[0]} {types[0]}")


def _beta(value: float) -> str | None:
    return None if 0.0 <= value < 1.0 else "must be in [0, 1)"


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else "must be >= 0"


def _infer_adam_ema(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0], "moment")
    same_dtype(types, "moment and gradient")
    _same_shape(types, ("moment", "gradient"))
    return types[0]


def _adam_ema(m: np.ndarray, g: np.ndarray, *, beta: float, square: bool) -> np.ndarray:
    dt = m.dtype.type
    out: np.ndarray = np.multiply(m, dt(beta))
    if square:
        sq = np.multiply(g, g)
        sq *= dt(1.0 - beta)
    else:
        sq = np.multiply(g, dt(1.0 - beta))
    out += sq
    return out


def _adam_ema_expr(m: Expr, g: Expr, *, beta: float, square: bool) -> Expr:
    return m * beta + (g * g if square else g) * (1.0 - beta)


def _infer_adam_update(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if len(types) not in (5, 6):
        raise ShapeError(f"takes (p, m, v, step_size, bc2_sqrt[, decay]), got {len(types)} inputs")
    require_float(types[0], "parameter")
    same_dtype(types, "parameter, moments and step scalars")
    _same_shape(types[:3], ("parameter", "first moment", "second moment"))
    for t in types[3:]:
        if t.shape != ():
            raise ShapeError(f"step scalars must be 0-d, got {t}")
    return types[0]


def _adam_update(
    p: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    step_size: np.ndarray,
    bc2_sqrt: np.ndarray,
    decay: np.ndarray | None = None,
    *,
    eps: float,
) -> np.ndarray:
    if p.ndim == 0:  # numpy's ufuncs return scalars for 0-d arrays: update a 1-vector
        one = (p.reshape(1), m.reshape(1), v.reshape(1))
        return _adam_update(*one, step_size, bc2_sqrt, decay, eps=eps).reshape(())
    dt = p.dtype.type
    denom = np.sqrt(v)
    np.divide(denom, bc2_sqrt, out=denom)
    denom += dt(eps)
    step: np.ndarray = np.multiply(step_size, m)
    np.divide(step, denom, out=step)
    if decay is None:
        np.subtract(p, step, out=step)
        return step
    out: np.ndarray = np.multiply(p, decay)
    out -= step
    return out


def _adam_update_expr(
    p: Expr, m: Expr, v: Expr, step_size: Expr, bc2_sqrt: Expr, *decay: Expr, eps: float
) -> Expr:
    shrunk = p * decay[0] if decay else p
    return shrunk - step_size * m / (sqrt(v) / bc2_sqrt + eps)


def _adam_ema_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 4), randn(rng, 3, 4)), {"beta": 0.9}, grad=False, label="first"),
        OpCase(
            (uniform(rng, 0.0, 1.0, 5), randn(rng, 5)),
            {"beta": 0.999, "square": True},
            grad=False,
            label="second",
        ),
        OpCase((randn(rng), randn(rng)), {"beta": 0.5}, grad=False, label="scalar"),
    ]


def _adam_update_cases(rng: np.random.Generator) -> list[OpCase]:
    def scalar(lo: float, hi: float) -> np.ndarray:
        return np.asarray(rng.uniform(lo, hi))

    p, m, v = randn(rng, 3, 4), randn(rng, 3, 4) * 0.1, uniform(rng, 0.0, 0.1, 3, 4)
    return [
        OpCase((p, m, v, scalar(1e-3, 1e-2), scalar(0.1, 1.0)), {"eps": 1e-8}, grad=False),
        OpCase(
            (p, m, v, scalar(1e-3, 1e-2), scalar(0.1, 1.0), scalar(0.99, 1.0)),
            {"eps": 1e-6},
            grad=False,
            label="decay",
        ),
        OpCase(
            (randn(rng, 7), randn(rng, 7), np.zeros(7), scalar(0.1, 1.0), scalar(0.1, 1.0)),
            {"eps": 1e-3},
            grad=False,
            label="v = 0",
        ),
    ]


register_op(
    OpDef(
        name="adam_ema",
        attrs=(
            Attr(name="beta", kind=float, check=_beta, doc="the decay of the moment"),
            Attr(name="square", kind=bool, default=False, doc="average g * g (the second moment)"),
        ),
        family="optim",
        infer=_infer_adam_ema,
        kernel=_adam_ema,
        arity=2,
        differentiable=False,
        cases=_adam_ema_cases,
        composite=True,
        doc="Adam's moment: beta * m + (1 - beta) * g (g * g with square)",
        fresh_result=True,
        expression=_adam_ema_expr,
    )
)
register_op(
    OpDef(
        name="adam_update",
        attrs=(
            Attr(
                name="eps",
                kind=float,
                default=1e-8,
                check=_not_negative,
                doc="added to the denominator",
            ),
        ),
        family="optim",
        infer=_infer_adam_update,
        kernel=_adam_update,
        arity=None,
        differentiable=False,
        cases=_adam_update_cases,
        composite=True,
        doc="Adam's step: p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps)",
        fresh_result=True,
        expression=_adam_update_expr,
    )
)
