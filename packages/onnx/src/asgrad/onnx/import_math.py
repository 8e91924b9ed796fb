"""ONNX's rounding, test, logical, bitwise and integer ops, and the activations and
hyperbolic functions asgrad composes from its own ops.

``Div`` on integers truncates towards zero and ``Mod`` with ``fmod=1`` takes the
dividend's sign, as C does; both are built from asgrad's floor division and
remainder (Python's), so they are exact on every integer. ``Mod`` on floats is
refused: composed from a division it would be off by the divisor where the quotient
rounds to an integer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor, floor_divide, remainder, where

__all__ = ["MATH_IMPORTERS"]


def _method(
    fn: Callable[[Tensor, dict[str, object]], Tensor],
) -> Importer:
    """An importer of one input, ``fn(tensor, attributes)``."""

    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        return [fn(ctx.tensor(xs[0]), attributes(node))]

    return imp


def _pair(
    fn: Callable[[Tensor, Tensor], Tensor], numpy: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> Importer:
    """A binary importer; ``numpy`` on values known at load time."""

    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a, b = xs[0], xs[1]
        if isinstance(a, Static) and isinstance(b, Static):
            return [Static(np.asarray(numpy(a.value, b.value)))]
        return [fn(ctx.tensor(a), ctx.tensor(b))]

    return imp


def _same_sign(a: Tensor, b: Tensor) -> Tensor:
    zero = a.graph.constant(0, dtype=a.dtype)
    return (a < zero) == (b < zero)


def _trunc_div(a: Tensor, b: Tensor) -> Tensor:
    """Integer division towards zero (C's), from floor division."""
    q = floor_divide(a, b)
    r = remainder(a, b)
    zero = a.graph.constant(0, dtype=a.dtype)
    inexact = (r != zero).logical_and(_same_sign(a, b).logical_not())
    return where(inexact, q + a.graph.constant(1, dtype=a.dtype), q)


def _np_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        q = np.floor_divide(a, b)
        return np.asarray(np.where((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)), q + 1, q))
    return np.asarray(a / b)


