"""WGSL expressions of the elementwise math ops of issue 13, merged into the tables of
`asgrad.gpu.lowering.elementwise` (which keeps that file within the size limit).

Rounding keeps NaN and the infinities (WGSL leaves floor/round of them undefined).
Bools are u32 0/1, so the bitwise ops are logical on them. Integer division, remainder
and powers flag a zero divisor or a negative power in a check slot
(`asgrad.gpu.device.checks`), raised at the readback as on the CPU; int64 values (held
as int32) also flag a result that leaves the int32 range.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asgrad.gpu.device import get_device
from asgrad.gpu.lowering.common import literal

Attrs = Mapping[str, Any]
ExprFn = Callable[[Attrs, str], str]


def _keep(expr: str) -> str:
    """``expr`` of a finite x0; x0 itself for NaN and +-inf."""
    return f"select({expr}, x0, !asg_isfinite(x0))"


def _round(attrs: Attrs, t: str) -> str:
    decimals = int(attrs.get("decimals", 0))
    if not decimals:
        return _keep("round(x0)")
    # numpy's: rint(x * 10**d) / 10**d, or rint(x / 10**-d) * 10**-d
    scale = literal(10.0 ** abs(decimals))
    y = f"(x0 * {scale})" if decimals > 0 else f"(x0 / {scale})"
    rounded = f"select(round({y}), {y}, !asg_isfinite({y}))"
    return f"({rounded} / {scale})" if decimals > 0 else f"({rounded} * {scale})"


def _predicate(fn: str, for_ints: str) -> ExprFn:
    return lambda attrs, t: f"select(0u, 1u, {fn}(x0))" if t == "f32" else for_ints


UNARY: dict[str, ExprFn] = {
    "floor": lambda attrs, t: _keep("floor(x0)"),
    "ceil": lambda attrs, t: _keep("ceil(x0)"),
    "trunc": lambda attrs, t: _keep("trunc(x0)"),
    "round": _round,
    "isnan": _predicate("asg_isnan", "0u"),
    "isinf": _predicate("asg_isinf", "0u"),
    "isfinite": _predicate("asg_isfinite", "1u"),
    "bitwise_not": lambda attrs, t: "~x0" if t == "i32" else "(x0 ^ 1u)",
}

BINARY: dict[str, ExprFn] = {
    "bitwise_and": lambda attrs, t: "(x0 & x1)",
    "bitwise_or": lambda attrs, t: "(x0 | x1)",
    "bitwise_xor": lambda attrs, t: "(x0 ^ x1)",
    # numpy: the sign for a shift outside [0, bits); an int64 held as int32 shifted by
    # 31 or more is its sign too
    "right_shift": lambda attrs, t: (
        "select(select(0i, -1i, x0 < 0i), x0 >> u32(min(x1, 31i)), x1 >= 0i)"
    ),
}


def _slot(kind: str, op: str, detail: str) -> int:
    return get_device().checks.slot(kind, op, detail)


def checked_expression(op: str, out_dtype: str) -> str | None:
    """The expression of an integer op that checks its values, or None."""
    wide = out_dtype == "int64"
    if op == "left_shift":
        if not wide:  # numpy: 0 outside [0, 32); wraps within
            return "select(0i, x0 << u32(x1), x1 >= 0i && x1 < 32i)"
        return f"asg_chk_shl64(x0, x1, {_overflow('left_shift')}u)"
    if op not in ("floor_divide", "remainder", "pow"):
        return None
    if op == "pow":
        what = "a negative integer power has no integer result; cast to float first"
    else:
        what = "integer division by zero has no result; mask the divisor first"
    bad = _slot("arithmetic", op, what)
    ovf = _overflow(op) if wide else 0
    fn = {"floor_divide": "asg_chk_floordiv", "remainder": "asg_chk_mod", "pow": "asg_chk_ipow"}
    return f"{fn[op]}(x0, x1, {bad}u, {ovf}u, {str(wide).lower()})"


def _overflow(op: str) -> int:
    detail = (
        f"the exact int64 {op} result must fit the int32 range [-2**31, 2**31) that GPU "
        "buffers hold"
    )
    return _slot("overflow", op, detail)
