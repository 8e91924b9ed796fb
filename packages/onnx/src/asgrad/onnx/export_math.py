"""How rounding, value tests, logical, bitwise and integer ops are written in ONNX.

ONNX has no ``Trunc``, and its ``Div`` on integers truncates: asgrad's floor
division is ``(a - Mod(a, b)) / b`` (``Mod`` with ``fmod=0`` takes the divisor's
sign, as Python's ``%``), exact on every integer. Bitwise ops on integers need opset
18 (``BitwiseAnd``...); on bools they are ``And``, ``Or``, ``Xor`` and ``Not``.
"""

from __future__ import annotations

import numpy as np

from asgrad.onnx.builder import DTYPE_TO_ONNX, OnnxBuilder
from asgrad.onnx.errors import OnnxExportError
from asgrad.onnx.export_ops import Exporter
from asgrad.tensor import Node

__all__ = ["MATH_EXPORTERS"]


def _trunc_of(b: OnnxBuilder, x: str) -> str:
    return b.op("Mul", [b.op("Sign", [x]), b.op("Floor", [b.op("Abs", [x])])])


def _trunc(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return _trunc_of(b, xs[0])


def _frac(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Sub", [xs[0], _trunc_of(b, xs[0])])


def _round(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """Half to even, as numpy's; ``decimals`` scales by a power of ten around it."""
    decimals = int(node.attrs.get("decimals", 0))
    if not decimals:
        return b.op("Round", xs)
    scale = b.scalar(10.0**decimals, node)
    return b.op("Div", [b.op("Round", [b.op("Mul", [xs[0], scale])]), scale])


def _float_test(op_type: str) -> Exporter:
    """``IsNaN``/``IsInf``; on integers (never NaN or infinite) all false."""

    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        if node.inputs[0].dtype not in ("float32", "float64"):
            return b.op("Not", [b.op("Equal", [xs[0], xs[0]])])
        return b.op(op_type, xs)

    return export


def _isfinite(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    if node.inputs[0].dtype not in ("float32", "float64"):
        return b.op("Equal", [xs[0], xs[0]])
    return b.op("Not", [b.op("Or", [b.op("IsNaN", xs), b.op("IsInf", xs)])])


def _as_bool(b: OnnxBuilder, node: Node, xs: list[str]) -> list[str]:
    return [
        x if i.dtype == "bool" else b.op("Cast", [x], to=DTYPE_TO_ONNX["bool"])
        for x, i in zip(xs, node.inputs, strict=True)
    ]


def _logical(op_type: str) -> Exporter:
    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        return b.op(op_type, _as_bool(b, node, xs))

    return export


def _bitwise(bool_op: str, int_op: str) -> Exporter:
    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        if node.dtype == "bool":
            return b.op(bool_op, xs)
        if b.opset < 18:
            raise OnnxExportError(
                f"{node.op} on integers is ONNX's {int_op}, from opset 18; export with"
                " opset=18 or newer"
            )
        return b.op(int_op, xs)

    return export


def _floor_divide(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """Floor division of integers (asgrad's takes integers only), exact."""
    a, d = xs
    return b.op("Div", [b.op("Sub", [a, b.op("Mod", [a, d], fmod=0)]), d])


def _remainder(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Mod", xs, fmod=0)


def _nan_to_num(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    info = np.finfo(node.dtype)
    a = node.attrs
    nan = float(a.get("nan", 0.0))
    posinf = float(a["posinf"]) if a.get("posinf") is not None else float(info.max)
    neginf = float(a["neginf"]) if a.get("neginf") is not None else float(info.min)
    x = xs[0]
    positive = b.op("Greater", [x, b.scalar(0.0, node)])
    inf = b.op("IsInf", [x])
    y = b.op("Where", [b.op("IsNaN", [x]), b.scalar(nan, node), x])
    y = b.op("Where", [b.op("And", [inf, positive]), b.scalar(posinf, node), y])
    return b.op("Where", [b.op("And", [inf, b.op("Not", [positive])]), b.scalar(neginf, node), y])


MATH_EXPORTERS: dict[str, Exporter] = {
    "floor": lambda b, node, xs: b.op("Floor", xs),
    "ceil": lambda b, node, xs: b.op("Ceil", xs),
    "round": _round,
    "trunc": _trunc,
    "frac": _frac,
    "isnan": _float_test("IsNaN"),
    "isinf": _float_test("IsInf"),
    "isfinite": _isfinite,
    "nan_to_num": _nan_to_num,
    "logical_and": _logical("And"),
    "logical_or": _logical("Or"),
    "logical_xor": _logical("Xor"),
    "logical_not": _logical("Not"),
    "bitwise_and": _bitwise("And", "BitwiseAnd"),
    "bitwise_or": _bitwise("Or", "BitwiseOr"),
    "bitwise_xor": _bitwise("Xor", "BitwiseXor"),
    "bitwise_not": _bitwise("Not", "BitwiseNot"),
    "floor_divide": _floor_divide,
    "remainder": _remainder,
}
"""The exporters of this module, by asgrad op."""
