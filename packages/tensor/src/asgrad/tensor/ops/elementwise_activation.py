"""Activations that expand into other elementwise ops when applied.

Each op here is exactly a short composition of registered ops (``mish`` is
``x * tanh(softplus(x))``), so it has no kernels of its own: its gradient and its GPU
kernels are those of its expansion (see ``OpDef.expand``). Its scalar expression
(`asgrad.tensor.ir.scalar`) states the same composition per element; its numpy
kernel is that expression rendered (``glu`` and ``prelu``, which pair elements along
an axis, keep numpy functions). Independent references are in the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ArgumentError, ShapeError
from asgrad.tensor.ir import scalar as s
from asgrad.tensor.ir.common import away_from, normalize_axis, randn, require_float, same_dtype
from asgrad.tensor.ir.registry import Attr, Attrs, CasesFn, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ir.scalar import Expr
from asgrad.tensor.ops._elementwise_cases import normal, unary_cases
from asgrad.tensor.ops.elementwise import _elu_expr, _softplus_expr
from asgrad.tensor.ops.elementwise_kernels import (
    _finite_nonzero,
    primitive_kernel,
    rendered_kernel,
)
from asgrad.tensor.ops.shape_expand import refuse_free_axes

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

# SELU's constants (Klambauer et al. 2017), as PyTorch writes them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=x.dtype)


def _infer_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return types[0]


def _infer_bounds(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    lo, hi = float(attrs["min_val"]), float(attrs["max_val"])
    if not lo <= hi:
        raise ArgumentError(f"min_val {lo} is greater than max_val {hi}")
    return _infer_float(types, attrs)


def _infer_glu(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    if not x.shape:
        raise ShapeError("glu needs at least one axis to halve")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    if x.shape[axis] % 2:
        raise ShapeError(f"glu halves axis {axis}, whose size {x.shape[axis]} is odd")
    shape = list(x.shape)
    shape[axis] //= 2
    return TensorType(tuple(shape), x.dtype)


def _infer_prelu(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = types
    require_float(x)
    same_dtype(types, "input and weight")
    channels = x.shape[1] if len(x.shape) >= 2 else 1
    if len(w.shape) != 1 or w.shape[0] not in (1, channels):
        raise ShapeError(
            f"prelu's weight must have shape (1,) or ({channels},) (the channels of axis 1),"
            f" got {list(w.shape)}"
        )
    return x


def _glu(x: np.ndarray, axis: int) -> np.ndarray:
    a, b = np.split(x, 2, axis=axis)
    return np.asarray(a * _sigmoid(b))


def _channel_weight(w: np.ndarray, ndim: int) -> np.ndarray:
    return w.reshape((-1,) + (1,) * (ndim - 2)) if ndim >= 2 else w


def _prelu(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, _channel_weight(w, x.ndim) * x)


# -- expansions ------------------------------------------------------------------------------
def _where(cond: Tensor, a: Tensor, b: object) -> Tensor:
    return cond.graph.apply("where", (cond, a, a._lift(b)), {})


def _expand_glu(x: Tensor, axis: int) -> Tensor:
    axis = normalize_axis(axis, x.ndim)
    refuse_free_axes(x, (axis,), "splits it in halves of its declared size")
    half = x.shape[axis] // 2
    head = tuple(slice(None) for _ in range(axis))
    a, b = x[(*head, slice(0, half))], x[(*head, slice(half, None))]
    return a * b.sigmoid()


def _expand_prelu(x: Tensor, w: Tensor) -> Tensor:
    if x.ndim >= 2 and w.shape[0] > 1:
        w = w.reshape((w.shape[0],) + (1,) * (x.ndim - 2))
    return x.relu() + w * x.minimum(0.0)


# -- cases -----------------------------------------------------------------------------------
def _away(points: Sequence[float], scale: float = 1.0) -> CasesFn:
    def make(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        out: np.ndarray = away_from(rng, [p / scale for p in points], *shape) * scale
        return out

    return unary_cases(make)


def _glu_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 4),), {"axis": -1}, label="last axis"),
        OpCase((randn(rng, 4, 2, 3),), {"axis": 0}, label="axis 0"),
        OpCase((randn(rng, 2, 6, 5),), {"axis": 1}, label="axis 1"),
    ]


def _prelu_cases(rng: np.random.Generator) -> list[OpCase]:
    def x(*shape: int) -> np.ndarray:
        return away_from(rng, [0.0], *shape)

    return [
        OpCase((x(2, 3, 4, 4), rng.uniform(0.05, 0.5, 3)), label="per channel"),
        OpCase((x(3, 5), rng.uniform(0.05, 0.5, 1)), label="one weight"),
        OpCase(
            (
                x(
                    6,
                ),
                rng.uniform(0.05, 0.5, 1),
            ),
            label="rank 1",
        ),
        OpCase((x(2, 4, 7), rng.uniform(0.05, 0.5, 4)), label="sequence"),
    ]


# -- registration ----------------------------------------------------------------------------
def _activation(
    name: str,
    expression: Callable[..., Expr] | None,
    expand: Callable[..., Tensor],
    doc: str,
    cases: CasesFn,
    kernel: Callable[..., np.ndarray] | None = None,
    **fields: Any,
) -> None:
    """Register an activation; its kernel is its ``expression`` rendered unless given."""
    fields = {"arity": 1, "infer": _infer_float, "attrs": (), **fields}
    if kernel is None:
        assert expression is not None
        simple = not fields["attrs"] and primitive_kernel(expression, fields["arity"])
        kernel = simple or rendered_kernel(name)
    register_op(
        OpDef(
            name=name,
            family="elementwise",
            kernel=kernel,
            expand=expand,
            expression=expression,
            doc=doc,
            cases=cases,
            **fields,
        )
    )


def _nonnegative(value: float) -> str | None:
    return None if value >= 0 else "must be >= 0"


_LAMBD = Attr(name="lambd", kind=float, default=0.5, check=_nonnegative, doc="the dead zone")
_T = (2e-5, 2e-6)
_activation(
    "mish",
    lambda x: x * s.tanh(_softplus_expr(x, 1.0)),
    lambda x: x * x.softplus().tanh(),
    "x * tanh(softplus(x))",
    unary_cases(normal, large=40.0),
    tolerance=_T,
)
_activation(
    "hardswish",
    lambda x: x * s.clip(x + 3.0, 0.0, 6.0) / 6.0,
    lambda x: x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
    "x * relu6(x + 3) / 6",
    _away([-3.0, 3.0], 3.0),
)
_activation(
    "hardsigmoid",
    lambda x: s.clip(x / 6.0 + 0.5, 0.0, 1.0),
    lambda x: (x / 6.0 + 0.5).clamp(0.0, 1.0),
    "relu6(x + 3) / 6",
    _away([-3.0, 3.0], 3.0),
)
_activation(
    "relu6",
    lambda x: s.clip(x, 0.0, 6.0),
    lambda x: x.clamp(0.0, 6.0),
    "min(max(x, 0), 6)",
    _away([0.0, 6.0], 4.0),
)
_activation(
    "hardtanh",
    lambda x, min_val, max_val: s.clip(x, min_val, max_val),
    lambda x, min_val, max_val: x.clamp(min_val, max_val),
    "x clamped to [min_val, max_val]",
    unary_cases(
        lambda rng, s: away_from(rng, [-1.0, 0.5], *s),
        [{"min_val": -1.0, "max_val": 1.0}, {"min_val": -1.0, "max_val": 0.5}],
    ),
    infer=_infer_bounds,
    attrs=(
        Attr(name="min_val", kind=float, doc="lower bound"),
        Attr(name="max_val", kind=float, doc="upper bound"),
    ),
)
_activation(
    "selu",
    lambda x: SELU_SCALE * _elu_expr(x, SELU_ALPHA),
    lambda x: x.elu(SELU_ALPHA) * SELU_SCALE,
    "scale * elu(x, alpha) with SELU's constants",
    _away([0.0]),
    tolerance=_T,
)
_activation(
    "celu",
    lambda x, alpha: s.maximum(x, 0.0) + s.minimum(alpha * s.expm1(x / alpha), 0.0),
    lambda x, alpha: (x / alpha).elu(1.0) * alpha,
    "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))",
    unary_cases(lambda rng, s: away_from(rng, [0.0], *s), [{"alpha": 1.0}, {"alpha": 0.5}]),
    tolerance=_T,
    attrs=(Attr(name="alpha", kind=float, default=1.0, check=_finite_nonzero, doc="scale"),),
)
_activation(
    "softsign",
    lambda x: x / (1.0 + abs(x)),
    lambda x: x / (x.abs() + 1.0),
    "x / (1 + |x|)",
    _away([0.0]),
)
_activation(
    "logsigmoid",
    lambda x: -_softplus_expr(-x, 1.0),
    lambda x: -((-x).softplus()),
    "log(sigmoid(x)), stable for large |x|",
    unary_cases(normal, large=60.0),
    tolerance=_T,
)
_activation(
    "tanhshrink",
    lambda x: x - s.tanh(x),
    lambda x: x - x.tanh(),
    "x - tanh(x)",
    unary_cases(normal),
    tolerance=_T,
)
_activation(
    "softshrink",
    lambda x, lambd: x - s.clip(x, -lambd, lambd),
    lambda x, lambd: x - x.clamp(-lambd, lambd),
    "x - lambd if x > lambd, x + lambd if x < -lambd, else 0",
    unary_cases(lambda rng, s: away_from(rng, [-0.5, 0.5], *s), [{"lambd": 0.5}]),
    attrs=(_LAMBD,),
)
_activation(
    "hardshrink",
    lambda x, lambd: s.where(s.gt(abs(x), lambd), x, 0.0),
    lambda x, lambd: _where(x.abs() > lambd, x, 0.0),
    "x if |x| > lambd, else 0",
    unary_cases(lambda rng, s: away_from(rng, [-0.5, 0.5], *s), [{"lambd": 0.5}]),
    attrs=(_LAMBD,),
)
_activation(
    "threshold",
    lambda x, threshold, value: s.where(s.gt(x, threshold), x, value),
    lambda x, threshold, value: _where(x > threshold, x, value),
    "x if x > threshold, else value",
    unary_cases(lambda rng, s: away_from(rng, [0.1], *s), [{"threshold": 0.1, "value": -2.0}]),
    attrs=(
        Attr(name="threshold", kind=float, doc="the value x must exceed"),
        Attr(name="value", kind=float, doc="what x becomes at or below it"),
    ),
)
_activation(
    "glu",
    None,  # pairs the two halves of an axis: not one element's function
    _expand_glu,
    "a * sigmoid(b), a and b the halves of x along axis",
    _glu_cases,
    kernel=_glu,
    infer=_infer_glu,
    attrs=(Attr(name="axis", kind=int, default=-1, doc="the axis halved"),),
)
_activation(
    "prelu",
    None,  # its weight broadcasts along axis 1, not numpy's trailing axes
    _expand_prelu,
    "x if x >= 0 else weight * x, one learned weight per channel (axis 1) or one in all",
    _prelu_cases,
    kernel=_prelu,
    arity=2,
    infer=_infer_prelu,
)

__all__ = ["SELU_ALPHA", "SELU_SCALE"]