def _div(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a, b = xs
    if isinstance(a, Static) and isinstance(b, Static):
        mask = np.logical_or(a.mask(), b.mask())
        return [Static(_np_trunc_div(a.value, b.value).astype(a.value.dtype), mask)]
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if ta.dtype in ("int32", "int64"):
        return [_trunc_div(ta, tb)]
    return [ta / tb]


def _mod(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``fmod=0``: the divisor's sign (Python's ``%``); ``fmod=1``: the dividend's."""
    fmod = bool(attributes(node).get("fmod", 0))
    a, b = xs
    if isinstance(a, Static) and isinstance(b, Static):
        fn = np.fmod if fmod else np.remainder
        return [Static(np.asarray(fn(a.value, b.value)))]
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if ta.dtype in ("float32", "float64"):
        # a - trunc(a / b) b is off by b where a / b rounds to an integer: no exact fmod
        raise OnnxImportError(
            "Mod on floats needs an exact fmod, which asgrad does not have; Mod on integers"
            " is supported"
        )
    r = remainder(ta, tb)
    if not fmod:
        return [r]
    zero = ta.graph.constant(0, dtype=ta.dtype)
    moved = (r != zero).logical_and(_same_sign(ta, tb).logical_not())
    return [where(moved, r - tb, r)]


def _bit_shift(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a, b = ctx.tensor(xs[0]), ctx.tensor(xs[1])
    direction = attributes(node)["direction"]
    return [a << b if direction == "LEFT" else a >> b]


def _cast_like(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    like = xs[1]
    dtype = like.value.dtype.name if isinstance(like, Static) else like.dtype
    if dtype not in ONNX_TO_DTYPE.values():
        raise OnnxImportError(f"CastLike to {dtype}, which asgrad does not have")
    x = xs[0]
    if isinstance(x, Static):
        return [Static(x.value.astype(dtype), x.dynamic, x.origins)]
    return [x.cast(dtype) if x.dtype != dtype else x]


def _is_inf(x: Tensor, a: dict[str, object]) -> Tensor:
    negative, positive = bool(a.get("detect_negative", 1)), bool(a.get("detect_positive", 1))
    inf = x.isinf()
    zero = x.graph.constant(0, dtype=x.dtype)
    if negative and not positive:
        return inf.logical_and(x < zero)
    if positive and not negative:
        return inf.logical_and(x > zero)
    if not (positive or negative):
        return inf.logical_and(inf.logical_not())
    return inf


def _shrink(x: Tensor, a: dict[str, object]) -> Tensor:
    lambd, bias = float(a.get("lambd", 0.5)), float(a.get("bias", 0.0))  # type: ignore[arg-type]  # a float attribute
    zero = x.graph.constant(0, dtype=x.dtype)
    return where(x > lambd, x - bias, where(x < -lambd, x + bias, zero))


def _swish(x: Tensor, a: dict[str, object]) -> Tensor:
    alpha = float(a.get("alpha", 1.0))  # type: ignore[arg-type]  # a float attribute
    return x * (x * alpha).sigmoid()


def _swiglu(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """``Swish_alpha(A) * B``."""
    alpha = float(attributes(node).get("alpha", 1.0))
    gate, value = ctx.tensor(xs[0]), ctx.tensor(xs[1])
    return [gate * (gate * alpha).sigmoid() * value]


def _thresholded_relu(x: Tensor, a: dict[str, object]) -> Tensor:
    return x.threshold(float(a.get("alpha", 1.0)), 0.0)  # type: ignore[arg-type]  # a float attribute


def _celu(x: Tensor, a: dict[str, object]) -> Tensor:
    return x.celu(float(a.get("alpha", 1.0)))  # type: ignore[arg-type]  # a float attribute


def _exp_pair(x: Tensor) -> tuple[Tensor, Tensor]:
    return x.exp(), (-x).exp()


_SMALL = 0.01  # below: a Taylor series, where exp(x) - exp(-x) would cancel
_LARGE = 1e4  # above: log(2 |x|), where x * x would overflow


def _sinh(x: Tensor, a: dict[str, object]) -> Tensor:
    p, n = _exp_pair(x)
    cube = x * x * x
    series = x + cube * (1.0 / 6.0) + cube * x * x * (1.0 / 120.0)
    return where(x.abs() < _SMALL, series, (p - n) * 0.5)


def _cosh(x: Tensor, a: dict[str, object]) -> Tensor:
    p, n = _exp_pair(x)
    return (p + n) * 0.5


def _log_2x(m: Tensor) -> Tensor:
    """``log(2 m)`` (m > 0), without forming ``2 m``."""
    return m.log() + float(np.log(2.0))


def _asinh(x: Tensor, a: dict[str, object]) -> Tensor:
    """``sign(x) log(|x| + sqrt(x^2 + 1))``: no cancellation for negative ``x``."""
    m = x.abs()
    large = m > _LARGE
    safe = where(large, x * 0.0, m)
    body = where(
        large, _log_2x(where(large, m, x * 0.0 + 1.0)), (safe + (safe * safe + 1.0).sqrt()).log()
    )
    cube = x * x * x
    series = x - cube * (1.0 / 6.0) + cube * x * x * (3.0 / 40.0)
    return where(m < _SMALL, series, x.sign() * body)


def _acosh(x: Tensor, a: dict[str, object]) -> Tensor:
    large = x > _LARGE
    safe = where(large, x * 0.0 + 1.0, x)
    big = where(large, x, x * 0.0 + 1.0)
    return where(large, _log_2x(big), (safe + (safe * safe - 1.0).sqrt()).log())


def _atanh(x: Tensor, a: dict[str, object]) -> Tensor:
    cube = x * x * x
    series = x + cube * (1.0 / 3.0) + cube * x * x * 0.2
    return where(x.abs() < _SMALL, series, ((x + 1.0) / (1.0 - x)).log() * 0.5)


MATH_IMPORTERS: dict[str, Importer] = {
    "Ceil": _method(lambda x, a: x.ceil()),
    "Floor": _method(lambda x, a: x.floor()),
    "Round": _method(lambda x, a: x.round()),
    "IsNaN": _method(lambda x, a: x.isnan()),
    "IsInf": _method(_is_inf),
    "Softsign": _method(lambda x, a: x.softsign()),
    "Celu": _method(_celu),
    "Shrink": _method(_shrink),
    "Swish": _method(_swish),
    "SwiGLU": _swiglu,
    "ThresholdedRelu": _method(_thresholded_relu),
    "Tan": _method(lambda x, a: x.sin() / x.cos()),
    "Sinh": _method(_sinh),
    "Cosh": _method(_cosh),
    "Asinh": _method(_asinh),
    "Acosh": _method(_acosh),
    "Atanh": _method(_atanh),
    "Not": _method(lambda x, a: x.logical_not()),
    "And": _pair(lambda a, b: a.logical_and(b), np.logical_and),
    "Or": _pair(lambda a, b: a.logical_or(b), np.logical_or),
    "Xor": _pair(lambda a, b: a.logical_xor(b), np.logical_xor),
    "BitwiseNot": _method(lambda x, a: ~x),
    "BitwiseAnd": _pair(lambda a, b: a & b, np.bitwise_and),
    "BitwiseOr": _pair(lambda a, b: a | b, np.bitwise_or),
    "BitwiseXor": _pair(lambda a, b: a ^ b, np.bitwise_xor),
    "BitShift": _bit_shift,
    "Div": _div,
    "Mod": _mod,
    "CastLike": _cast_like,
}
"""The importers of this module, by ONNX op type."""
